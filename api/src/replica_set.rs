//! The `ManifestWorkReplicaSet` custom resource (`work.ferry.dev/v1alpha1`):
//! one ManifestWork template placed, by Placements, on many clusters.
//! Field-compatible with OCM's `work.open-cluster-management.io/v1alpha1`
//! ManifestWorkReplicaSet where OCM has the field.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::manifest_work::{Condition, MAX_DEPENDENCIES, ManifestWorkSpec, WorkDependency};

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
    printcolumn = r#"{"name":"Total","type":"integer","jsonPath":".status.summary.total"}"#,
    // On the root, the only place a rule sees the replica set's own name:
    // one that waits for itself would never start a cluster.
    validation = Rule::new("!has(self.spec.dependsOn) || self.spec.dependsOn.all(d, d.name != self.metadata.name)")
        .message(Message::Expression("'spec.dependsOn: a replica set cannot depend on itself (' + self.metadata.name + ')'".into()))
        .field_path(".spec.dependsOn")
        .reason(Reason::FieldValueInvalid)
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
        // The rendered work carries both lists: together they must fit the
        // work's own bound, and name each work once.
        "rule": "!has(self.dependsOn) || !has(self.manifestWorkTemplate.dependsOn) || (size(self.dependsOn) + size(self.manifestWorkTemplate.dependsOn) <= 16 && self.dependsOn.all(d, !self.manifestWorkTemplate.dependsOn.exists(e, e.name == d.name)))",
        "message": "dependsOn and manifestWorkTemplate.dependsOn together name at most 16 works, each once: every cluster's work carries both",
        "fieldPath": ".dependsOn",
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
    /// How many old revisions (ControllerRevisions named
    /// `<replica set>-<revision hash>`) are kept for rollback and `undo`
    /// (default 10; OCM's `revisionHistoryLimit`). Revisions a work still
    /// holds, the current and the last stable one are always kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub revision_history_limit: Option<i32>,
    /// What the fleet summary in the status aggregates beyond counts
    /// (ferry addition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_summary: Option<StatusSummarySpec>,
    /// Other replica sets of this namespace this one waits for (ferry
    /// addition): a cluster gets its first work only once each of them has
    /// its work there with the named condition True, and every work
    /// carries `dependsOn` naming theirs, so the cluster's agent keeps the
    /// order for every revision, even while the hub is down.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_DEPENDENCIES), extend("x-kubernetes-validations" = [
        {
            "rule": "self.all(d, self.exists_one(e, e.name == d.name))",
            "message": "spec.dependsOn names a replica set more than once",
            "reason": "FieldValueInvalid"
        },
        {
            "rule": "self.all(d, !has(d.celExpression))",
            "message": "a replica set's own spec.dependsOn takes a condition, not a celExpression (the hub holds clusters by condition); put CEL readiness rules in the template's dependsOn",
            "reason": "FieldValueForbidden"
        }
    ]))]
    pub depends_on: Vec<WorkDependency>,
}

/// What the bounded fleet summary aggregates.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatusSummarySpec {
    /// Status feedback names (as the works' `feedbackRules` report them,
    /// e.g. `readyReplicas`) whose values are counted per distinct value.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_SUMMARY_FEEDBACK), inner(length(max = MAX_NAME)))]
    pub feedback: Vec<String>,
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

/// Most gates of one rollout strategy (`maxItems`).
pub const MAX_GATES: usize = 32;
/// Most feedback names the fleet summary counts values of.
pub const MAX_SUMMARY_FEEDBACK: usize = 8;
/// Most entries of each bounded list of the fleet summary (failing
/// clusters, distinct feedback values): the status stays small at any
/// fleet size, the per-cluster detail stays on the works.
pub const MAX_SUMMARY_ENTRIES: usize = 10;

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
    /// What happens past `maxFailures` (OCM's names): `abortAll` (the
    /// default) stops the rollout and leaves every cluster where it is;
    /// `rollbackAll` stops it and puts every cluster that got the failed
    /// revision back on the last stable revision.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 16), extend("x-kubernetes-validations" = [
        {
            "rule": "self in ['abortAll', 'rollbackAll']",
            "messageExpression": "'failureStrategy must be abortAll or rollbackAll, not ' + self",
            "reason": "FieldValueInvalid"
        }
    ]))]
    pub failure_strategy: String,
    /// Gates between decision groups (ferry addition): the gate after a
    /// group holds every cluster of the later groups (higher index) until
    /// every cluster of that group succeeded and the gate's wait, approval
    /// and health check all passed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_GATES))]
    pub gates: Vec<RolloutGate>,
}

/// What must hold after a decision group before the later groups start.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "(has(self.timedWait) && self.timedWait != '') || (has(self.approval) && self.approval) || has(self.health)",
        "message": "a gate needs at least one of timedWait, approval or health",
        "reason": "FieldValueRequired"
    }
]))]
pub struct RolloutGate {
    /// The decision group this gate follows.
    #[schemars(length(min = 1, max = MAX_NAME))]
    pub after_group: String,
    /// How long to wait once the group succeeded (a duration like `10m`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 64), extend("x-kubernetes-validations" = [
        {
            "rule": "self.matches('^([0-9]+(ms|s|m|h))+$')",
            "messageExpression": "'timedWait ' + self + ' is not a duration like 30s, 5m or 1h30m'",
            "reason": "FieldValueInvalid"
        }
    ]))]
    pub timed_wait: String,
    /// Whether a person (or pipeline) must approve: a `RolloutApproval`
    /// naming this replica set, placement, group and the revision's whole
    /// digest, created after that revision's rollout started.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub approval: bool,
    /// A CEL expression over the group's aggregated results that must hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<HealthGate>,
}

/// A health gate: a CEL expression over the group's results, held for a
/// while.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HealthGate {
    /// CEL over `group` (`name`, `total`, `succeeded`, `applied`,
    /// `available`, `degraded`, `failed`) and `clusters` (a list of `name`,
    /// `applied`, `available`, `degraded`, `feedback`: a map of feedback
    /// name to value); must give a bool.
    #[schemars(length(min = 1, max = 4096))]
    pub expression: String,
    /// How long it must hold without a break (a duration; default: once).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 64), extend("x-kubernetes-validations" = [
        {
            "rule": "self.matches('^([0-9]+(ms|s|m|h))+$')",
            "messageExpression": "'holdFor ' + self + ' is not a duration like 30s, 5m or 1h30m'",
            "reason": "FieldValueInvalid"
        }
    ]))]
    pub hold_for: String,
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
    /// The rollout: revisions, gates, rollback and the bounded fleet
    /// summary (ferry addition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<RolloutStatus>,
    /// The deletion budget's current window and what waits for it (ferry
    /// addition): recorded before the deletions it allows are carried out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_budget: Option<DeletionBudgetStatus>,
}

/// The deletion budget's window: the hub deletes at most a share of the
/// replica set's works per window, and records each deletion here before
/// it is made, so a new leader continues the same window.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeletionBudgetStatus {
    /// When the window opened (RFC 3339).
    pub window_start: String,
    /// The number of works when it opened: the base of the share.
    pub base: i32,
    /// The deletions recorded in the window.
    pub deleted: i32,
    /// How many deletions are held until a release.
    #[serde(default)]
    pub waiting: i32,
    /// The first waiting clusters (at most [`MAX_SUMMARY_ENTRIES`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting_clusters: Vec<String>,
    /// The clusters the window removed (at most 100): one that gets a work
    /// again gives its share of the budget back, so a flapping label costs
    /// one removal.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 100))]
    pub removed_clusters: Vec<String>,
    /// The last release acted on (annotation `work.ferry.dev/release-deletions`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_release: Option<DeletionRelease>,
}

/// Longest release value the status keeps, bytes.
pub const MAX_RELEASE_VALUE: usize = 512;

/// A release of held deletions, as the hub acted on it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeletionRelease {
    /// The annotation's value: who released (the admission policy makes
    /// it start with the releaser's own user name) and why, cut to
    /// [`MAX_RELEASE_VALUE`] bytes.
    #[schemars(length(max = MAX_RELEASE_VALUE))]
    pub value: String,
    /// When the hub acted on it (RFC 3339).
    pub at: String,
    /// How many works it let go.
    pub deleted: i32,
}

/// A revision: its number (increasing per replica set), hash and digest.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RevisionRef {
    /// The revision's number (its ControllerRevision's `revision`).
    pub number: i64,
    /// The revision hash of its template and overrides (the digest's first
    /// ten hex digits, as in its ControllerRevision's name).
    pub hash: String,
    /// The whole revision digest (64 hex digits): what tells two templates
    /// apart whose hashes clash. Absent in statuses older hubs wrote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub digest: Option<String>,
}

impl RevisionRef {
    /// Whether `other` names the same revision: the same hash and, when
    /// both carry one, the same digest (the hash alone is 40 bits, which a
    /// birthday search matches in seconds).
    pub fn is(&self, other: &RevisionRef) -> bool {
        self.hash == other.hash
            && match (&self.digest, &other.digest) {
                (Some(a), Some(b)) => a == b,
                _ => true,
            }
    }
}

/// The state of the rollout, bounded in size whatever the fleet's.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutStatus {
    /// The revision the spec asks for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<RevisionRef>,
    /// The last revision that succeeded on every cluster it rolled out to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stable_revision: Option<RevisionRef>,
    /// Per revision some work holds: its clusters by state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub revisions: Vec<RevisionSummary>,
    /// Per placement: when the rollout started, its gates, its churn.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub placements: Vec<PlacementRollout>,
    /// Set while a `rollbackAll` holds the clusters on an older revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback: Option<RollbackStatus>,
    /// The first failing clusters (at most [`MAX_SUMMARY_ENTRIES`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failing_clusters: Vec<FailingCluster>,
    /// Counts per distinct value of the feedback named in
    /// `spec.statusSummary.feedback`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub feedback: Vec<FeedbackSummary>,
}

/// Clusters by rollout state.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RolloutCounts {
    /// Clusters counted.
    pub total: i32,
    /// Waiting for their turn.
    pub to_apply: i32,
    /// Holding the revision, not yet succeeded.
    pub progressing: i32,
    /// Applied and Available for `minSuccessTime`.
    pub succeeded: i32,
    /// Degraded, refused, or past `progressDeadline`.
    pub failed: i32,
    /// Their agent is not connected: they neither hold nor fail the
    /// rollout, and catch up when they return.
    pub unreachable: i32,
}

/// The clusters of one revision.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RevisionSummary {
    /// The revision.
    pub revision: RevisionRef,
    /// Its clusters by state.
    pub clusters: RolloutCounts,
}

/// The rollout of one placement's clusters.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlacementRollout {
    /// The placement.
    pub name: String,
    /// The revision hash this rollout state belongs to: a new revision
    /// starts the rollout (and its gates) afresh.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub revision: String,
    /// The whole digest of that revision (64 hex digits, of which
    /// `revision` is the start): what a `RolloutApproval` of one of its
    /// gates names in `spec.revision`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub revision_digest: String,
    /// When the rollout of the current revision started here (RFC 3339);
    /// its cohort is the clusters chosen then.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub started_at: String,
    /// The gates of the current revision, in group order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gates: Vec<GateStatus>,
    /// Clusters chosen after the rollout started: they get the revision
    /// after the cohort (the rollout's last stage).
    #[serde(default)]
    pub late_joiners: i32,
    /// Clusters whose agent is not connected.
    #[serde(default)]
    pub unreachable: i32,
}

/// Where one gate stands.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GateStatus {
    /// The decision group the gate follows.
    pub after_group: String,
    /// `Pending` (the group has not succeeded yet), `Waiting` (timed wait),
    /// `AwaitingApproval`, `Unhealthy` (health check false or not held
    /// long enough), `Passed`.
    pub state: String,
    /// When the gate opened (the group succeeded), RFC 3339.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub opened_at: String,
    /// Since when the health expression has held, RFC 3339.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub healthy_since: String,
    /// Who approved (the RolloutApproval's `approvedBy`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub approved_by: String,
    /// When (the RolloutApproval's creation), RFC 3339.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub approved_at: String,
    /// What holds it, for a human.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// A rollback `rollbackAll` did.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RollbackStatus {
    /// The revision that failed.
    pub from: RevisionRef,
    /// The stable revision the clusters went back to.
    pub to: RevisionRef,
    /// Why (which clusters failed, against which `maxFailures`).
    pub reason: String,
    /// When it started, RFC 3339.
    pub at: String,
    /// Clusters put back.
    pub clusters: i32,
}

/// A failing cluster and why.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailingCluster {
    /// The cluster.
    pub cluster: String,
    /// The revision number its work holds (0 when unknown).
    #[serde(default)]
    pub revision: i64,
    /// Why it fails (a condition's reason and message, or the refusal).
    pub reason: String,
}

/// Counts per distinct value of one feedback name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FeedbackSummary {
    /// The feedback name.
    pub name: String,
    /// The most common values (at most [`MAX_SUMMARY_ENTRIES`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<FeedbackValueCount>,
    /// Clusters reporting a value not listed.
    #[serde(default)]
    pub other_clusters: i32,
}

/// One distinct feedback value and how many clusters report it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FeedbackValueCount {
    /// The value as JSON text (e.g. `3`, `"v1.2"`).
    pub value: String,
    /// Clusters reporting it.
    pub clusters: i32,
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
