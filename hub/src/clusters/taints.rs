//! The `cluster.ferry.dev/unreachable` taint: present (effect NoSelect) on
//! every ManagedCluster whose agent is not connected, removed when it
//! connects. Placements that do not tolerate it stop choosing the cluster.
//! It follows `status.connected`, which the liveness writer keeps
//! (`crate::clusters::liveness`).

use std::sync::Arc;
use std::time::Duration;

use ferry_semantics::placement::NO_SELECT;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::{PredicateConfig, WatchStreamExt, reflector, watcher};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use tracing::warn;

use crate::watch::{run_controller, watch};
use ferry_api::contract::UNREACHABLE_TAINT;
use ferry_api::managed_cluster::{ClusterTaint, ManagedCluster};

/// How soon a taint write that lost to a concurrent change is tried again.
const CONFLICT_RETRY: Duration = Duration::from_millis(300);

/// The taint could not be written; it is retried.
#[derive(Debug, thiserror::Error)]
#[error("updating the unreachable taint of ManagedCluster {cluster}: {source}")]
pub struct TaintError {
    /// The cluster.
    pub cluster: String,
    /// The API error.
    #[source]
    pub source: kube::Error,
}

/// The taints `cluster` should carry: its own, with the unreachable taint
/// added (stamped `now`) or removed as its connection says; None when they
/// are right already.
pub fn wanted_taints(cluster: &ManagedCluster, now: &str) -> Option<Vec<ClusterTaint>> {
    let connected = cluster.status.as_ref().is_some_and(|s| s.connected);
    let tainted = cluster
        .spec
        .taints
        .iter()
        .any(|t| t.key == UNREACHABLE_TAINT);
    match (connected, tainted) {
        (true, true) => Some(
            cluster
                .spec
                .taints
                .iter()
                .filter(|t| t.key != UNREACHABLE_TAINT)
                .cloned()
                .collect(),
        ),
        (false, false) => {
            let mut taints = cluster.spec.taints.clone();
            taints.push(ClusterTaint {
                key: UNREACHABLE_TAINT.into(),
                value: String::new(),
                effect: NO_SELECT.into(),
                time_added: now.into(),
            });
            Some(taints)
        }
        _ => None,
    }
}

async fn reconcile(
    cluster: Arc<ManagedCluster>,
    client: Arc<Client>,
) -> Result<Action, TaintError> {
    if cluster.meta().deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let now = Timestamp::now()
        .strftime(ferry_semantics::contract::KUBE_TIME_FORMAT)
        .to_string();
    let Some(taints) = wanted_taints(&cluster, &now) else {
        return Ok(Action::await_change());
    };
    // The list is replaced whole (it is atomic, as in OCM); the
    // resourceVersion makes a concurrent edit of it win and this retry.
    let patch = json!({
        "metadata": {"resourceVersion": cluster.resource_version()},
        "spec": {"taints": taints},
    });
    let api: Api<ManagedCluster> = Api::all((*client).clone());
    match api
        .patch(
            &cluster.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => Ok(Action::await_change()),
        // Changed meanwhile (e.g. the cluster-set controller labelled it):
        // try again from the cache shortly. Waiting for the watch is not
        // enough, as a change that leaves connection and taints alone is
        // filtered out and would never bring the cluster back here.
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(Action::requeue(CONFLICT_RETRY)),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(Action::await_change()),
        Err(source) => Err(TaintError {
            cluster: cluster.name_any(),
            source,
        }),
    }
}

fn error_policy(cluster: Arc<ManagedCluster>, error: &TaintError, _: Arc<Client>) -> Action {
    warn!(cluster = %cluster.name_any(), %error, "retrying");
    Action::requeue(Duration::from_secs(2))
}

/// What the taint depends on; heartbeats change neither.
fn connection_and_taints(cluster: &ManagedCluster) -> Option<u64> {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let mut hasher = DefaultHasher::new();
    cluster
        .status
        .as_ref()
        .is_some_and(|s| s.connected)
        .hash(&mut hasher);
    for taint in &cluster.spec.taints {
        (&taint.key, &taint.effect).hash(&mut hasher);
    }
    Some(hasher.finish())
}

/// Keeps the unreachable taint in step with every cluster's connection
/// until `shutdown` completes.
pub async fn run_taint_controller(
    client: Client,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let (reader, writer) = reflector::store();
    let trigger = watch(
        Api::<ManagedCluster>::all(client.clone()),
        watcher::Config::default(),
    )
    .reflect(writer)
    .applied_objects()
    .predicate_filter(connection_and_taints, PredicateConfig::default());
    run_controller(
        "taint",
        Controller::for_stream(trigger, reader),
        None,
        shutdown,
        reconcile,
        error_policy,
        Arc::new(client),
    )
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_api::managed_cluster::{ManagedClusterSpec, ManagedClusterStatus};

    fn cluster(connected: Option<bool>, taints: Vec<ClusterTaint>) -> ManagedCluster {
        let mut c = ManagedCluster::new(
            "a",
            ManagedClusterSpec {
                taints,
                ..ManagedClusterSpec::default()
            },
        );
        c.status = connected.map(|connected| ManagedClusterStatus {
            connected,
            ..ManagedClusterStatus::default()
        });
        c
    }

    fn user_taint() -> ClusterTaint {
        ClusterTaint {
            key: "example.com/maintenance".into(),
            effect: NO_SELECT.into(),
            ..ClusterTaint::default()
        }
    }

    #[test]
    fn a_disconnected_or_never_connected_cluster_gets_the_taint_once() {
        for connected in [None, Some(false)] {
            let taints = wanted_taints(
                &cluster(connected, vec![user_taint()]),
                "2026-11-23T22:00:00Z",
            )
            .expect("taint added");
            assert_eq!(taints.len(), 2);
            assert_eq!(taints[0], user_taint());
            assert_eq!(taints[1].key, UNREACHABLE_TAINT);
            assert_eq!(taints[1].time_added, "2026-11-23T22:00:00Z");
            assert_eq!(wanted_taints(&cluster(connected, taints), "later"), None);
        }
    }

    #[test]
    fn a_connected_cluster_loses_only_the_unreachable_taint() {
        let tainted = wanted_taints(&cluster(Some(false), vec![user_taint()]), "t").expect("added");
        assert_eq!(
            wanted_taints(&cluster(Some(true), tainted), "t"),
            Some(vec![user_taint()])
        );
        assert_eq!(
            wanted_taints(&cluster(Some(true), vec![user_taint()]), "t"),
            None
        );
    }
}
