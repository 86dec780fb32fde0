//! The placement controller: keeps each Placement's PlacementDecisions and
//! status up to date from watches of Placements, ManagedClusters and
//! PlacementDecisions. A placement chooses only among the clusters of the
//! ManagedClusterSets bound to its namespace (`crate::cluster_sets`). A
//! cluster change reconciles only the placements it can affect (those whose
//! predicates select it and those that chose it); a binding change the
//! placements of its namespace; a set change those of the namespaces bound
//! to it. A reconcile writes only what changed, so a quiet fleet costs no
//! writes.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Client, Resource, ResourceExt};
use tokio::sync::Mutex;
use tracing::{debug, warn};

use super::act::{announce_hold, write_decisions, write_status};
use super::compile::compile;
use super::decide::{Decision, RESYNC, claims_of, decide};
use super::error::PlacementError;
use super::gather::{Previous, Snapshot};
use crate::clusters::shared::{ClusterCache, noticed};
use crate::clusters::taints::taints_for_placement;
use crate::events::HubEvents;
use crate::store_ready::{StoresReady, store_ready};
use crate::watch::SettledObjects;
use crate::watch::{resync_every, run_controller, watch};
use ferry_api::cluster_set::{ManagedClusterSet, ManagedClusterSetBinding};
use ferry_api::contract::PLACEMENT_LABEL;
use ferry_api::managed_cluster::ManagedCluster;
use ferry_api::placement::{Placement, PlacementDecision};

struct Context {
    client: Client,
    clusters: Store<ManagedCluster>,
    decisions: Store<PlacementDecision>,
    /// The decisions this controller last wrote, per placement UID (a
    /// placement made again under the same name starts afresh): the cache
    /// of PlacementDecisions may not show its own latest writes yet, and
    /// scheduling from an older view would move clusters between groups.
    written: Mutex<BTreeMap<String, Previous>>,
    /// The placements, to forget what was written for deleted ones.
    placements: Store<Placement>,
    /// The cluster sets, for which clusters a placement may choose.
    sets: Store<ManagedClusterSet>,
    /// The bindings of sets to namespaces.
    bindings: Store<ManagedClusterSetBinding>,
    /// Publishes the Event of a held grant.
    events: HubEvents,
    /// Every store above has listed: scheduling against a cache that has
    /// not would drop decisions it simply has not seen yet.
    ready: StoresReady,
}

impl Context {
    /// What the reconcile of `placement` reads, now.
    async fn gather(&self, placement: Arc<Placement>) -> Snapshot {
        let key = placement.uid().unwrap_or_default();
        Snapshot {
            written: self.written.lock().await.get(&key).cloned(),
            placement,
            clusters: self.clusters.state(),
            decisions: self.decisions.state(),
            sets: self.sets.state(),
            bindings: self.bindings.state(),
            now: Timestamp::now(),
        }
    }

    /// Remembers `written` as the decisions of the placement with UID
    /// `key` (None: forgets them), and forgets those of deleted placements.
    async fn remember(&self, key: String, written: Option<Previous>) {
        let mut remembered = self.written.lock().await;
        match written {
            Some(written) => {
                remembered.insert(key, written);
            }
            None => {
                remembered.remove(&key);
            }
        }
        if remembered.len() > self.placements.state().len() {
            let live: BTreeSet<String> = self
                .placements
                .state()
                .iter()
                .filter_map(|p| p.uid())
                .collect();
            remembered.retain(|uid, _| live.contains(uid));
        }
    }
}

/// Gathers what the placement's reconcile reads, [`decide`]s, and carries
/// the decision out: the decisions (fenced, see `act.rs`), then the status.
async fn reconcile(placement: Arc<Placement>, ctx: Arc<Context>) -> Result<Action, PlacementError> {
    // Scheduling against a cache that has not listed every cluster would
    // drop decisions it simply has not seen yet.
    ctx.ready
        .wait()
        .await
        .map_err(|_| PlacementError::NotReady)?;
    let key = placement.uid().unwrap_or_default();
    let snapshot = ctx.gather(placement).await;
    let placement = &snapshot.placement;
    match decide(&snapshot) {
        Decision::Deleted => {
            ctx.remember(key, None).await;
            Ok(Action::await_change())
        }
        Decision::Misconfigured { status } => {
            write_status(&ctx.client, placement, &status).await?;
            Ok(Action::await_change())
        }
        Decision::Hold { status, announce } => {
            write_status(&ctx.client, placement, &status).await?;
            if let Some(message) = announce {
                announce_hold(&ctx.events, placement, message);
            }
            Ok(Action::requeue(RESYNC))
        }
        Decision::Schedule(scheduled) => {
            if let Err(error) = write_decisions(&ctx.client, placement, &scheduled.writes).await {
                // Partly written, or refused: the cache is the best
                // account now.
                ctx.remember(key, None).await;
                return Err(error);
            }
            ctx.remember(key, Some(scheduled.written)).await;
            write_status(&ctx.client, placement, &scheduled.status).await?;
            Ok(Action::requeue(scheduled.requeue))
        }
    }
}

fn error_policy(placement: Arc<Placement>, error: &PlacementError, _: Arc<Context>) -> Action {
    if let PlacementError::Superseded { .. } = error {
        // Expected after a failover, or when the cache lags this
        // controller's own writes: decided again from a fresher view.
        debug!(placement = %placement.name_any(), %error, "placement decision superseded");
        return Action::requeue(Duration::from_millis(500));
    }
    warn!(placement = %placement.name_any(), %error, "placement not brought up to date; retrying");
    Action::requeue(Duration::from_secs(2))
}

/// The part of a cluster placements look at; a change elsewhere (the
/// liveness writer's heartbeat) reconciles nothing.
fn placement_view(cluster: &ManagedCluster) -> u64 {
    let mut hasher = DefaultHasher::new();
    cluster.labels().hash(&mut hasher);
    claims_of(cluster).hash(&mut hasher);
    for taint in taints_for_placement(cluster) {
        (&taint.key, &taint.value, &taint.effect, &taint.time_added).hash(&mut hasher);
    }
    cluster
        .meta()
        .deletion_timestamp
        .is_some()
        .hash(&mut hasher);
    hasher.finish()
}

/// The placements a change of `cluster` can affect: those whose predicates
/// select it and those whose decisions name it.
fn affected(
    cluster: &ManagedCluster,
    placements: &Store<Placement>,
    decisions: &Store<PlacementDecision>,
) -> Vec<ObjectRef<Placement>> {
    let name = cluster.name_any();
    let claims = claims_of(cluster);
    let mut out: BTreeSet<(String, String)> = decisions
        .state()
        .iter()
        .filter(|d| d.cluster_names().any(|c| c == name))
        .filter_map(|d| Some((d.namespace()?, d.labels().get(PLACEMENT_LABEL)?.clone())))
        .collect();
    for placement in placements.state() {
        // A placement that does not compile is not scheduled anyway.
        if compile(&placement.spec).is_ok_and(|c| c.selects(cluster.labels(), &claims)) {
            out.insert((
                placement.namespace().unwrap_or_default(),
                placement.name_any(),
            ));
        }
    }
    out.into_iter()
        .map(|(namespace, name)| ObjectRef::new(&name).within(&namespace))
        .collect()
}

/// The placements of the namespaces `wanted` accepts.
fn in_namespaces(
    placements: &Store<Placement>,
    wanted: impl Fn(&str) -> bool,
) -> Vec<ObjectRef<Placement>> {
    placements
        .state()
        .iter()
        .filter(|p| p.namespace().is_some_and(|ns| wanted(&ns)))
        .map(|p| ObjectRef::from_obj(p.as_ref()))
        .collect()
}

/// Runs the placement controller until `shutdown` completes, reconciling
/// every placement again each `sweep`. Watch errors never end it: they are
/// logged and retried with backoff.
pub async fn run_placement_controller(
    client: Client,
    events: HubEvents,
    clusters: ClusterCache,
    sweep: Duration,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let (placements, placement_writer) = reflector::store();
    let (decisions, decision_writer) = reflector::store();
    let placement_stream = watch(
        Api::<Placement>::all(client.clone()),
        watcher::Config::default(),
    )
    .reflect(placement_writer)
    .applied_settled();
    // Only changes placements look at pass, and every deletion.
    let cluster_stream =
        noticed(clusters.changes(), placement_view).map(|change| change.cluster().clone());
    let decision_stream = watch(
        Api::<PlacementDecision>::all(client.clone()),
        watcher::Config::default(),
    )
    .reflect(decision_writer)
    .touched_settled();
    let (sets, set_writer) = reflector::store();
    let (bindings, binding_writer) = reflector::store::<ManagedClusterSetBinding>();
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
        clusters.listed.as_store_ready(),
        store_ready(&decisions),
        store_ready(&sets),
        store_ready(&bindings),
        store_ready(&placements),
    ]);
    let context = Arc::new(Context {
        ready,
        events,
        client,
        clusters: clusters.store.clone(),
        decisions: decisions.clone(),
        written: Mutex::new(BTreeMap::new()),
        placements: placements.clone(),
        sets,
        bindings: bindings.clone(),
    });
    let mapper_placements = placements.clone();
    let binding_placements = placements.clone();
    let set_placements = placements.clone();
    let controller = Controller::for_stream(placement_stream, placements)
        .owns_stream(decision_stream)
        .watches_shared_stream(cluster_stream, move |cluster: Arc<ManagedCluster>| {
            affected(&cluster, &mapper_placements, &decisions)
        })
        .watches_stream(binding_stream, move |binding: ManagedClusterSetBinding| {
            in_namespaces(&binding_placements, |ns| {
                binding.namespace().as_deref() == Some(ns)
            })
        })
        .watches_stream(set_stream, move |set: ManagedClusterSet| {
            let name = set.name_any();
            let bound: BTreeSet<String> = bindings
                .state()
                .iter()
                .filter(|b| b.spec.cluster_set == name)
                .filter_map(|b| b.namespace())
                .collect();
            in_namespaces(&set_placements, |ns| bound.contains(ns))
        })
        .reconcile_all_on(resync_every(sweep));
    run_controller(
        "placement",
        controller,
        None,
        shutdown,
        reconcile,
        error_policy,
        context,
    )
    .await;
}
