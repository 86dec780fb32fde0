//! Writes one manifest to the spoke with server-side apply.

use std::time::Duration;

use ferry_proto::v1;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::discovery::{ApiCapabilities, ApiResource, Scope};
use kube::runtime::wait::{await_condition, conditions};
use serde_json::Value;

use crate::semantics::ManifestIdentity;

/// Field manager used when a work does not name one.
pub const DEFAULT_FIELD_MANAGER: &str = "ferry-agent";

/// How long to wait for a CRD from the same work to be served before the
/// resources that depend on it are tried.
const CRD_ESTABLISH_TIMEOUT: Duration = Duration::from_secs(20);

/// Why a manifest was not applied; `reason()` is the condition reason.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// Another field manager owns a field this apply sets.
    #[error("{0}")]
    Conflict(String),
    /// The API server rejected the object (validation, admission, immutability).
    #[error("the API server rejected {what}: {message}")]
    Rejected {
        /// The manifest.
        what: String,
        /// The API server's message.
        message: String,
    },
    /// The request failed on the way (connection, timeout).
    #[error("applying {what}: {source}")]
    Request {
        /// The manifest.
        what: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// A CRD was applied but did not become Established in time.
    #[error("CRD {name} was applied but is not established yet")]
    CrdNotEstablished {
        /// CRD name.
        name: String,
    },
}

impl ApplyError {
    /// The condition reason for this failure.
    pub fn reason(&self) -> &'static str {
        match self {
            ApplyError::Conflict(_) => "ApplyConflict",
            ApplyError::Rejected { .. } => "ApplyRejected",
            ApplyError::Request { .. } => "ApplyFailed",
            ApplyError::CrdNotEstablished { .. } => "CRDNotEstablished",
        }
    }

    /// Whether trying again later may succeed without the user changing the work.
    pub fn is_transient(&self) -> bool {
        !matches!(self, ApplyError::Rejected { .. })
    }
}

/// An Api handle for the object `identity` names. Namespaced kinds without a
/// namespace in the manifest go to `default`, as kubectl does.
pub fn api_for(
    client: &Client,
    resource: &ApiResource,
    caps: &ApiCapabilities,
    identity: &ManifestIdentity,
) -> Api<DynamicObject> {
    match caps.scope {
        Scope::Namespaced => Api::namespaced_with(
            client.clone(),
            identity.namespace.as_deref().unwrap_or("default"),
            resource,
        ),
        Scope::Cluster => Api::all_with(client.clone(), resource),
    }
}

/// Server-side applies `manifest`. A CRD is waited for until it is served, so
/// custom resources later in the same work can be resolved.
pub async fn server_side_apply(
    client: &Client,
    api: &Api<DynamicObject>,
    identity: &ManifestIdentity,
    manifest: &Value,
    ssa: Option<&v1::ServerSideApplyConfig>,
) -> Result<(), ApplyError> {
    let manager = ssa
        .map(|s| s.field_manager.as_str())
        .filter(|m| !m.is_empty())
        .unwrap_or(DEFAULT_FIELD_MANAGER);
    let mut params = PatchParams::apply(manager);
    params.force = ssa.is_some_and(|s| s.force);
    let what = identity.describe();
    match api
        .patch(&identity.name, &params, &Patch::Apply(manifest))
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.is_conflict() => {
            return Err(ApplyError::Conflict(format!(
                "{what}: {} (set force: true in serverSideApply to take ownership)",
                status.message
            )));
        }
        Err(kube::Error::Api(status)) if (400..500).contains(&status.code) => {
            return Err(ApplyError::Rejected {
                what,
                message: status.message.clone(),
            });
        }
        Err(source) => return Err(ApplyError::Request { what, source }),
    }
    if identity.group == "apiextensions.k8s.io" && identity.kind == "CustomResourceDefinition" {
        wait_established(client, &identity.name).await?;
    }
    Ok(())
}

async fn wait_established(client: &Client, name: &str) -> Result<(), ApplyError> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let established = await_condition(crds, name, conditions::is_crd_established());
    match tokio::time::timeout(CRD_ESTABLISH_TIMEOUT, established).await {
        Ok(Ok(_)) => Ok(()),
        _ => Err(ApplyError::CrdNotEstablished {
            name: name.to_string(),
        }),
    }
}
