//! A certificate an agent presented in the TLS handshake, judged right after
//! it: its chain must lead to the agent CA (rustls' WebPKI verifier: the
//! signature, the validity period, client-authentication use), and it must
//! name an agent ([`AgentSubject`]). What it names is then held against the
//! hub's watched state at the stream's start ([`crate::agent_certs::revocation`]).

use std::sync::Arc;

use tokio_rustls::rustls::RootCertStore;
use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::pki_types::{CertificateDer, UnixTime};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::server::danger::ClientCertVerifier;
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{FromDer, X509Certificate};

use crate::agent_certs::authority::issued_at;
use crate::agent_certs::subject::AgentSubject;

/// A presented certificate whose chain the agent CA verified.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientCertificate {
    /// Who it was issued to.
    pub subject: AgentSubject,
    /// When it was issued, Unix seconds.
    pub issued_at: i64,
    /// When it expires, Unix seconds.
    pub not_after: i64,
}

/// What an agent's connection presented, as judged after the handshake.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Presented {
    /// A certificate of the agent CA naming an agent.
    Verified(ClientCertificate),
    /// A certificate that is not one, and why.
    Refused(String),
}

/// Judges presented certificates against the agent CA.
#[derive(Clone, Debug)]
pub struct PresentedCheck {
    verifier: Arc<dyn ClientCertVerifier>,
}

impl PresentedCheck {
    /// Checks against `roots` (the agent CA). Fails when rustls refuses
    /// to build a verifier of them.
    pub fn new(roots: Arc<RootCertStore>) -> Result<Self, String> {
        let verifier =
            WebPkiClientVerifier::builder_with_provider(roots, Arc::new(ring::default_provider()))
                .build()
                .map_err(|e| e.to_string())?;
        Ok(Self { verifier })
    }

    /// Judges `chain` (leaf first) at `now`; None for an empty chain.
    pub fn judge(&self, chain: &[CertificateDer<'_>], now: UnixTime) -> Option<Presented> {
        let (leaf, intermediates) = chain.split_first()?;
        if let Err(error) = self.verifier.verify_client_cert(leaf, intermediates, now) {
            return Some(Presented::Refused(format!(
                "it is not a valid certificate of this hub's agent CA: {error}"
            )));
        }
        Some(match read_leaf(leaf) {
            Ok(cert) => Presented::Verified(cert),
            Err(reason) => Presented::Refused(reason),
        })
    }
}

/// The subject and times of a leaf the CA signed.
fn read_leaf(leaf: &CertificateDer<'_>) -> Result<ClientCertificate, String> {
    let (_, cert) =
        X509Certificate::from_der(leaf.as_ref()).map_err(|e| format!("it cannot be read: {e}"))?;
    let names = cert
        .subject_alternative_name()
        .map_err(|e| format!("its alternative names cannot be read: {e}"))?
        .map(|ext| ext.value.general_names.clone())
        .unwrap_or_default();
    let subject = names
        .iter()
        .find_map(|name| match name {
            GeneralName::URI(uri) => AgentSubject::from_uri(uri),
            _ => None,
        })
        .ok_or_else(|| "it names no ferry agent".to_string())?;
    let validity = cert.validity();
    Ok(ClientCertificate {
        subject,
        issued_at: issued_at(validity.not_before.timestamp()),
        not_after: validity.not_after.timestamp(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent_certs::authority::AgentCa;
    use rcgen::{CertificateParams, KeyPair};
    use std::time::Duration;
    use tokio_rustls::rustls::pki_types::pem::PemObject;

    fn ca(now: i64) -> AgentCa {
        let (cert, key) = AgentCa::generate(now).expect("CA");
        AgentCa::from_pem(&cert, &key).expect("CA")
    }

    fn subject() -> AgentSubject {
        AgentSubject {
            cluster: "east".into(),
            cluster_uid: "c-1".into(),
            account_uid: "a-1".into(),
        }
    }

    fn request() -> Vec<u8> {
        let key = KeyPair::generate().expect("key");
        CertificateParams::default()
            .serialize_request(&key)
            .expect("CSR")
            .der()
            .to_vec()
    }

    fn der(pem: &str) -> CertificateDer<'static> {
        CertificateDer::from_pem_slice(pem.as_bytes()).expect("PEM")
    }

    fn unix(seconds: i64) -> UnixTime {
        UnixTime::since_unix_epoch(Duration::from_secs(seconds.unsigned_abs()))
    }

    #[test]
    fn an_issued_certificate_names_the_session_subject_whatever_the_request_asks() {
        let now = 1_800_000_000;
        let ca = ca(now - 10);
        let issued = ca
            .issue(&request(), &subject(), now, Duration::from_secs(3600))
            .expect("issued");
        let check = PresentedCheck::new(ca.roots()).expect("check");
        assert_eq!(
            check.judge(&[der(&issued.pem)], unix(now + 5)),
            Some(Presented::Verified(ClientCertificate {
                subject: subject(),
                issued_at: now,
                not_after: now + 3600,
            }))
        );
        assert_eq!(issued.issued_at, now);
    }

    #[test]
    fn another_cas_expired_or_unnamed_certificates_are_refused() {
        let now = 1_800_000_000;
        let ours = ca(now - 10);
        let theirs = ca(now - 10);
        let check = PresentedCheck::new(ours.roots()).expect("check");
        let foreign = theirs
            .issue(&request(), &subject(), now, Duration::from_secs(3600))
            .expect("issued");
        assert!(matches!(
            check.judge(&[der(&foreign.pem)], unix(now)),
            Some(Presented::Refused(_))
        ));
        let short = ours
            .issue(&request(), &subject(), now, Duration::from_secs(60))
            .expect("issued");
        assert!(matches!(
            check.judge(&[der(&short.pem)], unix(now + 61)),
            Some(Presented::Refused(_))
        ));
        assert_eq!(check.judge(&[], unix(now)), None);
    }

    #[test]
    fn a_request_that_is_not_one_is_refused() {
        let ca = ca(1_800_000_000);
        let mut tampered = request();
        let last = tampered.len() - 1;
        tampered[last] ^= 0xff;
        for junk in [b"junk".to_vec(), tampered] {
            assert!(
                ca.issue(&junk, &subject(), 1_800_000_000, Duration::from_secs(60))
                    .is_err()
            );
        }
    }
}
