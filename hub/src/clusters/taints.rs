//! The `cluster.ferry.dev/unreachable` taint: present (effect NoSelect) on
//! every ManagedCluster whose agent has been disconnected for longer than
//! the grace (`--unreachable-grace-seconds`); removed when it connects. A
//! cluster whose agent has never connected is not written: placements and
//! replica sets see it as carrying the taint ([`taints_for_placement`],
//! [`is_unreachable`]), so a join and a first connect write nothing here. Placements that do not tolerate it stop
//! choosing the cluster, and replica sets delete its works: the grace keeps
//! an agent restart, a session reaching its maximum age or a hub failover
//! from emptying a cluster. It follows `status.connected` and
//! `status.lastSeenTime`, which the liveness writer keeps
//! (`crate::clusters::liveness`).

use std::sync::Arc;
use std::time::Duration;

use ferry_fleet_semantics::placement::NO_SELECT;
use futures::StreamExt;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use tracing::warn;

use crate::clusters::shared::{ClusterCache, ClusterChange, noticed};
use crate::watch::run_controller;
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

/// What the taints of a cluster need.
#[derive(Debug, PartialEq)]
pub enum TaintChange {
    /// They are right as they are.
    None,
    /// They should be replaced by these (the unreachable taint added or
    /// removed, every other taint kept).
    Write(Vec<ClusterTaint>),
    /// The agent is disconnected but within its grace: look again after
    /// this long.
    After(Duration),
}

/// What the taints of `cluster` need at `now`: the unreachable taint added
/// (stamped `now`) when its agent has been silent for longer than `grace`
/// (counted from `status.lastSeenTime`; an unreadable time counts as long
/// ago), removed when it is connected. A cluster never connected needs no
/// write: it is unreachable by [`taints_for_placement`] alone.
pub fn wanted_taints(cluster: &ManagedCluster, now: Timestamp, grace: Duration) -> TaintChange {
    let status = cluster.status.clone().unwrap_or_default();
    let tainted = cluster
        .spec
        .taints
        .iter()
        .any(|t| t.key == UNREACHABLE_TAINT);
    if status.connected {
        if !tainted {
            return TaintChange::None;
        }
        return TaintChange::Write(
            cluster
                .spec
                .taints
                .iter()
                .filter(|t| t.key != UNREACHABLE_TAINT)
                .cloned()
                .collect(),
        );
    }
    if tainted {
        return TaintChange::None;
    }
    // A cluster whose agent never connected is unreachable to placements
    // without the taint written (`taints_for_placement`): writing it would
    // only be undone by its first connect, two writes per join.
    if status.last_seen_time.is_empty() {
        return TaintChange::None;
    }
    if let Ok(seen) = status.last_seen_time.parse::<Timestamp>() {
        let silent = now.duration_since(seen);
        let grace = SignedDuration::try_from(grace).unwrap_or(SignedDuration::MAX);
        if silent < grace {
            let left = Duration::try_from(grace - silent).unwrap_or(Duration::ZERO);
            // Whole seconds: lastSeenTime has no finer grain.
            return TaintChange::After(left.max(Duration::from_secs(1)));
        }
    }
    let mut taints = cluster.spec.taints.clone();
    taints.push(ClusterTaint {
        key: UNREACHABLE_TAINT.into(),
        value: String::new(),
        effect: NO_SELECT.into(),
        time_added: now
            .strftime(ferry_semantics::contract::KUBE_TIME_FORMAT)
            .to_string(),
    });
    TaintChange::Write(taints)
}

/// The taints placements should see on `cluster`: its own, and the
/// unreachable taint (stamped with the cluster's creation) when its agent
/// has never connected, which the taint controller does not write (a
/// cluster just made by `join` would otherwise cost a taint write and its
/// removal at first connect).
pub fn taints_for_placement(cluster: &ManagedCluster) -> Vec<ClusterTaint> {
    let mut taints = cluster.spec.taints.clone();
    if never_connected(cluster) && !taints.iter().any(|t| t.key == UNREACHABLE_TAINT) {
        taints.push(ClusterTaint {
            key: UNREACHABLE_TAINT.into(),
            value: String::new(),
            effect: NO_SELECT.into(),
            time_added: cluster
                .meta()
                .creation_timestamp
                .as_ref()
                .map(|t| {
                    t.0.strftime(ferry_semantics::contract::KUBE_TIME_FORMAT)
                        .to_string()
                })
                .unwrap_or_default(),
        });
    }
    taints
}

/// Whether `cluster` is unreachable to placements and replica sets: it
/// carries the unreachable taint, or its agent has never connected.
pub fn is_unreachable(cluster: &ManagedCluster) -> bool {
    never_connected(cluster)
        || cluster
            .spec
            .taints
            .iter()
            .any(|t| t.key == UNREACHABLE_TAINT)
}

/// Whether no agent of `cluster` has held a session yet.
pub fn never_connected(cluster: &ManagedCluster) -> bool {
    cluster
        .status
        .as_ref()
        .is_none_or(|s| !s.connected && s.last_seen_time.is_empty())
}

/// What the taint controller works with.
struct Context {
    client: Client,
    grace: Duration,
}

async fn reconcile(cluster: Arc<ManagedCluster>, ctx: Arc<Context>) -> Result<Action, TaintError> {
    if cluster.meta().deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let taints = match wanted_taints(&cluster, Timestamp::now(), ctx.grace) {
        TaintChange::None => return Ok(Action::await_change()),
        TaintChange::After(left) => return Ok(Action::requeue(left)),
        TaintChange::Write(taints) => taints,
    };
    // The list is replaced whole (it is atomic, as in OCM); the
    // resourceVersion makes a concurrent edit of it win and this retry.
    let patch = json!({
        "metadata": {"resourceVersion": cluster.resource_version()},
        "spec": {"taints": taints},
    });
    let api: Api<ManagedCluster> = Api::all(ctx.client.clone());
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

fn error_policy(cluster: Arc<ManagedCluster>, error: &TaintError, _: Arc<Context>) -> Action {
    warn!(cluster = %cluster.name_any(), %error, "retrying");
    Action::requeue(Duration::from_secs(2))
}

/// What the taint depends on; heartbeats change neither.
fn connection_and_taints(cluster: &ManagedCluster) -> (bool, Vec<(String, String)>) {
    let connected = cluster.status.as_ref().is_some_and(|s| s.connected);
    let taints = cluster
        .spec
        .taints
        .iter()
        .map(|taint| (taint.key.clone(), taint.effect.clone()))
        .collect();
    (connected, taints)
}

/// Keeps the unreachable taint in step with every cluster's connection,
/// tainting a disconnected cluster once it has been silent for `grace`,
/// until `shutdown` completes. Reads the replica's shared cache: every
/// cluster once it has listed, then those whose connection or taints change.
pub async fn run_taint_controller(
    client: Client,
    clusters: ClusterCache,
    grace: Duration,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let trigger = noticed(clusters.changes(), connection_and_taints).filter_map(|change| {
        std::future::ready(match change {
            ClusterChange::Applied(cluster) => Some(cluster),
            // A deleted cluster needs no taint.
            ClusterChange::Deleted(_) => None,
        })
    });
    run_controller(
        "taint",
        Controller::for_shared_stream(trigger, clusters.store.clone()),
        None,
        shutdown,
        reconcile,
        error_policy,
        Arc::new(Context { client, grace }),
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

    const GRACE: Duration = Duration::from_secs(60);

    fn at(text: &str) -> Timestamp {
        text.parse().expect("time")
    }

    fn written(change: TaintChange) -> Vec<ClusterTaint> {
        match change {
            TaintChange::Write(taints) => taints,
            other => panic!("expected a write, got {other:?}"),
        }
    }

    #[test]
    fn a_never_connected_cluster_is_not_written_but_is_unreachable() {
        for connected in [None, Some(false)] {
            let fresh = cluster(connected, vec![user_taint()]);
            assert_eq!(
                wanted_taints(&fresh, at("2026-11-23T22:00:00Z"), GRACE),
                TaintChange::None
            );
            assert!(is_unreachable(&fresh));
            let seen = taints_for_placement(&fresh);
            assert_eq!(seen.len(), 2);
            assert_eq!(seen[1].key, UNREACHABLE_TAINT);
        }
        let mut live = cluster(Some(true), vec![user_taint()]);
        if let Some(status) = live.status.as_mut() {
            status.last_seen_time = "2026-11-23T22:00:00Z".into();
        }
        assert!(!is_unreachable(&live));
    }

    #[test]
    fn a_disconnected_cluster_is_tainted_only_after_the_grace() {
        let mut c = cluster(Some(false), vec![user_taint()]);
        if let Some(status) = c.status.as_mut() {
            status.last_seen_time = "2026-11-23T22:00:00Z".into();
        }
        assert_eq!(
            wanted_taints(&c, at("2026-11-23T22:00:20Z"), GRACE),
            TaintChange::After(Duration::from_secs(40))
        );
        let taints = written(wanted_taints(&c, at("2026-11-23T22:01:00Z"), GRACE));
        assert_eq!(taints[1].key, UNREACHABLE_TAINT);
        assert_eq!(taints[1].time_added, "2026-11-23T22:01:00Z");
        // An unreadable time counts as long ago.
        if let Some(status) = c.status.as_mut() {
            status.last_seen_time = "yesterday".into();
        }
        assert!(matches!(
            wanted_taints(&c, at("2026-11-23T22:00:01Z"), GRACE),
            TaintChange::Write(_)
        ));
    }

    #[test]
    fn placements_see_a_never_connected_cluster_as_unreachable_before_its_taint_is_written() {
        let fresh = cluster(None, vec![user_taint()]);
        let seen = taints_for_placement(&fresh);
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[1].key, UNREACHABLE_TAINT);
        let mut connected_once = cluster(Some(false), vec![user_taint()]);
        if let Some(status) = connected_once.status.as_mut() {
            status.last_seen_time = "2026-11-23T22:00:00Z".into();
        }
        assert_eq!(taints_for_placement(&connected_once), vec![user_taint()]);
        let mut tainted = vec![user_taint()];
        tainted.extend(
            written(wanted_taints(
                &connected_once,
                at("2026-11-23T23:00:00Z"),
                GRACE,
            ))
            .into_iter()
            .skip(1),
        );
        assert_eq!(
            taints_for_placement(&cluster(None, tainted.clone())),
            tainted
        );
    }

    #[test]
    fn a_connected_cluster_loses_only_the_unreachable_taint() {
        let now = at("2026-11-23T22:00:00Z");
        let mut gone = cluster(Some(false), vec![user_taint()]);
        if let Some(status) = gone.status.as_mut() {
            status.last_seen_time = "2026-11-23T21:00:00Z".into();
        }
        let tainted = written(wanted_taints(&gone, now, GRACE));
        assert_eq!(
            wanted_taints(&cluster(Some(true), tainted), now, GRACE),
            TaintChange::Write(vec![user_taint()])
        );
        assert_eq!(
            wanted_taints(&cluster(Some(true), vec![user_taint()]), now, GRACE),
            TaintChange::None
        );
    }
}
