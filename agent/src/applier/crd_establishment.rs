//! The wait for a CRD this work wrote to be served, so custom resources
//! later in the same work can be resolved.

use std::time::Duration;

use ferry_semantics::apply_outcome::Applied;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::Api;
use kube::runtime::wait::{await_condition, conditions};

use super::{ApplyError, ApplyOutcome, ManifestWrite};

/// How long to wait for a CRD from the same work to be served before the
/// resources that depend on it are tried.
const CRD_ESTABLISH_TIMEOUT: Duration = Duration::from_secs(20);

/// Waits until a CRD this write created or changed is served, so custom
/// resources later in the same work can be resolved.
pub(super) async fn wait_if_crd(
    write: &ManifestWrite<'_>,
    result: &ApplyOutcome,
) -> Result<(), ApplyError> {
    if matches!(result.applied, Applied::Created | Applied::Updated)
        && write.identity.group == "apiextensions.k8s.io"
        && write.identity.kind == "CustomResourceDefinition"
    {
        wait_established(write.client, &write.identity.name).await?;
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
