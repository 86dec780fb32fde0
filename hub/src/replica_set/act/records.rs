//! The replica set's status: its records (a rollback, the deletion
//! budget's window, a gate passed), each written before the work writes it
//! announces, and the status a reconcile ends with. One style for all:
//! server-side apply by the replica-set field manager, fenced by the
//! resourceVersion the decision was made from.

use kube::api::{Api, Patch, PatchParams};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;

use super::super::error::{ReplicaSetError, failed_fenced};
use ferry_api::replica_set::{ManifestWorkReplicaSet, ManifestWorkReplicaSetStatus};

/// Writes `status` to `rs` when it differs from what `rs` has; returns the
/// resourceVersion of the object written (None when nothing was written).
/// The write carries `rs`'s resourceVersion as a precondition, so a leader
/// that decided from an older object (one paused and resumed after another
/// took over) writes nothing. Fails with [`ReplicaSetError::Superseded`]
/// then, and when the API server refuses the write.
pub async fn write_status(
    client: &Client,
    rs: &ManifestWorkReplicaSet,
    status: ManifestWorkReplicaSetStatus,
) -> Result<Option<String>, ReplicaSetError> {
    let params = PatchParams::apply(ferry_semantics::contract::REPLICA_SET_FIELD_MANAGER).force();
    if rs.status.as_ref() == Some(&status) {
        return Ok(None);
    }
    let api: Api<ManifestWorkReplicaSet> =
        Api::namespaced(client.clone(), &rs.namespace().unwrap_or_default());
    let patch = json!({
        "apiVersion": ManifestWorkReplicaSet::api_version(&()),
        "kind": ManifestWorkReplicaSet::kind(&()),
        "metadata": {"resourceVersion": rs.resource_version()},
        "status": status,
    });
    let written = api
        .patch_status(&rs.name_any(), &params, &Patch::Apply(&patch))
        .await
        .map_err(failed_fenced(rs, "writing the status"))?;
    Ok(written.resource_version())
}

/// Checks, writing nothing, that `rs` is still at its resourceVersion: a
/// patch of its status that changes nothing but carries the version as a
/// precondition. Done before works are written or deleted by a decision
/// that recorded nothing first, so a leader that decided from an older
/// object writes no work. Fails with [`ReplicaSetError::Superseded`] when
/// the object moved on, and when the API server refuses the request.
pub async fn fence(client: &Client, rs: &ManifestWorkReplicaSet) -> Result<(), ReplicaSetError> {
    let api: Api<ManifestWorkReplicaSet> =
        Api::namespaced(client.clone(), &rs.namespace().unwrap_or_default());
    let patch = json!({"metadata": {"resourceVersion": rs.resource_version()}});
    let params = PatchParams {
        field_manager: Some(ferry_semantics::contract::REPLICA_SET_FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    api.patch_status(&rs.name_any(), &params, &Patch::Merge(&patch))
        .await
        .map_err(failed_fenced(
            rs,
            "checking it is unchanged before writing works",
        ))?;
    Ok(())
}
