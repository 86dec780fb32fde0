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
//! `triggers.rs` maps other objects' changes to the replica sets they
//! concern.

mod act;
mod gather;
mod triggers;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{Event, finalizer};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, predicates, reflector, watcher};
use kube::{Client, ResourceExt};
use tokio::sync::Mutex;
use tracing::warn;

use self::triggers::{labels_and_reachability, owner_of, referring, using_labels};
use super::act::revisions::store_revisions;
use super::decide::decide;
use super::depends::dependents;
use super::error::ReplicaSetError;
use super::health_pool::{HealthPool, HealthPoolConfig};
use super::revisions::{plan_revisions, protected_hashes};
use super::work_writes::Refused;
use crate::metrics::RolloutMetrics;
use crate::store_ready::{StoresReady, store_ready};
use crate::watch::SettledObjects;
use crate::watch::{resync_every, run_controller, watch};
use ferry_api::cluster_set::{ManagedClusterSet, ManagedClusterSetBinding};
use ferry_api::contract::{PLACEMENT_LABEL, REPLICA_SET_FINALIZER, REPLICA_SET_LABEL};
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
    health: HealthPoolConfig,
    rollout_metrics: RolloutMetrics,
    sweep: Duration,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let (replica_sets, rs_writer) = reflector::store();
    let (placements, placement_writer) = reflector::store();
    let (decisions, decision_writer) = reflector::store();
    let (works, work_writer) = reflector::store();
    let (clusters, cluster_writer) = reflector::store();
    let (revisions, revision_writer) = reflector::store();
    let (approvals, approval_writer) = reflector::store();
    let (sets, set_writer) = reflector::store();
    let (bindings, binding_writer) = reflector::store();
    let rs_stream = watch(
        Api::<ManifestWorkReplicaSet>::all(client.clone()),
        watcher::Config::default(),
    )
    .reflect(rs_writer)
    .applied_settled();
    // A replica set created, deleted or given a new spec may hold or free
    // the replica sets depending on it (a cycle closes or opens, a missing
    // dependency appears): its generation, not its status, matters here.
    let dependency_stream = watch(
        Api::<ManifestWorkReplicaSet>::all(client.clone()),
        watcher::Config::default(),
    )
    .touched_settled()
    .predicate_filter(predicates::generation, Default::default());
    // A placement going or coming back, or its status naming new
    // decision objects, changes what may be deleted.
    let placement_stream = watch(
        Api::<Placement>::all(client.clone()),
        watcher::Config::default(),
    )
    .reflect(placement_writer)
    .touched_settled();
    let decision_stream = watch(
        Api::<PlacementDecision>::all(client.clone()),
        watcher::Config::default(),
    )
    .reflect(decision_writer)
    .touched_settled();
    let work_stream = watch(
        Api::<ManifestWork>::all(client.clone()),
        watcher::Config::default().labels(REPLICA_SET_LABEL),
    )
    .reflect(work_writer)
    .touched_settled();
    // Cluster labels feed overrides and `${CLUSTER_LABEL:key}`: only a
    // label change triggers, not the status heartbeats.
    let cluster_stream = watch(
        Api::<ManagedCluster>::all(client.clone()),
        watcher::Config::default(),
    )
    .reflect(cluster_writer)
    .touched_settled()
    .predicate_filter(labels_and_reachability, Default::default());
    // A revision deleted or renumbered by hand is put right at once.
    let revision_stream = watch(
        Api::<ControllerRevision>::all(client.clone()),
        watcher::Config::default().labels(REPLICA_SET_LABEL),
    )
    .reflect(revision_writer)
    .touched_settled();
    // An approval lets its replica set's gate through.
    let approval_stream = watch(
        Api::<RolloutApproval>::all(client.clone()),
        watcher::Config::default(),
    )
    .reflect(approval_writer)
    .touched_settled();
    // A set or binding change can refuse or admit clusters: the replica
    // sets of the binding's namespace are looked at again (a set's change
    // at the next resync).
    let set_stream = watch(
        Api::<ManagedClusterSet>::all(client.clone()),
        watcher::Config::default(),
    )
    .reflect(set_writer)
    .touched_settled();
    let binding_stream = watch(
        Api::<ManagedClusterSetBinding>::all(client.clone()),
        watcher::Config::default(),
    )
    .reflect(binding_writer)
    .touched_settled();
    let ready = StoresReady::all(vec![
        store_ready(&placements),
        store_ready(&decisions),
        store_ready(&works),
        store_ready(&clusters),
        store_ready(&revisions),
        store_ready(&approvals),
        store_ready(&sets),
        store_ready(&bindings),
    ]);
    let context = Arc::new(Context {
        replica_sets: replica_sets.clone(),
        ready,
        sets,
        bindings,
        client,
        placements,
        decisions,
        works,
        clusters,
        revisions,
        approvals,
        refused: Mutex::new(BTreeMap::new()),
        rollbacks: Mutex::new(BTreeMap::new()),
        written: Mutex::new(BTreeMap::new()),
        health: HealthPool::new(health),
        rollout_metrics: rollout_metrics.clone(),
    });
    let label_sets = replica_sets.clone();
    let mapper_sets = replica_sets.clone();
    let placement_sets = replica_sets.clone();
    let binding_sets = replica_sets.clone();
    let dependent_sets = replica_sets.clone();
    let named_sets = replica_sets.clone();
    let controller = Controller::for_stream(rs_stream, replica_sets)
        .watches_stream(decision_stream, move |decision: PlacementDecision| {
            match (decision.namespace(), decision.labels().get(PLACEMENT_LABEL)) {
                (Some(namespace), Some(placement)) => {
                    referring(&mapper_sets, &namespace, placement)
                }
                _ => Vec::new(),
            }
        })
        .watches_stream(
            placement_stream,
            move |placement: Placement| match placement.namespace() {
                Some(namespace) => referring(&placement_sets, &namespace, &placement.name_any()),
                None => Vec::new(),
            },
        )
        .watches_stream(set_stream, |_: ManagedClusterSet| Vec::new())
        .watches_stream(binding_stream, move |binding: ManagedClusterSetBinding| {
            let namespace = binding.namespace();
            binding_sets
                .state()
                .iter()
                .filter(|rs| rs.namespace() == namespace)
                .map(|rs| ObjectRef::from_obj(rs.as_ref()))
                .collect::<Vec<_>>()
        })
        .watches_stream(cluster_stream, move |_: ManagedCluster| {
            using_labels(&label_sets)
        })
        .watches_stream(revision_stream, |revision: ControllerRevision| {
            owner_of(revision.labels())
        })
        .watches_stream(approval_stream, |approval: RolloutApproval| {
            approval
                .namespace()
                .map(|namespace| ObjectRef::new(&approval.spec.replica_set).within(&namespace))
        })
        .watches_stream(dependency_stream, move |rs: ManifestWorkReplicaSet| {
            let all = named_sets.state();
            let namespace = rs.namespace().unwrap_or_default();
            // Those depending on it, and other namespaces' of its name
            // (which of them holds the name may change with it).
            let rivals = all.iter().filter(|other| {
                other.name_any() == rs.name_any() && other.namespace() != rs.namespace()
            });
            dependents(&all, &namespace, &rs.name_any())
                .chain(rivals)
                .map(|other| ObjectRef::from_obj(&**other))
                .collect::<Vec<_>>()
        })
        .watches_stream(work_stream, move |work: ManifestWork| {
            // Its replica set, and those depending on it: its status (say
            // Available) may start their clusters.
            let Some(owner) = owner_of(work.labels()) else {
                return Vec::new();
            };
            let all = dependent_sets.state();
            let namespace = owner.namespace.clone().unwrap_or_default();
            let mut concerned: Vec<_> = dependents(&all, &namespace, &owner.name)
                .map(|rs| ObjectRef::from_obj(&**rs))
                .collect();
            concerned.push(owner);
            concerned
        })
        .reconcile_all_on(resync_every(sweep));
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
