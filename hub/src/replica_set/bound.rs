//! Only clusters the namespace may use: at every reconcile, each cluster
//! the PlacementDecisions name is checked against the ManagedClusterSets
//! bound (ManagedClusterSetBinding) to the replica set's namespace. A
//! decision is data anyone with write access could have written; a cluster
//! outside the bound sets is refused: never written a work, and named in
//! the `ClustersRefused` condition. Its existing work (if any) is left as it
//! is here.

use ferry_api::manifest_work::Condition;
use ferry_fleet_semantics::cluster_sets::Eligible;
use k8s_openapi::jiff::Timestamp;

use super::chosen::Chosen;
use crate::conditions::condition_since;

/// The condition naming the refused clusters.
pub const CLUSTERS_REFUSED: &str = "ClustersRefused";
/// Its reason when some cluster is refused.
pub const NOT_IN_BOUND_SETS: &str = "NotInBoundClusterSets";
/// Its reason when none is.
pub const ALL_IN_BOUND_SETS: &str = "AllInBoundClusterSets";
/// Most clusters the condition's message names.
pub const MAX_NAMED: usize = 10;

/// Removes from `chosen` every cluster `eligible` (the clusters of the sets
/// bound to the replica set's namespace) does not allow; returns them,
/// sorted. A cluster chosen by a placement in `held` (one holding its last
/// decisions after its grant was lost, which only the hub can say) is kept:
/// the hold is what keeps a lost binding from taking the application off
/// the fleet, and refusing its clusters here would go around it. Never
/// fails.
pub fn refuse_unbound(
    chosen: &mut Chosen,
    eligible: &Eligible,
    held: &std::collections::BTreeSet<String>,
) -> Vec<String> {
    let refused: Vec<String> = chosen
        .wanted
        .iter()
        .filter(|(c, placement)| !eligible.allows(c) && !held.contains(*placement))
        .map(|(c, _)| c.clone())
        .collect();
    for cluster in &refused {
        chosen.wanted.remove(cluster);
        chosen.group_of.remove(cluster);
    }
    refused
}

/// The `ClustersRefused` condition for `refused` (sorted): False with
/// [`ALL_IN_BOUND_SETS`] when empty, else True naming at most
/// [`MAX_NAMED`] of them and how many there are.
pub fn refused_condition(
    refused: &[String],
    namespace: &str,
    generation: i64,
    current: &[Condition],
    now: Timestamp,
) -> Condition {
    if refused.is_empty() {
        return condition_since(
            CLUSTERS_REFUSED,
            false,
            ALL_IN_BOUND_SETS,
            format!(
                "every decided cluster is in a ManagedClusterSet bound to namespace {namespace}"
            ),
            generation,
            current,
            now,
        );
    }
    let named: Vec<&str> = refused.iter().take(MAX_NAMED).map(String::as_str).collect();
    condition_since(
        CLUSTERS_REFUSED,
        true,
        NOT_IN_BOUND_SETS,
        format!(
            "{} refused, first {}: {}: not in any ManagedClusterSet bound to namespace {namespace}; \
             no work is written to them",
            refused.len(),
            named.len(),
            named.join(", ")
        ),
        generation,
        current,
        now,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn a_decided_cluster_outside_the_bound_sets_is_refused_and_named() {
        let mut chosen = Chosen::default();
        for c in ["a", "b", "outsider"] {
            chosen.wanted.insert(c.into(), "p".into());
            chosen.group_of.insert(c.into(), (0, String::new()));
        }
        let eligible = Eligible::Clusters(BTreeSet::from(["a".to_string(), "b".to_string()]));
        let refused = refuse_unbound(&mut chosen, &eligible, &BTreeSet::new());
        assert_eq!(refused, ["outsider"]);
        assert_eq!(chosen.wanted.keys().collect::<Vec<_>>(), ["a", "b"]);
        assert!(!chosen.group_of.contains_key("outsider"));
        let c = refused_condition(&refused, "team-a", 1, &[], Timestamp::UNIX_EPOCH);
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("True", NOT_IN_BOUND_SETS)
        );
        assert!(c.message.starts_with("1 refused, first 1: outsider"));
    }

    #[test]
    fn with_no_binding_every_cluster_is_refused_and_the_message_is_bounded() {
        let mut chosen = Chosen::default();
        for i in 0..25 {
            chosen.wanted.insert(format!("c{i:02}"), "p".into());
        }
        let refused = refuse_unbound(&mut chosen, &Eligible::NoBindings, &BTreeSet::new());
        assert_eq!(refused.len(), 25);
        assert!(chosen.wanted.is_empty());
        let c = refused_condition(&refused, "ns", 1, &[], Timestamp::UNIX_EPOCH);
        assert!(c.message.starts_with("25 refused, first 10: c00, "));
        assert!(!c.message.contains("c10"));
    }

    #[test]
    fn a_placement_holding_its_decisions_after_a_lost_grant_keeps_its_clusters() {
        let mut chosen = Chosen::default();
        chosen.wanted.insert("kept".into(), "held".into());
        chosen.wanted.insert("other".into(), "p".into());
        let held = BTreeSet::from(["held".to_string()]);
        let refused = refuse_unbound(&mut chosen, &Eligible::NoBindings, &held);
        assert_eq!(refused, ["other"]);
        assert_eq!(chosen.wanted.keys().collect::<Vec<_>>(), ["kept"]);
    }
}
