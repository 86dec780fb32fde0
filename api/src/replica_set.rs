//! The `ManifestWorkReplicaSet` custom resource (`work.ferry.dev/v1alpha1`):
//! one ManifestWork template placed, by Placements, on many clusters.
//! Field-compatible with OCM's `work.open-cluster-management.io/v1alpha1`
//! ManifestWorkReplicaSet where OCM has the field.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::manifest_work::{Condition, ManifestWorkSpec};

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
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "has(self.placementRefs) && size(self.placementRefs) > 0",
        "message": "placementRefs needs at least one placement: without one no cluster gets a work",
        "fieldPath": ".placementRefs",
        "reason": "FieldValueRequired"
    },
    {
        "rule": "!has(self.placementRefs) || self.placementRefs.all(r, self.placementRefs.exists_one(s, s.name == r.name))",
        "message": "placementRefs names a placement twice: each placement may be referred to once",
        "fieldPath": ".placementRefs",
        "reason": "FieldValueInvalid"
    },
    {
        "rule": "!has(self.cascadeDeletionPolicy) || self.cascadeDeletionPolicy in ['Background', 'Foreground']",
        "messageExpression": "'cascadeDeletionPolicy must be Background or Foreground, not ' + self.cascadeDeletionPolicy",
        "fieldPath": ".cascadeDeletionPolicy",
        "reason": "FieldValueInvalid"
    },
    {
        "rule": "!has(self.overrides) || self.overrides.all(o, self.overrides.exists_one(p, p.name == o.name))",
        "message": "overrides names an override twice: override names must be unique (status messages name them)",
        "fieldPath": ".overrides",
        "reason": "FieldValueInvalid"
    }
]))]
pub struct ManifestWorkReplicaSetSpec {
    /// The spec of every generated ManifestWork.
    pub manifest_work_template: ManifestWorkSpec,
    /// The placements whose decisions say which clusters get a work.
    #[serde(default)]
    #[schemars(length(max = MAX_PLACEMENT_REFS))]
    pub placement_refs: Vec<LocalPlacementReference>,
    /// `Background` (default: the replica set goes at once, its works are
    /// deleted after) or `Foreground` (it stays until every work is gone).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 16))]
    pub cascade_deletion_policy: String,
    /// Hold the rollout: no cluster gets the current template until this
    /// is false again (ferry addition).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// Per-cluster changes to the template (ferry addition): each override
    /// whose `clusterSelector` matches a cluster's labels patches one
    /// manifest of that cluster's work, in list order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_OVERRIDES))]
    pub overrides: Vec<ClusterOverride>,
}

/// A JSON patch applied to one manifest of the works of the clusters a
/// label selector matches.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterOverride {
    /// Names the override in status messages and errors.
    #[schemars(length(min = 1, max = MAX_NAME))]
    pub name: String,
    /// Clusters (by their ManagedCluster labels) it applies to; empty
    /// matches every cluster.
    #[serde(default)]
    pub cluster_selector: crate::placement::LabelSelector,
    /// The manifest of the template it patches.
    pub resource_identifier: OverrideResourceIdentifier,
    /// RFC 6902 operations applied to that manifest.
    #[serde(default)]
    #[schemars(length(max = MAX_PATCH_OPERATIONS))]
    pub json_patch: Vec<JsonPatchOperation>,
}

/// Names one manifest of the template (OCM's `ResourceIdentifier`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "(has(self.kind) && self.kind != '') || (has(self.resource) && self.resource != '')",
        "message": "resourceIdentifier needs kind or resource to name the manifest to patch",
        "fieldPath": ".kind",
        "reason": "FieldValueRequired"
    }
]))]
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
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "self.op in ['add', 'remove', 'replace', 'move', 'copy', 'test']",
        "messageExpression": "'jsonPatch op must be add, remove, replace, move, copy or test, not ' + self.op",
        "fieldPath": ".op",
        "reason": "FieldValueInvalid"
    },
    {
        "rule": "self.path.matches('^(/([^~]|~[01])*)*$')",
        "messageExpression": "'jsonPatch path ' + self.path + ' is not a JSON pointer (empty, or /-separated tokens with ~ only as ~0 or ~1)'",
        "fieldPath": ".path",
        "reason": "FieldValueInvalid"
    },
    {
        "rule": "!(self.op in ['move', 'copy']) || (has(self.from) && self.from.matches('^(/([^~]|~[01])*)*$'))",
        "messageExpression": "'jsonPatch op ' + self.op + ' needs from, a JSON pointer'",
        "fieldPath": ".from",
        "reason": "FieldValueRequired"
    }
]))]
pub struct JsonPatchOperation {
    /// `add`, `remove`, `replace`, `move`, `copy` or `test`.
    #[schemars(length(max = 16))]
    pub op: String,
    /// JSON pointer of the target.
    #[schemars(length(max = MAX_POINTER))]
    pub path: String,
    /// The value of `add`, `replace` and `test`; its strings may hold
    /// `${CLUSTER_NAME}` and `${CLUSTER_LABEL:key}`. (CEL cannot see an
    /// untyped value: a missing one fails the cluster's rendering.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any_value_schema")]
    pub value: Option<serde_json::Value>,
    /// JSON pointer of the source of `move` and `copy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = MAX_POINTER))]
    pub from: Option<String>,
}

/// Schema of `maxFailures`: a count (0 allowed) or a percentage 0-100%.
fn max_failures_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "x-kubernetes-int-or-string": true,
        // Bounds the cost the API server estimates for the rule.
        "maxLength": 16,
        "x-kubernetes-validations": [{
            "rule": "type(self) == int ? self >= 0 : self.matches('^([0-9]+|(100|[1-9]?[0-9])%)$')",
            "message": "maxFailures must be a count of at least 0 or a percentage from 0% to 100%",
            "reason": "FieldValueInvalid"
        }]
    })
}

/// Schema of `maxConcurrency`: a count of at least 1 or 1-100%.
fn max_concurrency_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    crate::placement::positive_count_schema("maxConcurrency")
}

/// Most placements one replica set refers to (`maxItems`, bounding the
/// cost of the uniqueness rule).
pub const MAX_PLACEMENT_REFS: usize = 32;
/// Most overrides of one replica set (`maxItems`).
pub const MAX_OVERRIDES: usize = 64;
/// Most operations of one override (`maxItems`).
pub const MAX_PATCH_OPERATIONS: usize = 64;
/// Longest name of a placement or an override.
const MAX_NAME: usize = 253;
/// Longest JSON pointer of an operation.
const MAX_POINTER: usize = 1024;

/// Schema of any JSON value (kept as written).
fn any_value_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "x-kubernetes-preserve-unknown-fields": true })
}

/// A placement in the replica set's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalPlacementReference {
    /// The Placement's name.
    #[schemars(length(min = 1, max = MAX_NAME))]
    pub name: String,
    /// How changes reach the placement's clusters.
    #[serde(default)]
    pub rollout_strategy: RolloutStrategy,
}

/// How a change rolls out (OCM's `RolloutStrategy`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "!has(self.type) || self.type in ['All', 'Progressive', 'ProgressivePerGroup']",
        "messageExpression": "'rolloutStrategy.type must be All, Progressive or ProgressivePerGroup, not ' + self.type",
        "fieldPath": ".type",
        "reason": "FieldValueInvalid"
    }
]))]
pub struct RolloutStrategy {
    /// `All` (default): every cluster at once; `Progressive`: at most
    /// `maxConcurrency` clusters progressing; `ProgressivePerGroup`: one
    /// decision group at a time.
    #[serde(rename = "type", default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 32))]
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
    #[schemars(length(max = 64), extend("x-kubernetes-validations" = [
        {
            "rule": "self.matches('^([0-9]+(ms|s|m|h))+$')",
            "messageExpression": "'minSuccessTime ' + self + ' is not a duration like 30s, 5m or 1h30m'",
            "reason": "FieldValueInvalid"
        }
    ]))]
    pub min_success_time: String,
    /// How long a cluster may progress before it counts as Failed (a
    /// duration, or `None`, the default, for no limit).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 64), extend("x-kubernetes-validations" = [
        {
            "rule": "self == 'None' || self.matches('^([0-9]+(ms|s|m|h))+$')",
            "messageExpression": "'progressDeadline ' + self + ' is not None or a duration like 30s, 5m or 1h30m'",
            "reason": "FieldValueInvalid"
        }
    ]))]
    pub progress_deadline: String,
    /// Failed clusters tolerated before the rollout stops (count or %).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "max_failures_schema")]
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
    #[schemars(schema_with = "max_concurrency_schema")]
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
