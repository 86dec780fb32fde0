//! Serving certificates (and the client CA of mutual TLS) that follow their
//! files: cert-manager rotates a Secret, the kubelet rewrites the mounted
//! files, and new TLS handshakes use the new certificate without a restart.
//! Sessions already open keep the certificate they were made with.
//!
//! The files are polled (every [`DEFAULT_RELOAD_INTERVAL`] by default) and
//! reparsed only when their bytes changed: no file-watch crate is in the
//! dependency tree, and the kubelet updates Secret volumes only every minute
//! or so anyway. A change that does not parse (a half-written file, a key
//! that does not match the certificate) is logged and counted, and the
//! previous certificate stays in use; the next change is tried again.
//!
//! The current certificate lives in a `tokio::sync::watch` channel: rustls
//! asks for it synchronously during each handshake, and `borrow` answers
//! without waiting on the poller.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use tokio::sync::watch;
use tokio_rustls::rustls::client::danger::HandshakeSignatureValid;
use tokio_rustls::rustls::crypto::{CryptoProvider, ring};
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use tokio_rustls::rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use tokio_rustls::rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use tokio_rustls::rustls::sign::CertifiedKey;
use tokio_rustls::rustls::{
    DigitallySignedStruct, DistinguishedName, Error as TlsError, RootCertStore, ServerConfig,
    SignatureScheme,
};
use tracing::{info, warn};

use crate::metrics::CertReloadLabel;

/// How often certificate files are checked for changes.
pub const DEFAULT_RELOAD_INTERVAL: Duration = Duration::from_secs(10);

/// A certificate or CA could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum CertLoadError {
    /// A file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// A file holds no usable PEM certificate or key.
    #[error("{what}: {reason}")]
    Pem {
        /// Which file or text.
        what: String,
        /// What is wrong with it.
        reason: String,
    },
    /// rustls refused the certificate, key or CA (e.g. the key does not
    /// match the certificate).
    #[error("{what}: {source}")]
    Tls {
        /// Which certificate.
        what: String,
        /// The rustls error.
        #[source]
        source: TlsError,
    },
}

/// Where a serving certificate and its key come from.
#[derive(Clone)]
pub enum CertSource {
    /// Fixed PEM text (a generated certificate, or tests).
    Pem {
        /// Certificate chain, leaf first.
        chain: String,
        /// The leaf's private key.
        key: String,
    },
    /// Files, re-read when they change.
    Files {
        /// Certificate chain file, leaf first.
        cert: PathBuf,
        /// Private key file.
        key: PathBuf,
    },
}

impl std::fmt::Debug for CertSource {
    // The key stays out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Pem { .. } => f.write_str("CertSource::Pem"),
            Self::Files { cert, key } => f
                .debug_struct("CertSource::Files")
                .field("cert", cert)
                .field("key", key)
                .finish(),
        }
    }
}

/// Where the CA that client certificates must chain to comes from.
#[derive(Clone, Debug)]
pub enum CaSource {
    /// Fixed PEM text.
    Pem(String),
    /// A file, re-read when it changes.
    File(PathBuf),
}

/// Counts certificate reloads by listener and outcome; see
/// [`crate::metrics::HubMetrics::certificate_reloads`].
pub type CertReloads = Family<CertReloadLabel, Counter>;

fn provider() -> Arc<CryptoProvider> {
    Arc::new(ring::default_provider())
}

/// Parses a chain and key into what rustls serves. Fails when either holds
/// no PEM block of its kind, or the key does not match the leaf.
pub fn certified_key(chain_pem: &[u8], key_pem: &[u8]) -> Result<CertifiedKey, CertLoadError> {
    let pem = |what: &str, reason: String| CertLoadError::Pem {
        what: what.into(),
        reason,
    };
    let chain = CertificateDer::pem_slice_iter(chain_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem("certificate", e.to_string()))?;
    if chain.is_empty() {
        return Err(pem("certificate", "no CERTIFICATE block".into()));
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| pem("key", e.to_string()))?;
    CertifiedKey::from_der(chain, key, &provider()).map_err(|source| CertLoadError::Tls {
        what: "certificate and key".into(),
        source,
    })
}

/// Parses a CA bundle into a verifier that requires client certificates
/// signed by it. Fails when it holds no certificate rustls accepts.
pub fn client_verifier(ca_pem: &[u8]) -> Result<Arc<dyn ClientCertVerifier>, CertLoadError> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem) {
        let cert = cert.map_err(|e| CertLoadError::Pem {
            what: "client CA".into(),
            reason: e.to_string(),
        })?;
        roots.add(cert).map_err(|source| CertLoadError::Tls {
            what: "client CA".into(),
            source,
        })?;
    }
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
        .build()
        .map_err(|e| CertLoadError::Pem {
            what: "client CA".into(),
            reason: e.to_string(),
        })
}

/// Reads every file of `paths`, off the runtime's worker threads. Fails on
/// the first that cannot be read.
async fn read_all(paths: &[PathBuf]) -> Result<Vec<Vec<u8>>, CertLoadError> {
    let paths = paths.to_vec();
    let read = move || {
        paths
            .iter()
            .map(|path| {
                std::fs::read(path).map_err(|source| CertLoadError::Read {
                    path: path.display().to_string(),
                    source,
                })
            })
            .collect()
    };
    tokio::task::spawn_blocking(read)
        .await
        .unwrap_or_else(|join| {
            Err(CertLoadError::Read {
                path: "certificate files".into(),
                source: std::io::Error::other(join.to_string()),
            })
        })
}

/// Keeps `current` following `paths`: every `interval`, reads them and, when
/// their bytes changed since the last attempt, parses them with `parse` and
/// publishes the result. Ends when every receiver is gone.
async fn follow_files<T: Send + Sync + 'static>(
    listener: &'static str,
    paths: Vec<PathBuf>,
    mut seen: Vec<Vec<u8>>,
    parse: impl Fn(&[Vec<u8>]) -> Result<T, CertLoadError> + Send + 'static,
    current: watch::Sender<Arc<T>>,
    interval: Duration,
    reloads: CertReloads,
) {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = current.closed() => return,
            _ = ticker.tick() => {}
        }
        let outcome = match read_all(&paths).await {
            Ok(contents) if contents == seen => continue,
            Ok(contents) => {
                let parsed = parse(&contents);
                seen = contents;
                parsed.map(|value| {
                    current.send_replace(Arc::new(value));
                })
            }
            Err(error) => Err(error),
        };
        let label = match outcome {
            Ok(()) => {
                info!(listener, files = ?paths, "serving certificate reloaded");
                "reloaded"
            }
            Err(error) => {
                warn!(listener, %error, "certificate files changed but cannot be used; keeping the previous certificate");
                "failed"
            }
        };
        reloads
            .get_or_create(&CertReloadLabel {
                listener,
                outcome: label,
            })
            .inc();
    }
}

/// The serving certificate of one listener, swapped whole when its files
/// change. Hand it to rustls with [`ReloadingCert::server_config`].
#[derive(Debug, Clone)]
pub struct ReloadingCert {
    current: watch::Receiver<Arc<CertifiedKey>>,
}

impl ReloadingCert {
    /// Loads `source` now; for files, starts following them on the current
    /// tokio runtime every `interval`, counting reloads under `listener`.
    /// Fails when the certificate cannot be loaded at start.
    pub async fn start(
        source: &CertSource,
        listener: &'static str,
        interval: Duration,
        reloads: CertReloads,
    ) -> Result<Self, CertLoadError> {
        match source {
            CertSource::Pem { chain, key } => {
                let key = certified_key(chain.as_bytes(), key.as_bytes())?;
                let (_, current) = watch::channel(Arc::new(key));
                Ok(Self { current })
            }
            CertSource::Files { cert, key } => {
                let paths = vec![cert.clone(), key.clone()];
                let contents = read_all(&paths).await?;
                let parse = |c: &[Vec<u8>]| certified_key(&c[0], &c[1]);
                let (tx, current) = watch::channel(Arc::new(parse(&contents)?));
                tokio::spawn(follow_files(
                    listener, paths, contents, parse, tx, interval, reloads,
                ));
                Ok(Self { current })
            }
        }
    }

    /// The certificate new handshakes get now.
    pub fn current(&self) -> Arc<CertifiedKey> {
        self.current.borrow().clone()
    }

    /// A rustls server configuration (ring, TLS 1.2 and 1.3) resolving to
    /// the current certificate, offering `alpn`, and judging client
    /// certificates by `verifier` when given (none are asked for otherwise).
    pub fn server_config(
        &self,
        verifier: Option<Arc<dyn ClientCertVerifier>>,
        alpn: &[&[u8]],
    ) -> Result<Arc<ServerConfig>, CertLoadError> {
        let builder = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|source| CertLoadError::Tls {
                what: "protocol versions".into(),
                source,
            })?;
        let builder = match verifier {
            Some(verifier) => builder.with_client_cert_verifier(verifier),
            None => builder.with_no_client_auth(),
        };
        let mut config = builder.with_cert_resolver(Arc::new(self.clone()));
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Ok(Arc::new(config))
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

/// The client-certificate verifier of mutual TLS, rebuilt when its CA file
/// changes. It offers no CA names to clients (rustls hands those out by
/// reference, which a swappable verifier cannot), so a client sends its one
/// certificate whatever CA it chains to, which is what agents do anyway.
#[derive(Debug, Clone)]
pub struct ReloadingClientCa {
    current: watch::Receiver<Arc<Arc<dyn ClientCertVerifier>>>,
}

impl ReloadingClientCa {
    /// Loads `source` now; for a file, starts following it like
    /// [`ReloadingCert::start`]. Fails when the CA cannot be loaded at start.
    pub async fn start(
        source: &CaSource,
        listener: &'static str,
        interval: Duration,
        reloads: CertReloads,
    ) -> Result<Self, CertLoadError> {
        match source {
            CaSource::Pem(pem) => {
                let (_, current) = watch::channel(Arc::new(client_verifier(pem.as_bytes())?));
                Ok(Self { current })
            }
            CaSource::File(path) => {
                let paths = vec![path.clone()];
                let contents = read_all(&paths).await?;
                let parse = |c: &[Vec<u8>]| client_verifier(&c[0]);
                let (tx, current) = watch::channel(Arc::new(parse(&contents)?));
                tokio::spawn(follow_files(
                    listener, paths, contents, parse, tx, interval, reloads,
                ));
                Ok(Self { current })
            }
        }
    }

    fn verifier(&self) -> Arc<dyn ClientCertVerifier> {
        self.current.borrow().as_ref().clone()
    }
}

impl ClientCertVerifier for ReloadingClientCa {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, TlsError> {
        self.verifier()
            .verify_client_cert(end_entity, intermediates, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        self.verifier().verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        self.verifier().verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.verifier().supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certs::tls::ServingCert;

    fn files(dir: &std::path::Path, cert: &ServingCert) -> CertSource {
        std::fs::write(dir.join("tls.crt"), &cert.chain_pem).expect("write");
        std::fs::write(dir.join("tls.key"), &cert.key_pem).expect("write");
        CertSource::Files {
            cert: dir.join("tls.crt"),
            key: dir.join("tls.key"),
        }
    }

    fn leaf(key: &CertifiedKey) -> Vec<u8> {
        key.end_entity_cert().expect("leaf").to_vec()
    }

    /// Waits until `outcome` was counted `at_least` times: the poller's own
    /// signal that it looked at the files, instead of a sleep.
    async fn wait_for(reloads: &CertReloads, outcome: &'static str, at_least: u64) {
        let label = CertReloadLabel {
            listener: "test",
            outcome,
        };
        let counted = async {
            while reloads.get_or_create(&label).get() < at_least {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(30), counted)
            .await
            .unwrap_or_else(|_| panic!("{outcome} was not counted {at_least} times"));
    }

    #[tokio::test]
    async fn new_files_are_served_and_bad_ones_keep_the_previous_certificate() {
        let dir = tempfile::tempdir().expect("dir");
        let a = ServingCert::generate(&["localhost".into()]).expect("a");
        let b = ServingCert::generate(&["localhost".into()]).expect("b");
        let source = files(dir.path(), &a);
        let reloads = CertReloads::default();
        let cert =
            ReloadingCert::start(&source, "test", Duration::from_millis(10), reloads.clone())
                .await
                .expect("loads");
        let served_a = leaf(&cert.current());

        files(dir.path(), &b);
        wait_for(&reloads, "reloaded", 1).await;
        let served_b = leaf(&cert.current());
        assert_ne!(served_a, served_b, "B is served after the files change");

        // B's certificate with A's key: a mismatch, as while the kubelet
        // has written one file and not yet the other.
        std::fs::write(dir.path().join("tls.key"), &a.key_pem).expect("write");
        wait_for(&reloads, "failed", 1).await;
        assert_eq!(leaf(&cert.current()), served_b, "B stays");
        std::fs::write(dir.path().join("tls.crt"), "-----BEGIN CERT").expect("write");
        wait_for(&reloads, "failed", 2).await;
        assert_eq!(leaf(&cert.current()), served_b, "B stays");
    }

    #[tokio::test]
    async fn a_certificate_that_does_not_load_at_start_is_an_error() {
        let dir = tempfile::tempdir().expect("dir");
        let a = ServingCert::generate(&["localhost".into()]).expect("a");
        let b = ServingCert::generate(&["localhost".into()]).expect("b");
        let source = CertSource::Pem {
            chain: a.chain_pem,
            key: b.key_pem,
        };
        let reloads = CertReloads::default();
        assert!(matches!(
            ReloadingCert::start(&source, "test", DEFAULT_RELOAD_INTERVAL, reloads.clone()).await,
            Err(CertLoadError::Tls { .. })
        ));
        let missing = CertSource::Files {
            cert: dir.path().join("none.crt"),
            key: dir.path().join("none.key"),
        };
        assert!(matches!(
            ReloadingCert::start(&missing, "test", DEFAULT_RELOAD_INTERVAL, reloads).await,
            Err(CertLoadError::Read { .. })
        ));
    }

    #[tokio::test]
    async fn a_client_ca_file_that_changes_is_followed() {
        let dir = tempfile::tempdir().expect("dir");
        let a = ServingCert::generate(&["localhost".into()]).expect("a");
        let b = ServingCert::generate(&["localhost".into()]).expect("b");
        let path = dir.path().join("ca.crt");
        std::fs::write(&path, &a.ca_pem).expect("write");
        let reloads = CertReloads::default();
        let ca = ReloadingClientCa::start(
            &CaSource::File(path.clone()),
            "test",
            Duration::from_millis(10),
            reloads.clone(),
        )
        .await
        .expect("loads");
        let b_leaf = CertificateDer::from_pem_slice(b.chain_pem.as_bytes()).expect("der");
        assert!(
            ca.verify_client_cert(&b_leaf, &[], UnixTime::now())
                .is_err()
        );
        std::fs::write(&path, &b.ca_pem).expect("write");
        wait_for(&reloads, "reloaded", 1).await;
        ca.verify_client_cert(&b_leaf, &[], UnixTime::now())
            .expect("B's CA is trusted now");
        std::fs::write(&path, "garbage").expect("write");
        wait_for(&reloads, "failed", 1).await;
        ca.verify_client_cert(&b_leaf, &[], UnixTime::now())
            .expect("B's CA is still trusted");
    }
}
