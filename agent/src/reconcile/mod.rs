//! Applies every manifest of one work in order and describes the result as a
//! `WorkStatus` for the hub.
//!
//! - `pass_record.rs`: one pass's view of the work's record on the spoke.
//! - `manifest_status.rs`: one manifest's turn: applied in its span, and
//!   its status built from the report or, on failure, a look-up.
//! - `apply_one.rs`: applying one manifest (placement, claim, intent,
//!   write, what the write leaves).
//! - `decide.rs`: the pure decisions of a pass, from values already read.
//! - `failure.rs`: why one manifest is not applied, and what that means.
//! - `lookup.rs`: where a manifest goes, what a look-up after a failed
//!   apply finds, and its condition rules.
//! - `intents.rs`: the record's intents before creating, and objects held.

mod apply_one;
mod decide;
mod failure;
mod intents;
mod lookup;
mod manifest_status;
mod pass_record;

use std::collections::HashMap;
use std::sync::Arc;

use self::decide::work_conditions;
use self::pass_record::PassRecord;

use ferry_proto::v1;
use kube::Client;
use serde_json::Value;
use tracing::debug;

use crate::applied_works::{AppliedResource, AppliedWorks};
use crate::conditions::Observed;
use crate::discovery::KindResolver;
use crate::drift::ManagedObject;
use crate::executor::ExecutorCheck;
use crate::garbage_collection::{Claim, PassObjects, collect_garbage};
use crate::list_schema::ListSchemas;
use crate::metrics::AgentMetrics;
use crate::ownership::OwnerIndex;
use crate::rule_pool::RuleEvaluator;
use crate::sealing::{Keyring, open_sealed};
use crate::write_breaker::WriteBreaker;
use crate::write_identity::{ExecutorAccount, WriteIdentity};
use ferry_semantics::feedback::MAX_RAW_FEEDBACK_BYTES;
use ferry_semantics::release::DeletePolicy;
use ferry_semantics::{ManifestError, ManifestIdentity, apply_order, identify};

/// The outcome of one pass over a work.
pub struct Reconciled {
    /// What to report to the hub.
    pub status: v1::WorkStatus,
    /// Whether some manifest failed in a way that may pass on a later try.
    pub retry: bool,
    /// The objects to watch for drift.
    pub managed: Vec<ManagedObject>,
    /// The kind (`apiVersion/kind`) of each object this pass created or
    /// changed on the spoke.
    pub written: Vec<String>,
    /// The record's new list of objects (with the UIDs this pass learnt),
    /// when it changed. Written by the caller after it publishes `status`
    /// (with [`AppliedWorks::set_resources`]): what the pass was about to
    /// create was recorded before it was created, so this write only adds
    /// UIDs and drops released objects, and nothing is lost when the agent
    /// dies between the report and the write (the next pass writes it).
    pub record: Option<RecordUpdate>,
}

/// The list of objects a work's record is to hold after a pass; written
/// with [`AppliedWorks::set_resources`].
pub struct RecordUpdate {
    /// The record's name.
    pub name: String,
    /// What it is to list.
    pub resources: Vec<AppliedResource>,
}

/// Applies works to one spoke.
pub struct Reconciler {
    client: Client,
    resolver: Arc<KindResolver>,
    schemas: Arc<ListSchemas>,
    applied: AppliedWorks,
    metrics: Arc<AgentMetrics>,
    max_json_raw_length: usize,
    rules: RuleEvaluator,
    executor: ExecutorCheck,
    adopt_ocm_objects: bool,
    owners: OwnerIndex,
    breaker: WriteBreaker,
    /// Whose identity writes the works' objects: the agent's, or each
    /// work's executor's.
    writers: WriteIdentity,
    /// The cluster's sealing keys, which open sealed Secret entries.
    keyring: Arc<Keyring>,
}

impl Reconciler {
    /// A reconciler writing with `client`, recording in `applied`,
    /// counting applies in `metrics` and checking works' executors with
    /// `executor`.
    pub fn new(
        client: Client,
        resolver: Arc<KindResolver>,
        schemas: Arc<ListSchemas>,
        applied: AppliedWorks,
        metrics: Arc<AgentMetrics>,
        executor: ExecutorCheck,
    ) -> Self {
        Self::with_options(client, resolver, schemas, applied, metrics, executor, false)
    }

    /// [`Reconciler::new`], and with `adopt_ocm_objects` the objects it
    /// writes lose their owner references to OCM's AppliedManifestWorks
    /// (`--adopt-ocm-objects`).
    pub fn with_options(
        client: Client,
        resolver: Arc<KindResolver>,
        schemas: Arc<ListSchemas>,
        applied: AppliedWorks,
        metrics: Arc<AgentMetrics>,
        executor: ExecutorCheck,
        adopt_ocm_objects: bool,
    ) -> Self {
        Self {
            writers: WriteIdentity::Agent(client.clone()),
            client,
            resolver,
            schemas,
            applied,
            metrics,
            max_json_raw_length: MAX_RAW_FEEDBACK_BYTES,
            rules: RuleEvaluator::default(),
            executor,
            adopt_ocm_objects,
            owners: OwnerIndex::default(),
            breaker: WriteBreaker::default(),
            keyring: Arc::new(Keyring::none()),
        }
    }

    /// Opens sealed Secret entries with `keyring`'s keys (without one, no
    /// sealed entry opens).
    #[must_use]
    pub fn with_keyring(mut self, keyring: Arc<Keyring>) -> Self {
        self.keyring = keyring;
        self
    }

    /// The cluster's sealing keys.
    pub fn keyring(&self) -> &Arc<Keyring> {
        &self.keyring
    }

    /// The bounded pool this reconciler evaluates CEL on (condition rules),
    /// shared with dependencies' readiness rules so that together they
    /// never take more threads than its bound.
    pub fn rule_evaluator(&self) -> &RuleEvaluator {
        &self.rules
    }

    /// Sets the largest `JsonRaw` feedback value, in bytes, this reconciler
    /// reports (the agent's `--max-json-raw-length`); larger ones are left out
    /// with a reason on `StatusFeedbackSynced`.
    #[must_use]
    pub fn with_max_json_raw_length(mut self, max_json_raw_length: usize) -> Self {
        self.max_json_raw_length = max_json_raw_length;
        self
    }

    /// Writes every work's objects as the work's executor
    /// (`--write-as-executor`) when `writers` says so.
    #[must_use]
    pub fn with_write_identity(mut self, writers: WriteIdentity) -> Self {
        self.writers = writers;
        self
    }

    /// The spoke client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Whose identity writes the works' objects.
    pub fn writers(&self) -> &WriteIdentity {
        &self.writers
    }

    /// Forgets work `uid`'s claims and write counts: it was deleted or
    /// evicted, so works it owned objects against may write them.
    pub async fn forget_work(&self, uid: &str) {
        self.owners.forget(uid).await;
        self.breaker.forget(uid).await;
    }

    /// The records of what was applied.
    pub fn applied(&self) -> &AppliedWorks {
        &self.applied
    }

    /// Applies `upsert` and reports the result. Never fails as a whole: each
    /// manifest's problem becomes that manifest's condition, and the other
    /// manifests are still applied. `record_likely_new`: the work's record
    /// is probably not on the spoke yet (see [`AppliedWorks::ensure`]).
    pub async fn reconcile(&self, upsert: &v1::WorkUpsert, record_likely_new: bool) -> Reconciled {
        let spec = upsert.spec.clone().unwrap_or_default();
        let work_ref = upsert.work.clone().unwrap_or_default();
        let policy = DeletePolicy::from_wire(spec.delete_option.as_ref());
        let work = WorkPass {
            owner: crate::dependencies::work_owner(upsert),
            generation: upsert.generation,
            spec: &spec,
            work_ref: &work_ref,
            policy: &policy,
        };
        let mut parsed: Vec<Result<(Value, ManifestIdentity), ManifestError>> = spec
            .manifests_json
            .iter()
            .map(|raw| identify(raw))
            .collect();
        // Before anything reads the manifests: from here on an opened
        // entry is the Secret it carried.
        let sealed = open_sealed(&self.keyring, &mut parsed).await;
        let identities: Vec<Option<&ManifestIdentity>> = parsed
            .iter()
            .map(|p| p.as_ref().ok().map(|(_, id)| id))
            .collect();
        let order = apply_order(&identities);
        let intents = self
            .planned_intents(&identities, &spec.manifest_configs)
            .await;
        let mut record = self
            .open_record(&work, &upsert.labels, &intents, record_likely_new)
            .await;
        if let Ok(record) = &mut record {
            self.record_intents(&intents, record).await;
        }

        let mut manifests: Vec<Option<v1::ManifestStatus>> = vec![None; parsed.len()];
        let mut claims = Vec::new();
        let mut retry = false;
        for index in order {
            let passed = self
                .pass_manifest(
                    &work,
                    index,
                    &parsed[index],
                    sealed[index].as_ref(),
                    &mut record,
                )
                .await;
            retry |= passed.retry;
            claims.extend(passed.claim);
            manifests[index] = Some(passed.status);
        }
        // Objects this work no longer claims (no longer lists, or only
        // observes) are no longer its: other works may own them.
        if let Ok(record) = &record {
            self.owners.retain(&work_ref.uid, &record.claimed).await;
        }
        let all_identified = parsed.iter().all(Result::is_ok);
        let mut managed = Vec::new();
        let mut written = Vec::new();
        let mut record_update = None;
        if let Ok(record) = &mut record {
            let (collected_retry, update) = self
                .collect_unlisted(&work, record, &claims, all_identified)
                .await;
            retry |= collected_retry;
            record_update = update;
            managed = std::mem::take(&mut record.managed);
            written = std::mem::take(&mut record.written);
        }
        let manifests: Vec<v1::ManifestStatus> = manifests.into_iter().flatten().collect();
        Reconciled {
            status: v1::WorkStatus {
                work: upsert.work.clone(),
                generation: work.generation,
                conditions: work_conditions(&manifests, work.generation),
                manifests,
                gone: false,
                // Set by the worker, from the span of this pass.
                trace_context: Default::default(),
            },
            retry,
            managed,
            written,
            record: record_update,
        }
    }

    /// The work's record for this pass. Without its record a work could
    /// apply objects it would later be unable to find and delete, so no
    /// manifest is applied without one. A new record is created naming
    /// the intents (one write, not two). Fails with why there is none.
    async fn open_record(
        &self,
        work: &WorkPass<'_>,
        labels: &HashMap<String, String>,
        intents: &[AppliedResource],
        record_likely_new: bool,
    ) -> Result<PassRecord, String> {
        let spec = work.spec;
        self.applied
            .ensure(
                self.applied.spec_for(
                    work.work_ref,
                    work.owner,
                    spec.delete_option.as_ref(),
                    self.writers
                        .is_executor()
                        .then(|| ExecutorAccount::of(spec.executor.as_ref()))
                        .flatten()
                        .as_ref(),
                ),
                labels,
                intents,
                record_likely_new,
            )
            .await
            .map_err(|e| e.to_string())
            .and_then(|(r, fresh)| PassRecord::open(&r, fresh, work.work_ref, work.generation))
    }

    /// Deletes the objects the work no longer lists (as the work's
    /// executor when writing as executors) and says whether that should be
    /// retried and what the record is to list afterwards (if it changed).
    /// Without a writer nothing is collected: with no executor nothing was
    /// written, and there is nothing of this pass to collect.
    async fn collect_unlisted(
        &self,
        work: &WorkPass<'_>,
        record: &PassRecord,
        claims: &[Claim],
        all_identified: bool,
    ) -> (bool, Option<RecordUpdate>) {
        let pass = PassObjects {
            owner: &record.owner,
            stored: &record.stored,
            recorded: &record.recorded,
        };
        match self
            .writers
            .client_for(ExecutorAccount::of(work.spec.executor.as_ref()).as_ref())
            .await
        {
            Ok(writer) => {
                let collected =
                    collect_garbage(&writer, &pass, claims, all_identified, work.policy).await;
                let update = collected.record.map(|resources| RecordUpdate {
                    name: record.owner.name.clone(),
                    resources,
                });
                (collected.retry, update)
            }
            Err(error) => {
                debug!(work = %work.work_ref.name, %error, "no garbage collection");
                (false, None)
            }
        }
    }
}

/// The parts of a work one pass over it reads throughout.
struct WorkPass<'a> {
    /// The tenant that owns the work (see [`crate::dependencies::work_owner`]).
    owner: &'a str,
    /// The generation this pass applies.
    generation: i64,
    spec: &'a v1::WorkSpec,
    work_ref: &'a v1::WorkRef,
    /// What deleting the work does to its objects.
    policy: &'a DeletePolicy,
}

/// A manifest that was applied (or observed), with what its status says.
struct Report {
    reason: &'static str,
    message: String,
    observed: Option<Observed>,
}

/// Seconds since the Unix epoch: the time drift is seen or corrected.
use crate::conditions::now_seconds as unix_now;
