//! The shell around [`super::render`]: watches ManagedClusters and the
//! ClusterProfiles of one namespace, server-side applies each cluster's
//! profile (spec, then status through the status subresource) when ferry's
//! part of it differs, and deletes the profile of a cluster that is gone.
//! Profiles carry no owner reference (the garbage collector would allow the
//! cluster-scoped ManagedCluster as owner, but it and the hub would then
//! both act on a cluster re-created under the same name), so deletion is
//! explicit, one deleter: on the cluster's delete event, and by a sweep of ferry's
//! profiles whose cluster does not exist (a delete missed while the hub was
//! away or not leading).
//!
//! The CRD is SIG Multicluster's, not ferry's: the hub does not install
//! it, nor the namespace. While the API server does not serve the CRD, or
//! the namespace does not exist, the leader says so (a warning and
//! `ferry_hub_cluster_profiles_publishing` at 0) and checks again every
//! [`CRD_CHECK`]; everything else the hub does goes on.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, StreamExt};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, Preconditions};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use tokio::sync::mpsc;
use tracing::{debug, info, warn};

use ferry_api::managed_cluster::ManagedCluster;
use k8s_openapi::api::core::v1::Namespace;

use super::render::{ClusterProfile, is_ferrys, render, spec_differs, status_differs};
use crate::metrics::HubMetrics;
use crate::served_gate::{CHECK_EVERY, Gate, run_while_ready};
use crate::store_ready::{StoresReady, store_ready};
use crate::watch::{SettledObjects, resync_every, run_controller, watch};

/// Field manager of the hub's ClusterProfile controller.
pub const CLUSTER_PROFILE_FIELD_MANAGER: &str = "ferry-clusterprofiles";

/// How often the leader checks whether the ClusterProfile CRD is served
/// and the namespace exists (while not, and while so, to notice either
/// going away).
pub const CRD_CHECK: Duration = CHECK_EVERY;

/// How often every cluster's profile is reconciled and ferry's profiles
/// are swept for clusters that are gone, whatever the triggers (writes
/// happen only on change).
const RESYNC: Duration = Duration::from_secs(30);

/// Deleted clusters waiting for their profile's deletion; beyond this the
/// next sweep deletes their profiles.
const GONE_QUEUE: usize = 256;

/// Where the hub publishes ClusterProfiles.
#[derive(Debug, Clone)]
pub struct ClusterProfileOptions {
    /// The namespace the profiles are written to; it must exist (the hub
    /// creates nothing else for them).
    pub namespace: String,
}

/// A profile could not be brought up to date; it is retried.
#[derive(Debug, thiserror::Error)]
pub enum ClusterProfileError {
    /// The API server refused a write or a delete.
    #[error("{action}: {source}")]
    Write {
        /// What was being done, naming the profile.
        action: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The watches have not listed everything yet (or stopped).
    #[error("the cluster and profile caches are not ready")]
    NotReady,
}

struct Context {
    client: Client,
    namespace: String,
    clusters: Store<ManagedCluster>,
    profiles: Store<ClusterProfile>,
    ready: StoresReady,
}

impl Context {
    fn api(&self) -> Api<ClusterProfile> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    fn profile(&self, name: &str) -> Option<Arc<ClusterProfile>> {
        self.profiles
            .get(&ObjectRef::new(name).within(&self.namespace))
    }

    /// Deletes ferry's profile `name` unless its cluster exists again.
    /// Only the profile seen (by UID) is deleted: one written meanwhile for
    /// a cluster of the same name stays.
    async fn delete_orphan(&self, name: &str) -> Result<(), ClusterProfileError> {
        let cluster_exists = self
            .clusters
            .get(&ObjectRef::new(name))
            .is_some_and(|c| c.meta().deletion_timestamp.is_none());
        let Some(profile) = self.profile(name) else {
            return Ok(());
        };
        if cluster_exists || !is_ferrys(&profile) {
            return Ok(());
        }
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: profile.uid(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match self.api().delete(name, &params).await {
            Ok(_) => {
                info!(profile = %name, namespace = %self.namespace, "deleted the ClusterProfile of a cluster that is gone");
                Ok(())
            }
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(()),
            Err(source) => Err(ClusterProfileError::Write {
                action: format!(
                    "deleting ClusterProfile {}/{name} of a cluster that is gone",
                    self.namespace
                ),
                source,
            }),
        }
    }

    /// Deletes every ferry profile whose cluster is gone.
    async fn sweep(&self) {
        let orphans: Vec<String> = self
            .profiles
            .state()
            .iter()
            .filter(|p| is_ferrys(p) && p.meta().deletion_timestamp.is_none())
            .map(|p| p.name_any())
            .filter(|name| self.clusters.get(&ObjectRef::new(name)).is_none())
            .collect();
        for name in orphans {
            if let Err(error) = self.delete_orphan(&name).await {
                warn!(%error, "sweeping ClusterProfiles; retried at the next sweep");
            }
        }
    }
}

async fn reconcile(
    cluster: Arc<ManagedCluster>,
    ctx: Arc<Context>,
) -> Result<Action, ClusterProfileError> {
    ctx.ready
        .wait()
        .await
        .map_err(|_| ClusterProfileError::NotReady)?;
    let name = cluster.name_any();
    if cluster.meta().deletion_timestamp.is_some() {
        ctx.delete_orphan(&name).await?;
        return Ok(Action::await_change());
    }
    let live = ctx.profile(&name);
    if let Some(live) = &live
        && !is_ferrys(live)
    {
        // Another cluster manager's profile of the same name: never ferry's
        // to write (clusterManager is immutable upstream anyway).
        warn!(profile = %name, namespace = %ctx.namespace, manager = %live.spec.cluster_manager.name,
            "a ClusterProfile of this name belongs to another cluster manager; ferry publishes none for the cluster");
        return Ok(Action::await_change());
    }
    let current = live
        .as_ref()
        .and_then(|l| l.status.as_ref())
        .map(|s| s.conditions.clone())
        .unwrap_or_default();
    let desired = render(&cluster, &current, Timestamp::now());
    let api = ctx.api();
    let params = PatchParams::apply(CLUSTER_PROFILE_FIELD_MANAGER).force();
    let failed = |action: &str| {
        let action = format!("{action} ClusterProfile {}/{name}", ctx.namespace);
        move |source| ClusterProfileError::Write { action, source }
    };
    if spec_differs(&desired, live.as_deref()) {
        let body = json!({
            "apiVersion": ClusterProfile::api_version(&()),
            "kind": ClusterProfile::kind(&()),
            "metadata": {"name": name, "labels": desired.labels},
            "spec": desired.spec,
        });
        api.patch(&name, &params, &Patch::Apply(&body))
            .await
            .map_err(failed("applying"))?;
    }
    if status_differs(&desired, live.as_deref()) {
        let body = json!({
            "apiVersion": ClusterProfile::api_version(&()),
            "kind": ClusterProfile::kind(&()),
            "metadata": {"name": name},
            "status": desired.status,
        });
        api.patch_status(&name, &params, &Patch::Apply(&body))
            .await
            .map_err(failed("writing the status of"))?;
    }
    Ok(Action::await_change())
}

fn error_policy(
    cluster: Arc<ManagedCluster>,
    error: &ClusterProfileError,
    _: Arc<Context>,
) -> Action {
    warn!(cluster = %cluster.name_any(), %error, "cluster profile controller retrying");
    Action::requeue(Duration::from_secs(2))
}

/// Whether the hub can publish: what the last check found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Readiness {
    /// The namespace exists and the CRD is served.
    Ready,
    /// The configured namespace does not exist.
    NoNamespace,
    /// The API server does not serve ClusterProfiles (no CRD).
    NoCrd,
}

/// Checks that `namespace` exists (one GET, so a missing namespace costs
/// one request per check instead of a failed write per cluster) and that
/// the API server serves ClusterProfiles (a list of at most one, 404 without
/// the CRD). Fails on any other API error.
async fn readiness(
    namespaces: &Api<Namespace>,
    profiles: &Api<ClusterProfile>,
    namespace: &str,
) -> Result<Readiness, kube::Error> {
    if namespaces.get_opt(namespace).await?.is_none() {
        return Ok(Readiness::NoNamespace);
    }
    match profiles
        .list_metadata(&ListParams::default().limit(1))
        .await
    {
        Ok(_) => Ok(Readiness::Ready),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(Readiness::NoCrd),
        Err(e) => Err(e),
    }
}

/// Says why nothing is published, once per change.
fn report(found: Readiness, namespace: &str) {
    match found {
        Readiness::Ready => {
            info!(%namespace, "publishing a ClusterProfile (multicluster.x-k8s.io) for every ManagedCluster")
        }
        Readiness::NoNamespace => {
            warn!(%namespace, "the ClusterProfile namespace does not exist: no cluster is published to the cluster inventory until it is created (the hub creates none); everything else goes on")
        }
        Readiness::NoCrd => warn!(
            crd = "clusterprofiles.multicluster.x-k8s.io",
            "the API server does not serve ClusterProfiles: no cluster is published to the cluster inventory until the CRD is installed (deploy/crds/clusterprofiles.yaml); everything else goes on"
        ),
    }
}

/// Publishes profiles until `stop` completes: the watches, the controller
/// and the deletion of gone clusters' profiles.
async fn publish(
    client: Client,
    namespace: String,
    stop: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let stop = Box::pin(stop).shared();
    let (clusters, cluster_writer) = reflector::store::<ManagedCluster>();
    let (profiles, profile_writer) = reflector::store::<ClusterProfile>();
    let (gone_tx, mut gone_rx) = mpsc::channel::<String>(GONE_QUEUE);
    // The reflector has removed a deleted cluster from the store by the
    // time `inspect` sees its event.
    let cluster_stream = watch(
        Api::<ManagedCluster>::all(client.clone()),
        watcher::Config::default(),
    )
    .reflect(cluster_writer)
    .inspect(move |event| {
        if let Ok(watcher::Event::Delete(cluster)) = event
            && gone_tx.try_send(cluster.name_any()).is_err()
        {
            debug!(cluster = %cluster.name_any(), "deletion queue full; the sweep deletes its profile");
        }
    })
    .applied_settled();
    let profile_stream = watch(
        Api::<ClusterProfile>::namespaced(client.clone(), &namespace),
        watcher::Config::default(),
    )
    .reflect(profile_writer)
    .touched_settled();
    let context = Arc::new(Context {
        client,
        namespace,
        ready: StoresReady::all(vec![store_ready(&clusters), store_ready(&profiles)]),
        clusters: clusters.clone(),
        profiles,
    });
    // A profile changed or deleted by someone else is put back.
    let controller = Controller::for_stream(cluster_stream, clusters)
        .watches_stream(profile_stream, |profile: ClusterProfile| {
            Some(ObjectRef::<ManagedCluster>::new(&profile.name_any()))
        })
        .reconcile_all_on(resync_every(RESYNC));
    let deleting = {
        let ctx = context.clone();
        let stop = stop.clone();
        async move {
            if ctx.ready.wait().await.is_err() {
                return;
            }
            let mut sweeps = tokio::time::interval(RESYNC);
            loop {
                tokio::select! {
                    () = stop.clone() => return,
                    gone = gone_rx.recv() => match gone {
                        Some(name) => {
                            if let Err(error) = ctx.delete_orphan(&name).await {
                                warn!(%error, "retried at the next sweep");
                            }
                        }
                        None => return,
                    },
                    _ = sweeps.tick() => ctx.sweep().await,
                }
            }
        }
    };
    tokio::join!(
        run_controller(
            "cluster profiles",
            controller,
            None,
            stop.clone(),
            reconcile,
            error_policy,
            context,
        ),
        deleting,
    );
}

/// Runs the ClusterProfile publisher until `shutdown` completes: while
/// `options.namespace` exists and the API server serves the ClusterProfile
/// CRD, every ManagedCluster has a profile there; while not, the hub logs
/// why, sets `metrics.cluster_profiles_publishing` to 0 and checks again
/// every [`CRD_CHECK`]. Never fails: API errors are logged and retried.
pub async fn run_cluster_profile_controller(
    client: Client,
    options: ClusterProfileOptions,
    metrics: Arc<HubMetrics>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let namespace = options.namespace;
    let profiles: Api<ClusterProfile> = Api::namespaced(client.clone(), &namespace);
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let logged = namespace.clone();
    let gate = Gate {
        what: "ClusterProfiles",
        ready: |found| found == Readiness::Ready,
        report: Box::new(move |found| report(found, &logged)),
        gauge: metrics.cluster_profiles_publishing.clone(),
    };
    run_while_ready(
        gate,
        || readiness(&namespaces, &profiles, &namespace),
        |stop| publish(client.clone(), namespace.clone(), stop).boxed(),
        shutdown,
    )
    .await;
}
