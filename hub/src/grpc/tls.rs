//! TLS handshakes of the agent port, done by the hub rather than by tonic so
//! that the certificate comes from a [`crate::certs::reload::ReloadingCert`]:
//! tonic's own TLS takes a fixed identity. Each handshake runs in its own
//! task under a timeout, so one slow peer never holds up the others; the
//! connection keeps its connection-limit permit throughout. When the hub
//! issues agent certificates, every client is asked for one, and one that is
//! presented is judged against the agent CA in the same task, right after
//! the handshake; the stream's start then holds it against the hub's state.
//! Handshakes take turns, a bounded number at a time, so that a storm of
//! them (every agent redialling a restarted hub) is served in order rather
//! than all at once and all too late.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::{Stream, StreamExt};
use prometheus_client::metrics::gauge::Gauge;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{Semaphore, mpsc, watch};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::UnixTime;
use tokio_rustls::rustls::server::danger::ClientCertVerifier;
use tokio_rustls::server::TlsStream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::Connected;
use tracing::debug;

use crate::agent_certs::presented::{Presented, PresentedCheck};
use crate::agent_certs::tls_verifier::AskForClientCertificates;
use crate::certs::reload::{CertLoadError, ReloadingCert, ReloadingClientCa};
use crate::grpc::config::GrpcTls;
use crate::grpc::connection_limit::{AgentConnectInfo, LimitedConnection};
use crate::metrics::{HandshakeStageLabel, HubMetrics};

/// The agent port's rustls configuration: ALPN h2 (gRPC), the certificate
/// (and client CA) following their files, reloads counted in `metrics`;
/// with `ask_for_certificates` (and no client CA), clients are asked for a
/// certificate that they may also not send.
///
/// Fails when the certificate, its key or the client CA cannot be loaded.
pub async fn server_config(
    tls: &GrpcTls,
    metrics: &HubMetrics,
    ask_for_certificates: bool,
) -> Result<Arc<ServerConfig>, CertLoadError> {
    let reloads = metrics.certificate_reloads.clone();
    let cert =
        ReloadingCert::start(&tls.cert, "grpc", tls.reload_interval, reloads.clone()).await?;
    let client_ca = match &tls.client_ca {
        Some(ca) => Some(
            ReloadingClientCa::start(ca, "grpc-client-ca", tls.reload_interval, reloads).await?,
        ),
        None => None,
    };
    let verifier: Option<Arc<dyn ClientCertVerifier>> = match client_ca {
        Some(ca) => Some(Arc::new(ca)),
        None if ask_for_certificates => Some(AskForClientCertificates::new()),
        None => None,
    };
    cert.server_config(verifier, &[b"h2"])
}

/// Handshakes finished and not yet taken by the server.
const READY: usize = 64;

/// An agent connection after its TLS handshake. It reports what a
/// plaintext connection does (the peer's TCP address and the handle that
/// lifts its unauthenticated deadline), which is all the hub reads of it
/// (agents are identified by their token).
pub struct TlsConnection(TlsStream<LimitedConnection>, Option<Arc<Presented>>);

impl Connected for TlsConnection {
    type ConnectInfo = AgentConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.0
            .get_ref()
            .0
            .connect_info()
            .with_presented(self.1.clone())
    }
}

impl AsyncRead for TlsConnection {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for TlsConnection {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }
}

/// `reason` of `ferry_hub_agent_connections_closed_total`: the connection
/// waited its turn to start a TLS handshake for longer than it may stay
/// unauthenticated.
pub const CLOSED_HANDSHAKE_QUEUED: &str = "tls_handshake_queued";
/// `reason`: the TLS handshake took longer than its timeout.
pub const CLOSED_HANDSHAKE_TIMEOUT: &str = "tls_handshake_timeout";
/// `reason`: the TLS handshake failed (the peer closed, or spoke no TLS the
/// hub accepts).
pub const CLOSED_HANDSHAKE_FAILED: &str = "tls_handshake_failed";

/// Bounds on the agent port's TLS handshakes.
#[derive(Clone, Copy, Debug)]
pub struct HandshakeLimits {
    /// Longest one handshake may take once it has started.
    pub timeout: Duration,
    /// Handshakes under way at once; the others wait their turn in the
    /// order they were accepted. When every agent dials at once (a hub
    /// restart), thousands of handshakes sharing the CPU all finish late and
    /// many outlive their timeout; taking turns finishes them one batch
    /// after another, each within a fraction of its timeout.
    pub in_flight: usize,
    /// Longest a connection waits for its turn; then it is closed. The
    /// wait while a starting replica lists its caches does not count.
    pub queued: Duration,
}

/// One connection counted in a stage of the handshake gauge while it lives.
struct Staged(Gauge);

impl Staged {
    fn enter(metrics: &HubMetrics, stage: &'static str) -> Self {
        let gauge = metrics
            .tls_handshakes
            .get_or_create(&HandshakeStageLabel { stage })
            .clone();
        gauge.inc();
        Self(gauge)
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// The connections of `incoming` whose TLS handshake with `config`
/// succeeded within `limits`, with the client certificate each presented
/// judged by `check` (when given); the others are logged, counted in
/// `metrics` and closed. No handshake starts before `opened` turns true (or
/// its sender goes): accepted connections wait for it, holding their TCP
/// socket only. Then at most `limits.in_flight` handshakes are under way at
/// once, taken in turn; a connection's unauthenticated deadline runs from
/// when its handshake starts. Accept errors (usually out of descriptors)
/// are logged and accepting resumes after a short pause. Accepting stops
/// when the returned stream is dropped.
pub fn tls_incoming<S>(
    incoming: S,
    config: Arc<ServerConfig>,
    limits: HandshakeLimits,
    check: Option<PresentedCheck>,
    opened: watch::Receiver<bool>,
    metrics: Arc<HubMetrics>,
) -> impl Stream<Item = io::Result<TlsConnection>>
where
    S: Stream<Item = io::Result<LimitedConnection>> + Send + 'static,
{
    let (ready, taken) = mpsc::channel(READY);
    let acceptor = TlsAcceptor::from(config);
    // tokio's semaphore hands out permits first come, first served.
    let turns = Arc::new(Semaphore::new(limits.in_flight.max(1)));
    tokio::spawn(async move {
        let mut incoming = std::pin::pin!(incoming);
        loop {
            let accepted = tokio::select! {
                () = ready.closed() => return,
                accepted = incoming.next() => accepted,
            };
            let connection = match accepted {
                Some(Ok(connection)) => connection,
                Some(Err(error)) => {
                    debug!(%error, "agent port accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
                None => return,
            };
            let acceptor = acceptor.clone();
            let ready = ready.clone();
            let check = check.clone();
            let opened = opened.clone();
            let turns = turns.clone();
            let metrics = metrics.clone();
            tokio::spawn(async move {
                let peer = connection.connect_info().remote_addr();
                let Some(tls) =
                    handshake(connection, &acceptor, limits, opened, &turns, &metrics).await
                else {
                    return;
                };
                let presented = check.and_then(|check| {
                    let chain = tls.get_ref().1.peer_certificates()?;
                    check.judge(chain, UnixTime::now())
                });
                let presented = presented.map(Arc::new);
                if ready.send(Ok(TlsConnection(tls, presented))).await.is_err() {
                    debug!(?peer, "agent port closed before the connection was served");
                }
            });
        }
    });
    ReceiverStream::new(taken)
}

/// `connection`'s TLS handshake, once `opened` and its turn among `turns`
/// came; None (logged and counted) when it waited too long for its turn or
/// the handshake failed or timed out.
async fn handshake(
    mut connection: LimitedConnection,
    acceptor: &TlsAcceptor,
    limits: HandshakeLimits,
    mut opened: watch::Receiver<bool>,
    turns: &Arc<Semaphore>,
    metrics: &HubMetrics,
) -> Option<TlsStream<LimitedConnection>> {
    let peer = connection.connect_info().remote_addr();
    let waiting = Staged::enter(metrics, STAGE_WAITING);
    // A closed gate whose sender is gone opens: nothing is left to wait for.
    if !*opened.borrow_and_update() {
        let _ = opened.wait_for(|open| *open).await;
    }
    let Ok(Ok(_turn)) = tokio::time::timeout(limits.queued, turns.clone().acquire_owned()).await
    else {
        // The semaphore is never closed: only the wait can have run out.
        debug!(?peer, "agent TLS handshake waited too long for its turn");
        metrics.connection_closed(CLOSED_HANDSHAKE_QUEUED);
        return None;
    };
    drop(waiting);
    let _in_progress = Staged::enter(metrics, STAGE_IN_PROGRESS);
    connection.restart_unauthenticated_deadline();
    match tokio::time::timeout(limits.timeout, acceptor.accept(connection)).await {
        Ok(Ok(tls)) => Some(tls),
        Ok(Err(error)) => {
            debug!(?peer, %error, "agent TLS handshake failed");
            metrics.connection_closed(CLOSED_HANDSHAKE_FAILED);
            None
        }
        Err(_) => {
            debug!(?peer, "agent TLS handshake timed out");
            metrics.connection_closed(CLOSED_HANDSHAKE_TIMEOUT);
            None
        }
    }
}

/// Stage of the handshake gauge: accepted, waiting for the caches or a turn.
const STAGE_WAITING: &str = "waiting";
/// Stage of the handshake gauge: the handshake is under way.
const STAGE_IN_PROGRESS: &str = "in_progress";

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::{TcpListener, TcpStream};
    use tokio_rustls::TlsConnector;
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
    use tokio_rustls::rustls::{ClientConfig, RootCertStore};
    use tokio_stream::wrappers::TcpListenerStream;

    use crate::certs::reload::{CertReloads, CertSource};
    use crate::certs::tls::ServingCert;
    use crate::grpc::connection_limit::{ConnectionLimits, limit_connections};
    use crate::metrics::ConnectionClosedLabel;

    /// Waits until `read` says so, looking every 5 ms, for at most 30 s.
    async fn until(what: &str, read: impl Fn() -> bool) {
        let seen = async {
            while !read() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(30), seen)
            .await
            .unwrap_or_else(|_| panic!("{what} was never seen"));
    }

    fn stage(metrics: &HubMetrics, stage: &'static str) -> i64 {
        metrics
            .tls_handshakes
            .get_or_create(&HandshakeStageLabel { stage })
            .get()
    }

    fn closed(metrics: &HubMetrics, reason: &'static str) -> u64 {
        metrics
            .connections_closed
            .get_or_create(&ConnectionClosedLabel { reason })
            .get()
    }

    /// An agent port on loopback taking one handshake at a time, each
    /// connection waiting at most `queued` for its turn; and a client
    /// trusting its certificate.
    async fn one_at_a_time(
        queued: Duration,
    ) -> (
        std::net::SocketAddr,
        Arc<HubMetrics>,
        impl Stream<Item = io::Result<TlsConnection>>,
        TlsConnector,
    ) {
        let cert = ServingCert::generate(&["localhost".into()]).expect("cert");
        let source = CertSource::Pem {
            chain: cert.chain_pem.clone(),
            key: cert.key_pem.clone(),
        };
        let hour = Duration::from_secs(3600);
        let serving = ReloadingCert::start(&source, "test", hour, CertReloads::default())
            .await
            .expect("loads");
        let config = serving.server_config(None, &[b"h2"]).expect("config");
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let metrics = Arc::new(HubMetrics::default());
        let accepted = limit_connections(
            TcpListenerStream::new(listener),
            ConnectionLimits {
                max_connections: 100,
                max_per_peer: 100,
                unauthenticated_idle: hour,
            },
            metrics.clone(),
        );
        let (open, opened) = watch::channel(true);
        drop(open);
        let limits = HandshakeLimits {
            timeout: hour,
            in_flight: 1,
            queued,
        };
        let served = tls_incoming(accepted, config, limits, None, opened, metrics.clone());

        let mut roots = RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(cert.ca_pem.as_bytes()).expect("CA"))
            .expect("root");
        let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
        let mut client = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        client.alpn_protocols = vec![b"h2".to_vec()];
        (addr, metrics, served, TlsConnector::from(Arc::new(client)))
    }

    fn localhost() -> ServerName<'static> {
        ServerName::try_from("localhost").expect("name")
    }

    #[tokio::test]
    async fn a_connection_that_waits_too_long_for_its_turn_is_closed() {
        let (addr, metrics, _served, connector) = one_at_a_time(Duration::from_millis(300)).await;
        // A peer that never says hello holds the one turn...
        let _silent = TcpStream::connect(addr).await.expect("connect");
        until("the silent peer's handshake under way", || {
            stage(&metrics, STAGE_IN_PROGRESS) == 1
        })
        .await;
        // ...so the next waits for its turn, and is closed once it waited
        // longer than it may.
        let queued = TcpStream::connect(addr).await.expect("connect");
        let refused = connector.connect(localhost(), queued).await;
        assert!(
            refused.is_err(),
            "a connection that never got its turn is closed"
        );
        assert_eq!(closed(&metrics, CLOSED_HANDSHAKE_QUEUED), 1);
        assert_eq!(stage(&metrics, STAGE_WAITING), 0);
        assert_eq!(stage(&metrics, STAGE_IN_PROGRESS), 1, "the silent peer's");
    }

    #[tokio::test]
    async fn handshakes_take_turns() {
        let (addr, metrics, served, connector) = one_at_a_time(Duration::from_secs(3600)).await;
        let mut served = std::pin::pin!(served);
        let silent = TcpStream::connect(addr).await.expect("connect");
        until("the silent peer's handshake under way", || {
            stage(&metrics, STAGE_IN_PROGRESS) == 1
        })
        .await;
        let waiting = TcpStream::connect(addr).await.expect("connect");
        let handshake = tokio::spawn(async move { connector.connect(localhost(), waiting).await });
        until("the next connection waiting its turn", || {
            stage(&metrics, STAGE_WAITING) == 1
        })
        .await;
        assert!(
            !handshake.is_finished(),
            "no handshake while the turn is taken"
        );
        // Once the silent peer goes, its turn is the waiting connection's.
        drop(silent);
        handshake.await.expect("task").expect("served in its turn");
        assert!(served.next().await.expect("a connection").is_ok());
        assert_eq!(
            closed(&metrics, CLOSED_HANDSHAKE_FAILED),
            1,
            "the silent peer"
        );
        assert_eq!(stage(&metrics, STAGE_WAITING), 0);
        assert_eq!(stage(&metrics, STAGE_IN_PROGRESS), 0);
    }
}
