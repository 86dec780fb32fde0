//! The TLS layer's half of agent certificates: the agent port asks every
//! client for a certificate and lets one without through (it then presents
//! its token). A certificate's chain is not judged here but right after the
//! handshake, in the same task ([`crate::agent_certs::presented`]), so a bad
//! one gets a gRPC answer the agent can act on (drop it, use its token)
//! rather than a TLS alert; what the handshake does prove here is that the
//! client holds the certificate's private key.

use std::sync::Arc;

use tokio_rustls::rustls::client::danger::HandshakeSignatureValid;
use tokio_rustls::rustls::crypto::{
    WebPkiSupportedAlgorithms, ring, verify_tls12_signature, verify_tls13_signature,
};
use tokio_rustls::rustls::pki_types::{CertificateDer, UnixTime};
use tokio_rustls::rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use tokio_rustls::rustls::{DigitallySignedStruct, DistinguishedName, Error, SignatureScheme};

/// Asks for a client certificate, accepts the handshake without one, and
/// checks the handshake signature of one that is presented.
#[derive(Debug)]
pub struct AskForClientCertificates {
    algorithms: WebPkiSupportedAlgorithms,
}

impl AskForClientCertificates {
    /// The verifier, checking signatures with ring's algorithms.
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            algorithms: ring::default_provider().signature_verification_algorithms,
        })
    }
}

impl ClientCertVerifier for AskForClientCertificates {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, Error> {
        // Judged after the handshake, against the agent CA and the hub's
        // watched state (see the module documentation).
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}
