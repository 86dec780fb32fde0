//! Agent certificates as a replica serves them: the CA, revocation's view,
//! the certificates' lifetime, and the answer to a request on a session.

use std::sync::Arc;
use std::time::Duration;

use ferry_proto::v1;
use tracing::{info, warn};

use crate::agent_certs::authority::{AgentCa, SKEW};
use crate::agent_certs::error::IssueError;
use crate::agent_certs::presented::{ClientCertificate, PresentedCheck};
use crate::agent_certs::standing::Standing;

/// Requests one session may make: an agent asks once per session, and again
/// only if that session outlives two thirds of a certificate's life.
pub const MAX_REQUESTS_PER_SESSION: u32 = 3;

/// How long a request waits for the hub's caches to hold a cluster the
/// API server already knows (one that just joined) before it is refused.
pub const SEEN_WAIT: Duration = Duration::from_secs(5);

/// Default life of an agent certificate.
pub const DEFAULT_LIFETIME: Duration = Duration::from_secs(24 * 3600);

/// When a certificate asked for at `now` is issued, given the last rotation
/// of its cluster's identity: now, or a second after a rotation in the same
/// second (issue times are whole seconds, and a rotation revokes what was
/// issued at or before it). Fails for a rotation further ahead (a clock
/// skewed by more than [`SKEW`], or a rotation time that is not one).
pub fn issue_time(now: i64, rotated: Option<i64>) -> Result<i64, IssueError> {
    match rotated {
        Some(rotated) if rotated >= now.saturating_add(SKEW.as_secs().cast_signed()) => {
            Err(IssueError::RotationAhead)
        }
        Some(rotated) if rotated >= now => Ok(rotated.saturating_add(1)),
        _ => Ok(now),
    }
}

/// What a replica needs to issue and check agent certificates.
pub struct AgentCertificates {
    /// The agent CA.
    pub ca: AgentCa,
    /// Judges presented chains against the CA.
    pub presented: PresentedCheck,
    /// Revocation's view of the hub.
    pub standing: Arc<Standing>,
    /// How long an issued certificate is valid.
    pub lifetime: Duration,
}

impl std::fmt::Debug for AgentCertificates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentCertificates")
            .field("lifetime", &self.lifetime)
            .finish_non_exhaustive()
    }
}

impl AgentCertificates {
    /// The answer to `cluster`'s agent asking, with `csr_der`, for the
    /// `asked`-th time this session, at `now` (Unix seconds): a certificate
    /// for the cluster as the caches know it (and what the session holds
    /// with it), or why not. Waits up to [`SEEN_WAIT`] for the caches to
    /// hold a cluster that just joined. Signing is one ECDSA verification
    /// and one signature, well under a millisecond, so it runs on the
    /// session's task.
    pub async fn answer(
        &self,
        cluster: &str,
        csr_der: &[u8],
        asked: u32,
        now: i64,
    ) -> (v1::CertificateIssued, Option<ClientCertificate>) {
        let issued = if asked > MAX_REQUESTS_PER_SESSION {
            Err(IssueError::TooMany(MAX_REQUESTS_PER_SESSION))
        } else {
            self.standing
                .subject_once_seen(cluster, SEEN_WAIT)
                .await
                .and_then(|(subject, rotated)| {
                    let issued_at = issue_time(now, rotated)?;
                    let issued = self.ca.issue(csr_der, &subject, issued_at, self.lifetime)?;
                    Ok((issued, subject))
                })
        };
        match issued {
            Ok((issued, subject)) => {
                info!(%cluster, not_after = issued.not_after, "issued an agent certificate");
                let held = ClientCertificate {
                    subject,
                    issued_at: issued.issued_at,
                    not_after: issued.not_after,
                };
                let answer = v1::CertificateIssued {
                    certificate_pem: issued.pem,
                    not_before_unix_seconds: issued.issued_at,
                    not_after_unix_seconds: issued.not_after,
                    refused: String::new(),
                };
                (answer, Some(held))
            }
            Err(refusal) => {
                warn!(%cluster, %refusal, "refused an agent certificate request");
                let answer = v1::CertificateIssued {
                    refused: refusal.to_string(),
                    ..Default::default()
                };
                (answer, None)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_certificate_is_issued_after_the_last_rotation() {
        assert_eq!(issue_time(100, None), Ok(100));
        assert_eq!(issue_time(100, Some(99)), Ok(100));
        assert_eq!(issue_time(100, Some(100)), Ok(101));
        assert_eq!(issue_time(100, Some(130)), Ok(131));
        assert_eq!(issue_time(100, Some(160)), Err(IssueError::RotationAhead));
        assert_eq!(
            issue_time(100, Some(i64::MAX)),
            Err(IssueError::RotationAhead)
        );
    }
}
