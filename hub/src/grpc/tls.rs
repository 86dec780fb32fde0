//! TLS handshakes of the agent port, done by the hub rather than by tonic so
//! that the certificate comes from a [`crate::certs::reload::ReloadingCert`]:
//! tonic's own TLS takes a fixed identity. Each handshake runs in its own
//! task under a timeout, so one slow peer never holds up the others; the
//! connection keeps its connection-limit permit throughout. When the hub
//! issues agent certificates, every client is asked for one, and one that is
//! presented is judged against the agent CA in the same task, right after
//! the handshake; the stream's start then holds it against the hub's state.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::{Stream, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{mpsc, watch};
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
use crate::metrics::HubMetrics;

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

/// The connections of `incoming` whose TLS handshake with `config`
/// succeeded within `timeout`, with the client certificate each presented
/// judged by `check` (when given); the others are logged and closed. No
/// handshake starts before `opened` turns true (or its sender goes):
/// accepted connections wait for it, holding their TCP socket only, and the
/// handshake's timeout and the connection's unauthenticated deadline run
/// from when it opened. Accept errors (usually out of
/// descriptors) are logged and accepting resumes after a short pause.
/// Accepting stops when the returned stream is dropped.
pub fn tls_incoming<S>(
    incoming: S,
    config: Arc<ServerConfig>,
    timeout: Duration,
    check: Option<PresentedCheck>,
    opened: watch::Receiver<bool>,
) -> impl Stream<Item = io::Result<TlsConnection>>
where
    S: Stream<Item = io::Result<LimitedConnection>> + Send + 'static,
{
    let (ready, taken) = mpsc::channel(READY);
    let acceptor = TlsAcceptor::from(config);
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
            let mut opened = opened.clone();
            tokio::spawn(async move {
                let mut connection = connection;
                let peer = connection.connect_info().remote_addr();
                // A closed gate whose sender is gone opens: nothing is left
                // to wait for.
                if !*opened.borrow_and_update() {
                    let _ = opened.wait_for(|open| *open).await;
                    connection.restart_unauthenticated_deadline();
                }
                match tokio::time::timeout(timeout, acceptor.accept(connection)).await {
                    Ok(Ok(tls)) => {
                        let presented = check.and_then(|check| {
                            let chain = tls.get_ref().1.peer_certificates()?;
                            check.judge(chain, UnixTime::now())
                        });
                        let presented = presented.map(Arc::new);
                        let _ = ready.send(Ok(TlsConnection(tls, presented))).await;
                    }
                    Ok(Err(error)) => debug!(?peer, %error, "agent TLS handshake failed"),
                    Err(_) => debug!(?peer, "agent TLS handshake timed out"),
                }
            });
        }
    });
    ReceiverStream::new(taken)
}
