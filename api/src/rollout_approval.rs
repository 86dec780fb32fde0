//! The `RolloutApproval` custom resource (`work.ferry.dev/v1alpha1`): one
//! person's (or pipeline's) approval of one gate of one revision's rollout.
//! Creating one is the right to approve, so RBAC on `rolloutapprovals`
//! decides who may; the hub's admission policy makes `approvedBy` the
//! creator's own user name, so the record of who approved cannot be forged,
//! and the spec cannot change afterwards. An approval names the whole
//! revision digest and counts only for the rollout of that revision that
//! was under way when it was created: it expires with it.

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
    /// The revision approved, by its whole digest: 64 lowercase hex
    /// digits, the placement's `status.rollout.placements[].revisionDigest`.
    /// It lets through only that revision's rollout, and only if it was
    /// created after that rollout started: an approval of a revision that
    /// is no longer current is ignored, and does not count again when the
    /// replica set goes back to the same content later. The 10-digit
    /// revision hash (the form before) is refused.
    #[schemars(length(min = 1, max = 64))]
    #[schemars(extend("x-kubernetes-validations" = [
        {
            "rule": "!self.matches('^[0-9a-f]{10}$')",
            "message": "spec.revision names a 10-digit revision hash, which is no longer accepted: name the whole revision digest, 64 lowercase hex digits (status.rollout.placements[].revisionDigest of the replica set; kubectl ferry rollout approve writes it)",
            "reason": "FieldValueInvalid"
        },
        {
            "rule": "self.matches('^[0-9a-f]{10}$') || self.matches('^[0-9a-f]{64}$')",
            "message": "spec.revision must be the whole revision digest, 64 lowercase hex digits (status.rollout.placements[].revisionDigest of the replica set; kubectl ferry rollout approve writes it)",
            "reason": "FieldValueInvalid"
        }
    ]))]
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
