//! Reconcile phase 3: the rollout. For each placement, in its strategy's
//! order and limits, which clusters get the current template now, whether
//! the rollout is complete or halted, and when to look again for a soak or
//! a deadline that ends by time alone.

use std::collections::BTreeMap;
use std::sync::Arc;

use ferry_fleet_semantics::rollout::{ClusterState, RolloutCluster, next_step_with};
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::chosen::Chosen;
use super::depends::Hold;
use super::gates::{GateInputs, HealthRequest, gate_specs, placement_gates, recorded_rollout};
use super::render::Rendered;
use super::revisions::{holds_revision, spec_revision_digest, spec_revision_hash};
use super::rollout::{ResolvedStrategy, cluster_state, resolve};
use super::windows::Closed;
use super::work_writes::Refused;
use ferry_api::manifest_work::ManifestWork;
use ferry_api::replica_set::{ManifestWorkReplicaSet, PlacementRollout};
use ferry_semantics::text::first_few;

/// What the rollout does now.
#[derive(Debug)]
pub struct RolloutPlan {
    /// The clusters to write now, each with the placement choosing it.
    pub start: Vec<(String, String)>,
    /// The soonest a cluster's state changes by time alone.
    pub look_again: Option<SignedDuration>,
    /// Each placement whose rollout stopped at too many failures, and why.
    pub halted: Vec<String>,
    /// The names of those placements (their `failureStrategy` decides
    /// what happens next).
    pub halted_placements: Vec<String>,
    /// Each placement whose rollout a failed mandatory decision group
    /// holds, and which clusters failed there.
    pub held: Vec<String>,
    /// Whether every placement's rollout is complete.
    pub all_complete: bool,
    /// Each placement whose rollout strategy cannot be used, and why.
    pub problems: Vec<String>,
    /// Each placement's rollout: start, gates, late joiners, unreachable.
    pub placements: Vec<PlacementRollout>,
    /// The gates' health expressions this plan needed and `inputs` had
    /// no verdict for: evaluate them and plan again.
    pub health_requests: Vec<HealthRequest>,
    /// The clusters held for their maintenance window: they would be
    /// written a new revision (or their first work) now or later in this
    /// rollout, and their window is closed.
    pub waiting: Vec<(String, Closed)>,
    /// The clusters held for their dependencies (`dependsOn`): they would
    /// be written their first work now or later in this rollout, and a
    /// replica set they depend on is not ready there.
    pub waiting_for_dependencies: Vec<(String, Hold)>,
}

/// Plans the rollout of `rs` over the `chosen` clusters, from their
/// `rendered` works and the `existing` ones, as of `now`. A cluster whose
/// rendering the hub API server `refused` counts as failed. Gates, the
/// cohort and unreachable clusters (read from `inputs`) hold clusters back,
/// and so does a `closed` maintenance window: such a cluster is not
/// written a new revision (nor its first work), takes no `Progressive`
/// slot, does not count as failed, and keeps the rollout incomplete; the
/// plan looks again when its window opens. A rewrite of the revision the
/// cluster already holds (drift of its work, a new rendering of the same
/// revision) is not held. A cluster `dependencies` hold is held the same
/// way, but only for its first work: later revisions on a started cluster
/// are the agent's to gate (the works carry `dependsOn`).
#[allow(clippy::too_many_arguments)]
pub fn plan_rollout(
    rs: &ManifestWorkReplicaSet,
    chosen: &Chosen,
    rendered: &Rendered,
    existing: &BTreeMap<String, Arc<ManifestWork>>,
    refused: &Refused,
    inputs: &GateInputs,
    closed: &BTreeMap<String, Closed>,
    dependencies: &BTreeMap<String, Hold>,
    now: Timestamp,
) -> RolloutPlan {
    let revision = spec_revision_hash(&rs.spec);
    let digest = spec_revision_digest(&rs.spec);
    let mut placements = Vec::new();
    let (wanted, group_of) = (&chosen.wanted, &chosen.group_of);
    let mut problems = Vec::new();
    let mut start: Vec<(String, String)> = Vec::new();
    let mut look_again: Option<SignedDuration> = None;
    let mut halted = Vec::new();
    let mut halted_placements = Vec::new();
    let mut held = Vec::new();
    let mut all_complete = true;
    let mut health_requests = Vec::new();
    let mut waiting = Vec::new();
    let mut waiting_for_dependencies = Vec::new();
    for reference in &rs.spec.placement_refs {
        let mut clusters: Vec<(&(usize, String), &String)> = wanted
            .iter()
            .filter(|(_, p)| **p == reference.name)
            .filter_map(|(c, _)| Some((group_of.get(c)?, c)))
            .collect();
        clusters.sort_by(|a, b| (a.0.0, a.1).cmp(&(b.0.0, b.1)));
        let resolved = resolve(&reference.rollout_strategy, clusters.len())
            .and_then(|s| Ok((s, gate_specs(&reference.rollout_strategy)?)));
        let (strategy, gates) = match resolved {
            Ok(resolved) => resolved,
            Err(error) => {
                problems.push(format!("placement {}: {error}", reference.name));
                all_complete = false;
                continue;
            }
        };
        let (states, again) =
            cluster_states(&clusters, rendered, existing, refused, &strategy, now);
        look_again = sooner(look_again, again);
        let held_for_window = held_for_window(&states, existing, closed, &revision, &digest);
        let held_for_dependencies = held_for_dependencies(&states, existing, dependencies);
        for opens in held_for_window.iter().filter_map(|(_, c)| c.opens_at()) {
            let again = opens.duration_since(now).max(SignedDuration::from_secs(1));
            look_again = sooner(look_again, Some(again));
        }
        let mut gated = placement_gates(
            rs, reference, &gates, &revision, &states, existing, inputs, now,
        );
        look_again = sooner(look_again, gated.look_again);
        health_requests.extend(gated.health_requests);
        // Mid-rewrite the groups may hold the wrong clusters: the gates'
        // memory (a pass is kept for good) is not rewritten from them.
        let settled = !chosen.unsettled.contains_key(&reference.name);
        match recorded_rollout(rs, &reference.name) {
            Some(previous) if !settled => placements.push(previous.clone()),
            _ => placements.push(gated.status),
        }
        gated
            .context
            .held
            .extend(held_for_window.iter().map(|(c, _)| c.clone()));
        waiting.extend(held_for_window);
        gated
            .context
            .held
            .extend(held_for_dependencies.iter().map(|(c, _)| c.clone()));
        waiting_for_dependencies.extend(held_for_dependencies);
        let step = next_step_with(&strategy.limits, &states, &gated.context);
        all_complete &= step.complete;
        // A halt (and so a rollbackAll) needs a settled view: mid-rewrite
        // or with a decided cluster the caches do not know yet, what reads
        // as failures may be the gap itself (issue 31).
        if step.halted && settled {
            halted_placements.push(reference.name.clone());
            let failed = states
                .iter()
                .filter(|c| c.state == ClusterState::Failed)
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>();
            halted.push(halted_message(
                &reference.name,
                &failed,
                strategy.limits.max_failures,
            ));
        }
        if !step.held_by.is_empty() {
            held.push(held_by_mandatory(&reference.name, &states, &step.held_by));
        }
        // Mid-rewrite a cluster may stand in a group it is not in: nothing
        // of this placement starts until its decisions agree again (the
        // decision and placement watches bring the replica set back).
        if !settled {
            all_complete = false;
            continue;
        }
        start.extend(step.start.into_iter().map(|c| (c, reference.name.clone())));
    }
    RolloutPlan {
        start,
        look_again,
        halted,
        halted_placements,
        held,
        all_complete,
        problems,
        placements,
        health_requests,
        waiting,
        waiting_for_dependencies,
    }
}

/// The sooner of two times to look again.
fn sooner(a: Option<SignedDuration>, b: Option<SignedDuration>) -> Option<SignedDuration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Each of a placement's `clusters` ((group index, group name), cluster)
/// in its rollout state under `strategy`, and the soonest a state changes
/// by time alone.
fn cluster_states(
    clusters: &[(&(usize, String), &String)],
    rendered: &Rendered,
    existing: &BTreeMap<String, Arc<ManifestWork>>,
    refused: &Refused,
    strategy: &ResolvedStrategy,
    now: Timestamp,
) -> (Vec<RolloutCluster>, Option<SignedDuration>) {
    let mut look_again = None;
    let states = clusters
        .iter()
        .map(|((index, group), cluster)| {
            let (state, again) = match rendered.get(*cluster) {
                _ if refused.contains_key(*cluster) => (ClusterState::Failed, None),
                Some(Ok(spec)) => {
                    cluster_state(existing.get(*cluster).map(|w| &**w), spec, strategy, now)
                }
                _ => (ClusterState::Failed, None),
            };
            look_again = sooner(look_again, again);
            RolloutCluster {
                name: (*cluster).clone(),
                group_index: *index,
                group_name: group.clone(),
                state,
            }
        })
        .collect();
    (states, look_again)
}

/// The clusters whose window is `closed`, held like those the rollout has
/// not reached yet, when what each would be written is a new revision.
fn held_for_window(
    states: &[RolloutCluster],
    existing: &BTreeMap<String, Arc<ManifestWork>>,
    closed: &BTreeMap<String, Closed>,
    revision: &str,
    digest: &str,
) -> Vec<(String, Closed)> {
    states
        .iter()
        .filter(|c| c.state == ClusterState::ToApply)
        .filter(|c| {
            !existing
                .get(&c.name)
                .is_some_and(|w| holds_revision(w, revision, Some(digest)))
        })
        .filter_map(|c| Some((c.name.clone(), closed.get(&c.name)?.clone())))
        .collect()
}

/// The clusters whose `dependencies` are not ready, held like those the
/// rollout has not reached yet, when each would get its first work.
fn held_for_dependencies(
    states: &[RolloutCluster],
    existing: &BTreeMap<String, Arc<ManifestWork>>,
    dependencies: &BTreeMap<String, Hold>,
) -> Vec<(String, Hold)> {
    states
        .iter()
        .filter(|c| c.state == ClusterState::ToApply && !existing.contains_key(&c.name))
        .filter_map(|c| Some((c.name.clone(), dependencies.get(&c.name)?.clone())))
        .collect()
}

/// Why `placement`'s rollout is held by failed mandatory groups: the
/// groups of the clusters `held_by` names, and those clusters.
fn held_by_mandatory(placement: &str, states: &[RolloutCluster], held_by: &[String]) -> String {
    let groups: std::collections::BTreeSet<&str> = states
        .iter()
        .filter(|c| held_by.contains(&c.name))
        .map(|c| c.group_name.as_str())
        .collect();
    format!(
        "placement {placement}: held by failed mandatory decision group {} (cluster {}): mandatory groups tolerate no failure",
        first_few(&groups.into_iter().collect::<Vec<_>>(), ", "),
        first_few(held_by, ", ")
    )
}

/// Why a placement's rollout halted: its failed clusters, the first few
/// named, bounded whatever the fleet's size.
pub fn halted_message(placement: &str, failed: &[&str], max_failures: usize) -> String {
    format!(
        "placement {placement}: {} clusters failed ({}), more than maxFailures {max_failures}",
        failed.len(),
        first_few(failed, ", "),
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::replica_set::work_writes::{Refusal, RefusedBy, spec_hash};
    use ferry_api::manifest_work::ManifestWorkSpec;
    use serde_json::json;

    #[test]
    fn the_sooner_time_to_look_again_wins_and_none_is_no_time() {
        let (one, two) = (SignedDuration::from_secs(1), SignedDuration::from_secs(2));
        assert_eq!(sooner(Some(two), Some(one)), Some(one));
        assert_eq!(sooner(None, Some(two)), Some(two));
        assert_eq!(sooner(Some(one), None), Some(one));
        assert_eq!(sooner(None, None), None);
    }

    fn rs(strategy: serde_json::Value) -> ManifestWorkReplicaSet {
        serde_json::from_value(json!({
            "apiVersion": "work.ferry.dev/v1alpha1",
            "kind": "ManifestWorkReplicaSet",
            "metadata": {"name": "app", "namespace": "ns"},
            "spec": {"manifestWorkTemplate": {}, "placementRefs": [{"name": "p", "rolloutStrategy": strategy}]},
        }))
        .expect("replica set")
    }

    fn chosen() -> Chosen {
        let mut chosen = Chosen::default();
        for (cluster, group) in [("a", "canary"), ("b", "")] {
            chosen.wanted.insert(cluster.into(), "p".into());
            let index = usize::from(group.is_empty());
            chosen
                .group_of
                .insert(cluster.into(), (index, group.to_string()));
        }
        chosen
    }

    /// Cluster a's work refused by the hub API server.
    fn refused_a() -> Refused {
        Refused::from([(
            "a".to_string(),
            Refusal {
                spec_hash: spec_hash(&ManifestWorkSpec::default()),
                by: RefusedBy::HubApiServer,
                message: "422".into(),
                at: Timestamp::now(),
            },
        )])
    }

    fn rendered() -> Rendered {
        ["a", "b"]
            .into_iter()
            .map(|c| (c.to_string(), Ok(ManifestWorkSpec::default())))
            .collect()
    }

    #[test]
    fn a_refused_cluster_counts_as_failed_and_the_others_go_on() {
        let refused = refused_a();
        let now = Timestamp::now();
        let tolerant = rs(json!({"type": "All", "all": {"maxFailures": 1}}));
        let plan = plan_rollout(
            &tolerant,
            &chosen(),
            &rendered(),
            &BTreeMap::new(),
            &refused,
            &GateInputs::default(),
            &BTreeMap::new(),
            &BTreeMap::new(),
            now,
        );
        assert_eq!(plan.start, vec![("b".to_string(), "p".to_string())]);
        assert!(!plan.all_complete);
        let strict = rs(json!({"type": "All"}));
        let plan = plan_rollout(
            &strict,
            &chosen(),
            &rendered(),
            &BTreeMap::new(),
            &refused,
            &GateInputs::default(),
            &BTreeMap::new(),
            &BTreeMap::new(),
            now,
        );
        assert!(plan.start.is_empty());
        assert!(
            plan.halted[0].contains("1 clusters failed (a)"),
            "{:?}",
            plan.halted
        );
    }

    #[test]
    fn a_placement_whose_decisions_are_being_rewritten_starts_nothing() {
        let all = rs(json!({"type": "All"}));
        let plan_with = |chosen: &Chosen| {
            plan_rollout(
                &all,
                chosen,
                &rendered(),
                &BTreeMap::new(),
                &Refused::new(),
                &GateInputs::default(),
                &BTreeMap::new(),
                &BTreeMap::new(),
                Timestamp::now(),
            )
        };
        assert_eq!(plan_with(&chosen()).start.len(), 2);
        let mut rewriting = chosen();
        rewriting.unsettled.insert(
            "p".into(),
            "PlacementDecision p-decision-1 is moving".into(),
        );
        let plan = plan_with(&rewriting);
        assert!(plan.start.is_empty(), "{:?}", plan.start);
        assert!(!plan.all_complete);
        // Its rollout status is still reported.
        assert_eq!(plan.placements.len(), 1);
    }

    #[test]
    fn an_unsettled_placement_never_halts_whatever_its_failures() {
        let refused = refused_a();
        let strict = rs(json!({"type": "All"}));
        let plan_with = |chosen: &Chosen| {
            plan_rollout(
                &strict,
                chosen,
                &rendered(),
                &BTreeMap::new(),
                &refused,
                &GateInputs::default(),
                &BTreeMap::new(),
                &BTreeMap::new(),
                Timestamp::now(),
            )
        };
        assert_eq!(plan_with(&chosen()).halted_placements, ["p"]);
        let mut gap = chosen();
        gap.unsettled
            .insert("p".into(), "cluster a is not in the cache yet".into());
        let plan = plan_with(&gap);
        assert!(plan.halted_placements.is_empty(), "{:?}", plan.halted);
        assert!(plan.halted.is_empty());
        assert!(plan.start.is_empty() && !plan.all_complete);
    }

    #[test]
    fn a_failed_mandatory_group_is_named_in_the_plan() {
        let refused = refused_a();
        let guarded = rs(json!({"type": "Progressive", "progressive": {
            "maxFailures": "100%", "mandatoryDecisionGroups": [{"groupName": "canary"}]}}));
        let plan = plan_rollout(
            &guarded,
            &chosen(),
            &rendered(),
            &BTreeMap::new(),
            &refused,
            &GateInputs::default(),
            &BTreeMap::new(),
            &BTreeMap::new(),
            Timestamp::now(),
        );
        assert!(plan.start.is_empty());
        assert!(
            plan.held[0].contains("group canary (cluster a)"),
            "{:?}",
            plan.held
        );
    }

    #[test]
    fn a_cluster_held_for_its_dependencies_waits_for_its_first_work_only() {
        let all = rs(json!({"type": "All"}));
        let waiting_on = BTreeMap::from([("a".to_string(), Hold::NoWork("db".into()))]);
        let plan_with = |existing: &BTreeMap<String, Arc<ManifestWork>>| {
            plan_rollout(
                &all,
                &chosen(),
                &rendered(),
                existing,
                &Refused::new(),
                &GateInputs::default(),
                &BTreeMap::new(),
                &waiting_on,
                Timestamp::now(),
            )
        };
        let plan = plan_with(&BTreeMap::new());
        // a is held without taking the other cluster's turn.
        assert_eq!(plan.start, vec![("b".to_string(), "p".to_string())]);
        assert_eq!(
            plan.waiting_for_dependencies,
            vec![("a".to_string(), Hold::NoWork("db".into()))]
        );
        assert!(!plan.all_complete);
        // Once a has a work (an older revision), a new one is the agent's
        // to gate: the hub writes it.
        let mut older = (*succeeded_work(&all, "a")).clone();
        older.metadata.annotations.get_or_insert_default().insert(
            ferry_api::contract::REVISION_ANNOTATION.into(),
            "old".into(),
        );
        older.spec.delete_option = Some(Default::default());
        let started = BTreeMap::from([("a".to_string(), Arc::new(older))]);
        let plan = plan_with(&started);
        assert!(plan.waiting_for_dependencies.is_empty());
        assert!(plan.start.iter().any(|(c, _)| c == "a"), "{:?}", plan.start);
    }

    pub(crate) fn succeeded_work(rs: &ManifestWorkReplicaSet, cluster: &str) -> Arc<ManifestWork> {
        let condition = |type_: &str| {
            json!({"type": type_, "status": "True", "reason": "x", "observedGeneration": 1,
                   "lastTransitionTime": "2026-11-27T04:00:00Z"})
        };
        let work: ManifestWork = serde_json::from_value(json!({
            "apiVersion": "work.ferry.dev/v1", "kind": "ManifestWork",
            "metadata": {"name": "app", "namespace": cluster, "generation": 1,
                "creationTimestamp": "2026-11-27T03:00:00Z",
                "annotations": {ferry_api::contract::REVISION_ANNOTATION: spec_revision_hash(&rs.spec)}},
            "spec": {},
            "status": {"conditions": [condition("Applied"), condition("Available")]},
        }))
        .expect("work");
        Arc::new(work)
    }

    fn approval(
        rs: &ManifestWorkReplicaSet,
        by: &str,
    ) -> Arc<ferry_api::rollout_approval::RolloutApproval> {
        Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "work.ferry.dev/v1alpha1", "kind": "RolloutApproval",
                "metadata": {"name": "ok", "namespace": "ns", "creationTimestamp": "2026-11-27T04:20:00Z"},
                "spec": {"replicaSet": "app", "placement": "p", "afterGroup": "canary",
                    "revision": super::super::revisions::spec_revision_digest(&rs.spec), "approvedBy": by},
            }))
            .expect("approval"),
        )
    }

    fn passed_rs_revision_holder() -> ManifestWorkReplicaSet {
        rs(
            json!({"type": "ProgressivePerGroup", "progressivePerGroup": {
            "gates": [{"afterGroup": "canary", "approval": true}]}}),
        )
    }

    #[test]
    fn an_approval_gate_holds_the_next_group_until_approved_and_stays_passed() {
        let mut rs = rs(
            json!({"type": "ProgressivePerGroup", "progressivePerGroup": {
            "gates": [{"afterGroup": "canary", "approval": true}]}}),
        );
        let existing = BTreeMap::from([("a".to_string(), succeeded_work(&rs, "a"))]);
        let now: Timestamp = "2026-11-27T04:20:00Z".parse().expect("time");
        let plan_with = |rs: &ManifestWorkReplicaSet, inputs: &GateInputs| {
            plan_rollout(
                rs,
                &chosen(),
                &rendered(),
                &existing,
                &Refused::new(),
                inputs,
                &BTreeMap::new(),
                &BTreeMap::new(),
                now,
            )
        };
        let held = plan_with(&rs, &GateInputs::default());
        assert!(held.start.is_empty(), "{:?}", held.start);
        let gate = &held.placements[0].gates[0];
        assert_eq!(gate.state, "AwaitingApproval");
        assert_eq!(gate.opened_at, "2026-11-27T04:20:00.000Z");
        // A wrong revision does not let it through.
        let mut stale = (*approval(&rs, "alice")).clone();
        stale.spec.revision = "0000000000".into();
        // Nor the short hash of the right one, nor one made before this
        // rollout of the revision started.
        let mut short = (*approval(&rs, "alice")).clone();
        short.spec.revision = super::super::revisions::spec_revision_hash(&rs.spec);
        let mut early = (*approval(&rs, "alice")).clone();
        early.metadata.creation_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                "2026-11-27T04:19:59Z".parse().expect("time"),
            ));
        let inputs = GateInputs {
            approvals: vec![Arc::new(stale), Arc::new(short), Arc::new(early)],
            ..GateInputs::default()
        };
        let still = plan_with(&rs, &inputs);
        assert!(still.start.is_empty());
        let message = &still.placements[0].gates[0].message;
        assert!(
            message.contains("names the short revision hash"),
            "{message}"
        );
        assert!(
            message.contains("before this rollout of the revision started"),
            "{message}"
        );
        let inputs = GateInputs {
            approvals: vec![approval(&rs, "alice")],
            ..GateInputs::default()
        };
        let passed = plan_with(&rs, &inputs);
        assert_eq!(passed.start, vec![("b".to_string(), "p".to_string())]);
        let gate = &passed.placements[0].gates[0];
        assert_eq!(
            (
                gate.state.as_str(),
                gate.approved_by.as_str(),
                gate.approved_at.as_str()
            ),
            ("Passed", "alice", "2026-11-27T04:20:00.000Z")
        );
        // The status is the memory: with it, the gate stays passed even once
        // the approval is gone.
        rs.status = Some(ferry_api::replica_set::ManifestWorkReplicaSetStatus {
            rollout: Some(ferry_api::replica_set::RolloutStatus {
                placements: passed.placements.clone(),
                ..Default::default()
            }),
            ..Default::default()
        });
        let remembered = plan_with(&rs, &GateInputs::default());
        assert_eq!(remembered.start, vec![("b".to_string(), "p".to_string())]);
        assert_eq!(remembered.placements[0].gates[0].state, "Passed");
        // Another template sharing the 10-digit short hash (a birthday
        // search finds one in seconds) is another revision: the memory of
        // the first does not pass its gate.
        let mut colliding = rs.clone();
        if let Some(rollout) = colliding.status.as_mut().and_then(|s| s.rollout.as_mut()) {
            rollout.placements[0].revision_digest = "f".repeat(64);
        }
        let forged = plan_with(&colliding, &GateInputs::default());
        assert_eq!(forged.placements[0].gates[0].state, "AwaitingApproval");
        assert!(forged.start.is_empty(), "{:?}", forged.start);
        // A record from a hub that predates digests is matched by its short
        // hash, so an upgrade does not restart rollouts in progress.
        let mut legacy = rs.clone();
        if let Some(rollout) = legacy.status.as_mut().and_then(|s| s.rollout.as_mut()) {
            rollout.placements[0].revision_digest.clear();
        }
        assert_eq!(
            plan_with(&legacy, &GateInputs::default()).placements[0].gates[0].state,
            "Passed"
        );
        // A new template is a new revision: its gate starts afresh (the
        // test's renderings stay the same, so the canary still counts as
        // succeeded and the gate awaits a new approval).
        rs.spec.overrides = vec![
            serde_json::from_value(json!({"name": "o",
            "resourceIdentifier": {"kind": "ConfigMap", "name": "x"}, "jsonPatch": []}))
            .expect("override"),
        ];
        let fresh = plan_with(&rs, &GateInputs::default());
        assert_eq!(fresh.placements[0].gates[0].state, "AwaitingApproval");
        assert!(fresh.start.is_empty());
        let old_approval = GateInputs {
            approvals: vec![approval(&passed_rs_revision_holder(), "alice")],
            ..GateInputs::default()
        };
        assert!(plan_with(&rs, &old_approval).start.is_empty());
    }
}
