//! The client certificate the hub issued to this agent. The agent makes a
//! key, sends the hub a signing request for it on the stream (only to a hub
//! whose Welcome says it issues certificates; the session goes on, as a
//! certificate session on the hub), and from then on dials with the
//! certificate instead of its token: the hub verifies it in the TLS
//! handshake without a call to its API server. The key and certificate are
//! held in memory only, so the private key never leaves the process; an
//! agent that restarts connects once with its token and gets a new one. A
//! session that starts past two thirds of the certificate's life asks for
//! the next one; a hub that answers a connect with UNAUTHENTICATED (the
//! certificate revoked, or the hub's CA replaced) makes the agent forget it
//! and use its token again.

use std::sync::{Arc, Mutex, PoisonError};

use ferry_proto::v1;
use rcgen::{CertificateParams, DnType, KeyPair};

/// A certificate within this many seconds of its end (or a tenth of its
/// life, if shorter) is not dialled with: the hub would end the session
/// almost at once.
const EXPIRY_MARGIN: i64 = 60;

/// An issued certificate with its key, PEM.
#[derive(Clone)]
struct Issued {
    cert_pem: String,
    key_pem: String,
    issued_at: i64,
    not_after: i64,
}

#[derive(Default)]
struct State {
    current: Option<Issued>,
    /// The key of the request the hub has not answered yet.
    pending_key: Option<String>,
}

/// Why a certificate was not taken.
#[derive(Debug, thiserror::Error)]
pub enum CertificateError {
    /// The hub refused the request.
    #[error("the hub refused the certificate request: {0}")]
    Refused(String),
    /// The hub sent a certificate no request of this agent is waiting for.
    #[error("the hub sent a certificate that no request is waiting for")]
    Unasked,
    /// Making the key or the request failed.
    #[error("making the certificate request: {0}")]
    Request(#[from] rcgen::Error),
}

/// The agent's issued client certificate, shared by its sessions.
#[derive(Clone, Default)]
pub struct ClientCertificate {
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for ClientCertificate {
    // The key stays out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientCertificate").finish_non_exhaustive()
    }
}

/// Whether a certificate issued at `issued_at`, valid until `not_after`,
/// may be dialled with at `now`.
pub fn usable(issued_at: i64, not_after: i64, now: i64) -> bool {
    let margin = EXPIRY_MARGIN.min(not_after.saturating_sub(issued_at).max(0) / 10);
    now < not_after.saturating_sub(margin)
}

/// Whether a certificate issued at `issued_at`, valid until `not_after`, is
/// due for renewal at `now`: two thirds of its life are behind it.
pub fn renewal_due(issued_at: i64, not_after: i64, now: i64) -> bool {
    let life = not_after.saturating_sub(issued_at).max(0);
    now >= issued_at.saturating_add(life / 3 * 2)
}

impl ClientCertificate {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // Every update is one assignment: a poisoned state is consistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The certificate and key (PEM) to dial with at `now`, if one is held
    /// and not about to expire.
    pub fn to_present(&self, now: i64) -> Option<(String, String)> {
        let state = self.lock();
        let issued = state.current.as_ref()?;
        usable(issued.issued_at, issued.not_after, now)
            .then(|| (issued.cert_pem.clone(), issued.key_pem.clone()))
    }

    /// Whether a session starting at `now` should ask for a certificate:
    /// none is held, or the one held is due for renewal.
    pub fn wants_one(&self, now: i64) -> bool {
        self.lock()
            .current
            .as_ref()
            .is_none_or(|issued| renewal_due(issued.issued_at, issued.not_after, now))
    }

    /// A request for a new certificate of `cluster`'s agent (DER), with a new
    /// key kept until the answer. Fails only if key generation fails.
    pub fn request(&self, cluster: &str) -> Result<v1::CertificateRequest, CertificateError> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, cluster);
        let csr = params.serialize_request(&key)?;
        self.lock().pending_key = Some(key.serialize_pem());
        Ok(v1::CertificateRequest {
            csr_der: csr.der().to_vec(),
        })
    }

    /// Takes the hub's answer. Fails when the hub refused, or no request
    /// is waiting.
    pub fn accept(&self, answer: v1::CertificateIssued) -> Result<(), CertificateError> {
        if !answer.refused.is_empty() {
            self.lock().pending_key = None;
            return Err(CertificateError::Refused(answer.refused));
        }
        let mut state = self.lock();
        let key_pem = state.pending_key.take().ok_or(CertificateError::Unasked)?;
        state.current = Some(Issued {
            cert_pem: answer.certificate_pem,
            key_pem,
            issued_at: answer.not_before_unix_seconds,
            not_after: answer.not_after_unix_seconds,
        });
        Ok(())
    }

    /// Forgets the certificate: the hub no longer takes it.
    pub fn forget(&self) {
        self.lock().current = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn an_answer_pairs_with_the_key_of_the_request() {
        let held = ClientCertificate::default();
        assert!(held.wants_one(0));
        assert!(matches!(
            held.accept(v1::CertificateIssued {
                certificate_pem: "cert".into(),
                not_before_unix_seconds: 0,
                not_after_unix_seconds: 3_000,
                refused: String::new(),
            }),
            Err(CertificateError::Unasked)
        ));
        held.request("east").expect("request");
        held.accept(v1::CertificateIssued {
            certificate_pem: "cert".into(),
            not_before_unix_seconds: 0,
            not_after_unix_seconds: 3_000,
            refused: String::new(),
        })
        .expect("accepted");
        let (cert, key) = held.to_present(10).expect("held");
        assert_eq!(cert, "cert");
        assert!(key.contains("PRIVATE KEY"));
        assert!(!held.wants_one(1_999));
        assert!(held.wants_one(2_000));
        assert_eq!(held.to_present(2_940), None);
        held.forget();
        assert_eq!(held.to_present(10), None);
    }

    #[test]
    fn a_refusal_keeps_what_is_held() {
        let held = ClientCertificate::default();
        held.request("east").expect("request");
        assert!(matches!(
            held.accept(v1::CertificateIssued {
                refused: "not yet".into(),
                ..Default::default()
            }),
            Err(CertificateError::Refused(_))
        ));
        assert_eq!(held.to_present(0), None);
    }

    proptest! {
        #[test]
        fn renewal_comes_due_before_the_certificate_stops_being_usable(
            issued in 0i64..1_000_000, life in 600i64..1_000_000,
        ) {
            let not_after = issued + life;
            let due = issued + life / 3 * 2;
            prop_assert!(renewal_due(issued, not_after, due));
            prop_assert!(!renewal_due(issued, not_after, due - 1));
            prop_assert!(usable(issued, not_after, due));
        }
    }
}
