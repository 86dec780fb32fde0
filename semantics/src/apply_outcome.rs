//! What applying one manifest did, and the per-strategy facts that follow
//! from it: whether a strategy writes an object, whether an outcome leaves the
//! object held by the work, and the `Applied` condition's reason and message.
//!
//! Every fact is an exhaustive `match` on [`Strategy`] or [`Applied`], so a
//! new strategy or outcome is a compile error here until each fact says what
//! it means for it, instead of falling into a `_ =>` arm somewhere in the
//! agent.

use crate::strategy::Strategy;

/// What applying one manifest did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// The object was created.
    Created,
    /// The object was changed.
    Updated,
    /// The object already matched; nothing was sent.
    Unchanged,
    /// CreateOnly found the object present and left it alone.
    LeftAsIs,
    /// ReadOnly or ReportOnly: the object exists and was not written.
    Observed,
    /// ReadOnly or ReportOnly: the object does not exist.
    Missing,
    /// whenDeleted: Leave, and the object was deleted on the spoke.
    LeftDeleted,
}

/// When a strategy writes an object to the spoke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writes {
    /// Never: the object is only observed.
    Never,
    /// Only to create it when it is absent.
    WhenAbsent,
    /// Whether or not it exists, so the object ends up held by the work.
    Always,
}

impl Strategy {
    /// The strategy's name as `updateStrategy.type` spells it.
    pub fn type_name(&self) -> &'static str {
        match self {
            Strategy::Update => "Update",
            Strategy::CreateOnly => "CreateOnly",
            Strategy::ServerSideApply { .. } => "ServerSideApply",
            Strategy::ReadOnly => "ReadOnly",
            Strategy::ReportOnly { .. } => "ReportOnly",
        }
    }

    /// When this strategy writes the object.
    pub fn writes(&self) -> Writes {
        match self {
            Strategy::Update | Strategy::ServerSideApply { .. } => Writes::Always,
            Strategy::CreateOnly => Writes::WhenAbsent,
            Strategy::ReadOnly | Strategy::ReportOnly { .. } => Writes::Never,
        }
    }
}

/// Whether an object an outcome leaves on the spoke belongs to the work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// The work wrote it: it is marked (or unmarked, when orphaned) as the
    /// work's and recorded.
    Written,
    /// The work found it and left it alone; it stays the work's only if the
    /// work created it earlier (it already carries the work's mark).
    KeptIfAlreadyOwned,
    /// The work never takes it over: deleting the work must not delete it.
    NotHeld,
}

impl Applied {
    /// Whether the object this outcome leaves belongs to the work.
    pub fn hold(self) -> Hold {
        match self {
            Applied::Created | Applied::Updated | Applied::Unchanged => Hold::Written,
            Applied::LeftAsIs => Hold::KeptIfAlreadyOwned,
            Applied::Observed | Applied::Missing | Applied::LeftDeleted => Hold::NotHeld,
        }
    }
}

/// The `Applied` condition of a manifest whose apply succeeded: reason and
/// message (before any notes are added).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppliedReport {
    /// The condition reason.
    pub reason: &'static str,
    /// The condition message.
    pub message: &'static str,
}

/// A strategy that only observes found no object: the manifest fails with
/// reason `ObjectNotFound`, naming the strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{strategy}: the object does not exist on the cluster")]
pub struct ObjectMissing {
    /// The observing strategy's name.
    pub strategy: &'static str,
}

impl ObjectMissing {
    /// The condition reason.
    pub const REASON: &'static str = "ObjectNotFound";
}

/// The condition reason of a completed apply.
pub const APPLY_COMPLETE_REASON: &str = "AppliedManifestComplete";
/// The condition reason of an object left deleted under whenDeleted: Leave.
pub const DELETED_ON_SPOKE_REASON: &str = "DeletedOnSpoke";

/// The `Applied` condition for `applied` under `strategy`; fails when the
/// outcome is a failure ([`Applied::Missing`]).
pub fn applied_report(
    strategy: &Strategy,
    applied: Applied,
) -> Result<AppliedReport, ObjectMissing> {
    let report = |reason, message| Ok(AppliedReport { reason, message });
    match applied {
        Applied::Created | Applied::Updated | Applied::Unchanged => {
            report(APPLY_COMPLETE_REASON, "Apply manifest complete")
        }
        Applied::LeftAsIs => report(
            APPLY_COMPLETE_REASON,
            "CreateOnly: the object exists and is left as it is",
        ),
        Applied::Observed => match observer(strategy) {
            Observer::ReportOnly => report(
                "ReportOnly",
                "ReportOnly: the object exists; ferry reports where it differs and does not write it",
            ),
            Observer::ReadOnly => report(
                "ReadOnly",
                "ReadOnly: the object exists; ferry does not write it",
            ),
        },
        Applied::LeftDeleted => report(
            DELETED_ON_SPOKE_REASON,
            "whenDeleted: Leave: the object was deleted on the cluster and is not recreated",
        ),
        Applied::Missing => Err(ObjectMissing {
            strategy: match observer(strategy) {
                Observer::ReportOnly => "ReportOnly",
                Observer::ReadOnly => "ReadOnly",
            },
        }),
    }
}

/// Which observing behaviour an observed outcome is reported as.
enum Observer {
    ReadOnly,
    ReportOnly,
}

/// Observed and Missing come from strategies that never write; `ReportOnly`
/// has its own wording, every other strategy reads as ReadOnly (an outcome a
/// writing strategy cannot produce).
fn observer(strategy: &Strategy) -> Observer {
    match strategy {
        Strategy::ReportOnly { .. } => Observer::ReportOnly,
        Strategy::ReadOnly
        | Strategy::Update
        | Strategy::CreateOnly
        | Strategy::ServerSideApply { .. } => Observer::ReadOnly,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_strategy() -> Vec<Strategy> {
        vec![
            Strategy::Update,
            Strategy::CreateOnly,
            Strategy::ServerSideApply {
                force: false,
                manager: "ferry-agent".into(),
                rules: vec![],
            },
            Strategy::ReadOnly,
            Strategy::ReportOnly { rules: vec![] },
        ]
    }

    const EVERY_OUTCOME: [Applied; 7] = [
        Applied::Created,
        Applied::Updated,
        Applied::Unchanged,
        Applied::LeftAsIs,
        Applied::Observed,
        Applied::Missing,
        Applied::LeftDeleted,
    ];

    #[test]
    fn only_update_and_server_side_apply_always_write() {
        let writes: Vec<_> = every_strategy()
            .iter()
            .map(|s| (s.type_name(), s.writes()))
            .collect();
        assert_eq!(
            writes,
            vec![
                ("Update", Writes::Always),
                ("CreateOnly", Writes::WhenAbsent),
                ("ServerSideApply", Writes::Always),
                ("ReadOnly", Writes::Never),
                ("ReportOnly", Writes::Never),
            ]
        );
    }

    #[test]
    fn type_names_parse_back_to_the_same_strategy_kind() {
        use ferry_proto::v1;
        for strategy in every_strategy() {
            let config = v1::ManifestConfig {
                update_strategy: Some(v1::UpdateStrategy {
                    r#type: strategy.type_name().into(),
                    ..Default::default()
                }),
                ..Default::default()
            };
            let (parsed, _) = crate::strategy::strategy_of(Some(&config)).expect("known type");
            assert_eq!(parsed.type_name(), strategy.type_name());
        }
    }

    #[test]
    fn only_written_outcomes_are_held_and_left_as_is_only_when_owned() {
        let held: Vec<_> = EVERY_OUTCOME.iter().map(|a| a.hold()).collect();
        assert_eq!(
            held,
            vec![
                Hold::Written,
                Hold::Written,
                Hold::Written,
                Hold::KeptIfAlreadyOwned,
                Hold::NotHeld,
                Hold::NotHeld,
                Hold::NotHeld,
            ]
        );
    }

    #[test]
    fn a_missing_object_fails_naming_the_observing_strategy() {
        let read_only = applied_report(&Strategy::ReadOnly, Applied::Missing);
        assert_eq!(
            read_only,
            Err(ObjectMissing {
                strategy: "ReadOnly"
            })
        );
        let report_only = applied_report(&Strategy::ReportOnly { rules: vec![] }, Applied::Missing);
        assert_eq!(
            report_only.map_err(|e| e.to_string()),
            Err("ReportOnly: the object does not exist on the cluster".into())
        );
    }

    #[test]
    fn observed_objects_are_reported_in_the_strategy_s_own_words() {
        let read_only = applied_report(&Strategy::ReadOnly, Applied::Observed).expect("observed");
        assert_eq!(read_only.reason, "ReadOnly");
        let report_only =
            applied_report(&Strategy::ReportOnly { rules: vec![] }, Applied::Observed)
                .expect("observed");
        assert_eq!(report_only.reason, "ReportOnly");
        assert!(report_only.message.contains("reports where it differs"));
    }

    #[test]
    fn every_outcome_but_missing_has_a_report_under_every_strategy() {
        for strategy in every_strategy() {
            for applied in EVERY_OUTCOME {
                let report = applied_report(&strategy, applied);
                assert_eq!(
                    report.is_err(),
                    applied == Applied::Missing,
                    "{strategy:?} {applied:?}"
                );
                if let Ok(report) = report {
                    assert!(!report.reason.is_empty() && !report.message.is_empty());
                }
            }
        }
    }
}
