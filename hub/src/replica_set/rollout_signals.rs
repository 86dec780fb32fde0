//! What an operator alerts on about one replica set's rollout, read from
//! the status the controller has just decided: halted, rolled back, held
//! at a gate, removals held by the deletion budget, placements holding
//! their decisions. Pure; the controller exports it as gauges
//! ([`crate::metrics::RolloutMetrics`]).

use ferry_api::replica_set::ManifestWorkReplicaSetStatus;
use ferry_semantics::contract::{
    DELETIONS_WAITING, MANDATORY_GROUP_FAILED, PLACEMENT_DECISIONS_HELD, PLACEMENT_ROLLED_OUT,
};

/// The `reason` of a `PlacementRolledOut=False` condition whose rollout
/// stopped past `maxFailures` (see `status::replica_set_status`).
const HALTED_REASON: &str = "Failed";

/// Gate states that hold a rollout back once the gate is open; `Pending`
/// (its group has not succeeded yet) and `Passed` hold nothing.
const HOLDING_GATE_STATES: [&str; 3] = ["Waiting", "AwaitingApproval", "Unhealthy"];

/// One replica set's rollout, as the alerts see it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RolloutSignals {
    /// The rollout stopped: past `maxFailures` (`abortAll` or
    /// `rollbackAll`), or a mandatory decision group failed.
    pub halted: bool,
    /// A `rollbackAll` holds the clusters on an older revision.
    pub rolled_back: bool,
    /// Open gates that hold the rollout: waiting out their time, awaiting
    /// an approval, or unhealthy.
    pub gates_holding: usize,
    /// Removals the deletion budget holds until a release.
    pub deletions_held: usize,
    /// 1 while one of its placements holds its decisions after a lost
    /// grant, else 0.
    pub decisions_held: usize,
}

/// The signals of a replica set whose status is `status`.
pub fn rollout_signals(status: &ManifestWorkReplicaSetStatus) -> RolloutSignals {
    let halted = status.conditions.iter().any(|c| {
        c.type_ == PLACEMENT_ROLLED_OUT
            && c.status == "False"
            && (c.reason == HALTED_REASON || c.reason == MANDATORY_GROUP_FAILED)
    });
    let rollout = status.rollout.as_ref();
    let rolled_back = rollout.is_some_and(|r| r.rollback.is_some());
    let gates_holding = rollout.map_or(0, |r| {
        r.placements
            .iter()
            .flat_map(|p| &p.gates)
            .filter(|g| HOLDING_GATE_STATES.contains(&g.state.as_str()))
            .count()
    });
    let holds = |type_: &str| {
        status
            .conditions
            .iter()
            .any(|c| c.type_ == type_ && c.status == "True")
    };
    let deletions_held = if holds(DELETIONS_WAITING) {
        status
            .deletion_budget
            .as_ref()
            .map_or(0, |b| usize::try_from(b.waiting).unwrap_or(0))
    } else {
        0
    };
    RolloutSignals {
        halted,
        rolled_back,
        gates_holding,
        deletions_held,
        decisions_held: usize::from(holds(PLACEMENT_DECISIONS_HELD)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conditions::condition_since;
    use ferry_api::manifest_work::Condition;
    use ferry_api::replica_set::{GateStatus, PlacementRollout, RollbackStatus, RolloutStatus};

    fn rolled_out(status: bool, reason: &str) -> Condition {
        condition_since(
            PLACEMENT_ROLLED_OUT,
            status,
            reason,
            String::new(),
            1,
            &[],
            "2026-12-04T00:00:00Z".parse().expect("time"),
        )
    }

    fn gate(state: &str) -> GateStatus {
        GateStatus {
            after_group: "canary".into(),
            state: state.into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_progressing_rollout_with_passed_and_pending_gates_raises_nothing() {
        let status = ManifestWorkReplicaSetStatus {
            conditions: vec![rolled_out(false, "Progressing")],
            rollout: Some(RolloutStatus {
                placements: vec![PlacementRollout {
                    name: "p".into(),
                    gates: vec![gate("Passed"), gate("Pending")],
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(rollout_signals(&status), RolloutSignals::default());
    }

    #[test]
    fn a_failed_or_mandatory_group_failed_rollout_is_halted() {
        for reason in [HALTED_REASON, MANDATORY_GROUP_FAILED] {
            let status = ManifestWorkReplicaSetStatus {
                conditions: vec![rolled_out(false, reason)],
                ..Default::default()
            };
            assert!(rollout_signals(&status).halted, "{reason}");
        }
        let complete = ManifestWorkReplicaSetStatus {
            conditions: vec![rolled_out(true, "Complete")],
            ..Default::default()
        };
        assert!(!rollout_signals(&complete).halted);
    }

    #[test]
    fn a_rollback_and_each_holding_gate_are_counted() {
        let status = ManifestWorkReplicaSetStatus {
            rollout: Some(RolloutStatus {
                rollback: Some(RollbackStatus::default()),
                placements: vec![
                    PlacementRollout {
                        name: "a".into(),
                        gates: vec![gate("Waiting"), gate("AwaitingApproval")],
                        ..Default::default()
                    },
                    PlacementRollout {
                        name: "b".into(),
                        gates: vec![gate("Unhealthy"), gate("Passed")],
                        ..Default::default()
                    },
                ],
                ..Default::default()
            }),
            ..Default::default()
        };
        let signals = rollout_signals(&status);
        assert!(signals.rolled_back);
        assert_eq!(signals.gates_holding, 3);
    }
}
