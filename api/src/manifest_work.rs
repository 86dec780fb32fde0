//! The `ManifestWork` custom resource (`work.ferry.dev/v1alpha1`).
//!
//! The spec is field-for-field compatible with Open Cluster Management's
//! `work.open-cluster-management.io/v1` ManifestWork, so a user ports a work by
//! changing its `apiVersion`. Fields that OCM lacks are optional and marked as
//! ferry additions.

use kube::CustomResource;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

use crate::cel_rules;
use ferry_semantics::condition_rules;

/// Desired state of a work: the manifests to apply on the cluster named by the
/// work's namespace, and how to apply, observe and delete them.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "work.ferry.dev",
    version = "v1alpha1",
    kind = "ManifestWork",
    doc = "A set of Kubernetes manifests that ferry applies on one spoke cluster, the cluster named by the work's namespace, and keeps applied. Its status reports, per manifest, whether it was applied, whether it is available, and the feedback values asked for. Spec compatible with Open Cluster Management's work.open-cluster-management.io/v1 ManifestWork.",
    namespaced,
    status = "ManifestWorkStatus",
    shortname = "mw",
    category = "ferry",
    printcolumn = r#"{"name":"Applied","type":"string","jsonPath":".status.conditions[?(@.type==\"Applied\")].status"}"#,
    printcolumn = r#"{"name":"Available","type":"string","jsonPath":".status.conditions[?(@.type==\"Available\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    // On the root, the only place a rule sees the work's own name: a work
    // that waits for itself would wait forever.
    validation = Rule::new("!has(self.spec.dependsOn) || self.spec.dependsOn.all(d, d.name != self.metadata.name)")
        .message(Message::Expression("'spec.dependsOn: a work cannot depend on itself (' + self.metadata.name + ')'".into()))
        .field_path(".spec.dependsOn")
        .reason(Reason::FieldValueInvalid)
)]
#[serde(rename_all = "camelCase")]
pub struct ManifestWorkSpec {
    /// The manifests to apply.
    #[serde(default)]
    pub workload: ManifestsTemplate,
    /// What happens to the applied objects when the work is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_option: Option<DeleteOption>,
    /// Per-resource configuration: update strategy, ignored fields, feedback.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = cel_rules::MAX_MANIFESTS))]
    pub manifest_configs: Vec<ManifestConfigOption>,
    /// The identity the work is applied as, as in OCM: the agent applies a
    /// manifest only if this subject may do so on the cluster. Absent means
    /// the agent's own rights (unless the agent requires an executor).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor: Option<ManifestWorkExecutor>,
    /// ferry addition: other works of this cluster (this namespace) that
    /// must be ready before the agent applies any manifest of this one. The
    /// agent enforces it, so it holds while the hub is down; see
    /// docs/dependencies.md. OCM works never set it and are applied
    /// as before.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_DEPENDENCIES), extend("x-kubernetes-validations" = [
        {
            "rule": "self.all(d, self.exists_one(e, e.name == d.name))",
            "message": "spec.dependsOn names a work more than once",
            "reason": "FieldValueInvalid"
        }
    ]))]
    pub depends_on: Vec<WorkDependency>,
}

/// Most entries of `spec.dependsOn` (`maxItems`): enough for a stack of
/// layers, small enough that the agent's checks and the CRD's pairwise
/// uniqueness rule stay cheap.
pub const MAX_DEPENDENCIES: usize = 16;

/// The condition a dependency must have True when `condition` is omitted.
pub const DEFAULT_DEPENDENCY_CONDITION: &str = "Available";

/// ferry addition: one work this work waits for.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "!(has(self.condition) && has(self.celExpression))",
        "message": "a dependency is ready by its condition or by its celExpression, not both",
        "fieldPath": ".celExpression",
        "reason": "FieldValueForbidden"
    }
]))]
pub struct WorkDependency {
    /// The name of a ManifestWork in the same namespace (the same cluster).
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
    )]
    pub name: String,
    /// The condition type on that work's status that must be `True`, as its
    /// agent computes it: `Available` when omitted; a condition rule's type
    /// (e.g. `Complete`) works too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 316))]
    pub condition: Option<String>,
    /// Instead of `condition`: a CEL expression over the dependency, true
    /// when it is ready. The variable `work` holds the dependency as a
    /// ManifestWork (`work.metadata.name`, and `work.status` as its agent
    /// reports it: conditions, and per manifest its conditions and status
    /// feedback; empty fields are absent, as on the hub, so test them with
    /// `has()`), e.g. `work.status.resourceStatus.manifests.exists(m,
    /// has(m.statusFeedback) && m.statusFeedback.values.exists(v,
    /// v.name == 'ReadyReplicas' && v.fieldValue.integer >= 3))`. The agent
    /// evaluates it under the time and concurrency bounds of condition
    /// rules; an expression that does not compile, fails or is not a bool
    /// keeps the work waiting and says why. Not accepted on a replica set's
    /// own `spec.dependsOn`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = MAX_DEPENDENCY_EXPRESSION_LENGTH))]
    pub cel_expression: Option<String>,
}

/// Longest `dependsOn[].celExpression`, in bytes: the condition rules' limit.
pub const MAX_DEPENDENCY_EXPRESSION_LENGTH: usize =
    ferry_semantics::condition_rules::MAX_CEL_EXPRESSION_LENGTH;

impl WorkDependency {
    /// The condition type this dependency waits for (never fails).
    pub fn condition_type(&self) -> &str {
        self.condition
            .as_deref()
            .unwrap_or(DEFAULT_DEPENDENCY_CONDITION)
    }
}

/// OCM's `spec.executor`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ManifestWorkExecutor {
    /// Who the work is applied as.
    pub subject: ManifestWorkExecutorSubject,
}

/// The subject a work is applied as.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "self.type != 'ServiceAccount' || has(self.serviceAccount)",
        "message": "subject type ServiceAccount needs serviceAccount{namespace, name}",
        "fieldPath": ".serviceAccount",
        "reason": "FieldValueRequired"
    }
]))]
pub struct ManifestWorkExecutorSubject {
    /// `ServiceAccount`, the only subject type.
    #[serde(rename = "type")]
    pub type_: ExecutorSubjectType,
    /// The ServiceAccount, for type `ServiceAccount`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<ManifestWorkSubjectServiceAccount>,
}

/// Kind of executor subject.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ExecutorSubjectType {
    /// A ServiceAccount on the spoke.
    #[default]
    ServiceAccount,
}

/// A ServiceAccount on the spoke, named as Kubernetes names them.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ManifestWorkSubjectServiceAccount {
    /// Its namespace.
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
    )]
    pub namespace: String,
    /// Its name.
    #[schemars(
        length(min = 1, max = 253),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
    )]
    pub name: String,
}

/// The list of manifests in a work.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ManifestsTemplate {
    /// Kubernetes objects, each a complete manifest with apiVersion, kind and metadata.
    #[serde(default)]
    #[schemars(schema_with = "manifests_schema")]
    pub manifests: Vec<Manifest>,
}

/// One Kubernetes object as written by the user. Kept as raw JSON: any kind is
/// allowed, including kinds the hub has never heard of.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(transparent)]
pub struct Manifest(pub serde_json::Value);

impl JsonSchema for Manifest {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Manifest".into()
    }

    // Without preserve-unknown-fields the API server prunes every field of the
    // embedded object; embedded-resource makes it check apiVersion/kind/metadata.
    // The declared properties are what CEL rules may read (see `cel_rules`).
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        cel_rules::manifest_schema()
    }
}

/// Schema of `spec.workload.manifests`: at most [`cel_rules::MAX_MANIFESTS`] manifests.
/// That no two name the same object is checked by the admission policy
/// (the hub's `admission::duplicates_policy`): a CRD rule over pairs of manifests would not fit
/// the CRD cost budget above about 100 manifests.
pub fn manifests_schema(generator: &mut SchemaGenerator) -> Schema {
    let items = generator.subschema_for::<Manifest>();
    json_schema!({
        "type": "array",
        "maxItems": cel_rules::MAX_MANIFESTS,
        "items": items,
    })
}

/// How applied objects are treated when the work is deleted.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "!has(self.propagationPolicy) || self.propagationPolicy != 'SelectivelyOrphan' || (has(self.selectivelyOrphans) && has(self.selectivelyOrphans.orphaningRules) && size(self.selectivelyOrphans.orphaningRules) > 0)",
        "message": "propagationPolicy SelectivelyOrphan needs selectivelyOrphans.orphaningRules; without rules it orphans nothing (use Foreground)",
        "fieldPath": ".selectivelyOrphans",
        "reason": "FieldValueRequired"
    },
    {
        "rule": "(has(self.propagationPolicy) && self.propagationPolicy == 'SelectivelyOrphan') || !has(self.selectivelyOrphans) || !has(self.selectivelyOrphans.orphaningRules) || size(self.selectivelyOrphans.orphaningRules) == 0",
        "messageExpression": "'selectivelyOrphans.orphaningRules are only used with propagationPolicy SelectivelyOrphan, not ' + (has(self.propagationPolicy) ? self.propagationPolicy : 'Foreground')",
        "fieldPath": ".selectivelyOrphans",
        "reason": "FieldValueForbidden"
    }
]))]
pub struct DeleteOption {
    /// `Foreground` (default) deletes the objects; `Orphan` leaves them all;
    /// `SelectivelyOrphan` leaves those matched by `selectivelyOrphans`.
    #[serde(default)]
    pub propagation_policy: PropagationPolicy,
    /// The objects to leave behind under `SelectivelyOrphan`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selectively_orphans: Option<SelectivelyOrphan>,
    /// OCM's TTL: the hub deletes the work this many seconds after its
    /// `Complete` condition turned True (0: at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub ttl_seconds_after_finished: Option<i64>,
}

/// Deletion propagation for a work's objects.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum PropagationPolicy {
    /// Delete the objects and keep the work until they are gone.
    #[default]
    Foreground,
    /// Leave every object on the cluster.
    Orphan,
    /// Leave only the objects matched by the orphaning rules.
    SelectivelyOrphan,
}

/// The rules of `SelectivelyOrphan`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SelectivelyOrphan {
    /// Objects matching any rule are left on the cluster.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = cel_rules::MAX_MANIFESTS))]
    pub orphaning_rules: Vec<OrphaningRule>,
}

/// Identifies objects to orphan.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct OrphaningRule {
    /// API group; empty for the core group.
    #[serde(default)]
    pub group: String,
    /// Resource (plural, lower case), e.g. `configmaps`.
    pub resource: String,
    /// Object name.
    pub name: String,
    /// Object namespace; empty for cluster-scoped objects.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
}

/// Configuration for the manifests matched by `resourceIdentifier`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "!has(self.updateStrategy) || !has(self.updateStrategy.serverSideApply) || (has(self.updateStrategy.type) && self.updateStrategy.type in ['ServerSideApply', 'ReportOnly'])",
        "messageExpression": "'updateStrategy.serverSideApply is only used with type ServerSideApply, not ' + (has(self.updateStrategy.type) ? self.updateStrategy.type : 'Update') + ' (ReportOnly reads its ignoreFields too); set the type or remove serverSideApply'",
        "fieldPath": ".updateStrategy.serverSideApply",
        "reason": "FieldValueForbidden"
    }
]))]
pub struct ManifestConfigOption {
    /// Which manifests this applies to. `name` and `namespace` accept `*`.
    pub resource_identifier: ResourceIdentifier,
    /// Status values to report back from the applied object.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = cel_rules::MAX_FEEDBACK_RULES))]
    pub feedback_rules: Vec<FeedbackRule>,
    /// How the agent writes the object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_strategy: Option<UpdateStrategy>,
    /// ferry addition: what to do when the object is deleted on the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when_deleted: Option<WhenDeleted>,
    /// OCM's `Poll` or `Watch`. Accepted for compatibility: ferry's agent
    /// watches every object it applies, so feedback is watch-driven either way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback_scrape_type: Option<FeedbackScrapeType>,
    /// OCM's condition rules: conditions the agent computes from the live
    /// object (CEL, or the built-in `Complete` rules for Job and Pod).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = condition_rules::MAX_CONDITION_RULES))]
    pub condition_rules: Vec<ConditionRule>,
}

/// One OCM condition rule: sets condition `condition` on the manifest from
/// its live object. `condition: Complete` marks the manifest complete; a work
/// whose manifests with such rules are all complete is no longer updated.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "self.type != 'CEL' || self.condition != ''",
        "message": "Condition is required for CEL rules",
        "fieldPath": ".condition",
        "reason": "FieldValueRequired"
    }
]))]
pub struct ConditionRule {
    /// The condition type to set, e.g. `Complete`.
    #[schemars(length(max = 316))]
    pub condition: String,
    /// `CEL` or `WellKnownConditions`.
    #[serde(rename = "type")]
    pub type_: ConditionRuleType,
    /// CEL expressions over `object`; the condition is True when all are.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = condition_rules::MAX_CEL_EXPRESSIONS), inner(length(max = condition_rules::MAX_CEL_EXPRESSION_LENGTH)))]
    pub cel_expressions: Vec<String>,
    /// The condition's message (unless `messageExpression` gives one).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 32768))]
    pub message: String,
    /// A CEL expression over `object` and `result` giving the message.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = condition_rules::MAX_CEL_EXPRESSION_LENGTH))]
    pub message_expression: String,
}

/// How a condition rule is evaluated.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ConditionRuleType {
    /// Built-in rules for common kinds (Job and Pod `Complete`).
    #[default]
    WellKnownConditions,
    /// The rule's CEL expressions.
    #[serde(rename = "CEL")]
    Cel,
}

/// Selects manifests by group, resource, name and namespace. The lengths
/// are Kubernetes' own limits; they bound the cost of the CEL messages that
/// quote them.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ResourceIdentifier {
    /// API group; empty for the core group.
    #[serde(default)]
    #[schemars(length(max = 253))]
    pub group: String,
    /// Resource (plural, lower case), e.g. `deployments`.
    #[schemars(length(max = 63))]
    pub resource: String,
    /// Object name, or `*`.
    #[schemars(length(max = 253))]
    pub name: String,
    /// Object namespace, `*`, or empty for cluster-scoped objects.
    #[serde(default)]
    #[schemars(length(max = 63))]
    pub namespace: String,
}

/// A status feedback rule.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "self.type != 'JSONPaths' || (has(self.jsonPaths) && size(self.jsonPaths) > 0)",
        "message": "type JSONPaths needs at least one jsonPaths entry",
        "fieldPath": ".jsonPaths",
        "reason": "FieldValueRequired"
    },
    {
        "rule": "self.type != 'WellKnownStatus' || !has(self.jsonPaths) || size(self.jsonPaths) == 0",
        "message": "jsonPaths are only read with type JSONPaths, not WellKnownStatus; use a separate JSONPaths rule",
        "fieldPath": ".jsonPaths",
        "reason": "FieldValueForbidden"
    }
]))]
pub struct FeedbackRule {
    /// `WellKnownStatus` or `JSONPaths`.
    #[serde(rename = "type")]
    pub type_: FeedbackType,
    /// Named paths, for `JSONPaths`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = cel_rules::MAX_FEEDBACK_PATHS))]
    pub json_paths: Vec<NamedJsonPath>,
}

/// Kind of feedback rule.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum FeedbackType {
    /// The status fields ferry knows for common workload kinds.
    #[default]
    WellKnownStatus,
    /// User-defined JSONPath expressions.
    #[serde(rename = "JSONPaths")]
    JsonPaths,
}

/// A named JSONPath whose value is reported back.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct NamedJsonPath {
    /// Name under which the value is reported.
    pub name: String,
    /// JSONPath, with or without the leading `$`.
    pub path: String,
    /// Accepted for OCM compatibility and ignored (deprecated there too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// How the agent writes an object.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateStrategy {
    /// `Update` (default, also when omitted, as in OCM), `CreateOnly`,
    /// `ServerSideApply`, `ReadOnly` or `ReportOnly` (ferry addition).
    #[serde(rename = "type", default)]
    pub type_: UpdateStrategyType,
    /// Options for `ServerSideApply`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_side_apply: Option<ServerSideApplyConfig>,
}

/// Update strategy.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum UpdateStrategyType {
    /// kubectl-style three-way merge.
    #[default]
    Update,
    /// Create when absent, never update.
    CreateOnly,
    /// Kubernetes server-side apply.
    ServerSideApply,
    /// Never write; only report status.
    ReadOnly,
    /// ferry addition: never write; report status, and in `drift` where the
    /// object differs from what `ServerSideApply` with the same
    /// `serverSideApply` settings would apply (its `ignoreFields` are never
    /// reported).
    ReportOnly,
}

/// Server-side apply options.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServerSideApplyConfig {
    /// Take ownership of fields another manager owns.
    #[serde(default)]
    pub force: bool,
    /// Field manager name; `ferry-agent` when empty. Kubernetes refuses
    /// managers longer than 128 characters.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 128))]
    pub field_manager: String,
    /// Fields that the hub does not keep in sync once the object exists.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = cel_rules::MAX_FEEDBACK_PATHS))]
    pub ignore_fields: Vec<IgnoreField>,
}

/// A set of paths and when they are left to the spoke.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "(has(self.jsonPaths) && size(self.jsonPaths) > 0) || (has(self.jsonPointers) && size(self.jsonPointers) > 0) || (has(self.jqPathExpressions) && size(self.jqPathExpressions) > 0)",
        "message": "an ignoreFields entry needs at least one of jsonPaths, jsonPointers or jqPathExpressions",
        "reason": "FieldValueRequired"
    }
]))]
pub struct IgnoreField {
    /// `OnSpokePresent` (default, also when omitted, as in OCM) or `OnSpokeChange`.
    #[serde(default)]
    pub condition: IgnoreCondition,
    /// JSONPaths of the ignored fields; optional when `jsonPointers` or
    /// `jqPathExpressions` are given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = cel_rules::MAX_FEEDBACK_PATHS))]
    pub json_paths: Vec<String>,
    /// RFC 6901 JSON pointers of the ignored fields, e.g. `/spec/replicas`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = cel_rules::MAX_FEEDBACK_PATHS))]
    pub json_pointers: Vec<String>,
    /// jq path expressions of the ignored fields, e.g.
    /// `.spec.template.spec.containers[] | select(.name == "app") | .image`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = cel_rules::MAX_FEEDBACK_PATHS))]
    pub jq_path_expressions: Vec<String>,
}

/// When an ignored field is left to the spoke.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum IgnoreCondition {
    /// Never written again once the object exists.
    #[default]
    OnSpokePresent,
    /// Keeps the spoke's value until the hub changes that field.
    OnSpokeChange,
}

/// How status feedback is collected, in OCM's terms. ferry watches every
/// applied object, so both values behave alike: feedback follows the live
/// object within moments of a change.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum FeedbackScrapeType {
    /// OCM polls the object periodically.
    #[default]
    Poll,
    /// OCM watches the object.
    Watch,
}

/// ferry addition: what to do when an applied object is deleted on the spoke.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum WhenDeleted {
    /// Recreate it with the current spec.
    #[default]
    Recreate,
    /// Leave it deleted.
    Leave,
}

/// Observed state of a work, written by the hub from agent reports.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManifestWorkStatus {
    /// Work conditions: `Applied`, `Available`, `Deleting`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Per-manifest status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_status: Option<ManifestResourceStatus>,
}

/// A `metav1.Condition`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// Condition type, e.g. `Applied`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// CamelCase reason.
    pub reason: String,
    /// What happened, for a human.
    #[serde(default)]
    pub message: String,
    /// The work generation this condition describes.
    #[serde(default)]
    pub observed_generation: i64,
    /// When the status last changed, RFC 3339.
    pub last_transition_time: String,
}

/// Per-manifest status.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ManifestResourceStatus {
    /// One entry per manifest, in manifest order.
    #[serde(default)]
    pub manifests: Vec<ManifestCondition>,
}

/// Status of one manifest.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManifestCondition {
    /// Which object this is.
    pub resource_meta: ManifestResourceMeta,
    /// Values collected by feedback rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_feedback: Option<StatusFeedbackResult>,
    /// `Applied`, `Available`, `StatusFeedbackSynced`.
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// ferry addition: where the object on the spoke differs from what ferry
    /// would apply (`ReportOnly`), or differed until ferry wrote the hub's
    /// values back (`Update`, `ServerSideApply`). Absent when nothing differs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift: Option<ManifestDrift>,
}

/// ferry addition: the drifted fields of one object, bounded in count.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManifestDrift {
    /// The fields, open drift first, then the latest corrections.
    #[serde(default)]
    pub fields: Vec<DriftedField>,
    /// How many more fields differ than are listed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub omitted: i64,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// ferry addition: one field of a spoke object that differs from the hub's
/// manifest.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DriftedField {
    /// RFC 6901 JSON pointer into the spoke object, e.g. `/spec/replicas`; a
    /// list item the spoke lacks ends in `/-`.
    pub pointer: String,
    /// Compact JSON of the value ferry applies there (long values are cut
    /// and end in `…(N more bytes)`).
    pub hub_value: String,
    /// Compact JSON of the spoke's value; absent when the spoke lacks the
    /// field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spoke_value: Option<String>,
    /// The field manager that last wrote the field on the spoke, from
    /// managedFields; absent when none owns it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manager: Option<String>,
    /// When the agent first saw the field differ, RFC 3339.
    pub first_seen_time: String,
    /// When ferry wrote the hub's value back, RFC 3339; absent while the
    /// field still differs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corrected_time: Option<String>,
}

/// Identity of an applied object.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ManifestResourceMeta {
    /// Index of the manifest in `spec.workload.manifests`.
    pub ordinal: i32,
    /// API group.
    #[serde(default)]
    pub group: String,
    /// API version.
    #[serde(default)]
    pub version: String,
    /// Kind.
    #[serde(default)]
    pub kind: String,
    /// Resource (plural).
    #[serde(default)]
    pub resource: String,
    /// Name.
    #[serde(default)]
    pub name: String,
    /// Namespace; empty for cluster-scoped objects.
    #[serde(default)]
    pub namespace: String,
}

/// Feedback values of one manifest.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct StatusFeedbackResult {
    /// The values, by rule name.
    #[serde(default)]
    pub values: Vec<FeedbackValue>,
}

/// One named feedback value.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FeedbackValue {
    /// Rule name.
    pub name: String,
    /// The value.
    pub field_value: FieldValue,
}

/// A typed feedback value.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FieldValue {
    /// `Integer`, `String`, `Boolean` or `JsonRaw`.
    #[serde(rename = "type")]
    pub type_: String,
    /// Set when `type` is `Integer`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub integer: Option<i64>,
    /// Set when `type` is `String`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub string: Option<String>,
    /// Set when `type` is `Boolean`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boolean: Option<bool>,
    /// Set when `type` is `JsonRaw`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json_raw: Option<String>,
}
