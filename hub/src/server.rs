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
use tracing::info;

use crate::admission::{self, AdmissionError, AdmissionOptions};
use crate::agent_identity::AgentAuthenticator;
use crate::cert_reload::{
    CaSource, CertLoadError, CertSource, DEFAULT_RELOAD_INTERVAL, ReloadingCert, ReloadingClientCa,
};
use crate::cluster_liveness::{ClusterLiveness, run_liveness_sweeper};
use crate::connection_limit::limit_connections;
use crate::events::WorkEvents;
use crate::grpc_tls::tls_incoming;
use crate::metrics::HubMetrics;
use crate::probes;
use crate::session::{Distributor, SessionConfig};
use crate::status_writer::StatusWriter;
use crate::work_deletion::{WorkDeletion, run_deletion_controller};
use crate::work_index::WorkIndex;
use crate::work_ttl::run_ttl_controller;

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
}

/// TLS of the port agents dial.
#[derive(Clone, Debug)]
pub struct GrpcTls {
    /// Serving certificate and key; files are followed, so a rotated
    /// certificate is served to new connections without a restart.
    pub cert: CertSource,
    /// When set, agents must present a client certificate signed by this
    /// CA (mutual TLS), on top of their token; a CA file is followed too.
    pub client_ca: Option<CaSource>,
    /// How often certificate files are checked for changes.
    pub reload_interval: Duration,
}

impl GrpcTls {
    /// TLS from `cert`, checked for changes every
    /// [`DEFAULT_RELOAD_INTERVAL`], with no client certificates.
    pub fn new(cert: CertSource) -> Self {
        Self {
            cert,
            client_ca: None,
            reload_interval: DEFAULT_RELOAD_INTERVAL,
        }
    }
}

/// How much longer than the longest session a connection may live, and how
/// long its streams then have to finish.
const CONNECTION_AGE_SLACK: Duration = Duration::from_secs(60);

/// Limits of the agent port's connections: what any peer, authenticated or
/// not, can hold open on the hub.
#[derive(Clone, Debug)]
pub struct TransportLimits {
    /// Streams one HTTP/2 connection may have open at once; more are refused
    /// by the transport. An agent needs one (and a health check).
    pub max_concurrent_streams: u32,
    /// Bytes a peer may send on one stream before the hub reads them (the
    /// HTTP/2 stream window). Nothing is read before authentication, so this
    /// bounds what an unauthenticated stream costs.
    pub stream_window_bytes: u32,
    /// Bytes a peer may send on one connection, all streams together, before
    /// the hub reads them.
    pub connection_window_bytes: u32,
    /// How often the hub pings an HTTP/2 connection, and how long it waits
    /// for the answer before closing it.
    pub http2_keepalive_interval: Duration,
    /// See `http2_keepalive_interval`.
    pub http2_keepalive_timeout: Duration,
    /// Longest a TLS handshake may take before the connection is closed.
    pub tls_handshake_timeout: Duration,
    /// TCP keepalive of accepted connections, so dead peers are noticed by
    /// the kernel too.
    pub tcp_keepalive: Duration,
    /// Connections the agent port holds at once; more are closed as soon
    /// as they are accepted.
    pub max_connections: usize,
}

impl Default for TransportLimits {
    fn default() -> Self {
        Self {
            max_concurrent_streams: 16,
            stream_window_bytes: 256 * 1024,
            connection_window_bytes: 1024 * 1024,
            http2_keepalive_interval: Duration::from_secs(30),
            http2_keepalive_timeout: Duration::from_secs(10),
            tls_handshake_timeout: Duration::from_secs(5),
            tcp_keepalive: Duration::from_secs(60),
            max_connections: 10_000,
        }
    }
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
}

/// The `reportingInstance` of the hub's Events: the pod's name, which
/// Kubernetes sets as the container's hostname (`POD_NAME`, when the
/// deployment passes it from the downward API, wins).
fn reporting_instance() -> Option<String> {
    ["POD_NAME", "HOSTNAME"]
        .into_iter()
        .find_map(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
}

/// The agent port's rustls configuration: ALPN h2 (gRPC), the certificate
/// (and client CA) following their files, reloads counted in `metrics`.
async fn grpc_server_config(
    tls: &GrpcTls,
    metrics: &HubMetrics,
) -> Result<Arc<tokio_rustls::rustls::ServerConfig>, HubError> {
    let reloads = metrics.certificate_reloads.clone();
    let cert = ReloadingCert::start(&tls.cert, "grpc", tls.reload_interval, reloads.clone())
        .await
        .map_err(HubError::Tls)?;
    let client_ca = match &tls.client_ca {
        Some(ca) => Some(
            ReloadingClientCa::start(ca, "grpc-client-ca", tls.reload_interval, reloads)
                .await
                .map_err(HubError::Tls)?,
        ),
        None => None,
    };
    cert.server_config(client_ca, &[b"h2"])
        .map_err(HubError::Tls)
}

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
    let deletion = WorkDeletion::new(client.clone(), events.clone());
    let liveness = ClusterLiveness::new(client.clone());
    let sweeper = run_liveness_sweeper(
        liveness.clone(),
        session.heartbeat_interval,
        session.heartbeat_interval * 5,
        stopped(stop_rx.clone()),
    );
    let auth = Arc::new(
        AgentAuthenticator::new(client.clone(), session.auth.clone())
            .with_review_latency(metrics.token_review_seconds.clone()),
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
        liveness,
        status,
        metrics: metrics.clone(),
        config: session,
        stopping: stop_rx.clone(),
    };

    let service = WorkDistributorServer::new(distributor)
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
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
        Some(tls) => Some(grpc_server_config(tls, &metrics).await?),
        None => None,
    };
    let router = builder.add_service(health_service).add_service(service);
    let accepted = limit_connections(
        TcpIncoming::from(listeners.grpc)
            .with_nodelay(Some(true))
            .with_keepalive(Some(limits.tcp_keepalive)),
        limits.max_connections,
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
            Some(listener) => axum::serve(listener, probes::router(index.clone(), registry))
                .with_graceful_shutdown(stopped(stop_rx.clone()))
                .await
                .map_err(HubError::Probes),
            None => Ok(()),
        }
    };
    let admission_client = client.clone();
    let review_seconds = metrics.webhook_review_seconds.clone();
    let admission = async {
        match listeners.admission {
            Some(options) => admission::serve(
                admission_client,
                options,
                metrics.certificate_reloads.clone(),
                review_seconds,
                stopped(stop_rx.clone()),
            )
            .await
            .map_err(HubError::from),
            None => Ok(()),
        }
    };
    let deletion_controller = run_deletion_controller(
        client.clone(),
        WorkDeletion::new(client.clone(), events),
        metrics.clone(),
        stopped(stop_rx.clone()),
    );
    let ttl_controller =
        run_ttl_controller(client.clone(), metrics.clone(), stopped(stop_rx.clone()));
    let placement_controller =
        crate::placement::run_placement_controller(client.clone(), stopped(stop_rx.clone()));
    let taint_controller =
        crate::cluster_taints::run_taint_controller(client.clone(), stopped(stop_rx.clone()));
    let replica_set_controller =
        crate::replica_set::run_replica_set_controller(client.clone(), stopped(stop_rx.clone()));
    // The watch retries its errors for as long as the hub runs, serving
    // agents from the index meanwhile; only the hub stopping ends it.
    let watch = async {
        tokio::select! {
            () = index.clone().run(client, metrics.clone()) => Ok(()),
            () = stopped(stop_rx.clone()) => Ok(()),
        }
    };
    let controller = async {
        tokio::join!(
            deletion_controller,
            sweeper,
            ttl_controller,
            placement_controller,
            taint_controller,
            replica_set_controller
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
