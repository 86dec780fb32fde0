//! The rollout's gates and cohort on one placement: each gate's memory read
//! back from the replica set's previous status (so gate state survives hub
//! restarts and leader changes), the cohort from the rollout's start, the
//! unreachable clusters from their taint, and what holds clusters back
//! this reconcile. The decisions themselves are the semantics'
//! (`rollout_gates`, `cohort`); this file gathers their inputs.

use std::collections::BTreeMap;
use std::sync::Arc;

use ferry_fleet_semantics::cohort::{Membership, in_cohort, joined_late};
use ferry_fleet_semantics::rollout::{ClusterState, RolloutCluster, StepContext};
use ferry_fleet_semantics::rollout_gates::{
    Approval, ClusterFacts, GateMemory, GateSpec, GateState, GroupFacts, HealthError, HealthSpec,
    decide_gate, held_after, needs_health,
};
use ferry_semantics::contract::{APPLIED, AVAILABLE, DEGRADED, MILLI_TIME_FORMAT};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::{Resource, ResourceExt};
use serde_json::Value;

use ferry_api::managed_cluster::ManagedCluster;
use ferry_api::manifest_work::{FieldValue, ManifestWork};
use ferry_api::replica_set::{
    GateStatus, LocalPlacementReference, ManifestWorkReplicaSet, PlacementRollout, RolloutConfig,
    RolloutStrategy,
};
use ferry_api::rollout_approval::RolloutApproval;

use super::revisions::{holds_revision, spec_revision_digest};
use super::rollout::RolloutError;

/// What the gates and the cohort read beyond the works: the clusters (by
/// name) and the approvals (of every namespace).
#[derive(Clone, Default)]
pub struct GateInputs {
    /// ManagedClusters by name.
    pub clusters: BTreeMap<String, Arc<ManagedCluster>>,
    /// Every RolloutApproval the hub sees.
    pub approvals: Vec<Arc<RolloutApproval>>,
    /// Per placement of the replica set, the names of the decision groups
    /// its spec defines, in order (where a gate's group stands when no
    /// chosen cluster is in it).
    pub defined_groups: BTreeMap<String, Vec<String>>,
    /// The verdicts of the gates' health expressions, by placement and
    /// gate (`afterGroup`), evaluated by the caller on its bounded pool
    /// for the [`HealthRequest`]s a first plan asked for. A gate that
    /// needs one and finds none here is held (`not evaluated`).
    pub health: BTreeMap<(String, String), Result<bool, HealthError>>,
}

/// A health expression a gate needs evaluated: the plan asks, the caller
/// evaluates it off the runtime and plans again with the verdict.
#[derive(Debug, Clone)]
pub struct HealthRequest {
    /// The placement of the rollout.
    pub placement: String,
    /// The gate's `afterGroup`.
    pub after_group: String,
    /// The expression.
    pub expression: String,
    /// What it is evaluated over.
    pub facts: GroupFacts,
}

/// The settings of the strategy's type (where its gates are).
fn config_of(strategy: &RolloutStrategy) -> RolloutConfig {
    match strategy.type_.as_str() {
        "Progressive" => strategy
            .progressive
            .as_ref()
            .map(|p| p.config.clone())
            .unwrap_or_default(),
        "ProgressivePerGroup" => strategy
            .progressive_per_group
            .as_ref()
            .map(|p| p.config.clone())
            .unwrap_or_default(),
        _ => strategy.all.clone().unwrap_or_default(),
    }
}

fn millis(field: &'static str, text: &str) -> Result<i64, RolloutError> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(0);
    }
    text.parse::<SignedDuration>()
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .map_err(|_| RolloutError::Duration {
            field,
            text: text.to_string(),
        })
}

/// The gates of `strategy`, their durations resolved. Fails on a duration
/// that does not parse (the CRD refuses those already).
pub fn gate_specs(strategy: &RolloutStrategy) -> Result<Vec<GateSpec>, RolloutError> {
    config_of(strategy)
        .gates
        .iter()
        .map(|gate| {
            Ok(GateSpec {
                after_group: gate.after_group.clone(),
                timed_wait_ms: millis("timedWait", &gate.timed_wait)?,
                approval: gate.approval,
                health: match &gate.health {
                    None => None,
                    Some(h) => Some(HealthSpec {
                        expression: h.expression.clone(),
                        hold_for_ms: millis("holdFor", &h.hold_for)?,
                    }),
                },
            })
        })
        .collect()
}

fn format_ms(ms: i64) -> String {
    Timestamp::from_millisecond(ms)
        .map(|t| t.strftime(MILLI_TIME_FORMAT).to_string())
        .unwrap_or_default()
}

fn parse_ms(text: &str) -> Option<i64> {
    text.parse::<Timestamp>().ok().map(|t| t.as_millisecond())
}

/// The gate's memory from its status of the same revision.
fn memory_of(status: Option<&GateStatus>) -> GateMemory {
    let Some(status) = status else {
        return GateMemory::default();
    };
    GateMemory {
        opened_at: parse_ms(&status.opened_at),
        healthy_since: parse_ms(&status.healthy_since),
        passed: status.state == "Passed",
        approval: (!status.approved_by.is_empty()).then(|| Approval {
            by: status.approved_by.clone(),
            at_ms: parse_ms(&status.approved_at).unwrap_or(0),
        }),
    }
}

/// Whether the cluster's agent is not connected (the hub's taint, or never connected).
pub fn is_unreachable(cluster: Option<&ManagedCluster>) -> bool {
    cluster.is_some_and(crate::clusters::taints::is_unreachable)
}

fn feedback_value(value: &FieldValue) -> Value {
    match value.type_.as_str() {
        "Integer" => value.integer.map_or(Value::Null, Value::from),
        "Boolean" => value.boolean.map_or(Value::Null, Value::from),
        "String" => value.string.clone().map_or(Value::Null, Value::from),
        _ => value
            .json_raw
            .as_deref()
            .map(|raw| serde_json::from_str(raw).unwrap_or_else(|_| Value::from(raw)))
            .unwrap_or(Value::Null),
    }
}

/// What the health expression sees of one cluster's work.
fn cluster_facts(name: &str, work: Option<&ManifestWork>) -> ClusterFacts {
    let mut facts = ClusterFacts {
        name: name.to_string(),
        ..ClusterFacts::default()
    };
    let Some(work) = work else {
        return facts;
    };
    let generation = work.meta().generation.unwrap_or(0);
    let status = work.status.as_ref();
    let is_true = |type_: &str| {
        status.is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == type_ && c.status == "True")
        })
    };
    facts.applied = status.is_some_and(|s| {
        s.conditions.iter().any(|c| {
            c.type_ == APPLIED && c.status == "True" && c.observed_generation == generation
        })
    });
    facts.available = is_true(AVAILABLE);
    facts.degraded = is_true(DEGRADED);
    for manifest in status
        .and_then(|s| s.resource_status.as_ref())
        .map(|r| r.manifests.as_slice())
        .unwrap_or_default()
    {
        for value in manifest
            .status_feedback
            .as_ref()
            .map(|f| f.values.as_slice())
            .unwrap_or_default()
        {
            facts
                .feedback
                .entry(value.name.clone())
                .or_insert_with(|| feedback_value(&value.field_value));
        }
    }
    facts
}

/// The rollout of `placement` as the status of `rs` last recorded it (of
/// whatever revision): the gates' memory.
pub fn recorded_rollout<'a>(
    rs: &'a ManifestWorkReplicaSet,
    placement: &str,
) -> Option<&'a PlacementRollout> {
    rs.status
        .as_ref()
        .and_then(|s| s.rollout.as_ref())
        .and_then(|r| r.placements.iter().find(|p| p.name == placement))
}

/// Whether the `recorded` rollout is of the revision with short hash
/// `revision` and whole digest `digest`, so its gates' memory (passes,
/// approvals, when it started) carries over. The short hash alone is 40
/// bits: a birthday search finds two templates sharing it in seconds, and
/// the second must not inherit the first's passed gates (issue 48). A
/// record without a digest was written by a hub that predates them (the
/// status is the hub's alone to write) and is matched by its short hash
/// until the next status write records the digest.
pub fn is_same_rollout(recorded: &PlacementRollout, revision: &str, digest: &str) -> bool {
    recorded.revision == revision
        && (recorded.revision_digest == digest || recorded.revision_digest.is_empty())
}

/// The outcome of one placement's gates and cohort.
pub struct PlacementGates {
    /// What holds clusters back in the rollout step.
    pub context: StepContext,
    /// The placement's rollout status (started, gates, churn).
    pub status: PlacementRollout,
    /// The soonest a wait or a hold ends.
    pub look_again: Option<SignedDuration>,
    /// The health expressions the gates needed evaluated.
    pub health_requests: Vec<HealthRequest>,
}

/// Evaluates the gates and cohort of `reference`'s rollout of `revision`
/// over its `states`, from the `existing` works, the `inputs` and the
/// previous status of `rs`, at `now`.
#[allow(clippy::too_many_arguments)]
pub fn placement_gates(
    rs: &ManifestWorkReplicaSet,
    reference: &LocalPlacementReference,
    gates: &[GateSpec],
    revision: &str,
    states: &[RolloutCluster],
    existing: &BTreeMap<String, Arc<ManifestWork>>,
    inputs: &GateInputs,
    now: Timestamp,
) -> PlacementGates {
    let now_ms = now.as_millisecond();
    let digest = spec_revision_digest(&rs.spec);
    let previous =
        recorded_rollout(rs, &reference.name).filter(|p| is_same_rollout(p, revision, &digest));
    // A new revision (or a first look) starts the rollout here now.
    // Whole seconds, as the status keeps it.
    let started_ms = previous
        .and_then(|p| parse_ms(&p.started_at))
        .unwrap_or(now_ms - now_ms.rem_euclid(1000));
    let (mut context, late_joiners) =
        cohort(states, existing, inputs, revision, &digest, started_ms);
    let namespace = rs.namespace().unwrap_or_default();
    let name = rs.name_any();
    let mut statuses = Vec::new();
    let mut holds = Vec::new();
    let mut look_again: Option<SignedDuration> = None;
    let mut health_requests = Vec::new();
    for gate in gates {
        let (index, facts) = group_facts(gate, states, &context, existing);
        let of_gate: Vec<&Arc<RolloutApproval>> = inputs
            .approvals
            .iter()
            .filter(|a| a.namespace().as_deref() == Some(namespace.as_str()))
            .filter(|a| {
                a.spec.replica_set == name
                    && a.spec.placement == reference.name
                    && a.spec.after_group == gate.after_group
                    && a.meta().deletion_timestamp.is_none()
            })
            .collect();
        let (approval, ignored) = approval_of(&of_gate, &digest, revision, started_ms);
        let memory = memory_of(
            previous.and_then(|p| p.gates.iter().find(|g| g.after_group == gate.after_group)),
        );
        let health = match &gate.health {
            Some(h) if needs_health(gate, &memory, &facts) => {
                let key = (reference.name.clone(), gate.after_group.clone());
                let verdict = inputs.health.get(&key).cloned();
                if verdict.is_none() {
                    health_requests.push(HealthRequest {
                        placement: reference.name.clone(),
                        after_group: gate.after_group.clone(),
                        expression: h.expression.clone(),
                        facts: facts.clone(),
                    });
                }
                verdict
            }
            _ => None,
        };
        let outcome = decide_gate(gate, &memory, &facts, approval.as_ref(), health, now_ms);
        if let Some(ms) = outcome.wake_after_ms {
            let after = SignedDuration::from_millis(ms);
            look_again = Some(look_again.map_or(after, |l| l.min(after)));
        }
        let passed = outcome.memory.passed;
        holds.push((index, passed));
        // No chosen cluster in the group: hold every cluster not in a group
        // the placement defines before it (a group may be empty for a
        // moment while its clusters reconnect; a typo holds the rollout
        // visibly instead of letting it through).
        if index.is_none() && !passed {
            let defined = inputs
                .defined_groups
                .get(&reference.name)
                .cloned()
                .unwrap_or_default();
            let earlier: Vec<&String> = defined
                .iter()
                .take_while(|g| **g != gate.after_group)
                .collect();
            context.held.extend(
                states
                    .iter()
                    .filter(|c| !earlier.contains(&&c.group_name))
                    .map(|c| c.name.clone()),
            );
        }
        let message = match index {
            None if !passed => format!(
                "no chosen cluster is in decision group {}: the clusters of later groups wait",
                gate.after_group
            ),
            _ if !passed && approval.is_none() && !ignored.is_empty() => {
                ignored_text(&outcome.message, &ignored)
            }
            _ => outcome.message,
        };
        statuses.push(gate_status(gate, &outcome.state, &outcome.memory, message));
    }
    context.held_after_group = held_after(&holds);
    let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
    PlacementGates {
        status: PlacementRollout {
            name: reference.name.clone(),
            revision: revision.to_string(),
            revision_digest: digest,
            started_at: format_ms(started_ms),
            gates: statuses,
            late_joiners: count(late_joiners),
            unreachable: count(context.unreachable.len()),
        },
        context,
        look_again,
        health_requests,
    }
}

/// The cohort of a rollout that started at `started_ms`: the clusters of
/// `states` that joined late (not counted by the gates; how many joined
/// late in all) and those unreachable.
fn cohort(
    states: &[RolloutCluster],
    existing: &BTreeMap<String, Arc<ManifestWork>>,
    inputs: &GateInputs,
    revision: &str,
    digest: &str,
    started_ms: i64,
) -> (StepContext, usize) {
    let mut context = StepContext::default();
    let mut late_joiners = 0;
    for cluster in states {
        let work = existing.get(&cluster.name);
        let managed = inputs.clusters.get(&cluster.name);
        let member = Membership {
            work_created_ms: work
                .and_then(|w| w.meta().creation_timestamp.as_ref())
                .map(|t| t.0.as_millisecond()),
            // Compared by the whole digest when the work carries it.
            work_revision: work
                .filter(|w| holds_revision(w, revision, Some(digest)))
                .map(|_| revision),
            cluster_created_ms: managed
                .and_then(|c| c.meta().creation_timestamp.as_ref())
                .map(|t| t.0.as_millisecond()),
        };
        if joined_late(&member, started_ms) {
            late_joiners += 1;
        }
        if !in_cohort(&member, revision, started_ms) {
            context.late.insert(cluster.name.clone());
        }
        if is_unreachable(managed.map(|c| &**c)) {
            context.unreachable.insert(cluster.name.clone());
        }
    }
    (context, late_joiners)
}

/// The decision group `gate` follows among `states`: its index (None: no
/// chosen cluster in it) and the facts its gate judges, late joiners and
/// unreachable clusters not counted.
fn group_facts(
    gate: &GateSpec,
    states: &[RolloutCluster],
    context: &StepContext,
    existing: &BTreeMap<String, Arc<ManifestWork>>,
) -> (Option<usize>, GroupFacts) {
    let group: Vec<&RolloutCluster> = states
        .iter()
        .filter(|c| c.group_name == gate.after_group)
        .collect();
    let index = group.first().map(|c| c.group_index);
    let counted: Vec<&&RolloutCluster> = group
        .iter()
        .filter(|c| !context.late.contains(&c.name) && !context.unreachable.contains(&c.name))
        .collect();
    let facts = GroupFacts {
        name: gate.after_group.clone(),
        total: counted.len(),
        succeeded: counted
            .iter()
            .filter(|c| c.state == ClusterState::Succeeded)
            .count(),
        failed: counted
            .iter()
            .filter(|c| c.state == ClusterState::Failed)
            .count(),
        clusters: group
            .iter()
            .map(|c| cluster_facts(&c.name, existing.get(&c.name).map(|w| &**w)))
            .collect(),
    };
    (index, facts)
}

/// A gate's status as the replica set reports it.
fn gate_status(
    gate: &GateSpec,
    state: &GateState,
    memory: &GateMemory,
    message: String,
) -> GateStatus {
    GateStatus {
        after_group: gate.after_group.clone(),
        state: state.as_str().to_string(),
        opened_at: memory.opened_at.map(format_ms).unwrap_or_default(),
        healthy_since: memory.healthy_since.map(format_ms).unwrap_or_default(),
        approved_by: memory
            .approval
            .as_ref()
            .map(|a| a.by.clone())
            .unwrap_or_default(),
        approved_at: memory
            .approval
            .as_ref()
            .map(|a| format_ms(a.at_ms))
            .unwrap_or_default(),
        message,
    }
}

/// The approval that lets a gate through, among `of_gate` (the approvals
/// naming the gate), and why the others naming this revision do not count.
/// Only an approval naming the whole `digest` of the revision rolling out,
/// created at or after its rollout here started (`started_ms`), counts; the
/// earliest such wins. One of an earlier rollout of the same content (the
/// replica set went elsewhere and came back) has expired, and one naming
/// only the short `revision` hash (the form before digests) never counts.
fn approval_of(
    of_gate: &[&Arc<RolloutApproval>],
    digest: &str,
    revision: &str,
    started_ms: i64,
) -> (Option<Approval>, Vec<String>) {
    let mut ignored = Vec::new();
    let mut valid = Vec::new();
    for approval in of_gate {
        let name = approval.name_any();
        let Some(at_ms) = approval
            .meta()
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.as_millisecond())
        else {
            continue;
        };
        if approval.spec.revision == digest {
            if at_ms >= started_ms {
                valid.push(Approval {
                    by: approval.spec.approved_by.clone(),
                    at_ms,
                });
            } else {
                ignored.push(format!(
                    "approval {name} is ignored: it was created at {}, before this rollout of the revision started at {} (approve again)",
                    format_ms(at_ms),
                    format_ms(started_ms)
                ));
            }
        } else if approval.spec.revision == revision {
            ignored.push(format!(
                "approval {name} is ignored: its spec.revision names the short revision hash {revision}, not the whole digest {digest}"
            ));
        }
    }
    (valid.into_iter().min_by_key(|a| a.at_ms), ignored)
}

/// Ignored approvals named in a gate's message, at most this many (the
/// status stays bounded however many approvals a tenant creates).
const IGNORED_NAMED: usize = 3;

/// `message` followed by the first [`IGNORED_NAMED`] reasons of `ignored`
/// and how many more there are.
fn ignored_text(message: &str, ignored: &[String]) -> String {
    let mut text = message.to_string();
    for reason in ignored.iter().take(IGNORED_NAMED) {
        text.push_str("; ");
        text.push_str(reason);
    }
    if ignored.len() > IGNORED_NAMED {
        text.push_str(&format!(
            "; {} more approvals ignored",
            ignored.len() - IGNORED_NAMED
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_three_ignored_approvals_are_named() {
        let ignored: Vec<String> = (0..5).map(|i| format!("r{i}")).collect();
        assert_eq!(
            ignored_text("awaiting", &ignored),
            "awaiting; r0; r1; r2; 2 more approvals ignored"
        );
        assert_eq!(ignored_text("awaiting", &ignored[..1]), "awaiting; r0");
    }

    fn approval(name: &str, revision: &str, created: &str) -> Arc<RolloutApproval> {
        Arc::new(
            serde_json::from_value(serde_json::json!({
                "apiVersion": "work.ferry.dev/v1alpha1", "kind": "RolloutApproval",
                "metadata": {"name": name, "namespace": "ns", "creationTimestamp": created},
                "spec": {"replicaSet": "app", "placement": "p", "afterGroup": "canary",
                    "revision": revision, "approvedBy": name},
            }))
            .expect("approval"),
        )
    }

    #[test]
    fn only_an_approval_of_the_whole_digest_made_during_this_rollout_counts() {
        let digest = "a".repeat(64);
        let revision = &digest[..10];
        let started = parse_ms("2026-11-27T04:10:00Z").expect("time");
        let stale = approval("stale", &digest, "2026-11-27T04:09:59Z");
        let short = approval("short", revision, "2026-11-27T04:10:05Z");
        let other = approval("other", &"b".repeat(64), "2026-11-27T04:10:05Z");
        let (none, ignored) = approval_of(&[&stale, &short, &other], &digest, revision, started);
        assert_eq!(none, None);
        assert_eq!(ignored.len(), 2, "{ignored:?}");
        assert!(
            ignored[0].contains("approval stale is ignored: it was created at 2026-11-27T04:09:59.000Z, before this rollout"),
            "{ignored:?}"
        );
        assert!(
            ignored[1].contains("names the short revision hash aaaaaaaaaa, not the whole digest"),
            "{ignored:?}"
        );
        let late = approval("late", &digest, "2026-11-27T04:10:09Z");
        let first = approval("first", &digest, "2026-11-27T04:10:00Z");
        let (chosen, _) = approval_of(&[&stale, &late, &first], &digest, revision, started);
        assert_eq!(chosen.map(|a| a.by).as_deref(), Some("first"));
    }

    #[test]
    fn gate_times_keep_their_milliseconds_through_the_status() {
        let ms = 1_795_000_000_123;
        assert_eq!(format_ms(ms), "2026-11-18T11:06:40.123Z");
        assert_eq!(parse_ms(&format_ms(ms)), Some(ms));
        // Times written at whole seconds by an older hub still read.
        assert_eq!(parse_ms("2026-11-18T11:06:40Z"), Some(1_795_000_000_000));
    }
}
