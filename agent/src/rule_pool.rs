//! Evaluates a manifest's condition rules (OCM's `conditionRules`) off the
//! async runtime, with a time bound: the `cel` crate has no cost tracking,
//! so each evaluation runs on a blocking thread under a deadline, and at
//! most [`CONCURRENT_EVALUATIONS`] run at once, so an expression that runs
//! long can never take more threads than that. No rule starts whose static
//! bounds (`ferry_semantics::cel_bounds`) are over the limits for the data
//! at hand, so none runs for more than about half a second however it is
//! written; one that runs past its deadline keeps its thread until it ends
//! (the `cel` crate cannot stop an evaluation). The pool is shared fairly by
//! owner (the tenant a work belongs to): one owner holds at most
//! [`OWNER_SHARE`] of it, so a team whose rules all run to their bounds
//! keeps its own share busy and every other team's rules still run.

use std::sync::Arc;
use std::time::Duration;

use ferry_proto::v1;
use ferry_semantics::condition_rules::{
    Progress, REASON_EXPRESSION_ERROR, RuleTarget, evaluate_condition_rules, expression_label,
};
use ferry_semantics::dependency_rule::{ReadinessError, evaluate_readiness};
use ferry_semantics::tenant_pool::{TenantPool, Unfinished};
use serde_json::Value;
use tokio::time::Instant;

use crate::conditions::{condition_of, observe_feedback};
use ferry_semantics::contract::FEEDBACK_SYNCED;

/// How many rule evaluations may run at once.
pub const CONCURRENT_EVALUATIONS: usize = 3;
/// How many of them one owner may hold: less than the whole pool, so
/// another owner's rules always find a thread, and more than one, so one
/// runaway rule does not stop the other rules of its own owner (every work
/// written straight into a cluster namespace shares that owner).
pub const OWNER_SHARE: usize = CONCURRENT_EVALUATIONS - 1;
/// Time allowed per expression of a manifest's rules; the manifest's
/// evaluation as a whole gets this times its expression count.
pub const TIME_PER_EXPRESSION: Duration = Duration::from_millis(250);
/// The most time one manifest's rules may take, whatever their count.
pub const MAX_TIME_PER_MANIFEST: Duration = Duration::from_secs(2);

/// Runs condition rules with a bound on time and on threads, shared fairly
/// by owner (the hub's gates use the same pool, `ferry_semantics::tenant_pool`).
pub struct RuleEvaluator {
    pool: TenantPool,
}

impl Default for RuleEvaluator {
    fn default() -> Self {
        Self {
            pool: TenantPool::new(CONCURRENT_EVALUATIONS, OWNER_SHARE),
        }
    }
}

impl RuleEvaluator {
    /// The conditions `rules` (of a work of `owner`) give for the object
    /// `meta` names, whose live JSON is `live`, stamped with `generation`.
    /// Never fails: an evaluation
    /// past its time bound (or one that panicked) gives every rule a False
    /// condition with reason `ConditionRuleExpressionError` naming the
    /// expression it was on.
    pub async fn evaluate(
        &self,
        owner: &str,
        meta: &v1::ResourceMeta,
        live: &Value,
        rules: &[v1::ConditionRule],
        generation: i64,
    ) -> Vec<v1::Condition> {
        if rules.is_empty() {
            return Vec::new();
        }
        let expressions: usize = rules
            .iter()
            .map(|r| r.cel_expressions.len().max(1) + usize::from(!r.message_expression.is_empty()))
            .sum();
        let bound = TIME_PER_EXPRESSION
            .saturating_mul(u32::try_from(expressions).unwrap_or(u32::MAX))
            .min(MAX_TIME_PER_MANIFEST);
        let deadline = Instant::now() + bound;
        let progress = Arc::new(Progress::default());
        let failed = |message: String| -> Vec<v1::Condition> {
            rules
                .iter()
                .filter(|r| !r.condition.is_empty())
                .map(|r| {
                    condition_of(
                        &r.condition,
                        "False",
                        REASON_EXPRESSION_ERROR,
                        message.clone(),
                        generation,
                    )
                })
                .collect()
        };
        let owned = (
            meta.group.clone(),
            meta.version.clone(),
            meta.kind.clone(),
            live.clone(),
            rules.to_vec(),
            progress.clone(),
        );
        let ran = self
            .pool
            .run(owner, deadline, move || {
                let (group, version, kind, live, rules, progress) = owned;
                let target = RuleTarget {
                    group: &group,
                    version: &version,
                    kind: &kind,
                    live: &live,
                };
                evaluate_condition_rules(&target, &rules, &progress)
            })
            .await;
        match ran {
            Ok(results) => results
                .into_iter()
                .map(|c| condition_of(&c.type_, c.status, c.reason, c.message, generation))
                .collect(),
            Err(Unfinished::TenantBusy | Unfinished::PoolBusy) => failed(format!(
                "CEL evaluation did not start within its {bound:?} time bound: \
                 other evaluations (of this owner's share, or of the agent's pool) are still running"
            )),
            Err(Unfinished::Panicked(error)) => failed(format!("CEL evaluation failed: {error}")),
            Err(Unfinished::TimedOut) => {
                let target = RuleTarget {
                    group: &meta.group,
                    version: &meta.version,
                    kind: &meta.kind,
                    live,
                };
                let at = expression_label(&target, rules, progress.started().saturating_sub(1))
                    .unwrap_or_else(|| "an unknown expression".to_string());
                failed(format!(
                    "CEL evaluation exceeded its {bound:?} time bound at {at}"
                ))
            }
        }
    }

    /// `StatusFeedbackSynced` and the values of the feedback `rules` (of a
    /// work of `owner`) over the live object `meta` names, evaluated on this
    /// pool: JSONPath is tenant input, and jsonpath-rust's work grows with
    /// the object and the path, so it never runs on the async runtime and
    /// takes at most the owner's share of the pool's threads. Within
    /// [`TIME_PER_EXPRESSION`] per path, at most [`MAX_TIME_PER_MANIFEST`].
    /// Never fails: past its bound (or when the pool stays busy that long)
    /// the condition is False, saying so, and no value is reported.
    pub async fn feedback(
        &self,
        owner: &str,
        meta: &v1::ResourceMeta,
        live: &Value,
        rules: &[v1::FeedbackRule],
        generation: i64,
        max_json_raw_length: usize,
    ) -> (v1::Condition, Vec<v1::FeedbackValue>) {
        if rules.is_empty() {
            return observe_feedback(meta, live, rules, generation, max_json_raw_length);
        }
        let paths: usize = rules.iter().map(|r| r.json_paths.len().max(1)).sum();
        let bound = TIME_PER_EXPRESSION
            .saturating_mul(u32::try_from(paths).unwrap_or(u32::MAX))
            .min(MAX_TIME_PER_MANIFEST);
        let owned = (meta.clone(), live.clone(), rules.to_vec());
        let ran = self
            .pool
            .run(owner, Instant::now() + bound, move || {
                let (meta, live, rules) = owned;
                observe_feedback(&meta, &live, &rules, generation, max_json_raw_length)
            })
            .await;
        let failed = |message: String| {
            (
                condition_of(
                    FEEDBACK_SYNCED,
                    "False",
                    "StatusFeedbackSyncFailed",
                    message,
                    generation,
                ),
                Vec::new(),
            )
        };
        match ran {
            Ok(evaluated) => evaluated,
            Err(Unfinished::TenantBusy | Unfinished::PoolBusy) => failed(format!(
                "status feedback was not evaluated within its {bound:?} time bound: other evaluations (of this owner's share, or of the agent's pool) are still running"
            )),
            Err(Unfinished::TimedOut) => failed(format!(
                "status feedback evaluation exceeded its {bound:?} time bound"
            )),
            Err(Unfinished::Panicked(error)) => {
                failed(format!("status feedback evaluation failed: {error}"))
            }
        }
    }
}

/// Why a dependency's readiness rule gave no verdict.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadinessCheckError {
    /// The rule itself is at fault (does not compile, fails, not a bool).
    #[error("{0}")]
    Rule(#[from] ReadinessError),
    /// It ran past [`TIME_PER_EXPRESSION`]; it may still hold a permit
    /// until it ends.
    #[error("exceeded its {TIME_PER_EXPRESSION:?} time bound")]
    TimedOut,
    /// No permit came free within [`TIME_PER_EXPRESSION`].
    #[error(
        "was not evaluated within its {TIME_PER_EXPRESSION:?} time bound: other evaluations are still running"
    )]
    Busy,
    /// The evaluation thread panicked.
    #[error("evaluation failed: {0}")]
    Panicked(String),
}

impl RuleEvaluator {
    /// Whether the readiness rule `expression` (of a work of `owner`) holds
    /// for the dependency `work` (see `ferry_semantics::dependency_rule`),
    /// evaluated on this pool within [`TIME_PER_EXPRESSION`]. Fails when the
    /// rule is at fault, runs past its bound, or the owner's share or the
    /// pool stays busy that long.
    pub async fn check_readiness(
        &self,
        owner: &str,
        expression: &str,
        work: Value,
    ) -> Result<bool, ReadinessCheckError> {
        let deadline = Instant::now() + TIME_PER_EXPRESSION;
        let expression = expression.to_string();
        let ran = self
            .pool
            .run(owner, deadline, move || {
                evaluate_readiness(&expression, &work)
            })
            .await;
        match ran {
            Ok(verdict) => Ok(verdict?),
            Err(Unfinished::TenantBusy | Unfinished::PoolBusy) => Err(ReadinessCheckError::Busy),
            Err(Unfinished::TimedOut) => Err(ReadinessCheckError::TimedOut),
            Err(Unfinished::Panicked(error)) => Err(ReadinessCheckError::Panicked(error)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn meta() -> v1::ResourceMeta {
        v1::ResourceMeta {
            version: "v1".into(),
            kind: "ConfigMap".into(),
            ..Default::default()
        }
    }

    /// A rule within the agent's static bounds that still runs far past
    /// its time bound in a debug build: three nested `all` over an
    /// 80-element literal list, 512,000 iterations.
    fn slow_rule() -> String {
        let list = format!("{:?}", (0..80).collect::<Vec<i64>>());
        let rule = format!("{list}.all(a, {list}.all(b, {list}.all(c, a + b + c >= 0)))");
        assert_eq!(
            ferry_semantics::cel_bounds::refusal(&rule),
            None,
            "within the static bounds"
        );
        rule
    }

    fn rule(expression: &str) -> v1::ConditionRule {
        v1::ConditionRule {
            condition: "Checked".into(),
            r#type: "CEL".into(),
            cel_expressions: vec![expression.into()],
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn rules_are_evaluated_on_the_live_object() {
        let live = json!({"data": {"k": "v"}});
        let out = RuleEvaluator::default()
            .evaluate("team-a", &meta(), &live, &[rule("object.data.k == 'v'")], 4)
            .await;
        assert_eq!(out.len(), 1);
        assert_eq!(
            (
                out[0].r#type.as_str(),
                out[0].status.as_str(),
                out[0].reason.as_str()
            ),
            ("Checked", "True", "ConditionRuleEvaluated")
        );
        assert_eq!(out[0].observed_generation, 4);
    }

    #[tokio::test]
    async fn an_expression_past_its_time_bound_is_named_in_a_false_condition() {
        let live = json!({"data": {"k": "v"}});
        let heavy = slow_rule();
        let out = RuleEvaluator::default()
            .evaluate("team-a", &meta(), &live, &[rule(&heavy)], 1)
            .await;
        assert_eq!(out.len(), 1);
        assert_eq!(
            (out[0].status.as_str(), out[0].reason.as_str()),
            ("False", "ConditionRuleExpressionError")
        );
        assert!(
            out[0].message.contains("time bound") && out[0].message.contains(&heavy),
            "{}",
            out[0].message
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_owners_runaway_rules_leave_another_owner_a_thread() {
        // Seconds each in a debug build, so both are still running when
        // the other team's rule is asked for.
        let items: Vec<i64> = (0..700).collect();
        let work = json!({"status": {"items": items}});
        let heavy = slow_rule();
        let evaluator = Arc::new(RuleEvaluator::default());
        let hostile = |evaluator: Arc<RuleEvaluator>, work: Value| {
            let heavy = heavy.clone();
            async move { evaluator.check_readiness("team-a", &heavy, work).await }
        };
        let (first, second, third) = tokio::join!(
            hostile(evaluator.clone(), work.clone()),
            hostile(evaluator.clone(), work.clone()),
            hostile(evaluator.clone(), work.clone()),
        );
        let mut outcomes = [first, second, third];
        outcomes.sort_by_key(|o| format!("{o:?}"));
        assert_eq!(
            outcomes,
            [
                Err(ReadinessCheckError::Busy),
                Err(ReadinessCheckError::TimedOut),
                Err(ReadinessCheckError::TimedOut)
            ],
            "team-a's third rule waits for team-a's share"
        );
        // team-a's runaway rules still hold two threads; team-b gets the third.
        assert_eq!(
            evaluator
                .check_readiness("team-b", "work.status.items.size() == 700", work)
                .await,
            Ok(true)
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn feedback_runs_on_the_pool_within_its_owners_share() {
        let meta = v1::ResourceMeta {
            version: "v1".into(),
            kind: "ConfigMap".into(),
            ..Default::default()
        };
        let live = json!({"data": {"k": "v"}});
        let rules = vec![v1::FeedbackRule {
            r#type: "JSONPaths".into(),
            json_paths: vec![v1::NamedJsonPath {
                name: "k".into(),
                path: ".data.k".into(),
            }],
        }];
        let evaluator = Arc::new(RuleEvaluator::default());
        let (synced, values) = evaluator
            .feedback("team-b", &meta, &live, &rules, 3, 1024)
            .await;
        assert_eq!(
            (synced.status.as_str(), synced.observed_generation),
            ("True", 3)
        );
        assert_eq!(values.len(), 1, "{values:?}");
        // team-a's runaway rules hold its share: its feedback waits and
        // says so; team-b's is still evaluated on the pool's third thread.
        let work = json!({"status": {}});
        let heavy = slow_rule();
        let hogs: Vec<_> = (0..2)
            .map(|_| {
                let (evaluator, work, heavy) = (evaluator.clone(), work.clone(), heavy.clone());
                tokio::spawn(async move { evaluator.check_readiness("team-a", &heavy, work).await })
            })
            .collect();
        // The signal: both hogs hold their threads (one pool permit left).
        while evaluator.pool.available() > 1 {
            tokio::task::yield_now().await;
        }
        let team_a = evaluator
            .feedback("team-a", &meta, &live, &rules, 3, 1024)
            .await;
        let team_b = evaluator
            .feedback("team-b", &meta, &live, &rules, 3, 1024)
            .await;
        for hog in hogs {
            assert_eq!(hog.await.ok(), Some(Err(ReadinessCheckError::TimedOut)));
        }
        assert_eq!(team_a.0.status, "False");
        assert!(
            team_a.0.message.contains("time bound"),
            "{}",
            team_a.0.message
        );
        assert!(team_a.1.is_empty());
        assert_eq!(team_b.0.status, "True", "{}", team_b.0.message);
        assert_eq!(team_b.1.len(), 1);
    }

    #[tokio::test]
    async fn a_readiness_rule_past_its_time_bound_times_out() {
        // Seconds in a debug build.
        let items: Vec<i64> = (0..700).collect();
        let work = json!({"status": {"items": items}});
        let evaluator = RuleEvaluator::default();
        let heavy = slow_rule();
        assert_eq!(
            evaluator
                .check_readiness("team-a", &heavy, work.clone())
                .await,
            Err(ReadinessCheckError::TimedOut)
        );
        assert_eq!(
            evaluator
                .check_readiness("team-b", "work.status.items.size() == 700", work.clone())
                .await,
            Ok(true),
            "another owner's rule runs while team-a's runaway one holds team-a's share"
        );
        assert!(matches!(
            evaluator
                .check_readiness("team-b", "work.(", work.clone())
                .await,
            Err(ReadinessCheckError::Rule(ReadinessError::Parse(_)))
        ));
    }

    #[tokio::test]
    async fn a_rule_over_its_static_bounds_never_starts() {
        // Every pair of items compared: refused before it runs, its thread
        // back at once, where it used to hold one for minutes.
        let items: Vec<i64> = (0..700).collect();
        let work = json!({"status": {"items": items}});
        let evaluator = RuleEvaluator::default();
        let quadratic = "work.status.items.all(x, work.status.items.all(y, x >= y || y >= x))";
        assert_eq!(
            evaluator.check_readiness("team-a", quadratic, work).await,
            Err(ReadinessCheckError::Rule(ReadinessError::Refused(
                ferry_semantics::cel_bounds::Refusal::CostUnbounded
            )))
        );
        assert_eq!(evaluator.pool.available(), CONCURRENT_EVALUATIONS);
    }
}
