//! What the cluster-set controller decides, purely, from what it read: a
//! set's status from its members, a binding's `Bound` from its set, and
//! whether a cluster is labelled into `default`. Each says `None` when
//! nothing is to be written, so the controller writes only on change.

use k8s_openapi::jiff::Timestamp;

use crate::conditions::{condition_at, conditions, same_conditions};
use ferry_api::cluster_set::{ManagedClusterSetBindingStatus, ManagedClusterSetStatus};
use ferry_semantics::contract::{
    BOUND, CLUSTER_SET_BOUND, CLUSTER_SET_EMPTY, CLUSTER_SET_NOT_FOUND, CLUSTERS_SELECTED,
    NO_CLUSTER_MATCHED,
};

/// A set as read: its generation, status, how many clusters belong to it
/// and, when its selector cannot select, why.
pub struct SetSeen<'a> {
    /// The set's `metadata.generation`.
    pub generation: i64,
    /// Its status as the cache holds it.
    pub current: &'a ManagedClusterSetStatus,
    /// The clusters that belong to it now.
    pub members: usize,
    /// Why its selector selects nothing, when it is invalid.
    pub problem: Option<&'a str>,
}

/// The status `seen` should have at `now` (`ClusterSetEmpty` and the
/// count), or None when the status already says so. Never fails.
pub fn set_status(seen: &SetSeen<'_>, now: Timestamp) -> Option<ManagedClusterSetStatus> {
    let wanted = if seen.members == 0 {
        let message = match seen.problem {
            Some(problem) => format!("no cluster belongs to the set: {problem}"),
            None => "no ManagedCluster belongs to the set".into(),
        };
        condition_at(
            CLUSTER_SET_EMPTY,
            true,
            NO_CLUSTER_MATCHED,
            message,
            seen.generation,
            now,
        )
    } else {
        condition_at(
            CLUSTER_SET_EMPTY,
            false,
            CLUSTERS_SELECTED,
            format!("{} ManagedClusters belong to the set", seen.members),
            seen.generation,
            now,
        )
    };
    let status = ManagedClusterSetStatus {
        cluster_count: i32::try_from(seen.members).unwrap_or(i32::MAX),
        conditions: conditions(&seen.current.conditions, vec![wanted]),
    };
    let unchanged = seen.current.cluster_count == status.cluster_count
        && same_conditions(&seen.current.conditions, &status.conditions);
    (!unchanged).then_some(status)
}

/// The status a binding of `set` (at `generation`, now `current`) should
/// have at `now`: `Bound` True when the set `exists`. None when it already
/// says so. Never fails.
pub fn binding_status(
    set: &str,
    exists: bool,
    generation: i64,
    current: &ManagedClusterSetBindingStatus,
    now: Timestamp,
) -> Option<ManagedClusterSetBindingStatus> {
    let wanted = if exists {
        condition_at(
            BOUND,
            true,
            CLUSTER_SET_BOUND,
            format!("ManagedClusterSet {set} is bound to the namespace"),
            generation,
            now,
        )
    } else {
        condition_at(
            BOUND,
            false,
            CLUSTER_SET_NOT_FOUND,
            format!("ManagedClusterSet {set} does not exist"),
            generation,
            now,
        )
    };
    let status = ManagedClusterSetBindingStatus {
        conditions: conditions(&current.conditions, vec![wanted]),
    };
    (!same_conditions(&current.conditions, &status.conditions)).then_some(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().expect("time")
    }

    #[test]
    fn a_set_status_is_written_when_its_count_or_emptiness_changes_and_only_then() {
        let empty = ManagedClusterSetStatus::default();
        let first = set_status(
            &SetSeen {
                generation: 1,
                current: &empty,
                members: 0,
                problem: Some("bad selector"),
            },
            at("2026-12-04T10:00:00Z"),
        )
        .expect("a new set gets a status");
        assert_eq!(first.cluster_count, 0);
        assert_eq!(first.conditions[0].status, "True");
        assert_eq!(first.conditions[0].reason, NO_CLUSTER_MATCHED);
        assert!(first.conditions[0].message.contains("bad selector"));
        // Read again later, nothing changed: nothing to write.
        let same = SetSeen {
            generation: 1,
            current: &first,
            members: 0,
            problem: Some("bad selector"),
        };
        assert_eq!(set_status(&same, at("2026-12-04T11:00:00Z")), None);
        // Three clusters join: the count and the condition move, with the
        // time of this decision.
        let joined = set_status(
            &SetSeen {
                members: 3,
                problem: None,
                ..same
            },
            at("2026-12-04T12:00:00Z"),
        )
        .expect("changed");
        assert_eq!(joined.cluster_count, 3);
        assert_eq!(joined.conditions[0].status, "False");
        assert_eq!(joined.conditions[0].reason, CLUSTERS_SELECTED);
        assert_eq!(
            joined.conditions[0].last_transition_time,
            "2026-12-04T12:00:00Z"
        );
        // A fourth keeps the transition time: only the message changes.
        let more = set_status(
            &SetSeen {
                generation: 1,
                current: &joined,
                members: 4,
                problem: None,
            },
            at("2026-12-04T13:00:00Z"),
        )
        .expect("count changed");
        assert_eq!(
            more.conditions[0].last_transition_time,
            "2026-12-04T12:00:00Z"
        );
    }

    #[test]
    fn a_binding_is_bound_while_its_set_exists() {
        let none = ManagedClusterSetBindingStatus::default();
        let bound = binding_status("prod", true, 2, &none, at("2026-12-04T10:00:00Z"))
            .expect("first status");
        assert_eq!(
            (
                bound.conditions[0].status.as_str(),
                bound.conditions[0].reason.as_str()
            ),
            ("True", CLUSTER_SET_BOUND)
        );
        assert_eq!(
            binding_status("prod", true, 2, &bound, at("2026-12-04T11:00:00Z")),
            None
        );
        let lost =
            binding_status("prod", false, 2, &bound, at("2026-12-04T12:00:00Z")).expect("set gone");
        assert_eq!(
            (
                lost.conditions[0].status.as_str(),
                lost.conditions[0].reason.as_str()
            ),
            ("False", CLUSTER_SET_NOT_FOUND)
        );
        assert_eq!(
            lost.conditions[0].last_transition_time,
            "2026-12-04T12:00:00Z"
        );
    }
}
