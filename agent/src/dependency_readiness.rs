//! Evaluates the readiness rules (`dependsOn[].celExpression`) a waiting
//! work's gate asks for: each dependency's last reported status, shaped as
//! the ManifestWork status the hub writes, goes through the agent's bounded
//! rule pool, and [`conclude`] decides. A rule that ran past its time bound
//! may still hold a pool thread, so it is not run again for
//! [`TIMED_OUT_RULE_BACKOFF`]: a hostile expression costs one runaway per
//! back-off, not one per status change.

use std::collections::HashMap;
use std::time::Duration;

use ferry_api::status_from_wire::work_status;
use serde_json::json;
use tokio::time::Instant;

use crate::dependencies::{RuleCheck, Verdict, conclude};
use crate::rule_pool::{ReadinessCheckError, RuleEvaluator};
use crate::status_board::StatusBoard;

/// How long a rule that ran past its time bound is not run again.
pub const TIMED_OUT_RULE_BACKOFF: Duration = Duration::from_secs(300);

/// The rules of one work that ran past their time bound, by expression,
/// and when each may run again. At most one entry per dependency of the
/// work (16).
#[derive(Debug, Default)]
pub struct RuleBackoff {
    until: HashMap<String, Instant>,
}

/// What keeps the work waiting once every rule of `checks` (of a work of
/// `owner`) is evaluated against the statuses on `board`, on `evaluator`'s
/// pool, in `owner`'s share (see
/// [`conclude`]): None when all hold. Never fails: what went wrong with a
/// rule keeps the work waiting with a message saying so.
pub async fn decide(
    owner: &str,
    checks: Vec<RuleCheck>,
    board: &StatusBoard,
    evaluator: &RuleEvaluator,
    backoff: &mut RuleBackoff,
) -> Option<(&'static str, String)> {
    let now = Instant::now();
    backoff.until.retain(|_, until| *until > now);
    let mut checked = Vec::with_capacity(checks.len());
    for check in checks {
        let verdict = verdict(owner, &check, board, evaluator, backoff).await;
        checked.push((check, verdict));
    }
    conclude(&checked)
}

async fn verdict(
    owner: &str,
    check: &RuleCheck,
    board: &StatusBoard,
    evaluator: &RuleEvaluator,
    backoff: &mut RuleBackoff,
) -> Verdict {
    if backoff.until.contains_key(&check.expression) {
        return Verdict::Error(format!(
            "exceeded its time bound; it is evaluated again at most every {}s",
            TIMED_OUT_RULE_BACKOFF.as_secs()
        ));
    }
    let Some(report) = board.latest(&check.uid).await else {
        return Verdict::NoStatus;
    };
    let status = match serde_json::to_value(work_status(&report)) {
        Ok(status) => status,
        Err(error) => return Verdict::Error(format!("could not be given its status: {error}")),
    };
    let work = json!({"metadata": {"name": check.work}, "status": status});
    match evaluator
        .check_readiness(owner, &check.expression, work)
        .await
    {
        Ok(true) => Verdict::Ready,
        Ok(false) => Verdict::NotReady,
        Err(error) => {
            if error == ReadinessCheckError::TimedOut {
                backoff.until.insert(
                    check.expression.clone(),
                    Instant::now() + TIMED_OUT_RULE_BACKOFF,
                );
            }
            Verdict::Error(error.to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_proto::v1;

    fn check(uid: &str, expression: &str) -> RuleCheck {
        RuleCheck {
            work: "db".into(),
            uid: uid.into(),
            expression: expression.into(),
        }
    }

    async fn board_with_db() -> StatusBoard {
        let board = StatusBoard::default();
        let status = v1::WorkStatus {
            work: Some(v1::WorkRef {
                uid: "u-db".into(),
                name: "db".into(),
                ..Default::default()
            }),
            generation: 2,
            conditions: vec![v1::Condition {
                r#type: "Available".into(),
                status: "True".into(),
                reason: "ResourcesAvailable".into(),
                message: "ok".into(),
                observed_generation: 2,
                ..Default::default()
            }],
            ..Default::default()
        };
        board.publish("u-db", status).await;
        board
    }

    #[tokio::test]
    async fn rules_read_the_dependencys_status_as_the_hub_writes_it() {
        let board = board_with_db().await;
        let evaluator = RuleEvaluator::default();
        let mut backoff = RuleBackoff::default();
        let ready = "work.metadata.name == 'db' && work.status.conditions.exists(c, \
            c.type == 'Available' && c.status == 'True' && c.observedGeneration == 2)";
        assert_eq!(
            decide(
                "team-a",
                vec![check("u-db", ready)],
                &board,
                &evaluator,
                &mut backoff
            )
            .await,
            None
        );
        let gate = decide(
            "team-a",
            vec![check("u-db", "work.status.conditions.size() > 5")],
            &board,
            &evaluator,
            &mut backoff,
        )
        .await;
        assert!(gate.is_some(), "{gate:?}");
        // No status yet: waiting, not an error.
        let gate = decide(
            "team-a",
            vec![check("u-none", "true")],
            &board,
            &evaluator,
            &mut backoff,
        )
        .await;
        assert!(
            matches!(&gate, Some((_, message)) if message.contains("to report a status")),
            "{gate:?}"
        );
    }

    #[tokio::test]
    async fn a_rule_past_its_time_bound_is_not_run_again_during_the_backoff() {
        let board = board_with_db().await;
        let evaluator = RuleEvaluator::default();
        let mut backoff = RuleBackoff::default();
        // Four nested comprehensions over 25 elements, about 4x10^5 steps:
        // seconds in a debug build, beyond the 250 ms bound on any machine.
        let range = format!("{:?}", (0..25).collect::<Vec<i64>>());
        let heavy = format!(
            "{range}.all(a, {range}.all(b, {range}.all(c, {range}.all(d, a + b + c + d >= 0))))"
        );
        let heavy = heavy.as_str();
        let first = decide(
            "team-a",
            vec![check("u-db", heavy)],
            &board,
            &evaluator,
            &mut backoff,
        )
        .await;
        assert!(
            matches!(&first, Some((_, message)) if message.contains("exceeded its")),
            "{first:?}"
        );
        let again = decide(
            "team-a",
            vec![check("u-db", heavy)],
            &board,
            &evaluator,
            &mut backoff,
        )
        .await;
        assert!(
            matches!(&again, Some((_, message)) if message.contains("at most every 300s")),
            "{again:?}"
        );
    }
}
