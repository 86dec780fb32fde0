//! The vendor-neutral PlacementDecisions (SIG Multicluster KEP-5313,
//! `multicluster.x-k8s.io/v1alpha1`, the CRD of
//! `sigs.k8s.io/cluster-inventory-api` v0.1.0) a Placement should have: a
//! pure function of the Placement and ferry's own PlacementDecisions, which
//! stay the record of what the placement chose. Each of ferry's decision
//! objects (at most 100 clusters) has one upstream slice of the same name
//! in the same namespace, holding the same clusters in the same order as
//! references to their ClusterProfiles. No IO here; [`super::controller`]
//! applies it.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::ResourceExt;
use kube::api::ObjectMeta;
use kube::core::{NamespaceResourceScope, Resource};
use serde::{Deserialize, Serialize};

use ferry_api::contract::PLACEMENT_LABEL;
use ferry_api::placement::{Placement, PlacementDecision};

/// The upstream label every slice of one decision carries, with the same
/// value (`DecisionKeyLabel`): ferry writes the placement's name.
pub const DECISION_KEY_LABEL: &str = "multicluster.x-k8s.io/decision-key";
/// The upstream label giving a slice's position when order matters
/// (`DecisionIndexLabel`): 0, 1, … in the order of the placement's
/// decision groups.
pub const DECISION_INDEX_LABEL: &str = "multicluster.x-k8s.io/decision-index";
/// `schedulerName` of every slice ferry writes; with [`PLACEMENT_LABEL`]
/// it tells ferry's slices from others'.
pub const SCHEDULER_NAME: &str = "ferry";
/// The most clusters one upstream slice may hold (the schema's maxItems);
/// ferry's own decision objects hold no more.
pub const MAX_DECISIONS: usize = 100;

/// `multicluster.x-k8s.io/v1alpha1` PlacementDecision: the clusters a
/// scheduler chose, at most [`MAX_DECISIONS`] per object. Only the fields
/// ferry writes and reads.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct InventoryPlacementDecision {
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The chosen clusters.
    #[serde(default)]
    pub decisions: Vec<ClusterDecision>,
    /// Who wrote it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub scheduler_name: String,
}

/// One chosen cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ClusterDecision {
    /// The cluster's ClusterProfile.
    pub cluster_profile_ref: ClusterProfileReference,
    /// Why it was chosen; ferry leaves it empty.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
}

/// Where a ClusterProfile is.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterProfileReference {
    /// The profile's name: the cluster's.
    pub name: String,
    /// The profile's namespace (the hub's ClusterProfile namespace).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
}

impl Resource for InventoryPlacementDecision {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> std::borrow::Cow<'_, str> {
        "PlacementDecision".into()
    }
    fn group(_: &()) -> std::borrow::Cow<'_, str> {
        "multicluster.x-k8s.io".into()
    }
    fn version(_: &()) -> std::borrow::Cow<'_, str> {
        "v1alpha1".into()
    }
    fn plural(_: &()) -> std::borrow::Cow<'_, str> {
        "placementdecisions".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// One slice ferry wants for a placement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DesiredSlice {
    /// Its name: that of ferry's decision object it mirrors.
    pub name: String,
    /// Its labels: [`PLACEMENT_LABEL`], [`DECISION_KEY_LABEL`] and
    /// [`DECISION_INDEX_LABEL`].
    pub labels: BTreeMap<String, String>,
    /// The clusters, as profile references, in ferry's order.
    pub decisions: Vec<ClusterDecision>,
}

/// Whether `slice` is ferry's: written by ferry's scheduler for a placement.
pub fn is_ferrys(slice: &InventoryPlacementDecision) -> bool {
    slice.scheduler_name == SCHEDULER_NAME && slice.labels().contains_key(PLACEMENT_LABEL)
}

/// The slices `placement` should have, from ferry's decision objects of it
/// in `decisions` (any others there are ignored), with profile references
/// into `profile_namespace`. Ordered as the placement's status lists its
/// decision objects; objects the status does not list yet follow by name.
/// A decision object whose status is not written yet mirrors as empty.
/// Never fails; more than [`MAX_DECISIONS`] clusters in one object (not
/// written by ferry) are cut to the first [`MAX_DECISIONS`].
pub fn render(
    placement: &Placement,
    decisions: &[Arc<PlacementDecision>],
    profile_namespace: &str,
) -> Vec<DesiredSlice> {
    let namespace = placement.namespace().unwrap_or_default();
    let name = placement.name_any();
    let mut own: BTreeMap<String, &PlacementDecision> = decisions
        .iter()
        .filter(|d| {
            d.namespace().as_deref() == Some(namespace.as_str())
                && d.labels().get(PLACEMENT_LABEL) == Some(&name)
        })
        .map(|d| (d.name_any(), d.as_ref()))
        .collect();
    let listed: Vec<String> = placement
        .status
        .iter()
        .flat_map(|s| s.decision_groups.iter())
        .flat_map(|g| g.decisions.iter().cloned())
        .collect();
    let mut ordered: Vec<&PlacementDecision> = Vec::new();
    for object in &listed {
        if let Some(d) = own.remove(object) {
            ordered.push(d);
        }
    }
    ordered.extend(own.into_values());
    ordered
        .into_iter()
        .enumerate()
        .map(|(index, d)| DesiredSlice {
            name: d.name_any(),
            labels: BTreeMap::from([
                (PLACEMENT_LABEL.to_string(), name.clone()),
                (DECISION_KEY_LABEL.to_string(), name.clone()),
                (DECISION_INDEX_LABEL.to_string(), index.to_string()),
            ]),
            decisions: d
                .cluster_names()
                .take(MAX_DECISIONS)
                .map(|cluster| ClusterDecision {
                    cluster_profile_ref: ClusterProfileReference {
                        name: cluster.to_string(),
                        namespace: profile_namespace.to_string(),
                    },
                    reason: String::new(),
                })
                .collect(),
        })
        .collect()
}

/// Whether `live` (None: absent) differs from `desired` in what ferry
/// writes: its labels, decisions or scheduler name.
pub fn differs(desired: &DesiredSlice, live: Option<&InventoryPlacementDecision>) -> bool {
    let Some(live) = live else {
        return true;
    };
    live.scheduler_name != SCHEDULER_NAME
        || live.decisions != desired.decisions
        || desired
            .labels
            .iter()
            .any(|(k, v)| live.labels().get(k) != Some(v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_api::placement::{
        ClusterDecision as FerryDecision, DecisionGroupStatus, PlacementDecisionStatus,
        PlacementStatus,
    };

    fn placement(listed: &[&str]) -> Placement {
        let mut p: Placement = serde_json::from_value(serde_json::json!({
            "apiVersion": "cluster.ferry.dev/v1alpha1",
            "kind": "Placement",
            "metadata": {"name": "web", "namespace": "team-a"},
            "spec": {},
        }))
        .expect("placement");
        p.status = Some(PlacementStatus {
            decision_groups: vec![DecisionGroupStatus {
                decisions: listed.iter().map(|s| s.to_string()).collect(),
                ..DecisionGroupStatus::default()
            }],
            ..PlacementStatus::default()
        });
        p
    }

    fn decision(
        name: &str,
        namespace: &str,
        of: &str,
        clusters: &[&str],
    ) -> Arc<PlacementDecision> {
        let mut d: PlacementDecision = serde_json::from_value(serde_json::json!({
            "apiVersion": "cluster.ferry.dev/v1alpha1",
            "kind": "PlacementDecision",
            "metadata": {"name": name, "namespace": namespace, "labels": {PLACEMENT_LABEL: of}},
            "spec": {},
        }))
        .expect("decision");
        d.status = Some(PlacementDecisionStatus {
            decisions: clusters
                .iter()
                .map(|c| FerryDecision {
                    cluster_name: c.to_string(),
                    ..FerryDecision::default()
                })
                .collect(),
        });
        Arc::new(d)
    }

    fn names(slices: &[DesiredSlice]) -> Vec<(&str, &str, Vec<&str>)> {
        slices
            .iter()
            .map(|s| {
                (
                    s.name.as_str(),
                    s.labels[DECISION_INDEX_LABEL].as_str(),
                    s.decisions
                        .iter()
                        .map(|d| d.cluster_profile_ref.name.as_str())
                        .collect(),
                )
            })
            .collect()
    }

    #[test]
    fn each_decision_object_mirrors_in_the_placements_order_with_profile_refs() {
        let decisions = vec![
            decision("web-decision-1", "team-a", "web", &["b", "a"]),
            decision("web-decision-2", "team-a", "web", &["c"]),
            // Another placement's, and another namespace's: not mirrored.
            decision("api-decision-1", "team-a", "api", &["x"]),
            decision("web-decision-1", "team-b", "web", &["y"]),
        ];
        let slices = render(
            &placement(&["web-decision-2", "web-decision-1"]),
            &decisions,
            "inventory",
        );
        assert_eq!(
            names(&slices),
            [
                ("web-decision-2", "0", vec!["c"]),
                ("web-decision-1", "1", vec!["b", "a"]),
            ]
        );
        assert!(
            slices.iter().all(
                |s| s.labels[DECISION_KEY_LABEL] == "web" && s.labels[PLACEMENT_LABEL] == "web"
            )
        );
        assert!(
            slices
                .iter()
                .flat_map(|s| &s.decisions)
                .all(|d| d.cluster_profile_ref.namespace == "inventory")
        );
    }

    #[test]
    fn objects_the_status_does_not_list_yet_follow_by_name_and_an_empty_one_mirrors_empty() {
        let decisions = vec![
            decision("web-decision-3", "team-a", "web", &[]),
            decision("web-decision-1", "team-a", "web", &["a"]),
            decision("web-decision-2", "team-a", "web", &["b"]),
        ];
        let slices = render(&placement(&["web-decision-2"]), &decisions, "inv");
        assert_eq!(
            names(&slices),
            [
                ("web-decision-2", "0", vec!["b"]),
                ("web-decision-1", "1", vec!["a"]),
                ("web-decision-3", "2", vec![]),
            ]
        );
    }

    #[test]
    fn an_oversized_object_is_cut_to_the_schemas_limit() {
        let many: Vec<String> = (0..150).map(|i| format!("c{i}")).collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        let slices = render(
            &placement(&[]),
            &[decision("web-decision-1", "team-a", "web", &refs)],
            "inv",
        );
        assert_eq!(slices[0].decisions.len(), MAX_DECISIONS);
    }

    #[test]
    fn a_slice_differs_when_ferrys_part_does() {
        let desired = render(
            &placement(&[]),
            &[decision("web-decision-1", "team-a", "web", &["a"])],
            "inv",
        )
        .remove(0);
        let mut live = InventoryPlacementDecision {
            metadata: ObjectMeta {
                name: Some(desired.name.clone()),
                labels: Some(desired.labels.clone()),
                ..ObjectMeta::default()
            },
            decisions: desired.decisions.clone(),
            scheduler_name: SCHEDULER_NAME.into(),
        };
        assert!(!differs(&desired, Some(&live)));
        assert!(is_ferrys(&live));
        live.metadata
            .labels
            .get_or_insert_default()
            .insert("someone/else".into(), "x".into());
        assert!(!differs(&desired, Some(&live)), "others' labels are theirs");
        live.decisions.clear();
        assert!(differs(&desired, Some(&live)));
        assert!(differs(&desired, None));
        live.decisions = desired.decisions.clone();
        live.scheduler_name = "other".into();
        assert!(differs(&desired, Some(&live)));
        assert!(!is_ferrys(&live));
    }
}
