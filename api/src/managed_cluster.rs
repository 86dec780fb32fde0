//! The `ManagedCluster` custom resource (`cluster.ferry.dev/v1alpha1`, beside
//! Placements and cluster sets, as in OCM): one per spoke cluster,
//! cluster-scoped. Its name is the cluster name, which is also the hub
//! namespace holding the cluster's ManifestWorks. Earlier hubs kept it in
//! `work.ferry.dev` ([`LEGACY_GROUP`]); a hub carries those over at start.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The group ManagedClusters were served in before they moved to
/// `cluster.ferry.dev`.
pub const LEGACY_GROUP: &str = "work.ferry.dev";

/// A spoke cluster known to the hub.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "cluster.ferry.dev",
    version = "v1alpha1",
    kind = "ManagedCluster",
    doc = "A spoke cluster known to the ferry hub. Its name is the cluster's name and the hub namespace holding its ManifestWorks; its status shows whether the cluster's agent is connected, its version and when it was last seen.",
    status = "ManagedClusterStatus",
    shortname = "mcl",
    category = "ferry",
    printcolumn = r#"{"name":"Accepted","type":"boolean","jsonPath":".spec.hubAcceptsClient"}"#,
    printcolumn = r#"{"name":"Connected","type":"boolean","jsonPath":".status.connected"}"#,
    printcolumn = r#"{"name":"Agent","type":"string","jsonPath":".status.agentVersion"}"#,
    printcolumn = r#"{"name":"Last Seen","type":"date","jsonPath":".status.lastSeenTime"}"#,
    printcolumn = r#"{"name":"Held Deletions","type":"integer","jsonPath":".status.deletionBrake.heldWorks"}"#,
    printcolumn = r#"{"name":"Reason","type":"string","priority":1,"jsonPath":".status.disconnectReason"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ManagedClusterSpec {
    /// Free-form description shown to users; ferry does not interpret it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Whether the hub serves this cluster's agent (OCM's field of the same
    /// name). False refuses its agent with PERMISSION_DENIED and ends a live
    /// session; `ferry-hub accept --cluster NAME [--deny]` flips it. Absent
    /// counts as true, so clusters joined before the field existed keep
    /// being served.
    #[serde(default = "accepted_by_default")]
    pub hub_accepts_client: bool,
    /// Taints placements must tolerate to choose the cluster (OCM's field).
    /// The hub keeps `cluster.ferry.dev/unreachable` (NoSelect) here while
    /// the cluster's agent is not connected; users add their own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<ClusterTaint>,
}

/// A taint on a cluster (OCM's `Taint`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterTaint {
    /// Taint key, e.g. `cluster.ferry.dev/unreachable`.
    pub key: String,
    /// Taint value.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
    /// `NoSelect`, `NoSelectIfNew` or `PreferNoSelect`.
    pub effect: String,
    /// When the taint was added, RFC 3339 (tolerationSeconds count from it).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub time_added: String,
}

/// A claim about a cluster, selected by placements' `claimSelector`
/// (OCM's `ManagedClusterClaim`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ClusterClaim {
    /// Claim name, e.g. `region.open-cluster-management.io`.
    pub name: String,
    /// Claim value.
    #[serde(default)]
    pub value: String,
}

/// A ManagedCluster without `hubAcceptsClient` is accepted: whoever created
/// it already had the rights to let the cluster in.
fn accepted_by_default() -> bool {
    true
}

impl Default for ManagedClusterSpec {
    fn default() -> Self {
        Self {
            description: String::new(),
            hub_accepts_client: accepted_by_default(),
            taints: Vec::new(),
        }
    }
}

/// What the hub knows of the cluster's agent.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManagedClusterStatus {
    /// Whether an agent of this cluster holds a session with a hub replica.
    #[serde(default)]
    pub connected: bool,
    /// Version the agent reported in its Hello.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub agent_version: String,
    /// RFC 3339. For a disconnected cluster, when the hub last heard from
    /// its agent; for a connected one, when its session began: from then on
    /// the Lease of the replica named in `servedBy` vouches for it, so an
    /// idle fleet costs no ManagedCluster writes.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub last_seen_time: String,
    /// The hub replica holding the agent's session (its replica Lease is
    /// `ferry-hub-replica-<servedBy>` in the hub's namespace); empty when
    /// disconnected or written by a hub older than replica Leases.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub served_by: String,
    /// Identifies the session the status describes, so that the end of an
    /// old session never overwrites a newer one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub session_id: String,
    /// Why the agent is disconnected, when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disconnect_reason: Option<String>,
    /// Claims about the cluster (OCM's field): set by `ferry-hub join
    /// --claims`, selected by placements' `claimSelector`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_claims: Vec<ClusterClaim>,
    /// What the agent's deletion brake holds on the spoke, as its agent
    /// last reported; absent while it holds nothing. Kept while the agent
    /// is disconnected (the hold is on the spoke); each new session clears
    /// it and the agent reports again at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_brake: Option<DeletionBrakeStatus>,
    /// The spoke's version, as its agent last reported (OCM's field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<ManagedClusterVersion>,
    /// The public keys Secrets are sealed to for this cluster, as its agent
    /// last reported: the current key first, then those retiring
    /// (docs/sealed-secrets.md). Kept while the agent is disconnected.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sealing_keys: Vec<SealingKey>,
}

/// The version of a managed cluster (OCM's `ManagedClusterVersion`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ManagedClusterVersion {
    /// The spoke's Kubernetes version (its API server's gitVersion).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kubernetes: String,
}

/// A public key of a cluster's agent that Secrets are sealed to.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SealingKey {
    /// The key's id (`k-` and 16 hex digits of the key's SHA-256).
    pub key_id: String,
    /// The age X25519 public key (`age1…`).
    pub public_key: String,
    /// Kept only to open entries still sealed to it; seal to the current key.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub retiring: bool,
}

/// Deletions the agent's brake holds on the spoke, until a platform admin
/// releases them there (docs/deletion-brake.md).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeletionBrakeStatus {
    /// Works whose deletion is held.
    pub held_works: u64,
    /// Objects those works would remove.
    pub held_objects: u64,
    /// RFC 3339: when the oldest hold began.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub since: String,
    /// How to release the hold, on the spoke.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub release: String,
    /// The namespace of the agent's ledger on the spoke, where the release
    /// annotation goes (`kubectl ferry release-deletions` reads it); empty
    /// when the agent named no valid namespace.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ledger_namespace: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_without_the_field_is_accepted() {
        let spec: ManagedClusterSpec = serde_json::from_str("{}").expect("spec");
        assert!(spec.hub_accepts_client);
        assert!(ManagedClusterSpec::default().hub_accepts_client);
        let denied: ManagedClusterSpec =
            serde_json::from_str(r#"{"hubAcceptsClient": false}"#).expect("spec");
        assert!(!denied.hub_accepts_client);
    }
}
