//! The `RolloutApproval` custom resource (`work.ferry.dev/v1alpha1`): one
//! person's (or pipeline's) approval of one gate of one revision's rollout.
//! Creating one is the right to approve, so RBAC on `rolloutapprovals`
//! decides who may; the hub's admission policy makes `approvedBy` the
//! creator's own user name, so the record of who approved cannot be forged,
//! and the spec cannot change afterwards.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// An approval of the gate after one decision group, for one revision.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "work.ferry.dev",
    version = "v1alpha1",
    kind = "RolloutApproval",
    namespaced,
    doc = "An approval of the gate after one decision group of one ManifestWorkReplicaSet revision's rollout (in the replica set's namespace). approvedBy must be the creator's user name; the spec is immutable.",
    shortname = "approval",
    category = "ferry",
    printcolumn = r#"{"name":"ReplicaSet","type":"string","jsonPath":".spec.replicaSet"}"#,
    printcolumn = r#"{"name":"Group","type":"string","jsonPath":".spec.afterGroup"}"#,
    printcolumn = r#"{"name":"Revision","type":"string","jsonPath":".spec.revision"}"#,
    printcolumn = r#"{"name":"By","type":"string","jsonPath":".spec.approvedBy"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "self == oldSelf",
        "message": "an approval cannot change: delete it and create another",
        "reason": "FieldValueForbidden"
    }
]))]
pub struct RolloutApprovalSpec {
    /// The ManifestWorkReplicaSet, in this namespace.
    #[schemars(length(min = 1, max = 253))]
    pub replica_set: String,
    /// The placement whose rollout the gate belongs to.
    #[schemars(length(min = 1, max = 253))]
    pub placement: String,
    /// The decision group the approved gate follows.
    #[schemars(length(min = 1, max = 253))]
    pub after_group: String,
    /// The revision hash approved (`status.rollout.revision.hash`): an
    /// approval of one revision does not let another through.
    #[schemars(length(min = 1, max = 64))]
    pub revision: String,
    /// The approver's user name, which admission checks against the
    /// creator's.
    #[schemars(length(min = 1, max = 512))]
    pub approved_by: String,
    /// Why, for the record.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 1024))]
    pub comment: String,
}
