//! What a work's status says, summarised for people: the state of its
//! `Applied` and `Available` conditions and which manifests are failing.

use std::collections::BTreeSet;

use ferry_api::manifest_work::{Condition, ManifestWork};
use ferry_semantics::contract::{APPLIED, AVAILABLE, DEGRADED};
use serde::Serialize;

/// The `status` of a condition that reports a failure.
const FALSE: &str = "False";

/// Something that is failing: a manifest's, or the whole work's, `Applied`
/// or `Available` condition is `False`, or a manifest's `Degraded` is `True`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Failure {
    /// The manifest's ordinal; `None` for the work as a whole.
    pub ordinal: Option<i32>,
    /// The condition type that is `False`.
    pub condition: String,
    /// Its reason.
    pub reason: String,
}

/// The condition of `type_` in `conditions`, if reported.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// A condition as a table cell: its status (`True`, `False`, `Unknown`), `-`
/// when it is not reported, and `(stale)` after it when it describes an older
/// generation than `generation` (the work was edited since).
pub fn condition_cell(conditions: &[Condition], type_: &str, generation: Option<i64>) -> String {
    let Some(condition) = find_condition(conditions, type_) else {
        return "-".into();
    };
    let stale = matches!(generation, Some(current)
        if condition.observed_generation > 0 && condition.observed_generation < current);
    if stale {
        format!("{} (stale)", condition.status)
    } else {
        condition.status.clone()
    }
}

/// The work's own conditions (empty without status).
pub fn work_conditions(work: &ManifestWork) -> &[Condition] {
    work.status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default()
}

/// Every failure of `work`: each manifest whose `Applied` or `Available` is
/// `False` or whose `Degraded` is `True`; when no manifest says why, the
/// work's own `False` conditions.
pub fn failures(work: &ManifestWork) -> Vec<Failure> {
    let mut found = Vec::new();
    let manifests = work
        .status
        .as_ref()
        .and_then(|s| s.resource_status.as_ref())
        .map(|r| r.manifests.as_slice())
        .unwrap_or_default();
    for manifest in manifests {
        for type_ in [APPLIED, AVAILABLE] {
            if let Some(c) = find_condition(&manifest.conditions, type_)
                && c.status == FALSE
            {
                found.push(Failure {
                    ordinal: Some(manifest.resource_meta.ordinal),
                    condition: c.type_.clone(),
                    reason: c.reason.clone(),
                });
            }
        }
        if let Some(c) = find_condition(&manifest.conditions, DEGRADED)
            && c.status == "True"
        {
            found.push(Failure {
                ordinal: Some(manifest.resource_meta.ordinal),
                condition: c.type_.clone(),
                reason: c.reason.clone(),
            });
        }
    }
    if found.is_empty() {
        for type_ in [APPLIED, AVAILABLE] {
            if let Some(c) = find_condition(work_conditions(work), type_)
                && c.status == FALSE
            {
                found.push(Failure {
                    ordinal: None,
                    condition: c.type_.clone(),
                    reason: c.reason.clone(),
                });
            }
        }
    }
    found
}

/// The FAILING cell: `-` when nothing fails; else how many manifests fail
/// and their distinct reasons, e.g. `1 (UnknownKind)`, or `work (Reason)`
/// when only the work's own conditions say it fails.
pub fn failing_cell(failures: &[Failure]) -> String {
    if failures.is_empty() {
        return "-".into();
    }
    let manifests: BTreeSet<i32> = failures.iter().filter_map(|f| f.ordinal).collect();
    let reasons: BTreeSet<&str> = failures.iter().map(|f| f.reason.as_str()).collect();
    let reasons = reasons.into_iter().collect::<Vec<_>>().join(",");
    if manifests.is_empty() {
        format!("work ({reasons})")
    } else {
        format!("{} ({reasons})", manifests.len())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use ferry_api::manifest_work::{
        ManifestCondition, ManifestResourceMeta, ManifestResourceStatus, ManifestWorkSpec,
        ManifestWorkStatus,
    };

    pub(crate) fn condition(type_: &str, status: &str, reason: &str, generation: i64) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: format!("{type_} is {status}"),
            observed_generation: generation,
            last_transition_time: "2026-11-23T18:00:00Z".into(),
        }
    }

    pub(crate) fn manifest(ordinal: i32, conditions: Vec<Condition>) -> ManifestCondition {
        ManifestCondition {
            resource_meta: ManifestResourceMeta {
                ordinal,
                version: "v1".into(),
                kind: "ConfigMap".into(),
                resource: "configmaps".into(),
                name: format!("cm-{ordinal}"),
                namespace: "default".into(),
                ..Default::default()
            },
            status_feedback: None,
            conditions,
            ..Default::default()
        }
    }

    pub(crate) fn work_with(
        conditions: Vec<Condition>,
        manifests: Vec<ManifestCondition>,
    ) -> ManifestWork {
        let mut work = ManifestWork::new("web", ManifestWorkSpec::default());
        work.metadata.namespace = Some("cluster-a".into());
        work.metadata.generation = Some(1);
        work.status = Some(ManifestWorkStatus {
            conditions,
            resource_status: Some(ManifestResourceStatus { manifests }),
        });
        work
    }

    #[test]
    fn a_healthy_work_fails_nothing() {
        let work = work_with(
            vec![
                condition(APPLIED, "True", "AppliedManifestWorkComplete", 1),
                condition(AVAILABLE, "True", "ResourcesAvailable", 1),
            ],
            vec![manifest(0, vec![condition(APPLIED, "True", "Applied", 1)])],
        );
        assert!(failures(&work).is_empty());
        assert_eq!(failing_cell(&failures(&work)), "-");
        assert_eq!(
            condition_cell(work_conditions(&work), APPLIED, Some(1)),
            "True"
        );
    }

    #[test]
    fn failing_manifests_are_counted_once_with_their_reasons() {
        let work = work_with(
            vec![condition(APPLIED, "False", "AppliedManifestWorkFailed", 1)],
            vec![
                manifest(0, vec![condition(APPLIED, "True", "Applied", 1)]),
                manifest(
                    1,
                    vec![
                        condition(APPLIED, "False", "UnknownKind", 1),
                        condition(AVAILABLE, "False", "ResourceNotAvailable", 1),
                    ],
                ),
                manifest(2, vec![condition(APPLIED, "False", "ApplyConflict", 1)]),
            ],
        );
        let found = failures(&work);
        assert_eq!(found.len(), 3);
        assert_eq!(
            failing_cell(&found),
            "2 (ApplyConflict,ResourceNotAvailable,UnknownKind)"
        );
    }

    #[test]
    fn a_degraded_manifest_is_failing() {
        let work = work_with(
            vec![],
            vec![manifest(
                0,
                vec![
                    condition(APPLIED, "True", "Applied", 1),
                    condition(DEGRADED, "True", "ResourceDegraded", 1),
                ],
            )],
        );
        assert_eq!(failing_cell(&failures(&work)), "1 (ResourceDegraded)");
        let healthy = work_with(
            vec![],
            vec![manifest(
                0,
                vec![condition(DEGRADED, "False", "ResourceNotDegraded", 1)],
            )],
        );
        assert!(failures(&healthy).is_empty());
    }

    #[test]
    fn a_work_failing_as_a_whole_says_so() {
        let work = work_with(
            vec![condition(AVAILABLE, "False", "NoAgent", 1)],
            Vec::new(),
        );
        assert_eq!(failing_cell(&failures(&work)), "work (NoAgent)");
    }

    #[test]
    fn a_work_without_status_is_not_failing_and_shows_dashes() {
        let work = ManifestWork::new("new", ManifestWorkSpec::default());
        assert!(failures(&work).is_empty());
        assert_eq!(condition_cell(work_conditions(&work), APPLIED, None), "-");
    }

    #[test]
    fn conditions_of_an_older_generation_are_marked_stale() {
        let conditions = vec![condition(APPLIED, "True", "Applied", 1)];
        assert_eq!(
            condition_cell(&conditions, APPLIED, Some(2)),
            "True (stale)"
        );
        assert_eq!(condition_cell(&conditions, APPLIED, Some(1)), "True");
        // An unset observedGeneration (0) says nothing about staleness.
        let unset = vec![condition(APPLIED, "True", "Applied", 0)];
        assert_eq!(condition_cell(&unset, APPLIED, Some(2)), "True");
    }
}
