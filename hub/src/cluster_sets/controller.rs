//! The cluster-set controller: creates OCM's well-known sets at startup
//! (`global`, every cluster; `default`, by the exclusive set label), puts
//! every ManagedCluster without a set label into `default` (as OCM's hub
//! does), and keeps each set's status (cluster count, `ClusterSetEmpty`)
//! and each binding's `Bound` condition, writing only what changed.

use std::collections::BTreeMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use ferry_semantics::contract::{
    BOUND, CLUSTER_SET_BOUND, CLUSTER_SET_EMPTY, CLUSTER_SET_FIELD_MANAGER, CLUSTER_SET_NOT_FOUND,
    CLUSTERS_SELECTED, NO_CLUSTER_MATCHED,
};
use futures::StreamExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use tracing::warn;

use super::membership::{compile_set, count_members};
use crate::conditions::{condition, conditions, same_conditions};
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

/// A set, binding or cluster could not be brought up to date; it is retried.
#[derive(Debug, thiserror::Error)]
pub enum ClusterSetError {
    /// The API server refused a write.
    #[error("{action}: {source}")]
    Write {
        /// What was being written, naming the object.
        action: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The watches have not listed everything yet (or stopped).
    #[error("the cluster, set and binding caches are not ready")]
    NotReady,
}

fn failed(action: impl Into<String>) -> impl FnOnce(kube::Error) -> ClusterSetError {
    let action = action.into();
    move |source| ClusterSetError::Write { action, source }
}

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

/// Creates the well-known sets that do not exist; one that exists is left
/// as its owner made it.
async fn create_well_known_sets(client: &Client) -> Result<(), ClusterSetError> {
    let api: Api<ManagedClusterSet> = Api::all(client.clone());
    for set in well_known_sets() {
        let name = set.name_any();
        match api.create(&PostParams::default(), &set).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(source) => {
                return Err(failed(format!("creating ManagedClusterSet {name}"))(source));
            }
        }
    }
    Ok(())
}

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
    let count = count_members(&compiled, &ctx.clusters.state());
    let generation = set.meta().generation.unwrap_or(0);
    let wanted = if count == 0 {
        let message = match compiled.problem() {
            Some(problem) => format!("no cluster belongs to the set: {problem}"),
            None => "no ManagedCluster belongs to the set".into(),
        };
        condition(
            CLUSTER_SET_EMPTY,
            true,
            NO_CLUSTER_MATCHED,
            message,
            generation,
        )
    } else {
        condition(
            CLUSTER_SET_EMPTY,
            false,
            CLUSTERS_SELECTED,
            format!("{count} ManagedClusters belong to the set"),
            generation,
        )
    };
    let current = set.status.clone().unwrap_or_default();
    let new_conditions = conditions(&current.conditions, vec![wanted]);
    let count = i32::try_from(count).unwrap_or(i32::MAX);
    if current.cluster_count == count && same_conditions(&current.conditions, &new_conditions) {
        return Ok(Action::requeue(SET_RESYNC));
    }
    let api: Api<ManagedClusterSet> = Api::all(ctx.client.clone());
    let patch = json!({
        "apiVersion": ManagedClusterSet::api_version(&()),
        "kind": ManagedClusterSet::kind(&()),
        "status": {"clusterCount": count, "conditions": new_conditions},
    });
    api.patch_status(
        &set.name_any(),
        &PatchParams::apply(CLUSTER_SET_FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await
    .map_err(failed(format!(
        "writing the status of ManagedClusterSet {}",
        set.name_any()
    )))?;
    Ok(Action::requeue(SET_RESYNC))
}

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
    let generation = binding.meta().generation.unwrap_or(0);
    let wanted = if exists {
        condition(
            BOUND,
            true,
            CLUSTER_SET_BOUND,
            format!("ManagedClusterSet {set} is bound to the namespace"),
            generation,
        )
    } else {
        condition(
            BOUND,
            false,
            CLUSTER_SET_NOT_FOUND,
            format!("ManagedClusterSet {set} does not exist"),
            generation,
        )
    };
    let current = binding.status.clone().unwrap_or_default();
    let new_conditions = conditions(&current.conditions, vec![wanted]);
    if same_conditions(&current.conditions, &new_conditions) {
        return Ok(Action::await_change());
    }
    let namespace = binding.namespace().unwrap_or_default();
    let api: Api<ManagedClusterSetBinding> = Api::namespaced(ctx.client.clone(), &namespace);
    let patch = json!({
        "apiVersion": ManagedClusterSetBinding::api_version(&()),
        "kind": ManagedClusterSetBinding::kind(&()),
        "status": {"conditions": new_conditions},
    });
    api.patch_status(
        &binding.name_any(),
        &PatchParams::apply(CLUSTER_SET_FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await
    .map_err(failed(format!(
        "writing the status of ManagedClusterSetBinding {namespace}/{}",
        binding.name_any()
    )))?;
    Ok(Action::await_change())
}

/// Labels a cluster without a set label into `default`. The patch carries
/// the resourceVersion read, so a label someone sets meanwhile is never
/// overwritten (the API server refuses the stale patch and it is retried).
async fn reconcile_cluster(
    cluster: Arc<PartialObjectMeta<ManagedCluster>>,
    ctx: Arc<Context>,
) -> Result<Action, ClusterSetError> {
    if cluster.meta().deletion_timestamp.is_some()
        || cluster.labels().contains_key(CLUSTER_SET_LABEL)
    {
        return Ok(Action::await_change());
    }
    let api: Api<ManagedCluster> = Api::all(ctx.client.clone());
    let patch = json!({
        "metadata": {
            "resourceVersion": cluster.resource_version(),
            "labels": {CLUSTER_SET_LABEL: DEFAULT_CLUSTER_SET},
        }
    });
    api.patch(
        &cluster.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map_err(failed(format!(
        "labelling ManagedCluster {} into the {DEFAULT_CLUSTER_SET} set",
        cluster.name_any()
    )))?;
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

/// Runs the cluster-set controller until `shutdown` completes. Watch errors
/// never end it; creating the well-known sets is retried with backoff.
pub async fn run_cluster_set_controller(
    client: Client,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let shutdown = futures::FutureExt::shared(Box::pin(shutdown));
    let creating = {
        let client = client.clone();
        let stop = shutdown.clone();
        async move {
            tokio::select! {
              () = stop => {}
              () = async {
              let mut delays = watch_backoff();
              loop {
                  match create_well_known_sets(&client).await {
                      Ok(()) => break,
                      Err(error) => {
                          warn!(%error, "creating the well-known cluster sets; retrying");
                          let delay = delays.next().unwrap_or(Duration::from_secs(5));
                          tokio::time::sleep(delay).await;
                      }
                  }
              }
              } => {}
            }
        }
    };
    let (clusters, cluster_writer) = reflector::store();
    let (sets, set_writer) = reflector::store();
    let (bindings, binding_writer) = reflector::store::<ManagedClusterSetBinding>();
    // Each set's count follows the clusters' labels; each binding's Bound
    // follows its set (a second watch of sets, as one stream feeds one
    // controller). Clusters: only label changes and deletions matter to sets.
    // Metadata alone (an `Api` of `PartialObjectMeta` lists and watches
    // nothing else): neither the counts nor the labelling read more.
    let cluster_stream = watch(
        Api::<PartialObjectMeta<ManagedCluster>>::all(client.clone()),
        watcher::Config::default(),
    )
    .reflect(cluster_writer)
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
    .boxed();
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
        creating,
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
