//! The `ManagedClusterSet` and `ManagedClusterSetBinding` custom resources
//! (`cluster.ferry.dev/v1alpha1`), field-compatible with OCM's
//! `cluster.open-cluster-management.io/v1beta2`: a set groups clusters, and
//! a binding makes a set's clusters available to the Placements of the
//! binding's namespace.

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::manifest_work::Condition;
use crate::placement::LabelSelector;

/// A named group of ManagedClusters, chosen by the exclusive set label or by
/// a label selector.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "cluster.ferry.dev",
    version = "v1alpha1",
    kind = "ManagedClusterSet",
    doc = "A named group of ManagedClusters (OCM's ManagedClusterSet v1beta2): the clusters labelled cluster.ferry.dev/clusterset=<name> (ExclusiveClusterSetLabel, the default) or those a label selector matches (LabelSelector). Placements reach a set's clusters only from namespaces that hold a ManagedClusterSetBinding to it.",
    status = "ManagedClusterSetStatus",
    shortname = "mclset",
    category = "ferry",
    printcolumn = r#"{"name":"Selector","type":"string","jsonPath":".spec.clusterSelector.selectorType"}"#,
    printcolumn = r#"{"name":"Clusters","type":"integer","jsonPath":".status.clusterCount"}"#,
    printcolumn = r#"{"name":"Empty","type":"string","jsonPath":".status.conditions[?(@.type==\"ClusterSetEmpty\")].status"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ManagedClusterSetSpec {
    /// Which clusters belong to the set.
    #[serde(default)]
    pub cluster_selector: ManagedClusterSelector,
}

/// How a set chooses its clusters.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManagedClusterSelector {
    /// `ExclusiveClusterSetLabel` (default: the clusters labelled
    /// `cluster.ferry.dev/clusterset=<set name>`) or `LabelSelector`.
    #[serde(default)]
    pub selector_type: SelectorType,
    /// With `LabelSelector`: the clusters whose labels it matches (`{}`
    /// matches every cluster).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
}

/// The two ways a set chooses its clusters.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum SelectorType {
    /// Membership by the label `cluster.ferry.dev/clusterset=<set name>`; a
    /// cluster is in at most one such set.
    #[default]
    ExclusiveClusterSetLabel,
    /// Membership by a label selector; sets may overlap.
    LabelSelector,
}

/// What the hub observed of a set.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManagedClusterSetStatus {
    /// How many ManagedClusters belong to the set (ferry addition).
    #[serde(default)]
    pub cluster_count: i32,
    /// `ClusterSetEmpty` (OCM's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// Makes a ManagedClusterSet available to the Placements of its namespace.
/// The API server refuses one whose name is not its set's (OCM's webhook
/// rule, here a CEL rule on the root so it holds without a hub process).
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "cluster.ferry.dev",
    version = "v1alpha1",
    kind = "ManagedClusterSetBinding",
    namespaced,
    doc = "Makes a ManagedClusterSet available to the Placements of this namespace (OCM's ManagedClusterSetBinding v1beta2). Its name must equal spec.clusterSet; creating or changing one needs create on managedclustersets/bind for that set.",
    status = "ManagedClusterSetBindingStatus",
    shortname = "mclsetbinding",
    category = "ferry",
    printcolumn = r#"{"name":"ClusterSet","type":"string","jsonPath":".spec.clusterSet"}"#,
    printcolumn = r#"{"name":"Bound","type":"string","jsonPath":".status.conditions[?(@.type==\"Bound\")].status"}"#,
    validation = Rule::new("self.metadata.name == self.spec.clusterSet")
        .message("the binding's name must equal spec.clusterSet")
        .reason(Reason::FieldValueInvalid)
)]
#[serde(rename_all = "camelCase")]
pub struct ManagedClusterSetBindingSpec {
    /// The name of the ManagedClusterSet bound into this namespace.
    pub cluster_set: String,
}

/// What the hub observed of a binding.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManagedClusterSetBindingStatus {
    /// `Bound` (OCM's): True when the set exists.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}
