//! What the work's record holds before and after a write: the intents
//! recorded before objects are created, and the objects marked as held.

use ferry_proto::v1;
use serde_json::Value;
use tracing::warn;

use super::Reconciler;
use super::failure::ManifestFailure;
use super::pass_record::PassRecord;
use crate::applied_works::AppliedResource;
use crate::release::{adopt, drop_ocm_marks, unmark};
use ferry_semantics::ManifestIdentity;
use ferry_semantics::apply_outcome::{Applied, Hold, Writes};
use ferry_semantics::config_match::options_for;
use ferry_semantics::release::is_owned_by;
use ferry_semantics::strategy::strategy_of;

impl Reconciler {
    /// The intent to hold every object of the work that the pass will
    /// write whatever the spoke holds (Update, ServerSideApply), each once.
    /// Kinds not served yet, and CreateOnly objects, are left out: they are
    /// recorded one by one just before their write.
    pub(super) async fn planned_intents(
        &self,
        identities: &[Option<&ManifestIdentity>],
        configs: &[v1::ManifestConfig],
    ) -> Vec<AppliedResource> {
        let mut intents: Vec<AppliedResource> = Vec::new();
        for identity in identities.iter().flatten() {
            let Ok(target) = self.target(identity).await else {
                continue;
            };
            let slot = target.slot;
            let config = options_for(
                configs,
                &slot.group,
                &slot.resource,
                &slot.namespace,
                &slot.name,
            );
            let writes =
                strategy_of(config.as_ref()).is_ok_and(|(s, _)| s.writes() == Writes::Always);
            if writes && !intents.iter().any(|i| i.same_object(&slot)) {
                intents.push(slot);
            }
        }
        intents
    }

    /// Records, in one write, the `intents` the record lacks, before any
    /// object is created: an agent killed mid-pass leaves a record that
    /// names every object it may have created. A record just created with
    /// them lacks none, and nothing is sent. A failed write here is only
    /// logged: each manifest then tries on its own.
    pub(super) async fn record_intents(
        &self,
        intents: &[AppliedResource],
        record: &mut PassRecord,
    ) {
        let lacking: Vec<AppliedResource> = intents
            .iter()
            .filter(|slot| !record.holds(slot))
            .cloned()
            .collect();
        if let Err(error) = self.write_intents(record, lacking).await {
            warn!(%error, "could not record the objects this work is about to create");
        }
    }

    /// Adds `intents` to the record on the spoke (nothing is sent when there
    /// are none).
    pub(super) async fn write_intents(
        &self,
        record: &mut PassRecord,
        intents: Vec<AppliedResource>,
    ) -> Result<(), crate::applied_works::AppliedWorksError> {
        if intents.is_empty() {
            return Ok(());
        }
        let mut stored = record.stored.clone();
        stored.extend(intents);
        self.applied
            .set_resources(&record.owner.name, &stored)
            .await?;
        record.stored = stored;
        Ok(())
    }

    /// Marks an object the pass wrote as held by this work and records it.
    /// Objects ferry only observes (ReadOnly) or found already present under
    /// CreateOnly are not taken over: deleting the work must not delete them.
    pub(super) async fn hold(
        &self,
        object: Value,
        applied: &Applied,
        api: &kube::Api<kube::api::DynamicObject>,
        slot: AppliedResource,
        record: &mut PassRecord,
        marked: bool,
    ) -> Result<Value, ManifestFailure> {
        let object = match applied.hold() {
            Hold::Written if marked => adopt(api, object, &record.owner, &slot.describe()).await?,
            // Orphaned objects stay recorded (the record, not the mark, is
            // what the work releases on deletion) but unmarked.
            Hold::Written => unmark(api, object, &record.owner, &slot.describe()).await?,
            Hold::KeptIfAlreadyOwned if is_owned_by(&object, &record.owner) => object,
            Hold::KeptIfAlreadyOwned | Hold::NotHeld => return Ok(object),
        };
        let object = if self.adopt_ocm_objects {
            drop_ocm_marks(api, object, &slot.describe()).await?
        } else {
            object
        };
        if let Some(uid) = object["metadata"]["uid"].as_str() {
            record.recorded.push(AppliedResource {
                uid: uid.to_string(),
                ..slot
            });
        }
        Ok(object)
    }
}
