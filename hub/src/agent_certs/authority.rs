//! The hub's agent CA: an ECDSA P-256 key and a self-signed certificate,
//! made by the first replica that starts and kept in a Secret beside the
//! hub, so every replica and every restart verifies what any of them issued.
//! It signs one kind of certificate: client authentication for one agent,
//! short-lived, naming the [`AgentSubject`] the session authenticated as.

use std::sync::Arc;
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, CertificateSigningRequestParams, DnType,
    ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose, SanType, SerialNumber,
};
use time::OffsetDateTime;
use tokio_rustls::rustls::RootCertStore;
use tokio_rustls::rustls::pki_types::{
    CertificateDer, CertificateSigningRequestDer, pem::PemObject,
};

use crate::agent_certs::error::{AgentCaError, IssueError};
use crate::agent_certs::subject::AgentSubject;

/// How long the CA itself is valid: long, since agents' certificates are
/// short-lived and the CA is replaced by deleting its Secret.
const CA_VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// Clock skew forgiven between replicas and agents: a certificate is valid
/// from this long before it was issued. Revocation compares issue times,
/// which a certificate carries as its `notBefore` plus this (see
/// [`issued_at`]).
pub const SKEW: Duration = Duration::from_secs(60);

/// A certificate the CA signed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Issued {
    /// The certificate, PEM.
    pub pem: String,
    /// When it was issued, Unix seconds (its `notBefore` plus [`SKEW`]).
    pub issued_at: i64,
    /// Its `notAfter`, Unix seconds.
    pub not_after: i64,
}

/// The agent CA: signs agent certificates and holds the root their chains
/// are verified against.
pub struct AgentCa {
    issuer: Issuer<'static, KeyPair>,
    cert_pem: String,
    roots: Arc<RootCertStore>,
}

impl std::fmt::Debug for AgentCa {
    // The key stays out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentCa").finish_non_exhaustive()
    }
}

/// The issue time a certificate's `notBefore` (Unix seconds) stands for.
pub fn issued_at(not_before: i64) -> i64 {
    not_before.saturating_add(SKEW.as_secs().cast_signed())
}

impl AgentCa {
    /// A new CA, valid from `now` (Unix seconds): the CA and its key as PEM.
    /// Fails only if key generation or signing fails.
    pub fn generate(now: i64) -> Result<(String, String), AgentCaError> {
        let key = KeyPair::generate().map_err(AgentCaError::Generate)?;
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, "ferry-hub agent CA");
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        params.not_before = at(now.saturating_sub(SKEW.as_secs().cast_signed()));
        params.not_after = at(now.saturating_add(CA_VALIDITY.as_secs().cast_signed()));
        let cert = params.self_signed(&key).map_err(AgentCaError::Generate)?;
        Ok((cert.pem(), key.serialize_pem()))
    }

    /// The CA of `cert_pem` and `key_pem`. Fails with the reason when either
    /// is not PEM of its kind or rustls does not take the certificate as a
    /// root.
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<Self, String> {
        let key = KeyPair::from_pem(key_pem).map_err(|e| format!("the key: {e}"))?;
        let der = CertificateDer::from_pem_slice(cert_pem.as_bytes())
            .map_err(|e| format!("the certificate: {e}"))?;
        let issuer =
            Issuer::from_ca_cert_der(&der, key).map_err(|e| format!("the certificate: {e}"))?;
        let mut roots = RootCertStore::empty();
        roots
            .add(der)
            .map_err(|e| format!("the certificate as a root: {e}"))?;
        Ok(Self {
            issuer,
            cert_pem: cert_pem.to_string(),
            roots: Arc::new(roots),
        })
    }

    /// The CA certificate, PEM.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The roots agent certificates are verified against: this CA alone.
    pub fn roots(&self) -> Arc<RootCertStore> {
        self.roots.clone()
    }

    /// Signs a certificate for `subject` with the public key of `csr_der`,
    /// valid from `now` (Unix seconds, less [`SKEW`]) for `lifetime`.
    /// Nothing of the request but its key is used: the certificate names
    /// the subject the session authenticated as. Fails when the request is
    /// not a PKCS#10 request whose signature verifies, or signing fails.
    pub fn issue(
        &self,
        csr_der: &[u8],
        subject: &AgentSubject,
        now: i64,
        lifetime: Duration,
    ) -> Result<Issued, IssueError> {
        let request =
            CertificateSigningRequestParams::from_der(&CertificateSigningRequestDer::from(csr_der))
                .map_err(|e| IssueError::BadRequest(e.to_string()))?;
        let not_before = now.saturating_sub(SKEW.as_secs().cast_signed());
        let not_after = now.saturating_add(lifetime.as_secs().cast_signed());
        let mut params = CertificateParams::default();
        params
            .distinguished_name
            .push(DnType::CommonName, subject.cluster.clone());
        params
            .distinguished_name
            .push(DnType::OrganizationName, "ferry agents");
        let uri = subject
            .to_uri()
            .try_into()
            .map_err(|e: rcgen::Error| IssueError::Sign(e.to_string()))?;
        params.subject_alt_names = vec![SanType::URI(uri)];
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.serial_number = Some(SerialNumber::from(rand::random::<u64>()));
        params.not_before = at(not_before);
        params.not_after = at(not_after);
        let cert = params
            .signed_by(&request.public_key, &self.issuer)
            .map_err(|e| IssueError::Sign(e.to_string()))?;
        Ok(Issued {
            pem: cert.pem(),
            issued_at: now,
            not_after,
        })
    }
}

/// `unix` seconds as a certificate time (the epoch for a time out of range,
/// which no caller passes).
fn at(unix: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(unix).unwrap_or(OffsetDateTime::UNIX_EPOCH)
}
