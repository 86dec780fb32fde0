//! The `Placement` and `PlacementDecision` custom resources
//! (`cluster.ferry.dev/v1alpha1`), field-compatible with OCM's
//! `cluster.open-cluster-management.io/v1beta1` where OCM has the field, so
//! an OCM placement ports by changing its `apiVersion`.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

use crate::manifest_work::Condition;

/// Chooses ManagedClusters by labels, claims and taints, and writes the
/// choice to PlacementDecisions.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "cluster.ferry.dev",
    version = "v1alpha1",
    kind = "Placement",
    namespaced,
    doc = "Chooses ManagedClusters by their labels, claims and taints (OCM's Placement, field for field where OCM has the field); the hub writes the choice into PlacementDecision objects labelled cluster.ferry.dev/placement=<name>.",
    status = "PlacementStatus",
    shortname = "pl",
    category = "ferry",
    printcolumn = r#"{"name":"Succeeded","type":"string","jsonPath":".status.conditions[?(@.type==\"PlacementSatisfied\")].status"}"#,
    printcolumn = r#"{"name":"Reason","type":"string","jsonPath":".status.conditions[?(@.type==\"PlacementSatisfied\")].reason"}"#,
    printcolumn = r#"{"name":"SelectedClusters","type":"integer","jsonPath":".status.numberOfSelectedClusters"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct PlacementSpec {
    /// The ManagedClusterSets to choose from, each of which must be bound
    /// to the placement's namespace; empty chooses from every bound set.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_sets: Vec<String>,
    /// How many clusters to choose; absent chooses every cluster that
    /// passes the predicates and tolerations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub number_of_clusters: Option<i32>,
    /// A cluster is chosen when any predicate selects it; none selects all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub predicates: Vec<ClusterPredicate>,
    /// How clusters are ranked when `numberOfClusters` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prioritizer_policy: Option<PrioritizerPolicy>,
    /// Taints of clusters this placement tolerates.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// How the chosen clusters are split into decision groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision_strategy: Option<DecisionStrategy>,
}

/// One predicate.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterPredicate {
    /// The selectors a cluster must match.
    #[serde(default)]
    pub required_cluster_selector: ClusterSelector,
}

/// Selects clusters by labels and claims (both must match).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSelector {
    /// Matches the ManagedCluster's labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    /// Matches the ManagedCluster's claims (`status.clusterClaims`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_selector: Option<ClaimSelector>,
}

/// A Kubernetes label selector (`metav1.LabelSelector`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    /// Labels that must be present with these values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub match_labels: BTreeMap<String, String>,
    /// Requirements that must all hold.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<SelectorRequirement>,
}

/// Selects by claims, which have no equality shorthand in OCM.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClaimSelector {
    /// Requirements on claim names and values that must all hold.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<SelectorRequirement>,
}

/// One requirement (`metav1.LabelSelectorRequirement`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SelectorRequirement {
    /// Label (or claim) key.
    pub key: String,
    /// `In`, `NotIn`, `Exists` or `DoesNotExist`.
    pub operator: String,
    /// Values for `In` and `NotIn`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<String>>,
}

/// How clusters are ranked.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PrioritizerPolicy {
    /// `Additive` (default: Steady and Balance with weight 1, plus the
    /// configurations) or `Exact` (only the configurations).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mode: String,
    /// Prioritizers and their weights.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub configurations: Vec<PrioritizerConfig>,
}

/// One prioritizer with its weight.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PrioritizerConfig {
    /// Which prioritizer.
    pub score_coordinate: ScoreCoordinate,
    /// Weight, -10 to 10 (default 1).
    #[serde(default = "default_weight")]
    #[schemars(range(min = -10, max = 10))]
    pub weight: i32,
}

fn default_weight() -> i32 {
    1
}

/// Names a prioritizer.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScoreCoordinate {
    /// `BuiltIn` (ferry serves no `AddOn` scores).
    #[serde(rename = "type", default)]
    pub type_: String,
    /// `Steady` or `Balance`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub built_in: String,
}

/// A toleration of cluster taints.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Toleration {
    /// Taint key; empty with `Exists` tolerates every taint.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub key: String,
    /// `Equal` (default) or `Exists`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub operator: String,
    /// Taint value matched by `Equal`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
    /// Taint effect matched; empty matches all.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub effect: String,
    /// How long after the taint was added it is still tolerated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toleration_seconds: Option<i64>,
}

/// How decisions are grouped.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DecisionStrategy {
    /// The groups.
    #[serde(default)]
    pub group_strategy: GroupStrategy,
}

/// Named groups first, then the rest split by size.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GroupStrategy {
    /// Named groups; a cluster goes to the first whose selector matches it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decision_groups: Vec<DecisionGroupSpec>,
    /// Largest group, as a count or a percentage of the chosen clusters
    /// (default 100%).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "clusters_per_group_schema")]
    pub clusters_per_decision_group: Option<serde_json::Value>,
}

/// One named decision group.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DecisionGroupSpec {
    /// The group's name.
    pub group_name: String,
    /// Which chosen clusters belong to it.
    #[serde(default)]
    pub group_cluster_selector: ClusterSelector,
}

/// The schema of a Kubernetes IntOrString.
pub fn int_or_string_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "x-kubernetes-int-or-string": true })
}

/// Schema of an int-or-string `field` that must be a count of at least 1
/// or a percentage from 1% to 100%, checked by a CEL rule naming `field`.
pub fn positive_count_schema(field: &str) -> Schema {
    json_schema!({
        "x-kubernetes-int-or-string": true,
        // Bounds the cost the API server estimates for the rule.
        "maxLength": 16,
        "x-kubernetes-validations": [{
            "rule": "type(self) == int ? self >= 1 : self.matches('^([1-9][0-9]*|([1-9][0-9]?|100)%)$')",
            "message": format!("{field} must be a count of at least 1 or a percentage from 1% to 100%"),
            "reason": "FieldValueInvalid"
        }]
    })
}

fn clusters_per_group_schema(_: &mut SchemaGenerator) -> Schema {
    positive_count_schema("clustersPerDecisionGroup")
}

/// What the placement chose.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlacementStatus {
    /// How many clusters were chosen.
    #[serde(default)]
    pub number_of_selected_clusters: i32,
    /// The decision groups.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decision_groups: Vec<DecisionGroupStatus>,
    /// `PlacementSatisfied` and `PlacementMisconfigured`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// One decision group as written.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DecisionGroupStatus {
    /// Index of the group, from 0.
    pub decision_group_index: i32,
    /// Name of the group (empty for clusters of no named group).
    #[serde(default)]
    pub decision_group_name: String,
    /// Names of the PlacementDecisions holding the group.
    #[serde(default)]
    pub decisions: Vec<String>,
    /// How many clusters the group holds.
    #[serde(default)]
    pub clusters_count: i32,
}

/// Up to 100 clusters a Placement chose.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "cluster.ferry.dev",
    version = "v1alpha1",
    kind = "PlacementDecision",
    namespaced,
    doc = "Up to 100 clusters a Placement chose, written by the hub (labels cluster.ferry.dev/placement, decision-group-index, decision-group-name).",
    status = "PlacementDecisionStatus",
    category = "ferry"
)]
pub struct PlacementDecisionSpec {}

impl PlacementDecision {
    /// The decision group this object holds, from its labels: index and
    /// name (index 0 and no name when a label is missing or unreadable, as
    /// OCM reads them).
    pub fn decision_group(&self) -> (usize, String) {
        let labels = self.metadata.labels.as_ref();
        let label = |key: &str| labels.and_then(|l| l.get(key));
        let index = label(crate::contract::DECISION_GROUP_INDEX_LABEL)
            .and_then(|i| i.parse().ok())
            .unwrap_or(0);
        let name = label(crate::contract::DECISION_GROUP_NAME_LABEL)
            .cloned()
            .unwrap_or_default();
        (index, name)
    }

    /// The names of the clusters this object holds (none before its status
    /// is written).
    pub fn cluster_names(&self) -> impl Iterator<Item = &str> {
        self.status
            .iter()
            .flat_map(|s| s.decisions.iter())
            .map(|d| d.cluster_name.as_str())
    }
}

/// The decisions.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct PlacementDecisionStatus {
    /// One per chosen cluster, sorted by cluster name.
    #[serde(default)]
    pub decisions: Vec<ClusterDecision>,
}

/// One chosen cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterDecision {
    /// The cluster's name.
    pub cluster_name: String,
    /// Why it was chosen (empty: it passed the predicates).
    #[serde(default)]
    pub reason: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_decision_names_its_group_and_clusters_and_unlabelled_means_group_0() {
        let labelled: PlacementDecision = serde_json::from_value(json!({
            "metadata": {"name": "p-decision-2", "labels": {
                crate::contract::DECISION_GROUP_INDEX_LABEL: "1",
                crate::contract::DECISION_GROUP_NAME_LABEL: "canary"}},
            "spec": {},
            "status": {"decisions": [{"clusterName": "a"}, {"clusterName": "b"}]},
        }))
        .expect("decision");
        assert_eq!(labelled.decision_group(), (1, "canary".to_string()));
        assert_eq!(labelled.cluster_names().collect::<Vec<_>>(), ["a", "b"]);
        let bare: PlacementDecision = serde_json::from_value(json!({
            "metadata": {"name": "p-decision-1", "labels": {
                crate::contract::DECISION_GROUP_INDEX_LABEL: "not a number"}},
            "spec": {},
        }))
        .expect("decision");
        assert_eq!(bare.decision_group(), (0, String::new()));
        assert_eq!(bare.cluster_names().count(), 0);
    }
}
