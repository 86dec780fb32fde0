//! Wires the hub together: the work index, the agents' gRPC service
//! (`agents.rs`), the probe and webhook endpoints, and the leader's
//! controllers (`controllers.rs`).

/// The gRPC service agents connect to.
mod agents;
/// The replica's agent certificates: CA, account watch, revocation.
mod certificates;
/// The controllers that run in the leading replica.
mod controllers;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use kube::runtime::reflector;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tracing::warn;

use agents::serve_agents;
use certificates::agent_certificates;
use controllers::LeaderControllers;

use crate::admission::hub_writes_policy::DEFAULT_HUB_USERNAME;
use crate::admission::policies::own_username;
use crate::admission::watchdog::PolicyHealth;
use crate::admission::webhook::{self, AdmissionError, AdmissionOptions};
use crate::agent_certs::error::AgentCaError;
use crate::agent_certs::standing::Standing;
use crate::api_client::requests::ApiRequests;
use crate::certs::reload::CertLoadError;
use crate::cluster_profile::ClusterProfileOptions;
use crate::clusters::legacy_group::{LegacyClustersError, carry_over_legacy_clusters};
use crate::clusters::liveness::{ClusterLiveness, reassert_held_sessions, run_liveness_sweeper};
use crate::clusters::replica_lease::{ReplicaLease, ReplicaLeaseError, keep as keep_replica_lease};
use crate::clusters::shared::ClusterCache;
use crate::events::HubEvents;
use crate::grpc::config::{GrpcTls, SessionConfig};
use crate::grpc::identity::AgentAuthenticator;
use crate::grpc::session::Distributor;
use crate::leader::{LeaderElection, LeaderError, elect, while_leading};
use crate::metrics::HubMetrics;
use crate::probes;
pub use crate::replica_set::health_pool::HealthPoolConfig;
use crate::status::writer::StatusWriter;
use crate::store_ready::{StoresReady, store_ready};
use crate::works::deletion::WorkDeletion;
use crate::works::index::WorkIndex;
use ferry_api::managed_cluster::ManagedCluster;

/// Why the hub stopped.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    /// The gRPC server failed.
    #[error("gRPC server: {0}")]
    Grpc(#[from] tonic::transport::Error),
    /// The agent port's certificate, key or client CA could not be loaded.
    #[error("gRPC TLS configuration: {0}")]
    Tls(#[source] CertLoadError),
    /// The probe server failed.
    #[error("probe server: {0}")]
    Probes(#[source] std::io::Error),
    /// The admission webhook failed.
    #[error("admission webhook: {0}")]
    Admission(#[from] AdmissionError),
    /// Leader election could not start.
    #[error(transparent)]
    Leader(#[from] LeaderError),
    /// ManagedClusters of an earlier hub could not be carried over.
    #[error(transparent)]
    LegacyClusters(#[from] LegacyClustersError),
    /// This replica's Lease could not be set up.
    #[error(transparent)]
    ReplicaLease(#[from] ReplicaLeaseError),
    /// The agent CA could not be read, created or used.
    #[error(transparent)]
    AgentCa(#[from] AgentCaError),
}

/// Listeners and tunables of one hub replica.
pub struct HubListeners {
    /// Where agents connect.
    pub grpc: TcpListener,
    /// TLS for `grpc`; None serves plaintext (only for tests and local use).
    pub grpc_tls: Option<GrpcTls>,
    /// Where `/healthz`, `/readyz` and `/metrics` are served, if anywhere.
    pub probes: Option<TcpListener>,
    /// The ManifestWork admission webhook, if this replica serves it.
    pub admission: Option<AdmissionOptions>,
    /// Leader election among replicas; None runs every controller here
    /// (one replica).
    pub leader_election: Option<LeaderElection>,
    /// This replica's own Lease, which vouches for its agents' sessions.
    pub replica_lease: ReplicaLease,
    /// How long a cluster's agent may be disconnected before the cluster
    /// is tainted unreachable (and placements that do not tolerate it drop
    /// it): restarts and failovers shorter than this move nothing.
    pub unreachable_grace: Duration,
    /// Whether the leader checks the admission policies stay installed
    /// and enforced, fails `/readyz` naming any that is not, and
    /// re-applies it (`crate::admission::watchdog`).
    pub watch_policies: bool,
    /// How often the leader reconciles every Placement and
    /// ManifestWorkReplicaSet again with no change seen: the net for an
    /// event lost any other way (a reconcile writes only what changed).
    pub controller_sweep: Duration,
    /// The limits of the pool rollout gates' health expressions run on.
    pub health_pool: HealthPoolConfig,
    /// Where the leader publishes a ClusterProfile per ManagedCluster;
    /// None publishes none.
    pub cluster_profiles: Option<ClusterProfileOptions>,
    /// The counters `client` counts its requests into
    /// (`crate::api_client::api_client`), served at `/metrics` as
    /// `ferry_hub_api_requests_total`; None serves none (a client built
    /// without them counts nothing).
    pub api_requests: Option<ApiRequests>,
}

/// The `reportingInstance` of the hub's Events: the pod's name, which
/// Kubernetes sets as the container's hostname (`POD_NAME`, when the
/// deployment passes it from the downward API, wins).
fn reporting_instance() -> Option<String> {
    ["POD_NAME", "HOSTNAME"]
        .into_iter()
        .find_map(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
}

/// The default of [`HubListeners::controller_sweep`]
/// (`--controller-sweep-seconds`).
pub const DEFAULT_CONTROLLER_SWEEP: Duration = Duration::from_secs(30);

/// Turns true once `shutdown` completes: every part of the hub stops on it.
fn stop_on(shutdown: impl Future<Output = ()> + Send + 'static) -> watch::Receiver<bool> {
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    stop_rx
}

/// Completes once `stopping` turns true (or its sender is gone).
pub(crate) async fn stopped(mut stopping: watch::Receiver<bool>) {
    let _ = stopping.wait_for(|s| *s).await;
}

/// Keeps the leader gauge at this replica's leadership until the hub
/// stops (the gauge reads 0 then). The Lease is released once every
/// receiver of the election is dropped, so this ends with the hub.
fn report_leadership(
    mut leading: watch::Receiver<bool>,
    gauge: prometheus_client::metrics::gauge::Gauge,
    mut stopping: watch::Receiver<bool>,
) {
    tokio::spawn(async move {
        loop {
            gauge.set(i64::from(*leading.borrow_and_update()));
            tokio::select! {
                changed = leading.changed() => if changed.is_err() { break },
                _ = stopping.wait_for(|s| *s) => break,
            }
        }
        gauge.set(0);
    });
}

/// The identities the hub-owned-writes policy lets write: the one the hub
/// runs as (asked of the API server; the chart's default when it cannot
/// say). None when the policies are not watched.
async fn hub_writers(client: &Client, watch_policies: bool) -> Vec<String> {
    if !watch_policies {
        return Vec::new();
    }
    match own_username(client).await {
        Ok(name) => vec![name],
        Err(error) => {
            warn!(%error, "asking who the hub is; the admission policy check expects the chart's default ServiceAccount");
            vec![DEFAULT_HUB_USERNAME.to_string()]
        }
    }
}

/// Serves `/healthz`, `/readyz` and `/metrics` on `listener`, if any,
/// until `stopping` turns true. Fails when the server fails.
async fn serve_probes(
    listener: Option<TcpListener>,
    router: axum::Router,
    stopping: watch::Receiver<bool>,
) -> Result<(), HubError> {
    let Some(listener) = listener else {
        return Ok(());
    };
    axum::serve(probes::nodelay_listener(listener), router)
        .with_graceful_shutdown(stopped(stopping))
        .await
        .map_err(HubError::Probes)
}

/// Serves the admission webhook with `options`, if any, until `stopping`
/// turns true. Fails when its certificate cannot be loaded or it fails.
async fn serve_admission(
    client: Client,
    options: Option<AdmissionOptions>,
    policies: Option<PolicyHealth>,
    metrics: &HubMetrics,
    stopping: watch::Receiver<bool>,
) -> Result<(), HubError> {
    let Some(options) = options else {
        return Ok(());
    };
    webhook::serve(
        client,
        options,
        policies,
        metrics.certificate_reloads.clone(),
        metrics.webhook_review_seconds.clone(),
        stopped(stopping),
    )
    .await
    .map_err(HubError::from)
}

/// The replica's one copy of every ManagedCluster: the cache readers share
/// (with its readiness and change feed), the writer its watch fills, and
/// whom a change wakes (certificate sessions, when the hub issues
/// certificates).
struct SharedClusters {
    cache: ClusterCache,
    writer: reflector::store::Writer<ManagedCluster>,
    standing: Option<Arc<Standing>>,
}

/// Holds this replica's Lease and keeps the clusters' liveness: returns
/// the liveness writer, a cache of every ManagedCluster, and what keeps
/// them (the Lease, the cache's watch re-asserting this replica's
/// sessions, the leader's sweep), to run for as long as the hub runs.
/// Fails when the Lease cannot be set up.
async fn keep_liveness(
    client: &Client,
    lease: &ReplicaLease,
    metrics: &HubMetrics,
    heartbeat: Duration,
    leading: Option<watch::Receiver<bool>>,
    cache: SharedClusters,
    stop_rx: watch::Receiver<bool>,
) -> Result<(ClusterLiveness, impl Future<Output = ()>), HubError> {
    // Sessions name this replica as their server only once its Lease
    // vouches for them; the leader's sweep would otherwise mark them
    // disconnected at once. Kept by the returned future: dropping every
    // receiver releases the Lease.
    let mut lease_held = keep_replica_lease(client.clone(), lease).await?;
    if lease_held.wait_for(|held| *held).await.is_err() {
        warn!("the replica Lease task ended before the Lease was held");
    }
    let liveness = ClusterLiveness::new(client.clone(), lease)
        .with_disconnected_gauge(metrics.clusters_disconnected.clone())
        .with_deletions_held_gauge(metrics.clusters_deletions_held.clone());
    // One copy of every ManagedCluster per replica, kept by the reassert
    // watch: agent authentication reads whether a cluster is accepted here
    // instead of a GET per connect, the leader's liveness sweep reads
    // the clusters here instead of a LIST per heartbeat, and the leader's
    // placement, taint and replica-set controllers read it and its feed
    // instead of a watch and a cache each.
    let SharedClusters {
        cache,
        writer: cluster_cache_writer,
        standing,
    } = cache;
    let (cluster_cache, clusters_listed) = (cache.store.clone(), cache.listed.clone());
    // Certificate sessions of a cluster are woken when it changes, and the
    // leader's controllers are triggered.
    let reasserting = reassert_held_sessions(
        liveness.clone(),
        cluster_cache_writer,
        move |event| {
            if let Some(standing) = &standing {
                standing.cluster_event(event);
            }
            cache.publish(event);
        },
        stopped(stop_rx.clone()),
    );
    let (swept, swept_clusters) = (liveness.clone(), cluster_cache.clone());
    let sweeper = while_leading(leading, stop_rx, "liveness sweep", move |stop| {
        run_liveness_sweeper(
            swept.clone(),
            swept_clusters.clone(),
            clusters_listed.clone(),
            heartbeat,
            heartbeat * 5,
            stop,
        )
    });
    let keeping = async move {
        let _lease = lease_held;
        tokio::join!(reasserting, sweeper);
    };
    Ok((liveness, keeping))
}

/// Runs one hub replica until `shutdown` completes or a component fails.
/// Fails when leader election or the replica's Lease cannot start, or when
/// the gRPC, probe or webhook server fails.
pub async fn run_hub(
    client: Client,
    listeners: HubListeners,
    session: SessionConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), HubError> {
    let index = WorkIndex::new();
    let metrics = Arc::new(HubMetrics::default());
    let mut registry = Registry::default();
    metrics.register(&mut registry);
    if let Some(api_requests) = &listeners.api_requests {
        api_requests.register(registry.sub_registry_with_prefix("ferry_hub"));
    }
    let events = HubEvents::start(client.clone(), reporting_instance(), metrics.clone());
    let stop_rx = stop_on(shutdown);
    // Before anything reads a cluster: a cluster still in the group an
    // earlier hub used would read as gone.
    carry_over_legacy_clusters(&client).await?;
    let leading = match &listeners.leader_election {
        Some(election) => Some(elect(client.clone(), election).await?),
        None => None,
    };
    if let Some(leading) = leading.clone() {
        report_leadership(leading, metrics.leader.clone(), stop_rx.clone());
    }
    let policy_health = PolicyHealth::default();
    let watched_policies = listeners.watch_policies.then(|| policy_health.clone());
    let hub_writers = hub_writers(&client, listeners.watch_policies).await;
    let (cluster_cache, cluster_cache_writer) = reflector::store();
    let clusters_listed = StoresReady::all(vec![store_ready(&cluster_cache)]);
    let clusters = ClusterCache::new(cluster_cache.clone(), clusters_listed.clone());
    let (certificates, account_watch) = Box::pin(agent_certificates(
        &client,
        listeners.grpc_tls.as_ref(),
        &session.auth.service_account,
        cluster_cache.clone(),
        &clusters_listed,
        stop_rx.clone(),
    ))
    .await?;
    let account_watch = Box::pin(account_watch);
    let (liveness, keeping) = keep_liveness(
        &client,
        &listeners.replica_lease,
        &metrics,
        session.heartbeat_interval,
        leading.clone(),
        SharedClusters {
            cache: clusters.clone(),
            writer: cluster_cache_writer,
            standing: certificates.as_ref().map(|c| c.standing.clone()),
        },
        stop_rx.clone(),
    )
    .await?;
    // Boxed: in a debug build, futures joined inline are moved through the
    // stack of every poll above them, and the hub is polled as one task.
    let keeping = Box::pin(async move {
        tokio::join!(Box::pin(keeping), account_watch);
    });
    let distributor = Distributor {
        index: index.clone(),
        auth: Arc::new(
            AgentAuthenticator::new(client.clone(), session.auth.clone())
                .with_review_latency(metrics.token_review_seconds.clone())
                .with_cluster_cache(cluster_cache),
        ),
        certificates,
        deletion: WorkDeletion::new(client.clone(), events.clone()),
        liveness: Arc::new(liveness),
        status: Arc::new(StatusWriter::new(
            client.clone(),
            index.clone(),
            events.clone(),
            metrics.status_write_seconds.clone(),
        )),
        sessions: Arc::default(),
        metrics: metrics.clone(),
        config: session,
        stopping: stop_rx.clone(),
    };
    let grpc = serve_agents(
        distributor,
        listeners.grpc,
        listeners.grpc_tls.as_ref(),
        &metrics,
        stop_rx.clone(),
    );
    let probes = serve_probes(
        listeners.probes,
        probes::router(
            index.clone(),
            Arc::new(registry),
            leading.clone(),
            watched_policies.clone(),
        ),
        stop_rx.clone(),
    );
    let admission = serve_admission(
        client.clone(),
        listeners.admission,
        watched_policies,
        &metrics,
        stop_rx.clone(),
    );
    let controllers = LeaderControllers {
        client: client.clone(),
        metrics: metrics.clone(),
        events,
        clusters,
        controller_sweep: listeners.controller_sweep,
        unreachable_grace: listeners.unreachable_grace,
        health_pool: listeners.health_pool,
        cluster_profiles: listeners.cluster_profiles,
        watch_policies: listeners
            .watch_policies
            .then_some((policy_health, hub_writers)),
    };
    // The watch retries its errors for as long as the hub runs, serving
    // agents from the index meanwhile; only the hub stopping ends it.
    let watch = async {
        tokio::select! {
            () = index.clone().run(client.clone(), metrics.clone()) => Ok(()),
            () = stopped(stop_rx.clone()) => Ok(()),
        }
    };
    let controllers = async {
        tokio::join!(
            keeping,
            Box::pin(controllers.run(leading.clone(), stop_rx.clone()))
        );
        Ok(())
    };
    tokio::try_join!(grpc, probes, admission, watch, controllers)?;
    Ok(())
}
