//! The cluster-set controller: creates OCM's well-known sets at startup
//! (`global`, every cluster; `default`, by the exclusive set label), puts
//! every ManagedCluster without a set label into `default` (as OCM's hub
//! does), and keeps each set's status (cluster count, `ClusterSetEmpty`)
//! and each binding's `Bound` condition, writing only what changed.

use std::collections::BTreeMap;
use std::future::Future;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Client, Resource, ResourceExt};
use tracing::warn;

use super::act::{create_missing_sets, label_into_default, write_binding_status, write_set_status};
use super::decide::{SetSeen, binding_status, set_status};
pub use super::error::ClusterSetError;
use super::membership::{compile_set, count_members};
use crate::store_ready::{StoresReady, store_ready};
use crate::watch::SettledObjects;
use crate::watch::{resync_every, run_controller, watch, watch_backoff};
use ferry_api::cluster_set::{
    ManagedClusterSelector, ManagedClusterSet, ManagedClusterSetBinding, ManagedClusterSetSpec,
    SelectorType,
};
use ferry_api::contract::{CLUSTER_SET_LABEL, DEFAULT_CLUSTER_SET, GLOBAL_CLUSTER_SET};
use ferry_api::managed_cluster::ManagedCluster;
use ferry_api::placement::LabelSelector;

/// How often every set, binding and unlabelled cluster is reconciled
/// whatever its triggers ([`resync_every`]; writes happen only on change).
const SET_RESYNC: Duration = Duration::from_secs(30);

struct Context {
    client: Client,
    /// Every cluster's metadata: a set's count reads labels alone.
    clusters: Store<PartialObjectMeta<ManagedCluster>>,
    sets: Store<ManagedClusterSet>,
    /// The clusters have listed (a set's count needs all of them).
    clusters_ready: StoresReady,
    /// The sets have listed (a binding's Bound needs its set).
    sets_ready: StoresReady,
}

/// OCM's well-known sets: `global` selects every cluster, `default` holds
/// the clusters labelled into it (the hub labels every unlabelled cluster).
pub fn well_known_sets() -> [ManagedClusterSet; 2] {
    let global = ManagedClusterSet::new(
        GLOBAL_CLUSTER_SET,
        ManagedClusterSetSpec {
            cluster_selector: ManagedClusterSelector {
                selector_type: SelectorType::LabelSelector,
                label_selector: Some(LabelSelector::default()),
            },
        },
    );
    let default = ManagedClusterSet::new(DEFAULT_CLUSTER_SET, ManagedClusterSetSpec::default());
    [global, default]
}

/// Gathers a set's members at `now`, decides its status, writes it when
/// it changed.
async fn reconcile_set(
    set: Arc<ManagedClusterSet>,
    ctx: Arc<Context>,
) -> Result<Action, ClusterSetError> {
    ctx.clusters_ready
        .wait()
        .await
        .map_err(|_| ClusterSetError::NotReady)?;
    if set.meta().deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let compiled = compile_set(&set);
    let current = set.status.clone().unwrap_or_default();
    let seen = SetSeen {
        generation: set.meta().generation.unwrap_or(0),
        current: &current,
        members: count_members(&compiled, &ctx.clusters.state()),
        problem: compiled.problem(),
    };
    if let Some(status) = set_status(&seen, Timestamp::now()) {
        write_set_status(&ctx.client, &set.name_any(), &status).await?;
    }
    Ok(Action::requeue(SET_RESYNC))
}

/// Gathers whether a binding's set exists at `now`, decides its `Bound`,
/// writes it when it changed.
async fn reconcile_binding(
    binding: Arc<ManagedClusterSetBinding>,
    ctx: Arc<Context>,
) -> Result<Action, ClusterSetError> {
    ctx.sets_ready
        .wait()
        .await
        .map_err(|_| ClusterSetError::NotReady)?;
    if binding.meta().deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let set = &binding.spec.cluster_set;
    let exists = ctx
        .sets
        .get(&ObjectRef::new(set))
        .is_some_and(|s| s.meta().deletion_timestamp.is_none());
    let current = binding.status.clone().unwrap_or_default();
    let generation = binding.meta().generation.unwrap_or(0);
    if let Some(status) = binding_status(set, exists, generation, &current, Timestamp::now()) {
        let namespace = binding.namespace().unwrap_or_default();
        write_binding_status(&ctx.client, &namespace, &binding.name_any(), &status).await?;
    }
    Ok(Action::await_change())
}

/// Labels a cluster without a set label into `default` (a label someone
/// else sets meanwhile wins: see [`label_into_default`]).
async fn reconcile_cluster(
    cluster: Arc<PartialObjectMeta<ManagedCluster>>,
    ctx: Arc<Context>,
) -> Result<Action, ClusterSetError> {
    if cluster.meta().deletion_timestamp.is_none()
        && !cluster.labels().contains_key(CLUSTER_SET_LABEL)
    {
        label_into_default(&ctx.client, &cluster).await?;
    }
    Ok(Action::await_change())
}

fn error_policy<K: Resource<DynamicType = ()>>(
    object: Arc<K>,
    error: &ClusterSetError,
    _: Arc<Context>,
) -> Action {
    warn!(object = %object.meta().name.clone().unwrap_or_default(), %error, "cluster set controller retrying");
    Action::requeue(Duration::from_secs(2))
}

fn labels_hash(cluster: &PartialObjectMeta<ManagedCluster>) -> u64 {
    let mut hasher = DefaultHasher::new();
    cluster.labels().hash(&mut hasher);
    cluster
        .meta()
        .deletion_timestamp
        .is_some()
        .hash(&mut hasher);
    hasher.finish()
}

/// Creates the well-known sets, retrying with backoff until they exist or
/// `stop` completes.
async fn create_well_known_sets(client: Client, stop: impl Future<Output = ()>) {
    let creating = async {
        let mut delays = watch_backoff();
        while let Err(error) = create_missing_sets(&client, &well_known_sets()).await {
            warn!(%error, "creating the well-known cluster sets; retrying");
            let delay = delays.next().unwrap_or(Duration::from_secs(5));
            tokio::time::sleep(delay).await;
        }
    };
    tokio::select! {
        () = stop => {}
        () = creating => {}
    }
}

/// The clusters' metadata (each set's count and the labelling read labels
/// alone), passed on only when a cluster's labels or deletion changed.
fn cluster_label_changes(
    client: &Client,
    writer: reflector::store::Writer<PartialObjectMeta<ManagedCluster>>,
) -> impl Stream<Item = Result<PartialObjectMeta<ManagedCluster>, watcher::Error>> + Send + use<> {
    watch(
        Api::<PartialObjectMeta<ManagedCluster>>::all(client.clone()),
        watcher::Config::default(),
    )
    .reflect(writer)
    .scan(BTreeMap::<String, u64>::new(), |seen, event| {
        let passed = match event {
            Ok(watcher::Event::Apply(c) | watcher::Event::InitApply(c)) => {
                let view = labels_hash(&c);
                (seen.insert(c.name_any(), view) != Some(view)).then_some(Ok(c))
            }
            Ok(watcher::Event::Delete(c)) => {
                seen.remove(&c.name_any());
                Some(Ok(c))
            }
            Ok(watcher::Event::Init | watcher::Event::InitDone) => None,
            Err(e) => Some(Err(e)),
        };
        std::future::ready(Some(passed))
    })
    .filter_map(std::future::ready)
}

/// Runs the cluster-set controller until `shutdown` completes. Watch errors
/// never end it; creating the well-known sets is retried with backoff.
pub async fn run_cluster_set_controller(
    client: Client,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let shutdown = futures::FutureExt::shared(Box::pin(shutdown));
    let (clusters, cluster_writer) = reflector::store();
    let (sets, set_writer) = reflector::store();
    let (bindings, binding_writer) = reflector::store::<ManagedClusterSetBinding>();
    // Each set's count follows the clusters' labels; each binding's Bound
    // follows its set (a second watch of sets, as one stream feeds one
    // controller).
    let cluster_stream = cluster_label_changes(&client, cluster_writer).boxed();
    let set_stream = watch(
        Api::<ManagedClusterSet>::all(client.clone()),
        watcher::Config::default(),
    )
    .reflect(set_writer)
    .touched_settled()
    .boxed();
    let binding_stream = watch(
        Api::<ManagedClusterSetBinding>::all(client.clone()),
        watcher::Config::default(),
    )
    .reflect(binding_writer)
    .touched_settled();
    let context = Arc::new(Context {
        client: client.clone(),
        clusters_ready: StoresReady::all(vec![store_ready(&clusters)]),
        sets_ready: StoresReady::all(vec![store_ready(&sets)]),
        clusters: clusters.clone(),
        sets: sets.clone(),
    });
    let all_sets = sets.clone();
    let set_controller = Controller::for_stream(set_stream, sets.clone())
        .watches_stream(
            cluster_stream,
            move |_: PartialObjectMeta<ManagedCluster>| {
                all_sets
                    .state()
                    .iter()
                    .map(|s| ObjectRef::from_obj(s.as_ref()))
                    .collect::<Vec<_>>()
            },
        )
        .reconcile_all_on(resync_every(SET_RESYNC));
    let bindings_of_set = bindings.clone();
    let set_changes = watch(
        Api::<ManagedClusterSet>::all(client.clone()),
        watcher::Config::default(),
    )
    .touched_settled();
    let binding_controller = Controller::for_stream(binding_stream, bindings.clone())
        .watches_stream(set_changes, move |set: ManagedClusterSet| {
            let name = set.name_any();
            bindings_of_set
                .state()
                .iter()
                .filter(|b| b.spec.cluster_set == name)
                .map(|b| ObjectRef::from_obj(b.as_ref()))
                .collect::<Vec<_>>()
        })
        .reconcile_all_on(resync_every(SET_RESYNC));
    // Labelling reads a cluster's labels alone: its own store holds their
    // metadata, not whole ManagedClusters (kube's `Controller::new`, used
    // here before, kept every cluster whole with its managedFields: about
    // 6 KiB per cluster of an idle hub's heap).
    let (label_view, label_writer) = reflector::store();
    let label_stream = watch(
        Api::<PartialObjectMeta<ManagedCluster>>::all(client.clone()),
        watcher::Config::default(),
    )
    .reflect(label_writer)
    .applied_settled();
    let label_controller =
        Controller::for_stream(label_stream, label_view).reconcile_all_on(resync_every(SET_RESYNC));
    tokio::join!(
        create_well_known_sets(client.clone(), shutdown.clone()),
        run_controller(
            "cluster sets",
            set_controller,
            None,
            shutdown.clone(),
            reconcile_set,
            error_policy,
            context.clone(),
        ),
        run_controller(
            "cluster set bindings",
            binding_controller,
            None,
            shutdown.clone(),
            reconcile_binding,
            error_policy,
            context.clone(),
        ),
        run_controller(
            "default cluster set label",
            label_controller,
            None,
            shutdown,
            reconcile_cluster,
            error_policy,
            context,
        ),
    );
}
