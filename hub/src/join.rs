//! Prepares a cluster to join the hub: its namespace (where its works live),
//! the ServiceAccount its agent authenticates as, its ManagedCluster, and a
//! token for that ServiceAccount issued for ferry's audience.

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{Api, ObjectMeta, PostParams};
use kube::{Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::agent_identity::AGENT_TOKEN_AUDIENCE;
use crate::cluster_name::{ClusterNameError, validate_cluster_name};
use crate::managed_cluster::{ManagedCluster, ManagedClusterSpec};

/// Default name of the ServiceAccount agents authenticate as, in their
/// cluster's namespace (the hub's `--agent-service-account`).
pub const AGENT_SERVICE_ACCOUNT: &str = "ferry-agent";

/// A step of joining failed.
#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    /// The API server refused to create an object.
    #[error("creating {what} for cluster {cluster}: {source}")]
    Create {
        /// What was being created.
        what: &'static str,
        /// The cluster.
        cluster: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The cluster name is not a DNS-1123 label.
    #[error("{0}")]
    BadName(#[from] ClusterNameError),
    /// The API server issued no token.
    #[error("the API server returned no token for cluster {0}")]
    NoToken(String),
}

async fn create_if_absent<K>(api: &Api<K>, object: &K) -> Result<(), kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    match api.create(&PostParams::default(), object).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Creates what cluster `name` needs on the hub (idempotent) and returns a
/// token for its agent, valid for `token_seconds`, as the default agent
/// ServiceAccount.
pub async fn join_cluster(
    client: &Client,
    name: &str,
    token_seconds: i64,
) -> Result<String, JoinError> {
    join_cluster_as(client, name, AGENT_SERVICE_ACCOUNT, token_seconds).await
}

/// Creates what cluster `name` needs on the hub (idempotent): its namespace,
/// the ServiceAccount `service_account` its agent authenticates as, and its
/// ManagedCluster (without which the hub refuses the agent); returns a token
/// for that ServiceAccount, for ferry's audience, valid for `token_seconds`.
/// Fails on a name that is not a DNS-1123 label, or when the API server
/// refuses a step.
pub async fn join_cluster_as(
    client: &Client,
    name: &str,
    service_account: &str,
    token_seconds: i64,
) -> Result<String, JoinError> {
    validate_cluster_name(name)?;
    let failed = |what: &'static str| {
        let cluster = name.to_string();
        move |source| JoinError::Create {
            what,
            cluster,
            source,
        }
    };
    let meta = |namespace: Option<&str>, object: &str| ObjectMeta {
        name: Some(object.to_string()),
        namespace: namespace.map(str::to_string),
        ..Default::default()
    };
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace = Namespace {
        metadata: meta(None, name),
        ..Default::default()
    };
    create_if_absent(&namespaces, &namespace)
        .await
        .map_err(failed("the namespace"))?;
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), name);
    let account = ServiceAccount {
        metadata: meta(Some(name), service_account),
        ..Default::default()
    };
    create_if_absent(&accounts, &account)
        .await
        .map_err(failed("the agent ServiceAccount"))?;
    let clusters: Api<ManagedCluster> = Api::all(client.clone());
    create_if_absent(
        &clusters,
        &ManagedCluster::new(name, ManagedClusterSpec::default()),
    )
    .await
    .map_err(failed("the ManagedCluster"))?;
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: vec![AGENT_TOKEN_AUDIENCE.to_string()],
            expiration_seconds: Some(token_seconds),
            bound_object_ref: None,
        },
        ..Default::default()
    };
    let issued = accounts
        .create_token_request(service_account, &PostParams::default(), &request)
        .await
        .map_err(failed("a token"))?;
    issued
        .status
        .map(|s| s.token)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| JoinError::NoToken(name.to_string()))
}
