//! The spoke half of joining: server-side applies the objects of
//! `bundle` (namespace, the agent's hub Secret, the agent) to the spoke
//! with the spoke's credentials, resolving each kind by discovery, and says
//! for each whether it was created, configured or unchanged.

use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::discovery::{Scope, pinned_kind};
use serde_json::Value;

use crate::join::bundle::{AGENT_HUB_SECRET, AGENT_NAMESPACE, HubAccess};
use crate::join::hub_side::{Applied, Change};

/// The field manager of what joining applies on a spoke.
pub const JOIN_FIELD_MANAGER: &str = "ferry-hub-join";

/// A step on the spoke failed.
#[derive(Debug, thiserror::Error)]
pub enum SpokeJoinError {
    /// An object to apply has no apiVersion, kind or name: a broken build.
    #[error("an object to apply on the spoke of cluster {cluster} lacks {missing}")]
    Incomplete {
        /// The cluster.
        cluster: String,
        /// What it lacks.
        missing: &'static str,
    },
    /// The spoke's API server does not serve a kind (or could not be asked).
    #[error("discovering {kind} on the spoke of cluster {cluster}: {source}")]
    Discover {
        /// `apiVersion/kind`.
        kind: String,
        /// The cluster.
        cluster: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The spoke's API server refused to read or apply an object.
    #[error("{action} {object} on the spoke of cluster {cluster}: {source}")]
    Api {
        /// What was being done.
        action: &'static str,
        /// The object, as kubectl names it.
        object: String,
        /// The cluster.
        cluster: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}

/// What the spoke's [`AGENT_HUB_SECRET`] holds, if it exists and is complete.
/// Fails when the spoke cannot be read.
pub async fn read_hub_access(
    spoke: &Client,
    cluster: &str,
) -> Result<Option<HubAccess>, SpokeJoinError> {
    let secrets: Api<Secret> = Api::namespaced(spoke.clone(), AGENT_NAMESPACE);
    let secret = secrets
        .get_opt(AGENT_HUB_SECRET)
        .await
        .map_err(|source| SpokeJoinError::Api {
            action: "reading",
            object: format!("secret/{AGENT_HUB_SECRET} -n {AGENT_NAMESPACE}"),
            cluster: cluster.to_string(),
            source,
        })?;
    Ok(secret.as_ref().and_then(HubAccess::from_secret))
}

/// Server-side applies `objects` to the spoke of `cluster`, in order, as
/// [`JOIN_FIELD_MANAGER`] (forcing conflicts: joining owns these objects).
/// Fails at the first object the spoke refuses; the ones before stay
/// applied, and running join again finishes the job.
pub async fn apply_objects(
    spoke: &Client,
    cluster: &str,
    objects: &[Value],
) -> Result<Vec<Applied>, SpokeJoinError> {
    let mut done = Vec::with_capacity(objects.len());
    for object in objects {
        done.push(apply_object(spoke, cluster, object).await?);
    }
    Ok(done)
}

async fn apply_object(
    spoke: &Client,
    cluster: &str,
    object: &Value,
) -> Result<Applied, SpokeJoinError> {
    let incomplete = |missing| SpokeJoinError::Incomplete {
        cluster: cluster.to_string(),
        missing,
    };
    let api_version = object["apiVersion"]
        .as_str()
        .ok_or_else(|| incomplete("apiVersion"))?;
    let kind = object["kind"].as_str().ok_or_else(|| incomplete("kind"))?;
    let name = object["metadata"]["name"]
        .as_str()
        .ok_or_else(|| incomplete("metadata.name"))?;
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let (resource, capabilities) =
        pinned_kind(spoke, &gvk)
            .await
            .map_err(|source| SpokeJoinError::Discover {
                kind: format!("{api_version}/{kind}"),
                cluster: cluster.to_string(),
                source,
            })?;
    let namespace = object["metadata"]["namespace"].as_str();
    let (api, label): (Api<DynamicObject>, String) = {
        let kind_label = match group {
            "" => kind.to_lowercase(),
            group => format!("{}.{group}", kind.to_lowercase()),
        };
        match (capabilities.scope, namespace) {
            (Scope::Namespaced, Some(namespace)) => (
                Api::namespaced_with(spoke.clone(), namespace, &resource),
                format!("{kind_label}/{name} -n {namespace}"),
            ),
            (Scope::Namespaced, None) => (
                Api::default_namespaced_with(spoke.clone(), &resource),
                format!("{kind_label}/{name}"),
            ),
            (Scope::Cluster, _) => (
                Api::all_with(spoke.clone(), &resource),
                format!("{kind_label}/{name}"),
            ),
        }
    };
    let failed = |action: &'static str| {
        let object = label.clone();
        let cluster = cluster.to_string();
        move |source| SpokeJoinError::Api {
            action,
            object,
            cluster,
            source,
        }
    };
    let before = api
        .get_opt(name)
        .await
        .map_err(failed("reading"))?
        .and_then(|o| o.metadata.resource_version);
    let after = api
        .patch(
            name,
            &PatchParams::apply(JOIN_FIELD_MANAGER).force(),
            &Patch::Apply(object),
        )
        .await
        .map_err(failed("applying"))?
        .metadata
        .resource_version;
    // An apply that changes nothing leaves the resourceVersion as it was.
    let change = match before {
        None => Change::Created,
        Some(before) if Some(&before) == after.as_ref() => Change::Unchanged,
        Some(_) => Change::Configured,
    };
    Ok(Applied {
        side: "spoke",
        object: label,
        change,
    })
}
