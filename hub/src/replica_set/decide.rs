//! Decide, then act (issue 31): one reconcile of a replica set as a pure
//! function. [`decide`] reads a [`Snapshot`] (everything the reconcile
//! reads) and returns a [`Decision`]: the records to write first, the works
//! to write and delete, the memory to keep, when to look again. The
//! controller only gathers the snapshot and carries the decision out, in
//! its order; [`decide_status`] makes the status from the works as they
//! stand after the writes. A leader taking over at any step decides again
//! from the status it reads, so it continues what was recorded and never
//! reverses it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use ferry_fleet_semantics::deletion_budget::Window;
use ferry_fleet_semantics::rollout_gates::GateState;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};

use super::bound::{CLUSTERS_REFUSED, refuse_unbound, refused_condition};
use super::budget::{Removals, fill_budget_status, removals};
use super::chosen::{Chosen, chosen_by_decisions};
use super::depends::{DependencyInputs, cycle_through, dependencies_condition, holds};
use super::gates::{GateInputs, HealthRequest};
use super::name_clash::{NAME_CONFLICT, Rival, Standing, conflict_condition, standing};
use super::plan::{RolloutPlan, plan_rollout};
use super::render::{Rendered, render_chosen};
use super::revision_status::{RevisionInputs, fill_revision_status};
use super::revisions::{Revision, current_revision, spec_revision_digest};
use super::rollback::{FailureOutcome, failure_outcome, rollback_to_record, rollback_writes};
use super::status::replica_set_status;
use super::windows::{closed_clusters, waiting_condition};
use super::work_writes::{REFUSAL_RETRY, Refused, WorkWrites, spec_hash};
use crate::cluster_sets::membership::{compile_sets, eligible};
use crate::conditions::condition_since;
use ferry_api::cluster_set::{ManagedClusterSet, ManagedClusterSetBinding};
use ferry_api::contract::CONFIRM_EMPTY_DECISIONS_ANNOTATION;
use ferry_api::managed_cluster::ManagedCluster;
use ferry_api::manifest_work::Condition;
use ferry_api::manifest_work::ManifestWork;
use ferry_api::placement::{Placement, PlacementDecision};
use ferry_api::replica_set::{
    ManifestWorkReplicaSet, ManifestWorkReplicaSetStatus, RevisionRef, RollbackStatus,
};
use ferry_api::rollout_approval::RolloutApproval;
use ferry_semantics::contract::PLACEMENT_DECISIONS_HELD;
use ferry_semantics::contract::{DEPENDENCIES_READY, WAITING_FOR_MAINTENANCE_WINDOW};
use ferry_semantics::text::{first_few, prefix_within};

/// Everything one reconcile of a replica set reads, taken once: the
/// decision is made from this and nothing else.
#[derive(Clone)]
pub struct Snapshot {
    /// The replica set, as current as the controller could read it.
    pub rs: Arc<ManifestWorkReplicaSet>,
    /// Every Placement the hub sees.
    pub placements: Vec<Arc<Placement>>,
    /// Every PlacementDecision the hub sees.
    pub decisions: Vec<Arc<PlacementDecision>>,
    /// Every ManagedClusterSet.
    pub sets: Vec<Arc<ManagedClusterSet>>,
    /// Every ManagedClusterSetBinding.
    pub bindings: Vec<Arc<ManagedClusterSetBinding>>,
    /// What the gates read: the clusters by name (also what renders and
    /// judges each cluster), the approvals, the placements' decision
    /// groups and the health verdicts evaluated so far.
    pub gates: GateInputs,
    /// The works the replica set generated, by cluster.
    pub existing: BTreeMap<String, Arc<ManifestWork>>,
    /// The stored revisions, after they were brought up to date.
    pub revisions: Vec<Revision>,
    /// Why each stored revision not in `revisions` was refused (its data
    /// does not hash to its name).
    pub refused_revisions: Vec<String>,
    /// The rollback this process remembers for the replica set (its
    /// status may lag in the cache).
    pub remembered: Option<RollbackStatus>,
    /// The works the hub API server refused, as remembered.
    pub refused: Refused,
    /// The replica sets of the namespace and the works and clusters of
    /// those `rs` depends on (empty without `dependsOn`).
    pub dependencies: DependencyInputs,
    /// Other namespaces' replica sets of the same name.
    pub rivals: Vec<Rival>,
    /// Now.
    pub now: Timestamp,
}

/// What one reconcile does, in the order it is done: record a rollback,
/// record the budget's window, write and delete works, remember, write the
/// status, look again.
#[derive(Debug)]
pub struct Decision<'a> {
    /// Health expressions the gates need and the snapshot has no verdict
    /// for: evaluate them, put them in the snapshot and decide again.
    pub health_requests: Vec<HealthRequest>,
    /// 1. The rollback to write into the status before any work (None
    ///    when there is none or the status holds it already).
    pub record_rollback: Option<RollbackStatus>,
    /// 2. What is removed: the deletion budget's window (if any) is
    ///    recorded before the deletions it allows; intended removals go at
    ///    the rollout's pace.
    pub removals: Removals,
    /// 3. The works to write and delete; None while a placement is
    ///    missing.
    pub works: Option<WorkWrites>,
    /// 4. The rollback to remember (None: forget it).
    pub rollback_memory: Option<RollbackStatus>,
    /// The refusals still standing (expired ones and those of a rendering
    /// the cluster no longer gets dropped).
    pub refused: Refused,
    /// The clusters chosen (unbound ones removed).
    pub chosen: Chosen,
    /// The decided clusters outside the namespace's bound sets.
    pub unbound: Vec<String>,
    /// Each chosen cluster's rendering of the current revision.
    pub rendered: Rendered,
    /// The current revision.
    pub current: RevisionRef,
    /// The stable revision the status held before.
    pub stable: Option<RevisionRef>,
    /// The rollout plan.
    pub plan: RolloutPlan,
    /// What the failure strategy makes of it.
    pub outcome: FailureOutcome<'a>,
    /// When a soak, a deadline or a refusal ends by time
    /// alone (None: only a change brings the replica set back).
    pub look_again: Option<Duration>,
    /// The gates (placement, afterGroup) this decision passes that the
    /// status as read does not hold passed, when clusters start after
    /// them: the status recording the pass is written before those works,
    /// so a leader taking over keeps the gate passed (a passed gate stays
    /// passed) instead of judging it again.
    pub record_gates: Vec<(String, String)>,
    /// The replica sets (this one among them) whose `dependsOn` form a
    /// cycle: none of them starts a cluster.
    pub dependency_cycle: Option<Vec<String>>,
    /// Where the replica set stands among others of its name: yielding,
    /// it writes no work to a cluster it holds none on.
    pub name_standing: Standing,
}

impl Decision<'_> {
    /// The budget window to record before the deletions, if any. Never
    /// fails.
    pub fn window_to_record(&self) -> Option<Window> {
        self.removals.budget.window
    }

    /// When to reconcile again, given whether the works just written were
    /// `newly_refused`. Never fails.
    pub fn action(&self, newly_refused: bool) -> Action {
        if self.works.is_none() {
            // The placement's return is seen by the placement watch.
            return Action::await_change();
        }
        // Decisions being rewritten come back through the placement and
        // decision watches; a refusal the plan has not counted yet does not.
        if newly_refused {
            return Action::requeue(Duration::from_secs(2));
        }
        match self.look_again {
            Some(after) => Action::requeue(after),
            None => Action::await_change(),
        }
    }
}

/// The gate inputs of `rs` from the hub's `placements`, `clusters` and
/// `approvals`, with no health verdict yet. Never fails.
pub fn gate_inputs(
    rs: &ManifestWorkReplicaSet,
    placements: &[Arc<Placement>],
    clusters: Vec<Arc<ManagedCluster>>,
    approvals: Vec<Arc<RolloutApproval>>,
) -> GateInputs {
    GateInputs {
        clusters: clusters.into_iter().map(|c| (c.name_any(), c)).collect(),
        approvals,
        defined_groups: placements
            .iter()
            .filter(|p| p.namespace() == rs.namespace())
            .map(|p| {
                let groups = p
                    .spec
                    .decision_strategy
                    .as_ref()
                    .map(|d| {
                        d.group_strategy
                            .decision_groups
                            .iter()
                            .map(|g| g.group_name.clone())
                            .collect()
                    })
                    .unwrap_or_default();
                (p.name_any(), groups)
            })
            .collect(),
        health: BTreeMap::new(),
    }
}

/// The placements of `namespace` holding their decisions after their grant
/// was lost.
fn held_placements(namespace: &str, placements: &[Arc<Placement>]) -> BTreeSet<String> {
    placements
        .iter()
        .filter(|p| p.namespace().as_deref() == Some(namespace))
        .filter(|p| {
            p.status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == PLACEMENT_DECISIONS_HELD && c.status == "True")
            })
        })
        .map(|p| p.name_any())
        .collect()
}

/// `PlacementDecisionsHeld=True` on the replica set while one of the
/// placements it references holds its decisions after a lost grant (the
/// replica set is where its team looks), naming them, the first one's
/// reason and how to let the removal through; None while none holds.
fn decisions_held_condition(
    rs: &ManifestWorkReplicaSet,
    placements: &[Arc<Placement>],
    generation: i64,
    previous: &[Condition],
    now: Timestamp,
) -> Option<Condition> {
    let namespace = rs.namespace().unwrap_or_default();
    let held = held_placements(&namespace, placements);
    let held: Vec<&Placement> = rs
        .spec
        .placement_refs
        .iter()
        .filter(|r| held.contains(&r.name))
        .filter_map(|r| {
            placements
                .iter()
                .find(|p| p.namespace().as_deref() == Some(&namespace) && p.name_any() == r.name)
                .map(|p| &**p)
        })
        .collect();
    let first = held.first()?;
    let reason = first
        .status
        .as_ref()
        .and_then(|s| {
            s.conditions
                .iter()
                .find(|c| c.type_ == PLACEMENT_DECISIONS_HELD)
        })
        .map(|c| (c.reason.clone(), prefix_within(&c.message, 512).to_string()))
        .unwrap_or_default();
    let names: Vec<String> = held.iter().map(|p| p.name_any()).collect();
    Some(condition_since(
        PLACEMENT_DECISIONS_HELD,
        true,
        if reason.0.is_empty() {
            "DecisionsHeld"
        } else {
            &reason.0
        },
        format!(
            "placement {} holds its last decisions, so no cluster leaves this replica set through it: {}; if the change is wanted, annotate the Placement {CONFIRM_EMPTY_DECISIONS_ANNOTATION}=true",
            first_few(&names, ", "),
            reason.1
        ),
        generation,
        previous,
        now,
    ))
}

/// Decides one reconcile of the snapshot's replica set, one phase after
/// the other: the chosen clusters, their renderings, the rollout plan, the
/// failure strategy, the deletion budget, the works. Pure: the same
/// snapshot gives the same decision. Never fails; what cannot be done is
/// in the decision (a cluster failed, a placement missing).
pub fn decide(s: &Snapshot) -> Decision<'_> {
    let rs = &*s.rs;
    let now = s.now;
    let mut chosen = chosen_by_decisions(rs, &s.placements, &s.decisions);
    let (unbound, deployable) = bound(s, &mut chosen);
    let rendered = render_chosen(&rs.spec, &chosen.wanted, &s.gates.clusters);
    let refused = still_refused(&s.refused, &rendered, now);
    let stable = rs
        .status
        .as_ref()
        .and_then(|s| s.rollout.as_ref())
        .and_then(|r| r.stable_revision.clone());
    let current = current_revision(&rs.spec, &s.revisions);
    // The plan decides which health expressions it needs; the caller runs
    // them on the bounded pool (awaited, never on a runtime worker) and
    // decides again, the same in everything but their verdicts.
    // Maintenance windows hold new revisions (never a rollback's writes,
    // never deletions: those are decided apart from the plan below).
    let closed = closed_clusters(&s.gates.clusters, now);
    // dependsOn holds a cluster's first work until the replica sets it
    // names are ready there (a cycle: everywhere).
    let dependency_cycle = (!rs.spec.depends_on.is_empty())
        .then(|| cycle_through(&rs.name_any(), &s.dependencies.replica_sets))
        .flatten();
    let waiting_on = holds(
        rs,
        chosen.wanted.keys(),
        dependency_cycle.is_some(),
        &s.dependencies,
    );
    let mut plan = plan_rollout(
        rs,
        &chosen,
        &rendered,
        &s.existing,
        &refused,
        &s.gates,
        &closed,
        &waiting_on,
        now,
    );
    let health_requests = std::mem::take(&mut plan.health_requests);
    // Past maxFailures the failure strategy decides: abortAll leaves
    // every cluster where it is, rollbackAll writes the stable revision
    // to the clusters holding the failed one.
    let outcome = failure_outcome(
        rs,
        s.remembered.as_ref(),
        &current,
        stable.as_ref(),
        &s.revisions,
        &plan,
        now,
    );
    let rollback_memory = match &outcome {
        FailureOutcome::RollBack { status, .. } => Some(status.clone()),
        _ => None,
    };
    // Decide, then act: a rollback is in the status before the first
    // of its works is written, so a leader taking over in between
    // continues it (failure_outcome reads it back) and never pushes
    // the failed revision out again.
    let record_rollback = rollback_to_record(rs, &outcome).cloned();
    // The deletion budget: the window is recorded before its deletions
    // are made, so a new leader continues it.
    let removals = removals(
        rs,
        &deployable,
        &chosen.wanted,
        chosen.missing.is_empty() && chosen.may_delete(),
        now,
    );
    let name_standing = standing(rs, &s.rivals);
    let look_again = look_again(&plan, &refused, now);
    let mut decision = Decision {
        health_requests,
        record_rollback,
        removals,
        works: None,
        rollback_memory,
        refused,
        chosen,
        unbound,
        rendered,
        current,
        stable,
        plan,
        outcome,
        look_again,
        record_gates: Vec::new(),
        dependency_cycle,
        name_standing,
    };
    // A missing placement stops everything (OCM): its clusters are not
    // in the decisions, and deleting their works would take the
    // application off them.
    if decision.chosen.missing.is_empty() {
        let works = work_writes(s, &decision, deployable);
        // A gate that passes now is recorded before the first work after it.
        if !works.start.is_empty() {
            decision.record_gates = gates_passing_now(rs, &decision.plan);
        }
        decision.works = Some(works);
    }
    decision
}

/// Keeps `chosen` to the clusters of the sets bound to the snapshot's
/// namespace (decisions are data a tenant could have written: a cluster
/// outside them is never written a work) and those the cluster cache
/// knows; returns the clusters refused as unbound, and the works the
/// reconcile may touch (all but those of unbound clusters).
fn bound(s: &Snapshot, chosen: &mut Chosen) -> (Vec<String>, BTreeMap<String, Arc<ManifestWork>>) {
    let namespace = s.rs.namespace().unwrap_or_default();
    let clusters: Vec<Arc<ManagedCluster>> = s.gates.clusters.values().cloned().collect();
    let eligible = eligible(
        &compile_sets(&s.sets),
        &s.bindings,
        &namespace,
        &[],
        &clusters,
    );
    // A placement holding its decisions after its grant was lost (a
    // condition only the hub writes) keeps its clusters: the hold is
    // what keeps a lost binding from removing the application.
    let held = held_placements(&namespace, &s.placements);
    // A decided cluster the cluster cache does not hold yet can be
    // neither rendered nor judged: its placement waits (no start, no
    // deletion, no halt) until the cache catches up.
    chosen.unsettle_unknown(|cluster| s.gates.clusters.contains_key(cluster));
    let unbound = refuse_unbound(chosen, &eligible, &held);
    // Their works, if any, are neither rewritten nor deleted here.
    let deployable: BTreeMap<String, Arc<ManifestWork>> = s
        .existing
        .iter()
        .filter(|(cluster, _)| !unbound.contains(cluster))
        .map(|(c, w)| (c.clone(), w.clone()))
        .collect();
    (unbound, deployable)
}

/// The refusals that still stand at `now`: those of the rendering each
/// cluster still gets, younger than [`REFUSAL_RETRY`].
fn still_refused(refused: &Refused, rendered: &Rendered, now: Timestamp) -> Refused {
    let mut refused = refused.clone();
    refused.retain(|cluster, r| {
        now.duration_since(r.at) < REFUSAL_RETRY
            && rendered
                .get(cluster)
                .is_some_and(|spec| spec.as_ref().is_ok_and(|s| spec_hash(s) == r.spec_hash))
    });
    refused
}

/// The works one reconcile writes and deletes, once every placement is
/// found, for `decision` (made from `s` in everything else): the plan's
/// clusters with the current rendering, or a rollback's with the stable
/// one; none new when an older replica set holds the name. `deployable`:
/// the works it may touch.
fn work_writes(
    s: &Snapshot,
    decision: &Decision<'_>,
    deployable: BTreeMap<String, Arc<ManifestWork>>,
) -> WorkWrites {
    let rs = &*s.rs;
    let Decision {
        chosen,
        outcome,
        plan,
        rendered,
        current,
        removals,
        name_standing,
        ..
    } = decision;
    let (start, to_write, revision) = match &outcome {
        FailureOutcome::RollBack { to, .. } => {
            let stable = render_chosen(&to.spec, &chosen.wanted, &s.gates.clusters);
            // A recorded rollback goes on whatever the view, but never
            // to a decided cluster the cache lacks (one a held
            // placement keeps): its stable rendering would lack the
            // cluster's labels. It is written back once the cache
            // knows it.
            let start = rollback_writes(current, &chosen.wanted, &s.existing, rendered, &stable)
                .into_iter()
                .filter(|(cluster, _)| s.gates.clusters.contains_key(cluster))
                .collect();
            let digest = spec_revision_digest(&to.spec);
            (start, stable, (to.reference.hash.clone(), digest))
        }
        _ => (
            plan.start.clone(),
            rendered.clone(),
            (current.hash.clone(), spec_revision_digest(&rs.spec)),
        ),
    };
    let (revision, digest) = revision;
    // An older replica set of the same name holds the name: no new
    // work (one already held stays this replica set's to write).
    let start: Vec<(String, String)> = match name_standing {
        Standing::Yields => start
            .into_iter()
            .filter(|(cluster, _)| s.existing.contains_key(cluster))
            .collect(),
        _ => start,
    };
    let specs = start
        .iter()
        .filter_map(|(cluster, _)| Some((cluster.clone(), to_write.get(cluster)?.clone())))
        .collect();
    WorkWrites {
        start,
        specs,
        revision,
        digest,
        existing: deployable,
        delete: removals.delete(),
    }
}

/// The gates `plan` holds passed that the status of `rs` as read does not
/// hold passed for the same revision, as (placement, afterGroup). Never
/// fails.
pub fn gates_passing_now(rs: &ManifestWorkReplicaSet, plan: &RolloutPlan) -> Vec<(String, String)> {
    let passed = GateState::Passed.as_str();
    let recorded: BTreeSet<(&str, &str, &str)> = rs
        .status
        .as_ref()
        .and_then(|s| s.rollout.as_ref())
        .map(|r| r.placements.as_slice())
        .unwrap_or_default()
        .iter()
        .flat_map(|p| {
            p.gates
                .iter()
                .filter(|g| g.state == passed)
                .map(|g| (p.name.as_str(), p.revision.as_str(), g.after_group.as_str()))
        })
        .collect();
    plan.placements
        .iter()
        .flat_map(|p| {
            p.gates
                .iter()
                .filter(|g| g.state == passed)
                .filter(|g| {
                    !recorded.contains(&(
                        p.name.as_str(),
                        p.revision.as_str(),
                        g.after_group.as_str(),
                    ))
                })
                .map(|g| (p.name.clone(), g.after_group.clone()))
        })
        .collect()
}

/// The soonest a soak, a deadline or a refusal ends by time alone, at
/// least half a second away; None when none does (a deletion hold waits for
/// a release, which is a change).
fn look_again(plan: &RolloutPlan, refused: &Refused, now: Timestamp) -> Option<Duration> {
    // A soak, a deadline or a refusal ends by time alone: look again
    // then.
    let retry = refused
        .values()
        .map(|r| REFUSAL_RETRY - now.duration_since(r.at))
        .min();
    let after = match (plan.look_again, retry) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }?;
    Some(
        Duration::try_from(after)
            .unwrap_or_default()
            .max(Duration::from_millis(500)),
    )
}

/// The status of the snapshot's replica set once `decision` is carried
/// out: its generated `works` as they stand after the writes (the writes
/// come back through the work watch and reconcile again) and the works the
/// hub API server `refused` by then. Pure; never fails.
pub fn decide_status(
    s: &Snapshot,
    decision: &Decision<'_>,
    works: &BTreeMap<String, Arc<ManifestWork>>,
    refused: &Refused,
) -> ManifestWorkReplicaSetStatus {
    let rs = &*s.rs;
    let namespace = rs.namespace().unwrap_or_default();
    let chosen = &decision.chosen;
    let mut status = replica_set_status(
        rs,
        chosen,
        works,
        &decision.rendered,
        refused,
        &decision.plan,
        s.now,
    );
    let generation = rs.meta().generation.unwrap_or(0);
    // Its transition time comes from the status as written before (the
    // status built above does not carry this condition).
    let previous = rs
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or_default();
    let cluster_sets =
        refused_condition(&decision.unbound, &namespace, generation, previous, s.now);
    status
        .conditions
        .retain(|c| c.type_ != CLUSTERS_REFUSED && c.type_ != NAME_CONFLICT);
    status.conditions.push(cluster_sets);
    status.conditions.extend(conflict_condition(
        rs,
        decision.name_standing,
        generation,
        previous,
        s.now,
    ));
    if chosen.missing.is_empty() {
        fill_revision_status(
            rs,
            &mut status,
            &RevisionInputs {
                chosen,
                works,
                rendered: &decision.rendered,
                refused,
                revisions: &s.revisions,
                refused_revisions: &s.refused_revisions,
                current: &decision.current,
                stable: decision.stable.as_ref(),
                outcome: &decision.outcome,
                clusters: &s.gates.clusters,
                now: s.now,
            },
        );
    }
    fill_budget_status(rs, &mut status, &decision.removals.budget, s.now);
    // Only while the rollout plan is in charge: a rollback's writes are
    // not held, so nothing waits then.
    let waiting = match decision.outcome {
        FailureOutcome::RollBack { .. } => &[][..],
        _ => decision.plan.waiting.as_slice(),
    };
    status
        .conditions
        .retain(|c| c.type_ != WAITING_FOR_MAINTENANCE_WINDOW);
    if let Some(windows) = waiting_condition(waiting, generation, previous, s.now) {
        status.conditions.push(windows);
    }
    status
        .conditions
        .retain(|c| c.type_ != PLACEMENT_DECISIONS_HELD);
    if let Some(held) = decisions_held_condition(rs, &s.placements, generation, previous, s.now) {
        status.conditions.push(held);
    }
    status.conditions.retain(|c| c.type_ != DEPENDENCIES_READY);
    if let Some(dependencies) = dependencies_condition(
        rs,
        decision.dependency_cycle.as_deref(),
        &decision.plan.waiting_for_dependencies,
        generation,
        previous,
        s.now,
    ) {
        status.conditions.push(dependencies);
    }
    status
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::replica_set::chosen::tests::{decision, placement};
    use crate::replica_set::plan::tests::succeeded_work;
    use crate::replica_set::revisions::{spec_revision_digest, spec_revision_hash};
    use crate::replica_set::rollback::Abort;
    use crate::replica_set::rollback::ROLLBACK_ALL;
    use crate::replica_set::rollback::tests::{rs as progressive_rs, spec, work};
    use ferry_api::replica_set::{ManifestWorkReplicaSetSpec, RolloutStatus};
    use serde_json::json;

    /// The clusters placement p chooses.
    const CLUSTERS: [&str; 3] = ["a", "b", "c"];

    /// When the works of the failed revision were written.
    const WRITTEN: &str = "2026-11-27T10:00:00Z";

    fn now() -> Timestamp {
        "2026-11-27T10:10:00Z".parse().expect("time")
    }

    /// Revision 1: the template holding "good".
    fn stable_spec() -> ManifestWorkReplicaSetSpec {
        let mut spec_ = progressive_rs(ROLLBACK_ALL).spec;
        spec_.manifest_work_template = spec("good");
        spec_
    }

    fn stable() -> RevisionRef {
        RevisionRef {
            number: 1,
            hash: spec_revision_hash(&stable_spec()),
            digest: Some(spec_revision_digest(&stable_spec())),
        }
    }

    /// A Progressive replica set with `failureStrategy: rollbackAll`
    /// rolling out revision 2 (its template holds "bad"), revision 1
    /// stable.
    fn failing_rs() -> ManifestWorkReplicaSet {
        let mut rs = progressive_rs(ROLLBACK_ALL);
        rs.spec.manifest_work_template = spec("bad");
        rs.status = Some(ManifestWorkReplicaSetStatus {
            rollout: Some(RolloutStatus {
                stable_revision: Some(stable()),
                ..RolloutStatus::default()
            }),
            ..ManifestWorkReplicaSetStatus::default()
        });
        rs
    }

    /// The failed revision's hash.
    fn bad() -> String {
        spec_revision_hash(&failing_rs().spec)
    }

    /// A work holding `value` of `revision`, Degraded when `failed`.
    fn held(value: &str, revision: &str, failed: bool) -> Arc<ManifestWork> {
        let mut w = (*work(spec(value), Some(revision), WRITTEN)).clone();
        if failed {
            w.status = Some(
                serde_json::from_value(json!({"conditions": [{"type": "Degraded",
                    "status": "True", "reason": "CrashLoop", "lastTransitionTime": WRITTEN}]}))
                .expect("status"),
            );
        }
        Arc::new(w)
    }

    /// A connected cluster (one never connected is unreachable: the
    /// rollout neither waits for it nor counts its failures).
    fn cluster(name: &str) -> Arc<ManagedCluster> {
        Arc::new(
            serde_json::from_value(json!({"apiVersion": "work.ferry.dev/v1alpha1",
                "kind": "ManagedCluster", "metadata": {"name": name}, "spec": {},
                "status": {"connected": true, "lastSeenTime": WRITTEN}}))
            .expect("cluster"),
        )
    }

    /// A set of every cluster, bound to namespace ns.
    pub(crate) fn everything() -> (Arc<ManagedClusterSet>, Arc<ManagedClusterSetBinding>) {
        let set = serde_json::from_value(json!({"apiVersion": "cluster.ferry.dev/v1alpha1",
            "kind": "ManagedClusterSet", "metadata": {"name": "all"},
            "spec": {"clusterSelector": {"selectorType": "LabelSelector", "labelSelector": {}}}}))
        .expect("set");
        let binding = serde_json::from_value(json!({"apiVersion": "cluster.ferry.dev/v1alpha1",
            "kind": "ManagedClusterSetBinding", "metadata": {"name": "all", "namespace": "ns"},
            "spec": {"clusterSet": "all"}}))
        .expect("binding");
        (Arc::new(set), Arc::new(binding))
    }

    /// What a reconcile of `rs` reads when placement p chose `chosen`, the
    /// cluster cache holds `known` and `rs` generated `existing`; the
    /// revisions are the stable one and `rs`'s own; nothing remembered.
    fn snapshot(
        rs: ManifestWorkReplicaSet,
        chosen: &[&str],
        known: &[&str],
        existing: &[(&str, Arc<ManifestWork>)],
    ) -> Snapshot {
        let count = i32::try_from(chosen.len()).expect("few");
        let placements = vec![placement(&[(0, "", &["p-decision-1"], count)])];
        let revisions = vec![
            Revision {
                reference: stable(),
                spec: stable_spec(),
                created: None,
            },
            Revision {
                reference: RevisionRef {
                    number: 2,
                    hash: spec_revision_hash(&rs.spec),
                    digest: Some(spec_revision_digest(&rs.spec)),
                },
                spec: rs.spec.clone(),
                created: None,
            },
        ];
        let (set, binding) = everything();
        Snapshot {
            gates: gate_inputs(
                &rs,
                &placements,
                known.iter().map(|c| cluster(c)).collect(),
                Vec::new(),
            ),
            rs: Arc::new(rs),
            placements,
            decisions: vec![decision("p-decision-1", 0, "", chosen)],
            sets: vec![set],
            bindings: vec![binding],
            existing: existing
                .iter()
                .map(|(c, w)| (c.to_string(), w.clone()))
                .collect(),
            revisions,
            refused_revisions: Vec::new(),
            remembered: None,
            refused: Refused::new(),
            dependencies: DependencyInputs::default(),
            rivals: Vec::new(),
            now: now(),
        }
    }

    /// Every chosen cluster's work holding the failed revision, Degraded.
    fn all_failed() -> Vec<(&'static str, Arc<ManifestWork>)> {
        CLUSTERS.map(|c| (c, held("bad", &bad(), true))).to_vec()
    }

    /// The clusters `decision` writes a work to.
    fn written(decision: &Decision<'_>) -> Vec<String> {
        decision
            .works
            .as_ref()
            .map(|w| w.start.iter().map(|(c, _)| c.clone()).collect())
            .unwrap_or_default()
    }

    /// Every work `decision` writes is the stable revision, rendered.
    fn assert_writes_stable(decision: &Decision<'_>) {
        let works = decision.works.as_ref().expect("works are written");
        assert_eq!(works.revision, stable().hash, "the failed revision written");
        for (cluster, _) in &works.start {
            assert_eq!(
                works.specs.get(cluster),
                Some(&Ok(spec("good"))),
                "cluster {cluster} is not written the stable rendering"
            );
        }
    }

    /// The rollback the first leader decides, as it records it.
    fn first_rollback() -> RollbackStatus {
        let s = snapshot(failing_rs(), &CLUSTERS, &CLUSTERS, &all_failed());
        decide(&s).record_rollback.expect("recorded")
    }

    /// `failing_rs` whose status records `rollback`.
    fn recorded(rollback: &RollbackStatus) -> ManifestWorkReplicaSet {
        let mut rs = failing_rs();
        if let Some(rollout) = rs.status.as_mut().and_then(|s| s.rollout.as_mut()) {
            rollout.rollback = Some(rollback.clone());
        }
        rs
    }

    #[test]
    fn a_failed_revision_past_max_failures_is_recorded_then_rolled_back() {
        let s = snapshot(failing_rs(), &CLUSTERS, &CLUSTERS, &all_failed());
        let d = decide(&s);
        assert_eq!(d.plan.halted_placements, ["p"]);
        assert!(matches!(d.outcome, FailureOutcome::RollBack { .. }));
        // The record comes first: the status does not hold it yet.
        let record = d
            .record_rollback
            .clone()
            .expect("recorded before any write");
        assert_eq!((&record.from.hash, &record.to), (&bad(), &stable()));
        assert_eq!(record.at, "2026-11-27T10:10:00Z");
        assert_eq!(d.rollback_memory.as_ref(), Some(&record));
        assert_eq!(written(&d), CLUSTERS);
        assert_writes_stable(&d);
        // The status written at the end says so too.
        let status = decide_status(&s, &d, &s.existing, &d.refused);
        let rollback = status.rollout.and_then(|r| r.rollback).expect("rollback");
        assert_eq!(rollback.to, stable());
    }

    #[test]
    fn a_stable_revision_whose_digest_is_another_templates_is_never_rolled_back_to() {
        // The status names the stable revision by its whole digest; a
        // stored revision with the same 40-bit hash but another digest
        // (a clash found by a birthday search) is not it.
        let mut rs = failing_rs();
        let rollout = rs
            .status
            .as_mut()
            .and_then(|s| s.rollout.as_mut())
            .expect("rollout");
        rollout.stable_revision = Some(RevisionRef {
            digest: Some("f".repeat(64)),
            ..stable()
        });
        let s = snapshot(rs, &CLUSTERS, &CLUSTERS, &all_failed());
        let d = decide(&s);
        assert!(
            matches!(
                d.outcome,
                FailureOutcome::Aborted {
                    why: Abort::NoStable
                }
            ),
            "{:?}",
            d.outcome
        );
        assert!(written(&d).is_empty(), "{:?}", written(&d));
    }

    #[test]
    fn a_rollback_never_writes_as_an_executor_the_template_in_force_does_not_name() {
        // Revision 1 ran as a privileged executor; the author's template
        // in force (admitted by the executor policy) names none. Rolling
        // back would write revision 1's executor with the hub's rights.
        let mut s = snapshot(failing_rs(), &CLUSTERS, &CLUSTERS, &all_failed());
        let stable = s
            .revisions
            .iter_mut()
            .find(|r| r.reference == stable())
            .expect("stable revision");
        stable.spec.manifest_work_template.executor = Some(
            serde_json::from_value(json!({"subject": {"type": "ServiceAccount",
                "serviceAccount": {"namespace": "kube-system", "name": "admin"}}}))
            .expect("executor"),
        );
        let d = decide(&s);
        let FailureOutcome::Aborted {
            why: Abort::OtherExecutor { stable, current },
        } = &d.outcome
        else {
            panic!("{:?}", d.outcome);
        };
        assert_eq!(stable, "ServiceAccount kube-system/admin");
        assert!(current.starts_with("none"), "{current}");
        assert!(d.record_rollback.is_none());
        assert!(written(&d).is_empty(), "{:?}", written(&d));
        let status = decide_status(&s, &d, &s.existing, &d.refused);
        let rolled_out = status
            .conditions
            .iter()
            .find(|c| c.type_ == ferry_semantics::contract::PLACEMENT_ROLLED_OUT)
            .expect("PlacementRolledOut");
        assert!(
            rolled_out.message.contains("kube-system/admin") && rolled_out.reason == "Failed",
            "{}",
            rolled_out.message
        );
    }

    #[test]
    fn a_stable_revision_whose_data_does_not_hash_to_its_name_is_never_rolled_back_to() {
        // plan_revisions refused the stable revision's ControllerRevision
        // (see revisions::refusal): it is not among the revisions.
        let mut s = snapshot(failing_rs(), &CLUSTERS, &CLUSTERS, &all_failed());
        s.revisions.retain(|r| r.reference != stable());
        let why = format!(
            "ControllerRevision app-{} is refused: its data hashes to 0123456789, not to {} as its name says",
            stable().hash,
            stable().hash
        );
        s.refused_revisions = vec![why.clone()];
        let d = decide(&s);
        assert!(
            matches!(
                d.outcome,
                FailureOutcome::Aborted {
                    why: Abort::NoStable
                }
            ),
            "{:?}",
            d.outcome
        );
        assert!(d.record_rollback.is_none());
        assert!(written(&d).is_empty(), "{:?}", written(&d));
        let status = decide_status(&s, &d, &s.existing, &d.refused);
        let rolled_out = status
            .conditions
            .iter()
            .find(|c| c.type_ == ferry_semantics::contract::PLACEMENT_ROLLED_OUT)
            .expect("PlacementRolledOut");
        assert!(
            rolled_out.message.contains("no stable revision it trusts")
                && rolled_out.message.contains(&why),
            "{}",
            rolled_out.message
        );
    }

    #[test]
    fn a_new_leader_reading_the_recorded_rollback_continues_it_and_never_writes_the_bad_revision() {
        let first = first_rollback();
        // Whatever the new leader's view: still failing, the failures gone
        // (Degraded cleared), or the works not in the cache at all (a plan
        // alone would write the failed revision everywhere).
        let healthy = CLUSTERS.map(|c| (c, held("bad", &bad(), false))).to_vec();
        for existing in [all_failed(), healthy, Vec::new()] {
            let mut s = snapshot(recorded(&first), &CLUSTERS, &CLUSTERS, &existing);
            s.now = "2026-11-27T10:11:00Z".parse().expect("time");
            assert_eq!(s.remembered, None, "a new leader remembers nothing");
            let d = decide(&s);
            match &d.outcome {
                FailureOutcome::RollBack { to, status } => {
                    assert_eq!(to.reference, stable());
                    assert_eq!(status.at, first.at, "the rollback keeps its start");
                }
                other => panic!("the new leader reversed the rollback: {other:?}"),
            }
            assert_eq!(d.record_rollback, None, "recorded already");
            assert_eq!(d.rollback_memory.as_ref().map(|r| &r.at), Some(&first.at));
            assert_eq!(written(&d), CLUSTERS);
            assert_writes_stable(&d);
        }
    }

    #[test]
    fn a_rollback_partly_written_back_continues_with_the_remaining_clusters_only() {
        let first = first_rollback();
        let back = || held("good", &stable().hash, false);
        // Failed over after a and b were written back.
        let partly = vec![
            ("a", back()),
            ("b", back()),
            ("c", held("bad", &bad(), true)),
        ];
        let s = snapshot(recorded(&first), &CLUSTERS, &CLUSTERS, &partly);
        let d = decide(&s);
        assert_eq!(d.record_rollback, None);
        assert_eq!(written(&d), ["c"]);
        assert_writes_stable(&d);
        // Every write landed: nothing is written, the rollback stands.
        let done = CLUSTERS.map(|c| (c, back())).to_vec();
        let s = snapshot(recorded(&first), &CLUSTERS, &CLUSTERS, &done);
        let d = decide(&s);
        assert!(matches!(d.outcome, FailureOutcome::RollBack { .. }));
        assert_eq!(
            (d.record_rollback.as_ref(), written(&d)),
            (None, Vec::new())
        );
        let status = decide_status(&s, &d, &s.existing, &d.refused);
        let rollout = status.rollout.expect("rollout");
        assert_eq!(rollout.rollback.map(|r| r.to), Some(stable()));
    }

    #[test]
    fn an_unsettled_view_decides_no_halt_no_rollback_and_no_deletion() {
        // z's work: its cluster is no longer chosen.
        let mut existing = all_failed();
        existing.push(("z", held("bad", &bad(), false)));
        // Settled, the same failures halt, roll back and delete z.
        let settled = snapshot(failing_rs(), &CLUSTERS, &CLUSTERS, &existing);
        let d = decide(&settled);
        assert!(d.record_rollback.is_some() && d.removals.budget.delete == ["z"]);
        // Decided cluster c missing from the cluster cache.
        let gap = snapshot(failing_rs(), &CLUSTERS, &["a", "b"], &existing);
        let d = decide(&gap);
        assert!(d.plan.halted_placements.is_empty(), "{:?}", d.plan.halted);
        assert!(!matches!(d.outcome, FailureOutcome::RollBack { .. }));
        assert_eq!((&d.record_rollback, &d.rollback_memory), (&None, &None));
        assert!(d.removals.budget.delete.is_empty() && d.window_to_record().is_none());
        let works = d.works.as_ref().expect("no placement is missing");
        assert!(works.start.is_empty() && works.delete.is_empty());
        // Placement p missing: nothing is written or deleted at all.
        let mut missing = snapshot(failing_rs(), &CLUSTERS, &CLUSTERS, &existing);
        missing.placements.clear();
        let d = decide(&missing);
        assert!(d.works.is_none());
        assert!(!matches!(d.outcome, FailureOutcome::RollBack { .. }));
        assert_eq!(d.record_rollback, None);
        assert!(d.removals.budget.delete.is_empty() && d.window_to_record().is_none());
        assert_eq!(d.action(false), Action::await_change());
    }

    #[test]
    fn a_recorded_rollback_writes_no_cluster_the_cache_lacks() {
        let first = first_rollback();
        // Failed over with cluster c not in the new leader's cache yet,
        // its placement holding its decisions (so c stays chosen though no
        // bound set is seen to hold it).
        let mut gap = snapshot(recorded(&first), &CLUSTERS, &["a", "b"], &all_failed());
        let mut held = serde_json::to_value(&*gap.placements[0]).expect("placement");
        held["status"]["conditions"] = json!([{"type": PLACEMENT_DECISIONS_HELD,
            "status": "True", "reason": "GrantLost", "message": "held",
            "lastTransitionTime": WRITTEN}]);
        gap.placements = vec![Arc::new(serde_json::from_value(held).expect("placement"))];
        let d = decide(&gap);
        assert!(d.chosen.wanted.contains_key("c") && d.unbound.is_empty());
        assert!(matches!(d.outcome, FailureOutcome::RollBack { .. }), "kept");
        assert_eq!(d.rollback_memory.as_ref().map(|r| &r.at), Some(&first.at));
        // The replica set says its placement holds, and how to let it go.
        let status = decide_status(&gap, &d, &gap.existing, &d.refused);
        let held = status
            .conditions
            .iter()
            .find(|c| c.type_ == PLACEMENT_DECISIONS_HELD)
            .expect("the replica set shows the hold");
        assert_eq!(
            (held.status.as_str(), held.reason.as_str()),
            ("True", "GrantLost")
        );
        assert!(
            held.message
                .starts_with("placement p holds its last decisions")
                && held.message.contains(CONFIRM_EMPTY_DECISIONS_ANNOTATION),
            "{}",
            held.message
        );
        assert_eq!(
            crate::replica_set::rollout_signals::rollout_signals(&status).decisions_held,
            1
        );
        // The rollback goes on for a and b, not for c's label-less rendering.
        assert_eq!(written(&d), ["a", "b"]);
        assert_writes_stable(&d);
        // Once the cache knows c, it is written back too.
        let settled = snapshot(recorded(&first), &CLUSTERS, &CLUSTERS, &all_failed());
        assert_eq!(written(&decide(&settled)), CLUSTERS);
    }

    #[test]
    fn the_budget_window_is_recorded_first_and_a_new_leader_never_deletes_past_it() {
        let mut rs = progressive_rs("");
        rs.spec.manifest_work_template = spec("good");
        let current = spec_revision_hash(&rs.spec);
        let gone: Vec<String> = (0..8).map(|i| format!("c{i}")).collect();
        let mut existing = vec![("a", held("good", &current, false))];
        existing.extend(
            gone.iter()
                .map(|c| (c.as_str(), held("good", &current, false))),
        );
        let s = snapshot(rs.clone(), &["a"], &["a"], &existing);
        let d = decide(&s);
        // 25% of 9 works: 3 go now, recorded as deleted before they are.
        let window = d.window_to_record().expect("the window is recorded");
        let works = d.works.as_ref().expect("works");
        assert_eq!(works.delete, ["c0", "c1", "c2"]);
        assert_eq!(works.delete, d.removals.budget.delete);
        assert_eq!((window.base, window.deleted), (9, 3));
        assert_eq!(d.removals.budget.waiting.len(), 5);
        // What record_window writes, read back by a new leader a minute
        // later, before and after the deletions landed.
        let mut status = ManifestWorkReplicaSetStatus::default();
        fill_budget_status(&rs, &mut status, &d.removals.budget, now());
        let mut recorded = rs.clone();
        recorded.status = Some(status);
        for landed in [false, true] {
            let left: Vec<(&str, Arc<ManifestWork>)> = existing
                .iter()
                .filter(|(c, _)| !landed || !works.delete.iter().any(|d| d == c))
                .cloned()
                .collect();
            let mut s = snapshot(recorded.clone(), &["a"], &["a"], &left);
            s.now = "2026-11-27T10:11:00Z".parse().expect("time");
            let d = decide(&s);
            assert!(
                d.removals.budget.delete.is_empty(),
                "past the budget: {:?}",
                d.removals
            );
            assert!(d.works.as_ref().is_some_and(|w| w.delete.is_empty()));
            let waiting = if landed { 5 } else { 8 };
            assert_eq!(d.removals.budget.waiting.len(), waiting);
            // A hold waits for a release, not for the clock.
            assert_eq!(d.look_again, None);
        }
    }

    /// Cluster a (group canary) succeeded on the current revision; b (the
    /// next group) waits behind a health gate after canary.
    fn health_gated() -> Snapshot {
        let mut rs = progressive_rs(ROLLBACK_ALL);
        rs.spec.placement_refs[0].rollout_strategy = serde_json::from_value(json!({
            "type": "ProgressivePerGroup", "progressivePerGroup": {"gates": [
                {"afterGroup": "canary", "health": {"expression": "group.succeeded == 1"}}]}}))
        .expect("strategy");
        let canary = succeeded_work(&rs, "a");
        let mut s = snapshot(rs, &["a", "b"], &["a", "b"], &[("a", canary)]);
        s.placements = vec![placement(&[
            (0, "canary", &["p-decision-1"], 1),
            (1, "", &["p-decision-2"], 1),
        ])];
        s.decisions = vec![
            decision("p-decision-1", 0, "canary", &["a"]),
            decision("p-decision-2", 1, "", &["b"]),
        ];
        s
    }

    #[test]
    fn the_second_decision_differs_from_the_first_only_by_the_health_verdicts() {
        let mut s = health_gated();
        let first = decide(&s);
        let asked: Vec<(&str, &str)> = first
            .health_requests
            .iter()
            .map(|r| (r.placement.as_str(), r.after_group.as_str()))
            .collect();
        assert_eq!(asked, [("p", "canary")]);
        assert_eq!(written(&first), Vec::<String>::new(), "held until judged");
        // Everything but the gates' verdicts is the same the second time.
        let same = |d: &Decision<'_>| {
            format!(
                "{:?}",
                (
                    &d.record_rollback,
                    &d.removals,
                    &d.rollback_memory,
                    &d.refused,
                    &d.chosen,
                    &d.unbound,
                    &d.rendered,
                    (&d.current, &d.stable, &d.outcome),
                )
            )
        };
        let before = same(&first);
        drop(first);
        for (verdict, starts) in [(true, vec!["b".to_string()]), (false, Vec::new())] {
            s.gates
                .health
                .insert(("p".into(), "canary".into()), Ok(verdict));
            let second = decide(&s);
            assert!(second.health_requests.is_empty(), "asked again");
            assert_eq!(same(&second), before);
            assert_eq!(written(&second), starts, "verdict {verdict}");
        }
    }

    #[test]
    fn a_gate_pass_is_recorded_before_its_groups_works_and_a_new_leader_keeps_it_passed() {
        let mut s = health_gated();
        s.gates
            .health
            .insert(("p".into(), "canary".into()), Ok(true));
        let passing = decide(&s);
        assert_eq!(written(&passing), ["b"]);
        assert_eq!(
            passing.record_gates,
            [("p".to_string(), "canary".to_string())]
        );
        // The record is the status as it stands before b's work is written.
        let recorded = decide_status(&s, &passing, &s.existing, &passing.refused);
        drop(passing);
        // A new leader reads it, b's work not written yet, and the health
        // expression no longer holds: the gate stays passed, b still
        // starts, and nothing more needs recording.
        let mut after = s.clone();
        let mut rs = (*after.rs).clone();
        rs.status = Some(recorded);
        after.rs = Arc::new(rs);
        after
            .gates
            .health
            .insert(("p".into(), "canary".into()), Ok(false));
        let continued = decide(&after);
        assert_eq!(written(&continued), ["b"], "the pass is never reversed");
        assert!(
            continued.record_gates.is_empty(),
            "{:?}",
            continued.record_gates
        );
        // Without the record, the same leader would hold b back.
        let mut unrecorded = s.clone();
        unrecorded
            .gates
            .health
            .insert(("p".into(), "canary".into()), Ok(false));
        assert!(written(&decide(&unrecorded)).is_empty());
    }

    #[test]
    fn the_same_snapshot_gives_the_same_decision() {
        let first = first_rollback();
        let partly = vec![
            ("a", held("good", &stable().hash, false)),
            ("b", held("bad", &bad(), true)),
            ("z", held("bad", &bad(), false)),
        ];
        let snapshots = [
            snapshot(failing_rs(), &CLUSTERS, &CLUSTERS, &all_failed()),
            snapshot(recorded(&first), &CLUSTERS, &CLUSTERS, &partly),
            snapshot(failing_rs(), &CLUSTERS, &["a"], &partly),
        ];
        for s in &snapshots {
            let (one, two) = (decide(s), decide(s));
            assert_eq!(format!("{one:?}"), format!("{two:?}"));
            assert_eq!(
                decide_status(s, &one, &s.existing, &one.refused),
                decide_status(s, &two, &s.existing, &two.refused)
            );
            assert_eq!(one.action(false), two.action(false));
        }
        // The status reads its time from the snapshot, never the clock: a
        // replica set without a status gets every condition at `now`.
        let s = &snapshots[0];
        let d = decide(s);
        let status = decide_status(s, &d, &s.existing, &d.refused);
        assert!(!status.conditions.is_empty());
        for c in &status.conditions {
            assert_eq!(c.last_transition_time, "2026-11-27T10:10:00Z", "{c:?}");
        }
    }

    /// `s` with cluster `name` given a window every night at 02:00 UTC for
    /// an hour.
    fn with_nightly_window(mut s: Snapshot, name: &str) -> Snapshot {
        let mut c = (*cluster(name)).clone();
        c.metadata.annotations = Some(
            [(
                ferry_api::contract::MAINTENANCE_WINDOWS_ANNOTATION.to_string(),
                r#"[{"schedule":"0 2 * * *","duration":"1h"}]"#.to_string(),
            )]
            .into(),
        );
        s.gates.clusters.insert(name.into(), Arc::new(c));
        s
    }

    /// Every chosen cluster holding the stable revision, healthy.
    fn all_stable() -> Vec<(&'static str, Arc<ManifestWork>)> {
        CLUSTERS
            .map(|c| (c, held("good", &stable().hash, false)))
            .to_vec()
    }

    #[test]
    fn a_cluster_outside_its_window_is_not_written_and_waits_until_it_opens() {
        let s = with_nightly_window(
            snapshot(failing_rs(), &CLUSTERS, &CLUSTERS, &all_stable()),
            "b",
        );
        let d = decide(&s);
        assert_eq!(written(&d), ["a", "c"]);
        let opens: Timestamp = "2026-11-28T02:00:00Z".parse().expect("time");
        assert_eq!(
            d.plan.waiting,
            [(
                "b".to_string(),
                super::super::windows::Closed::Until(Some(opens))
            )]
        );
        // Looked at again when the window opens, not later.
        let until = Duration::try_from(opens.duration_since(now())).expect("ahead");
        assert!(
            d.look_again.is_some_and(|a| a <= until),
            "{:?}",
            d.look_again
        );
        assert!(!d.plan.all_complete);
        let status = decide_status(&s, &d, &s.existing, &d.refused);
        let waiting = status
            .conditions
            .iter()
            .find(|c| c.type_ == WAITING_FOR_MAINTENANCE_WINDOW)
            .expect("condition");
        assert_eq!(waiting.status, "True");
        assert!(
            waiting.message.contains("b until 2026-11-28T02:00:00Z"),
            "{}",
            waiting.message
        );
    }

    #[test]
    fn a_replica_set_yielding_its_name_writes_no_new_work_and_both_are_told() {
        let mut rs = failing_rs();
        rs.metadata.creation_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                "2026-11-20T00:00:00Z".parse().expect("time"),
            ));
        let held_ab: Vec<_> = all_stable()
            .into_iter()
            .filter(|(c, _)| *c != "c")
            .collect();
        let rival = |created: &str| Rival {
            namespace: "other-team".into(),
            created: Some(created.parse().expect("time")),
        };
        // An older replica set of the name elsewhere: c, where this one
        // holds no work, gets none; a and b, its own, are written.
        let mut s = snapshot(rs.clone(), &CLUSTERS, &CLUSTERS, &held_ab);
        s.rivals = vec![rival("2026-11-01T00:00:00Z")];
        let d = decide(&s);
        assert_eq!(written(&d), ["a", "b"]);
        let status = decide_status(&s, &d, &s.existing, &d.refused);
        let told = status
            .conditions
            .iter()
            .find(|c| c.type_ == NAME_CONFLICT)
            .expect("NameConflict");
        assert_eq!(told.reason, super::super::name_clash::YIELDS_TO_OLDER);
        assert!(!told.message.contains("other-team"), "{}", told.message);
        // A newer one: this one holds the name, writes everywhere, and
        // says so.
        s.rivals = vec![rival("2026-11-30T00:00:00Z")];
        let d = decide(&s);
        assert_eq!(written(&d), CLUSTERS);
        let status = decide_status(&s, &d, &s.existing, &d.refused);
        let told = status
            .conditions
            .iter()
            .find(|c| c.type_ == NAME_CONFLICT)
            .expect("NameConflict");
        assert_eq!(told.reason, super::super::name_clash::HOLDS_AGAINST_NEWER);
        // Alone: no condition.
        s.rivals.clear();
        let d = decide(&s);
        let status = decide_status(&s, &d, &s.existing, &d.refused);
        assert!(status.conditions.iter().all(|c| c.type_ != NAME_CONFLICT));
    }

    #[test]
    fn a_cluster_inside_its_window_is_written() {
        let mut s = with_nightly_window(
            snapshot(failing_rs(), &CLUSTERS, &CLUSTERS, &all_stable()),
            "b",
        );
        s.now = "2026-11-28T02:30:00Z".parse().expect("time");
        let d = decide(&s);
        assert_eq!(written(&d), CLUSTERS);
        assert!(d.plan.waiting.is_empty());
    }

    #[test]
    fn a_rollback_is_written_outside_the_window() {
        let s = with_nightly_window(
            snapshot(failing_rs(), &CLUSTERS, &CLUSTERS, &all_failed()),
            "a",
        );
        let d = decide(&s);
        assert!(matches!(d.outcome, FailureOutcome::RollBack { .. }));
        assert_eq!(written(&d), CLUSTERS);
        assert_writes_stable(&d);
        let status = decide_status(&s, &d, &s.existing, &d.refused);
        assert!(
            !status
                .conditions
                .iter()
                .any(|c| c.type_ == WAITING_FOR_MAINTENANCE_WINDOW)
        );
    }
}
