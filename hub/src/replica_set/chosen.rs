//! Reconcile phase 1: the clusters a replica set's placements chose, read
//! from their PlacementDecisions, and whether that view can be trusted to
//! delete works: a missing Placement stops the reconcile (OCM's
//! `PlacementVerified=False`), and a placement whose decisions are not all
//! in the cache yet holds deletions.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use kube::{Resource, ResourceExt};

use ferry_api::contract::PLACEMENT_LABEL;
use ferry_api::placement::{DecisionGroupStatus, Placement, PlacementDecision};
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
    /// Each placement whose decision objects are being rewritten (by name,
    /// with why): its clusters may be missing from `wanted` or stand in the
    /// wrong group for a moment, so none of its works is written or
    /// deleted until the objects agree with its status again.
    pub unsettled: BTreeMap<String, String>,
}

impl Chosen {
    /// Whether a work of a cluster not in `wanted` may be deleted now.
    pub fn may_delete(&self) -> bool {
        self.missing.is_empty() && self.problems.is_empty() && self.unsettled.is_empty()
    }
}

impl Chosen {
    /// Marks unsettled each placement that chose a cluster `known` does not
    /// know (the hub's cluster cache has not seen it yet, or it is being
    /// deleted): its work cannot be rendered from the cluster's labels, and
    /// a failure read from that gap must neither halt nor roll back.
    pub fn unsettle_unknown(&mut self, known: impl Fn(&str) -> bool) {
        for (cluster, placement) in &self.wanted {
            if !known(cluster) && !self.unsettled.contains_key(placement) {
                self.unsettled.insert(
                    placement.clone(),
                    format!(
                        "decided cluster {cluster} is not in the hub's ManagedCluster cache yet"
                    ),
                );
            }
        }
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
        let groups = placement
            .and_then(|p| p.status.as_ref())
            .map(|s| s.decision_groups.as_slice())
            .unwrap_or_default();
        // The placement controller writes the placement's status after
        // every decision object: before that (a placement made again), the
        // objects may not hold their clusters yet.
        if groups.is_empty() {
            let why = format!("placement {} has not been scheduled yet", reference.name);
            chosen.unsettled.insert(reference.name.clone(), why);
        } else if own.is_empty() {
            chosen.problems.push(format!(
                "placement {} has no PlacementDecisions",
                reference.name
            ));
        } else if let Some(why) = unsettled_because(&reference.name, groups, &own) {
            chosen.unsettled.insert(reference.name.clone(), why);
        }
        for decision in own {
            let (index, name) = decision.decision_group();
            for cluster in decision.cluster_names() {
                // The first placement (in spec order) choosing a cluster
                // is its placement. Mid-rewrite a cluster may sit in two
                // groups' objects of it: the later group is the one that
                // holds it back more.
                let placed = chosen
                    .wanted
                    .entry(cluster.to_string())
                    .or_insert_with(|| reference.name.clone());
                if *placed != reference.name {
                    continue;
                }
                let later = chosen
                    .group_of
                    .get(cluster)
                    .is_none_or(|(seen, _)| *seen < index);
                if later {
                    chosen
                        .group_of
                        .insert(cluster.to_string(), (index, name.clone()));
                }
            }
        }
    }
    chosen
}

/// Why the decision objects `own` of placement `placement` cannot be read
/// as one consistent choice yet, judged against the `groups` its status
/// lists (written after every object). The placement controller rewrites
/// an object's group labels and its clusters in two writes, and first adds
/// moving clusters before removing them: in between, a cluster of a later
/// group can sit in an object labelled as an earlier group, which a gate
/// after that group would let through. So an object the status does not
/// list under the group its labels name, an object the status lists but
/// the cache lacks, or a group whose objects hold another number of
/// clusters than the status counts, means "being rewritten". `groups` is
/// not empty (an unscheduled placement is unsettled already).
fn unsettled_because(
    placement: &str,
    groups: &[DecisionGroupStatus],
    own: &[&Arc<PlacementDecision>],
) -> Option<String> {
    let listed: BTreeMap<&str, (usize, &str)> = groups
        .iter()
        .flat_map(|g| {
            let index = usize::try_from(g.decision_group_index).unwrap_or(usize::MAX);
            g.decisions
                .iter()
                .map(move |d| (d.as_str(), (index, g.decision_group_name.as_str())))
        })
        .collect();
    let present: BTreeSet<String> = own.iter().map(|d| d.name_any()).collect();
    if let Some(absent) = listed.keys().find(|name| !present.contains(**name)) {
        return Some(format!(
            "placement {placement}: PlacementDecision {absent} is not seen yet"
        ));
    }
    for decision in own {
        let object = decision.name_any();
        let (index, name) = decision.decision_group();
        match listed.get(object.as_str()) {
            None => {
                return Some(format!(
                    "placement {placement}: PlacementDecision {object} is not in the placement's status yet"
                ));
            }
            Some((i, n)) if (*i, *n) != (index, name.as_str()) => {
                return Some(format!(
                    "placement {placement}: PlacementDecision {object} is moving to decision group {i}"
                ));
            }
            Some(_) => {}
        }
    }
    for group in groups {
        let held: BTreeSet<&str> = own
            .iter()
            .filter(|d| group.decisions.contains(&d.name_any()))
            .flat_map(|d| d.cluster_names())
            .collect();
        if i32::try_from(held.len()).ok() != Some(group.clusters_count) {
            return Some(format!(
                "placement {placement}: decision group {} holds {} clusters, its status counts {}",
                group.decision_group_index,
                held.len(),
                group.clusters_count
            ));
        }
    }
    None
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use ferry_api::contract::{DECISION_GROUP_INDEX_LABEL, DECISION_GROUP_NAME_LABEL};
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

    /// A placement whose status lists `groups`: (index, name, objects,
    /// clusters count).
    pub(crate) fn placement(groups: &[(i32, &str, &[&str], i32)]) -> Arc<Placement> {
        let groups: Vec<_> = groups
            .iter()
            .map(|(index, name, objects, count)| {
                json!({"decisionGroupIndex": index, "decisionGroupName": name,
                    "decisions": objects, "clustersCount": count})
            })
            .collect();
        Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "cluster.ferry.dev/v1alpha1",
                "kind": "Placement",
                "metadata": {"name": "p", "namespace": "ns"},
                "spec": {},
                "status": {"decisionGroups": groups},
            }))
            .expect("placement"),
        )
    }

    /// Decision object `name` labelled as group (`index`, `group`).
    pub(crate) fn decision(
        name: &str,
        index: usize,
        group: &str,
        clusters: &[&str],
    ) -> Arc<PlacementDecision> {
        let decisions: Vec<_> = clusters
            .iter()
            .map(|c| json!({"clusterName": c, "reason": ""}))
            .collect();
        Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "cluster.ferry.dev/v1alpha1",
                "kind": "PlacementDecision",
                "metadata": {"name": name, "namespace": "ns", "labels": {
                    PLACEMENT_LABEL: "p",
                    DECISION_GROUP_INDEX_LABEL: index.to_string(),
                    DECISION_GROUP_NAME_LABEL: group}},
                "spec": {},
                "status": {"decisions": decisions},
            }))
            .expect("decision"),
        )
    }

    /// The canary group (one cluster) and the rest (two), settled.
    fn canary_and_rest() -> Arc<Placement> {
        placement(&[
            (0, "canary", &["p-decision-1"], 1),
            (1, "", &["p-decision-2"], 2),
        ])
    }

    #[test]
    fn a_missing_placement_allows_no_deletion() {
        let chosen = chosen_by_decisions(&rs(), &[], &[decision("p-decision-1", 0, "", &["a"])]);
        assert_eq!(chosen.missing, vec!["p".to_string()]);
        assert!(!chosen.may_delete());
    }

    #[test]
    fn a_decision_the_status_names_but_the_cache_lacks_holds_deletions() {
        let placement = placement(&[(0, "", &["p-decision-1", "p-decision-2"], 2)]);
        let chosen = chosen_by_decisions(
            &rs(),
            std::slice::from_ref(&placement),
            &[decision("p-decision-1", 0, "", &["a"])],
        );
        assert!(!chosen.may_delete(), "{:?}", chosen.unsettled);
        let chosen = chosen_by_decisions(
            &rs(),
            std::slice::from_ref(&placement),
            &[
                decision("p-decision-1", 0, "", &["a"]),
                decision("p-decision-2", 0, "", &["b"]),
            ],
        );
        assert!(chosen.may_delete(), "{:?}", chosen.unsettled);
        let unscheduled = Arc::new(Placement {
            status: None,
            ..(*placement).clone()
        });
        let chosen2 = chosen_by_decisions(
            &rs(),
            &[unscheduled],
            &[decision("p-decision-1", 0, "", &[])],
        );
        assert!(!chosen2.may_delete(), "a placement made again");
        assert_eq!(chosen.wanted.keys().collect::<Vec<_>>(), ["a", "b"]);
    }

    #[test]
    fn settled_decisions_put_each_cluster_in_its_group() {
        let chosen = chosen_by_decisions(
            &rs(),
            &[canary_and_rest()],
            &[
                decision("p-decision-1", 0, "canary", &["c0"]),
                decision("p-decision-2", 1, "", &["c1", "c2"]),
            ],
        );
        assert!(chosen.unsettled.is_empty(), "{:?}", chosen.unsettled);
        assert_eq!(chosen.group_of["c0"], (0, "canary".to_string()));
        assert_eq!(chosen.group_of["c1"], (1, String::new()));
    }

    #[test]
    fn an_object_relabelled_to_an_earlier_group_before_its_clusters_change_is_unsettled() {
        // The canary group was empty: the rest stood in object 1 as group
        // 0. The canary returns: object 1's labels say canary while it
        // still holds the rest (the two are separate writes).
        let chosen = chosen_by_decisions(
            &rs(),
            &[placement(&[(0, "", &["p-decision-1"], 2)])],
            &[decision("p-decision-1", 0, "canary", &["c1", "c2"])],
        );
        assert!(
            chosen.unsettled["p"].contains("moving"),
            "{:?}",
            chosen.unsettled
        );
        assert!(!chosen.may_delete());
        // The new status already, the object's clusters not yet rewritten.
        let chosen = chosen_by_decisions(
            &rs(),
            &[canary_and_rest()],
            &[
                decision("p-decision-1", 0, "canary", &["c1", "c2"]),
                decision("p-decision-2", 1, "", &["c1", "c2"]),
            ],
        );
        assert!(
            chosen.unsettled["p"].contains("counts 1"),
            "{:?}",
            chosen.unsettled
        );
    }

    #[test]
    fn a_bridge_write_is_unsettled_and_its_cluster_stands_in_the_later_group() {
        // c1 moves into the canary group: it is added there before it is
        // removed from the rest.
        let chosen = chosen_by_decisions(
            &rs(),
            &[canary_and_rest()],
            &[
                decision("p-decision-1", 0, "canary", &["c0", "c1"]),
                decision("p-decision-2", 1, "", &["c1", "c2"]),
            ],
        );
        assert!(chosen.unsettled.contains_key("p"));
        assert_eq!(chosen.group_of["c1"], (1, String::new()));
        // The same whichever object is read first.
        let chosen = chosen_by_decisions(
            &rs(),
            &[canary_and_rest()],
            &[
                decision("p-decision-2", 1, "", &["c1", "c2"]),
                decision("p-decision-1", 0, "canary", &["c0", "c1"]),
            ],
        );
        assert_eq!(chosen.group_of["c1"], (1, String::new()));
    }

    #[test]
    fn an_object_the_status_does_not_list_is_unsettled_until_it_is_deleted() {
        let chosen = chosen_by_decisions(
            &rs(),
            &[placement(&[(0, "", &["p-decision-1"], 1)])],
            &[
                decision("p-decision-1", 0, "", &["c0"]),
                decision("p-decision-2", 1, "", &["c1"]),
            ],
        );
        assert!(
            chosen.unsettled["p"].contains("not in the placement's status"),
            "{:?}",
            chosen.unsettled
        );
    }

    #[test]
    fn a_decided_cluster_the_cache_lacks_unsettles_its_placement_only() {
        let mut chosen = Chosen::default();
        chosen.wanted.insert("known".into(), "p".into());
        chosen.wanted.insert("new".into(), "q".into());
        chosen.unsettle_unknown(|c| c == "known");
        assert_eq!(chosen.unsettled.keys().collect::<Vec<_>>(), ["q"]);
        assert!(chosen.unsettled["q"].contains("decided cluster new"));
        assert!(!chosen.may_delete(), "nothing is deleted meanwhile");
        // A reason already given stays.
        let mut moving = Chosen::default();
        moving.wanted.insert("new".into(), "q".into());
        moving.unsettled.insert("q".into(), "moving".into());
        moving.unsettle_unknown(|_| false);
        assert_eq!(moving.unsettled["q"], "moving");
    }
}
