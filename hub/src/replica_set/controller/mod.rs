//! The ManifestWorkReplicaSet controller: for every cluster the referenced
//! Placements chose, a ManifestWork made from the template (named like the
//! replica set, in the cluster's namespace, labelled with the replica set
//! and the placement); a cluster leaving the decisions loses its work; the
//! status counts the works by state. Rollout `All`: every cluster at once.
//! Triggered by the replica sets, the PlacementDecisions and the generated
//! works, so only the replica sets a change touches are reconciled.
//!
//! One reconcile, in three rooms: `gather.rs` reads a snapshot (carrying
//! `now`), `decide.rs` (beside this folder) decides from it, purely, and
//! `act.rs` carries the decision out through `act/`, records before the
//! writes they announce. The revisions are the one record made before the
//! snapshot, planned purely (`revisions.rs`): the decision reads them.
//! `watches.rs` keeps the caches and wires the controller to the changes
//! `triggers.rs` maps to the replica sets they concern.

mod act;
mod gather;
mod triggers;
mod watches;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{Event, finalizer};
use kube::runtime::reflector::Store;
use kube::{Client, ResourceExt};
use tokio::sync::Mutex;
use tracing::warn;

use self::watches::{controller, watch_all};
use super::act::revisions::store_revisions;
use super::decide::decide;
use super::error::ReplicaSetError;
use super::health_pool::{HealthPool, HealthPoolConfig};
use super::revisions::{plan_revisions, protected_hashes};
use super::work_writes::Refused;
use crate::clusters::shared::ClusterCache;
use crate::metrics::RolloutMetrics;
use crate::store_ready::StoresReady;
use crate::watch::run_controller;
use ferry_api::cluster_set::{ManagedClusterSet, ManagedClusterSetBinding};
use ferry_api::contract::REPLICA_SET_FINALIZER;
use ferry_api::managed_cluster::ManagedCluster;
use ferry_api::manifest_work::ManifestWork;
use ferry_api::placement::{Placement, PlacementDecision};
use ferry_api::replica_set::{ManifestWorkReplicaSet, RollbackStatus};
use ferry_api::rollout_approval::RolloutApproval;
use k8s_openapi::api::apps::v1::ControllerRevision;

/// What every reconcile shares: the client, the caches, and the memory
/// kept between reconciles.
struct Context {
    client: Client,
    /// Every replica set: those a replica set depends on are read from it.
    replica_sets: Store<ManifestWorkReplicaSet>,
    placements: Store<Placement>,
    decisions: Store<PlacementDecision>,
    works: Store<ManifestWork>,
    clusters: Store<ManagedCluster>,
    /// The replica sets' ControllerRevisions (those with the replica-set
    /// label): read on every reconcile without a list call.
    revisions: Store<ControllerRevision>,
    approvals: Store<RolloutApproval>,
    /// The cluster sets and their bindings: a decided cluster must be in a
    /// set bound to the replica set's namespace ([`refuse_unbound`]).
    sets: Store<ManagedClusterSet>,
    bindings: Store<ManagedClusterSetBinding>,
    /// Every store above has listed: a reconcile reads none before (an
    /// unlisted set or binding would refuse bound clusters).
    ready: StoresReady,
    /// The works the API server refused, per replica set (owner label):
    /// their clusters count as failed until their rendering changes. An
    /// entry goes with its replica set; a hub restart tries them again.
    refused: Mutex<BTreeMap<String, Refused>>,
    /// The rollback each replica set (owner label) is in, remembered
    /// because the works written back reconcile again before the cache
    /// holds the status recording it; the status is the memory across
    /// restarts. An entry goes with its replica set.
    rollbacks: Mutex<BTreeMap<String, RollbackStatus>>,
    /// The resourceVersion of the last status this process wrote, per
    /// replica set (owner label). The gates' memory is the status: a
    /// reconcile must not read it from a cache that has not seen that
    /// write yet. An entry goes with its replica set.
    written: Mutex<BTreeMap<String, String>>,
    /// Where the gates' health expressions (tenant CEL) are evaluated:
    /// bounded threads, a deadline, one evaluation per namespace.
    health: HealthPool,
    /// The rollout gauges, set from each status decided.
    rollout_metrics: RolloutMetrics,
}

impl Context {
    /// Brings the works and the status of `rs` up to date: stores its
    /// revisions, gathers a snapshot, [`decide`]s, then acts.
    async fn apply(&self, rs: Arc<ManifestWorkReplicaSet>) -> Result<Action, ReplicaSetError> {
        let rs = self.current(rs).await?;
        let now = Timestamp::now();
        // The revisions: the current one stored (or renumbered), old ones
        // pruned, never the stable one or one a work still holds.
        // One read of the works serves both the revisions and the snapshot.
        let existing = self.generated(&rs);
        let protected = protected_hashes(&rs, &existing);
        let plan = plan_revisions(&rs, &self.revisions.state(), &protected);
        let stored = store_revisions(&self.client, &rs, plan).await?;
        let mut snapshot = self.gather(&rs, existing, stored, now).await;
        let mut decision = decide(&snapshot);
        // The gates' health expressions (tenant CEL) run on the bounded
        // pool, awaited, never on a runtime worker; then the decision is
        // made again, the same in everything but their verdicts.
        if !decision.health_requests.is_empty() {
            let namespace = rs.namespace().unwrap_or_default();
            let requests = std::mem::take(&mut decision.health_requests);
            drop(decision);
            for request in requests {
                let verdict = self
                    .health
                    .evaluate(&namespace, &request.expression, &request.facts)
                    .await;
                snapshot
                    .gates
                    .health
                    .insert((request.placement, request.after_group), verdict);
            }
            decision = decide(&snapshot);
        }
        self.act(&rs, &snapshot, decision).await
    }
}

async fn reconcile(
    rs: Arc<ManifestWorkReplicaSet>,
    ctx: Arc<Context>,
) -> Result<Action, kube::runtime::finalizer::Error<ReplicaSetError>> {
    ctx.ready
        .wait()
        .await
        .map_err(|_| kube::runtime::finalizer::Error::ApplyFailed(ReplicaSetError::NotReady))?;
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
    // Moved on since it was read: decide again from the newer object (its
    // watch event brings it) rather than report a failure.
    if let kube::runtime::finalizer::Error::ApplyFailed(
        superseded @ ReplicaSetError::Superseded { .. },
    ) = error
    {
        tracing::info!(replica_set = %rs.name_any(), error = %superseded, "deciding again");
        return Action::requeue(Duration::from_millis(500));
    }
    warn!(replica_set = %rs.name_any(), %error, "retrying");
    Action::requeue(Duration::from_secs(2))
}

/// Runs the replica set controller until `shutdown` completes, reconciling
/// every replica set again each `sweep`; watch errors are logged and
/// retried with backoff.
pub async fn run_replica_set_controller(
    client: Client,
    clusters: ClusterCache,
    health: HealthPoolConfig,
    rollout_metrics: RolloutMetrics,
    sweep: Duration,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let (caches, triggers) = watch_all(&client, &clusters);
    let controller = controller(&caches, triggers, sweep);
    let context = Arc::new(Context {
        ready: caches.ready(),
        replica_sets: caches.replica_sets,
        sets: caches.sets,
        bindings: caches.bindings,
        client,
        placements: caches.placements,
        decisions: caches.decisions,
        works: caches.works,
        clusters: caches.clusters,
        revisions: caches.revisions,
        approvals: caches.approvals,
        refused: Mutex::new(BTreeMap::new()),
        rollbacks: Mutex::new(BTreeMap::new()),
        written: Mutex::new(BTreeMap::new()),
        health: HealthPool::new(health),
        rollout_metrics: rollout_metrics.clone(),
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
    // Another replica leads now (or the hub stops): its gauges are the
    // ones that count.
    rollout_metrics.clear();
}
