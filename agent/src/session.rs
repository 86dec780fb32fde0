//! The agent's connection to the hub: dial, say Hello with the works held,
//! take upserts and deletes, send status, and reconnect with jittered
//! exponential backoff when the stream breaks.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use backon::BackoffBuilder;
use ferry_proto::v1::work_distributor_client::WorkDistributorClient;
use ferry_proto::v1::{self, agent_message, hub_message};
use ferry_proto::{CLUSTER_METADATA, MAX_MESSAGE_BYTES, PROTOCOL_VERSION};
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::task::AbortOnDropHandle;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};
use tracing::{Instrument as _, info, warn};

use crate::Observability;
use crate::client_certificate::ClientCertificate;
use crate::deletion_brake::DeletionBrake;
use crate::deletion_brake::ledger::Holding;
use crate::metrics::ReasonLabel;
use crate::orphan_records::OrphanSweep;
use crate::redial;
use crate::status_board::StatusBoard;
use crate::work_workers::WorkManager;

const OUTBOUND_QUEUE: usize = 32;

/// How to reach the hub.
#[derive(Clone, Debug)]
pub struct SessionConfig {
    /// Hub gRPC URL, e.g. `https://hub:8443`.
    pub hub_url: String,
    /// This cluster's name: the hub namespace holding its works.
    pub cluster_name: String,
    /// Seconds between agent heartbeats.
    pub heartbeat_interval: Duration,
    /// The ServiceAccount token the agent presents to the hub.
    pub token: TokenSource,
    /// TLS toward the hub; None for a plaintext `http://` hub.
    pub tls: Option<ClientTls>,
}

/// Where the agent's hub token comes from.
#[derive(Clone)]
pub enum TokenSource {
    /// A file read before every connection, so a rotated token is used as
    /// soon as it is written.
    File(PathBuf),
    /// A fixed token.
    Inline(String),
}

impl std::fmt::Debug for TokenSource {
    // Tokens stay out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenSource::File(path) => write!(f, "File({})", path.display()),
            TokenSource::Inline(_) => f.write_str("Inline(..)"),
        }
    }
}

impl TokenSource {
    fn read(&self) -> Result<String, SessionError> {
        let token = match self {
            TokenSource::File(path) => {
                std::fs::read_to_string(path).map_err(|source| SessionError::Token {
                    path: path.display().to_string(),
                    source,
                })?
            }
            TokenSource::Inline(token) => token.clone(),
        };
        Ok(token.trim().to_string())
    }
}

/// TLS settings toward the hub.
#[derive(Clone)]
pub struct ClientTls {
    /// The CA (PEM) the hub's serving certificate must chain to.
    pub ca_pem: String,
    /// Client certificate and key (PEM) for a hub that requires mutual TLS.
    pub identity: Option<(String, String)>,
}

impl std::fmt::Debug for ClientTls {
    // The key stays out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls")
            .field("client_certificate", &self.identity.is_some())
            .finish_non_exhaustive()
    }
}

/// A session could not be opened or broke.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The hub URL is not a valid endpoint.
    #[error("invalid hub URL {url}: {source}")]
    BadUrl {
        /// The URL.
        url: String,
        /// The parse error.
        #[source]
        source: tonic::transport::Error,
    },
    /// The token file could not be read.
    #[error("reading the hub token {path}: {source}")]
    Token {
        /// The file.
        path: String,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// The token cannot travel as gRPC metadata.
    #[error("the hub token contains characters that cannot be sent")]
    BadToken,
    /// The cluster name cannot travel as gRPC metadata.
    #[error("the cluster name contains characters that cannot be sent")]
    BadClusterName,
    /// The TLS settings were refused.
    #[error("TLS settings for {url}: {source}")]
    Tls {
        /// The URL.
        url: String,
        /// The transport error.
        #[source]
        source: tonic::transport::Error,
    },
    /// Connecting failed.
    #[error("connecting to {url}: {source}")]
    Connect {
        /// The URL.
        url: String,
        /// The transport error.
        #[source]
        source: tonic::transport::Error,
    },
    /// The hub refused or ended the stream.
    #[error("hub stream: {0}")]
    Stream(#[from] tonic::Status),
    /// The hub closed the stream.
    #[error("the hub closed the stream")]
    Closed,
    /// Nothing arrived from the hub, not even a heartbeat, for this long.
    #[error("no message from the hub for {0:?}")]
    Silent(Duration),
}

impl SessionError {
    /// The `reason` label of this error in the session metrics: a closed
    /// set (gRPC codes by name for what the hub answered).
    pub fn reason(&self) -> &'static str {
        match self {
            SessionError::BadUrl { .. }
            | SessionError::BadToken
            | SessionError::BadClusterName
            | SessionError::Tls { .. } => "config",
            SessionError::Token { .. } => "token_unreadable",
            SessionError::Connect { .. } => "connect",
            SessionError::Stream(status) => code_label(status.code()),
            SessionError::Closed => "hub_closed",
            SessionError::Silent(_) => "hub_silent",
        }
    }
}

/// A gRPC code as a label value.
fn code_label(code: tonic::Code) -> &'static str {
    use tonic::Code;
    match code {
        Code::Ok => "ok",
        Code::Cancelled => "cancelled",
        Code::Unknown => "unknown",
        Code::InvalidArgument => "invalid_argument",
        Code::DeadlineExceeded => "deadline_exceeded",
        Code::NotFound => "not_found",
        Code::AlreadyExists => "already_exists",
        Code::PermissionDenied => "permission_denied",
        Code::ResourceExhausted => "resource_exhausted",
        Code::FailedPrecondition => "failed_precondition",
        Code::Aborted => "aborted",
        Code::OutOfRange => "out_of_range",
        Code::Unimplemented => "unimplemented",
        Code::Internal => "internal",
        Code::Unavailable => "unavailable",
        Code::DataLoss => "data_loss",
        Code::Unauthenticated => "unauthenticated",
    }
}

/// An established session, as metrics and readiness see it: connected
/// while this lives, however the session ends (an error, or the agent
/// dropping it at shutdown).
struct Established<'a> {
    observability: &'a Observability,
}

impl<'a> Established<'a> {
    fn new(observability: &'a Observability) -> Self {
        observability.metrics.sessions_started.inc();
        observability.metrics.hub_connected.set(1);
        observability.readiness.hub_connected();
        Self { observability }
    }
}

impl Drop for Established<'_> {
    fn drop(&mut self) {
        self.observability.metrics.hub_connected.set(0);
        self.observability.readiness.hub_disconnected(None);
    }
}

/// Keeps a session with the hub open for as long as the returned future
/// runs, keeping `observability` up to date.
pub async fn run_session(
    config: SessionConfig,
    works: Arc<WorkManager>,
    board: Arc<StatusBoard>,
    observability: &Observability,
) {
    let reconnect = redial::backoff();
    let mut delays = reconnect.build();
    let orphans = OrphanSweep::new(works.clone(), works.resync());
    // Certificates the hub issues are asked for only over TLS, and not
    // when the operator gave the agent a certificate of its own.
    let certificate = config
        .tls
        .as_ref()
        .is_some_and(|tls| tls.identity.is_none())
        .then(ClientCertificate::default);
    loop {
        let mut welcomed = false;
        orphans.session_started();
        let ended = connect_once(
            &config,
            &works,
            &orphans,
            &board,
            observability,
            certificate.as_ref(),
            &mut welcomed,
        )
        .await;
        let error = ended.err().unwrap_or(SessionError::Closed);
        let label = ReasonLabel {
            reason: error.reason(),
        };
        if welcomed {
            observability
                .metrics
                .sessions_ended
                .get_or_create(&label)
                .inc();
        } else {
            observability
                .metrics
                .connect_failures
                .get_or_create(&label)
                .inc();
        }
        observability
            .readiness
            .hub_disconnected(Some(error.to_string()));
        // A session that got as far as Welcome starts the backoff afresh.
        if welcomed {
            delays = reconnect.build();
        }
        let status = match &error {
            SessionError::Stream(status) => Some(status),
            _ => None,
        };
        // A busy hub says when to come back; the backoff is the floor.
        let delay = redial::next_delay(delays.next().unwrap_or(redial::MAX_BACKOFF), status);
        warn!(hub = %config.hub_url, %error, ?delay, "hub session ended; dialling again after the delay");
        tokio::time::sleep(delay).await;
    }
}

/// One session: dials the hub, says Hello with the works held, then hands
/// the hub's messages to `works` and `orphans` until the stream ends.
/// `welcomed` is set once the hub said Welcome. Fails with why the session
/// could not be opened or broke (a stream the hub closed is `Closed`).
async fn connect_once(
    config: &SessionConfig,
    works: &WorkManager,
    orphans: &Arc<OrphanSweep>,
    board: &Arc<StatusBoard>,
    observability: &Observability,
    certificate: Option<&ClientCertificate>,
    welcomed: &mut bool,
) -> Result<(), SessionError> {
    let presented = certificate.and_then(|held| held.to_present(unix_now()));
    let endpoint = endpoint(config, presented.as_ref())?;
    // With a certificate the token is not needed, and a token file that
    // cannot be read does not keep the agent away.
    let bearer: Option<MetadataValue<Ascii>> = match config.token.read() {
        Ok(token) => Some(
            format!("Bearer {token}")
                .parse()
                .map_err(|_| SessionError::BadToken)?,
        ),
        Err(_) if presented.is_some() => None,
        Err(error) => return Err(error),
    };
    let channel = open_channel(endpoint, &config.hub_url).await?;
    // The cluster's name travels next to the token, so a hub can refuse a
    // misconfigured agent before reading its Hello.
    let cluster: MetadataValue<Ascii> = config
        .cluster_name
        .parse()
        .map_err(|_| SessionError::BadClusterName)?;
    let authorize = move |mut request: tonic::Request<()>| {
        let metadata = request.metadata_mut();
        if let Some(bearer) = &bearer {
            metadata.insert("authorization", bearer.clone());
        }
        metadata.insert(CLUSTER_METADATA, cluster.clone());
        Ok(request)
    };
    let mut client = WorkDistributorClient::with_interceptor(channel, authorize)
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES);

    let (outbound, outbound_rx) = mpsc::channel(OUTBOUND_QUEUE);
    // The queue is empty and we hold the receiver, so this cannot fail.
    let _ = outbound.send(hello(config, works).await).await;
    // The hub heartbeats; three missed intervals mean the connection is dead
    // even if TCP has not noticed, so the agent dials again. The same bound
    // holds for the hub's answer to the stream itself: a hub that took the
    // stream and never answered must not hold the agent.
    let mut silence_limit = config.heartbeat_interval * 3;
    let opened = tokio::time::timeout(silence_limit, client.sync(ReceiverStream::new(outbound_rx)))
        .await
        .map_err(|_| SessionError::Silent(silence_limit))?;
    // A hub that does not take the certificate (revoked, or its CA
    // replaced) says UNAUTHENTICATED: the next dial uses the token.
    if let (Err(status), Some(held)) = (&opened, certificate)
        && presented.is_some()
        && status.code() == tonic::Code::Unauthenticated
    {
        warn!(reason = %status.message(), "the hub does not take the client certificate; dialling with the token next");
        held.forget();
    }
    let mut inbound = opened?.into_inner();
    let requests = outbound.clone();

    board.mark_all_unsent().await;
    // Aborted when this function returns or its future is dropped (agent
    // shutdown), so no sender outlives the session it belongs to.
    let _sender = AbortOnDropHandle::new(tokio::spawn(send_reports(
        outbound,
        board.clone(),
        config.heartbeat_interval,
        works.deletion_brake().map(|brake| BrakeView::new(brake)),
        observability.clone(),
    )));
    let mut established = None;
    loop {
        let message = tokio::time::timeout(silence_limit, inbound.message())
            .await
            .map_err(|_| SessionError::Silent(silence_limit))??;
        let Some(message) = message else {
            break;
        };
        match message.body {
            Some(hub_message::Body::Welcome(welcome)) => {
                *welcomed = true;
                if established.is_none() {
                    established = Some(Established::new(observability));
                }
                silence_limit = silence_after_welcome(&welcome);
                info!(hub_version = %welcome.hub_version, with_certificate = presented.is_some(), "connected to hub");
                if let Some(held) = certificate
                    && welcome.issues_client_certificates
                    && held.wants_one(unix_now())
                {
                    ask_for_certificate(held, &config.cluster_name, &requests).await;
                }
            }
            Some(hub_message::Body::Certificate(answer)) => {
                let Some(held) = certificate else { continue };
                // The session goes on; the next one dials with it.
                match held.accept(answer) {
                    Ok(()) => info!(
                        renewed = presented.is_some(),
                        "got a client certificate from the hub"
                    ),
                    Err(error) => {
                        warn!(%error, "no client certificate this session; the token serves")
                    }
                }
            }
            Some(hub_message::Body::Upsert(upsert)) => works.upsert(upsert).await,
            Some(hub_message::Body::Delete(delete)) => works.delete(delete).await,
            Some(hub_message::Body::Synced(_)) => orphans.hub_synced(),
            Some(hub_message::Body::Heartbeat(_)) => orphans.hub_heartbeat(),
            None => {}
        }
    }
    Err(SessionError::Closed)
}

/// Sends the hub a request for a client certificate, unless making it
/// fails (logged: the token serves on).
async fn ask_for_certificate(
    held: &ClientCertificate,
    cluster: &str,
    requests: &mpsc::Sender<v1::AgentMessage>,
) {
    match held.request(cluster) {
        Ok(request) => {
            let message = v1::AgentMessage {
                body: Some(agent_message::Body::CertificateRequest(request)),
            };
            // Only fails when the session is over.
            let _ = requests.send(message).await;
        }
        Err(error) => warn!(%error, "cannot ask for a client certificate"),
    }
}

use crate::conditions::now_seconds as unix_now;

/// The hub's endpoint, with TLS when configured, presenting `issued` (a
/// certificate and key the hub issued) when given and the operator set
/// none. Fails when the URL is not an endpoint or the TLS settings are
/// refused.
fn endpoint(
    config: &SessionConfig,
    issued: Option<&(String, String)>,
) -> Result<Endpoint, SessionError> {
    let endpoint =
        Endpoint::from_shared(config.hub_url.clone()).map_err(|source| SessionError::BadUrl {
            url: config.hub_url.clone(),
            source,
        })?;
    let endpoint = match &config.tls {
        Some(tls) => {
            let mut settings =
                ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&tls.ca_pem));
            if let Some((cert, key)) = tls.identity.as_ref().or(issued) {
                settings = settings.identity(Identity::from_pem(cert, key));
            }
            endpoint
                .tls_config(settings)
                .map_err(|source| SessionError::Tls {
                    url: config.hub_url.clone(),
                    source,
                })?
        }
        None => endpoint,
    };
    Ok(endpoint)
}

/// Connects to the hub at `endpoint` (`url`, for the error). Fails when
/// the connection cannot be made within its timeout.
async fn open_channel(endpoint: Endpoint, url: &str) -> Result<Channel, SessionError> {
    endpoint
        .connect_timeout(Duration::from_secs(5))
        // Nagle off (tonic's default, stated so it never changes under us):
        // a status report must not wait for the hub's delayed ACK.
        .tcp_nodelay(true)
        .http2_keep_alive_interval(Duration::from_secs(20))
        .keep_alive_while_idle(true)
        .connect()
        .await
        .map_err(|source| SessionError::Connect {
            url: url.to_string(),
            source,
        })
}

/// The Hello that opens a session: this agent, the works it holds, and
/// what the hub publishes of the spoke (its version, its sealing keys).
async fn hello(config: &SessionConfig, works: &WorkManager) -> v1::AgentMessage {
    let (facts, known_works) = tokio::join!(
        crate::spoke_facts::gather(works.reconciler()),
        works.known()
    );
    let hello = v1::Hello {
        protocol_version: PROTOCOL_VERSION,
        cluster_name: config.cluster_name.clone(),
        agent_version: env!("CARGO_PKG_VERSION").into(),
        known_works,
        kubernetes_version: facts.kubernetes_version,
        sealing_keys: facts.sealing_keys,
    };
    v1::AgentMessage {
        body: Some(agent_message::Body::Hello(hello)),
    }
}

/// How long the hub may stay silent once it said `welcome`: three of the
/// heartbeat intervals it announced (at least a second each).
fn silence_after_welcome(welcome: &v1::Welcome) -> Duration {
    let interval = Duration::from_secs(welcome.heartbeat_interval_seconds.max(1).into());
    interval * 3
}

/// The span of sending `status` to the hub, a child of the apply whose
/// context the status carries.
fn report_span(status: &v1::WorkStatus) -> tracing::Span {
    let span = tracing::info_span!(
        "report_status",
        work.uid = %status.work.as_ref().map(|w| w.uid.as_str()).unwrap_or_default(),
        generation = status.generation,
        gone = status.gone,
    );
    ferry_telemetry::set_parent(&span, &status.trace_context);
    span
}

/// What the deletion brake holds, as a heartbeat carries it to the hub.
struct BrakeView {
    holding: watch::Receiver<Holding>,
    namespace: String,
}

impl BrakeView {
    fn new(brake: &DeletionBrake) -> Self {
        Self {
            holding: brake.holding(),
            namespace: brake.namespace().to_string(),
        }
    }

    /// The report, or None while the brake holds nothing.
    fn report(&self) -> Option<v1::DeletionBrake> {
        let holding = *self.holding.borrow();
        (holding.works > 0).then(|| v1::DeletionBrake {
            held_works: holding.works,
            held_objects: holding.objects,
            since_unix_seconds: holding.since,
            ledger_namespace: self.namespace.clone(),
        })
    }

    /// Resolves when what the brake holds changes; never without a brake.
    async fn changed(brake: &mut Option<Self>) {
        if let Some(view) = brake
            && view.holding.changed().await.is_ok()
        {
            return;
        }
        std::future::pending().await
    }
}

/// A heartbeat carrying what `brake` holds.
fn heartbeat_message(brake: Option<&BrakeView>) -> v1::AgentMessage {
    let mut beat = v1::Heartbeat::now();
    beat.deletion_brake = brake.and_then(BrakeView::report);
    v1::AgentMessage {
        body: Some(agent_message::Body::Heartbeat(beat)),
    }
}

/// Sends unsent statuses as they are published, and a heartbeat every
/// `heartbeat` and whenever what `brake` holds changes (so the hub shows a
/// hold within moments). Statuses that could not be sent go back on the
/// board.
async fn send_reports(
    outbound: mpsc::Sender<v1::AgentMessage>,
    board: Arc<StatusBoard>,
    heartbeat: Duration,
    mut brake: Option<BrakeView>,
    observability: Observability,
) {
    let metrics = &observability.metrics;
    let mut published = board.subscribe();
    published.mark_changed();
    let mut ticker = tokio::time::interval(heartbeat);
    loop {
        tokio::select! {
            () = BrakeView::changed(&mut brake) => {
                if outbound.send(heartbeat_message(brake.as_ref())).await.is_err() {
                    return;
                }
            }
            changed = published.changed() => {
                if changed.is_err() {
                    return;
                }
                let unsent = board.take_unsent().await;
                for (i, status) in unsent.iter().enumerate() {
                    // The report joins the trace of the apply it reports.
                    let span = ferry_telemetry::span(|| report_span(status));
                    let message = v1::AgentMessage { body: Some(agent_message::Body::Status(status.clone())) };
                    if outbound.send(message).instrument(span).await.is_err() {
                        board.requeue(&unsent[i..]).await;
                        metrics.status_reports_requeued.inc_by((unsent.len() - i) as u64);
                        return;
                    }
                    metrics.status_reports_sent.inc();
                }
            }
            _ = ticker.tick() => {
                if outbound.send(heartbeat_message(brake.as_ref())).await.is_err() {
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(hub_url: &str) -> SessionConfig {
        SessionConfig {
            hub_url: hub_url.into(),
            cluster_name: "east".into(),
            heartbeat_interval: Duration::from_secs(10),
            token: TokenSource::Inline("t".into()),
            tls: None,
        }
    }

    #[test]
    fn a_hub_url_that_is_no_endpoint_is_a_config_error() {
        let error = endpoint(&config("not a url"), None).err();
        assert!(
            matches!(error, Some(SessionError::BadUrl { ref url, .. }) if url == "not a url"),
            "{error:?}"
        );
        assert_eq!(error.map(|e| e.reason()), Some("config"));
        assert!(endpoint(&config("http://hub:8443"), None).is_ok());
    }

    #[test]
    fn the_hub_may_be_silent_for_three_of_its_heartbeats_and_never_less_than_three_seconds() {
        let welcome = |seconds| v1::Welcome {
            heartbeat_interval_seconds: seconds,
            ..Default::default()
        };
        assert_eq!(silence_after_welcome(&welcome(10)), Duration::from_secs(30));
        assert_eq!(silence_after_welcome(&welcome(0)), Duration::from_secs(3));
    }
}
