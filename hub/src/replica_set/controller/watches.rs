//! What the replica-set controller watches: the caches a reconcile reads,
//! and the controller wired to the changes that concern a replica set
//! (mapped by `triggers.rs`).

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use kube::api::Api;
use kube::runtime::controller::Controller;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, predicates, watcher};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;

use super::triggers::{labels_and_reachability, owner_of, referring, using_labels};
use crate::clusters::shared::{ClusterCache, noticed};
use crate::replica_set::depends::dependents;
use crate::store_ready::{StoresReady, store_ready};
use crate::watch::{SettledObjects, resync_every, watch};
use ferry_api::cluster_set::{ManagedClusterSet, ManagedClusterSetBinding};
use ferry_api::contract::{PLACEMENT_LABEL, REPLICA_SET_LABEL};
use ferry_api::managed_cluster::ManagedCluster;
use ferry_api::manifest_work::ManifestWork;
use ferry_api::placement::{Placement, PlacementDecision};
use ferry_api::replica_set::ManifestWorkReplicaSet;
use ferry_api::rollout_approval::RolloutApproval;
use k8s_openapi::api::apps::v1::ControllerRevision;

/// A change stream of objects, settled (see [`SettledObjects`]).
type Changes<K> = BoxStream<'static, Result<K, watcher::Error>>;

/// The caches a reconcile reads, each kept by its watch.
pub(super) struct Caches {
    /// Every replica set.
    pub replica_sets: Store<ManifestWorkReplicaSet>,
    /// Every Placement.
    pub placements: Store<Placement>,
    /// Every PlacementDecision.
    pub decisions: Store<PlacementDecision>,
    /// The works with the replica-set label.
    pub works: Store<ManifestWork>,
    /// Every ManagedCluster: the replica's shared cache.
    pub clusters: Store<ManagedCluster>,
    /// Whether `clusters` has listed.
    pub clusters_listed: StoresReady,
    /// The ControllerRevisions with the replica-set label.
    pub revisions: Store<ControllerRevision>,
    /// Every RolloutApproval.
    pub approvals: Store<RolloutApproval>,
    /// Every ManagedClusterSet.
    pub sets: Store<ManagedClusterSet>,
    /// Every ManagedClusterSetBinding.
    pub bindings: Store<ManagedClusterSetBinding>,
}

impl Caches {
    /// Ready once every cache but the replica sets' own has listed (the
    /// controller's own stream is listed before it reconciles).
    pub fn ready(&self) -> StoresReady {
        StoresReady::all(vec![
            store_ready(&self.placements),
            store_ready(&self.decisions),
            store_ready(&self.works),
            self.clusters_listed.as_store_ready(),
            store_ready(&self.revisions),
            store_ready(&self.approvals),
            store_ready(&self.sets),
            store_ready(&self.bindings),
        ])
    }
}

/// The change streams that trigger reconciles.
pub(super) struct Triggers {
    replica_sets: Changes<ManifestWorkReplicaSet>,
    dependencies: Changes<ManifestWorkReplicaSet>,
    placements: Changes<Placement>,
    decisions: Changes<PlacementDecision>,
    works: Changes<ManifestWork>,
    clusters: BoxStream<'static, Arc<ManagedCluster>>,
    revisions: Changes<ControllerRevision>,
    approvals: Changes<RolloutApproval>,
    sets: Changes<ManagedClusterSet>,
    bindings: Changes<ManagedClusterSetBinding>,
}

/// A watch of every `K` (those `config` selects) kept in a new cache,
/// passing on the objects touched.
fn cached<K>(client: &Client, config: watcher::Config) -> (Store<K>, Changes<K>)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let (store, writer) = reflector::store();
    let changes = watch(Api::<K>::all(client.clone()), config)
        .reflect(writer)
        .touched_settled()
        .boxed();
    (store, changes)
}

/// Starts no watch yet (streams are lazy): the caches and the triggers of
/// the controller, on `client`, with the replica's `clusters`.
pub(super) fn watch_all(client: &Client, clusters: &ClusterCache) -> (Caches, Triggers) {
    let every = watcher::Config::default;
    let labelled = || watcher::Config::default().labels(REPLICA_SET_LABEL);
    let (rs_store, rs_writer) = reflector::store();
    let replica_sets = watch(Api::<ManifestWorkReplicaSet>::all(client.clone()), every())
        .reflect(rs_writer)
        .applied_settled()
        .boxed();
    // A replica set created, deleted or given a new spec may hold or free
    // the replica sets depending on it (a cycle closes or opens, a missing
    // dependency appears): its generation, not its status, matters here.
    let dependencies = watch(Api::<ManifestWorkReplicaSet>::all(client.clone()), every())
        .touched_settled()
        .predicate_filter(predicates::generation, Default::default())
        .boxed();
    // A placement going or coming back, or its status naming new decision
    // objects, changes what may be deleted.
    let (placements, placement_changes) = cached(client, every());
    let (decisions, decision_changes) = cached(client, every());
    let (works, work_changes) = cached(client, labelled());
    // Cluster labels feed overrides and `${CLUSTER_LABEL:key}`: only a
    // label change triggers, not the status heartbeats.
    let cluster_changes = noticed(clusters.changes(), labels_and_reachability)
        .map(|change| change.cluster().clone())
        .boxed();
    // A revision deleted or renumbered by hand is put right at once.
    let (revisions, revision_changes) = cached(client, labelled());
    // An approval lets its replica set's gate through.
    let (approvals, approval_changes) = cached(client, every());
    // A set or binding change can refuse or admit clusters.
    let (sets, set_changes) = cached(client, every());
    let (bindings, binding_changes) = cached(client, every());
    let caches = Caches {
        replica_sets: rs_store,
        placements,
        decisions,
        works,
        clusters: clusters.store.clone(),
        clusters_listed: clusters.listed.clone(),
        revisions,
        approvals,
        sets,
        bindings,
    };
    let triggers = Triggers {
        replica_sets,
        dependencies,
        placements: placement_changes,
        decisions: decision_changes,
        works: work_changes,
        clusters: cluster_changes,
        revisions: revision_changes,
        approvals: approval_changes,
        sets: set_changes,
        bindings: binding_changes,
    };
    (caches, triggers)
}

/// The controller of the replica sets in `caches`, reconciling those each
/// change in `triggers` concerns, and every one each `sweep`.
pub(super) fn controller(
    caches: &Caches,
    triggers: Triggers,
    sweep: Duration,
) -> Controller<ManifestWorkReplicaSet> {
    let all = caches.replica_sets.clone();
    let (by_decision, by_placement, by_binding, by_label, by_name, by_work) = (
        all.clone(),
        all.clone(),
        all.clone(),
        all.clone(),
        all.clone(),
        all.clone(),
    );
    Controller::for_stream(triggers.replica_sets, all)
        .watches_stream(
            triggers.decisions,
            move |decision: PlacementDecision| match (
                decision.namespace(),
                decision.labels().get(PLACEMENT_LABEL),
            ) {
                (Some(namespace), Some(placement)) => {
                    referring(&by_decision, &namespace, placement)
                }
                _ => Vec::new(),
            },
        )
        .watches_stream(
            triggers.placements,
            move |placement: Placement| match placement.namespace() {
                Some(namespace) => referring(&by_placement, &namespace, &placement.name_any()),
                None => Vec::new(),
            },
        )
        // A set's change is looked at by the next sweep; a binding's at
        // once, for the replica sets of its namespace.
        .watches_stream(triggers.sets, |_: ManagedClusterSet| Vec::new())
        .watches_stream(
            triggers.bindings,
            move |binding: ManagedClusterSetBinding| {
                let namespace = binding.namespace();
                by_binding
                    .state()
                    .iter()
                    .filter(|rs| rs.namespace() == namespace)
                    .map(|rs| ObjectRef::from_obj(rs.as_ref()))
                    .collect::<Vec<_>>()
            },
        )
        .watches_shared_stream(triggers.clusters, move |_: Arc<ManagedCluster>| {
            using_labels(&by_label)
        })
        .watches_stream(triggers.revisions, |revision: ControllerRevision| {
            owner_of(revision.labels())
        })
        .watches_stream(triggers.approvals, |approval: RolloutApproval| {
            approval
                .namespace()
                .map(|namespace| ObjectRef::new(&approval.spec.replica_set).within(&namespace))
        })
        .watches_stream(triggers.dependencies, move |rs: ManifestWorkReplicaSet| {
            let all = by_name.state();
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
        .watches_stream(triggers.works, move |work: ManifestWork| {
            // Its replica set, and those depending on it: its status (say
            // Available) may start their clusters.
            let Some(owner) = owner_of(work.labels()) else {
                return Vec::new();
            };
            let all = by_work.state();
            let namespace = owner.namespace.clone().unwrap_or_default();
            let mut concerned: Vec<_> = dependents(&all, &namespace, &owner.name)
                .map(|rs| ObjectRef::from_obj(&**rs))
                .collect();
            concerned.push(owner);
            concerned
        })
        .reconcile_all_on(resync_every(sweep))
}
