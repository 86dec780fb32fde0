//! Who is on the other end of an agent stream. An agent presents a
//! ServiceAccount token on the hub (`authorization: Bearer ...` metadata); the
//! hub asks the API server with a TokenReview, for ferry's own audience, and
//! serves the stream only when the token is the agent ServiceAccount's
//! (`ferry-agent` by default) of a cluster's namespace, the review says the
//! token is for ferry's audience, and the cluster has a ManagedCluster that
//! accepts it (`spec.hubAcceptsClient`, true when absent). All
//! of it happens on the request metadata, before any message is read. The
//! ManagedCluster is read from the replica's shared cache when it holds the
//! cluster (see [`AgentAuthenticator::with_cluster_cache`]); only a cluster
//! the cache has not seen yet (just joined) costs a GET, so a connect costs
//! one TokenReview and no read.
//!
//! Accepted answers are cached for one review interval, keyed by the token's
//! hash, so reconnect storms do not become TokenReview storms; refusals are
//! cached apart, in a smaller cache, so junk tokens cannot evict good ones;
//! and a peer may present only so many tokens the hub does not know to be
//! good (see [`PeerBudget`]).

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::time::Duration;

use ferry_proto::{CLUSTER_METADATA, RETRY_PUSHBACK_METADATA};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec, TokenReviewStatus};
use kube::Client;
use kube::api::{Api, PostParams};
use kube::runtime::reflector::{ObjectRef, Store};
use moka::future::Cache;
use prometheus_client::metrics::histogram::Histogram;
use sha2::{Digest, Sha256};
use tonic::Status;
use tonic::metadata::{MetadataMap, MetadataValue};

use crate::grpc::peer_budget::PeerBudget;
use crate::grpc::review_admission::ReviewAdmission;
use crate::grpc::review_pace::{LiveSlot, ReviewPace};
use crate::metrics::RefusalReason;
use ferry_api::cluster_name::{ClusterNameError, validate_cluster_name};
use ferry_api::contract::AGENT_TOKEN_AUDIENCE;
use ferry_api::managed_cluster::ManagedCluster;

/// Accepted tokens remembered at once.
const ACCEPTED_LIMIT: u64 = 10_000;
/// Refused tokens remembered at once: few, since anyone can mint new junk;
/// the cache only spares the API server the same junk twice.
const REFUSED_LIMIT: u64 = 1_000;
/// Longest wait for a TokenReview or ManagedCluster read.
const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);

/// Why an agent was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No bearer token in the request.
    #[error(
        "no bearer token: agents must present a ServiceAccount token of their cluster's namespace"
    )]
    Missing,
    /// The authorization header is not `Bearer <token>`.
    #[error("the authorization metadata is not a bearer token")]
    Malformed,
    /// The cluster named in the request metadata is not a cluster name.
    #[error("the {CLUSTER_METADATA} metadata is not valid: {0}")]
    BadClusterName(ClusterNameError),
    /// The API server did not accept the token (unknown, expired, revoked).
    #[error("the token is not valid: {0}")]
    Invalid(String),
    /// The API server accepted the token, but not for ferry's audience.
    #[error("the token is not issued for the audience {AGENT_TOKEN_AUDIENCE}")]
    WrongAudience,
    /// The token is valid but not a cluster agent's ServiceAccount.
    #[error(
        "the token belongs to {username}, not to the ServiceAccount {service_account} of a cluster's namespace"
    )]
    NotAgent {
        /// Who the token belongs to.
        username: String,
        /// The ServiceAccount name agents must use.
        service_account: String,
    },
    /// The token belongs to another cluster than the request names.
    #[error(
        "the token belongs to the agent of cluster {authenticated}, not of the cluster the agent names"
    )]
    WrongCluster {
        /// The cluster the token is for.
        authenticated: String,
    },
    /// The token is the agent's of a namespace without a ManagedCluster.
    #[error(
        "cluster {0} has not joined this hub (no ManagedCluster {0}): run `ferry-hub join --cluster {0}`"
    )]
    NotJoined(String),
    /// The cluster's ManagedCluster says the hub does not accept it
    /// (`spec.hubAcceptsClient: false`).
    #[error(
        "cluster {0} is not accepted by this hub (ManagedCluster {0} has spec.hubAcceptsClient: false): run `ferry-hub accept --cluster {0}`"
    )]
    NotAccepted(String),
    /// The peer presented too many tokens the hub did not know to be good.
    #[error("too many unknown tokens from this address; try again later")]
    RateLimited,
    /// The TokenReview itself failed; the agent should try again.
    #[error("cannot review the token: {0}")]
    Review(String),
    /// Every connect-review slot stayed taken for the whole wait (a connect
    /// storm); the agent should wait `pushback` and try again.
    #[error(
        "the hub is reviewing as many new agent tokens as it may at once; try again in {pushback:?}"
    )]
    Busy {
        /// When the replica expects a review slot for this connect.
        pushback: Duration,
    },
}

impl AuthError {
    /// The gRPC status an agent receives for this refusal.
    pub fn to_status(&self) -> Status {
        match self {
            AuthError::Missing
            | AuthError::Malformed
            | AuthError::Invalid(_)
            | AuthError::WrongAudience => Status::unauthenticated(self.to_string()),
            AuthError::BadClusterName(_) => Status::invalid_argument(self.to_string()),
            AuthError::NotAgent { .. }
            | AuthError::WrongCluster { .. }
            | AuthError::NotAccepted(_) => Status::permission_denied(self.to_string()),
            AuthError::NotJoined(_) => Status::failed_precondition(self.to_string()),
            AuthError::RateLimited => Status::resource_exhausted(self.to_string()),
            AuthError::Review(_) => Status::unavailable(self.to_string()),
            AuthError::Busy { pushback } => {
                let mut status = Status::unavailable(self.to_string());
                let millis = u64::try_from(pushback.as_millis()).unwrap_or(u64::MAX);
                status
                    .metadata_mut()
                    .insert(RETRY_PUSHBACK_METADATA, MetadataValue::from(millis));
                status
            }
        }
    }

    /// Whether the refusal is about the token itself (and so may be
    /// remembered for it), not about the moment or the request.
    fn is_about_the_token(&self) -> bool {
        matches!(
            self,
            AuthError::Invalid(_) | AuthError::WrongAudience | AuthError::NotAgent { .. }
        )
    }
}

impl From<&AuthError> for RefusalReason {
    fn from(error: &AuthError) -> Self {
        match error {
            AuthError::Missing
            | AuthError::Malformed
            | AuthError::Invalid(_)
            | AuthError::WrongAudience => Self::Unauthenticated,
            AuthError::NotAgent { .. } => Self::WrongServiceAccount,
            AuthError::WrongCluster { .. } => Self::WrongCluster,
            AuthError::BadClusterName(_) => Self::BadClusterName,
            AuthError::NotJoined(_) => Self::UnknownCluster,
            AuthError::NotAccepted(_) => Self::NotAccepted,
            AuthError::RateLimited => Self::OverBudget,
            AuthError::Review(_) => Self::ReviewFailed,
            AuthError::Busy { .. } => Self::ReviewBusy,
        }
    }
}

/// The namespace of a ServiceAccount username
/// (`system:serviceaccount:<namespace>:<name>`).
pub fn service_account_namespace(username: &str) -> Option<&str> {
    service_account_of(username).map(|(namespace, _)| namespace)
}

/// The namespace and name of a ServiceAccount username.
fn service_account_of(username: &str) -> Option<(&str, &str)> {
    let rest = username.strip_prefix("system:serviceaccount:")?;
    let (namespace, name) = rest.split_once(':')?;
    (!namespace.is_empty() && !name.is_empty() && !name.contains(':')).then_some((namespace, name))
}

/// The cluster an authenticated TokenReview answer is the agent of: the
/// answer must list ferry's audience, and its user must be the ServiceAccount
/// `service_account` of a namespace named like a cluster.
pub fn agent_cluster(
    status: &TokenReviewStatus,
    service_account: &str,
) -> Result<String, AuthError> {
    if status.authenticated != Some(true) {
        let why = status
            .error
            .clone()
            .filter(|e| !e.is_empty())
            .unwrap_or_else(|| "the API server did not authenticate it".into());
        return Err(AuthError::Invalid(why));
    }
    // A client that asks for audiences must check the answer's: an API
    // server that ignores them would otherwise accept any of its tokens.
    let audiences = status.audiences.as_deref().unwrap_or_default();
    if !audiences.iter().any(|a| a == AGENT_TOKEN_AUDIENCE) {
        return Err(AuthError::WrongAudience);
    }
    let username = status
        .user
        .as_ref()
        .and_then(|u| u.username.clone())
        .unwrap_or_default();
    let not_agent = || AuthError::NotAgent {
        username: username.clone(),
        service_account: service_account.to_string(),
    };
    let (namespace, name) = service_account_of(&username).ok_or_else(not_agent)?;
    if name != service_account || validate_cluster_name(namespace).is_err() {
        return Err(not_agent());
    }
    Ok(namespace.to_string())
}

/// The bearer token in `metadata`.
pub fn bearer_token(metadata: &MetadataMap) -> Result<&str, AuthError> {
    let value = metadata.get("authorization").ok_or(AuthError::Missing)?;
    let text = value.to_str().map_err(|_| AuthError::Malformed)?;
    let token = text
        .strip_prefix("Bearer ")
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or(AuthError::Malformed)?;
    Ok(token)
}

/// The cluster named in `metadata`, if any, once checked to be a cluster name.
pub fn claimed_cluster(metadata: &MetadataMap) -> Result<Option<&str>, AuthError> {
    let Some(value) = metadata.get(CLUSTER_METADATA) else {
        return Ok(None);
    };
    let name = value
        .to_str()
        .map_err(|_| AuthError::BadClusterName(ClusterNameError::NotALabel))?;
    validate_cluster_name(name).map_err(AuthError::BadClusterName)?;
    Ok(Some(name))
}

/// Settings of agent authentication.
#[derive(Clone, Debug)]
pub struct AuthOptions {
    /// The ServiceAccount agents authenticate as, in their cluster's namespace.
    pub service_account: String,
    /// How long a review's answer stands; live sessions are reviewed again
    /// this often.
    pub review_interval: Duration,
    /// Tokens a peer may present a minute that the hub does not already know
    /// to be good.
    pub peer_reviews_per_minute: NonZeroU32,
    /// Live sessions' tokens reviewed again per second at most (the
    /// periodic reviews of every session together).
    pub live_reviews_per_second: NonZeroU32,
    /// Reviews of new tokens (connects) in flight at once; a connect that
    /// finds none free within [`CONNECT_REVIEW_WAIT`] is refused as busy.
    pub connect_reviews_in_flight: NonZeroU32,
}

/// How long a connect waits for a review slot before it is refused as
/// busy: long enough to ride out a burst, short next to the agent's own
/// wait for the hub's answer (three heartbeats).
pub const CONNECT_REVIEW_WAIT: Duration = Duration::from_secs(1);

impl Default for AuthOptions {
    fn default() -> Self {
        Self {
            service_account: ferry_api::contract::AGENT_SERVICE_ACCOUNT.to_string(),
            review_interval: Duration::from_secs(30),
            peer_reviews_per_minute: NonZeroU32::new(60).unwrap_or(NonZeroU32::MIN),
            // 3,000 sessions at the 30 s interval; beyond, the interval
            // stretches (10,000 sessions: about 100 s).
            live_reviews_per_second: NonZeroU32::new(100).unwrap_or(NonZeroU32::MIN),
            // Half the hub's default API client concurrency (64), so
            // liveness writes and controllers keep the other half.
            connect_reviews_in_flight: NonZeroU32::new(32).unwrap_or(NonZeroU32::MIN),
        }
    }
}

/// Checks agent tokens with TokenReview.
pub struct AgentAuthenticator {
    reviews: Api<TokenReview>,
    clusters: Api<ManagedCluster>,
    /// The replica's shared cache of ManagedClusters, read before `clusters`.
    cluster_cache: Option<Store<ManagedCluster>>,
    options: AuthOptions,
    /// Token hash to the cluster its agent serves.
    accepted: Cache<[u8; 32], String>,
    /// Token hash to why it was refused.
    refused: Cache<[u8; 32], AuthError>,
    budget: PeerBudget,
    /// When live sessions' periodic reviews may start.
    pace: ReviewPace,
    /// Connect reviews in flight at once.
    admission: ReviewAdmission,
    /// Seconds each TokenReview takes.
    review_seconds: Histogram,
}

impl AgentAuthenticator {
    /// Reviews tokens through `client`.
    pub fn new(client: Client, options: AuthOptions) -> Self {
        Self {
            reviews: Api::all(client.clone()),
            clusters: Api::all(client),
            cluster_cache: None,
            accepted: Cache::builder()
                .max_capacity(ACCEPTED_LIMIT)
                .time_to_live(options.review_interval)
                .build(),
            refused: Cache::builder()
                .max_capacity(REFUSED_LIMIT)
                .time_to_live(options.review_interval)
                .build(),
            budget: PeerBudget::per_minute(options.peer_reviews_per_minute),
            pace: ReviewPace::per_second(options.live_reviews_per_second),
            admission: ReviewAdmission::new(
                usize::try_from(options.connect_reviews_in_flight.get()).unwrap_or(usize::MAX),
                CONNECT_REVIEW_WAIT,
            ),
            options,
            review_seconds: crate::metrics::latency_histogram(),
        }
    }

    /// Times every TokenReview in `histogram` (seconds).
    pub fn with_review_latency(mut self, histogram: Histogram) -> Self {
        self.review_seconds = histogram;
        self
    }

    /// Answers whether a cluster accepts its agent from `cache` (kept by a
    /// watch of every ManagedCluster) when it holds the cluster, instead of
    /// a GET per review; a cluster it does not hold yet is read from the
    /// API server. A change of `hubAcceptsClient` is seen once the watch
    /// delivers it.
    pub fn with_cluster_cache(mut self, cache: Store<ManagedCluster>) -> Self {
        self.cluster_cache = Some(cache);
        self
    }

    /// How often a live session's token is reviewed again when this
    /// replica holds `sessions` sessions: the review interval, stretched so
    /// that all sessions together stay within the live reviews a second.
    pub fn review_interval(&self, sessions: u64) -> Duration {
        live_review_interval(
            self.options.review_interval,
            sessions,
            self.options.live_reviews_per_second,
        )
    }

    /// When a live session whose periodic review has been due since
    /// `due_since` may be reviewed, asked at `now`: the next free slot of
    /// the replica's pace (so a connect storm's sessions coming due together
    /// are spread out), or, while the replica turns connects away as busy,
    /// a stretched slot or a time to ask again (see [`ReviewPace::slot_for`]).
    pub fn live_review_slot(
        &self,
        now: tokio::time::Instant,
        due_since: tokio::time::Instant,
    ) -> LiveSlot {
        self.pace
            .slot_for(now, due_since, self.admission.turning_away(now))
    }

    /// The cluster whose agent sent the request with `metadata` from `peer`:
    /// its token must be that cluster's agent ServiceAccount's, and the
    /// cluster named in the metadata, if any, must be that cluster.
    pub async fn authenticate(
        &self,
        metadata: &MetadataMap,
        peer: Option<IpAddr>,
    ) -> Result<String, AuthError> {
        let token = bearer_token(metadata)?;
        let claimed = claimed_cluster(metadata)?;
        let key = token_key(token);
        let cluster = match self.accepted.get(&key).await {
            // A remembered token still needs its cluster accepted now: a
            // deny must not wait for the answer to age out (certificate
            // sessions, which hold no token, never review it again).
            Some(cluster) if !self.accepts_by_cache(&cluster) => {
                self.accepted.invalidate(&key).await;
                return Err(AuthError::NotAccepted(cluster));
            }
            Some(cluster) => cluster,
            None => {
                if !self.budget.take(peer).await {
                    return Err(AuthError::RateLimited);
                }
                if let Some(refusal) = self.refused.get(&key).await {
                    return Err(refusal);
                }
                // Held for the review only: live re-reviews are paced apart.
                let _slot = self
                    .admission
                    .admit()
                    .await
                    .map_err(|pushback| AuthError::Busy { pushback })?;
                self.review_and_remember(token, key).await?
            }
        };
        if let Some(claimed) = claimed
            && claimed != cluster
        {
            return Err(AuthError::WrongCluster {
                authenticated: cluster,
            });
        }
        Ok(cluster)
    }

    /// Whether the replica's cluster cache does not say `cluster` is denied
    /// (a cluster it does not hold yet counts as accepted here; the review
    /// decides for those).
    fn accepts_by_cache(&self, cluster: &str) -> bool {
        self.cluster_cache
            .as_ref()
            .and_then(|cache| cache.get(&ObjectRef::new(cluster)))
            .is_none_or(|joined| joined.spec.hub_accepts_client)
    }

    /// Reviews `token` again, whatever is cached, and remembers the answer:
    /// the cluster it still serves, or why it no longer does.
    pub async fn review_again(&self, token: &str) -> Result<String, AuthError> {
        let key = token_key(token);
        self.review_and_remember(token, key).await
    }

    async fn review_and_remember(&self, token: &str, key: [u8; 32]) -> Result<String, AuthError> {
        let answer = self.review(token).await;
        match &answer {
            Ok(cluster) => {
                self.refused.invalidate(&key).await;
                self.accepted.insert(key, cluster.clone()).await;
            }
            Err(refusal) if refusal.is_about_the_token() => {
                self.accepted.invalidate(&key).await;
                self.refused.insert(key, refusal.clone()).await;
            }
            // A failed review, or a cluster not joined yet, says nothing
            // lasting about the token.
            Err(_) => self.accepted.invalidate(&key).await,
        }
        answer
    }

    async fn review(&self, token: &str) -> Result<String, AuthError> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_string()),
                audiences: Some(vec![AGENT_TOKEN_AUDIENCE.to_string()]),
            },
            ..Default::default()
        };
        let started = std::time::Instant::now();
        let reviewed = tokio::time::timeout(
            REVIEW_TIMEOUT,
            self.reviews.create(&PostParams::default(), &review),
        )
        .await;
        self.review_seconds.observe(started.elapsed().as_secs_f64());
        let reviewed = reviewed
            .map_err(|_| AuthError::Review(format!("no answer within {REVIEW_TIMEOUT:?}")))?
            .map_err(|e| AuthError::Review(e.to_string()))?;
        let cluster = agent_cluster(
            &reviewed.status.unwrap_or_default(),
            &self.options.service_account,
        )?;
        let cached = self
            .cluster_cache
            .as_ref()
            .and_then(|cache| cache.get(&ObjectRef::new(&cluster)))
            .map(|joined| joined.spec.hub_accepts_client);
        let accepts = match cached {
            Some(accepts) => Some(accepts),
            None => tokio::time::timeout(REVIEW_TIMEOUT, self.clusters.get_opt(&cluster))
                .await
                .map_err(|_| AuthError::Review(format!("no answer within {REVIEW_TIMEOUT:?}")))?
                .map_err(|e| AuthError::Review(format!("reading ManagedCluster {cluster}: {e}")))?
                .map(|joined| joined.spec.hub_accepts_client),
        };
        match accepts {
            Some(true) => Ok(cluster),
            Some(_) => Err(AuthError::NotAccepted(cluster)),
            None => Err(AuthError::NotJoined(cluster)),
        }
    }
}

/// `base`, or longer when `sessions` reviewed every `base` would exceed
/// `per_second` reviews a second: then `sessions / per_second` seconds.
/// Each session sleeps its own interval, so the pace needs no shared queue
/// (thousands of sessions waiting on one rate limiter would all wake at
/// each permit).
pub fn live_review_interval(base: Duration, sessions: u64, per_second: NonZeroU32) -> Duration {
    let stretched = Duration::from_secs_f64(sessions as f64 / f64::from(per_second.get()));
    base.max(stretched)
}

fn token_key(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_live_review_interval_stretches_only_past_the_pace() {
        let base = Duration::from_secs(30);
        let pace = NonZeroU32::new(100).expect("non-zero");
        assert_eq!(live_review_interval(base, 0, pace), base);
        assert_eq!(live_review_interval(base, 3_000, pace), base);
        assert_eq!(
            live_review_interval(base, 10_000, pace),
            Duration::from_secs(100)
        );
        // Whatever the fleet, the reviews a second stay within the pace.
        for sessions in [1u64, 10, 2_999, 3_001, 50_000, 1_000_000] {
            let every = live_review_interval(base, sessions, pace).as_secs_f64();
            assert!(sessions as f64 / every <= 100.0 + 1e-9, "{sessions}");
        }
    }

    #[test]
    fn every_auth_refusal_has_its_reason() {
        let cases = [
            (AuthError::Missing, "unauthenticated"),
            (AuthError::WrongAudience, "unauthenticated"),
            (
                AuthError::NotAgent {
                    username: "alice".into(),
                    service_account: "ferry-agent".into(),
                },
                "wrong_service_account",
            ),
            (AuthError::NotJoined("c".into()), "unknown_cluster"),
            (AuthError::NotAccepted("c".into()), "not_accepted"),
            (AuthError::RateLimited, "over_budget"),
            (AuthError::Review("down".into()), "review_failed"),
        ];
        for (error, label) in cases {
            assert_eq!(RefusalReason::from(&error).as_str(), label, "{error}");
        }
    }

    #[test]
    fn a_service_account_username_names_its_namespace() {
        assert_eq!(
            service_account_namespace("system:serviceaccount:cluster-a:ferry-agent"),
            Some("cluster-a")
        );
        assert_eq!(service_account_namespace("system:serviceaccount::x"), None);
        assert_eq!(
            service_account_namespace("system:serviceaccount:a:b:c"),
            None
        );
        assert_eq!(service_account_namespace("alice"), None);
    }

    #[test]
    fn only_a_bearer_token_is_accepted() {
        let mut metadata = MetadataMap::new();
        assert_eq!(bearer_token(&metadata), Err(AuthError::Missing));
        metadata.insert("authorization", "Basic abc".parse().expect("ascii"));
        assert_eq!(bearer_token(&metadata), Err(AuthError::Malformed));
        metadata.insert("authorization", "Bearer  ".parse().expect("ascii"));
        assert_eq!(bearer_token(&metadata), Err(AuthError::Malformed));
        metadata.insert("authorization", "Bearer t0k3n".parse().expect("ascii"));
        assert_eq!(bearer_token(&metadata), Ok("t0k3n"));
    }

    #[test]
    fn refusals_map_to_the_grpc_codes_agents_act_on() {
        assert_eq!(
            AuthError::Missing.to_status().code(),
            tonic::Code::Unauthenticated
        );
        let wrong = AuthError::WrongCluster {
            authenticated: "b".into(),
        };
        assert_eq!(wrong.to_status().code(), tonic::Code::PermissionDenied);
        assert_eq!(
            AuthError::Review("down".into()).to_status().code(),
            tonic::Code::Unavailable
        );
        assert_eq!(
            AuthError::RateLimited.to_status().code(),
            tonic::Code::ResourceExhausted
        );
        assert_eq!(
            AuthError::WrongAudience.to_status().code(),
            tonic::Code::Unauthenticated
        );
        let not_joined = AuthError::NotJoined("cluster-c".into()).to_status();
        assert_eq!(not_joined.code(), tonic::Code::FailedPrecondition);
        assert!(
            not_joined
                .message()
                .contains("ferry-hub join --cluster cluster-c"),
            "{}",
            not_joined.message()
        );
        let not_accepted = AuthError::NotAccepted("cluster-c".into()).to_status();
        assert_eq!(not_accepted.code(), tonic::Code::PermissionDenied);
        assert!(
            not_accepted
                .message()
                .contains("ferry-hub accept --cluster cluster-c"),
            "{}",
            not_accepted.message()
        );
    }

    fn reviewed(username: &str, audiences: &[&str]) -> TokenReviewStatus {
        TokenReviewStatus {
            authenticated: Some(true),
            audiences: Some(audiences.iter().map(|a| a.to_string()).collect()),
            user: Some(k8s_openapi::api::authentication::v1::UserInfo {
                username: Some(username.into()),
                ..Default::default()
            }),
            error: None,
        }
    }

    #[test]
    fn only_the_agent_service_account_with_ferrys_audience_is_an_agent() {
        let agent = "system:serviceaccount:cluster-a:ferry-agent";
        assert_eq!(
            agent_cluster(&reviewed(agent, &[AGENT_TOKEN_AUDIENCE]), "ferry-agent"),
            Ok("cluster-a".into())
        );
        assert_eq!(
            agent_cluster(
                &reviewed(agent, &["other", AGENT_TOKEN_AUDIENCE]),
                "ferry-agent"
            ),
            Ok("cluster-a".into()),
            "ferry's audience among others"
        );
        assert_eq!(
            agent_cluster(&reviewed(agent, &[]), "ferry-agent"),
            Err(AuthError::WrongAudience)
        );
        assert_eq!(
            agent_cluster(
                &reviewed(agent, &["https://kubernetes.default.svc"]),
                "ferry-agent"
            ),
            Err(AuthError::WrongAudience)
        );
        let mut no_audiences = reviewed(agent, &[]);
        no_audiences.audiences = None;
        assert_eq!(
            agent_cluster(&no_audiences, "ferry-agent"),
            Err(AuthError::WrongAudience)
        );
        for username in [
            "system:serviceaccount:cluster-a:default",
            "system:serviceaccount:cluster-a:ferry-agent-2",
            "system:serviceaccount:Cluster_A:ferry-agent",
            "alice",
        ] {
            assert!(
                matches!(
                    agent_cluster(&reviewed(username, &[AGENT_TOKEN_AUDIENCE]), "ferry-agent"),
                    Err(AuthError::NotAgent { .. })
                ),
                "{username}"
            );
        }
        assert_eq!(
            agent_cluster(
                &reviewed(
                    "system:serviceaccount:cluster-a:custom",
                    &[AGENT_TOKEN_AUDIENCE]
                ),
                "custom"
            ),
            Ok("cluster-a".into()),
            "the agent ServiceAccount is configurable"
        );
        let mut refused = reviewed(agent, &[AGENT_TOKEN_AUDIENCE]);
        refused.authenticated = Some(false);
        refused.error = Some("token has been invalidated".into());
        assert_eq!(
            agent_cluster(&refused, "ferry-agent"),
            Err(AuthError::Invalid("token has been invalidated".into()))
        );
    }

    #[test]
    fn a_claimed_cluster_must_be_a_cluster_name() {
        let mut metadata = MetadataMap::new();
        assert_eq!(claimed_cluster(&metadata), Ok(None));
        metadata.insert(CLUSTER_METADATA, "cluster-a".parse().expect("ascii"));
        assert_eq!(claimed_cluster(&metadata), Ok(Some("cluster-a")));
        metadata.insert(CLUSTER_METADATA, "Cluster A".parse().expect("ascii"));
        assert_eq!(
            claimed_cluster(&metadata),
            Err(AuthError::BadClusterName(ClusterNameError::NotALabel))
        );
    }

    /// An authenticator whose API server does not answer: any TokenReview
    /// it tried would end in `AuthError::Review`.
    fn offline(per_minute: u32) -> AgentAuthenticator {
        let config = kube::Config::new("http://127.0.0.1:9".parse().expect("url"));
        let client = Client::try_from(config).expect("client");
        AgentAuthenticator::new(
            client,
            AuthOptions {
                peer_reviews_per_minute: NonZeroU32::new(per_minute).expect("non-zero"),
                ..AuthOptions::default()
            },
        )
    }

    fn bearer(token: &str) -> MetadataMap {
        let mut metadata = MetadataMap::new();
        metadata.insert(
            "authorization",
            format!("Bearer {token}").parse().expect("ascii"),
        );
        metadata
    }

    #[tokio::test]
    async fn junk_cannot_evict_good_tokens_nor_cost_reviews_past_the_peer_budget() {
        let auth = offline(5);
        let peer = Some("192.0.2.9".parse().expect("ip"));
        auth.accepted
            .insert(token_key("good"), "cluster-a".to_string())
            .await;
        for i in 0..(REFUSED_LIMIT * 3) {
            auth.refused
                .insert(
                    token_key(&format!("junk-{i}")),
                    AuthError::Invalid("junk".into()),
                )
                .await;
        }
        auth.refused.run_pending_tasks().await;
        auth.accepted.run_pending_tasks().await;
        assert!(auth.refused.entry_count() <= REFUSED_LIMIT);
        // A known good token is served from its own cache, whatever the
        // refusals did, and costs its peer nothing.
        for _ in 0..10 {
            assert_eq!(
                auth.authenticate(&bearer("good"), peer).await,
                Ok("cluster-a".into())
            );
        }
        // An unknown token costs a review: the API server is away.
        assert!(matches!(
            auth.authenticate(&bearer("unknown-0"), peer).await,
            Err(AuthError::Review(_))
        ));
        for i in 1..5 {
            assert!(matches!(
                auth.authenticate(&bearer(&format!("unknown-{i}")), peer)
                    .await,
                Err(AuthError::Review(_))
            ));
        }
        // Past the budget: refused at once, no review tried.
        assert_eq!(
            auth.authenticate(&bearer("unknown-9"), peer).await,
            Err(AuthError::RateLimited)
        );
        assert_eq!(
            auth.authenticate(&bearer("good"), peer).await,
            Ok("cluster-a".into()),
            "the good token still works for a peer over its budget"
        );
        let other = Some("192.0.2.10".parse().expect("ip"));
        assert!(matches!(
            auth.authenticate(&bearer("unknown-9"), other).await,
            Err(AuthError::Review(_))
        ));
    }

    #[tokio::test]
    async fn a_claimed_cluster_must_be_the_tokens() {
        let auth = offline(5);
        auth.accepted
            .insert(token_key("good"), "cluster-a".to_string())
            .await;
        let mut metadata = bearer("good");
        metadata.insert(CLUSTER_METADATA, "cluster-b".parse().expect("ascii"));
        assert_eq!(
            auth.authenticate(&metadata, None).await,
            Err(AuthError::WrongCluster {
                authenticated: "cluster-a".into()
            })
        );
        metadata.insert(CLUSTER_METADATA, "cluster-a".parse().expect("ascii"));
        assert_eq!(
            auth.authenticate(&metadata, None).await,
            Ok("cluster-a".into())
        );
    }

    #[test]
    fn only_refusals_about_the_token_are_remembered() {
        assert!(AuthError::Invalid("expired".into()).is_about_the_token());
        assert!(AuthError::WrongAudience.is_about_the_token());
        assert!(!AuthError::Review("down".into()).is_about_the_token());
        assert!(!AuthError::NotJoined("a".into()).is_about_the_token());
        assert!(!AuthError::NotAccepted("a".into()).is_about_the_token());
        assert!(!AuthError::RateLimited.is_about_the_token());
    }
}
