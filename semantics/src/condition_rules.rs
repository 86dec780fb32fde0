//! OCM's condition rules: per-manifest conditions computed from the live
//! object with CEL (the `cel` crate), or from built-in rules for Job and Pod
//! (`WellKnownConditions`), with OCM's reasons and messages.
//!
//! A rule's condition is True when every one of its expressions is true,
//! False at the first one that is false, and False with reason
//! `ConditionRuleExpressionError` and a message naming the expression when
//! one does not parse, fails, or is not a boolean. Nothing here fails as a
//! whole: each rule gets its own condition.
//!
//! Bounds: at most [`MAX_CONDITION_RULES`] rules of at most
//! [`MAX_CEL_EXPRESSIONS`] expressions of at most
//! [`MAX_CEL_EXPRESSION_LENGTH`] bytes (the CRD enforces the same). The
//! `cel` crate has no cost tracking, so the agent bounds the time instead: it
//! evaluates on a blocking thread with a deadline and, when it passes, names
//! the expression under evaluation from [`Progress`].

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::cel_bounds::{Refusal, bounds, data_size};
use cel::objects::{Key, Map};
use cel::{Context, Program, Value as CelValue};
use ferry_proto::v1;
use serde_json::Value;

/// Rule type of CEL expressions written by the user.
pub const RULE_CEL: &str = "CEL";
/// Rule type of the built-in rules for common kinds.
pub const RULE_WELL_KNOWN_CONDITIONS: &str = "WellKnownConditions";

/// Reason of a condition whose rule was evaluated (OCM's).
pub const REASON_EVALUATED: &str = "ConditionRuleEvaluated";
/// Reason of a condition whose rule type is unknown (OCM's).
pub const REASON_INVALID: &str = "ConditionRuleInvalid";
/// Reason of a condition whose expression did not parse, failed or gave a
/// non-boolean, or ran past the time bound (OCM's).
pub const REASON_EXPRESSION_ERROR: &str = "ConditionRuleExpressionError";

/// Most condition rules per manifest config. With ferry's own five manifest
/// conditions (and five work conditions) this keeps every list within the
/// hub's 16 conditions per list.
pub const MAX_CONDITION_RULES: usize = 10;
/// Most CEL expressions per rule.
pub const MAX_CEL_EXPRESSIONS: usize = 16;
/// Longest CEL expression (and message expression), in bytes.
pub const MAX_CEL_EXPRESSION_LENGTH: usize = 4096;

/// OCM's built-in Job rule: complete once `Complete` or `Failed` is True.
const JOB_COMPLETE: &str = "hasConditions(object.status) \
    ? object.status.conditions.filter(c, c.type == 'Complete' || c.type == 'Failed')\
    .exists(c, c.status == 'True') : false";
const JOB_COMPLETE_MESSAGE: &str = r#"result ? "Job is finished" : "Job is not finished""#;
/// OCM's built-in Pod rule: complete once the phase is terminal.
const POD_COMPLETE: &str = "object.status.phase in ['Succeeded', 'Failed']";
const POD_COMPLETE_MESSAGE: &str = r#""Pod is in phase " + object.status.phase"#;

/// One condition a rule produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleCondition {
    /// The condition type, the rule's `condition`.
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: &'static str,
    /// One of the `REASON_*` constants.
    pub reason: &'static str,
    /// The rule's message, message expression result, or what went wrong.
    pub message: String,
}

/// Which expression an evaluation has reached, so that a caller bounding
/// the time can say which one ran too long. Counts expressions in the order
/// [`expression_label`] numbers them.
#[derive(Debug, Default)]
pub struct Progress {
    started: AtomicUsize,
}

impl Progress {
    /// How many expressions have been started.
    pub fn started(&self) -> usize {
        self.started.load(Ordering::Relaxed)
    }

    fn start(&self) {
        self.started.fetch_add(1, Ordering::Relaxed);
    }
}

/// The object a rule is evaluated for: its API group, version, kind and
/// live JSON.
#[derive(Debug, Clone, Copy)]
pub struct RuleTarget<'a> {
    /// API group, empty for the core group.
    pub group: &'a str,
    /// API version, e.g. `v1`.
    pub version: &'a str,
    /// Kind, e.g. `Job`.
    pub kind: &'a str,
    /// The live object, status included.
    pub live: &'a Value,
}

/// A rule with its expressions resolved: the user's for `CEL`, the built-in
/// ones for `WellKnownConditions` (with the user's message overrides).
struct Resolved {
    expressions: Vec<String>,
    message: String,
    message_expression: String,
}

fn resolve(target: &RuleTarget<'_>, rule: &v1::ConditionRule) -> Result<Option<Resolved>, String> {
    match rule.r#type.as_str() {
        RULE_CEL => Ok(Some(Resolved {
            expressions: rule.cel_expressions.clone(),
            message: rule.message.clone(),
            message_expression: rule.message_expression.clone(),
        })),
        RULE_WELL_KNOWN_CONDITIONS => {
            let builtin = match (target.group, target.version, target.kind) {
                ("batch", "v1", "Job") => Some((JOB_COMPLETE, JOB_COMPLETE_MESSAGE)),
                ("", "v1", "Pod") => Some((POD_COMPLETE, POD_COMPLETE_MESSAGE)),
                _ => None,
            };
            // OCM: only `Complete` is built in; other conditions (or kinds)
            // produce no condition at all.
            Ok(builtin
                .filter(|_| rule.condition == crate::contract::COMPLETE)
                .map(|(expression, message_expression)| Resolved {
                    expressions: vec![expression.to_string()],
                    message: rule.message.clone(),
                    message_expression: if rule.message_expression.is_empty() {
                        message_expression.to_string()
                    } else {
                        rule.message_expression.clone()
                    },
                }))
        }
        other => Err(format!(
            "unrecognized condition rule type {other:?}; use CEL or WellKnownConditions"
        )),
    }
}

/// Evaluates the condition rules of one manifest on its live object, in
/// order, counting expressions in `progress`. Rules that do not apply (a
/// `WellKnownConditions` rule for a kind without one) produce nothing.
/// Never fails: each rule's problem is its condition's message.
pub fn evaluate_condition_rules(
    target: &RuleTarget<'_>,
    rules: &[v1::ConditionRule],
    progress: &Progress,
) -> Vec<RuleCondition> {
    let object = to_cel(target.live);
    rules
        .iter()
        .take(MAX_CONDITION_RULES)
        .filter_map(|rule| evaluate_rule(target, &object, rule, progress))
        .collect()
}

fn evaluate_rule(
    target: &RuleTarget<'_>,
    object: &CelValue,
    rule: &v1::ConditionRule,
    progress: &Progress,
) -> Option<RuleCondition> {
    let condition = |status, reason, message| RuleCondition {
        type_: rule.condition.clone(),
        status,
        reason,
        message,
    };
    let resolved = match resolve(target, rule) {
        Ok(resolved) => resolved?,
        Err(message) => return Some(condition("Unknown", REASON_INVALID, message)),
    };
    if resolved.expressions.len() > MAX_CEL_EXPRESSIONS {
        let message = format!(
            "{} CEL expressions, over the limit of {MAX_CEL_EXPRESSIONS}",
            resolved.expressions.len()
        );
        return Some(condition("False", REASON_EXPRESSION_ERROR, message));
    }
    let mut result = true;
    for expression in &resolved.expressions {
        progress.start();
        match run(expression, object, None) {
            Ok(CelValue::Bool(true)) => {}
            Ok(CelValue::Bool(false)) => {
                result = false;
                break;
            }
            Ok(other) => {
                let message = format!(
                    "CEL expression {expression:?}: expected a bool result, got {}",
                    other.type_of()
                );
                return Some(condition("False", REASON_EXPRESSION_ERROR, message));
            }
            Err(error) => {
                let message = format!("CEL expression {expression:?}: {error}");
                return Some(condition("False", REASON_EXPRESSION_ERROR, message));
            }
        }
    }
    let status = if result { "True" } else { "False" };
    let message = message_of(rule, &resolved, object, result, progress);
    Some(condition(status, REASON_EVALUATED, message))
}

/// OCM's message order: a non-empty message expression result, else the
/// rule's message, else "Manifest is (not) <condition>". A message expression
/// that fails gives its error as the message.
fn message_of(
    rule: &v1::ConditionRule,
    resolved: &Resolved,
    object: &CelValue,
    result: bool,
    progress: &Progress,
) -> String {
    if !resolved.message_expression.is_empty() {
        progress.start();
        match run(&resolved.message_expression, object, Some(result)) {
            Ok(CelValue::String(text)) if !text.is_empty() => return text.to_string(),
            Ok(CelValue::String(_)) => {}
            Ok(other) => {
                return format!(
                    "message expression {:?}: expected a string result, got {}",
                    resolved.message_expression,
                    other.type_of()
                );
            }
            Err(error) => {
                return format!(
                    "message expression {:?}: {error}",
                    resolved.message_expression
                );
            }
        }
    }
    if !resolved.message.is_empty() {
        return resolved.message.clone();
    }
    if result {
        format!("Manifest is {}", rule.condition)
    } else {
        format!("Manifest is not {}", rule.condition)
    }
}

/// Why one CEL expression gave no value.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RunError {
    #[error("longer than {MAX_CEL_EXPRESSION_LENGTH} bytes")]
    TooLong,
    #[error("does not parse: {0}")]
    Parse(String),
    #[error("evaluation failed: {0}")]
    Execute(String),
    #[error("is refused before it runs: it {0}")]
    Refused(#[from] Refusal),
}

/// Compiles and runs one expression with `object` (and `result` for
/// message expressions) bound, plus OCM's `hasConditions` function.
fn run(expression: &str, object: &CelValue, result: Option<bool>) -> Result<CelValue, RunError> {
    let result = result.map(|r| ("result", CelValue::Bool(r)));
    let variables: Vec<(&str, CelValue)> = std::iter::once(("object", object.clone()))
        .chain(result)
        .collect();
    run_with(expression, &variables)
}

/// Compiles and runs one expression (at most [`MAX_CEL_EXPRESSION_LENGTH`]
/// bytes) with `variables` bound, plus OCM's `hasConditions` function.
/// Fails when it is too long, does not parse, may allocate more or take
/// more steps than the agent runs over these variables
/// ([`crate::cel_bounds`]), or fails while running.
pub(crate) fn run_with(
    expression: &str,
    variables: &[(&str, CelValue)],
) -> Result<CelValue, RunError> {
    if expression.len() > MAX_CEL_EXPRESSION_LENGTH {
        return Err(RunError::TooLong);
    }
    // The parser reports most bad input as an error; a panic inside it on
    // input it does not expect becomes one too.
    let program = std::panic::catch_unwind(|| Program::compile(expression))
        .map_err(|_| RunError::Parse("the parser gave up".into()))?
        .map_err(|e| RunError::Parse(e.to_string()))?;
    // The `cel` crate cannot be stopped once it runs: what it may allocate
    // and the steps it may take are bounded first, for the data at hand
    // (see `cel_bounds`). Measuring the data walks it, so it is measured
    // only as far as the bounds need.
    let bounds = bounds(program.expression());
    let worth = bounds.data_worth_measuring();
    let data = if worth == 0 {
        0
    } else {
        variables.iter().fold(0u64, |sum, (_, value)| {
            sum.saturating_add(data_size(value, worth))
        })
    };
    bounds.check(Some(data))?;
    let mut context = Context::default();
    for (name, value) in variables {
        context.add_variable_from_value(*name, value.clone());
    }
    context
        .add_function("hasConditions", has_conditions)
        .map_err(|e| RunError::Execute(e.to_string()))?;
    program
        .execute(&context)
        .map_err(|e| RunError::Execute(e.to_string()))
}

/// OCM's `hasConditions(status)`: whether `status` is a map with a
/// non-empty `conditions` list.
fn has_conditions(status: CelValue) -> bool {
    let CelValue::Map(map) = status else {
        return false;
    };
    matches!(
        map.map.get(&Key::String(Arc::new("conditions".to_string()))),
        Some(CelValue::List(list)) if !list.is_empty()
    )
}

/// The JSON object as a CEL value: integers that fit `i64` are `int` (as
/// Kubernetes' CEL sees JSON integers), other numbers `double`.
pub fn to_cel(value: &Value) -> CelValue {
    match value {
        Value::Null => CelValue::Null,
        Value::Bool(b) => CelValue::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => CelValue::Int(i),
            None => CelValue::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => CelValue::String(Arc::new(s.clone())),
        Value::Array(items) => CelValue::List(Arc::new(items.iter().map(to_cel).collect())),
        Value::Object(fields) => {
            let map: HashMap<Key, CelValue> = fields
                .iter()
                .map(|(k, v)| (Key::String(Arc::new(k.clone())), to_cel(v)))
                .collect();
            CelValue::Map(Map { map: Arc::new(map) })
        }
    }
}

/// Which expression the `ordinal`-th started one (0-based, counted as
/// [`Progress`] counts) is, for a message: "rule #r (Condition) expression
/// #e: <text>" or "... message expression: <text>". `None` past the end.
pub fn expression_label(
    target: &RuleTarget<'_>,
    rules: &[v1::ConditionRule],
    ordinal: usize,
) -> Option<String> {
    // Evaluation may stop early within a rule, so this is an upper bound on
    // what was reached: the label names the expression at that count if
    // every earlier expression ran.
    let mut seen = 0;
    for (r, rule) in rules.iter().take(MAX_CONDITION_RULES).enumerate() {
        let Ok(Some(resolved)) = resolve(target, rule) else {
            continue;
        };
        for (e, expression) in resolved.expressions.iter().enumerate() {
            if seen == ordinal {
                return Some(format!(
                    "rule #{r} ({}) expression #{e}: {expression:?}",
                    rule.condition
                ));
            }
            seen += 1;
        }
        if !resolved.message_expression.is_empty() {
            if seen == ordinal {
                return Some(format!(
                    "rule #{r} ({}) message expression: {:?}",
                    rule.condition, resolved.message_expression
                ));
            }
            seen += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cel(condition: &str, expressions: &[&str]) -> v1::ConditionRule {
        v1::ConditionRule {
            condition: condition.into(),
            r#type: RULE_CEL.into(),
            cel_expressions: expressions.iter().map(|e| e.to_string()).collect(),
            ..Default::default()
        }
    }

    fn well_known(condition: &str) -> v1::ConditionRule {
        v1::ConditionRule {
            condition: condition.into(),
            r#type: RULE_WELL_KNOWN_CONDITIONS.into(),
            ..Default::default()
        }
    }

    fn eval(
        (group, version, kind): (&str, &str, &str),
        live: &Value,
        rules: &[v1::ConditionRule],
    ) -> Vec<RuleCondition> {
        let target = RuleTarget {
            group,
            version,
            kind,
            live,
        };
        evaluate_condition_rules(&target, rules, &Progress::default())
    }

    const CM: (&str, &str, &str) = ("", "v1", "ConfigMap");
    const JOB: (&str, &str, &str) = ("batch", "v1", "Job");
    const POD: (&str, &str, &str) = ("", "v1", "Pod");

    #[test]
    fn a_cel_rule_is_true_when_every_expression_is() {
        let live = json!({"data": {"ready": "yes", "n": 3}});
        let rules = [cel(
            "Ready",
            &["object.data.ready == 'yes'", "object.data.n > 2"],
        )];
        assert_eq!(
            eval(CM, &live, &rules),
            vec![RuleCondition {
                type_: "Ready".into(),
                status: "True",
                reason: REASON_EVALUATED,
                message: "Manifest is Ready".into(),
            }]
        );
        let rules = [cel("Ready", &["object.data.n > 5", "1 / 0 == 1"])];
        let out = eval(CM, &live, &rules);
        assert_eq!((out[0].status, out[0].reason), ("False", REASON_EVALUATED));
        assert_eq!(out[0].message, "Manifest is not Ready");
    }

    #[test]
    fn message_expressions_see_object_and_result_and_win_over_message() {
        let live = json!({"data": {"n": 3}});
        let mut rule = cel("Counted", &["object.data.n == 3"]);
        rule.message = "plain".into();
        rule.message_expression = r#"result ? "n is " + string(object.data.n) : "no""#.into();
        assert_eq!(eval(CM, &live, &[rule.clone()])[0].message, "n is 3");
        rule.message_expression = r#""""#.into();
        assert_eq!(eval(CM, &live, &[rule])[0].message, "plain");
    }

    #[test]
    fn a_failing_expression_gives_false_naming_the_expression() {
        let live = json!({"data": {}});
        for (expression, says) in [
            ("object.status.phase == 'x'", "evaluation failed"),
            ("object.data ==", "does not parse"),
            ("'not a bool'", "expected a bool result"),
            (
                "size([0, 1, 2, 3, 4, 5, 6, 7, 8, 9].map(a, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9].map(b, \
                 [0, 1, 2, 3, 4, 5, 6, 7, 8, 9].map(c, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9].map(d, \
                 [0, 1, 2, 3, 4, 5, 6, 7, 8, 9].map(e, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9].map(f, \
                 [0, 1, 2, 3, 4, 5, 6, 7, 8, 9].map(g, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9])))))))) > 0",
                "refused before it runs",
            ),
        ] {
            let out = eval(CM, &live, &[cel("C", &[expression])]);
            assert_eq!(out.len(), 1);
            assert_eq!(
                (out[0].status, out[0].reason),
                ("False", REASON_EXPRESSION_ERROR)
            );
            assert!(
                out[0].message.contains(expression) && out[0].message.contains(says),
                "{}",
                out[0].message
            );
        }
        let long = format!("{} == 1", "1 + ".repeat(MAX_CEL_EXPRESSION_LENGTH));
        let out = eval(CM, &live, &[cel("C", &[&long])]);
        assert!(out[0].message.contains("longer than"), "{}", out[0].message);
    }

    #[test]
    fn an_unknown_rule_type_is_invalid() {
        let mut rule = cel("C", &["true"]);
        rule.r#type = "Magic".into();
        let out = eval(CM, &json!({}), &[rule]);
        assert_eq!((out[0].status, out[0].reason), ("Unknown", REASON_INVALID));
    }

    #[test]
    fn the_job_rule_completes_a_finished_job_either_way() {
        let job = |kind: &str, status: &str| json!({"status": {"conditions": [{"type": kind, "status": status}]}});
        let rules = [well_known("Complete")];
        let out = eval(JOB, &job("Complete", "True"), &rules);
        assert_eq!(
            (
                out[0].type_.as_str(),
                out[0].status,
                out[0].message.as_str()
            ),
            ("Complete", "True", "Job is finished")
        );
        assert_eq!(eval(JOB, &job("Failed", "True"), &rules)[0].status, "True");
        let running = eval(JOB, &job("Complete", "False"), &rules);
        assert_eq!(
            (running[0].status, running[0].message.as_str()),
            ("False", "Job is not finished")
        );
        let fresh = eval(JOB, &json!({"status": {}}), &rules);
        assert_eq!(fresh[0].status, "False");
    }

    #[test]
    fn the_pod_rule_completes_a_pod_in_a_terminal_phase() {
        let pod = |phase: &str| json!({"status": {"phase": phase}});
        let rules = [well_known("Complete")];
        let out = eval(POD, &pod("Succeeded"), &rules);
        assert_eq!(
            (out[0].status, out[0].message.as_str()),
            ("True", "Pod is in phase Succeeded")
        );
        assert_eq!(eval(POD, &pod("Failed"), &rules)[0].status, "True");
        assert_eq!(eval(POD, &pod("Running"), &rules)[0].status, "False");
    }

    #[test]
    fn well_known_rules_for_other_kinds_or_conditions_produce_nothing() {
        assert!(eval(CM, &json!({}), &[well_known("Complete")]).is_empty());
        assert!(eval(JOB, &json!({}), &[well_known("Ready")]).is_empty());
        assert!(
            eval(
                ("batch", "v2", "Job"),
                &json!({}),
                &[well_known("Complete")]
            )
            .is_empty()
        );
    }

    #[test]
    fn progress_counts_started_expressions_and_labels_name_them() {
        let live = json!({"data": {}});
        let mut second = cel("B", &["true", "false", "true"]);
        second.message_expression = r#""m""#.into();
        let rules = [cel("A", &["true"]), second];
        let target = RuleTarget {
            group: "",
            version: "v1",
            kind: "ConfigMap",
            live: &live,
        };
        let progress = Progress::default();
        evaluate_condition_rules(&target, &rules, &progress);
        // A's one expression, B's first two (the false stops it), B's message.
        assert_eq!(progress.started(), 4);
        assert_eq!(
            expression_label(&target, &rules, 2).as_deref(),
            Some(r#"rule #1 (B) expression #1: "false""#)
        );
        assert_eq!(
            expression_label(&target, &rules, 4).as_deref(),
            Some(r#"rule #1 (B) message expression: "\"m\"""#)
        );
        assert_eq!(expression_label(&target, &rules, 5), None);
    }

    #[test]
    fn numbers_reach_cel_as_int_and_double() {
        let live = json!({"spec": {"replicas": 3, "ratio": 0.5}});
        let rules = [cel(
            "Typed",
            &["object.spec.replicas == 3", "object.spec.ratio == 0.5"],
        )];
        assert_eq!(eval(CM, &live, &rules)[0].status, "True");
    }
}
