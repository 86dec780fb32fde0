//! Gates between the decision groups of a rollout: after group G, a gate
//! holds every cluster of a later group (higher index) until every cluster
//! of G succeeded, then its timed wait elapsed, its approval exists and its
//! health expression (CEL) has held for `holdFor`. Pure: the hub passes the
//! gate's memory (read back from the replica set's status, so it survives
//! restarts and leader changes), the group's facts and the time, and writes
//! back what this returns. Times are milliseconds since the Unix epoch.

use std::collections::BTreeMap;

use cel::{Context, Program, Value as CelValue};
use serde_json::{Value, json};

use ferry_semantics::condition_rules::{MAX_CEL_EXPRESSION_LENGTH, to_cel};
use ferry_semantics::text::clipped;

use crate::cel_cost::{MAX_HEALTH_COST, estimate_cost};

/// One gate of a rollout strategy, durations resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateSpec {
    /// The decision group the gate follows.
    pub after_group: String,
    /// How long to wait once the group succeeded (0: no wait).
    pub timed_wait_ms: i64,
    /// Whether an approval of the current revision is needed.
    pub approval: bool,
    /// The health check, if any.
    pub health: Option<HealthSpec>,
}

/// A health check: a CEL expression that must give true for `hold_for_ms`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthSpec {
    /// CEL over `group` and `clusters`.
    pub expression: String,
    /// How long it must hold without a break (0: once).
    pub hold_for_ms: i64,
}

/// What the gate remembers between reconciles (of one revision).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GateMemory {
    /// When the group first succeeded.
    pub opened_at: Option<i64>,
    /// Since when the health expression has held without a break.
    pub healthy_since: Option<i64>,
    /// Whether the gate passed: it then stays passed for the revision.
    pub passed: bool,
    /// The approval it passed with, kept for the record.
    pub approval: Option<Approval>,
}

/// An approval of the gate for the current revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approval {
    /// Who approved.
    pub by: String,
    /// When, in ms since the epoch.
    pub at_ms: i64,
}

/// One cluster of the gate's group, as the health expression sees it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClusterFacts {
    /// Cluster name.
    pub name: String,
    /// Its work's `Applied` is True at its generation.
    pub applied: bool,
    /// Its work's `Available` is True.
    pub available: bool,
    /// Its work's `Degraded` is True.
    pub degraded: bool,
    /// Its work's status feedback, by name (the first value of each name).
    pub feedback: BTreeMap<String, Value>,
}

/// The gate's group: its clusters and rollout counts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GroupFacts {
    /// The group name.
    pub name: String,
    /// Clusters of the rollout's cohort in the group, reachable ones.
    pub total: usize,
    /// Of those, Succeeded.
    pub succeeded: usize,
    /// Of those, Failed.
    pub failed: usize,
    /// Per cluster facts (every chosen cluster of the group).
    pub clusters: Vec<ClusterFacts>,
}

impl GroupFacts {
    /// Whether every counted cluster of the group succeeded. A group with
    /// no counted cluster (all left, unreachable or late) has proved
    /// nothing: the gate does not open on it.
    pub fn all_succeeded(&self) -> bool {
        self.total > 0 && self.succeeded == self.total
    }
}

/// Where a gate stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GateState {
    /// The group has not succeeded yet.
    Pending,
    /// The timed wait runs.
    Waiting,
    /// No approval of the current revision exists yet.
    AwaitingApproval,
    /// The health expression is false, fails, or has not held long enough.
    Unhealthy,
    /// Every condition held: later groups may start.
    Passed,
}

impl GateState {
    /// The name written in the status.
    pub fn as_str(self) -> &'static str {
        match self {
            GateState::Pending => "Pending",
            GateState::Waiting => "Waiting",
            GateState::AwaitingApproval => "AwaitingApproval",
            GateState::Unhealthy => "Unhealthy",
            GateState::Passed => "Passed",
        }
    }
}

/// What a gate evaluation gives: the new state and memory, a message for a
/// human, and when time alone changes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateOutcome {
    /// The state.
    pub state: GateState,
    /// The memory to keep.
    pub memory: GateMemory,
    /// What holds the gate (empty once passed).
    pub message: String,
    /// In how many ms the wait or hold ends, if one runs.
    pub wake_after_ms: Option<i64>,
}

/// Why a health expression gave no verdict.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HealthError {
    /// Longer than the limit.
    #[error("health expression is longer than {MAX_CEL_EXPRESSION_LENGTH} bytes")]
    TooLong,
    /// It does not compile.
    #[error("health expression does not compile: {0}")]
    Parse(String),
    /// It failed while running (unknown variable, type error).
    #[error("health expression failed: {0}")]
    Execute(String),
    /// It gave something other than a bool.
    #[error("health expression gave {0}, not a bool")]
    NotBool(String),
    /// Its worst-case cost ([`crate::cel_cost::estimate_cost`]) is over the
    /// limit: it is never run.
    #[error(
        "health expression exceeds the static cost limit: estimated worst-case cost {estimate} \
         is over the limit of {limit} (nested comprehensions multiply; see docs/rollouts.md)"
    )]
    TooCostly {
        /// The estimate.
        estimate: u64,
        /// The limit ([`MAX_HEALTH_COST`]).
        limit: u64,
    },
    /// It ran past the hub's time limit for one evaluation (the hub's
    /// bounded pool, not this crate, enforces it).
    #[error("health expression exceeded the time limit of {limit_ms} ms per evaluation")]
    TimedOut {
        /// The limit in ms.
        limit_ms: u64,
    },
    /// The hub's evaluation pool had no room for it in time (every permit
    /// held, or an evaluation of the same namespace still running).
    #[error("health expression was not evaluated: the evaluation pool is busy ({0})")]
    PoolBusy(String),
    /// The hub did not evaluate it (a verdict that was not supplied).
    #[error("health expression was not evaluated")]
    NotEvaluated,
}

/// Human text of a duration in ms (`90s`, `2m30s`).
fn human(ms: i64) -> String {
    let secs = (ms.max(0) + 999) / 1000;
    match (secs / 60, secs % 60) {
        (0, s) => format!("{s}s"),
        (m, 0) => format!("{m}m"),
        (m, s) => format!("{m}m{s}s"),
    }
}

/// The CEL variables of a group: `group` and `clusters`.
fn variables(facts: &GroupFacts) -> (Value, Value) {
    let applied = facts.clusters.iter().filter(|c| c.applied).count();
    let available = facts.clusters.iter().filter(|c| c.available).count();
    let degraded = facts.clusters.iter().filter(|c| c.degraded).count();
    let group = json!({
        "name": facts.name,
        "total": facts.total,
        "succeeded": facts.succeeded,
        "failed": facts.failed,
        "applied": applied,
        "available": available,
        "degraded": degraded,
    });
    let clusters = facts
        .clusters
        .iter()
        .map(|c| {
            json!({
                "name": c.name,
                "applied": c.applied,
                "available": c.available,
                "degraded": c.degraded,
                "feedback": c.feedback,
            })
        })
        .collect();
    (group, Value::Array(clusters))
}

/// Compiles `expression` and checks its length and worst-case cost, as
/// admission does and as every evaluation does first. Fails with
/// [`HealthError::TooLong`], [`HealthError::Parse`] or
/// [`HealthError::TooCostly`]; never panics on user input.
pub fn compile_health(expression: &str) -> Result<Program, HealthError> {
    if expression.len() > MAX_CEL_EXPRESSION_LENGTH {
        return Err(HealthError::TooLong);
    }
    // The cel parser reports most bad input as an error; a panic inside it
    // on input it does not expect becomes one too.
    let compiled = std::panic::catch_unwind(|| Program::compile(expression))
        .map_err(|_| HealthError::Parse("the parser gave up".into()))?
        .map_err(|e| HealthError::Parse(clipped(e.to_string(), MAX_ERROR_TEXT)))?;
    let estimate = estimate_cost(compiled.expression());
    if estimate > MAX_HEALTH_COST {
        return Err(HealthError::TooCostly {
            estimate,
            limit: MAX_HEALTH_COST,
        });
    }
    Ok(compiled)
}

/// Longest error text of a health expression kept in a gate's message,
/// bytes.
pub const MAX_ERROR_TEXT: usize = 512;

/// Runs `expression` over the group's facts. Never panics on user input:
/// an expression that is too long, does not compile, is over the static
/// cost limit ([`compile_health`]), fails or gives no bool is an error.
/// It runs on the calling thread with no time bound of its own (the cost
/// limit bounds it): the hub calls it on its bounded blocking pool.
pub fn evaluate_health(expression: &str, facts: &GroupFacts) -> Result<bool, HealthError> {
    let compiled = compile_health(expression)?;
    let (group, clusters) = variables(facts);
    let mut context = Context::default();
    context.add_variable_from_value("group", to_cel(&group));
    context.add_variable_from_value("clusters", to_cel(&clusters));
    match compiled.execute(&context) {
        Ok(CelValue::Bool(b)) => Ok(b),
        Ok(other) => Err(HealthError::NotBool(other.type_of().to_string())),
        // A CEL error may quote a value: `clusters + 1 == 0` would print the
        // whole cluster list into the gate's message.
        Err(e) => Err(HealthError::Execute(clipped(e.to_string(), MAX_ERROR_TEXT))),
    }
}

/// Whether [`decide_gate`] reads a health verdict for `spec` from this
/// `memory` and `facts`: the gate has a health check, has not passed, and
/// its group succeeded. The hub evaluates the expression only then.
pub fn needs_health(spec: &GateSpec, memory: &GateMemory, facts: &GroupFacts) -> bool {
    spec.health.is_some() && !memory.passed && facts.all_succeeded()
}

/// [`decide_gate`] with the health expression evaluated inline on this
/// thread ([`evaluate_health`]): for callers with no pool of their own.
/// Never fails; what holds the gate is in the outcome.
pub fn evaluate_gate(
    spec: &GateSpec,
    memory: &GateMemory,
    facts: &GroupFacts,
    approval: Option<&Approval>,
    now_ms: i64,
) -> GateOutcome {
    let health = spec
        .health
        .as_ref()
        .filter(|_| needs_health(spec, memory, facts))
        .map(|h| evaluate_health(&h.expression, facts));
    decide_gate(spec, memory, facts, approval, health, now_ms)
}

/// Decides one gate at `now_ms` from its `memory`, the group's `facts`,
/// the `approval` of the current revision, if one exists, and the verdict
/// of its health expression (`health`: evaluated by the caller when
/// [`needs_health`]; `None` there counts as [`HealthError::NotEvaluated`]).
/// Never fails; what holds the gate is in the outcome.
///
/// Once passed a gate stays passed (a cluster joining its group later does
/// not close it again). Before that: Pending until every counted cluster
/// of the group succeeded; then the wait, the approval and the health
/// check are all checked, and the state names the first that holds it.
/// The health expression is evaluated from the moment the gate opens, so
/// `holdFor` runs alongside the wait and the approval.
pub fn decide_gate(
    spec: &GateSpec,
    memory: &GateMemory,
    facts: &GroupFacts,
    approval: Option<&Approval>,
    health_verdict: Option<Result<bool, HealthError>>,
    now_ms: i64,
) -> GateOutcome {
    if memory.passed {
        return GateOutcome {
            state: GateState::Passed,
            memory: memory.clone(),
            message: String::new(),
            wake_after_ms: None,
        };
    }
    if !facts.all_succeeded() {
        return GateOutcome {
            state: GateState::Pending,
            memory: GateMemory {
                healthy_since: None,
                ..memory.clone()
            },
            message: if facts.total == 0 {
                format!(
                    "group {} has no reachable cluster of the rollout to check",
                    facts.name
                )
            } else {
                format!(
                    "waiting for group {}: {} of {} clusters succeeded",
                    facts.name, facts.succeeded, facts.total
                )
            },
            wake_after_ms: None,
        };
    }
    let opened_at = memory.opened_at.unwrap_or(now_ms);
    let mut wake: Option<i64> = None;
    let mut soonest = |ms: i64| wake = Some(wake.map_or(ms, |w: i64| w.min(ms)));
    let mut holds: Vec<(GateState, String)> = Vec::new();
    let waited = now_ms - opened_at;
    if waited < spec.timed_wait_ms {
        let left = spec.timed_wait_ms - waited;
        soonest(left);
        // The message stays the same while the wait runs: the status is
        // not rewritten every reconcile.
        holds.push((
            GateState::Waiting,
            format!(
                "timed wait of {} from the gate's opening",
                human(spec.timed_wait_ms)
            ),
        ));
    }
    if spec.approval && approval.is_none() {
        holds.push((
            GateState::AwaitingApproval,
            format!(
                "awaiting approval (a RolloutApproval for group {} of this revision)",
                facts.name
            ),
        ));
    }
    let mut healthy_since = None;
    if let Some(health) = &spec.health {
        match health_verdict.unwrap_or(Err(HealthError::NotEvaluated)) {
            Ok(true) => {
                let since = memory.healthy_since.unwrap_or(now_ms);
                healthy_since = Some(since);
                let held = now_ms - since;
                if held < health.hold_for_ms {
                    let left = health.hold_for_ms - held;
                    soonest(left);
                    holds.push((
                        GateState::Unhealthy,
                        format!(
                            "health expression holds; it must hold for {} since healthySince",
                            human(health.hold_for_ms)
                        ),
                    ));
                }
            }
            Ok(false) => holds.push((
                GateState::Unhealthy,
                format!("health expression is false: {}", health.expression),
            )),
            Err(error) => holds.push((GateState::Unhealthy, error.to_string())),
        }
    }
    let passed = holds.is_empty();
    let memory = GateMemory {
        opened_at: Some(opened_at),
        healthy_since,
        passed,
        approval: approval.cloned(),
    };
    match holds.first() {
        None => GateOutcome {
            state: GateState::Passed,
            memory,
            message: String::new(),
            wake_after_ms: None,
        },
        Some((state, _)) => GateOutcome {
            state: *state,
            memory,
            message: holds
                .iter()
                .map(|(_, m)| m.as_str())
                .collect::<Vec<_>>()
                .join("; "),
            wake_after_ms: wake,
        },
    }
}

/// The index of the first decision group whose later groups a gate holds:
/// the lowest index among the gates not passed (`None`: nothing is held).
/// A cluster with a higher group index may not start.
pub fn held_after(gates: &[(Option<usize>, bool)]) -> Option<usize> {
    gates
        .iter()
        .filter(|(_, passed)| !passed)
        .filter_map(|(index, _)| *index)
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn facts(total: usize, succeeded: usize) -> GroupFacts {
        GroupFacts {
            name: "canary".into(),
            total,
            succeeded,
            failed: 0,
            clusters: (0..total)
                .map(|i| ClusterFacts {
                    name: format!("c{i}"),
                    applied: true,
                    available: true,
                    degraded: false,
                    feedback: [("readyReplicas".to_string(), json!(i))].into(),
                })
                .collect(),
        }
    }

    #[test]
    fn an_error_quoting_the_facts_is_bounded() {
        // `clusters + 1` fails naming its operands: the whole cluster list.
        let big = facts(2_000, 2_000);
        let error = evaluate_health("clusters + 1 == 0", &big).expect_err("fails");
        let text = error.to_string();
        assert!(
            text.len() <= MAX_ERROR_TEXT + 64,
            "{} bytes: {}",
            text.len(),
            &text[..200.min(text.len())]
        );
    }

    fn gate() -> GateSpec {
        GateSpec {
            after_group: "canary".into(),
            timed_wait_ms: 0,
            approval: false,
            health: None,
        }
    }

    #[test]
    fn a_gate_is_pending_until_its_group_succeeded() {
        let out = evaluate_gate(&gate(), &GateMemory::default(), &facts(2, 1), None, 0);
        assert_eq!(out.state, GateState::Pending);
        assert!(out.message.contains("1 of 2"), "{}", out.message);
        assert_eq!(out.memory.opened_at, None);
        let out = evaluate_gate(&gate(), &GateMemory::default(), &facts(2, 2), None, 5);
        assert_eq!(out.state, GateState::Passed);
        assert_eq!(out.memory.opened_at, Some(5));
    }

    #[test]
    fn a_timed_wait_holds_from_the_opening_for_its_duration() {
        let spec = GateSpec {
            timed_wait_ms: 60_000,
            ..gate()
        };
        let opened = evaluate_gate(&spec, &GateMemory::default(), &facts(1, 1), None, 1_000);
        assert_eq!(opened.state, GateState::Waiting);
        assert_eq!(opened.wake_after_ms, Some(60_000));
        let later = evaluate_gate(&spec, &opened.memory, &facts(1, 1), None, 31_000);
        assert_eq!(later.state, GateState::Waiting);
        assert_eq!(later.wake_after_ms, Some(30_000));
        assert_eq!(later.memory.opened_at, Some(1_000));
        let done = evaluate_gate(&spec, &later.memory, &facts(1, 1), None, 61_000);
        assert_eq!(done.state, GateState::Passed);
    }

    #[test]
    fn an_approval_gate_waits_for_the_approval_and_records_it() {
        let spec = GateSpec {
            approval: true,
            ..gate()
        };
        let out = evaluate_gate(&spec, &GateMemory::default(), &facts(1, 1), None, 0);
        assert_eq!(out.state, GateState::AwaitingApproval);
        assert_eq!(out.wake_after_ms, None);
        let approval = Approval {
            by: "alice".into(),
            at_ms: 10,
        };
        let out = evaluate_gate(&spec, &out.memory, &facts(1, 1), Some(&approval), 20);
        assert_eq!(out.state, GateState::Passed);
        assert_eq!(out.memory.approval, Some(approval));
    }

    #[test]
    fn a_passed_gate_stays_passed_when_its_group_grows() {
        let passed = evaluate_gate(&gate(), &GateMemory::default(), &facts(1, 1), None, 0);
        assert!(passed.memory.passed);
        let out = evaluate_gate(&gate(), &passed.memory, &facts(2, 1), None, 10);
        assert_eq!(out.state, GateState::Passed);
    }

    #[test]
    fn a_group_with_no_cluster_to_check_does_not_open_its_gate() {
        let out = evaluate_gate(&gate(), &GateMemory::default(), &facts(0, 0), None, 0);
        assert_eq!(out.state, GateState::Pending);
        assert!(
            out.message.contains("no reachable cluster"),
            "{}",
            out.message
        );
    }

    #[test]
    fn a_health_gate_holds_until_the_expression_held_for_hold_for() {
        let spec = GateSpec {
            health: Some(HealthSpec {
                expression: "group.degraded == 0 && clusters.all(c, c.feedback.readyReplicas >= 1)"
                    .into(),
                hold_for_ms: 10_000,
            }),
            ..gate()
        };
        // c0 reports readyReplicas 0: false.
        let out = evaluate_gate(&spec, &GateMemory::default(), &facts(2, 2), None, 0);
        assert_eq!(out.state, GateState::Unhealthy);
        assert!(out.message.contains("false"), "{}", out.message);
        assert_eq!(out.memory.healthy_since, None);
        let mut good = facts(2, 2);
        good.clusters[0]
            .feedback
            .insert("readyReplicas".into(), json!(3));
        let out = evaluate_gate(&spec, &out.memory, &good, None, 1_000);
        assert_eq!(out.state, GateState::Unhealthy);
        assert_eq!(out.memory.healthy_since, Some(1_000));
        assert_eq!(out.wake_after_ms, Some(10_000));
        // A break resets the hold.
        let broken = evaluate_gate(&spec, &out.memory, &facts(2, 2), None, 5_000);
        assert_eq!(broken.memory.healthy_since, None);
        let again = evaluate_gate(&spec, &broken.memory, &good, None, 6_000);
        let done = evaluate_gate(&spec, &again.memory, &good, None, 16_000);
        assert_eq!(done.state, GateState::Passed);
    }

    #[test]
    fn a_bad_health_expression_keeps_the_gate_closed_with_the_cel_error() {
        for (expression, words) in [
            ("group.total +", "does not compile"),
            ("group.total", "not a bool"),
            ("nosuch.thing == 1", "failed"),
            ("clusters[0].feedback.missing == 1", "failed"),
        ] {
            let spec = GateSpec {
                health: Some(HealthSpec {
                    expression: expression.into(),
                    hold_for_ms: 0,
                }),
                ..gate()
            };
            let out = evaluate_gate(&spec, &GateMemory::default(), &facts(1, 1), None, 0);
            assert_eq!(out.state, GateState::Unhealthy, "{expression}");
            assert!(out.message.contains(words), "{expression}: {}", out.message);
        }
    }

    #[test]
    fn nine_nested_alls_are_refused_before_they_run_and_say_which_limit() {
        let list = "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]";
        let mut expression = "true".to_string();
        for level in 0..9 {
            expression = format!("{list}.all(x{level}, {expression})");
        }
        assert!(expression.len() < MAX_CEL_EXPRESSION_LENGTH);
        let started = std::time::Instant::now();
        let error = evaluate_health(&expression, &facts(2, 2)).expect_err("refused");
        assert!(
            matches!(
                error,
                HealthError::TooCostly {
                    limit: MAX_HEALTH_COST,
                    ..
                }
            ),
            "{error}"
        );
        assert!(error.to_string().contains("static cost limit"), "{error}");
        // Refused without running: far less than the minutes it would take.
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        let spec = GateSpec {
            health: Some(HealthSpec {
                expression,
                hold_for_ms: 0,
            }),
            ..gate()
        };
        let out = evaluate_gate(&spec, &GateMemory::default(), &facts(1, 1), None, 0);
        assert_eq!(out.state, GateState::Unhealthy);
        assert!(out.message.contains("static cost limit"), "{}", out.message);
    }

    #[test]
    fn a_verdict_passed_in_decides_the_gate_and_a_missing_one_holds_it() {
        let spec = GateSpec {
            health: Some(HealthSpec {
                expression: "true".into(),
                hold_for_ms: 0,
            }),
            ..gate()
        };
        let f = facts(1, 1);
        assert!(needs_health(&spec, &GateMemory::default(), &f));
        let out = decide_gate(&spec, &GateMemory::default(), &f, None, Some(Ok(true)), 0);
        assert_eq!(out.state, GateState::Passed);
        let busy = decide_gate(
            &spec,
            &GateMemory::default(),
            &f,
            None,
            Some(Err(HealthError::TimedOut { limit_ms: 500 })),
            0,
        );
        assert_eq!(busy.state, GateState::Unhealthy);
        assert!(
            busy.message.contains("time limit of 500 ms"),
            "{}",
            busy.message
        );
        let missing = decide_gate(&spec, &GateMemory::default(), &f, None, None, 0);
        assert_eq!(missing.state, GateState::Unhealthy);
        assert!(!needs_health(&spec, &GateMemory::default(), &facts(2, 1)));
    }

    #[test]
    fn the_state_names_the_first_hold_and_the_message_all_of_them() {
        let spec = GateSpec {
            timed_wait_ms: 1_000,
            approval: true,
            ..gate()
        };
        let out = evaluate_gate(&spec, &GateMemory::default(), &facts(1, 1), None, 0);
        assert_eq!(out.state, GateState::Waiting);
        assert!(out.message.contains("awaiting approval"), "{}", out.message);
    }

    #[test]
    fn the_first_unpassed_gate_holds_the_later_groups() {
        assert_eq!(held_after(&[(Some(0), true), (Some(1), false)]), Some(1));
        assert_eq!(held_after(&[(Some(2), false), (Some(1), false)]), Some(1));
        assert_eq!(held_after(&[(None, false), (Some(0), true)]), None);
    }

    proptest! {
        #[test]
        fn a_gate_never_passes_before_its_wait_ends_nor_holds_after(
            wait in 0i64..100_000, opened in 0i64..1_000_000, step in 0i64..200_000,
        ) {
            let spec = GateSpec { timed_wait_ms: wait, ..gate() };
            let memory = GateMemory { opened_at: Some(opened), ..GateMemory::default() };
            let out = evaluate_gate(&spec, &memory, &facts(1, 1), None, opened + step);
            prop_assert_eq!(out.state == GateState::Passed, step >= wait);
            if step < wait {
                prop_assert_eq!(out.wake_after_ms, Some(wait - step));
            }
        }

        #[test]
        fn any_expression_text_gives_a_verdict_or_an_error(expression in ".{0,64}") {
            let _ = evaluate_health(&expression, &facts(2, 2));
        }
    }
}
