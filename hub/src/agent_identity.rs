//! Who is on the other end of an agent stream. An agent presents a
//! ServiceAccount token of its cluster's namespace on the hub (`authorization:
//! Bearer ...` metadata); the hub asks the API server with a TokenReview,
//! for ferry's own audience, and serves the stream only for the cluster whose
//! namespace the token belongs to. Answers are cached briefly, keyed by the
//! token's hash, so reconnect storms do not become TokenReview storms.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::Client;
use kube::api::{Api, PostParams};
use sha2::{Digest, Sha256};
use tokio::sync::Mutex;
use tonic::Status;
use tonic::metadata::MetadataMap;

/// The audience ferry's agent tokens are issued for: such a token is useless
/// against the hub's Kubernetes API, and other tokens are useless here.
pub const AGENT_TOKEN_AUDIENCE: &str = "ferry-hub";

/// How long a TokenReview answer is reused.
const CACHE_TTL: Duration = Duration::from_secs(30);
/// Bound on cached answers; expired ones are dropped first.
const CACHE_LIMIT: usize = 10_000;

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
    /// The API server did not accept the token (unknown, expired, revoked,
    /// wrong audience).
    #[error("the token is not valid: {0}")]
    Invalid(String),
    /// The token is valid but not a ServiceAccount's.
    #[error("the token belongs to {0}, not to a ServiceAccount")]
    NotServiceAccount(String),
    /// The token belongs to another cluster's namespace.
    #[error("the token belongs to namespace {namespace}, not to cluster {cluster}")]
    WrongCluster {
        /// The token's namespace.
        namespace: String,
        /// The cluster named in Hello.
        cluster: String,
    },
    /// The TokenReview itself failed; the agent should try again.
    #[error("cannot review the token: {0}")]
    Review(String),
}

impl AuthError {
    /// The gRPC status an agent receives for this refusal.
    pub fn to_status(&self) -> Status {
        match self {
            AuthError::Missing | AuthError::Malformed | AuthError::Invalid(_) => {
                Status::unauthenticated(self.to_string())
            }
            AuthError::NotServiceAccount(_) | AuthError::WrongCluster { .. } => {
                Status::permission_denied(self.to_string())
            }
            AuthError::Review(_) => Status::unavailable(self.to_string()),
        }
    }
}

/// The namespace of a ServiceAccount username
/// (`system:serviceaccount:<namespace>:<name>`).
pub fn service_account_namespace(username: &str) -> Option<&str> {
    let rest = username.strip_prefix("system:serviceaccount:")?;
    let (namespace, name) = rest.split_once(':')?;
    (!namespace.is_empty() && !name.is_empty() && !name.contains(':')).then_some(namespace)
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

/// A remembered TokenReview answer: when it was given, and the token's
/// namespace or why it was refused.
type CachedAnswer = (Instant, Result<String, AuthError>);

/// Checks agent tokens with TokenReview.
pub struct AgentAuthenticator {
    reviews: Api<TokenReview>,
    cache: Mutex<HashMap<[u8; 32], CachedAnswer>>,
}

impl AgentAuthenticator {
    /// Reviews tokens through `client`.
    pub fn new(client: Client) -> Self {
        Self {
            reviews: Api::all(client),
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The cluster the request may act for: the namespace of its token,
    /// which must be `cluster`.
    pub async fn authorize(&self, metadata: &MetadataMap, cluster: &str) -> Result<(), AuthError> {
        let token = bearer_token(metadata)?;
        let namespace = self.namespace_of(token).await?;
        if namespace != cluster {
            return Err(AuthError::WrongCluster {
                namespace,
                cluster: cluster.to_string(),
            });
        }
        Ok(())
    }

    async fn namespace_of(&self, token: &str) -> Result<String, AuthError> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some((at, answer)) = self.cache.lock().await.get(&key)
            && at.elapsed() < CACHE_TTL
        {
            return answer.clone();
        }
        let answer = self.review(token).await;
        // A failed review says nothing about the token: do not remember it.
        if !matches!(answer, Err(AuthError::Review(_))) {
            let mut cache = self.cache.lock().await;
            if cache.len() >= CACHE_LIMIT {
                cache.retain(|_, (at, _)| at.elapsed() < CACHE_TTL);
            }
            if cache.len() < CACHE_LIMIT {
                cache.insert(key, (Instant::now(), answer.clone()));
            }
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
        let reviewed = self
            .reviews
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| AuthError::Review(e.to_string()))?;
        let status = reviewed.status.unwrap_or_default();
        if status.authenticated != Some(true) {
            let why = status
                .error
                .filter(|e| !e.is_empty())
                .unwrap_or_else(|| "the API server did not authenticate it".into());
            return Err(AuthError::Invalid(why));
        }
        let username = status.user.and_then(|u| u.username).unwrap_or_default();
        service_account_namespace(&username)
            .map(str::to_string)
            .ok_or(AuthError::NotServiceAccount(username))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            namespace: "b".into(),
            cluster: "a".into(),
        };
        assert_eq!(wrong.to_status().code(), tonic::Code::PermissionDenied);
        assert_eq!(
            AuthError::Review("down".into()).to_status().code(),
            tonic::Code::Unavailable
        );
    }
}
