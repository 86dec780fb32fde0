//! A dependency's readiness rule in CEL (`spec.dependsOn[].celExpression`):
//! true when the work it names is ready. The expression sees one variable,
//! `work`: the dependency as a ManifestWork (`metadata.name`, and `status`
//! shaped as the hub writes it), so a rule reads like one over the
//! ManifestWork on the hub.
//!
//! The `cel` crate counts nothing while it runs, so this evaluation has no
//! bound of its own: the agent runs it on its bounded rule pool under a
//! deadline (`agent/src/rule_pool.rs`), like condition rules.

use serde_json::Value;

use crate::condition_rules::{RunError, run_with, to_cel};

/// Name of the variable a readiness rule sees.
pub const WORK_VARIABLE: &str = "work";

/// Why a readiness rule gave no verdict.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadinessError {
    /// The expression is longer than the condition rules' limit.
    #[error(
        "is longer than {} bytes",
        crate::condition_rules::MAX_CEL_EXPRESSION_LENGTH
    )]
    TooLong,
    /// The expression does not compile.
    #[error("does not compile: {0}")]
    Parse(String),
    /// It failed while running (a missing field, a type error).
    #[error("failed: {0}")]
    Execute(String),
    /// It gave something other than a bool.
    #[error("gave a {0}, not a bool")]
    NotBool(String),
    /// It may allocate more, or take more steps, than the agent runs (see
    /// `crate::cel_bounds`).
    #[error("is refused before it runs: it {0}")]
    Refused(crate::cel_bounds::Refusal),
}

/// Whether the rule `expression` holds for the dependency `work` (a
/// ManifestWork as JSON: `metadata.name` and `status`). Fails when the
/// expression is too long, does not compile, fails, or is not a bool.
/// Unbounded in time: callers run it under a deadline.
pub fn evaluate_readiness(expression: &str, work: &Value) -> Result<bool, ReadinessError> {
    let variables = [(WORK_VARIABLE, to_cel(work))];
    match run_with(expression, &variables) {
        Ok(cel::Value::Bool(ready)) => Ok(ready),
        Ok(other) => Err(ReadinessError::NotBool(format!("{:?}", other.type_of()))),
        Err(RunError::TooLong) => Err(ReadinessError::TooLong),
        Err(RunError::Parse(e)) => Err(ReadinessError::Parse(e)),
        Err(RunError::Execute(e)) => Err(ReadinessError::Execute(e)),
        Err(RunError::Refused(e)) => Err(ReadinessError::Refused(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn db(ready_replicas: i64) -> Value {
        json!({
            "metadata": {"name": "db"},
            "status": {
                "conditions": [{"type": "Available", "status": "True"}],
                "resourceStatus": {"manifests": [{
                    "resourceMeta": {"kind": "StatefulSet", "name": "db"},
                    "statusFeedback": {"values": [
                        {"name": "ReadyReplicas", "fieldValue": {"type": "Integer", "integer": ready_replicas}}
                    ]}
                }]}
            }
        })
    }

    const THREE_READY: &str = "work.status.resourceStatus.manifests.exists(m, \
        m.statusFeedback.values.exists(v, v.name == 'ReadyReplicas' && v.fieldValue.integer >= 3))";

    #[test]
    fn a_rule_over_feedback_follows_the_value() {
        assert_eq!(evaluate_readiness(THREE_READY, &db(1)), Ok(false));
        assert_eq!(evaluate_readiness(THREE_READY, &db(3)), Ok(true));
    }

    #[test]
    fn an_absent_field_is_tested_with_has() {
        let mut work = db(3);
        work["status"]["resourceStatus"]["manifests"][0]
            .as_object_mut()
            .expect("manifest")
            .remove("statusFeedback");
        assert!(matches!(
            evaluate_readiness(THREE_READY, &work),
            Err(ReadinessError::Execute(_))
        ));
        let guarded = "work.status.resourceStatus.manifests.exists(m, \
            has(m.statusFeedback) && m.statusFeedback.values.size() > 0)";
        assert_eq!(evaluate_readiness(guarded, &work), Ok(false));
        assert_eq!(evaluate_readiness(guarded, &db(3)), Ok(true));
    }

    #[test]
    fn a_rule_over_conditions_and_the_name_reads_the_work() {
        let rule = "work.metadata.name == 'db' && work.status.conditions.exists(c, \
            c.type == 'Available' && c.status == 'True')";
        assert_eq!(evaluate_readiness(rule, &db(0)), Ok(true));
    }

    #[test]
    fn errors_say_what_went_wrong() {
        assert!(matches!(
            evaluate_readiness("work.status.(", &db(0)),
            Err(ReadinessError::Parse(_))
        ));
        assert!(matches!(
            evaluate_readiness("work.status.nothing == 1", &db(0)),
            Err(ReadinessError::Execute(_))
        ));
        assert!(matches!(
            evaluate_readiness("work.metadata.name", &db(0)),
            Err(ReadinessError::NotBool(_))
        ));
        // Every pair of conditions, concatenated: refused before it runs
        // (the agent cannot stop an evaluation once it allocates).
        assert_eq!(
            evaluate_readiness(
                "work.status.conditions.map(a, work.status.conditions.map(b, a.type + b.type)).size() > 0",
                &db(0)
            ),
            Err(ReadinessError::Refused(
                crate::cel_bounds::Refusal::AllocationUnbounded
            ))
        );
        let long = format!("true || {}", "true || ".repeat(1000));
        assert_eq!(
            evaluate_readiness(&long, &db(0)),
            Err(ReadinessError::TooLong)
        );
    }
}
