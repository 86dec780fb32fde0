//! The `ManifestWorkReplicaSet` custom resource (`work.ferry.dev/v1alpha1`):
//! one ManifestWork template placed, by Placements, on many clusters.
//! Field-compatible with OCM's `work.open-cluster-management.io/v1alpha1`
//! ManifestWorkReplicaSet where OCM has the field.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::manifest_work::{Condition, ManifestWorkSpec};

/// Label on a generated ManifestWork naming its replica set as
/// `<namespace>.<name>`.
pub const REPLICA_SET_LABEL: &str = "work.ferry.dev/manifestworkreplicaset";
/// Label on a generated ManifestWork naming the Placement that chose its
/// cluster.
pub const PLACEMENT_NAME_LABEL: &str = "work.ferry.dev/placement";
/// Finalizer on a replica set: its works are removed before it goes.
pub const REPLICA_SET_FINALIZER: &str = "work.ferry.dev/manifestworkreplicaset-cleanup";

/// A ManifestWork template and the placements whose clusters get it.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "work.ferry.dev",
    version = "v1alpha1",
    kind = "ManifestWorkReplicaSet",
    namespaced,
    doc = "A ManifestWork template and the Placements (in the same namespace) whose chosen clusters each get one ManifestWork made from it, named like the replica set, in the cluster's namespace (OCM's ManifestWorkReplicaSet).",
    status = "ManifestWorkReplicaSetStatus",
    shortname = "mwrs",
    category = "ferry",
    printcolumn = r#"{"name":"Placement","type":"string","jsonPath":".status.conditions[?(@.type==\"PlacementVerified\")].reason"}"#,
    printcolumn = r#"{"name":"Applied","type":"string","jsonPath":".status.conditions[?(@.type==\"ManifestworkApplied\")].reason"}"#,
    printcolumn = r#"{"name":"Total","type":"integer","jsonPath":".status.summary.total"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ManifestWorkReplicaSetSpec {
    /// The spec of every generated ManifestWork.
    pub manifest_work_template: ManifestWorkSpec,
    /// The placements whose decisions say which clusters get a work.
    #[serde(default)]
    pub placement_refs: Vec<LocalPlacementReference>,
    /// `Background` (default: the replica set goes at once, its works are
    /// deleted after) or `Foreground` (it stays until every work is gone).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cascade_deletion_policy: String,
    /// Hold the rollout: no cluster gets the current template until this
    /// is false again (ferry addition).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// Per-cluster changes to the template (ferry addition): each override
    /// whose `clusterSelector` matches a cluster's labels patches one
    /// manifest of that cluster's work, in list order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<ClusterOverride>,
}

/// A JSON patch applied to one manifest of the works of the clusters a
/// label selector matches.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterOverride {
    /// Names the override in status messages and errors.
    pub name: String,
    /// Clusters (by their ManagedCluster labels) it applies to; empty
    /// matches every cluster.
    #[serde(default)]
    pub cluster_selector: crate::placement::types::LabelSelector,
    /// The manifest of the template it patches.
    pub resource_identifier: OverrideResourceIdentifier,
    /// RFC 6902 operations applied to that manifest.
    #[serde(default)]
    pub json_patch: Vec<JsonPatchOperation>,
}

/// Names one manifest of the template (OCM's `ResourceIdentifier`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OverrideResourceIdentifier {
    /// API group, empty for the core group.
    #[serde(default)]
    pub group: String,
    /// Lowercase plural resource (`deployments`), or set `kind`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource: String,
    /// Kind (`Deployment`), or set `resource`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Namespace, empty for a cluster-scoped manifest.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Name.
    pub name: String,
}

/// One RFC 6902 operation.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JsonPatchOperation {
    /// `add`, `remove`, `replace`, `move`, `copy` or `test`.
    pub op: String,
    /// JSON pointer of the target.
    pub path: String,
    /// The value of `add`, `replace` and `test`; its strings may hold
    /// `${CLUSTER_NAME}` and `${CLUSTER_LABEL:key}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any_value_schema")]
    pub value: Option<serde_json::Value>,
    /// JSON pointer of the source of `move` and `copy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
}

/// Schema of any JSON value (kept as written).
fn any_value_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "x-kubernetes-preserve-unknown-fields": true })
}

/// A placement in the replica set's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalPlacementReference {
    /// The Placement's name.
    pub name: String,
    /// How changes reach the placement's clusters.
    #[serde(default)]
    pub rollout_strategy: RolloutStrategy,
}

/// How a change rolls out (OCM's `RolloutStrategy`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStrategy {
    /// `All` (default): every cluster at once; `Progressive`: at most
    /// `maxConcurrency` clusters progressing; `ProgressivePerGroup`: one
    /// decision group at a time.
    #[serde(rename = "type", default, skip_serializing_if = "String::is_empty")]
    pub type_: String,
    /// Settings of `All`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all: Option<RolloutConfig>,
    /// Settings of `Progressive`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progressive: Option<RolloutProgressive>,
    /// Settings of `ProgressivePerGroup`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progressive_per_group: Option<RolloutProgressivePerGroup>,
}

/// Settings every rollout type shares.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutConfig {
    /// How long a cluster's work must stay Applied and Available before
    /// the cluster counts as Succeeded (a duration like `30s`, `5m`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub min_success_time: String,
    /// How long a cluster may progress before it counts as Failed (a
    /// duration, or `None`, the default, for no limit).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub progress_deadline: String,
    /// Failed clusters tolerated before the rollout stops (count or %).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::placement::types::int_or_string_schema")]
    pub max_failures: Option<serde_json::Value>,
}

/// Settings of `Progressive`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutProgressive {
    /// The shared settings.
    #[serde(flatten)]
    pub config: RolloutConfig,
    /// Decision groups that must all succeed first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mandatory_decision_groups: Vec<MandatoryDecisionGroup>,
    /// Most clusters progressing at once (count or % of the clusters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::placement::types::int_or_string_schema")]
    pub max_concurrency: Option<serde_json::Value>,
}

/// Settings of `ProgressivePerGroup`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutProgressivePerGroup {
    /// The shared settings.
    #[serde(flatten)]
    pub config: RolloutConfig,
    /// Decision groups that must all succeed first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mandatory_decision_groups: Vec<MandatoryDecisionGroup>,
}

/// A decision group named by name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MandatoryDecisionGroup {
    /// The group's name.
    #[serde(default)]
    pub group_name: String,
}

/// Observed state of a replica set.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManifestWorkReplicaSetStatus {
    /// `PlacementVerified`, `PlacementRolledOut`, `ManifestworkApplied`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Counts over every generated work.
    #[serde(default)]
    pub summary: ManifestWorkSummary,
    /// Counts per placement.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub placement_summary: Vec<PlacementSummary>,
}

/// Counts of generated works by state.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManifestWorkSummary {
    /// Works generated.
    pub total: i32,
    /// Works whose `Applied` is True for their current generation.
    pub applied: i32,
    /// Works whose `Available` is True.
    pub available: i32,
    /// Works whose `Degraded` is True.
    pub degraded: i32,
    /// Works whose `Progressing` is True.
    pub progressing: i32,
    /// Works holding the current template.
    pub updated: i32,
}

/// Counts of one placement's works.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlacementSummary {
    /// The placement.
    pub name: String,
    /// Its works' counts.
    pub summary: ManifestWorkSummary,
}
