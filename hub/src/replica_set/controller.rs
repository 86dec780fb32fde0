//! The ManifestWorkReplicaSet controller: for every cluster the referenced
//! Placements chose, a ManifestWork made from the template (named like the
//! replica set, in the cluster's namespace, labelled with the replica set
//! and the placement); a cluster leaving the decisions loses its work; the
//! status counts the works by state. Rollout `All`: every cluster at once.
//! Triggered by the replica sets, the PlacementDecisions and the generated
//! works, so only the replica sets a change touches are reconciled.

use crate::watch::{run_controller, watch};
use ferry_api::contract::{
    PLACEMENT_NAME_LABEL, REPLICA_SET_FINALIZER, REPLICA_SET_LABEL, TEMPLATE_APPLIED_AT_ANNOTATION,
};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use ferry_semantics::contract::{
    APPLIED, AVAILABLE, DEGRADED, MANIFESTWORK_APPLIED, OVERRIDES_RENDERED, PLACEMENT_ROLLED_OUT,
    PLACEMENT_VERIFIED, PROGRESSING,
};
use ferry_semantics::rollout::{ClusterState, RolloutCluster, next_step};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{Event, finalizer};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, predicates, reflector, watcher};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use tracing::warn;

use super::render::{RenderFailure, render_for_cluster};
use super::rollout::{cluster_state, resolve};
use ferry_api::contract::PLACEMENT_LABEL;
use ferry_api::managed_cluster::ManagedCluster;
use ferry_api::manifest_work::{Condition, ManifestWork, ManifestWorkSpec};
use ferry_api::placement::PlacementDecision;
use ferry_api::replica_set::{
    ManifestWorkReplicaSet, ManifestWorkReplicaSetStatus, ManifestWorkSummary, PlacementSummary,
};

/// Works written at once by one reconcile.
const CONCURRENT_WRITES: usize = 16;

/// A replica set could not be brought up to date; it is retried.
#[derive(Debug, thiserror::Error)]
pub enum ReplicaSetError {
    /// The API server refused a write or read.
    #[error("{action} for ManifestWorkReplicaSet {replica_set}: {source}")]
    Api {
        /// What was being done.
        action: String,
        /// `<namespace>/<name>`.
        replica_set: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Foreground deletion waits for these works to be gone.
    #[error("{0} generated works still being deleted")]
    WorksRemaining(usize),
    /// The caches have not listed everything yet.
    #[error("the decision and work caches are not ready")]
    NotReady,
}

struct Context {
    client: Client,
    decisions: Store<PlacementDecision>,
    works: Store<ManifestWork>,
    clusters: Store<ManagedCluster>,
}

/// The label value naming a replica set: namespaces hold no dots, so the
/// first dot splits it back.
fn owner_label(rs: &ManifestWorkReplicaSet) -> String {
    format!("{}.{}", rs.namespace().unwrap_or_default(), rs.name_any())
}

fn failed(
    rs: &ManifestWorkReplicaSet,
    action: impl Into<String>,
) -> impl FnOnce(kube::Error) -> ReplicaSetError {
    let action = action.into();
    let replica_set = format!("{}/{}", rs.namespace().unwrap_or_default(), rs.name_any());
    move |source| ReplicaSetError::Api {
        action,
        replica_set,
        source,
    }
}

fn condition_true<'a>(work: &'a ManifestWork, type_: &str) -> Option<&'a Condition> {
    work.status.as_ref().and_then(|s| {
        s.conditions
            .iter()
            .find(|c| c.type_ == type_ && c.status == "True")
    })
}

/// Counts `works` by state; `is_current` says whether a work holds its
/// cluster's rendering of the current template.
fn summarize<'a>(
    works: impl Iterator<Item = &'a Arc<ManifestWork>>,
    is_current: impl Fn(&ManifestWork) -> bool,
) -> ManifestWorkSummary {
    let mut s = ManifestWorkSummary::default();
    for work in works {
        let generation = work.meta().generation.unwrap_or(0);
        s.total += 1;
        if condition_true(work, APPLIED).is_some_and(|c| c.observed_generation == generation) {
            s.applied += 1;
        }
        if condition_true(work, AVAILABLE).is_some() {
            s.available += 1;
        }
        if condition_true(work, DEGRADED).is_some() {
            s.degraded += 1;
        }
        if condition_true(work, PROGRESSING).is_some() {
            s.progressing += 1;
        }
        if is_current(work) {
            s.updated += 1;
        }
    }
    s
}

fn condition(
    type_: &str,
    status: bool,
    reason: &str,
    message: String,
    generation: i64,
    current: &[Condition],
) -> Condition {
    let status = if status { "True" } else { "False" };
    let last_transition_time = current
        .iter()
        .find(|c| c.type_ == type_ && c.status == status)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| {
            Timestamp::now()
                .strftime(ferry_semantics::contract::KUBE_TIME_FORMAT)
                .to_string()
        });
    Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message,
        observed_generation: generation,
        last_transition_time,
    }
}

impl Context {
    /// The works this replica set generated, by cluster (namespace).
    fn generated(&self, rs: &ManifestWorkReplicaSet) -> BTreeMap<String, Arc<ManifestWork>> {
        let owner = owner_label(rs);
        self.works
            .state()
            .into_iter()
            .filter(|w| w.labels().get(REPLICA_SET_LABEL) == Some(&owner))
            .filter_map(|w| Some((w.namespace()?, w)))
            .collect()
    }

    async fn apply(&self, rs: Arc<ManifestWorkReplicaSet>) -> Result<Action, ReplicaSetError> {
        let namespace = rs.namespace().unwrap_or_default();
        let generation = rs.meta().generation.unwrap_or(0);
        let current = rs.status.clone().unwrap_or_default().conditions;
        // Each chosen cluster, with the first placement (in spec order)
        // choosing it and its decision group there.
        let mut wanted: BTreeMap<String, String> = BTreeMap::new();
        let mut group_of: BTreeMap<String, (usize, String)> = BTreeMap::new();
        let mut problems = Vec::new();
        let decisions = self.decisions.state();
        for reference in &rs.spec.placement_refs {
            let mut found = false;
            for decision in decisions.iter().filter(|d| {
                d.namespace().as_deref() == Some(namespace.as_str())
                    && d.labels().get(PLACEMENT_LABEL) == Some(&reference.name)
            }) {
                found = true;
                let index = decision
                    .labels()
                    .get(ferry_api::contract::DECISION_GROUP_INDEX_LABEL)
                    .and_then(|i| i.parse().ok())
                    .unwrap_or(0);
                let name = decision
                    .labels()
                    .get(ferry_api::contract::DECISION_GROUP_NAME_LABEL)
                    .cloned()
                    .unwrap_or_default();
                for d in decision.status.iter().flat_map(|s| s.decisions.iter()) {
                    if !wanted.contains_key(&d.cluster_name) {
                        wanted.insert(d.cluster_name.clone(), reference.name.clone());
                        group_of.insert(d.cluster_name.clone(), (index, name.clone()));
                    }
                }
            }
            if !found {
                problems.push(format!(
                    "placement {} has no PlacementDecisions",
                    reference.name
                ));
            }
        }
        let existing = self.generated(&rs);
        let params =
            PatchParams::apply(ferry_semantics::contract::REPLICA_SET_FIELD_MANAGER).force();
        let owner = owner_label(&rs);
        // Each chosen cluster's own work spec: the template with its
        // overrides and placeholders; a failure fails that cluster only.
        let rendered: BTreeMap<String, Result<ManifestWorkSpec, RenderFailure>> = wanted
            .keys()
            .map(|cluster| {
                let labels = self
                    .clusters
                    .get(&ObjectRef::new(cluster))
                    .map(|c| c.labels().clone())
                    .unwrap_or_default();
                (
                    cluster.clone(),
                    render_for_cluster(&rs.spec, cluster, &labels),
                )
            })
            .collect();
        let render_failures: Vec<String> = rendered
            .iter()
            .filter_map(|(cluster, r)| Some(format!("cluster {cluster}: {}", r.as_ref().err()?)))
            .collect();
        let is_current = |work: &ManifestWork| {
            work.namespace()
                .and_then(|c| rendered.get(&c))
                .is_some_and(|r| r.as_ref().is_ok_and(|spec| &work.spec == spec))
        };
        let now = Timestamp::now();
        let mut start: Vec<(String, String)> = Vec::new();
        let mut look_again: Option<SignedDuration> = None;
        let mut halted = Vec::new();
        let mut all_complete = true;
        for reference in &rs.spec.placement_refs {
            let mut clusters: Vec<(&(usize, String), &String)> = wanted
                .iter()
                .filter(|(_, p)| **p == reference.name)
                .filter_map(|(c, _)| Some((group_of.get(c)?, c)))
                .collect();
            clusters.sort_by(|a, b| (a.0.0, a.1).cmp(&(b.0.0, b.1)));
            let strategy = match resolve(&reference.rollout_strategy, clusters.len()) {
                Ok(strategy) => strategy,
                Err(error) => {
                    problems.push(format!("placement {}: {error}", reference.name));
                    all_complete = false;
                    continue;
                }
            };
            let states: Vec<RolloutCluster> = clusters
                .iter()
                .map(|((index, group), cluster)| {
                    let (state, again) = match rendered.get(*cluster) {
                        Some(Ok(spec)) => cluster_state(
                            existing.get(*cluster).map(|w| &**w),
                            spec,
                            &strategy,
                            now,
                        ),
                        _ => (ClusterState::Failed, None),
                    };
                    if let Some(again) = again {
                        look_again = Some(look_again.map_or(again, |l| l.min(again)));
                    }
                    RolloutCluster {
                        name: (*cluster).clone(),
                        group_index: *index,
                        group_name: group.clone(),
                        state,
                    }
                })
                .collect();
            let step = next_step(&strategy.limits, &states);
            all_complete &= step.complete;
            if step.halted {
                let failed = states
                    .iter()
                    .filter(|c| c.state == ClusterState::Failed)
                    .map(|c| c.name.as_str())
                    .collect::<Vec<_>>();
                halted.push(format!(
                    "placement {}: {} clusters failed ({}), more than maxFailures {}",
                    reference.name,
                    failed.len(),
                    failed.join(", "),
                    strategy.limits.max_failures
                ));
            }
            start.extend(step.start.into_iter().map(|c| (c, reference.name.clone())));
        }
        if !rs.spec.paused {
            let applied_at = now
                .strftime(ferry_semantics::contract::KUBE_TIME_FORMAT)
                .to_string();
            let rs = &rs;
            let (owner, applied_at, params, rendered) = (&owner, &applied_at, &params, &rendered);
            // Written a few at a time: one template change reaches a
            // thousand clusters in a few seconds, not one round trip each.
            let writes = start.iter().cloned().filter_map(|(cluster, placement)| {
                let spec = rendered.get(&cluster)?.as_ref().ok()?.clone();
                Some((cluster, placement, spec))
            });
            futures::stream::iter(writes)
                .map(|(cluster, placement, spec)| async move {
                    let work = json!({
                        "apiVersion": ManifestWork::api_version(&()),
                        "kind": ManifestWork::kind(&()),
                        "metadata": {
                            "name": rs.name_any(),
                            "namespace": cluster,
                            "labels": {REPLICA_SET_LABEL: owner, PLACEMENT_NAME_LABEL: placement},
                            "annotations": {TEMPLATE_APPLIED_AT_ANNOTATION: applied_at},
                        },
                        "spec": spec,
                    });
                    let api: Api<ManifestWork> = Api::namespaced(self.client.clone(), &cluster);
                    api.patch(&rs.name_any(), params, &Patch::Apply(&work))
                        .await
                        .map_err(failed(
                            rs,
                            format!("writing the ManifestWork of cluster {cluster}"),
                        ))
                })
                .buffer_unordered(CONCURRENT_WRITES)
                .try_collect::<Vec<_>>()
                .await?;
        }
        for (cluster, work) in &existing {
            if !wanted.contains_key(cluster) && work.meta().deletion_timestamp.is_none() {
                delete_work(&self.client, &rs, cluster).await?;
            }
        }
        // The status counts what the cache shows; the writes above come
        // back through the work watch and reconcile again.
        let works = self.generated(&rs);
        let summary = summarize(
            works
                .values()
                .filter(|w| wanted.contains_key(&w.namespace().unwrap_or_default())),
            is_current,
        );
        let placement_summary = rs
            .spec
            .placement_refs
            .iter()
            .map(|r| PlacementSummary {
                name: r.name.clone(),
                summary: summarize(
                    works
                        .values()
                        .filter(|w| w.labels().get(PLACEMENT_NAME_LABEL) == Some(&r.name)),
                    is_current,
                ),
            })
            .collect();
        let total = i32::try_from(wanted.len()).unwrap_or(i32::MAX);
        let verified = if problems.is_empty() {
            condition(
                PLACEMENT_VERIFIED,
                true,
                "AsExpected",
                "every placement is found".into(),
                generation,
                &current,
            )
        } else {
            condition(
                PLACEMENT_VERIFIED,
                false,
                "PlacementDecisionNotFound",
                problems.join("; "),
                generation,
                &current,
            )
        };
        let rolled_out = if !halted.is_empty() {
            condition(
                PLACEMENT_ROLLED_OUT,
                false,
                "Failed",
                halted.join("; "),
                generation,
                &current,
            )
        } else if all_complete && summary.updated == total && summary.total == total {
            condition(
                PLACEMENT_ROLLED_OUT,
                true,
                "Complete",
                format!("{total} clusters have the current template"),
                generation,
                &current,
            )
        } else if rs.spec.paused {
            condition(
                PLACEMENT_ROLLED_OUT,
                false,
                "Paused",
                format!(
                    "paused with {} of {total} clusters at the current template",
                    summary.updated
                ),
                generation,
                &current,
            )
        } else {
            condition(
                PLACEMENT_ROLLED_OUT,
                false,
                "Progressing",
                format!(
                    "{} of {total} clusters have the current template",
                    summary.updated
                ),
                generation,
                &current,
            )
        };
        let applied = if total > 0 && summary.applied == total {
            condition(
                MANIFESTWORK_APPLIED,
                true,
                "AsExpected",
                format!("{total} works applied"),
                generation,
                &current,
            )
        } else if total == 0 {
            condition(
                MANIFESTWORK_APPLIED,
                false,
                "NotFound",
                "no cluster is chosen".into(),
                generation,
                &current,
            )
        } else {
            condition(
                MANIFESTWORK_APPLIED,
                false,
                "Processing",
                format!("{} of {total} works applied", summary.applied),
                generation,
                &current,
            )
        };
        let mut conditions = vec![verified, rolled_out, applied];
        if !render_failures.is_empty() {
            conditions.push(condition(
                OVERRIDES_RENDERED,
                false,
                "OverrideFailed",
                render_failures.join("; "),
                generation,
                &current,
            ));
        } else if !rs.spec.overrides.is_empty() {
            conditions.push(condition(
                OVERRIDES_RENDERED,
                true,
                "AsExpected",
                format!("{} works rendered", rendered.len()),
                generation,
                &current,
            ));
        }
        let status = ManifestWorkReplicaSetStatus {
            conditions,
            summary,
            placement_summary,
        };
        if rs.status.as_ref() != Some(&status) {
            let api: Api<ManifestWorkReplicaSet> = Api::namespaced(self.client.clone(), &namespace);
            let patch = json!({
                "apiVersion": ManifestWorkReplicaSet::api_version(&()),
                "kind": ManifestWorkReplicaSet::kind(&()),
                "status": status,
            });
            api.patch_status(&rs.name_any(), &params, &Patch::Apply(&patch))
                .await
                .map_err(failed(&rs, "writing the status"))?;
        }
        // A soak or a deadline ends by time alone: look again then.
        Ok(match look_again {
            Some(after) => Action::requeue(
                Duration::try_from(after)
                    .unwrap_or_default()
                    .max(Duration::from_millis(500)),
            ),
            None => Action::await_change(),
        })
    }

    /// Deletes every generated work; with `Foreground`, holds the replica
    /// set until they are gone.
    async fn cleanup(&self, rs: Arc<ManifestWorkReplicaSet>) -> Result<Action, ReplicaSetError> {
        // Listed from the API, not the cache: the finalizer must not go
        // while a work the cache has not seen yet exists.
        let works: Api<ManifestWork> = Api::all(self.client.clone());
        let listed = works
            .list(
                &ListParams::default().labels(&format!("{REPLICA_SET_LABEL}={}", owner_label(&rs))),
            )
            .await
            .map_err(failed(&rs, "listing its works"))?;
        for work in &listed.items {
            if work.meta().deletion_timestamp.is_none() {
                delete_work(&self.client, &rs, &work.namespace().unwrap_or_default()).await?;
            }
        }
        if rs.spec.cascade_deletion_policy == "Foreground" && !listed.items.is_empty() {
            return Err(ReplicaSetError::WorksRemaining(listed.items.len()));
        }
        Ok(Action::await_change())
    }
}

async fn delete_work(
    client: &Client,
    rs: &ManifestWorkReplicaSet,
    cluster: &str,
) -> Result<(), ReplicaSetError> {
    let api: Api<ManifestWork> = Api::namespaced(client.clone(), cluster);
    match api.delete(&rs.name_any(), &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(source) => Err(failed(
            rs,
            format!("deleting the ManifestWork of cluster {cluster}"),
        )(source)),
    }
}

async fn reconcile(
    rs: Arc<ManifestWorkReplicaSet>,
    ctx: Arc<Context>,
) -> Result<Action, kube::runtime::finalizer::Error<ReplicaSetError>> {
    let wait = async {
        ctx.decisions
            .wait_until_ready()
            .await
            .map_err(|_| ReplicaSetError::NotReady)?;
        ctx.works
            .wait_until_ready()
            .await
            .map_err(|_| ReplicaSetError::NotReady)?;
        ctx.clusters
            .wait_until_ready()
            .await
            .map_err(|_| ReplicaSetError::NotReady)
    };
    wait.await
        .map_err(kube::runtime::finalizer::Error::ApplyFailed)?;
    let api: Api<ManifestWorkReplicaSet> =
        Api::namespaced(ctx.client.clone(), &rs.namespace().unwrap_or_default());
    finalizer(&api, REPLICA_SET_FINALIZER, rs, |event| async {
        match event {
            Event::Apply(rs) => ctx.apply(rs).await,
            Event::Cleanup(rs) => ctx.cleanup(rs).await,
        }
    })
    .await
}

fn error_policy(
    rs: Arc<ManifestWorkReplicaSet>,
    error: &kube::runtime::finalizer::Error<ReplicaSetError>,
    _: Arc<Context>,
) -> Action {
    if let kube::runtime::finalizer::Error::CleanupFailed(ReplicaSetError::WorksRemaining(_)) =
        error
    {
        return Action::requeue(Duration::from_secs(1));
    }
    warn!(replica_set = %rs.name_any(), %error, "retrying");
    Action::requeue(Duration::from_secs(2))
}

/// The replica sets in `namespace` referring to `placement`.
fn referring(
    replica_sets: &Store<ManifestWorkReplicaSet>,
    namespace: &str,
    placement: &str,
) -> Vec<ObjectRef<ManifestWorkReplicaSet>> {
    replica_sets
        .state()
        .iter()
        .filter(|rs| rs.namespace().as_deref() == Some(namespace))
        .filter(|rs| rs.spec.placement_refs.iter().any(|r| r.name == placement))
        .map(|rs| ObjectRef::from_obj(&**rs))
        .collect()
}

/// The replica sets whose rendering may read a cluster's labels: those
/// with overrides or a `${CLUSTER_LABEL:` placeholder.
fn using_labels(
    replica_sets: &Store<ManifestWorkReplicaSet>,
) -> Vec<ObjectRef<ManifestWorkReplicaSet>> {
    replica_sets
        .state()
        .iter()
        .filter(|rs| {
            !rs.spec.overrides.is_empty()
                || serde_json::to_string(&rs.spec.manifest_work_template)
                    .is_ok_and(|t| t.contains("${CLUSTER_LABEL:"))
        })
        .map(|rs| ObjectRef::from_obj(&**rs))
        .collect()
}

/// Runs the replica set controller until `shutdown` completes; watch errors
/// are logged and retried with backoff.
pub async fn run_replica_set_controller(
    client: Client,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let (replica_sets, rs_writer) = reflector::store();
    let (decisions, decision_writer) = reflector::store();
    let (works, work_writer) = reflector::store();
    let (clusters, cluster_writer) = reflector::store();
    let rs_stream = watch(
        Api::<ManifestWorkReplicaSet>::all(client.clone()),
        watcher::Config::default(),
    )
    .reflect(rs_writer)
    .applied_objects();
    let decision_stream = watch(
        Api::<PlacementDecision>::all(client.clone()),
        watcher::Config::default(),
    )
    .reflect(decision_writer)
    .touched_objects();
    let work_stream = watch(
        Api::<ManifestWork>::all(client.clone()),
        watcher::Config::default().labels(REPLICA_SET_LABEL),
    )
    .reflect(work_writer)
    .touched_objects();
    // Cluster labels feed overrides and `${CLUSTER_LABEL:key}`: only a
    // label change triggers, not the status heartbeats.
    let cluster_stream = watch(
        Api::<ManagedCluster>::all(client.clone()),
        watcher::Config::default(),
    )
    .reflect(cluster_writer)
    .touched_objects()
    .predicate_filter(predicates::labels, Default::default());
    let context = Arc::new(Context {
        client,
        decisions,
        works,
        clusters,
    });
    let label_sets = replica_sets.clone();
    let mapper_sets = replica_sets.clone();
    let controller = Controller::for_stream(rs_stream, replica_sets)
        .watches_stream(decision_stream, move |decision: PlacementDecision| {
            match (decision.namespace(), decision.labels().get(PLACEMENT_LABEL)) {
                (Some(namespace), Some(placement)) => {
                    referring(&mapper_sets, &namespace, placement)
                }
                _ => Vec::new(),
            }
        })
        .watches_stream(cluster_stream, move |_: ManagedCluster| {
            using_labels(&label_sets)
        })
        .watches_stream(work_stream, |work: ManifestWork| {
            work.labels()
                .get(REPLICA_SET_LABEL)
                .and_then(|v| v.split_once('.'))
                .map(|(namespace, name)| ObjectRef::new(name).within(namespace))
        });
    run_controller(
        "replica set",
        controller,
        None,
        shutdown,
        reconcile,
        error_policy,
        context,
    )
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_api::manifest_work::{ManifestWorkSpec, ManifestWorkStatus};

    fn work(
        generation: i64,
        applied_for: Option<i64>,
        spec: ManifestWorkSpec,
    ) -> Arc<ManifestWork> {
        let mut w = ManifestWork::new("w", spec);
        w.metadata.generation = Some(generation);
        w.status = applied_for.map(|g| ManifestWorkStatus {
            conditions: vec![Condition {
                type_: APPLIED.into(),
                status: "True".into(),
                reason: "Applied".into(),
                observed_generation: g,
                ..Condition::default()
            }],
            ..ManifestWorkStatus::default()
        });
        Arc::new(w)
    }

    #[test]
    fn a_work_counts_as_applied_only_for_its_current_generation() {
        let template = ManifestWorkSpec::default();
        let works = [
            work(2, Some(2), template.clone()),
            work(3, Some(2), template.clone()),
            work(1, None, template.clone()),
        ];
        let s = summarize(works.iter(), |w| w.spec == template);
        assert_eq!((s.total, s.applied, s.updated, s.available), (3, 1, 3, 0));
    }
}
