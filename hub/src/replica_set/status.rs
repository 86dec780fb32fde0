//! Reconcile phase 5: the replica set's status. Its works counted by state,
//! in all and per placement, and its conditions: placements verified,
//! rollout, works applied and overrides rendered (OCM's, and ferry's
//! `OverridesRendered`).

use std::collections::BTreeMap;
use std::sync::Arc;

use ferry_semantics::contract::{
    APPLIED, AVAILABLE, DEGRADED, MANDATORY_GROUP_FAILED, MANIFESTWORK_APPLIED, OVERRIDES_RENDERED,
    PLACEMENT_DECISION_NOT_FOUND, PLACEMENT_ROLLED_OUT, PLACEMENT_VERIFIED, PROGRESSING,
};
use ferry_semantics::text::first_few;
use k8s_openapi::jiff::Timestamp;
use kube::{Resource, ResourceExt};

use super::chosen::Chosen;
use super::plan::RolloutPlan;
use super::render::Rendered;
use super::work_writes::Refused;
use crate::conditions::condition_since;
use ferry_api::contract::PLACEMENT_NAME_LABEL;
use ferry_api::manifest_work::{Condition, ManifestWork};
use ferry_api::replica_set::{
    ManifestWorkReplicaSet, ManifestWorkReplicaSetStatus, ManifestWorkSummary, PlacementSummary,
};

/// The condition of `type_` of `work`, when it is True.
fn condition_true<'a>(work: &'a ManifestWork, type_: &str) -> Option<&'a Condition> {
    work.status.as_ref().and_then(|s| {
        s.conditions
            .iter()
            .find(|c| c.type_ == type_ && c.status == "True")
    })
}

/// Counts `works` by state; `is_current` says whether a work holds its
/// cluster's rendering of the current template.
pub fn summarize<'a>(
    works: impl Iterator<Item = &'a Arc<ManifestWork>>,
    is_current: impl Fn(&ManifestWork) -> bool,
) -> ManifestWorkSummary {
    let mut s = ManifestWorkSummary::default();
    for work in works {
        let generation = work.meta().generation.unwrap_or(0);
        s.total += 1;
        if condition_true(work, APPLIED).is_some_and(|c| c.observed_generation == generation) {
            s.applied += 1;
        }
        if condition_true(work, AVAILABLE).is_some() {
            s.available += 1;
        }
        if condition_true(work, DEGRADED).is_some() {
            s.degraded += 1;
        }
        if condition_true(work, PROGRESSING).is_some() {
            s.progressing += 1;
        }
        if is_current(work) {
            s.updated += 1;
        }
    }
    s
}

/// The status of `rs`: its generated `works` of the `chosen` clusters
/// counted against their `rendered` specs, and its conditions from the
/// placements, the works the API server `refused`, the rollout `plan` and
/// the renderings. While a placement is missing only `PlacementVerified`
/// changes: the rest stands as it was, like the works (OCM).
pub fn replica_set_status(
    rs: &ManifestWorkReplicaSet,
    chosen: &Chosen,
    works: &BTreeMap<String, Arc<ManifestWork>>,
    rendered: &Rendered,
    refused: &Refused,
    plan: &RolloutPlan,
    now: Timestamp,
) -> ManifestWorkReplicaSetStatus {
    let generation = rs.meta().generation.unwrap_or(0);
    let current = rs.status.clone().unwrap_or_default().conditions;
    if !chosen.missing.is_empty() {
        let mut status = rs.status.clone().unwrap_or_default();
        let verified = condition_since(
            PLACEMENT_VERIFIED,
            false,
            PLACEMENT_DECISION_NOT_FOUND,
            format!(
                "placement {} not found: no work is written or deleted until it is back",
                first_few(&chosen.missing, ", ")
            ),
            generation,
            &current,
            now,
        );
        status.conditions.retain(|c| c.type_ != PLACEMENT_VERIFIED);
        status.conditions.insert(0, verified);
        return status;
    }
    let wanted = &chosen.wanted;
    let problems: Vec<String> = chosen
        .problems
        .iter()
        .chain(&plan.problems)
        .cloned()
        .collect();
    // Each refused work, named with its cluster and the API server's word.
    let refusals = refused
        .iter()
        .map(|(cluster, r)| format!("cluster {cluster}: {}", r.describe()))
        .collect::<Vec<_>>();
    let render_failures: Vec<String> = rendered
        .iter()
        .filter_map(|(cluster, r)| Some(format!("cluster {cluster}: {}", r.as_ref().err()?)))
        .collect();
    let is_current = |work: &ManifestWork| {
        work.namespace()
            .and_then(|c| rendered.get(&c))
            .is_some_and(|r| r.as_ref().is_ok_and(|spec| &work.spec == spec))
    };
    // The status counts what the cache shows; the writes above come
    // back through the work watch and reconcile again.
    let summary = summarize(
        works
            .values()
            .filter(|w| wanted.contains_key(&w.namespace().unwrap_or_default())),
        is_current,
    );
    let placement_summary = rs
        .spec
        .placement_refs
        .iter()
        .map(|r| PlacementSummary {
            name: r.name.clone(),
            summary: summarize(
                works
                    .values()
                    .filter(|w| w.labels().get(PLACEMENT_NAME_LABEL) == Some(&r.name)),
                is_current,
            ),
        })
        .collect();
    let total = i32::try_from(wanted.len()).unwrap_or(i32::MAX);
    let judged = |type_: &str, (ok, reason, message): Judged| {
        condition_since(type_, ok, reason, message, generation, &current, now)
    };
    let mut conditions = vec![
        judged(PLACEMENT_VERIFIED, verified(&problems)),
        judged(
            PLACEMENT_ROLLED_OUT,
            rolled_out(rs, plan, &summary, total, &refusals),
        ),
        judged(MANIFESTWORK_APPLIED, applied(&summary, total)),
    ];
    if let Some(overrides) = overrides_rendered(rs, rendered, &render_failures) {
        conditions.push(judged(OVERRIDES_RENDERED, overrides));
    }
    let mut status = ManifestWorkReplicaSetStatus {
        conditions,
        summary,
        placement_summary,
        rollout: None,
        deletion_budget: None,
    };
    // The gates' memory: read back by the next reconcile.
    if !plan.placements.is_empty() {
        status.rollout.get_or_insert_default().placements = plan.placements.clone();
    }
    status
}

/// A condition's verdict: whether it holds, its reason and its message.
type Judged = (bool, &'static str, String);

/// `PlacementVerified`: every placement found, else the problems.
fn verified(problems: &[String]) -> Judged {
    if problems.is_empty() {
        (true, "AsExpected", "every placement is found".into())
    } else {
        (
            false,
            PLACEMENT_DECISION_NOT_FOUND,
            first_few(problems, "; "),
        )
    }
}

/// `message`, followed by the works the API server refused, if any.
fn with_refusals(message: String, refusals: &[String]) -> String {
    if refusals.is_empty() {
        message
    } else {
        format!("{message}; {}", first_few(refusals, "; "))
    }
}

/// `PlacementRolledOut`: failed, held by a failed mandatory group,
/// complete, paused or progressing, in that order.
fn rolled_out(
    rs: &ManifestWorkReplicaSet,
    plan: &RolloutPlan,
    summary: &ManifestWorkSummary,
    total: i32,
    refusals: &[String],
) -> Judged {
    if !plan.halted.is_empty() {
        (
            false,
            "Failed",
            with_refusals(first_few(&plan.halted, "; "), refusals),
        )
    } else if !plan.held.is_empty() {
        (
            false,
            MANDATORY_GROUP_FAILED,
            with_refusals(first_few(&plan.held, "; "), refusals),
        )
    } else if plan.all_complete && summary.updated == total && summary.total == total {
        (
            true,
            "Complete",
            format!("{total} clusters have the current template"),
        )
    } else if rs.spec.paused {
        (
            false,
            "Paused",
            format!(
                "paused with {} of {total} clusters at the current template",
                summary.updated
            ),
        )
    } else {
        (
            false,
            "Progressing",
            with_refusals(
                std::iter::once(format!(
                    "{} of {total} clusters have the current template",
                    summary.updated
                ))
                .chain(gate_holds(plan))
                .collect::<Vec<_>>()
                .join("; "),
                refusals,
            ),
        )
    }
}

/// `ManifestworkApplied`: every chosen cluster's work applied.
fn applied(summary: &ManifestWorkSummary, total: i32) -> Judged {
    if total > 0 && summary.applied == total {
        (true, "AsExpected", format!("{total} works applied"))
    } else if total == 0 {
        (false, "NotFound", "no cluster is chosen".into())
    } else {
        (
            false,
            "Processing",
            format!("{} of {total} works applied", summary.applied),
        )
    }
}

/// `OverridesRendered`, when there are overrides or a rendering failed.
fn overrides_rendered(
    rs: &ManifestWorkReplicaSet,
    rendered: &Rendered,
    failures: &[String],
) -> Option<Judged> {
    if !failures.is_empty() {
        Some((false, "OverrideFailed", first_few(failures, "; ")))
    } else if !rs.spec.overrides.is_empty() {
        Some((
            true,
            "AsExpected",
            format!("{} works rendered", rendered.len()),
        ))
    } else {
        None
    }
}

/// What the gates hold, for the rollout condition: each gate that opened
/// and has not passed, with its placement and message.
fn gate_holds(plan: &RolloutPlan) -> Vec<String> {
    plan.placements
        .iter()
        .flat_map(|p| {
            p.gates
                .iter()
                .filter(|g| g.state != "Passed" && g.state != "Pending")
                .map(move |g| {
                    format!(
                        "placement {}: gate after group {} is {}: {}",
                        p.name, g.after_group, g.state, g.message
                    )
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_api::manifest_work::{ManifestWorkSpec, ManifestWorkStatus};

    fn work(
        generation: i64,
        applied_for: Option<i64>,
        spec: ManifestWorkSpec,
    ) -> Arc<ManifestWork> {
        let mut w = ManifestWork::new("w", spec);
        w.metadata.generation = Some(generation);
        w.status = applied_for.map(|g| ManifestWorkStatus {
            conditions: vec![Condition {
                type_: APPLIED.into(),
                status: "True".into(),
                reason: "Applied".into(),
                observed_generation: g,
                ..Condition::default()
            }],
            ..ManifestWorkStatus::default()
        });
        Arc::new(w)
    }

    #[test]
    fn a_work_counts_as_applied_only_for_its_current_generation() {
        let template = ManifestWorkSpec::default();
        let works = [
            work(2, Some(2), template.clone()),
            work(3, Some(2), template.clone()),
            work(1, None, template.clone()),
        ];
        let s = summarize(works.iter(), |w| w.spec == template);
        assert_eq!((s.total, s.applied, s.updated, s.available), (3, 1, 3, 0));
    }
}

#[cfg(test)]
mod missing_placement_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_missing_placement_changes_only_placement_verified() {
        let rs: ManifestWorkReplicaSet = serde_json::from_value(json!({
            "apiVersion": "work.ferry.dev/v1alpha1",
            "kind": "ManifestWorkReplicaSet",
            "metadata": {"name": "app", "namespace": "ns", "generation": 2},
            "spec": {"manifestWorkTemplate": {}, "placementRefs": [{"name": "p"}]},
            "status": {
                "conditions": [
                    {"type": PLACEMENT_VERIFIED, "status": "True", "reason": "AsExpected",
                     "message": "", "observedGeneration": 1, "lastTransitionTime": "2026-11-23T10:00:00Z"},
                    {"type": PLACEMENT_ROLLED_OUT, "status": "True", "reason": "Complete",
                     "message": "1 clusters have the current template", "observedGeneration": 1,
                     "lastTransitionTime": "2026-11-23T10:00:00Z"},
                ],
                "summary": {"total": 1, "applied": 1, "available": 1, "degraded": 0, "progressing": 0, "updated": 1},
            },
        }))
        .expect("replica set");
        let chosen = Chosen {
            missing: vec!["p".into()],
            ..Chosen::default()
        };
        let plan = RolloutPlan {
            start: vec![],
            look_again: None,
            halted: vec![],
            halted_placements: vec![],
            held: vec![],
            all_complete: true,
            problems: vec![],
            placements: vec![],
            health_requests: vec![],
            waiting: vec![],
            waiting_for_dependencies: vec![],
        };
        let status = replica_set_status(
            &rs,
            &chosen,
            &BTreeMap::new(),
            &Rendered::new(),
            &Refused::new(),
            &plan,
            Timestamp::UNIX_EPOCH,
        );
        let verified = &status.conditions[0];
        assert_eq!(
            (
                verified.type_.as_str(),
                verified.status.as_str(),
                verified.reason.as_str()
            ),
            (PLACEMENT_VERIFIED, "False", PLACEMENT_DECISION_NOT_FOUND)
        );
        assert!(verified.message.contains("placement p not found"));
        assert_eq!(verified.observed_generation, 2);
        let before = rs.status.expect("status");
        assert_eq!(status.conditions[1], before.conditions[1]);
        assert_eq!(status.summary, before.summary);
    }
}

#[cfg(test)]
mod size_tests {
    use super::*;
    use crate::conditions::MAX_CONDITION_MESSAGE;
    use crate::replica_set::plan::halted_message;
    use crate::replica_set::render::RenderFailure;
    use crate::replica_set::work_writes::{Refusal, RefusedBy};
    use k8s_openapi::jiff::Timestamp;
    use serde_json::json;

    /// The status etcd must store for a fleet of 10,000 clusters where every
    /// cluster failed in its own words: built by the real status function,
    /// not by hand, so a list that grows with the fleet is caught.
    #[test]
    fn the_status_of_ten_thousand_distinctly_failing_clusters_stays_small() {
        let long = "x".repeat(40);
        let clusters: Vec<String> = (0..10_000)
            .map(|i| format!("cluster-{i:05}-{long}"))
            .collect();
        let placements: Vec<String> = (0..4).map(|p| format!("placement-{p}-{long}")).collect();
        let rs: ManifestWorkReplicaSet = serde_json::from_value(json!({
            "apiVersion": "work.ferry.dev/v1alpha1",
            "kind": "ManifestWorkReplicaSet",
            "metadata": {"name": "app", "namespace": "ns", "generation": 2},
            "spec": {"manifestWorkTemplate": {},
                     "placementRefs": placements.iter().map(|p| json!({"name": p})).collect::<Vec<_>>()},
        }))
        .expect("replica set");
        let chosen = Chosen {
            wanted: clusters
                .iter()
                .enumerate()
                .map(|(i, c)| (c.clone(), placements[i % 4].clone()))
                .collect(),
            problems: clusters
                .iter()
                .map(|c| format!("placement of {c} has no decisions: {long}"))
                .collect(),
            ..Chosen::default()
        };
        let refused: Refused = clusters
            .iter()
            .map(|c| {
                (
                    c.clone(),
                    Refusal {
                        spec_hash: 1,
                        by: RefusedBy::HubApiServer,
                        message: format!("admission webhook denied {c}: {long}"),
                        at: Timestamp::now(),
                    },
                )
            })
            .collect();
        let rendered: Rendered = clusters
            .iter()
            .map(|c| {
                (
                    c.clone(),
                    Err(RenderFailure::Selector {
                        name: format!("override-for-{c}"),
                        reason: format!("no label on {c}: {long}"),
                    }),
                )
            })
            .collect();
        let failed: Vec<&str> = clusters.iter().map(String::as_str).collect();
        let plan = RolloutPlan {
            start: vec![],
            look_again: None,
            halted: placements
                .iter()
                .map(|p| halted_message(p, &failed, 0))
                .collect(),
            halted_placements: placements.clone(),
            held: placements
                .iter()
                .map(|p| format!("placement {p}: held by {}", first_few(&failed, ", ")))
                .collect(),
            all_complete: false,
            problems: vec![],
            placements: vec![],
            health_requests: vec![],
            waiting: vec![],
            waiting_for_dependencies: vec![],
        };
        let status = replica_set_status(
            &rs,
            &chosen,
            &BTreeMap::new(),
            &rendered,
            &refused,
            &plan,
            Timestamp::UNIX_EPOCH,
        );
        let size = serde_json::to_vec(&status).expect("serialises").len();
        println!(
            "replica-set status with 10000 distinctly failing clusters: {size} bytes ({:.1} KiB)",
            size as f64 / 1024.0
        );
        assert!(
            status
                .conditions
                .iter()
                .all(|c| c.message.len() <= MAX_CONDITION_MESSAGE)
        );
        assert!(size <= 64 * 1024, "{size} bytes");
    }
}
