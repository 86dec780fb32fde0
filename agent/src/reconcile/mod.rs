//! Applies every manifest of one work in order and describes the result as a
//! `WorkStatus` for the hub.
//!
//! - `pass_record.rs`: one pass's view of the work's record on the spoke.
//! - `failure.rs`: why one manifest is not applied, and what that means.
//! - `lookup.rs`: where a manifest goes, what a look-up after a failed
//!   apply finds, and its condition rules.
//! - `intents.rs`: the record's intents before creating, and objects held.

mod failure;
mod intents;
mod lookup;
mod pass_record;

use std::sync::Arc;

use self::failure::ManifestFailure;
use self::lookup::{Lookup, Target};
use self::pass_record::PassRecord;
use std::time::Instant;

use ferry_proto::v1;
use kube::Client;
use kube::api::Api;
use kube::core::GroupVersionKind;
use serde_json::Value;
use tracing::{Instrument as _, debug, info_span, warn};

use crate::applied_works::{AppliedResource, AppliedWorks};
use crate::applier::{ApplyError, ManifestWrite, apply_manifest};
use crate::conditions::{
    Observed, availability_unknown, condition, not_available, observe_health,
    refused_never_created, work_applied_condition, work_available_condition,
    work_degraded_condition, work_progressing_condition, work_rule_conditions,
};
use crate::discovery::{KindResolver, ResolveError};
use crate::drift::ManagedObject;
use crate::executor::{ExecutorCheck, Target as ExecutorTarget};
use crate::garbage_collection::{Claim, PassObjects, collect_garbage};
use crate::list_schema::ListSchemas;
use crate::metrics::{AgentMetrics, apply_failure, apply_outcome, wrote};
use crate::ownership::{ObjectKey, OwnerIndex};
use crate::rule_pool::RuleEvaluator;
use crate::write_breaker::{MAX_REWRITES, WINDOW, WriteBreaker, WriteLoop, other_writers};
use crate::write_identity::{ExecutorAccount, WriteIdentity};
use ferry_semantics::apply_outcome::{Applied, Writes, applied_report};
use ferry_semantics::availability::REASON_INCOMPLETE_META;
use ferry_semantics::config_match::{condition_rules_for, feedback_rules_for, options_for};
use ferry_semantics::contract::APPLIED;
use ferry_semantics::drift_report::manifest_drift;
use ferry_semantics::feedback::MAX_RAW_FEEDBACK_BYTES;
use ferry_semantics::ownership::{Verdict, WorkRank};
use ferry_semantics::release::has_managed_label;
use ferry_semantics::release::{DeletePolicy, Disposition};
use ferry_semantics::strategy::{Strategy, strategy_of};
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
}

impl Reconciler {
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
        }
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
        let generation = upsert.generation;
        let owner = crate::dependencies::work_owner(upsert);
        let spec = upsert.spec.clone().unwrap_or_default();
        let work_ref = upsert.work.clone().unwrap_or_default();
        let parsed: Vec<Result<(Value, ManifestIdentity), ManifestError>> = spec
            .manifests_json
            .iter()
            .map(|raw| identify(raw))
            .collect();
        let identities: Vec<Option<&ManifestIdentity>> = parsed
            .iter()
            .map(|p| p.as_ref().ok().map(|(_, id)| id))
            .collect();
        let order = apply_order(&identities);
        let intents = self
            .planned_intents(&identities, &spec.manifest_configs)
            .await;
        // Without its record a work could apply objects it would later be
        // unable to find and delete, so no manifest is applied without one.
        // A new record is created naming the intents (one write, not two).
        let mut record = self
            .applied
            .ensure(
                self.applied.spec_for(
                    &work_ref,
                    owner,
                    spec.delete_option.as_ref(),
                    self.writers
                        .is_executor()
                        .then(|| ExecutorAccount::of(spec.executor.as_ref()))
                        .flatten()
                        .as_ref(),
                ),
                &upsert.labels,
                &intents,
                record_likely_new,
            )
            .await
            .and_then(|(r, fresh)| Ok((r.resources()?, r, fresh)))
            .map_err(|e| e.to_string())
            .and_then(|(resources, r, fresh)| {
                let owner = r
                    .owner()
                    .ok_or_else(|| "the record has no UID".to_string())?;
                let created = r
                    .metadata
                    .creation_timestamp
                    .as_ref()
                    .map_or(i64::MAX, |t| t.0.as_second());
                Ok(PassRecord {
                    owner,
                    rank: WorkRank {
                        created,
                        name: format!("{}/{}", work_ref.namespace, work_ref.name),
                        uid: work_ref.uid.clone(),
                    },
                    generation,
                    fresh,
                    previous: resources.clone(),
                    stored: resources,
                    recorded: Vec::new(),
                    managed: Vec::new(),
                    written: Vec::new(),
                    claimed: Vec::new(),
                })
            });
        if let Ok(record) = &mut record {
            self.record_intents(&intents, record).await;
        }

        let policy = DeletePolicy::from_wire(spec.delete_option.as_ref());
        let mut manifests: Vec<Option<v1::ManifestStatus>> = vec![None; parsed.len()];
        let mut claims = Vec::new();
        let mut retry = false;
        for index in order {
            let mut drift = None;
            let mut meta = v1::ResourceMeta {
                ordinal: i32::try_from(index).unwrap_or(i32::MAX),
                ..Default::default()
            };
            let mut identified = None;
            let result = match &parsed[index] {
                Err(e) => Err(ManifestFailure::from(e.clone())),
                Ok((value, identity)) => {
                    meta.group = identity.group.clone();
                    meta.version = identity.version.clone();
                    meta.kind = identity.kind.clone();
                    meta.name = identity.name.clone();
                    meta.namespace = identity.namespace.clone().unwrap_or_default();
                    let result = match &mut record {
                        Ok(record) => {
                            // One span per manifest; the spoke calls it
                            // makes are its children.
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
                                .apply_one(
                                    value,
                                    identity,
                                    &spec.manifest_configs,
                                    &mut meta,
                                    record,
                                    &mut drift,
                                    (spec.executor.as_ref(), &policy),
                                )
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
                        Err(problem) => Err(ManifestFailure::Record(problem.clone())),
                    };
                    identified = Some(identity);
                    if result.is_err() {
                        claims.push(Claim {
                            group: identity.group.clone(),
                            kind: identity.kind.clone(),
                            namespace: identity.namespace.clone(),
                            name: identity.name.clone(),
                        });
                    }
                    result
                }
            };
            let mut conditions = Vec::new();
            let mut feedback = Vec::new();
            match result {
                Ok(report) => {
                    conditions.push(condition(
                        APPLIED,
                        true,
                        report.reason,
                        report.message,
                        generation,
                    ));
                    match &report.observed {
                        Some(observed) => {
                            let (more, values) =
                                self.observe(owner, &meta, observed, generation).await;
                            conditions.extend(more);
                            self.add_rule_conditions(
                                owner,
                                &meta,
                                observed,
                                generation,
                                &mut conditions,
                            )
                            .await;
                            feedback = values;
                        }
                        // Deleted on the spoke and left so (whenDeleted: Leave).
                        None => conditions.push(not_available(generation)),
                    }
                }
                Err(failure) => {
                    retry |= failure.is_transient();
                    conditions.push(condition(
                        APPLIED,
                        false,
                        failure.reason(),
                        failure.to_string(),
                        generation,
                    ));
                    // A refused write (not a ReadOnly manifest's check) of
                    // an object this work never created (its own record
                    // says so): not available to it, with no read (the
                    // executor may not be allowed one).
                    let writes = strategy_of(
                        options_for(
                            &spec.manifest_configs,
                            &meta.group,
                            &meta.resource,
                            &meta.namespace,
                            &meta.name,
                        )
                        .as_ref(),
                    )
                    .is_ok_and(|(s, _)| s.writes() != Writes::Never);
                    let never_created = writes
                        && failure.is_write_refusal()
                        && identified.is_some_and(|identity| {
                            record.as_ref().is_ok_and(|r| !r.created_before(identity))
                        });
                    let lookup = match identified {
                        _ if never_created => {
                            conditions.push(refused_never_created(
                                failure.reason(),
                                &failure.to_string(),
                                generation,
                            ));
                            manifests[index] = Some(v1::ManifestStatus {
                                resource_meta: Some(meta),
                                conditions,
                                feedback,
                                drift,
                            });
                            continue;
                        }
                        Some(identity) => {
                            self.look_up(identity, &spec.manifest_configs, spec.executor.as_ref())
                                .await
                        }
                        None => Lookup::Unknown(
                            REASON_INCOMPLETE_META,
                            "the manifest does not name a resource".to_string(),
                        ),
                    };
                    match lookup {
                        Lookup::Found(observed) => {
                            let (more, values) =
                                self.observe(owner, &meta, &observed, generation).await;
                            conditions.extend(more);
                            self.add_rule_conditions(
                                owner,
                                &meta,
                                &observed,
                                generation,
                                &mut conditions,
                            )
                            .await;
                            feedback = values;
                        }
                        Lookup::Absent => conditions.push(not_available(generation)),
                        Lookup::Unknown(reason, message) => {
                            conditions.push(availability_unknown(reason, message, generation));
                        }
                    }
                }
            }
            manifests[index] = Some(v1::ManifestStatus {
                resource_meta: Some(meta),
                conditions,
                feedback,
                drift,
            });
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
            let pass = PassObjects {
                owner: &record.owner,
                stored: &record.stored,
                recorded: &record.recorded,
            };
            // Objects the work no longer lists go as the work's executor
            // when writing as executors; with no executor nothing was
            // written, and there is nothing of this pass to collect.
            match self
                .writers
                .client_for(ExecutorAccount::of(spec.executor.as_ref()).as_ref())
                .await
            {
                Ok(writer) => {
                    let collected =
                        collect_garbage(&writer, &pass, &claims, all_identified, &policy).await;
                    retry |= collected.retry;
                    record_update = collected.record.map(|resources| RecordUpdate {
                        name: record.owner.name.clone(),
                        resources,
                    });
                }
                Err(error) => debug!(work = %work_ref.name, %error, "no garbage collection"),
            }
            managed = std::mem::take(&mut record.managed);
            written = std::mem::take(&mut record.written);
        }
        let manifests: Vec<v1::ManifestStatus> = manifests.into_iter().flatten().collect();
        let work_applied = work_applied_condition(&manifests, generation);
        let work_available = work_available_condition(&manifests, generation);
        let work_progressing = work_progressing_condition(&manifests, generation);
        let work_degraded = work_degraded_condition(&manifests, generation);
        let mut work_conditions = vec![
            work_applied,
            work_available,
            work_progressing,
            work_degraded,
        ];
        work_conditions.extend(work_rule_conditions(&manifests, generation));
        Reconciled {
            status: v1::WorkStatus {
                work: upsert.work.clone(),
                generation,
                conditions: work_conditions,
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

    // Each argument is a separate input of one manifest's apply (its config,
    // its pass record, its drift report slot, its executor and delete policy).
    #[allow(clippy::too_many_arguments)]
    async fn apply_one(
        &self,
        value: &Value,
        identity: &ManifestIdentity,
        configs: &[v1::ManifestConfig],
        meta: &mut v1::ResourceMeta,
        record: &mut PassRecord,
        drift: &mut Option<v1::ManifestDrift>,
        (executor, policy): (Option<&v1::Executor>, &DeletePolicy),
    ) -> Result<Report, ManifestFailure> {
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
            configs,
            &identity.group,
            &resource.plural,
            &namespace,
            &identity.name,
        );
        let (strategy, when_deleted) = strategy_of(config.as_ref())?;
        // Before anything is recorded or written: a manifest the executor
        // may not apply leaves no trace on the cluster.
        let deletes = policy.disposition(
            &identity.group,
            &resource.plural,
            &namespace,
            &identity.name,
        ) == Disposition::Delete;
        self.executor
            .check(
                executor,
                ExecutorTarget {
                    group: &identity.group,
                    version: &identity.version,
                    resource: &resource.plural,
                    namespace: &namespace,
                    name: &identity.name,
                    manifest: value,
                },
                deletes,
            )
            .await?;
        // Writing as the executor, every request about the object (its
        // read before the write too) is the executor's, judged by the API
        // server; the agent's own client only reads for status.
        let writer = self
            .writers
            .client_for(ExecutorAccount::of(executor).as_ref())
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
        if strategy.writes() != Writes::Never {
            record.claimed.push(key.clone());
            if let Verdict::Yield { owner, fields } =
                self.owners.claim(&record.rank, key.clone(), value).await
            {
                return Err(ManifestFailure::ConflictsWithWork {
                    what: slot.describe(),
                    owner,
                    fields,
                });
            }
            if let Some(hold) = self
                .breaker
                .held(&key, &record.rank.uid, record.generation, Instant::now())
                .await
            {
                let live = api
                    .get_opt(&identity.name)
                    .await
                    .ok()
                    .flatten()
                    .and_then(|o| serde_json::to_value(o).ok())
                    .unwrap_or(Value::Null);
                return Err(WriteLoop {
                    what: slot.describe(),
                    rewrites: MAX_REWRITES,
                    window: WINDOW.as_secs(),
                    writer: other_writers(&live, strategy_manager(&strategy))
                        .or(hold.writers)
                        .unwrap_or_else(|| {
                            "no other field manager is recorded on the object".to_string()
                        }),
                    hold: hold.left.as_secs().max(1),
                }
                .into());
            }
        }
        if !record.holds(&slot) {
            let creates = match strategy.writes() {
                Writes::Never => false,
                // Recorded only when it will be created: an object CreateOnly
                // leaves as it is never belongs to the work.
                Writes::WhenAbsent => api
                    .get_opt(&identity.name)
                    .await
                    .map(|live| live.is_none())
                    .unwrap_or(true),
                Writes::Always => true,
            };
            if creates {
                self.write_intents(record, vec![slot.clone()])
                    .await
                    .map_err(|e| ManifestFailure::Record(e.to_string()))?;
            }
        }
        let schema = self.schemas.for_kind(&gvk).await;
        let known_uid = record.previous_uid(
            &identity.group,
            &resource.plural,
            &namespace,
            &identity.name,
        );
        let write = ManifestWrite {
            client: &writer,
            api: &api,
            identity,
            desired: value,
            strategy: &strategy,
            when_deleted,
            known_uid,
            schema: schema.as_ref(),
            owner: &record.owner,
            marked: deletes,
            likely_absent: record.fresh && known_uid.is_none(),
        };
        // Only kinds the spoke serves get here: the label stays bounded.
        let kind = format!("{}/{}", identity.api_version(), identity.kind);
        let started = Instant::now();
        let applied = apply_manifest(&write).await;
        // Watched through the kind's label-selected watch only once the
        // object is seen with ferry's label; until then, by name.
        if let Ok(outcome) = &applied
            && let Some(managed) = record.managed.get_mut(managed_at)
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
                    &key,
                    &record.rank.uid,
                    record.generation,
                    outcome
                        .before
                        .as_ref()
                        .and_then(|b| other_writers(b, strategy_manager(&strategy))),
                    Instant::now(),
                )
                .await
            {
                warn!(object = %identity.describe(), ?hold, "object rewritten too often; holding further writes");
            }
        }
        let outcome = match applied {
            Err(ApplyError::KindNotServed { .. }) => {
                // Cached discovery is stale; look the kind up again next time.
                self.resolver.forget(&gvk).await;
                self.schemas.forget(&gvk).await;
                return Err(ResolveError::UnknownKind {
                    api_version: identity.api_version(),
                    kind: identity.kind.clone(),
                }
                .into());
            }
            Err(conflict @ ApplyError::Conflict(_)) => {
                // Another manager holds a field this apply sets: the report
                // shows which, with its value and that manager. One read,
                // only on a conflict (retried with backoff anyway).
                if let Ok(Some(live)) = api.get_opt(&identity.name).await
                    && let Ok(live) = serde_json::to_value(live)
                {
                    *drift = manifest_drift(
                        &strategy,
                        value,
                        Some(&live),
                        false,
                        schema.as_ref(),
                        unix_now(),
                    );
                }
                return Err(conflict.into());
            }
            other => other?,
        };
        let mut outcome = outcome;
        // Found in the object as read before this pass wrote it; a write
        // under a correcting strategy put the hub's values back.
        *drift = manifest_drift(
            &strategy,
            value,
            outcome.before.as_ref(),
            outcome.applied == Applied::Updated,
            schema.as_ref(),
            unix_now(),
        );
        if outcome.applied == Applied::LeftDeleted {
            // The record of the deleted object is what keeps it deleted on
            // the next pass and after a restart.
            if let Some(previous) = record.previous.iter().find(|r| r.same_object(&slot)) {
                record.recorded.push(previous.clone());
            }
        }
        if let Some(object) = outcome.object.take() {
            let object = self
                .hold(object, &outcome.applied, &api, slot, record, deletes)
                .await?;
            outcome.object = Some(object);
        }
        // The version this pass leaves the object at: the drift watch's
        // echo of it (this pass's own write) wakes nobody.
        if let Some(managed) = record.managed.get_mut(managed_at) {
            managed.set_seen(
                outcome
                    .object
                    .as_ref()
                    .and_then(|o| o["metadata"]["resourceVersion"].as_str()),
            );
        }
        let rules = feedback_rules_for(
            configs,
            &identity.group,
            &resource.plural,
            &namespace,
            &identity.name,
        );
        let condition_rules = condition_rules_for(
            configs,
            &identity.group,
            &resource.plural,
            &namespace,
            &identity.name,
        );
        let observed = outcome.object.clone().map(|object| Observed {
            object,
            rules: rules.to_vec(),
            condition_rules: condition_rules.to_vec(),
        });
        let with_notes = |message: &str| {
            if outcome.notes.is_empty() {
                message.to_string()
            } else {
                format!("{message}; {}", outcome.notes.join("; "))
            }
        };
        let report = applied_report(&strategy, outcome.applied)?;
        let (reason, message) = (report.reason, with_notes(report.message));
        Ok(Report {
            reason,
            message,
            observed,
        })
    }
}

/// A manifest that was applied (or observed), with what its status says.
struct Report {
    reason: &'static str,
    message: String,
    observed: Option<Observed>,
}

/// Seconds since the Unix epoch: the time drift is seen or corrected.
fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or_default()
}

/// The field manager `strategy` writes with.
fn strategy_manager(strategy: &Strategy) -> &str {
    match strategy {
        Strategy::ServerSideApply { manager, .. } => manager,
        _ => ferry_semantics::contract::AGENT_FIELD_MANAGER,
    }
}
