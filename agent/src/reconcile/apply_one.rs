//! Applies one manifest of a work: where it goes and how it is written
//! (settled before anything is written), the claim and write-loop guard,
//! the intent recorded before a create, the write itself, and what the
//! write leaves for the manifest's status.

use std::time::Instant;

use ferry_proto::v1;
use kube::Client;
use kube::api::{Api, DynamicObject};
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;
use serde_json::Value;
use tracing::warn;

use super::decide::{IntentPlan, intent_plan, strategy_manager, with_notes, write_loop};
use super::failure::ManifestFailure;
use super::lookup::Target;
use super::pass_record::PassRecord;
use super::{Reconciler, Report, unix_now};
use crate::applied_works::AppliedResource;
use crate::applier::{ApplyError, ApplyOutcome, ManifestWrite, apply_manifest};
use crate::conditions::Observed;
use crate::discovery::ResolveError;
use crate::drift::ManagedObject;
use crate::executor::Target as ExecutorTarget;
use crate::list_schema::KindListSchema;
use crate::metrics::{apply_failure, apply_outcome, wrote};
use crate::ownership::ObjectKey;
use crate::write_breaker::other_writers;
use crate::write_identity::ExecutorAccount;
use ferry_semantics::ManifestIdentity;
use ferry_semantics::apply_outcome::{Applied, Writes, applied_report};
use ferry_semantics::config_match::{condition_rules_for, feedback_rules_for, options_for};
use ferry_semantics::drift_report::manifest_drift;
use ferry_semantics::ownership::Verdict;
use ferry_semantics::release::{DeletePolicy, Disposition, has_managed_label};
use ferry_semantics::strategy::{Strategy, WhenDeleted, strategy_of};

/// One manifest of a work, with the parts of the work its apply needs.
pub(super) struct ManifestInput<'a> {
    /// The hub manifest.
    pub(super) value: &'a Value,
    /// Which object it names.
    pub(super) identity: &'a ManifestIdentity,
    /// The work's manifest configs.
    pub(super) configs: &'a [v1::ManifestConfig],
    /// The work's executor, if any.
    pub(super) executor: Option<&'a v1::Executor>,
    /// What deleting the work does to its objects.
    pub(super) policy: &'a DeletePolicy,
}

/// Where one manifest goes and how it is written, as settled before
/// anything is written.
struct Placement {
    gvk: GroupVersionKind,
    resource: ApiResource,
    /// The handle every request about the object goes through: the
    /// executor's when writing as executors.
    api: Api<DynamicObject>,
    namespace: String,
    /// The object's slot in the record (an intent: no UID).
    slot: AppliedResource,
    writer: Client,
    strategy: Strategy,
    when_deleted: WhenDeleted,
    /// The work deletes the object with itself, so it carries the work's mark.
    deletes: bool,
    /// Where the object is in the pass's list of watched objects.
    managed_at: usize,
    key: ObjectKey,
}

impl Reconciler {
    /// Applies one manifest and says what its status reports; fills in the
    /// resource and namespace of `meta` once resolved, and `drift` with
    /// what the write found (or, on a field conflict, what holds the
    /// field). Fails with the reason the manifest is not applied.
    pub(super) async fn apply_one(
        &self,
        input: &ManifestInput<'_>,
        meta: &mut v1::ResourceMeta,
        record: &mut PassRecord,
        drift: &mut Option<v1::ManifestDrift>,
    ) -> Result<Report, ManifestFailure> {
        let placement = self.place(input, meta, record).await?;
        self.guard_write(input, &placement, record).await?;
        self.record_intent(input.identity, &placement, record)
            .await?;
        let schema = self.schemas.for_kind(&placement.gvk).await;
        let applied = self.write_counted(input, &placement, &schema, record).await;
        let outcome = self
            .settle_failure(applied, input, &placement, &schema, drift)
            .await?;
        // Found in the object as read before this pass wrote it; a write
        // under a correcting strategy put the hub's values back.
        *drift = manifest_drift(
            &placement.strategy,
            input.value,
            outcome.before.as_ref(),
            outcome.applied == Applied::Updated,
            schema.as_ref(),
            unix_now(),
        );
        self.keep(outcome, input, placement, record).await
    }

    /// Resolves where the manifest goes and how it is written, starts
    /// watching it, and checks the executor may write it: before anything
    /// is recorded or written, so a manifest the executor may not apply
    /// leaves no trace on the cluster.
    async fn place(
        &self,
        input: &ManifestInput<'_>,
        meta: &mut v1::ResourceMeta,
        record: &mut PassRecord,
    ) -> Result<Placement, ManifestFailure> {
        let identity = input.identity;
        let gvk = GroupVersionKind::gvk(&identity.group, &identity.version, &identity.kind);
        let Target {
            resource,
            api,
            namespace,
            slot,
        } = self.target(identity).await?;
        meta.resource = resource.plural.clone();
        meta.namespace = namespace.clone();
        let managed_at = record.managed.len();
        record.managed.push(ManagedObject::new(
            &self.client,
            &resource,
            &namespace,
            &identity.name,
        ));
        let config = options_for(
            input.configs,
            &identity.group,
            &resource.plural,
            &namespace,
            &identity.name,
        );
        let (strategy, when_deleted) = strategy_of(config.as_ref())?;
        let deletes = input.policy.disposition(
            &identity.group,
            &resource.plural,
            &namespace,
            &identity.name,
        ) == Disposition::Delete;
        self.executor
            .check(
                input.executor,
                ExecutorTarget {
                    group: &identity.group,
                    version: &identity.version,
                    resource: &resource.plural,
                    namespace: &namespace,
                    name: &identity.name,
                    manifest: input.value,
                },
                deletes,
            )
            .await?;
        // Writing as the executor, every request about the object (its
        // read before the write too) is the executor's, judged by the API
        // server; the agent's own client only reads for status.
        let writer = self
            .writers
            .client_for(ExecutorAccount::of(input.executor).as_ref())
            .await?;
        let api = if self.writers.is_executor() {
            if namespace.is_empty() {
                Api::all_with(writer.clone(), &resource)
            } else {
                Api::namespaced_with(writer.clone(), &namespace, &resource)
            }
        } else {
            api
        };
        let key = ObjectKey::new(&identity.group, &identity.kind, &namespace, &identity.name);
        Ok(Placement {
            gvk,
            resource,
            api,
            namespace,
            slot,
            writer,
            strategy,
            when_deleted,
            deletes,
            managed_at,
            key,
        })
    }

    /// Claims an object the strategy writes for the work, and refuses the
    /// write when an older work owns fields it sets differently or the
    /// object has been rewritten too often (its hold, with one read to
    /// name the other writer).
    async fn guard_write(
        &self,
        input: &ManifestInput<'_>,
        placement: &Placement,
        record: &mut PassRecord,
    ) -> Result<(), ManifestFailure> {
        if placement.strategy.writes() == Writes::Never {
            return Ok(());
        }
        record.claimed.push(placement.key.clone());
        if let Verdict::Yield { owner, fields } = self
            .owners
            .claim(&record.rank, placement.key.clone(), input.value)
            .await
        {
            return Err(ManifestFailure::ConflictsWithWork {
                what: placement.slot.describe(),
                owner,
                fields,
            });
        }
        if let Some(hold) = self
            .breaker
            .held(
                &placement.key,
                &record.rank.uid,
                record.generation,
                Instant::now(),
            )
            .await
        {
            let live = placement
                .api
                .get_opt(&input.identity.name)
                .await
                .ok()
                .flatten()
                .and_then(|o| serde_json::to_value(o).ok())
                .unwrap_or(Value::Null);
            return Err(
                write_loop(placement.slot.describe(), &live, &placement.strategy, hold).into(),
            );
        }
        Ok(())
    }

    /// Records the object in the work's record before a write that may
    /// create it (see [`intent_plan`]).
    async fn record_intent(
        &self,
        identity: &ManifestIdentity,
        placement: &Placement,
        record: &mut PassRecord,
    ) -> Result<(), ManifestFailure> {
        let creates = match intent_plan(record.holds(&placement.slot), placement.strategy.writes())
        {
            IntentPlan::Skip => false,
            IntentPlan::IfAbsent => placement
                .api
                .get_opt(&identity.name)
                .await
                .map(|live| live.is_none())
                .unwrap_or(true),
            IntentPlan::Record => true,
        };
        if creates {
            self.write_intents(record, vec![placement.slot.clone()])
                .await
                .map_err(|e| ManifestFailure::Record(e.to_string()))?;
        }
        Ok(())
    }

    /// Writes the manifest per its strategy and counts the write: its
    /// metric, its kind among the pass's writes, and the write breaker's
    /// count (warning when that opens a hold).
    async fn write_counted(
        &self,
        input: &ManifestInput<'_>,
        placement: &Placement,
        schema: &KindListSchema,
        record: &mut PassRecord,
    ) -> Result<ApplyOutcome, ApplyError> {
        let identity = input.identity;
        let known_uid = record.previous_uid(
            &identity.group,
            &placement.resource.plural,
            &placement.namespace,
            &identity.name,
        );
        let write = ManifestWrite {
            client: &placement.writer,
            api: &placement.api,
            identity,
            desired: input.value,
            strategy: &placement.strategy,
            when_deleted: placement.when_deleted,
            known_uid,
            schema,
            owner: &record.owner,
            marked: placement.deletes,
            likely_absent: record.fresh && known_uid.is_none(),
        };
        // Only kinds the spoke serves get here: the label stays bounded.
        let kind = format!("{}/{}", identity.api_version(), identity.kind);
        let started = Instant::now();
        let applied = apply_manifest(&write).await;
        // Watched through the kind's label-selected watch only once the
        // object is seen with ferry's label; until then, by name.
        if let Ok(outcome) = &applied
            && let Some(managed) = record.managed.get_mut(placement.managed_at)
        {
            managed.set_labelled(outcome.object.as_ref().is_some_and(has_managed_label));
        }
        let label = match &applied {
            Ok(outcome) => apply_outcome(&outcome.applied),
            Err(error) => apply_failure(error),
        };
        self.metrics.observe_apply(&kind, label, started);
        if let Ok(outcome) = &applied
            && wrote(&outcome.applied)
        {
            record.written.push(kind);
            // Counted now, held on the next pass: this write already happened.
            if let Some(hold) = self
                .breaker
                .wrote(
                    &placement.key,
                    &record.rank.uid,
                    record.generation,
                    outcome
                        .before
                        .as_ref()
                        .and_then(|b| other_writers(b, strategy_manager(&placement.strategy))),
                    Instant::now(),
                )
                .await
            {
                warn!(object = %identity.describe(), ?hold, "object rewritten too often; holding further writes");
            }
        }
        applied
    }

    /// Turns a failed write into the manifest's failure: a kind no longer
    /// served forgets its cached discovery, and a field conflict reads the
    /// object once so the drift report shows who holds the field.
    async fn settle_failure(
        &self,
        applied: Result<ApplyOutcome, ApplyError>,
        input: &ManifestInput<'_>,
        placement: &Placement,
        schema: &KindListSchema,
        drift: &mut Option<v1::ManifestDrift>,
    ) -> Result<ApplyOutcome, ManifestFailure> {
        let identity = input.identity;
        match applied {
            Err(ApplyError::KindNotServed { .. }) => {
                // Cached discovery is stale; look the kind up again next time.
                self.resolver.forget(&placement.gvk).await;
                self.schemas.forget(&placement.gvk).await;
                Err(ResolveError::UnknownKind {
                    api_version: identity.api_version(),
                    kind: identity.kind.clone(),
                }
                .into())
            }
            Err(conflict @ ApplyError::Conflict(_)) => {
                // Another manager holds a field this apply sets: the report
                // shows which, with its value and that manager. One read,
                // only on a conflict (retried with backoff anyway).
                if let Ok(Some(live)) = placement.api.get_opt(&identity.name).await
                    && let Ok(live) = serde_json::to_value(live)
                {
                    *drift = manifest_drift(
                        &placement.strategy,
                        input.value,
                        Some(&live),
                        false,
                        schema,
                        unix_now(),
                    );
                }
                Err(conflict.into())
            }
            other => Ok(other?),
        }
    }

    /// Keeps what the write left: the record of an object deleted and left
    /// so, the work's hold on a written object (its mark, its UID in the
    /// record), the version the drift watch is to ignore, and the report.
    async fn keep(
        &self,
        mut outcome: ApplyOutcome,
        input: &ManifestInput<'_>,
        placement: Placement,
        record: &mut PassRecord,
    ) -> Result<Report, ManifestFailure> {
        if outcome.applied == Applied::LeftDeleted {
            // The record of the deleted object is what keeps it deleted on
            // the next pass and after a restart.
            if let Some(previous) = record
                .previous
                .iter()
                .find(|r| r.same_object(&placement.slot))
            {
                record.recorded.push(previous.clone());
            }
        }
        if let Some(object) = outcome.object.take() {
            let object = self
                .hold(
                    object,
                    &outcome.applied,
                    &placement.api,
                    placement.slot,
                    record,
                    placement.deletes,
                )
                .await?;
            outcome.object = Some(object);
        }
        // The version this pass leaves the object at: the drift watch's
        // echo of it (this pass's own write) wakes nobody.
        if let Some(managed) = record.managed.get_mut(placement.managed_at) {
            managed.set_seen(
                outcome
                    .object
                    .as_ref()
                    .and_then(|o| o["metadata"]["resourceVersion"].as_str()),
            );
        }
        let identity = input.identity;
        let rules = feedback_rules_for(
            input.configs,
            &identity.group,
            &placement.resource.plural,
            &placement.namespace,
            &identity.name,
        );
        let condition_rules = condition_rules_for(
            input.configs,
            &identity.group,
            &placement.resource.plural,
            &placement.namespace,
            &identity.name,
        );
        let observed = outcome.object.clone().map(|object| Observed {
            object,
            rules: rules.to_vec(),
            condition_rules: condition_rules.to_vec(),
        });
        let report = applied_report(&placement.strategy, outcome.applied)?;
        Ok(Report {
            reason: report.reason,
            message: with_notes(report.message, &outcome.notes),
            observed,
        })
    }
}
