//! Status feedback: the values the agent reports about an applied object,
//! read from the live object (its full JSON including `status`) by the
//! manifest's feedback rules. Availability is in `availability`, the
//! `WellKnownStatus` table in `well_known_status`.
//!
//! Nothing here fails as a whole. A feedback path that cannot be used, or
//! finds nothing, is a [`FeedbackProblem`] next to the values that could be
//! read, so one bad path never hides the others.
//!
//! Decisions worth knowing (OCM reports only Integer, String, Boolean and
//! JsonRaw, so everything maps onto those):
//! - A JSON number that fits `i64` is an `Integer`; any other number (a
//!   float such as `0.5` or `3.0`, or an integer above `i64::MAX`) is
//!   `JsonRaw` holding the number's JSON text, so no precision is lost.
//! - A JSON `null` counts as no value: a path that finds only nulls reports
//!   [`FeedbackProblem::NoMatch`].
//! - A path matching several (non-null) locations reports one `JsonRaw` list
//!   of all of them in document order, under the size cap. A single match
//!   keeps its own type, so `.status.conditions[?@.type=='Ready'].status`
//!   reports the String `"True"` as it does in OCM.
//! - Objects and lists (and multi-match lists) larger than the agent's
//!   `--max-json-raw-length` (OCM's flag and default,
//!   [`MAX_RAW_FEEDBACK_BYTES`]) of compact JSON report
//!   [`FeedbackProblem::TooLarge`] and no value. Raw values are compact JSON
//!   with object keys sorted, as OCM's `json.Marshal` writes them.
//! - `WellKnownStatus` on a kind without well-known fields reports
//!   [`FeedbackProblem::NoWellKnownStatus`], as OCM does.
//! - Names are claimed in declaration order and the first claim wins: a
//!   `WellKnownStatus` rule claims every well-known name of the object's kind
//!   (even ones absent right now), then each `JSONPaths` entry claims its
//!   name, whether or not its path is valid or matches. A later entry with a
//!   claimed name is skipped with [`FeedbackProblem::DuplicateName`]. Claiming
//!   by declaration rather than by "was reported" keeps a value's source from
//!   flipping between rules as the live object changes.

use std::collections::HashSet;

use ferry_proto::v1::{FeedbackRule, FeedbackValue};
use serde_json::Value;

pub use super::feedback_values::{TYPE_BOOLEAN, TYPE_INTEGER, TYPE_JSON_RAW, TYPE_STRING};
use super::feedback_values::{boolean, integer, string};
use super::paths::{IgnorePath, PathError, get, locate};
use super::well_known_status::{read_well_known, well_known_fields};

/// Default largest raw JSON value (in bytes) reported for one feedback path:
/// OCM's `--max-json-raw-length` default.
pub const MAX_RAW_FEEDBACK_BYTES: usize = 1024;

/// Rule type that reports the well-known status fields of common kinds.
pub const RULE_WELL_KNOWN_STATUS: &str = "WellKnownStatus";
/// Rule type that reports values found by user-named JSONPaths.
pub const RULE_JSON_PATHS: &str = "JSONPaths";

/// What the feedback rules of one manifest produced.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FeedbackOutcome {
    /// Values in rule order, well-known values first.
    pub values: Vec<FeedbackValue>,
    /// Why some rules or paths gave no value. Visible to the user, not fatal.
    pub problems: Vec<FeedbackProblem>,
}

/// Why a feedback rule or path produced no value. `Display` is a message a
/// user can act on, meant for the manifest's `StatusFeedbackSynced`
/// condition.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FeedbackProblem {
    /// The path is not usable JSONPath (or the entry has no name).
    #[error("feedback {name:?}: invalid JSONPath {path:?}: {reason}")]
    InvalidPath {
        /// The feedback value's name.
        name: String,
        /// The path as the user wrote it.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The path matches nothing on the live object, or only nulls.
    #[error(
        "feedback {name:?}: JSONPath {path:?} matches no value on the live object \
         (the field is absent or null)"
    )]
    NoMatch {
        /// The feedback value's name.
        name: String,
        /// The path as the user wrote it.
        path: String,
    },
    /// The value found is larger than the raw JSON limit.
    #[error(
        "feedback {name:?}: the value at JSONPath {path:?} is {bytes} bytes of JSON, \
         over the {limit}-byte limit; select a smaller part of it"
    )]
    TooLarge {
        /// The feedback value's name.
        name: String,
        /// The path as the user wrote it.
        path: String,
        /// Size of the value as compact JSON.
        bytes: usize,
        /// The limit it exceeds.
        limit: usize,
    },
    /// The rule's type is neither `WellKnownStatus` nor `JSONPaths`.
    #[error("unknown feedback rule type {rule_type:?}; use WellKnownStatus or JSONPaths")]
    UnknownRuleType {
        /// The type as written.
        rule_type: String,
    },
    /// A `WellKnownStatus` rule on a kind that has no well-known fields.
    #[error(
        "WellKnownStatus: no well-known status fields for {kind} in group {group:?}; \
         use JSONPaths"
    )]
    NoWellKnownStatus {
        /// The object's API group (empty for the core group).
        group: String,
        /// The object's kind.
        kind: String,
    },
    /// An earlier rule already claimed this name; this path is skipped.
    #[error(
        "feedback {name:?} is already reported by an earlier rule, so JSONPath {path:?} \
         is skipped; give it another name"
    )]
    DuplicateName {
        /// The repeated name.
        name: String,
        /// The skipped path as the user wrote it.
        path: String,
    },
}

/// Evaluates the feedback rules of one manifest against the live object (its
/// full JSON including status). `kind_group` is `(group, kind)`, the group
/// empty for the core group.
///
/// Never fails: unusable rules and paths become [`FeedbackProblem`]s next to
/// the values that could be read (see the module docs for the type mapping,
/// multi-match, size and duplicate-name rules). Well-known fields missing
/// from the live object are simply left out, and kinds without well-known
/// fields report nothing for `WellKnownStatus`.
pub fn evaluate_feedback(
    kind_group: (&str, &str),
    live: &Value,
    rules: &[FeedbackRule],
) -> FeedbackOutcome {
    evaluate_feedback_with_limit(kind_group, live, rules, MAX_RAW_FEEDBACK_BYTES)
}

/// [`evaluate_feedback`] with a raw JSON size limit of `max_json_raw_length`
/// bytes instead of the default (the agent's `--max-json-raw-length`).
/// Never fails, like [`evaluate_feedback`].
pub fn evaluate_feedback_with_limit(
    kind_group: (&str, &str),
    live: &Value,
    rules: &[FeedbackRule],
    max_json_raw_length: usize,
) -> FeedbackOutcome {
    let (group, kind) = kind_group;
    let mut outcome = FeedbackOutcome::default();
    let mut claimed: HashSet<String> = HashSet::new();

    // Well-known values come first whatever the rule order, and a second
    // WellKnownStatus rule adds nothing (it would only repeat the names).
    if rules.iter().any(|r| r.r#type == RULE_WELL_KNOWN_STATUS) {
        let fields = well_known_fields(group, kind);
        if fields.is_empty() {
            outcome.problems.push(FeedbackProblem::NoWellKnownStatus {
                group: group.to_string(),
                kind: kind.to_string(),
            });
        }
        claimed.extend(fields.iter().map(|f| f.name.to_string()));
        outcome
            .values
            .extend(fields.iter().filter_map(|f| read_well_known(f, live)));
    }

    for rule in rules {
        match rule.r#type.as_str() {
            RULE_WELL_KNOWN_STATUS => {}
            RULE_JSON_PATHS => {
                for entry in &rule.json_paths {
                    if claimed.contains(&entry.name) {
                        outcome.problems.push(FeedbackProblem::DuplicateName {
                            name: entry.name.clone(),
                            path: entry.path.clone(),
                        });
                        continue;
                    }
                    claimed.insert(entry.name.clone());
                    match read_path(&entry.name, &entry.path, live, max_json_raw_length) {
                        Ok(value) => outcome.values.push(value),
                        Err(problem) => outcome.problems.push(problem),
                    }
                }
            }
            other => outcome.problems.push(FeedbackProblem::UnknownRuleType {
                rule_type: other.to_string(),
            }),
        }
    }
    outcome
}

/// The problems of `rules` that do not depend on the live object: unknown
/// rule types, unnamed entries, paths that do not parse, and a `JSONPaths`
/// name used twice. [`evaluate_feedback`] reports each of these too, so a
/// work free of them here has rules the agent can use; the hub refuses works
/// that have any.
pub fn static_problems(rules: &[FeedbackRule]) -> Vec<FeedbackProblem> {
    let mut problems = Vec::new();
    let mut claimed: HashSet<&str> = HashSet::new();
    for rule in rules {
        match rule.r#type.as_str() {
            RULE_WELL_KNOWN_STATUS => {}
            RULE_JSON_PATHS => {
                for entry in &rule.json_paths {
                    if !claimed.insert(entry.name.as_str()) {
                        problems.push(FeedbackProblem::DuplicateName {
                            name: entry.name.clone(),
                            path: entry.path.clone(),
                        });
                    } else if let Err(problem) = parse_path(&entry.name, &entry.path) {
                        problems.push(problem);
                    }
                }
            }
            other => problems.push(FeedbackProblem::UnknownRuleType {
                rule_type: other.to_string(),
            }),
        }
    }
    problems
}

/// Checks one named feedback path: it needs a name and a valid JSONPath.
fn parse_path(name: &str, raw: &str) -> Result<IgnorePath, FeedbackProblem> {
    // The hub reports values by name; an unnamed one could not be told apart.
    if name.trim().is_empty() {
        return Err(FeedbackProblem::InvalidPath {
            name: name.to_string(),
            path: raw.to_string(),
            reason: "the entry has no name; every feedback value needs one".into(),
        });
    }
    IgnorePath::parse(raw).map_err(|e| {
        let PathError::Invalid { reason, .. } = e;
        FeedbackProblem::InvalidPath {
            name: name.to_string(),
            path: raw.to_string(),
            reason,
        }
    })
}

/// Reads one named JSONPath from the live object.
fn read_path(
    name: &str,
    raw: &str,
    live: &Value,
    limit: usize,
) -> Result<FeedbackValue, FeedbackProblem> {
    let path = parse_path(name, raw)?;
    let found: Vec<&Value> = locate(live, &path)
        .iter()
        .filter_map(|ptr| get(live, ptr))
        .filter(|v| !v.is_null())
        .collect();
    let too_large = |bytes: usize| FeedbackProblem::TooLarge {
        name: name.to_string(),
        path: raw.to_string(),
        bytes,
        limit,
    };
    match found.as_slice() {
        [] => Err(FeedbackProblem::NoMatch {
            name: name.to_string(),
            path: raw.to_string(),
        }),
        [one] => typed_value(name, one, limit).map_err(too_large),
        many => {
            let list = Value::Array(many.iter().map(|v| (*v).clone()).collect());
            raw_value(name, &list, limit).map_err(too_large)
        }
    }
}

/// Maps one JSON value onto the OCM feedback types. Fails with the value's
/// size when it would be reported raw and is over the cap.
fn typed_value(name: &str, value: &Value, limit: usize) -> Result<FeedbackValue, usize> {
    Ok(match value {
        Value::Bool(b) => boolean(name, *b),
        Value::String(s) => string(name, s.clone()),
        Value::Number(n) => match n.as_i64() {
            Some(i) => integer(name, i),
            // Floats and integers beyond i64 keep their exact JSON text.
            None => raw_value(name, value, limit)?,
        },
        // Null never gets here (filtered as "no value"); objects and lists
        // go raw.
        _ => raw_value(name, value, limit)?,
    })
}

/// A `JsonRaw` value of compact JSON, or its size when over the cap.
fn raw_value(name: &str, value: &Value, limit: usize) -> Result<FeedbackValue, usize> {
    // `Value`'s Display is compact JSON and cannot fail; without serde_json's
    // `preserve_order` its objects are sorted by key, as Go's json.Marshal
    // sorts map keys.
    let text = value.to_string();
    if text.len() > limit {
        return Err(text.len());
    }
    Ok(FeedbackValue {
        name: name.to_string(),
        r#type: TYPE_JSON_RAW.to_string(),
        json_raw: text,
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_proto::v1::NamedJsonPath;
    use serde_json::json;

    fn well_known() -> FeedbackRule {
        FeedbackRule {
            r#type: RULE_WELL_KNOWN_STATUS.into(),
            json_paths: vec![],
        }
    }

    fn json_paths(entries: &[(&str, &str)]) -> FeedbackRule {
        FeedbackRule {
            r#type: RULE_JSON_PATHS.into(),
            json_paths: entries
                .iter()
                .map(|(name, path)| NamedJsonPath {
                    name: (*name).into(),
                    path: (*path).into(),
                })
                .collect(),
        }
    }

    fn int_value(name: &str, v: i64) -> FeedbackValue {
        integer(name, v)
    }

    fn str_value(name: &str, v: &str) -> FeedbackValue {
        string(name, v.into())
    }

    fn bool_value(name: &str, v: bool) -> FeedbackValue {
        boolean(name, v)
    }

    fn raw(name: &str, text: &str) -> FeedbackValue {
        FeedbackValue {
            name: name.into(),
            r#type: TYPE_JSON_RAW.into(),
            json_raw: text.into(),
            ..Default::default()
        }
    }

    /// Evaluates one JSONPaths entry on `live` against a ConfigMap.
    fn one_path(live: &Value, path: &str) -> FeedbackOutcome {
        evaluate_feedback(("", "ConfigMap"), live, &[json_paths(&[("v", path)])])
    }

    #[test]
    fn deployment_reports_exactly_ocms_replica_counts() {
        let live = json!({"status": {
            "readyReplicas": 2, "replicas": 3, "availableReplicas": 2,
            "updatedReplicas": 3, "observedGeneration": 7
        }});
        let out = evaluate_feedback(("apps", "Deployment"), &live, &[well_known()]);
        assert_eq!(
            out.values,
            vec![
                int_value("ReadyReplicas", 2),
                int_value("Replicas", 3),
                int_value("AvailableReplicas", 2),
            ]
        );
        assert!(out.problems.is_empty());
    }

    #[test]
    fn missing_well_known_fields_are_left_out_without_a_problem() {
        // A Deployment scaled to zero has no readyReplicas/availableReplicas.
        let live = json!({"status": {"replicas": 0, "observedGeneration": 2}});
        let out = evaluate_feedback(("apps", "Deployment"), &live, &[well_known()]);
        assert_eq!(out.values, vec![int_value("Replicas", 0)]);
        assert!(out.problems.is_empty());
        let no_status = evaluate_feedback(("apps", "Deployment"), &json!({}), &[well_known()]);
        assert_eq!(no_status, FeedbackOutcome::default());
    }

    #[test]
    fn statefulset_has_no_well_known_status_as_in_ocm() {
        let live = json!({"status": {"readyReplicas": 1, "replicas": 2}});
        let out = evaluate_feedback(("apps", "StatefulSet"), &live, &[well_known()]);
        assert!(out.values.is_empty());
        assert_eq!(
            out.problems,
            vec![FeedbackProblem::NoWellKnownStatus {
                group: "apps".into(),
                kind: "StatefulSet".into()
            }]
        );
    }

    #[test]
    fn daemonset_reports_exactly_ocms_scheduling_counts() {
        let live = json!({"status": {
            "numberReady": 3, "desiredNumberScheduled": 4, "currentNumberScheduled": 4,
            "numberAvailable": 3, "updatedNumberScheduled": 4
        }});
        let out = evaluate_feedback(("apps", "DaemonSet"), &live, &[well_known()]);
        assert_eq!(
            out.values,
            vec![
                int_value("NumberReady", 3),
                int_value("DesiredNumberScheduled", 4),
                int_value("NumberAvailable", 3),
            ]
        );
    }

    #[test]
    fn job_reports_its_complete_condition_status_and_succeeded_count() {
        let done = json!({"status": {
            "succeeded": 1, "active": 0,
            "conditions": [{"type": "Complete", "status": "True"}]
        }});
        let out = evaluate_feedback(("batch", "Job"), &done, &[well_known()]);
        assert_eq!(
            out.values,
            vec![
                str_value("JobComplete", "True"),
                int_value("JobSucceeded", 1)
            ]
        );
        // No Complete condition yet: OCM's JSONPath finds nothing.
        let running = json!({"status": {"active": 1, "failed": 2}});
        let out = evaluate_feedback(("batch", "Job"), &running, &[well_known()]);
        assert!(out.values.is_empty());
        assert!(out.problems.is_empty());
    }

    #[test]
    fn pod_reports_its_ready_condition_status_and_phase() {
        let ready = json!({"status": {
            "phase": "Running",
            "conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "Ready", "status": "True"}
            ]
        }});
        let out = evaluate_feedback(("", "Pod"), &ready, &[well_known()]);
        assert_eq!(
            out.values,
            vec![
                str_value("PodReady", "True"),
                str_value("PodPhase", "Running")
            ]
        );
        let pending = json!({"status": {"phase": "Pending"}});
        let out = evaluate_feedback(("", "Pod"), &pending, &[well_known()]);
        assert_eq!(out.values, vec![str_value("PodPhase", "Pending")]);
    }

    #[test]
    fn kinds_without_well_known_fields_report_a_problem_and_no_value() {
        let live = json!({"status": {"replicas": 3}});
        for (group, kind) in [("", "ConfigMap"), ("extensions", "Deployment"), ("", "Job")] {
            let out = evaluate_feedback((group, kind), &live, &[well_known()]);
            assert!(out.values.is_empty(), "{group}/{kind}");
            assert!(
                matches!(
                    out.problems.as_slice(),
                    [FeedbackProblem::NoWellKnownStatus { .. }]
                ),
                "{group}/{kind}"
            );
        }
    }

    #[test]
    fn the_raw_json_limit_is_the_given_one() {
        let live = json!({"v": {"b": [1, 2], "a": "x"}});
        let rules = [json_paths(&[("v", "$.v")])];
        let out = evaluate_feedback_with_limit(("", "ConfigMap"), &live, &rules, 1024);
        // Keys sorted, compact: the text OCM's json.Marshal writes.
        assert_eq!(out.values, vec![raw("v", r#"{"a":"x","b":[1,2]}"#)]);
        let out = evaluate_feedback_with_limit(("", "ConfigMap"), &live, &rules, 10);
        assert!(out.values.is_empty());
        assert_eq!(
            out.problems,
            vec![FeedbackProblem::TooLarge {
                name: "v".into(),
                path: "$.v".into(),
                bytes: 19,
                limit: 10
            }]
        );
    }

    #[test]
    fn mistyped_well_known_fields_are_left_out() {
        let live = json!({"status": {"replicas": "3", "readyReplicas": 1.5, "phase": 1}});
        let out = evaluate_feedback(("apps", "Deployment"), &live, &[well_known()]);
        assert!(out.values.is_empty());
        let out = evaluate_feedback(("", "Pod"), &live, &[well_known()]);
        assert!(out.values.is_empty());
    }

    #[test]
    fn json_path_integer_string_and_boolean_keep_their_types() {
        let live = json!({"spec": {"replicas": 3, "paused": true}, "status": {"phase": "Active"}});
        let out = evaluate_feedback(
            ("apps", "Deployment"),
            &live,
            &[json_paths(&[
                ("r", ".spec.replicas"),
                ("s", "$.status.phase"),
                ("b", "spec.paused"),
                ("neg", "$.n"),
            ])],
        );
        assert_eq!(
            out.values,
            vec![
                int_value("r", 3),
                str_value("s", "Active"),
                bool_value("b", true)
            ]
        );
        assert_eq!(out.problems.len(), 1);
        let out = one_path(&json!({"n": -9_000_000_000_i64}), "$.n");
        assert_eq!(out.values, vec![int_value("v", -9_000_000_000)]);
    }

    #[test]
    fn floats_and_huge_integers_are_raw_json_text() {
        let out = one_path(&json!({"a": 0.25}), "$.a");
        assert_eq!(out.values, vec![raw("v", "0.25")]);
        let out = one_path(&json!({"a": 3.0}), "$.a");
        assert_eq!(out.values, vec![raw("v", "3.0")]);
        let out = one_path(&json!({"a": u64::MAX}), "$.a");
        assert_eq!(out.values, vec![raw("v", "18446744073709551615")]);
    }

    #[test]
    fn objects_and_lists_are_compact_raw_json() {
        let live = json!({"status": {
            "loadBalancer": {"ingress": [{"ip": "10.0.0.1"}]},
            "ports": [80, 443]
        }});
        let out = evaluate_feedback(
            ("", "Service"),
            &live,
            &[json_paths(&[
                ("lb", ".status.loadBalancer"),
                ("ports", ".status.ports"),
            ])],
        );
        assert_eq!(
            out.values,
            vec![
                raw("lb", r#"{"ingress":[{"ip":"10.0.0.1"}]}"#),
                raw("ports", "[80,443]"),
            ]
        );
        assert!(out.problems.is_empty());
    }

    #[test]
    fn a_raw_value_over_the_cap_is_too_large_and_not_reported() {
        let big = "x".repeat(MAX_RAW_FEEDBACK_BYTES);
        let live = json!({"data": {"k": big}});
        let out = one_path(&live, ".data");
        assert!(out.values.is_empty());
        let bytes = MAX_RAW_FEEDBACK_BYTES + r#"{"k":""}"#.len();
        assert_eq!(
            out.problems,
            vec![FeedbackProblem::TooLarge {
                name: "v".into(),
                path: ".data".into(),
                bytes,
                limit: MAX_RAW_FEEDBACK_BYTES,
            }]
        );
        assert!(
            out.problems[0]
                .to_string()
                .contains("over the 1024-byte limit")
        );
    }

    #[test]
    fn a_raw_value_exactly_at_the_cap_is_reported() {
        // `["` + filler + `"]` is exactly the cap.
        let filler = "y".repeat(MAX_RAW_FEEDBACK_BYTES - 4);
        let live = json!({"l": [filler]});
        let out = one_path(&live, "$.l");
        assert_eq!(out.values.len(), 1);
        assert_eq!(out.values[0].json_raw.len(), MAX_RAW_FEEDBACK_BYTES);
        assert!(out.problems.is_empty());
    }

    #[test]
    fn a_path_matching_nothing_gives_no_value_and_a_visible_reason() {
        let out = one_path(&json!({"status": {}}), ".status.readyReplicas");
        assert!(out.values.is_empty());
        assert_eq!(
            out.problems,
            vec![FeedbackProblem::NoMatch {
                name: "v".into(),
                path: ".status.readyReplicas".into(),
            }]
        );
        assert_eq!(
            out.problems[0].to_string(),
            "feedback \"v\": JSONPath \".status.readyReplicas\" matches no value on the live \
             object (the field is absent or null)"
        );
    }

    #[test]
    fn a_null_value_counts_as_no_match() {
        let out = one_path(&json!({"status": {"x": null}}), "$.status.x");
        assert!(out.values.is_empty());
        assert!(matches!(
            out.problems.as_slice(),
            [FeedbackProblem::NoMatch { .. }]
        ));
    }

    #[test]
    fn several_matches_are_one_raw_list_in_document_order_without_nulls() {
        let live = json!({"status": {"conditions": [
            {"type": "Ready", "status": "True"},
            {"type": "Progressing", "status": null},
            {"type": "Available", "status": "False"}
        ]}});
        let out = one_path(&live, "$.status.conditions[*].status");
        assert_eq!(out.values, vec![raw("v", r#"["True","False"]"#)]);
        // A filter that matches once keeps the value's own type, as in OCM.
        let out = one_path(&live, ".status.conditions[?@.type=='Ready'].status");
        assert_eq!(out.values, vec![str_value("v", "True")]);
    }

    #[test]
    fn several_matches_over_the_cap_are_too_large() {
        let item = "z".repeat(600);
        let live = json!({"l": [{"a": item}, {"a": item}]});
        let out = one_path(&live, "$.l[*].a");
        assert!(out.values.is_empty());
        assert!(matches!(
            out.problems.as_slice(),
            [FeedbackProblem::TooLarge {
                bytes: 1207,
                limit: MAX_RAW_FEEDBACK_BYTES,
                ..
            }]
        ));
    }

    #[test]
    fn an_invalid_path_is_reported_and_the_others_still_work() {
        let live = json!({"a": 1, "b": 2});
        let out = evaluate_feedback(
            ("", "ConfigMap"),
            &live,
            &[json_paths(&[
                ("a", "$.a"),
                ("bad", "$.spec["),
                ("b", "$.b"),
            ])],
        );
        assert_eq!(out.values, vec![int_value("a", 1), int_value("b", 2)]);
        assert_eq!(
            out.problems,
            vec![FeedbackProblem::InvalidPath {
                name: "bad".into(),
                path: "$.spec[".into(),
                reason: "expected selector at character 8".into(),
            }]
        );
        assert_eq!(
            out.problems[0].to_string(),
            "feedback \"bad\": invalid JSONPath \"$.spec[\": expected selector at character 8"
        );
    }

    #[test]
    fn empty_root_and_unnamed_paths_are_invalid() {
        let live = json!({"a": 1});
        for path in ["", "$"] {
            let out = one_path(&live, path);
            assert!(
                matches!(
                    out.problems.as_slice(),
                    [FeedbackProblem::InvalidPath { .. }]
                ),
                "{path:?}"
            );
        }
        let out = evaluate_feedback(("", "ConfigMap"), &live, &[json_paths(&[(" ", "$.a")])]);
        assert!(out.values.is_empty());
        assert!(matches!(
            out.problems.as_slice(),
            [FeedbackProblem::InvalidPath { reason, .. }] if reason.contains("no name")
        ));
    }

    #[test]
    fn an_unknown_rule_type_is_reported_and_other_rules_still_apply() {
        let live = json!({"status": {"replicas": 1}, "a": "x"});
        let rules = [
            FeedbackRule {
                r#type: "jsonPaths".into(),
                json_paths: vec![],
            },
            json_paths(&[("a", "$.a")]),
            well_known(),
        ];
        let out = evaluate_feedback(("apps", "Deployment"), &live, &rules);
        // Well-known values come first even when the rule is listed last.
        assert_eq!(
            out.values,
            vec![int_value("Replicas", 1), str_value("a", "x")]
        );
        assert_eq!(
            out.problems,
            vec![FeedbackProblem::UnknownRuleType {
                rule_type: "jsonPaths".into()
            }]
        );
        assert_eq!(
            out.problems[0].to_string(),
            "unknown feedback rule type \"jsonPaths\"; use WellKnownStatus or JSONPaths"
        );
    }

    #[test]
    fn duplicate_names_keep_the_first_declaration_and_report_the_rest() {
        let live = json!({"a": 1, "b": 2, "status": {"replicas": 5}});
        let rules = [
            json_paths(&[("x", "$.a"), ("x", "$.b")]),
            json_paths(&[("x", "$.b"), ("Replicas", "$.a"), ("y", "$.b")]),
            well_known(),
        ];
        let out = evaluate_feedback(("apps", "Deployment"), &live, &rules);
        assert_eq!(
            out.values,
            vec![
                int_value("Replicas", 5),
                int_value("x", 1),
                int_value("y", 2)
            ]
        );
        assert_eq!(
            out.problems,
            vec![
                FeedbackProblem::DuplicateName {
                    name: "x".into(),
                    path: "$.b".into()
                },
                FeedbackProblem::DuplicateName {
                    name: "x".into(),
                    path: "$.b".into()
                },
                FeedbackProblem::DuplicateName {
                    name: "Replicas".into(),
                    path: "$.a".into()
                },
            ]
        );
    }

    #[test]
    fn a_name_is_claimed_even_when_its_first_path_finds_nothing() {
        // Otherwise "x" would come from $.b now and from $.missing once that
        // field appears.
        let live = json!({"b": 2});
        let out = evaluate_feedback(
            ("", "ConfigMap"),
            &live,
            &[json_paths(&[("x", "$.missing"), ("x", "$.b")])],
        );
        assert!(out.values.is_empty());
        assert!(matches!(
            out.problems.as_slice(),
            [
                FeedbackProblem::NoMatch { .. },
                FeedbackProblem::DuplicateName { .. }
            ]
        ));
    }

    #[test]
    fn well_known_names_are_claimed_even_when_absent_and_reported_once() {
        let live = json!({"status": {"replicas": 1}, "r": 9});
        let out = evaluate_feedback(
            ("apps", "Deployment"),
            &live,
            &[
                well_known(),
                well_known(),
                json_paths(&[("ReadyReplicas", "$.r")]),
            ],
        );
        assert_eq!(out.values, vec![int_value("Replicas", 1)]);
        assert!(matches!(
            out.problems.as_slice(),
            [FeedbackProblem::DuplicateName { name, .. }] if name == "ReadyReplicas"
        ));
    }

    #[test]
    fn no_rules_and_odd_live_objects_report_nothing() {
        assert_eq!(
            evaluate_feedback(("apps", "Deployment"), &json!({}), &[]),
            FeedbackOutcome::default()
        );
        for live in [json!(null), json!([1, 2]), json!("s"), json!({"status": 3})] {
            let out = evaluate_feedback(("apps", "Deployment"), &live, &[well_known()]);
            assert!(out.values.is_empty(), "{live}");
        }
    }

    #[test]
    fn static_problems_are_what_evaluation_would_report_whatever_the_live_object() {
        let rules = vec![
            well_known(),
            json_paths(&[("ok", ".status.ready"), ("bad", "$.status["), ("", ".a")]),
            json_paths(&[("ok", ".status.other")]),
            FeedbackRule {
                r#type: "Sometimes".into(),
                json_paths: vec![],
            },
        ];
        let problems = static_problems(&rules);
        assert_eq!(problems.len(), 4, "{problems:?}");
        assert!(matches!(&problems[0], FeedbackProblem::InvalidPath { name, .. } if name == "bad"));
        assert!(
            matches!(&problems[1], FeedbackProblem::InvalidPath { name, .. } if name.is_empty())
        );
        assert!(
            matches!(&problems[2], FeedbackProblem::DuplicateName { name, .. } if name == "ok")
        );
        assert!(matches!(
            &problems[3],
            FeedbackProblem::UnknownRuleType { .. }
        ));
        // Every static problem is also reported when evaluating on any object.
        let evaluated = evaluate_feedback(("apps", "Deployment"), &json!({}), &rules).problems;
        for problem in &problems {
            assert!(
                evaluated.contains(problem),
                "{problem} not in {evaluated:?}"
            );
        }
        assert!(static_problems(&[well_known(), json_paths(&[("a", ".a")])]).is_empty());
    }
}
