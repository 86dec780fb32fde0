//! One manifest's turn in a pass: it is applied (in its own span) and its
//! `ManifestStatus` built from what the apply reported or, when it failed,
//! from a look-up of its object.

use ferry_proto::v1;
use serde_json::Value;
use tracing::{Instrument as _, info_span};

use super::apply_one::ManifestInput;
use super::decide::{manifest_meta, refused_before_creating};
use super::failure::ManifestFailure;
use super::lookup::Lookup;
use super::pass_record::PassRecord;
use super::{Reconciler, Report, WorkPass};
use crate::conditions::{
    Observed, availability_unknown, condition, not_available, observe_health, refused_never_created,
};
use crate::garbage_collection::Claim;
use crate::sealing::Sealed;
use crate::sealing::report::{conceal, sealed_condition};
use ferry_semantics::availability::REASON_INCOMPLETE_META;
use ferry_semantics::contract::APPLIED;
use ferry_semantics::sealing::redact_object;
use ferry_semantics::{ManifestError, ManifestIdentity};

/// What one manifest's turn leaves for the pass.
pub(super) struct ManifestPassed {
    /// Its status for the hub.
    pub(super) status: v1::ManifestStatus,
    /// The object it names, when it was not applied: the work keeps its
    /// claim on it (garbage collection leaves it alone).
    pub(super) claim: Option<Claim>,
    /// It failed in a way that may pass on a later try.
    pub(super) retry: bool,
}

impl Reconciler {
    /// Applies manifest `index` of the work (or reports why it cannot be:
    /// it did not parse, the pass has no record) and builds its status.
    pub(super) async fn pass_manifest(
        &self,
        work: &WorkPass<'_>,
        index: usize,
        parsed: &Result<(Value, ManifestIdentity), ManifestError>,
        sealed: Option<&Sealed>,
        record: &mut Result<PassRecord, String>,
    ) -> ManifestPassed {
        let mut drift = None;
        let identified = parsed.as_ref().ok().map(|(_, identity)| identity);
        let mut meta = manifest_meta(index, identified);
        let result = match (parsed, sealed) {
            (Err(e), _) => Err(ManifestFailure::from(e.clone())),
            // Not opened: the Secret it names keeps whatever the spoke has
            // (the work still claims it), and nothing else is held back.
            (Ok(_), Some(Sealed::Refused(e))) => Err(ManifestFailure::Sealed(e.clone())),
            (Ok((value, identity)), _) => match record {
                Ok(record) => {
                    let input = ManifestInput {
                        value,
                        identity,
                        configs: &work.spec.manifest_configs,
                        executor: work.spec.executor.as_ref(),
                        policy: work.policy,
                    };
                    self.apply_traced(index, &input, &mut meta, record, &mut drift)
                        .await
                }
                Err(problem) => Err(ManifestFailure::Record(problem.clone())),
            },
        };
        let claim = match (&result, identified) {
            (Err(_), Some(identity)) => Some(Claim {
                group: identity.group.clone(),
                kind: identity.kind.clone(),
                namespace: identity.namespace.clone(),
                name: identity.name.clone(),
            }),
            _ => None,
        };
        let mut retry = false;
        let concealed = sealed.is_some();
        let (mut conditions, feedback) = match result {
            Ok(report) => self.applied_status(work, &meta, report, concealed).await,
            Err(failure) => {
                retry = failure.is_transient();
                let created_before = identified
                    .and_then(|identity| record.as_ref().ok().map(|r| r.created_before(identity)));
                self.failed_status(work, &meta, failure, identified, created_before, concealed)
                    .await
            }
        };
        if let Some(sealed) = sealed {
            conditions.push(sealed_condition(sealed, work.generation));
        }
        let mut status = v1::ManifestStatus {
            resource_meta: Some(meta),
            conditions,
            feedback,
            drift,
        };
        // Only an opened entry holds values to scrub; a refused one's live
        // Secret was read redacted above.
        if let (Some(Sealed::Opened), Ok((secret, _))) = (sealed, parsed) {
            conceal(&mut status, secret);
        }
        ManifestPassed {
            status,
            claim,
            retry,
        }
    }

    /// [`Reconciler::apply_one`] in one span per manifest: the spoke calls
    /// it makes are its children, and it records the outcome.
    async fn apply_traced(
        &self,
        index: usize,
        input: &ManifestInput<'_>,
        meta: &mut v1::ResourceMeta,
        record: &mut PassRecord,
        drift: &mut Option<v1::ManifestDrift>,
    ) -> Result<Report, ManifestFailure> {
        let identity = input.identity;
        let span = ferry_telemetry::span(|| {
            info_span!(
                "apply_manifest",
                ordinal = index,
                kind = %identity.kind,
                name = %identity.name,
                namespace = identity.namespace.as_deref().unwrap_or_default(),
                outcome = tracing::field::Empty,
            )
        });
        let result = self
            .apply_one(input, meta, record, drift)
            .instrument(span.clone())
            .await;
        if !span.is_disabled() {
            span.record(
                "outcome",
                match &result {
                    Ok(report) => report.reason,
                    Err(_) => "failed",
                },
            );
        }
        result
    }

    /// The conditions and feedback of an applied manifest: Applied, then
    /// what its object shows, or not available when it was deleted on the
    /// spoke and left so (whenDeleted: Leave).
    async fn applied_status(
        &self,
        work: &WorkPass<'_>,
        meta: &v1::ResourceMeta,
        report: Report,
        concealed: bool,
    ) -> (Vec<v1::Condition>, Vec<v1::FeedbackValue>) {
        let mut conditions = vec![condition(
            APPLIED,
            true,
            report.reason,
            report.message,
            work.generation,
        )];
        let feedback = match &report.observed {
            Some(observed) => {
                self.observed_status(work, meta, observed, concealed, &mut conditions)
                    .await
            }
            None => {
                conditions.push(not_available(work.generation));
                Vec::new()
            }
        };
        (conditions, feedback)
    }

    /// The conditions and feedback of a manifest that was not applied:
    /// Applied false with the failure, then its object's availability as
    /// a look-up finds it, unless the refused write was of an object the
    /// work never created (see [`refused_before_creating`]).
    async fn failed_status(
        &self,
        work: &WorkPass<'_>,
        meta: &v1::ResourceMeta,
        failure: ManifestFailure,
        identified: Option<&ManifestIdentity>,
        created_before: Option<bool>,
        concealed: bool,
    ) -> (Vec<v1::Condition>, Vec<v1::FeedbackValue>) {
        let generation = work.generation;
        let mut conditions = vec![condition(
            APPLIED,
            false,
            failure.reason(),
            failure.to_string(),
            generation,
        )];
        let configs = &work.spec.manifest_configs;
        if refused_before_creating(configs, meta, &failure, created_before) {
            conditions.push(refused_never_created(
                failure.reason(),
                &failure.to_string(),
                generation,
            ));
            return (conditions, Vec::new());
        }
        let lookup = match identified {
            Some(identity) => {
                self.look_up(identity, configs, work.spec.executor.as_ref())
                    .await
            }
            None => Lookup::Unknown(
                REASON_INCOMPLETE_META,
                "the manifest does not name a resource".to_string(),
            ),
        };
        let feedback = match lookup {
            Lookup::Found(observed) => {
                self.observed_status(work, meta, &observed, concealed, &mut conditions)
                    .await
            }
            Lookup::Absent => {
                conditions.push(not_available(generation));
                Vec::new()
            }
            Lookup::Unknown(reason, message) => {
                conditions.push(availability_unknown(reason, message, generation));
                Vec::new()
            }
        };
        (conditions, feedback)
    }

    /// Adds what an existing object shows to `conditions` (health, feedback
    /// synced, the condition rules') and returns its feedback values.
    /// `concealed` (a sealed Secret): rules see the object without its
    /// data ([`redact_object`]).
    async fn observed_status(
        &self,
        work: &WorkPass<'_>,
        meta: &v1::ResourceMeta,
        observed: &Observed,
        concealed: bool,
        conditions: &mut Vec<v1::Condition>,
    ) -> Vec<v1::FeedbackValue> {
        let redacted;
        let observed = if concealed {
            redacted = Observed {
                object: redact_object(&observed.object),
                rules: observed.rules.clone(),
                condition_rules: observed.condition_rules.clone(),
            };
            &redacted
        } else {
            observed
        };
        let (more, values) = self
            .observe(work.owner, meta, observed, work.generation)
            .await;
        conditions.extend(more);
        self.add_rule_conditions(work.owner, meta, observed, work.generation, conditions)
            .await;
        values
    }

    /// The conditions and feedback values of a manifest (of a work of
    /// `owner`) whose object exists: `Available` and its health here, its
    /// feedback rules (tenant JSONPath) on the bounded rule pool, never on
    /// the async runtime.
    async fn observe(
        &self,
        owner: &str,
        meta: &v1::ResourceMeta,
        observed: &Observed,
        generation: i64,
    ) -> (Vec<v1::Condition>, Vec<v1::FeedbackValue>) {
        let mut conditions = observe_health(meta, &observed.object, generation);
        let (synced, values) = self
            .rules
            .feedback(
                owner,
                meta,
                &observed.object,
                &observed.rules,
                generation,
                self.max_json_raw_length,
            )
            .await;
        conditions.push(synced);
        (conditions, values)
    }
}
