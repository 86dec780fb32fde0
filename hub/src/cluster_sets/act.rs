//! The cluster-set controller's writes, the only code of it that writes:
//! the well-known sets, a set's or a binding's status (server-side apply
//! with the controller's field manager) and a cluster's `default` label.

use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::core::PartialObjectMeta;
use kube::{Client, Resource, ResourceExt};
use serde_json::{Value, json};

use super::error::ClusterSetError;
use ferry_api::cluster_set::{
    ManagedClusterSet, ManagedClusterSetBinding, ManagedClusterSetBindingStatus,
    ManagedClusterSetStatus,
};
use ferry_api::contract::{CLUSTER_SET_LABEL, DEFAULT_CLUSTER_SET};
use ferry_api::managed_cluster::ManagedCluster;
use ferry_semantics::contract::CLUSTER_SET_FIELD_MANAGER;

fn failed(action: impl Into<String>) -> impl FnOnce(kube::Error) -> ClusterSetError {
    let action = action.into();
    move |source| ClusterSetError::Write { action, source }
}

/// Creates each of `sets` that does not exist; one that exists is left as
/// its owner made it. Fails on the first other refusal.
pub async fn create_missing_sets(
    client: &Client,
    sets: &[ManagedClusterSet],
) -> Result<(), ClusterSetError> {
    let api: Api<ManagedClusterSet> = Api::all(client.clone());
    for set in sets {
        let name = set.name_any();
        match api.create(&PostParams::default(), set).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(source) => {
                return Err(failed(format!("creating ManagedClusterSet {name}"))(source));
            }
        }
    }
    Ok(())
}

/// Applies `status` (as JSON) to the object `name` of `api`, one style for
/// both the sets and the bindings: server-side apply with the controller's
/// field manager. Fails naming `what` when the API server refuses.
async fn apply_status<K>(
    api: Api<K>,
    name: &str,
    status: Value,
    what: String,
) -> Result<(), ClusterSetError>
where
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let patch = json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": status,
    });
    api.patch_status(
        name,
        &PatchParams::apply(CLUSTER_SET_FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await
    .map_err(failed(format!("writing the status of {what}")))?;
    Ok(())
}

/// Applies `status` to the set `name`. Fails when the API server refuses.
pub async fn write_set_status(
    client: &Client,
    name: &str,
    status: &ManagedClusterSetStatus,
) -> Result<(), ClusterSetError> {
    let body = json!({"clusterCount": status.cluster_count, "conditions": status.conditions});
    let api: Api<ManagedClusterSet> = Api::all(client.clone());
    apply_status(api, name, body, format!("ManagedClusterSet {name}")).await
}

/// Applies `status` to the binding `namespace/name`. Fails when the API
/// server refuses.
pub async fn write_binding_status(
    client: &Client,
    namespace: &str,
    name: &str,
    status: &ManagedClusterSetBindingStatus,
) -> Result<(), ClusterSetError> {
    let body = json!({"conditions": status.conditions});
    let api: Api<ManagedClusterSetBinding> = Api::namespaced(client.clone(), namespace);
    let what = format!("ManagedClusterSetBinding {namespace}/{name}");
    apply_status(api, name, body, what).await
}

/// Labels `cluster` into `default`. The patch carries the resourceVersion
/// read, so a label someone sets meanwhile is never overwritten (the API
/// server refuses the stale patch and it is retried).
pub async fn label_into_default(
    client: &Client,
    cluster: &PartialObjectMeta<ManagedCluster>,
) -> Result<(), ClusterSetError> {
    let api: Api<ManagedCluster> = Api::all(client.clone());
    let patch = json!({
        "metadata": {
            "resourceVersion": cluster.resource_version(),
            "labels": {CLUSTER_SET_LABEL: DEFAULT_CLUSTER_SET},
        }
    });
    api.patch(
        &cluster.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map_err(failed(format!(
        "labelling ManagedCluster {} into the {DEFAULT_CLUSTER_SET} set",
        cluster.name_any()
    )))?;
    Ok(())
}
