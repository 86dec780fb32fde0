//! Reconcile phase 1: the clusters a replica set's placements chose, read
//! from their PlacementDecisions.

use std::collections::BTreeMap;
use std::sync::Arc;

use kube::ResourceExt;

use ferry_api::contract::{DECISION_GROUP_INDEX_LABEL, DECISION_GROUP_NAME_LABEL, PLACEMENT_LABEL};
use ferry_api::placement::PlacementDecision;
use ferry_api::replica_set::ManifestWorkReplicaSet;

/// The clusters chosen for a replica set.
pub struct Chosen {
    /// Each chosen cluster, with the first placement (in spec order)
    /// choosing it.
    pub wanted: BTreeMap<String, String>,
    /// Each chosen cluster's decision group in that placement: its index
    /// and name.
    pub group_of: BTreeMap<String, (usize, String)>,
    /// What is wrong: each placement that has no PlacementDecisions.
    pub problems: Vec<String>,
}

/// The clusters the placements of `rs` chose, by `decisions` (of every
/// namespace; those of `rs`'s namespace count).
pub fn chosen_by_decisions(
    rs: &ManifestWorkReplicaSet,
    decisions: &[Arc<PlacementDecision>],
) -> Chosen {
    let namespace = rs.namespace().unwrap_or_default();
    // Each chosen cluster, with the first placement (in spec order)
    // choosing it and its decision group there.
    let mut wanted: BTreeMap<String, String> = BTreeMap::new();
    let mut group_of: BTreeMap<String, (usize, String)> = BTreeMap::new();
    let mut problems = Vec::new();
    for reference in &rs.spec.placement_refs {
        let mut found = false;
        for decision in decisions.iter().filter(|d| {
            d.namespace().as_deref() == Some(namespace.as_str())
                && d.labels().get(PLACEMENT_LABEL) == Some(&reference.name)
        }) {
            found = true;
            let index = decision
                .labels()
                .get(DECISION_GROUP_INDEX_LABEL)
                .and_then(|i| i.parse().ok())
                .unwrap_or(0);
            let name = decision
                .labels()
                .get(DECISION_GROUP_NAME_LABEL)
                .cloned()
                .unwrap_or_default();
            for d in decision.status.iter().flat_map(|s| s.decisions.iter()) {
                if !wanted.contains_key(&d.cluster_name) {
                    wanted.insert(d.cluster_name.clone(), reference.name.clone());
                    group_of.insert(d.cluster_name.clone(), (index, name.clone()));
                }
            }
        }
        if !found {
            problems.push(format!(
                "placement {} has no PlacementDecisions",
                reference.name
            ));
        }
    }
    Chosen {
        wanted,
        group_of,
        problems,
    }
}
