//! Wires the hub together: the work index, the gRPC service with health
//! checking, and the probe endpoints.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use ferry_proto::MAX_MESSAGE_BYTES;
use ferry_proto::v1::work_distributor_server::WorkDistributorServer;
use kube::Client;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tonic::transport::server::TcpIncoming;
use tracing::{info, warn};

use crate::admission::hub_writes_policy::DEFAULT_HUB_USERNAME;
use crate::admission::policies::own_username;
use crate::admission::watchdog::{PolicyHealth, run_watchdog};
use crate::admission::webhook::{self, AdmissionError, AdmissionOptions};
use crate::certs::reload::CertLoadError;
use crate::cluster_profile::ClusterProfileOptions;
use crate::clusters::liveness::{ClusterLiveness, reassert_held_sessions, run_liveness_sweeper};
use crate::clusters::replica_lease::{ReplicaLease, ReplicaLeaseError, keep as keep_replica_lease};
use crate::grpc::config::{CONNECTION_AGE_SLACK, GrpcTls, SessionConfig};
use crate::grpc::connection_limit::{ConnectionLimits, limit_connections};
use crate::grpc::identity::AgentAuthenticator;
use crate::grpc::session::Distributor;
use crate::grpc::tls::{server_config, tls_incoming};
use crate::leader::{LeaderElection, LeaderError, elect, while_leading};
use crate::metrics::HubMetrics;
use crate::probes;
pub use crate::replica_set::health_pool::HealthPoolConfig;
use crate::status::writer::StatusWriter;
use crate::works::deletion::{WorkDeletion, run_deletion_controller};
use crate::works::events::WorkEvents;
use crate::works::index::WorkIndex;
use crate::works::ttl::run_ttl_controller;

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
    /// This replica's Lease could not be set up.
    #[error(transparent)]
    ReplicaLease(#[from] ReplicaLeaseError),
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

/// Runs one hub replica until `shutdown` completes or a component fails.
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
    let registry = Arc::new(registry);

    let events = WorkEvents::start(client.clone(), reporting_instance(), metrics.clone());
    let status = Arc::new(StatusWriter::new(
        client.clone(),
        index.clone(),
        events.clone(),
        metrics.status_write_seconds.clone(),
    ));

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let leading = match &listeners.leader_election {
        Some(election) => Some(elect(client.clone(), election).await?),
        None => None,
    };
    if let Some(mut leading) = leading.clone() {
        // Ends with the hub: the Lease is released once every receiver of
        // the election is dropped.
        let gauge = metrics.leader.clone();
        let mut stopping = stop_rx.clone();
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
    let deletion = WorkDeletion::new(client.clone(), events.clone());
    let policy_health = PolicyHealth::default();
    // The hub-owned-writes policy names the identity the hub runs as.
    let hub_writers = if listeners.watch_policies {
        match own_username(&client).await {
            Ok(name) => vec![name],
            Err(error) => {
                warn!(%error, "asking who the hub is; the admission policy check expects the chart's default ServiceAccount");
                vec![DEFAULT_HUB_USERNAME.to_string()]
            }
        }
    } else {
        Vec::new()
    };
    // Sessions name this replica as their server only once its Lease
    // vouches for them; the leader's sweep would otherwise mark them
    // disconnected at once.
    // Kept for as long as the hub runs: dropping every receiver releases it.
    let unreachable_grace = listeners.unreachable_grace;
    let controller_sweep = listeners.controller_sweep;
    let health_pool = listeners.health_pool;
    let mut lease_held = keep_replica_lease(client.clone(), &listeners.replica_lease).await?;
    if lease_held.wait_for(|held| *held).await.is_err() {
        warn!("the replica Lease task ended before the Lease was held");
    }
    let liveness = ClusterLiveness::new(client.clone(), &listeners.replica_lease)
        .with_disconnected_gauge(metrics.clusters_disconnected.clone())
        .with_deletions_held_gauge(metrics.clusters_deletions_held.clone());
    // One copy of every ManagedCluster per replica, kept by the reassert
    // watch: agent authentication reads whether a cluster is accepted here
    // instead of a GET per connect, and the leader's liveness sweep reads
    // the clusters here instead of a LIST per heartbeat.
    let (cluster_cache, cluster_cache_writer) = kube::runtime::reflector::store();
    let reasserting = reassert_held_sessions(
        liveness.clone(),
        cluster_cache_writer,
        stopped(stop_rx.clone()),
    );
    let heartbeat = session.heartbeat_interval;
    let swept = liveness.clone();
    let swept_clusters = cluster_cache.clone();
    let sweeper = while_leading(
        leading.clone(),
        stop_rx.clone(),
        "liveness sweep",
        move |stop| {
            run_liveness_sweeper(
                swept.clone(),
                swept_clusters.clone(),
                heartbeat,
                heartbeat * 5,
                stop,
            )
        },
    );
    let auth = Arc::new(
        AgentAuthenticator::new(client.clone(), session.auth.clone())
            .with_review_latency(metrics.token_review_seconds.clone())
            .with_cluster_cache(cluster_cache),
    );
    let limits = session.transport.clone();
    // Sessions end by their maximum age and agents dial a new connection;
    // a connection older than that (plus slack) holds no agent session, only
    // perhaps an idle peer, and is closed gracefully.
    let connection_age = session.max_session_age + CONNECTION_AGE_SLACK;
    let distributor = Distributor {
        index: index.clone(),
        auth,
        deletion,
        liveness: Arc::new(liveness),
        status,
        sessions: Arc::default(),
        metrics: metrics.clone(),
        config: session,
        stopping: stop_rx.clone(),
    };

    // What one agent message may reach before it is decoded: the larger of
    // the Hello and report caps (the session checks the smaller one on the
    // decoded message). What the hub sends is its own works, up to the
    // protocol's maximum.
    let service = WorkDistributorServer::new(distributor)
        .max_decoding_message_size(limits.message_caps.transport())
        .max_encoding_message_size(MAX_MESSAGE_BYTES);
    let (health_reporter, health_service) = tonic_health::server::health_reporter();
    health_reporter
        .set_serving::<WorkDistributorServer<Distributor>>()
        .await;

    info!(addr = ?listeners.grpc.local_addr().ok(), "hub serving agents");
    let mut builder = tonic::transport::Server::builder()
        .max_concurrent_streams(limits.max_concurrent_streams)
        .initial_stream_window_size(limits.stream_window_bytes)
        .initial_connection_window_size(limits.connection_window_bytes)
        .http2_keepalive_interval(Some(limits.http2_keepalive_interval))
        .http2_keepalive_timeout(Some(limits.http2_keepalive_timeout))
        .max_connection_age(connection_age)
        .max_connection_age_grace(CONNECTION_AGE_SLACK);
    let tls = match &listeners.grpc_tls {
        Some(tls) => Some(server_config(tls, &metrics).await.map_err(HubError::Tls)?),
        None => None,
    };
    let router = builder.add_service(health_service).add_service(service);
    let accepted = limit_connections(
        TcpIncoming::from(listeners.grpc)
            .with_nodelay(Some(true))
            .with_keepalive(Some(limits.tcp_keepalive)),
        ConnectionLimits {
            max_connections: limits.max_connections,
            max_per_peer: limits.max_connections_per_peer,
            unauthenticated_idle: limits.unauthenticated_idle,
        },
        metrics.clone(),
    );
    let grpc = async {
        match tls {
            Some(config) => {
                router
                    .serve_with_incoming_shutdown(
                        tls_incoming(accepted, config, limits.tls_handshake_timeout),
                        stopped(stop_rx.clone()),
                    )
                    .await
            }
            None => {
                router
                    .serve_with_incoming_shutdown(accepted, stopped(stop_rx.clone()))
                    .await
            }
        }
    };
    let probes = async {
        match listeners.probes {
            Some(listener) => axum::serve(
                probes::nodelay_listener(listener),
                probes::router(
                    index.clone(),
                    registry,
                    leading.clone(),
                    listeners.watch_policies.then(|| policy_health.clone()),
                ),
            )
            .with_graceful_shutdown(stopped(stop_rx.clone()))
            .await
            .map_err(HubError::Probes),
            None => Ok(()),
        }
    };
    let admission_client = client.clone();
    let review_seconds = metrics.webhook_review_seconds.clone();
    let webhook_health = listeners.watch_policies.then(|| policy_health.clone());
    let admission = async {
        match listeners.admission {
            Some(options) => webhook::serve(
                admission_client,
                options,
                webhook_health,
                metrics.certificate_reloads.clone(),
                review_seconds,
                stopped(stop_rx.clone()),
            )
            .await
            .map_err(HubError::from),
            None => Ok(()),
        }
    };
    // The controllers that must run once run in the leading replica only.
    let deletion_controller = while_leading(leading.clone(), stop_rx.clone(), "deletion", |stop| {
        run_deletion_controller(
            client.clone(),
            WorkDeletion::new(client.clone(), events.clone()),
            metrics.clone(),
            stop,
        )
    });
    let ttl_controller = while_leading(leading.clone(), stop_rx.clone(), "ttl", |stop| {
        run_ttl_controller(client.clone(), metrics.clone(), stop)
    });
    let placement_controller =
        while_leading(leading.clone(), stop_rx.clone(), "placement", |stop| {
            crate::placement::run_placement_controller(client.clone(), controller_sweep, stop)
        });
    let cluster_set_controller =
        while_leading(leading.clone(), stop_rx.clone(), "cluster sets", |stop| {
            crate::cluster_sets::run_cluster_set_controller(client.clone(), stop)
        });
    let taint_controller = while_leading(leading.clone(), stop_rx.clone(), "taints", |stop| {
        crate::clusters::taints::run_taint_controller(client.clone(), unreachable_grace, stop)
    });
    let rollout_metrics = metrics.rollouts.clone();
    let replica_set_controller =
        while_leading(leading.clone(), stop_rx.clone(), "replica sets", |stop| {
            crate::replica_set::run_replica_set_controller(
                client.clone(),
                health_pool,
                rollout_metrics.clone(),
                controller_sweep,
                stop,
            )
        });
    let profile_options = listeners.cluster_profiles.clone();
    let cluster_profile_controller = while_leading(
        leading.clone(),
        stop_rx.clone(),
        "cluster profiles",
        |stop| {
            let (client, options, metrics) =
                (client.clone(), profile_options.clone(), metrics.clone());
            async move {
                // Without options it waits for the stop: a controller that
                // returned at once would be restarted at once, for ever.
                match options {
                    Some(options) => {
                        crate::cluster_profile::run_cluster_profile_controller(
                            client, options, metrics, stop,
                        )
                        .await
                    }
                    None => stop.await,
                }
            }
        },
    );
    // Placements in the inventory refer to the profiles' namespace, so they
    // are published only beside the profiles.
    let decision_namespace = listeners.cluster_profiles.clone().map(|o| o.namespace);
    let inventory_decision_controller = while_leading(
        leading.clone(),
        stop_rx.clone(),
        "inventory placement decisions",
        |stop| {
            let (client, namespace, metrics) =
                (client.clone(), decision_namespace.clone(), metrics.clone());
            async move {
                match namespace {
                    Some(namespace) => {
                        crate::inventory_decisions::run_inventory_decision_controller(
                            client, namespace, metrics, stop,
                        )
                        .await
                    }
                    None => stop.await,
                }
            }
        },
    );
    let watch_policies = listeners.watch_policies;
    let policy_watchdog = while_leading(
        leading.clone(),
        stop_rx.clone(),
        "admission policies",
        |stop| {
            let (client, writers, health, metrics) = (
                client.clone(),
                hub_writers.clone(),
                policy_health.clone(),
                metrics.clone(),
            );
            async move {
                if watch_policies {
                    run_watchdog(client, writers, health, metrics, stop).await;
                } else {
                    // Off: idle until told to stop, so it is not restarted.
                    stop.await;
                }
            }
        },
    );
    // The watch retries its errors for as long as the hub runs, serving
    // agents from the index meanwhile; only the hub stopping ends it.
    let watch = async {
        tokio::select! {
            () = index.clone().run(client.clone(), metrics.clone()) => Ok(()),
            () = stopped(stop_rx.clone()) => Ok(()),
        }
    };
    let controller = async {
        tokio::join!(
            reasserting,
            deletion_controller,
            sweeper,
            ttl_controller,
            placement_controller,
            cluster_set_controller,
            taint_controller,
            replica_set_controller,
            cluster_profile_controller,
            inventory_decision_controller,
            policy_watchdog
        );
        Ok(())
    };
    tokio::try_join!(
        async { grpc.await.map_err(HubError::from) },
        probes,
        admission,
        watch,
        controller
    )?;
    Ok(())
}
