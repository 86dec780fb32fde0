//! Reconcile phase 4: the works themselves. The clusters the rollout plan
//! starts get their rendering of the template (a few writes at a time),
//! and clusters no longer chosen lose their work.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;

use super::error::{ReplicaSetError, failed};
use super::render::Rendered;
use ferry_api::contract::{
    PLACEMENT_NAME_LABEL, REPLICA_SET_LABEL, TEMPLATE_APPLIED_AT_ANNOTATION,
};
use ferry_api::manifest_work::ManifestWork;
use ferry_api::replica_set::ManifestWorkReplicaSet;

/// Works written at once by one reconcile.
const CONCURRENT_WRITES: usize = 16;

/// The label value naming a replica set: namespaces hold no dots, so the
/// first dot splits it back.
pub fn owner_label(rs: &ManifestWorkReplicaSet) -> String {
    format!("{}.{}", rs.namespace().unwrap_or_default(), rs.name_any())
}

/// Writes the works of the clusters in `start` (cluster, placement) unless
/// `rs` is paused, then deletes the `existing` works of clusters no longer
/// `wanted`. Fails on the first write or deletion the API server refuses.
pub async fn deploy(
    client: &Client,
    rs: &ManifestWorkReplicaSet,
    start: &[(String, String)],
    rendered: &Rendered,
    existing: &BTreeMap<String, Arc<ManifestWork>>,
    wanted: &BTreeMap<String, String>,
    now: Timestamp,
) -> Result<(), ReplicaSetError> {
    let params = PatchParams::apply(ferry_semantics::contract::REPLICA_SET_FIELD_MANAGER).force();
    let owner = owner_label(rs);
    if !rs.spec.paused {
        let applied_at = now
            .strftime(ferry_semantics::contract::KUBE_TIME_FORMAT)
            .to_string();
        let (owner, applied_at, params) = (&owner, &applied_at, &params);
        // Written a few at a time: one template change reaches a
        // thousand clusters in a few seconds, not one round trip each.
        let writes = start.iter().cloned().filter_map(|(cluster, placement)| {
            let spec = rendered.get(&cluster)?.as_ref().ok()?.clone();
            Some((cluster, placement, spec))
        });
        futures::stream::iter(writes)
            .map(|(cluster, placement, spec)| async move {
                let work = json!({
                    "apiVersion": ManifestWork::api_version(&()),
                    "kind": ManifestWork::kind(&()),
                    "metadata": {
                        "name": rs.name_any(),
                        "namespace": cluster,
                        "labels": {REPLICA_SET_LABEL: owner, PLACEMENT_NAME_LABEL: placement},
                        "annotations": {TEMPLATE_APPLIED_AT_ANNOTATION: applied_at},
                    },
                    "spec": spec,
                });
                let api: Api<ManifestWork> = Api::namespaced(client.clone(), &cluster);
                api.patch(&rs.name_any(), params, &Patch::Apply(&work))
                    .await
                    .map_err(failed(
                        rs,
                        format!("writing the ManifestWork of cluster {cluster}"),
                    ))
            })
            .buffer_unordered(CONCURRENT_WRITES)
            .try_collect::<Vec<_>>()
            .await?;
    }
    for (cluster, work) in existing {
        if !wanted.contains_key(cluster) && work.meta().deletion_timestamp.is_none() {
            delete_work(client, rs, cluster).await?;
        }
    }
    Ok(())
}

/// Deletes the work `rs` generated on `cluster`; one already gone is fine.
pub async fn delete_work(
    client: &Client,
    rs: &ManifestWorkReplicaSet,
    cluster: &str,
) -> Result<(), ReplicaSetError> {
    let api: Api<ManifestWork> = Api::namespaced(client.clone(), cluster);
    match api.delete(&rs.name_any(), &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(source) => Err(failed(
            rs,
            format!("deleting the ManifestWork of cluster {cluster}"),
        )(source)),
    }
}
