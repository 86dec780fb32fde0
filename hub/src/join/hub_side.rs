//! The hub half of joining a cluster: its namespace (where its works live),
//! the ServiceAccount its agent authenticates as, its ManagedCluster, and a
//! token for that ServiceAccount issued for ferry's audience. The spoke half
//! is `spoke_side`, both together `both`.

use std::collections::BTreeMap;

use k8s_openapi::api::authentication::v1::{
    BoundObjectReference, TokenRequest, TokenRequestSpec, TokenReview, TokenReviewSpec,
};
use k8s_openapi::api::core::v1::{Namespace, Secret, ServiceAccount};
use kube::api::{Api, DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::agent_certs::revocation::CERTIFICATES_NOT_BEFORE;
use crate::grpc::identity::agent_cluster;
use ferry_api::cluster_name::{ClusterNameError, validate_cluster_name};
use ferry_api::contract::{
    AGENT_SERVICE_ACCOUNT, AGENT_TOKEN_AUDIENCE, CLUSTER_NAMESPACE_LABEL, CLUSTER_SET_LABEL,
    DEFAULT_CLUSTER_SET, TOKEN_BINDING_LABEL,
};
use ferry_api::managed_cluster::{ManagedCluster, ManagedClusterSpec};

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
    /// The API server refused to read, review or delete something.
    #[error("{action} for cluster {cluster}: {source}")]
    Api {
        /// What was being done.
        action: &'static str,
        /// The cluster.
        cluster: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}

/// What a join step did to one object, as `kubectl apply` says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// The object did not exist and was created.
    Created,
    /// The object existed and was changed.
    Configured,
    /// The object existed as wanted.
    Unchanged,
    /// The object was deleted.
    Deleted,
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Change::Created => "created",
            Change::Configured => "configured",
            Change::Unchanged => "unchanged",
            Change::Deleted => "deleted",
        })
    }
}

/// One object a join step touched, on which side, and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Applied {
    /// `hub` or `spoke`.
    pub side: &'static str,
    /// The object as kubectl names it, e.g. `serviceaccount/ferry-agent -n a`.
    pub object: String,
    /// What happened to it.
    pub change: Change,
}

impl std::fmt::Display for Applied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {} {}", self.side, self.object, self.change)
    }
}

impl Applied {
    fn hub(object: String, change: Change) -> Self {
        Self {
            side: "hub",
            object,
            change,
        }
    }
}

async fn create_if_absent<K>(api: &Api<K>, object: &K) -> Result<Change, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    match api.create(&PostParams::default(), object).await {
        Ok(_) => Ok(Change::Created),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(Change::Unchanged),
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
    prepare_hub(client, name, service_account, true).await?;
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), name);
    request_token(&accounts, name, service_account, token_seconds, None).await
}

/// Creates cluster `name`'s namespace, the ServiceAccount `service_account`
/// and its ManagedCluster on the hub when absent, and says what it did. A new
/// ManagedCluster accepts the cluster's agent when `accept` is true, else it
/// waits for `ferry-hub accept`; an existing one is left as it is (a cluster
/// denied stays denied). Fails on a name that is not a DNS-1123 label, or
/// when the API server refuses a step.
pub async fn prepare_hub(
    client: &Client,
    name: &str,
    service_account: &str,
    accept: bool,
) -> Result<Vec<Applied>, JoinError> {
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
    let mut done = Vec::new();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    // Labelled as the cluster's, so deleting it needs a confirmation
    // (admission policy cluster-namespace-deletions-confirmed).
    let label = BTreeMap::from([(CLUSTER_NAMESPACE_LABEL.to_string(), name.to_string())]);
    let namespace = Namespace {
        metadata: ObjectMeta {
            labels: Some(label.clone()),
            ..meta(None, name)
        },
        ..Default::default()
    };
    let mut change = create_if_absent(&namespaces, &namespace)
        .await
        .map_err(failed("the namespace"))?;
    if change == Change::Unchanged {
        // Made before (by hand, or by a join of an older version).
        let existing = namespaces
            .get(name)
            .await
            .map_err(failed("the namespace"))?;
        if existing
            .labels()
            .get(CLUSTER_NAMESPACE_LABEL)
            .map(String::as_str)
            != Some(name)
        {
            namespaces
                .patch(
                    name,
                    &PatchParams::default(),
                    &Patch::Merge(serde_json::json!({"metadata": {"labels": label}})),
                )
                .await
                .map_err(failed("the namespace's label"))?;
            change = Change::Configured;
        }
    }
    done.push(Applied::hub(format!("namespace/{name}"), change));
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), name);
    let account = ServiceAccount {
        metadata: meta(Some(name), service_account),
        ..Default::default()
    };
    let change = create_if_absent(&accounts, &account)
        .await
        .map_err(failed("the agent ServiceAccount"))?;
    done.push(Applied::hub(
        format!("serviceaccount/{service_account} -n {name}"),
        change,
    ));
    let clusters: Api<ManagedCluster> = Api::all(client.clone());
    let spec = ManagedClusterSpec {
        hub_accepts_client: accept,
        ..ManagedClusterSpec::default()
    };
    let change = create_if_absent(&clusters, &new_managed_cluster(name, spec))
        .await
        .map_err(failed("the ManagedCluster"))?;
    done.push(Applied::hub(format!("managedcluster/{name}"), change));
    Ok(done)
}

/// The ManagedCluster a join creates: already in the `default` cluster set
/// (the label the hub's cluster-set controller would otherwise add in a
/// second write) and without the unreachable taint (placements see a
/// never-connected cluster as unreachable without it, see
/// `crate::clusters::taints::taints_for_placement`), so a join is one
/// ManagedCluster write.
pub fn new_managed_cluster(name: &str, spec: ManagedClusterSpec) -> ManagedCluster {
    let mut cluster = ManagedCluster::new(name, spec);
    cluster.metadata.labels = Some(BTreeMap::from([(
        CLUSTER_SET_LABEL.to_string(),
        DEFAULT_CLUSTER_SET.to_string(),
    )]));
    cluster
}

/// Whether cluster `name`'s ManagedCluster accepts its agent; None when the
/// cluster has none. Fails when the API server cannot be read.
pub async fn is_accepted(client: &Client, name: &str) -> Result<Option<bool>, JoinError> {
    let clusters: Api<ManagedCluster> = Api::all(client.clone());
    let cluster = clusters
        .get_opt(name)
        .await
        .map_err(|source| JoinError::Api {
            action: "reading the ManagedCluster",
            cluster: name.to_string(),
            source,
        })?;
    Ok(cluster.map(|c| c.spec.hub_accepts_client))
}

async fn request_token(
    accounts: &Api<ServiceAccount>,
    name: &str,
    service_account: &str,
    token_seconds: i64,
    bound_object_ref: Option<BoundObjectReference>,
) -> Result<String, JoinError> {
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: vec![AGENT_TOKEN_AUDIENCE.to_string()],
            expiration_seconds: Some(token_seconds),
            bound_object_ref,
        },
        ..Default::default()
    };
    let issued = accounts
        .create_token_request(service_account, &PostParams::default(), &request)
        .await
        .map_err(|source| JoinError::Create {
            what: "a token",
            cluster: name.to_string(),
            source,
        })?;
    issued
        .status
        .map(|s| s.token)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| JoinError::NoToken(name.to_string()))
}

/// A token minted by [`mint_bound_token`] and the hub Secret it is bound to.
#[derive(Clone)]
pub struct BoundToken {
    /// The token.
    pub token: String,
    /// The hub Secret, in the cluster's namespace, that keeps it valid.
    pub binding: String,
}

impl std::fmt::Debug for BoundToken {
    // Tokens stay out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoundToken")
            .field("binding", &self.binding)
            .finish_non_exhaustive()
    }
}

/// Mints a token of `service_account` in cluster `name`'s namespace, for
/// ferry's audience, valid for `token_seconds` and bound to a new hub Secret
/// (labelled [`TOKEN_BINDING_LABEL`]): deleting that Secret revokes the
/// token at once, which is how [`revoke_tokens_except`] rotates. Fails when
/// the API server refuses the Secret or the TokenRequest.
pub async fn mint_bound_token(
    client: &Client,
    name: &str,
    service_account: &str,
    token_seconds: i64,
) -> Result<(BoundToken, Applied), JoinError> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), name);
    let binding = Secret {
        metadata: ObjectMeta {
            generate_name: Some(format!("{service_account}-token-")),
            namespace: Some(name.to_string()),
            labels: Some(BTreeMap::from([(
                TOKEN_BINDING_LABEL.to_string(),
                service_account.to_string(),
            )])),
            ..Default::default()
        },
        ..Default::default()
    };
    let binding = secrets
        .create(&PostParams::default(), &binding)
        .await
        .map_err(|source| JoinError::Create {
            what: "the Secret a token is bound to",
            cluster: name.to_string(),
            source,
        })?;
    let binding_name = binding.name_any();
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), name);
    let reference = BoundObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Secret".into()),
        name: Some(binding_name.clone()),
        uid: binding.uid(),
    };
    let token = request_token(
        &accounts,
        name,
        service_account,
        token_seconds,
        Some(reference),
    )
    .await?;
    let applied = Applied::hub(
        format!("secret/{binding_name} -n {name} (a new agent token is bound to it)"),
        Change::Created,
    );
    Ok((
        BoundToken {
            token,
            binding: binding_name,
        },
        applied,
    ))
}

/// Revokes every token of `service_account` in cluster `name`'s namespace
/// minted by [`mint_bound_token`], except the one bound to `keep`, by
/// deleting the Secrets they are bound to. Fails when the API server refuses
/// the list or a delete.
pub async fn revoke_tokens_except(
    client: &Client,
    name: &str,
    service_account: &str,
    keep: &str,
) -> Result<Vec<Applied>, JoinError> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), name);
    let failed = |action: &'static str| {
        let cluster = name.to_string();
        move |source| JoinError::Api {
            action,
            cluster,
            source,
        }
    };
    let bound = secrets
        .list(&ListParams::default().labels(&format!("{TOKEN_BINDING_LABEL}={service_account}")))
        .await
        .map_err(failed("listing the Secrets agent tokens are bound to"))?;
    let mut done = Vec::new();
    for secret in bound.items {
        let binding = secret.name_any();
        if binding == keep {
            continue;
        }
        match secrets.delete(&binding, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => continue,
            Err(source) => return Err(failed("deleting an old token's Secret")(source)),
        }
        done.push(Applied::hub(
            format!("secret/{binding} -n {name} (its agent token is revoked)"),
            Change::Deleted,
        ));
    }
    Ok(done)
}

/// Revokes every client certificate the hub issued to cluster `name`'s
/// agent until now: stamps the time on its ManagedCluster
/// ([`CERTIFICATES_NOT_BEFORE`]), which every replica's watch delivers, so
/// a live certificate session ends and a connect with one is refused. The
/// agent then connects with its (new) token and gets a new certificate.
/// Fails when the ManagedCluster cannot be patched.
pub async fn revoke_certificates(client: &Client, name: &str) -> Result<Applied, JoinError> {
    let clusters: Api<ManagedCluster> = Api::all(client.clone());
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let patch = serde_json::json!({
        "metadata": {"annotations": {CERTIFICATES_NOT_BEFORE: now}}
    });
    clusters
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|source| JoinError::Api {
            action: "stamping the certificate revocation time on the ManagedCluster",
            cluster: name.to_string(),
            source,
        })?;
    Ok(Applied::hub(
        format!("managedcluster/{name} (its agent certificates issued until now are revoked)"),
        Change::Configured,
    ))
}

/// The expiry (seconds since the Unix epoch) a ServiceAccount token states
/// in its `exp` claim, read without checking the signature (the API server
/// checks that); None when the token is not a JWT with such a claim.
pub fn token_expiry(token: &str) -> Option<i64> {
    use base64::Engine;
    let payload = token.split('.').nth(1)?;
    let claims = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    let claims: serde_json::Value = serde_json::from_slice(&claims).ok()?;
    claims["exp"].as_i64()
}

/// Whether the hub still takes `token` as the agent token of cluster `name`
/// (a TokenReview for ferry's audience, as the hub itself does): Ok(None)
/// when it does, Ok(Some(why)) when not. Fails when the review cannot be
/// made.
pub async fn token_refusal(
    client: &Client,
    name: &str,
    service_account: &str,
    token: &str,
) -> Result<Option<String>, JoinError> {
    let reviews: Api<TokenReview> = Api::all(client.clone());
    let review = TokenReview {
        spec: TokenReviewSpec {
            token: Some(token.to_string()),
            audiences: Some(vec![AGENT_TOKEN_AUDIENCE.to_string()]),
        },
        ..Default::default()
    };
    let reviewed = reviews
        .create(&PostParams::default(), &review)
        .await
        .map_err(|source| JoinError::Api {
            action: "reviewing the spoke's current token",
            cluster: name.to_string(),
            source,
        })?;
    Ok(
        match agent_cluster(&reviewed.status.unwrap_or_default(), service_account) {
            Ok(cluster) if cluster == name => None,
            Ok(other) => Some(format!("it is the agent token of cluster {other}")),
            Err(refusal) => Some(refusal.to_string()),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;

    #[test]
    fn a_joined_cluster_is_created_in_the_default_set_and_untainted() {
        let cluster = new_managed_cluster(
            "spoke-a",
            ManagedClusterSpec {
                hub_accepts_client: true,
                ..ManagedClusterSpec::default()
            },
        );
        assert_eq!(
            cluster.labels().get(CLUSTER_SET_LABEL).map(String::as_str),
            Some(DEFAULT_CLUSTER_SET)
        );
        assert!(cluster.spec.taints.is_empty());
        assert!(crate::clusters::taints::is_unreachable(&cluster));
    }

    fn jwt(claims: &str) -> String {
        let encode = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        format!(
            "{}.{}.signature",
            encode(r#"{"alg":"RS256"}"#),
            encode(claims)
        )
    }

    #[test]
    fn a_tokens_expiry_is_read_from_its_claims() {
        assert_eq!(
            token_expiry(&jwt(r#"{"exp":1795000000,"sub":"x"}"#)),
            Some(1795000000)
        );
        assert_eq!(token_expiry(&jwt(r#"{"sub":"x"}"#)), None);
        assert_eq!(token_expiry("not a jwt"), None);
        assert_eq!(token_expiry("a.%%%.c"), None);
    }

    #[test]
    fn changes_read_as_kubectl_says_them() {
        let applied = Applied::hub("namespace/a".into(), Change::Unchanged);
        assert_eq!(applied.to_string(), "hub: namespace/a unchanged");
    }
}
