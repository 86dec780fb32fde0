//! Reading and writing what `rollout history` and `rollout undo` need: the
//! replica set, its ControllerRevisions and its works, all untyped so
//! fields a newer hub adds are kept on the write back.

use ferry_api::contract::REPLICA_SET_LABEL;
use ferry_api::manifest_work::ManifestWork;
use ferry_api::replica_set::ManifestWorkReplicaSet;
use k8s_openapi::api::apps::v1::ControllerRevision;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
use serde_json::Value;

use crate::error::CliError;
use crate::work_ref::WorkRef;

/// `manifestworkreplicasets.work.ferry.dev`, as errors name it.
const REPLICA_SETS: &str = "manifestworkreplicasets.work.ferry.dev";

fn replica_sets(client: &Client, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        namespace,
        &ApiResource::erase::<ManifestWorkReplicaSet>(&()),
    )
}

/// The label value naming the replica set on its works and revisions.
fn owner(rs: &WorkRef) -> String {
    format!("{}.{}", rs.namespace, rs.name)
}

fn to_value(object: impl serde::Serialize) -> Result<Value, CliError> {
    serde_json::to_value(object).map_err(|e| CliError::Print(e.to_string()))
}

/// The replica set named by `rs`, as stored; [`CliError::ReplicaSetNotFound`]
/// when there is none.
pub async fn get_replica_set(client: &Client, rs: &WorkRef) -> Result<Value, CliError> {
    let action = format!("get manifestworkreplicaset {}/{}", rs.namespace, rs.name);
    match replica_sets(client, &rs.namespace).get_opt(&rs.name).await {
        Ok(Some(object)) => to_value(object),
        Ok(None) => Err(CliError::ReplicaSetNotFound {
            namespace: rs.namespace.clone(),
            name: rs.name.clone(),
        }),
        Err(error) => Err(CliError::from_kube(&action, REPLICA_SETS, error)),
    }
}

/// The ControllerRevisions of `rs` (labelled with it, in its namespace).
pub async fn list_revisions(client: &Client, rs: &WorkRef) -> Result<Vec<Value>, CliError> {
    let api: Api<ControllerRevision> = Api::namespaced(client.clone(), &rs.namespace);
    let action = format!("list controllerrevisions in namespace {}", rs.namespace);
    let listed = api
        .list(&ListParams::default().labels(&format!("{REPLICA_SET_LABEL}={}", owner(rs))))
        .await
        .map_err(|e| CliError::from_kube(&action, "controllerrevisions.apps", e))?;
    listed.items.into_iter().map(to_value).collect()
}

/// The works `rs` generated, in every cluster's namespace.
pub async fn list_replica_set_works(client: &Client, rs: &WorkRef) -> Result<Vec<Value>, CliError> {
    let resource = ApiResource::erase::<ManifestWork>(&());
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let listed = api
        .list(&ListParams::default().labels(&format!("{REPLICA_SET_LABEL}={}", owner(rs))))
        .await
        .map_err(|e| {
            CliError::from_kube(
                "list manifestworks in all namespaces",
                "manifestworks.work.ferry.dev",
                e,
            )
        })?;
    listed.items.into_iter().map(to_value).collect()
}

/// Writes `replica_set` (as read, changed) back; its resourceVersion makes
/// a concurrent change fail the write rather than be lost, as
/// [`CliError::ChangedSinceRead`] (read again and decide again). Other
/// refusals and transport failures are their own errors.
pub async fn replace_replica_set(
    client: &Client,
    rs: &WorkRef,
    replica_set: Value,
) -> Result<(), CliError> {
    let object: DynamicObject =
        serde_json::from_value(replica_set).map_err(|e| CliError::Print(e.to_string()))?;
    let action = format!("update manifestworkreplicaset {}/{}", rs.namespace, rs.name);
    match replica_sets(client, &rs.namespace)
        .replace(&rs.name, &PostParams::default(), &object)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Err(CliError::ChangedSinceRead {
            namespace: rs.namespace.clone(),
            name: rs.name.clone(),
        }),
        Err(error) => Err(CliError::from_kube(&action, REPLICA_SETS, error)),
    }
}
