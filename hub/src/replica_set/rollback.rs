//! `failureStrategy`: what a rollout halted past `maxFailures` does.
//! `abortAll` (the default) leaves every cluster where it is; `rollbackAll`
//! puts every cluster holding the failed revision (those progressing
//! included) back on the stable revision, rendered per cluster from its
//! ControllerRevision. The rollback is remembered in the status and holds
//! until the spec's revision changes: a new template rolls out normally.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use kube::{Resource, ResourceExt};

use super::plan::RolloutPlan;
use super::render::Rendered;
use super::revisions::{Revision, holds_revision};
use crate::conditions::MAX_CONDITION_MESSAGE;
use ferry_api::contract::{REVISION_ANNOTATION, TEMPLATE_APPLIED_AT_ANNOTATION};
use ferry_api::manifest_work::{ManifestWork, ManifestWorkExecutor, ManifestWorkSpec};
use ferry_api::replica_set::{
    ManifestWorkReplicaSet, ManifestWorkReplicaSetStatus, RevisionRef, RollbackStatus,
    RolloutConfig, RolloutStrategy,
};
use ferry_semantics::text::{clipped, first_few};

/// `failureStrategy` value that rolls a failed rollout back.
pub const ROLLBACK_ALL: &str = "rollbackAll";

/// What the failure strategy makes of the rollout now.
#[derive(Debug, Clone, PartialEq)]
pub enum FailureOutcome<'a> {
    /// Not halted: the rollout goes on.
    Proceed,
    /// Halted and left where it is, for the reason `why`.
    Aborted {
        /// Why no rollback is made.
        why: Abort,
    },
    /// `rollbackAll`: the clusters holding the failed revision go back to
    /// `to`.
    RollBack {
        /// The rollback, as the status reports it.
        status: RollbackStatus,
        /// The revision they go back to.
        to: &'a Revision,
    },
}

/// Why a halted rollout is left where it is.
#[derive(Debug, Clone, PartialEq)]
pub enum Abort {
    /// `abortAll` says so.
    Asked,
    /// `rollbackAll` has no stable revision it trusts to go back to: the
    /// first rollout failed, or the stable revision's ControllerRevision is
    /// gone or refused.
    NoStable,
    /// `rollbackAll`'s stable revision runs as another executor than the
    /// template in force (`stable`, `current`: the executors, `none` when
    /// the agent's own). A rollback writes with the hub's rights, so it
    /// goes only where the executor policy let the spec in force go: the
    /// author's right to the older executor was checked when it was
    /// written and may be gone.
    OtherExecutor {
        /// The stable revision's executor.
        stable: String,
        /// The current template's executor.
        current: String,
    },
}

/// `executor` as a status message names it.
fn executor_name(executor: Option<&ManifestWorkExecutor>) -> String {
    executor
        .and_then(|e| e.subject.service_account.as_ref())
        .map_or_else(
            || "none (the agent's own identity)".to_string(),
            |sa| format!("ServiceAccount {}/{}", sa.namespace, sa.name),
        )
}

/// The rollback to `to` of `rs`, or why it is not made: `to` must run as
/// the executor of the template in force (see [`Abort::OtherExecutor`]).
fn roll_back_to<'a>(
    rs: &ManifestWorkReplicaSet,
    status: RollbackStatus,
    to: &'a Revision,
) -> FailureOutcome<'a> {
    let current = rs.spec.manifest_work_template.executor.as_ref();
    let stable = to.spec.manifest_work_template.executor.as_ref();
    if current != stable {
        return FailureOutcome::Aborted {
            why: Abort::OtherExecutor {
                stable: executor_name(stable),
                current: executor_name(current),
            },
        };
    }
    FailureOutcome::RollBack { status, to }
}

/// The settings shared by every rollout type of `strategy`.
fn config(strategy: &RolloutStrategy) -> Option<&RolloutConfig> {
    match strategy.type_.as_str() {
        "Progressive" => strategy.progressive.as_ref().map(|p| &p.config),
        "ProgressivePerGroup" => strategy.progressive_per_group.as_ref().map(|p| &p.config),
        _ => strategy.all.as_ref(),
    }
}

/// Whether `strategy` says `rollbackAll`.
pub fn rolls_back(strategy: &RolloutStrategy) -> bool {
    config(strategy).is_some_and(|c| c.failure_strategy == ROLLBACK_ALL)
}

/// Decides what `rs` does about its rollout of the `current` revision:
/// a rollback the status already records for it (or the controller
/// `remembered`, for a status the cache has not caught up with) goes on;
/// otherwise, when the `plan` halted placements past `maxFailures` and one
/// of them says `rollbackAll`, a rollback to the `stable` revision (found in `revisions`) starts `now`.
pub fn failure_outcome<'a>(
    rs: &ManifestWorkReplicaSet,
    remembered: Option<&RollbackStatus>,
    current: &RevisionRef,
    stable: Option<&RevisionRef>,
    revisions: &'a [Revision],
    plan: &RolloutPlan,
    now: Timestamp,
) -> FailureOutcome<'a> {
    let (halted, reasons) = (&plan.halted_placements, &plan.halted);
    let find = |wanted: &RevisionRef| revisions.iter().find(|r| r.reference.is(wanted));
    let previous = rs
        .status
        .as_ref()
        .and_then(|s| s.rollout.as_ref())
        .and_then(|r| r.rollback.as_ref())
        .or(remembered)
        .filter(|r| r.from.is(current));
    if let Some(previous) = previous {
        return match find(&previous.to) {
            Some(to) => roll_back_to(
                rs,
                RollbackStatus {
                    from: current.clone(),
                    to: to.reference.clone(),
                    ..previous.clone()
                },
                to,
            ),
            None => FailureOutcome::Aborted {
                why: Abort::NoStable,
            },
        };
    }
    if halted.is_empty() {
        return FailureOutcome::Proceed;
    }
    let rollback_all = rs
        .spec
        .placement_refs
        .iter()
        .filter(|r| halted.contains(&r.name))
        .any(|r| rolls_back(&r.rollout_strategy));
    if !rollback_all {
        return FailureOutcome::Aborted { why: Abort::Asked };
    }
    match stable.filter(|s| !s.is(current)).and_then(find) {
        Some(to) => roll_back_to(
            rs,
            RollbackStatus {
                from: current.clone(),
                to: to.reference.clone(),
                reason: clipped(first_few(reasons, "; "), MAX_CONDITION_MESSAGE),
                at: now
                    .strftime(ferry_semantics::contract::KUBE_TIME_FORMAT)
                    .to_string(),
                clusters: 0,
            },
            to,
        ),
        None => FailureOutcome::Aborted {
            why: Abort::NoStable,
        },
    }
}

/// The rollback `outcome` starts that `rs`'s status does not record yet,
/// to be written to the status before any of its works is: a leader that
/// fails over between the two then reads the rollback from the status and
/// goes on with it, instead of seeing a halted rollout with no rollback
/// and (with the in-memory record gone) deciding afresh. None when there
/// is no rollback or the status already names this one (same from and to).
pub fn rollback_to_record<'a>(
    rs: &ManifestWorkReplicaSet,
    outcome: &'a FailureOutcome<'_>,
) -> Option<&'a RollbackStatus> {
    let FailureOutcome::RollBack { status, .. } = outcome else {
        return None;
    };
    let recorded = rs
        .status
        .as_ref()
        .and_then(|s| s.rollout.as_ref())
        .and_then(|r| r.rollback.as_ref());
    match recorded {
        Some(r) if r.from.is(&status.from) && r.to.is(&status.to) => None,
        _ => Some(status),
    }
}

/// The status `rs` records before the works of a rollback are written:
/// its own with `rollback` in `rollout.rollback`.
pub fn rollback_record(
    rs: &ManifestWorkReplicaSet,
    rollback: &RollbackStatus,
) -> ManifestWorkReplicaSetStatus {
    let mut status = rs.status.clone().unwrap_or_default();
    status.rollout.get_or_insert_with(Default::default).rollback = Some(rollback.clone());
    status
}

/// The revision hash `work` holds: `current` when it holds the cluster's
/// `current_rendering` (a revision that renders this cluster as it already
/// runs is run here, though nothing was written: issue 49), else its
/// revision annotation.
pub fn held_revision(
    work: &ManifestWork,
    current: &str,
    current_rendering: Option<&ferry_api::manifest_work::ManifestWorkSpec>,
) -> Option<String> {
    if current_rendering == Some(&work.spec) {
        return Some(current.to_string());
    }
    work.meta()
        .annotations
        .as_ref()
        .and_then(|a| a.get(REVISION_ANNOTATION))
        .cloned()
}

/// Whether `work` holds `revision`: it holds the cluster's
/// `rendering` of it (see [`held_revision`]), or its annotations name it
/// by hash and, when both carry one, by whole digest.
fn holds(
    work: &ManifestWork,
    revision: &RevisionRef,
    rendering: Option<&ManifestWorkSpec>,
) -> bool {
    rendering == Some(&work.spec)
        || holds_revision(work, &revision.hash, revision.digest.as_deref())
}

/// The clusters a rollback from the `failed` revision writes now, each with
/// its placement: of the `wanted` clusters, those whose work holds the
/// failed revision (or that have no work yet), and whose work is not
/// already their `stable` rendering. Clusters on any other revision stay
/// where they are.
pub fn rollback_writes(
    failed: &RevisionRef,
    wanted: &BTreeMap<String, String>,
    existing: &BTreeMap<String, Arc<ManifestWork>>,
    current: &Rendered,
    stable: &Rendered,
) -> Vec<(String, String)> {
    wanted
        .iter()
        .filter(|(cluster, _)| {
            let Some(Ok(target)) = stable.get(*cluster) else {
                return false;
            };
            match existing.get(*cluster) {
                None => true,
                Some(work) => {
                    let rendering = current.get(*cluster).and_then(|r| r.as_ref().ok());
                    holds(work, failed, rendering) && &work.spec != target
                }
            }
        })
        .map(|(c, p)| (c.clone(), p.clone()))
        .collect()
}

/// How many of the `existing` works a rollback to `to` that started at
/// `at` (RFC 3339) has put back: those holding `to` written since.
pub fn rolled_back(
    existing: &BTreeMap<String, Arc<ManifestWork>>,
    to: &RevisionRef,
    at: &str,
) -> i32 {
    let Ok(at) = at.parse::<Timestamp>() else {
        return 0;
    };
    let count = existing
        .values()
        .filter(|w| {
            holds(w, to, None)
                && w.annotations()
                    .get(TEMPLATE_APPLIED_AT_ANNOTATION)
                    .and_then(|t| t.parse::<Timestamp>().ok())
                    .is_some_and(|t| t >= at)
        })
        .count();
    i32::try_from(count).unwrap_or(i32::MAX)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use ferry_api::manifest_work::ManifestWorkSpec;
    use ferry_api::replica_set::{
        ManifestWorkReplicaSetSpec, ManifestWorkReplicaSetStatus, RolloutStatus,
    };
    use serde_json::json;

    pub(crate) fn rs(failure_strategy: &str) -> ManifestWorkReplicaSet {
        serde_json::from_value(json!({
            "apiVersion": "work.ferry.dev/v1alpha1",
            "kind": "ManifestWorkReplicaSet",
            "metadata": {"name": "app", "namespace": "ns"},
            "spec": {"manifestWorkTemplate": {}, "placementRefs": [{"name": "p", "rolloutStrategy":
                {"type": "Progressive", "progressive": {"failureStrategy": failure_strategy}}}]},
        }))
        .expect("replica set")
    }

    pub(crate) fn reference(number: i64, hash: &str) -> RevisionRef {
        RevisionRef {
            number,
            hash: hash.into(),
            digest: None,
        }
    }

    fn revision(number: i64, hash: &str) -> Revision {
        Revision {
            reference: reference(number, hash),
            spec: ManifestWorkReplicaSetSpec::default(),
            created: None,
        }
    }

    fn plan(halted: &[String], reasons: &[String]) -> RolloutPlan {
        RolloutPlan {
            start: vec![],
            look_again: None,
            halted: reasons.to_vec(),
            halted_placements: halted.to_vec(),
            held: vec![],
            all_complete: false,
            problems: vec![],
            placements: vec![],
            health_requests: vec![],
            waiting: vec![],
            waiting_for_dependencies: vec![],
        }
    }

    pub(crate) fn spec(value: &str) -> ManifestWorkSpec {
        serde_json::from_value(
            json!({"workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "d"}, "data": {"v": value}}]}}),
        )
        .expect("spec")
    }

    pub(crate) fn work(
        spec: ManifestWorkSpec,
        revision: Option<&str>,
        at: &str,
    ) -> Arc<ManifestWork> {
        let mut w = ManifestWork::new("app", spec);
        let mut annotations =
            BTreeMap::from([(TEMPLATE_APPLIED_AT_ANNOTATION.to_string(), at.to_string())]);
        if let Some(r) = revision {
            annotations.insert(REVISION_ANNOTATION.to_string(), r.to_string());
        }
        w.metadata.annotations = Some(annotations);
        Arc::new(w)
    }

    #[test]
    fn a_halted_rollback_all_goes_back_to_the_stable_revision() {
        let revisions = [revision(1, "s"), revision(2, "f")];
        let now: Timestamp = "2026-11-27T10:00:00Z".parse().expect("time");
        let current = reference(2, "f");
        let stable = reference(1, "s");
        let halted = vec!["p".to_string()];
        let reasons = vec!["placement p: 1 clusters failed (a)".to_string()];
        let outcome =
            |rs: &ManifestWorkReplicaSet, stable: Option<&RevisionRef>, halted: &[String]| {
                failure_outcome(
                    rs,
                    None,
                    &current,
                    stable,
                    &revisions,
                    &plan(halted, &reasons),
                    now,
                )
            };
        let rollback = rs(ROLLBACK_ALL);
        match outcome(&rollback, Some(&stable), &halted) {
            FailureOutcome::RollBack { status, to } => {
                assert_eq!(to.reference, stable);
                assert_eq!(
                    (status.from, status.to.clone()),
                    (current.clone(), stable.clone())
                );
                assert_eq!(status.at, "2026-11-27T10:00:00Z");
                assert!(status.reason.contains("1 clusters failed (a)"));
            }
            other => panic!("expected a rollback, got {other:?}"),
        }
        assert_eq!(
            outcome(&rollback, Some(&stable), &[]),
            FailureOutcome::Proceed
        );
        assert_eq!(
            outcome(&rollback, None, &halted),
            FailureOutcome::Aborted {
                why: Abort::NoStable
            }
        );
        assert_eq!(
            outcome(&rollback, Some(&current), &halted),
            FailureOutcome::Aborted {
                why: Abort::NoStable
            }
        );
        assert_eq!(
            outcome(&rs("abortAll"), Some(&stable), &halted),
            FailureOutcome::Aborted { why: Abort::Asked }
        );
        assert_eq!(
            outcome(&rs(""), Some(&stable), &halted),
            FailureOutcome::Aborted { why: Abort::Asked }
        );
    }

    #[test]
    fn a_rollback_is_recorded_first_and_a_new_leader_continues_it_at_every_step() {
        let revisions = [revision(1, "s"), revision(2, "f")];
        let now: Timestamp = "2026-11-27T10:00:00Z".parse().expect("time");
        let current = reference(2, "f");
        let stable = reference(1, "s");
        let halted = plan(
            &["p".to_string()],
            &["placement p: 1 clusters failed (a)".into()],
        );
        // Half-way through its writes the rollback has put the failed
        // clusters back, so a fresh view may show no halt at all.
        let settled = plan(&[], &[]);
        let decide = |rs: &ManifestWorkReplicaSet, plan: &RolloutPlan| {
            failure_outcome(rs, None, &current, Some(&stable), &revisions, plan, now)
        };
        // Step 1, the leader decides: a rollback the status lacks is to be
        // recorded before any write.
        let before = rs(ROLLBACK_ALL);
        let outcome = decide(&before, &halted);
        let recorded = rollback_to_record(&before, &outcome)
            .expect("a new rollback is recorded first")
            .clone();
        assert_eq!((&recorded.from, &recorded.to), (&current, &stable));
        // It fails over before the record: the next leader, seeing the same
        // halt, decides the same rollback (nothing was carried out yet).
        assert_eq!(decide(&before, &halted), outcome);
        // Step 2, recorded: whatever the next leader's view (still halted,
        // or already settled by the writes made so far), it goes on with
        // the recorded rollback, and records nothing again.
        let mut after = rs(ROLLBACK_ALL);
        after.status = Some(ManifestWorkReplicaSetStatus {
            rollout: Some(RolloutStatus {
                rollback: Some(recorded.clone()),
                ..RolloutStatus::default()
            }),
            ..ManifestWorkReplicaSetStatus::default()
        });
        for view in [&halted, &settled] {
            let next = decide(&after, view);
            match &next {
                FailureOutcome::RollBack { status, to } => {
                    assert_eq!(to.reference, stable);
                    assert_eq!(status.at, recorded.at, "the rollback keeps its start");
                }
                other => panic!("a new leader reversed the rollback: {other:?}"),
            }
            assert_eq!(rollback_to_record(&after, &next), None);
        }
        // No rollback, nothing recorded.
        assert_eq!(rollback_to_record(&before, &FailureOutcome::Proceed), None);
        assert_eq!(
            rollback_to_record(&before, &FailureOutcome::Aborted { why: Abort::Asked }),
            None
        );
    }

    #[test]
    fn a_recorded_rollback_holds_until_the_revision_changes() {
        let revisions = [revision(1, "s"), revision(3, "f")];
        let mut rolled = rs(ROLLBACK_ALL);
        let recorded = RollbackStatus {
            from: reference(2, "f"),
            to: reference(1, "s"),
            reason: "why".into(),
            at: "2026-11-27T10:00:00Z".into(),
            clusters: 2,
        };
        rolled.status = Some(ferry_api::replica_set::ManifestWorkReplicaSetStatus {
            rollout: Some(RolloutStatus {
                rollback: Some(recorded.clone()),
                ..RolloutStatus::default()
            }),
            ..Default::default()
        });
        let now = Timestamp::now();
        // Not halted any more (the clusters hold the stable revision), the
        // rollback stands, renumbered.
        match failure_outcome(
            &rolled,
            None,
            &reference(3, "f"),
            None,
            &revisions,
            &plan(&[], &[]),
            now,
        ) {
            FailureOutcome::RollBack { status, .. } => {
                assert_eq!(status.from, reference(3, "f"));
                assert_eq!(
                    (status.reason.as_str(), status.at.as_str()),
                    ("why", "2026-11-27T10:00:00Z")
                );
            }
            other => panic!("expected the rollback to hold, got {other:?}"),
        }
        // Remembered by the controller while the cached status lags.
        let remembered = rolled.status.take().and_then(|s| s.rollout?.rollback);
        assert!(matches!(
            failure_outcome(
                &rolled,
                remembered.as_ref(),
                &reference(3, "f"),
                None,
                &revisions,
                &plan(&[], &[]),
                now
            ),
            FailureOutcome::RollBack { .. }
        ));
        // A new revision rolls out normally.
        assert_eq!(
            failure_outcome(
                &rolled,
                None,
                &reference(4, "n"),
                None,
                &revisions,
                &plan(&[], &[]),
                now
            ),
            FailureOutcome::Proceed
        );
    }

    #[test]
    fn only_clusters_holding_the_failed_revision_are_written_back() {
        let wanted: BTreeMap<String, String> = ["a", "b", "c", "d", "e"]
            .iter()
            .map(|c| (c.to_string(), "p".to_string()))
            .collect();
        let at = "2026-11-27T10:00:00Z";
        let existing = BTreeMap::from([
            ("a".to_string(), work(spec("bad"), Some("f"), at)),
            // Written before works were annotated: known by its spec.
            ("b".to_string(), work(spec("bad"), None, at)),
            ("c".to_string(), work(spec("good"), Some("s"), at)),
            ("d".to_string(), work(spec("older"), Some("o"), at)),
        ]);
        let current: Rendered = wanted
            .keys()
            .map(|c| (c.clone(), Ok(spec("bad"))))
            .collect();
        let stable: Rendered = wanted
            .keys()
            .map(|c| (c.clone(), Ok(spec("good"))))
            .collect();
        let writes: Vec<String> =
            rollback_writes(&reference(0, "f"), &wanted, &existing, &current, &stable)
                .into_iter()
                .map(|(c, _)| c)
                .collect();
        assert_eq!(writes, vec!["a", "b", "e"]);
    }

    #[test]
    fn a_work_that_already_matches_the_revision_runs_it_whatever_it_was_written_as() {
        let at = "2026-11-27T10:00:00Z";
        let unchanged = work(spec("same"), Some("r2"), at);
        assert_eq!(
            held_revision(&unchanged, "r3", Some(&spec("same"))).as_deref(),
            Some("r3")
        );
        let other = work(spec("older"), Some("r2"), at);
        assert_eq!(
            held_revision(&other, "r3", Some(&spec("same"))).as_deref(),
            Some("r2")
        );
        assert_eq!(held_revision(&other, "r3", None).as_deref(), Some("r2"));
        let unannotated = work(spec("older"), None, at);
        assert_eq!(held_revision(&unannotated, "r3", Some(&spec("same"))), None);
    }

    #[test]
    fn rolled_back_counts_works_put_back_since_the_rollback() {
        let existing = BTreeMap::from([
            (
                "a".to_string(),
                work(spec("good"), Some("s"), "2026-11-27T10:00:05Z"),
            ),
            (
                "b".to_string(),
                work(spec("good"), Some("s"), "2026-11-27T09:00:00Z"),
            ),
            (
                "c".to_string(),
                work(spec("bad"), Some("f"), "2026-11-27T10:00:05Z"),
            ),
        ]);
        let to = reference(1, "s");
        assert_eq!(rolled_back(&existing, &to, "2026-11-27T10:00:00Z"), 1);
        assert_eq!(rolled_back(&existing, &to, "not a time"), 0);
    }

    #[test]
    fn a_work_whose_digest_is_another_templates_does_not_hold_the_revision() {
        let mut clashing = (*work(spec("bad"), Some("f"), "2026-11-27T10:00:05Z")).clone();
        clashing.annotations_mut().insert(
            ferry_api::contract::REVISION_DIGEST_ANNOTATION.into(),
            "b".repeat(64),
        );
        let failed = RevisionRef {
            digest: Some("a".repeat(64)),
            ..reference(2, "f")
        };
        assert!(!holds(&clashing, &failed, None));
        assert!(
            holds(&clashing, &reference(2, "f"), None),
            "no digest: the hash decides"
        );
        assert!(
            holds(&clashing, &failed, Some(&spec("bad"))),
            "its rendering decides"
        );
        let existing = BTreeMap::from([("a".to_string(), Arc::new(clashing))]);
        assert_eq!(rolled_back(&existing, &failed, "2026-11-27T10:00:00Z"), 0);
    }
}
