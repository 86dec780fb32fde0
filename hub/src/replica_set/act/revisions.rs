//! Carries out a [`RevisionPlan`]: the current revision's ControllerRevision
//! renumbered or created, old ones pruned.

use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

use super::super::error::{ReplicaSetError, failed};
use super::super::revisions::{RevisionPlan, StoredRevisions};
use ferry_api::replica_set::ManifestWorkReplicaSet;
use k8s_openapi::api::apps::v1::ControllerRevision;

/// Makes the writes of `plan` for `rs` and returns the revisions as they
/// stand. A revision created by an earlier reconcile the cache has not
/// seen yet (409), or one already pruned (404), is fine. Fails when the
/// API server refuses a write or a deletion.
pub async fn store_revisions(
    client: &Client,
    rs: &ManifestWorkReplicaSet,
    plan: RevisionPlan,
) -> Result<StoredRevisions, ReplicaSetError> {
    let api: Api<ControllerRevision> =
        Api::namespaced(client.clone(), &rs.namespace().unwrap_or_default());
    if let Some((name, number)) = &plan.renumber {
        api.patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"revision": number})),
        )
        .await
        .map_err(failed(rs, format!("renumbering ControllerRevision {name}")))?;
    }
    if let Some(revision) = &plan.create {
        match api.create(&PostParams::default(), revision).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(source) => {
                return Err(failed(
                    rs,
                    format!("creating ControllerRevision {}", revision.name_any()),
                )(source));
            }
        }
    }
    for name in &plan.prune {
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(source) => {
                return Err(failed(rs, format!("pruning ControllerRevision {name}"))(
                    source,
                ));
            }
        }
    }
    Ok(plan.stored)
}
