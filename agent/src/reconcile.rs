//! Applies every manifest of one work in order and describes the result as a
//! `WorkStatus` for the hub.

use std::collections::HashMap;
use std::sync::Arc;

use ferry_proto::v1;
use kube::Client;
use kube::core::GroupVersionKind;
use serde_json::Value;

use crate::applier::{Applied, ApplyError, ManifestWrite, api_for, apply_manifest};
use crate::conditions::{APPLIED, AVAILABLE, FEEDBACK_SYNCED, condition};
use crate::discovery::{KindResolver, ResolveError};
use crate::drift::ManagedObject;
use crate::list_schema::ListSchemas;
use crate::semantics::feedback::{availability, evaluate_feedback};
use crate::semantics::strategy::{StrategyError, strategy_of};
use crate::semantics::{ManifestError, ManifestIdentity, apply_order, config_for, identify};

/// The outcome of one pass over a work.
pub struct Reconciled {
    /// What to report to the hub.
    pub status: v1::WorkStatus,
    /// Whether some manifest failed in a way that may pass on a later try.
    pub retry: bool,
    /// The objects to watch for drift.
    pub managed: Vec<ManagedObject>,
}

/// What a work remembers between passes: the UID each object had when this
/// work last saw it, so `whenDeleted: Leave` can tell "deleted on the spoke"
/// from "never created".
#[derive(Debug, Default)]
pub struct WorkMemory {
    uids: HashMap<String, String>,
}

/// Why one manifest is not applied.
#[derive(Debug, thiserror::Error)]
enum ManifestFailure {
    #[error(transparent)]
    Invalid(#[from] ManifestError),
    #[error(transparent)]
    Config(#[from] StrategyError),
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    #[error(transparent)]
    Apply(#[from] ApplyError),
    #[error("ReadOnly: the object does not exist on the cluster")]
    Missing,
}

impl ManifestFailure {
    fn reason(&self) -> &'static str {
        match self {
            ManifestFailure::Invalid(e) => e.reason(),
            ManifestFailure::Config(e) => e.reason(),
            ManifestFailure::Resolve(ResolveError::UnknownKind { .. }) => "UnknownKind",
            ManifestFailure::Resolve(ResolveError::Discovery { .. }) => "DiscoveryFailed",
            ManifestFailure::Apply(e) => e.reason(),
            ManifestFailure::Missing => "ObjectNotFound",
        }
    }

    fn is_transient(&self) -> bool {
        match self {
            ManifestFailure::Invalid(_) | ManifestFailure::Config(_) => false,
            // A CRD may be installed on the spoke later.
            ManifestFailure::Resolve(_) => true,
            ManifestFailure::Apply(e) => e.is_transient(),
            // The drift watch sees the object appear.
            ManifestFailure::Missing => false,
        }
    }
}

/// Applies works to one spoke.
pub struct Reconciler {
    client: Client,
    resolver: Arc<KindResolver>,
    schemas: Arc<ListSchemas>,
}

impl Reconciler {
    /// A reconciler writing with `client`.
    pub fn new(client: Client, resolver: Arc<KindResolver>, schemas: Arc<ListSchemas>) -> Self {
        Self {
            client,
            resolver,
            schemas,
        }
    }

    /// Applies `upsert` and reports the result. Never fails as a whole: each
    /// manifest's problem becomes that manifest's condition, and the other
    /// manifests are still applied.
    pub async fn reconcile(&self, upsert: &v1::WorkUpsert, memory: &mut WorkMemory) -> Reconciled {
        let generation = upsert.generation;
        let spec = upsert.spec.clone().unwrap_or_default();
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

        let mut manifests: Vec<Option<v1::ManifestStatus>> = vec![None; parsed.len()];
        let mut managed = Vec::new();
        let mut retry = false;
        for index in order {
            let mut meta = v1::ResourceMeta {
                ordinal: i32::try_from(index).unwrap_or(i32::MAX),
                ..Default::default()
            };
            let result = match &parsed[index] {
                Err(e) => Err(ManifestFailure::from(e.clone())),
                Ok((value, identity)) => {
                    meta.group = identity.group.clone();
                    meta.version = identity.version.clone();
                    meta.kind = identity.kind.clone();
                    meta.name = identity.name.clone();
                    meta.namespace = identity.namespace.clone().unwrap_or_default();
                    self.apply_one(
                        value,
                        identity,
                        &spec.manifest_configs,
                        &mut meta,
                        memory,
                        &mut managed,
                    )
                    .await
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
                    if let Some(observed) = &report.observed {
                        let (more, values) = observe(&meta, observed, generation);
                        conditions.extend(more);
                        feedback = values;
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
                }
            }
            manifests[index] = Some(v1::ManifestStatus {
                resource_meta: Some(meta),
                conditions,
                feedback,
            });
        }
        let manifests: Vec<v1::ManifestStatus> = manifests.into_iter().flatten().collect();
        let work_applied = work_applied_condition(&manifests, generation);
        let work_available = work_available_condition(&manifests, generation);
        Reconciled {
            status: v1::WorkStatus {
                work: upsert.work.clone(),
                generation,
                conditions: vec![work_applied, work_available],
                manifests,
            },
            retry,
            managed,
        }
    }

    async fn apply_one(
        &self,
        value: &Value,
        identity: &ManifestIdentity,
        configs: &[v1::ManifestConfig],
        meta: &mut v1::ResourceMeta,
        memory: &mut WorkMemory,
        managed: &mut Vec<ManagedObject>,
    ) -> Result<Report, ManifestFailure> {
        let gvk = GroupVersionKind::gvk(&identity.group, &identity.version, &identity.kind);
        let (resource, caps) = self.resolver.resolve(&gvk).await?;
        meta.resource = resource.plural.clone();
        let api = api_for(&self.client, &resource, &caps, identity);
        let namespace = api.namespace().unwrap_or_default().to_string();
        meta.namespace = namespace.clone();
        let key = format!(
            "{}/{}/{namespace}/{}",
            identity.api_version(),
            identity.kind,
            identity.name
        );
        managed.push(ManagedObject {
            api: api.clone(),
            scope: format!("{}/{}/{namespace}", identity.api_version(), identity.kind),
            name: identity.name.clone(),
        });
        let config = config_for(
            configs,
            &identity.group,
            &resource.plural,
            &namespace,
            &identity.name,
        );
        let (strategy, when_deleted) = strategy_of(config)?;
        let schema = self.schemas.for_kind(&gvk).await;
        let write = ManifestWrite {
            client: &self.client,
            api: &api,
            identity,
            desired: value,
            strategy: &strategy,
            when_deleted,
            known_uid: memory.uids.get(&key).map(String::as_str),
            schema: schema.as_ref(),
        };
        let outcome = match apply_manifest(&write).await {
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
            other => other?,
        };
        if let Some(uid) = outcome.uid() {
            memory.uids.insert(key, uid.to_string());
        }
        let observed = outcome.object.clone().map(|object| Observed {
            object,
            rules: config.map(|c| c.feedback_rules.clone()).unwrap_or_default(),
        });
        let with_notes = |message: &str| {
            if outcome.notes.is_empty() {
                message.to_string()
            } else {
                format!("{message}; {}", outcome.notes.join("; "))
            }
        };
        let (reason, message) = match outcome.applied {
            Applied::Created | Applied::Updated | Applied::Unchanged => (
                "AppliedManifestComplete",
                with_notes("Apply manifest complete"),
            ),
            Applied::LeftAsIs => (
                "AppliedManifestComplete",
                with_notes("CreateOnly: the object exists and is left as it is"),
            ),
            Applied::Observed => (
                "ReadOnly",
                with_notes("ReadOnly: the object exists; ferry does not write it"),
            ),
            Applied::LeftDeleted => (
                "DeletedOnSpoke",
                with_notes(
                    "whenDeleted: Leave: the object was deleted on the cluster and is not recreated",
                ),
            ),
            Applied::Missing => return Err(ManifestFailure::Missing),
        };
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

/// The object as it is on the spoke after applying, and the feedback rules
/// its manifest config asks for.
struct Observed {
    object: Value,
    rules: Vec<v1::FeedbackRule>,
}

/// The `Available` and `StatusFeedbackSynced` conditions and the feedback
/// values of one applied manifest.
fn observe(
    meta: &v1::ResourceMeta,
    observed: &Observed,
    generation: i64,
) -> (Vec<v1::Condition>, Vec<v1::FeedbackValue>) {
    let (available, reason, message) = availability(&meta.group, &meta.kind, &observed.object);
    let mut conditions = vec![condition(AVAILABLE, available, reason, message, generation)];
    if observed.rules.is_empty() {
        return (conditions, vec![]);
    }
    let outcome = evaluate_feedback((&meta.group, &meta.kind), &observed.object, &observed.rules);
    let synced = if outcome.problems.is_empty() {
        condition(
            FEEDBACK_SYNCED,
            true,
            "StatusFeedbackSynced",
            format!("{} status values reported", outcome.values.len()),
            generation,
        )
    } else {
        let problems: Vec<String> = outcome.problems.iter().map(ToString::to_string).collect();
        condition(
            FEEDBACK_SYNCED,
            false,
            "StatusFeedbackIncomplete",
            problems.join("; "),
            generation,
        )
    };
    conditions.push(synced);
    (conditions, outcome.values)
}

fn work_available_condition(manifests: &[v1::ManifestStatus], generation: i64) -> v1::Condition {
    let summary = Summary {
        type_: AVAILABLE,
        noun: "resources",
        state: "available",
        true_reason: "ResourcesAvailable",
        false_reason: "ResourcesNotAvailable",
    };
    summary.of(manifests, generation)
}

fn work_applied_condition(manifests: &[v1::ManifestStatus], generation: i64) -> v1::Condition {
    let summary = Summary {
        type_: APPLIED,
        noun: "manifests",
        state: "applied",
        true_reason: "AppliedManifestWorkComplete",
        false_reason: "AppliedManifestWorkFailed",
    };
    summary.of(manifests, generation)
}

/// A work condition that is True when one manifest condition is True for
/// every manifest, and otherwise names the manifests that lag and why.
struct Summary {
    type_: &'static str,
    noun: &'static str,
    state: &'static str,
    true_reason: &'static str,
    false_reason: &'static str,
}

impl Summary {
    fn of(&self, manifests: &[v1::ManifestStatus], generation: i64) -> v1::Condition {
        let lagging: Vec<String> = manifests
            .iter()
            .filter_map(|m| {
                let c = m.conditions.iter().find(|c| c.r#type == self.type_);
                if c.is_some_and(|c| c.status == "True") {
                    return None;
                }
                let meta = m.resource_meta.clone().unwrap_or_default();
                let name = format!("#{} {} {}", meta.ordinal, meta.kind, meta.name);
                Some(match c {
                    Some(c) => format!("{name}: {}", c.reason),
                    None => name,
                })
            })
            .collect();
        let (total, noun, state) = (manifests.len(), self.noun, self.state);
        if lagging.is_empty() {
            let message = format!("All {total} {noun} are {state}");
            condition(self.type_, true, self.true_reason, message, generation)
        } else {
            let message = format!(
                "{} of {total} {noun} are not {state}: {}",
                lagging.len(),
                lagging.join("; ")
            );
            condition(self.type_, false, self.false_reason, message, generation)
        }
    }
}
