//! The webhook's serving certificate (given as files, re-read when they
//! change, or generated at start) and a TLS listener for axum.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::server::TlsStream;
use tracing::debug;

use crate::certs::reload::{
    CertLoadError, CertReloads, CertSource, DEFAULT_RELOAD_INTERVAL, ReloadingCert,
};

/// A TLS handshake that takes longer is dropped, so a silent peer cannot hold
/// a connection slot.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The serving certificate could not be made or loaded.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// Generating the self-signed certificate failed.
    #[error("generating the webhook certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// A certificate or key file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// The certificate and key do not make a TLS configuration (no PEM
    /// block, a key that does not match, an unreadable file).
    #[error("the webhook certificate: {0}")]
    Load(#[from] CertLoadError),
}

/// A serving certificate chain and key as PEM, plus the CA bundle the API
/// server needs to trust it.
#[derive(Clone)]
pub struct ServingCert {
    /// Certificate chain, leaf first.
    pub chain_pem: String,
    /// Private key of the leaf.
    pub key_pem: String,
    /// What goes in the webhook's `caBundle`.
    pub ca_pem: String,
    /// The files the chain and key were read from, if any: the listener
    /// follows them, so a rotated certificate is served without a restart.
    pub files: Option<(PathBuf, PathBuf)>,
    /// How often `files` are checked for changes.
    pub reload_interval: Duration,
}

impl std::fmt::Debug for ServingCert {
    // The key stays out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServingCert").finish_non_exhaustive()
    }
}

impl ServingCert {
    /// A fresh CA and a leaf it signed, valid for `hosts` (DNS names or IP
    /// addresses). A CA plus leaf, rather than a lone self-signed leaf, is
    /// what every TLS client accepts as a trust root. Fails only if key
    /// generation or signing fails.
    pub fn generate(hosts: &[String]) -> Result<Self, CertError> {
        let ca_key = KeyPair::generate()?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "ferry-hub webhook CA");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca_cert = ca_params.self_signed(&ca_key)?;
        let issuer = Issuer::new(ca_params, ca_key);

        let leaf_key = KeyPair::generate()?;
        let mut leaf_params = CertificateParams::new(hosts.to_vec())?;
        leaf_params
            .distinguished_name
            .push(DnType::CommonName, "ferry-hub webhook");
        let leaf = leaf_params.signed_by(&leaf_key, &issuer)?;
        Ok(Self {
            chain_pem: leaf.pem(),
            key_pem: leaf_key.serialize_pem(),
            ca_pem: ca_cert.pem(),
            files: None,
            reload_interval: DEFAULT_RELOAD_INTERVAL,
        })
    }

    /// Reads the chain and key from PEM files; the CA bundle is `ca` when
    /// given, else the chain itself (right for a self-signed certificate or a
    /// chain that ends in its CA). Fails when a file cannot be read.
    pub fn load(cert: &Path, key: &Path, ca: Option<&Path>) -> Result<Self, CertError> {
        let read = |path: &Path| {
            std::fs::read_to_string(path).map_err(|source| CertError::Read {
                path: path.display().to_string(),
                source,
            })
        };
        let chain_pem = read(cert)?;
        let ca_pem = match ca {
            Some(ca) => read(ca)?,
            None => chain_pem.clone(),
        };
        Ok(Self {
            chain_pem,
            key_pem: read(key)?,
            ca_pem,
            files: Some((cert.to_path_buf(), key.to_path_buf())),
            reload_interval: DEFAULT_RELOAD_INTERVAL,
        })
    }

    /// The rustls server configuration for this certificate (ring provider,
    /// HTTP/2 or HTTP/1.1 by ALPN); when it was loaded from files, it follows them, counting
    /// reloads in `reloads`. Fails when the PEM holds no certificate or key,
    /// or the key does not match.
    pub async fn server_config(
        &self,
        reloads: CertReloads,
    ) -> Result<Arc<ServerConfig>, CertError> {
        let source = match &self.files {
            Some((cert, key)) => CertSource::Files {
                cert: cert.clone(),
                key: key.clone(),
            },
            None => CertSource::Pem {
                chain: self.chain_pem.clone(),
                key: self.key_pem.clone(),
            },
        };
        let cert = ReloadingCert::start(&source, "webhook", self.reload_interval, reloads).await?;
        // h2 first: the API server then multiplexes concurrent reviews over
        // one connection instead of opening (and TLS-handshaking) one per
        // review in flight and dropping those beyond its idle pool.
        Ok(cert.server_config(None, &[b"h2", b"http/1.1"])?)
    }
}

/// Accepts TCP connections and hands out those whose TLS handshake
/// succeeded. Handshakes run in their own tasks so one slow peer never holds
/// up the others.
pub struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

impl TlsListener {
    /// Starts accepting on `listener`. Fails only when the listener has no
    /// local address.
    pub fn new(listener: TcpListener, config: Arc<ServerConfig>) -> std::io::Result<Self> {
        let local = listener.local_addr()?;
        let (tx, ready) = mpsc::channel(64);
        let acceptor = TlsAcceptor::from(config);
        tokio::spawn(async move {
            loop {
                let (tcp, peer) = tokio::select! {
                    // The listener was dropped: stop accepting.
                    () = tx.closed() => return,
                    accepted = listener.accept() => match accepted {
                        Ok(accepted) => accepted,
                        Err(e) => {
                            // Usually out of file descriptors; back off briefly.
                            debug!(error = %e, "webhook accept failed");
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            continue;
                        }
                    },
                };
                // Nagle off: a review's answer must not wait for the API
                // server's delayed ACK of the segment before it.
                let _ = tcp.set_nodelay(true);
                let acceptor = acceptor.clone();
                let tx = tx.clone();
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(tls)) => {
                            let _ = tx.send((tls, peer)).await;
                        }
                        Ok(Err(e)) => debug!(%peer, error = %e, "webhook TLS handshake failed"),
                        Err(_) => debug!(%peer, "webhook TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(Self { ready, local })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(accepted) => accepted,
            // The accept task only ends once this listener is gone, so this
            // is never reached; waiting forever is the honest answer.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_generated_certificate_makes_a_server_config() {
        let cert = ServingCert::generate(&["127.0.0.1".into(), "ferry-hub.ferry.svc".into()])
            .expect("generate");
        assert!(cert.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert_ne!(cert.ca_pem, cert.chain_pem, "the CA is not the leaf");
        cert.server_config(CertReloads::default())
            .await
            .expect("usable by rustls");
    }

    #[tokio::test]
    async fn a_key_that_is_not_pem_is_an_error_not_a_panic() {
        let mut cert = ServingCert::generate(&["localhost".into()]).expect("generate");
        cert.key_pem = "nonsense".into();
        assert!(matches!(
            cert.server_config(CertReloads::default()).await,
            Err(CertError::Load(CertLoadError::Pem { .. }))
        ));
    }
}
