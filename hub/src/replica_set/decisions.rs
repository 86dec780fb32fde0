//! Reconcile phase 1: the clusters a replica set's placements chose, read
//! from their PlacementDecisions, and whether that view can be trusted to
//! delete works: a missing Placement stops the reconcile (OCM's
//! `PlacementVerified=False`), and a placement whose decisions are not all
//! in the cache yet holds deletions.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use kube::{Resource, ResourceExt};

use ferry_api::contract::{DECISION_GROUP_INDEX_LABEL, DECISION_GROUP_NAME_LABEL, PLACEMENT_LABEL};
use ferry_api::placement::{Placement, PlacementDecision};
use ferry_api::replica_set::ManifestWorkReplicaSet;

/// The clusters chosen for a replica set.
#[derive(Debug, Default)]
pub struct Chosen {
    /// Each chosen cluster, with the first placement (in spec order)
    /// choosing it.
    pub wanted: BTreeMap<String, String>,
    /// Each chosen cluster's decision group in that placement: its index
    /// and name.
    pub group_of: BTreeMap<String, (usize, String)>,
    /// Each referenced placement that does not exist or is being deleted:
    /// while one is listed nothing is written or deleted (OCM stops too).
    pub missing: Vec<String>,
    /// Each placement that has no PlacementDecisions, and why: reported
    /// in `PlacementVerified`.
    pub problems: Vec<String>,
    /// Each placement with a decision object its status names but the
    /// cache lacks (being rewritten): its clusters may be missing from
    /// `wanted` for a moment.
    pub unsettled: Vec<String>,
}

impl Chosen {
    /// Whether a work of a cluster not in `wanted` may be deleted now.
    pub fn may_delete(&self) -> bool {
        self.missing.is_empty() && self.problems.is_empty() && self.unsettled.is_empty()
    }
}

/// The clusters the placements of `rs` chose, by `decisions` (of every
/// namespace; those of `rs`'s namespace count), checked against the
/// `placements` (of every namespace).
pub fn chosen_by_decisions(
    rs: &ManifestWorkReplicaSet,
    placements: &[Arc<Placement>],
    decisions: &[Arc<PlacementDecision>],
) -> Chosen {
    let namespace = rs.namespace().unwrap_or_default();
    let mut chosen = Chosen::default();
    for reference in &rs.spec.placement_refs {
        let placement = placements.iter().find(|p| {
            p.namespace().as_deref() == Some(namespace.as_str()) && p.name_any() == reference.name
        });
        match placement {
            None => {
                chosen.missing.push(reference.name.clone());
                continue;
            }
            Some(p) if p.meta().deletion_timestamp.is_some() => {
                chosen.missing.push(reference.name.clone());
                continue;
            }
            Some(_) => {}
        }
        let own: Vec<&Arc<PlacementDecision>> = decisions
            .iter()
            .filter(|d| {
                d.namespace().as_deref() == Some(namespace.as_str())
                    && d.labels().get(PLACEMENT_LABEL) == Some(&reference.name)
            })
            .collect();
        // The placement's status names the decision objects it wrote: one
        // the cache lacks is being written or was just replaced.
        let present: BTreeSet<String> = own.iter().map(|d| d.name_any()).collect();
        let absent: Vec<&String> = placement
            .and_then(|p| p.status.as_ref())
            .into_iter()
            .flat_map(|s| s.decision_groups.iter())
            .flat_map(|g| g.decisions.iter())
            .filter(|name| !present.contains(*name))
            .collect();
        // The placement controller writes the placement's status after
        // every decision object: before that (a placement made again), the
        // objects may not hold their clusters yet.
        let scheduled = placement
            .and_then(|p| p.status.as_ref())
            .is_some_and(|s| !s.decision_groups.is_empty());
        if !scheduled {
            chosen.unsettled.push(format!(
                "placement {} has not been scheduled yet",
                reference.name
            ));
        } else if own.is_empty() {
            chosen.problems.push(format!(
                "placement {} has no PlacementDecisions",
                reference.name
            ));
        } else if let Some(first) = absent.first() {
            chosen.unsettled.push(format!(
                "placement {}: PlacementDecision {first} is not seen yet",
                reference.name
            ));
        }
        for decision in own {
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
                if !chosen.wanted.contains_key(&d.cluster_name) {
                    chosen
                        .wanted
                        .insert(d.cluster_name.clone(), reference.name.clone());
                    chosen
                        .group_of
                        .insert(d.cluster_name.clone(), (index, name.clone()));
                }
            }
        }
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rs() -> ManifestWorkReplicaSet {
        serde_json::from_value(json!({
            "apiVersion": "work.ferry.dev/v1alpha1",
            "kind": "ManifestWorkReplicaSet",
            "metadata": {"name": "app", "namespace": "ns"},
            "spec": {"manifestWorkTemplate": {}, "placementRefs": [{"name": "p"}]},
        }))
        .expect("replica set")
    }

    fn placement(decisions: &[&str]) -> Arc<Placement> {
        Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "cluster.ferry.dev/v1alpha1",
                "kind": "Placement",
                "metadata": {"name": "p", "namespace": "ns"},
                "spec": {},
                "status": {"decisionGroups": [{"decisionGroupIndex": 0, "decisionGroupName": "",
                    "decisions": decisions, "clustersCount": 1}]},
            }))
            .expect("placement"),
        )
    }

    fn decision(name: &str, clusters: &[&str]) -> Arc<PlacementDecision> {
        let decisions: Vec<_> = clusters
            .iter()
            .map(|c| json!({"clusterName": c, "reason": ""}))
            .collect();
        Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "cluster.ferry.dev/v1alpha1",
                "kind": "PlacementDecision",
                "metadata": {"name": name, "namespace": "ns", "labels": {PLACEMENT_LABEL: "p"}},
                "spec": {},
                "status": {"decisions": decisions},
            }))
            .expect("decision"),
        )
    }

    #[test]
    fn a_missing_placement_allows_no_deletion() {
        let chosen = chosen_by_decisions(&rs(), &[], &[decision("p-decision-1", &["a"])]);
        assert_eq!(chosen.missing, vec!["p".to_string()]);
        assert!(!chosen.may_delete());
    }

    #[test]
    fn a_decision_the_status_names_but_the_cache_lacks_holds_deletions() {
        let placement = placement(&["p-decision-1", "p-decision-2"]);
        let chosen = chosen_by_decisions(
            &rs(),
            std::slice::from_ref(&placement),
            &[decision("p-decision-1", &["a"])],
        );
        assert!(!chosen.may_delete(), "{:?}", chosen.unsettled);
        let chosen = chosen_by_decisions(
            &rs(),
            std::slice::from_ref(&placement),
            &[
                decision("p-decision-1", &["a"]),
                decision("p-decision-2", &["b"]),
            ],
        );
        assert!(chosen.may_delete());
        let unscheduled = Arc::new(Placement {
            status: None,
            ..(*placement).clone()
        });
        let chosen2 = chosen_by_decisions(&rs(), &[unscheduled], &[decision("p-decision-1", &[])]);
        assert!(!chosen2.may_delete(), "a placement made again");
        assert_eq!(chosen.wanted.keys().collect::<Vec<_>>(), ["a", "b"]);
    }
}
