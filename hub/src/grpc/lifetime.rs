//! How long an agent session may go on, and what ends it. A token session
//! has its token reviewed again on the replica's pace (and at once when a
//! sweep finds its cluster not accepted); a certificate session is never
//! reviewed: the replica's watch wakes it when its cluster's ManagedCluster
//! or agent account changes, and it ends at once if its certificate no
//! longer stands, or when the certificate expires. A token session that is
//! issued a certificate becomes a certificate session in place: the agent
//! keeps its stream, and the API server its TokenReviews. Every session also
//! ends at its maximum age.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use prometheus_client::metrics::gauge::Gauge;
use rand::Rng;
use tokio::sync::watch;
use tonic::Status;
use tracing::{debug, warn};

use crate::agent_certs::issuing::AgentCertificates;
use crate::agent_certs::presented::ClientCertificate;
use crate::agent_certs::revocation::Revoked;
use crate::clusters::liveness::NotAccepted;
use crate::grpc::identity::{AgentAuthenticator, AuthError};
use crate::grpc::review_pace::LiveSlot;

/// What a live session authenticated with.
pub enum LiveCredential {
    /// A ServiceAccount token, reviewed again on a pace.
    Token(String),
    /// A client certificate of the agent CA.
    Certificate(Box<ClientCertificate>),
}

/// How a token session's reviews ended.
enum TokenEnd {
    /// The session ends with this status.
    Ended(Status),
    /// The session was issued a certificate and goes on with it.
    Upgraded(Box<ClientCertificate>),
}

/// How long a session may go on.
pub struct Lifetime {
    /// Reviews tokens.
    pub auth: Arc<AgentAuthenticator>,
    /// Checks certificates; None when the hub issues none.
    pub certificates: Option<Arc<AgentCertificates>>,
    /// What the session authenticated with.
    pub credential: LiveCredential,
    /// The session's cluster.
    pub cluster: String,
    /// The session's maximum age (already jittered).
    pub max_age: Duration,
    /// Clusters not accepted as of the latest liveness sweep.
    pub not_accepted: watch::Receiver<NotAccepted>,
    /// This replica's open sessions (the metric): how far the review
    /// interval stretches.
    pub sessions: Gauge,
    /// The certificate issued on this session, if any: a token session
    /// goes on as a certificate session once it holds one.
    pub issued: watch::Receiver<Option<ClientCertificate>>,
}

/// Seconds since the Unix epoch, by this replica's clock.
pub fn unix_now() -> i64 {
    Timestamp::now().as_second()
}

/// `max` less up to a tenth, at random.
pub fn jittered(max: Duration) -> Duration {
    max.mul_f64(rand::rng().random_range(0.9..=1.0))
}

impl Lifetime {
    /// When the token is next reviewed: the interval for this replica's
    /// sessions now, less up to a tenth so sessions that connected together
    /// drift apart.
    fn next_review(&self) -> Duration {
        let sessions = u64::try_from(self.sessions.get()).unwrap_or(0);
        jittered(self.auth.review_interval(sessions))
    }

    fn max_age_reached(&self) -> Status {
        Status::unavailable(format!(
            "the session reached its maximum age of {} s; reconnect",
            self.max_age.as_secs()
        ))
    }

    /// Runs until the session must end; returns the status it ends with.
    pub async fn expire(mut self) -> Status {
        let started = tokio::time::Instant::now();
        let credential =
            std::mem::replace(&mut self.credential, LiveCredential::Token(String::new()));
        let cert = match credential {
            LiveCredential::Token(token) => match Box::pin(self.expire_token(&token)).await {
                TokenEnd::Ended(status) => return status,
                TokenEnd::Upgraded(cert) => cert,
            },
            LiveCredential::Certificate(cert) => cert,
        };
        Box::pin(self.expire_certificate(&cert, started)).await
    }

    /// Ends a certificate session at its maximum age (counted from
    /// `started`), when its certificate expires, or as soon as a change of
    /// its cluster's ManagedCluster or agent account revokes it.
    async fn expire_certificate(
        &self,
        cert: &ClientCertificate,
        started: tokio::time::Instant,
    ) -> Status {
        let Some(certificates) = &self.certificates else {
            return Status::internal("a certificate session on a hub without certificates");
        };
        let mut wake = certificates.standing.wake_for(&self.cluster);
        // A change between the connect's check (or the issue) and the
        // wake-up's registration would otherwise go unseen.
        if let Err(revoked) = certificates.standing.check(cert, unix_now()) {
            return revoked.to_status();
        }
        let left = u64::try_from(cert.not_after.saturating_sub(unix_now())).unwrap_or(0);
        let expires = started.elapsed() + Duration::from_secs(left);
        let (limit, at_limit) = if expires < self.max_age {
            (expires, Revoked::Expired.to_status())
        } else {
            (self.max_age, self.max_age_reached())
        };
        let limit = tokio::time::sleep_until(started + limit);
        tokio::pin!(limit);
        let mut woken = true;
        loop {
            tokio::select! {
                () = &mut limit => return at_limit,
                changed = wake.changed.changed(), if woken => {
                    // The hub is stopping: the limit still ends the session.
                    woken = changed.is_ok();
                    if let Err(revoked) = certificates.standing.check(cert, unix_now()) {
                        debug!(cluster = %self.cluster, %revoked, "ending a certificate session");
                        return revoked.to_status();
                    }
                }
            }
        }
    }

    /// Reviews the token every review interval (once due, at the next slot
    /// of the replica's review pace, which a connect storm may defer for a
    /// few minutes), and at once when a sweep finds the cluster not
    /// accepted (a sweep's answer may be stale, so the review decides),
    /// until a review refuses it, the session reaches its maximum age, or
    /// the session is issued a certificate.
    async fn expire_token(&mut self, token: &str) -> TokenEnd {
        let expired = tokio::time::sleep(self.max_age);
        tokio::pin!(expired);
        let review = tokio::time::sleep(self.next_review());
        tokio::pin!(review);
        let mut sweeps = true;
        let mut issues = true;
        // Whether `review` is sleeping until the slot the replica's pace
        // gave this session, rather than until the review comes due.
        let mut slotted = false;
        // Since when the review has been due (a connect storm may defer it).
        let mut due_since = None;
        loop {
            let due = tokio::select! {
                () = &mut expired => return TokenEnd::Ended(self.max_age_reached()),
                changed = self.issued.changed(), if issues => {
                    issues = changed.is_ok();
                    if let Some(cert) = self.issued.borrow_and_update().clone() {
                        return TokenEnd::Upgraded(Box::new(cert));
                    }
                    false
                }
                () = &mut review => {
                    let now = tokio::time::Instant::now();
                    let slot = if slotted {
                        LiveSlot::At(now)
                    } else {
                        self.auth.live_review_slot(now, *due_since.get_or_insert(now))
                    };
                    match slot {
                        LiveSlot::At(at) if at > now => {
                            slotted = true;
                            review.as_mut().reset(at);
                            false
                        }
                        LiveSlot::At(_) => {
                            slotted = false;
                            due_since = None;
                            review.as_mut().reset(now + self.next_review());
                            true
                        }
                        LiveSlot::AskAgain(at) => {
                            review.as_mut().reset(at);
                            false
                        }
                    }
                }
                // Each sweep wakes this; a cluster it lists has its session
                // reviewed now (once more than needed if the sweep listed
                // just before the cluster was accepted).
                changed = self.not_accepted.changed(), if sweeps => match changed {
                    Ok(()) => self.not_accepted.borrow_and_update().contains(&self.cluster),
                    // The hub is stopping: the reviews go on alone.
                    Err(_) => {
                        sweeps = false;
                        false
                    }
                },
            };
            if !due {
                continue;
            }
            // Boxed: the review (an API call) is rare, and its future inline
            // would make every idle session's task as large as it is.
            let status = match Box::pin(self.auth.review_again(token)).await {
                Ok(cluster) if cluster == self.cluster => continue,
                Ok(other) => Status::unauthenticated(format!(
                    "the token now belongs to the agent of cluster {other}"
                )),
                // The API server being away is no reason to drop agents:
                // the next interval tries again.
                Err(AuthError::Review(error)) => {
                    warn!(cluster = %self.cluster, %error, "cannot review a live session's token again; the session goes on");
                    continue;
                }
                // Un-accepting the cluster ends its session with the same
                // code a new connection would get.
                Err(refusal @ AuthError::NotAccepted(_)) => Status::permission_denied(format!(
                    "the hub no longer serves this cluster: {refusal}"
                )),
                Err(refusal) => {
                    Status::unauthenticated(format!("the token is no longer accepted: {refusal}"))
                }
            };
            return TokenEnd::Ended(status);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grpc::identity::AuthOptions;

    /// A lifetime whose reviews all fail, as when the hub's API server is
    /// away: `AuthError::Review` every time.
    fn offline_lifetime(review_interval: Duration, max_age: Duration) -> Lifetime {
        let config = kube::Config::new("http://127.0.0.1:9".parse().expect("url"));
        let client = kube::Client::try_from(config).expect("client");
        let auth = AgentAuthenticator::new(
            client,
            AuthOptions {
                review_interval,
                ..AuthOptions::default()
            },
        );
        Lifetime {
            auth: Arc::new(auth),
            certificates: None,
            credential: LiveCredential::Token("token".into()),
            cluster: "cluster-a".into(),
            max_age,
            not_accepted: watch::Sender::new(NotAccepted::default()).subscribe(),
            sessions: Gauge::default(),
            issued: watch::Sender::new(None).subscribe(),
        }
    }

    #[tokio::test]
    async fn a_session_ends_at_its_maximum_age_asking_the_agent_to_reconnect() {
        let end = offline_lifetime(Duration::from_secs(3600), Duration::from_millis(100))
            .expire()
            .await;
        assert_eq!(end.code(), tonic::Code::Unavailable);
        assert!(end.message().contains("maximum age"), "{}", end.message());
    }

    #[tokio::test]
    async fn failed_reviews_do_not_end_a_session() {
        // Many reviews fail before the maximum age; none of them ends it.
        let end = offline_lifetime(Duration::from_millis(20), Duration::from_millis(400))
            .expire()
            .await;
        assert_eq!(end.code(), tonic::Code::Unavailable, "{end:?}");
        assert!(end.message().contains("maximum age"), "{}", end.message());
    }
}
