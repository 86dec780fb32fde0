//! Builds the conditions an agent reports: per manifest from the live object
//! (`Available` = it exists, as in OCM; `Progressing`/`Degraded` from ferry's
//! health rules; `StatusFeedbackSynced` and the feedback values), per work as
//! a summary of its manifests, keeping `lastTransitionTime` from the previous
//! report when a status did not change (and, as OCM, moving it for
//! `StatusFeedbackSynced` whenever the feedback values change).

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use ferry_proto::v1;
use ferry_semantics::availability::{
    MESSAGE_AVAILABLE, MESSAGE_NOT_AVAILABLE, REASON_AVAILABLE, REASON_DEGRADED,
    REASON_NOT_AVAILABLE, REASON_NOT_DEGRADED, REASON_PROGRESSING, REASON_SETTLED, health,
};
use ferry_semantics::contract::{
    APPLIED, AVAILABLE, COMPLETE, DEGRADED, FEEDBACK_SYNCED, PROGRESSING,
};
use ferry_semantics::feedback::evaluate_feedback_with_limit;
use serde_json::Value;

/// A condition of `type_` at `generation`, stamped now.
pub fn condition(
    type_: &str,
    ok: bool,
    reason: &str,
    message: impl Into<String>,
    generation: i64,
) -> v1::Condition {
    condition_of(
        type_,
        if ok { "True" } else { "False" },
        reason,
        message,
        generation,
    )
}

/// A condition of `type_` with `status` ("True", "False" or "Unknown") at
/// `generation`, stamped now.
pub fn condition_of(
    type_: &str,
    status: &str,
    reason: &str,
    message: impl Into<String>,
    generation: i64,
) -> v1::Condition {
    v1::Condition {
        r#type: type_.to_string(),
        status: status.to_string(),
        reason: reason.to_string(),
        message: message.into(),
        observed_generation: generation,
        last_transition_unix_seconds: now_seconds(),
    }
}

/// Keeps the previous transition time of conditions whose status is unchanged,
/// so that re-applying an unchanged work yields an identical report and the
/// hub writes nothing.
pub fn carry_transition_times(previous: &[v1::Condition], current: &mut [v1::Condition]) {
    for c in current {
        if let Some(p) = previous.iter().find(|p| p.r#type == c.r#type)
            && p.status == c.status
        {
            c.last_transition_unix_seconds = p.last_transition_unix_seconds;
        }
    }
}

/// Applies `carry_transition_times` to a whole work report. A manifest's
/// `StatusFeedbackSynced` keeps its time only while its feedback values are
/// unchanged too: OCM re-stamps it whenever the values change, so a reader
/// can tell when they last did.
pub fn carry_work_transition_times(previous: &v1::WorkStatus, current: &mut v1::WorkStatus) {
    carry_transition_times(&previous.conditions, &mut current.conditions);
    for m in &mut current.manifests {
        if let Some(prev) = previous
            .manifests
            .iter()
            .find(|p| same_resource(p.resource_meta.as_ref(), m.resource_meta.as_ref()))
        {
            let values_changed = prev.feedback != m.feedback;
            let now: Vec<i64> = m
                .conditions
                .iter()
                .map(|c| c.last_transition_unix_seconds)
                .collect();
            carry_transition_times(&prev.conditions, &mut m.conditions);
            if values_changed {
                for (c, stamp) in m.conditions.iter_mut().zip(now) {
                    if c.r#type == FEEDBACK_SYNCED {
                        c.last_transition_unix_seconds = stamp;
                    }
                }
            }
        }
    }
}

/// Whether two manifest statuses are about the same object: by resource
/// identity, not position, so an edit that reorders or swaps manifests does
/// not hand one object's transition times to another (OCM's rule). A manifest
/// that could not be parsed has no identity and is matched by ordinal.
fn same_resource(a: Option<&v1::ResourceMeta>, b: Option<&v1::ResourceMeta>) -> bool {
    let (Some(a), Some(b)) = (a, b) else {
        return false;
    };
    let identity = |r: &v1::ResourceMeta| {
        (
            r.group.clone(),
            r.version.clone(),
            r.kind.clone(),
            r.resource.clone(),
            r.namespace.clone(),
            r.name.clone(),
        )
    };
    if a.kind.is_empty() && a.name.is_empty() {
        return b.kind.is_empty() && b.name.is_empty() && a.ordinal == b.ordinal;
    }
    identity(a) == identity(b)
}

/// Seconds since the Unix epoch by this host's clock (0 before it): the
/// agent's one reading of wall time in seconds.
pub fn now_seconds() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or_default()
}

/// The object as it is on the spoke after applying (or after a failed
/// apply), and the feedback rules its manifest config asks for.
pub struct Observed {
    /// The live object, status included.
    pub object: Value,
    /// The manifest's feedback rules.
    pub rules: Vec<v1::FeedbackRule>,
    /// The manifest's condition rules.
    pub condition_rules: Vec<v1::ConditionRule>,
}

/// The conditions and feedback values of a manifest whose object exists on
/// the spoke: `Available` True (OCM's meaning), `Progressing` and `Degraded`
/// for kinds ferry knows the health of, and `StatusFeedbackSynced` (always,
/// as in OCM: True with reason `NoStatusFeedbackSynced` without rules).
/// Raw JSON feedback values longer than `max_json_raw_length` bytes are
/// left out with a reason on `StatusFeedbackSynced`.
pub fn observe(
    meta: &v1::ResourceMeta,
    observed: &Observed,
    generation: i64,
    max_json_raw_length: usize,
) -> (Vec<v1::Condition>, Vec<v1::FeedbackValue>) {
    let mut conditions = observe_health(meta, &observed.object, generation);
    let (synced, values) = observe_feedback(
        meta,
        &observed.object,
        &observed.rules,
        generation,
        max_json_raw_length,
    );
    conditions.push(synced);
    (conditions, values)
}

/// The conditions of [`observe`] but `StatusFeedbackSynced`: `Available`
/// and the health ferry knows for the kind of the live `object`. Cheap;
/// the feedback rules (JSONPath, tenant input) are evaluated apart, on the
/// agent's bounded pool ([`observe_feedback`]).
pub fn observe_health(
    meta: &v1::ResourceMeta,
    object: &Value,
    generation: i64,
) -> Vec<v1::Condition> {
    let mut conditions = vec![condition(
        AVAILABLE,
        true,
        REASON_AVAILABLE,
        MESSAGE_AVAILABLE,
        generation,
    )];
    if let Some(health) = health(&meta.group, &meta.kind, object) {
        let progressing_reason = if health.progressing {
            REASON_PROGRESSING
        } else {
            REASON_SETTLED
        };
        let degraded_reason = if health.degraded {
            REASON_DEGRADED
        } else {
            REASON_NOT_DEGRADED
        };
        conditions.push(condition(
            PROGRESSING,
            health.progressing,
            progressing_reason,
            health.message.clone(),
            generation,
        ));
        conditions.push(condition(
            DEGRADED,
            health.degraded,
            degraded_reason,
            health.message,
            generation,
        ));
    }
    conditions
}

/// `StatusFeedbackSynced` and the values of the feedback `rules` over the
/// live `object` (of kind `meta`), stamped with `generation`: True with
/// reason `NoStatusFeedbackSynced` without rules; raw JSON values longer
/// than `max_json_raw_length` bytes are left out with a reason. Runs the
/// rules' JSONPaths on the calling thread.
pub fn observe_feedback(
    meta: &v1::ResourceMeta,
    object: &Value,
    rules: &[v1::FeedbackRule],
    generation: i64,
    max_json_raw_length: usize,
) -> (v1::Condition, Vec<v1::FeedbackValue>) {
    if rules.is_empty() {
        return (
            condition(
                FEEDBACK_SYNCED,
                true,
                "NoStatusFeedbackSynced",
                "",
                generation,
            ),
            vec![],
        );
    }
    let outcome = evaluate_feedback_with_limit(
        (&meta.group, &meta.kind),
        object,
        rules,
        max_json_raw_length,
    );
    let synced = if outcome.problems.is_empty() {
        condition(
            FEEDBACK_SYNCED,
            true,
            "StatusFeedbackSynced",
            format!("{} status values reported", outcome.values.len()),
            generation,
        )
    } else {
        let problems: Vec<String> = outcome.problems.iter().map(ToString::to_string).collect();
        condition(
            FEEDBACK_SYNCED,
            false,
            "StatusFeedbackSyncFailed",
            problems.join("; "),
            generation,
        )
    };
    (synced, outcome.values)
}

/// The `Available` condition of a manifest whose object is not on the spoke
/// (OCM's reason and message).
pub fn not_available(generation: i64) -> v1::Condition {
    condition(
        AVAILABLE,
        false,
        REASON_NOT_AVAILABLE,
        MESSAGE_NOT_AVAILABLE,
        generation,
    )
}

/// The `Available` condition of a manifest whose write was refused
/// (`reason`, the refusal's) and whose object this work never created, as
/// the work's own record says, with no read: False, as OCM reports it,
/// whether or not someone else's object of that name exists.
pub fn refused_never_created(reason: &str, refusal: &str, generation: i64) -> v1::Condition {
    condition_of(
        AVAILABLE,
        "False",
        reason,
        format!("this work never created the object and its write was refused: {refusal}"),
        generation,
    )
}

/// The `Available` condition, status Unknown, of a manifest whose object
/// could not be looked up: `reason` says why (OCM's
/// `IncompleteResourceMeta` or `FetchingResourceFailed`).
pub fn availability_unknown(reason: &str, message: String, generation: i64) -> v1::Condition {
    condition_of(AVAILABLE, "Unknown", reason, message, generation)
}

/// The work's `Available` condition as OCM aggregates it: False when some
/// resource does not exist, else Unknown when some could not be looked up
/// (or none reports `Available`), else True.
pub fn work_available_condition(
    manifests: &[v1::ManifestStatus],
    generation: i64,
) -> v1::Condition {
    let count = |status: &str| {
        manifests
            .iter()
            .filter(|m| {
                m.conditions
                    .iter()
                    .any(|c| c.r#type == AVAILABLE && c.status == status)
            })
            .count()
    };
    let (available, missing, unknown) = (count("True"), count("False"), count("Unknown"));
    let total = manifests.len();
    if missing > 0 {
        let names = lagging_names(manifests, AVAILABLE, "False");
        let message = format!("{missing} of {total} resources are not available: {names}");
        condition(
            AVAILABLE,
            false,
            "ResourcesNotAvailable",
            message,
            generation,
        )
    } else if unknown > 0 {
        let names = lagging_names(manifests, AVAILABLE, "Unknown");
        let message = format!("{unknown} of {total} resources have unknown status: {names}");
        condition_of(
            AVAILABLE,
            "Unknown",
            "ResourcesStatusUnknown",
            message,
            generation,
        )
    } else if available == 0 {
        condition_of(
            AVAILABLE,
            "Unknown",
            "ResourcesStatusUnknown",
            "cannot get any available resource",
            generation,
        )
    } else {
        condition(
            AVAILABLE,
            true,
            "ResourcesAvailable",
            "All resources are available",
            generation,
        )
    }
}

/// The work's `Progressing` condition, with OCM's reasons: True `Failed`
/// while some manifest is not applied, True `Applying` while some resource
/// has not reached its desired state, else False `Completed`. A
/// ManifestWorkReplicaSet rollout counts a work whose `Progressing` is False
/// as succeeded.
pub fn work_progressing_condition(
    manifests: &[v1::ManifestStatus],
    generation: i64,
) -> v1::Condition {
    let not_applied = lagging_names_where(manifests, |m| {
        !m.conditions
            .iter()
            .any(|c| c.r#type == APPLIED && c.status == "True")
    });
    if !not_applied.is_empty() {
        let message = format!("some manifests are not applied: {not_applied}");
        return condition(PROGRESSING, true, "Failed", message, generation);
    }
    let progressing = lagging_names(manifests, PROGRESSING, "True");
    if !progressing.is_empty() {
        let message = format!("some resources are progressing: {progressing}");
        return condition(PROGRESSING, true, "Applying", message, generation);
    }
    let message = "All manifests are applied and no resource is progressing";
    condition(PROGRESSING, false, "Completed", message, generation)
}

/// The work's `Degraded` condition: True when some resource is degraded
/// (naming them and why), else False.
pub fn work_degraded_condition(manifests: &[v1::ManifestStatus], generation: i64) -> v1::Condition {
    let degraded = lagging_names(manifests, DEGRADED, "True");
    if degraded.is_empty() {
        let message = "No resource is degraded";
        condition(DEGRADED, false, "ResourcesNotDegraded", message, generation)
    } else {
        let message = format!("some resources are degraded: {degraded}");
        condition(DEGRADED, true, "ResourcesDegraded", message, generation)
    }
}

/// Whether a condition was set by a condition rule: OCM marks them by a
/// reason starting with `ConditionRule`.
pub fn is_rule_condition(c: &v1::Condition) -> bool {
    c.reason.starts_with("ConditionRule")
}

/// The work-level conditions aggregated from the manifests' rule-generated
/// conditions, one per type, sorted by type, as OCM aggregates them: False
/// when some manifest's is False, else Unknown when some is Unknown, else
/// True; reason `ConditionRulesAggregated`, the message of the one manifest
/// condition when there is one. Types ferry aggregates itself (`Applied`,
/// `Available`, `Progressing`, `Degraded`) are left to those summaries. A
/// `Complete` True here marks the work complete.
pub fn work_rule_conditions(
    manifests: &[v1::ManifestStatus],
    generation: i64,
) -> Vec<v1::Condition> {
    let mut by_type: BTreeMap<&str, Vec<&v1::Condition>> = BTreeMap::new();
    for c in manifests.iter().flat_map(|m| &m.conditions) {
        let own = [APPLIED, AVAILABLE, PROGRESSING, DEGRADED].contains(&c.r#type.as_str());
        if is_rule_condition(c) && !own {
            by_type.entry(c.r#type.as_str()).or_default().push(c);
        }
    }
    by_type
        .into_iter()
        .map(|(type_, found)| {
            let has = |status: &str| found.iter().any(|c| c.status == status);
            let status = if has("False") {
                "False"
            } else if has("Unknown") || !has("True") {
                "Unknown"
            } else {
                "True"
            };
            let message = match found.as_slice() {
                [one] if !one.message.is_empty() => one.message.clone(),
                _ => format!("Aggregated from {} manifest conditions", found.len()),
            };
            condition_of(
                type_,
                status,
                "ConditionRulesAggregated",
                message,
                generation,
            )
        })
        .collect()
}

/// Whether a work report says the work is complete (its `Complete`
/// condition is True): OCM stops updating such a work.
pub fn is_complete(status: &v1::WorkStatus) -> bool {
    status
        .conditions
        .iter()
        .any(|c| c.r#type == COMPLETE && c.status == "True")
}

/// The manifests whose condition `type_` has `status`, as "#ordinal Kind
/// name: message" joined by "; ".
fn lagging_names(manifests: &[v1::ManifestStatus], type_: &str, status: &str) -> String {
    let describe = |m: &v1::ManifestStatus| {
        let meta = m.resource_meta.clone().unwrap_or_default();
        let name = format!("#{} {} {}", meta.ordinal, meta.kind, meta.name);
        match m.conditions.iter().find(|c| c.r#type == type_) {
            Some(c) if !c.message.is_empty() => format!("{name}: {}", c.message),
            _ => name,
        }
    };
    manifests
        .iter()
        .filter(|m| {
            m.conditions
                .iter()
                .any(|c| c.r#type == type_ && c.status == status)
        })
        .map(describe)
        .collect::<Vec<_>>()
        .join("; ")
}

/// The manifests `pick` selects, as "#ordinal Kind name: Applied reason".
fn lagging_names_where(
    manifests: &[v1::ManifestStatus],
    pick: impl Fn(&v1::ManifestStatus) -> bool,
) -> String {
    manifests
        .iter()
        .filter(|m| pick(m))
        .map(|m| {
            let meta = m.resource_meta.clone().unwrap_or_default();
            let name = format!("#{} {} {}", meta.ordinal, meta.kind, meta.name);
            match m.conditions.iter().find(|c| c.r#type == APPLIED) {
                Some(c) => format!("{name}: {}", c.reason),
                None => name,
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The work's `Applied` condition: True when every manifest is applied,
/// else naming those that are not and why.
pub fn work_applied_condition(manifests: &[v1::ManifestStatus], generation: i64) -> v1::Condition {
    let summary = Summary {
        type_: APPLIED,
        noun: "manifests",
        state: "applied",
        true_reason: "AppliedManifestWorkComplete",
        false_reason: "AppliedManifestWorkFailed",
    };
    summary.of(manifests, generation)
}

/// A work condition that is True when one manifest condition is True for
/// every manifest, and otherwise names the manifests that lag and why.
struct Summary {
    type_: &'static str,
    noun: &'static str,
    state: &'static str,
    true_reason: &'static str,
    false_reason: &'static str,
}

impl Summary {
    fn of(&self, manifests: &[v1::ManifestStatus], generation: i64) -> v1::Condition {
        let lagging: Vec<String> = manifests
            .iter()
            .filter_map(|m| {
                let c = m.conditions.iter().find(|c| c.r#type == self.type_);
                if c.is_some_and(|c| c.status == "True") {
                    return None;
                }
                let meta = m.resource_meta.clone().unwrap_or_default();
                let name = format!("#{} {} {}", meta.ordinal, meta.kind, meta.name);
                Some(match c {
                    Some(c) => format!("{name}: {}", c.reason),
                    None => name,
                })
            })
            .collect();
        let (total, noun, state) = (manifests.len(), self.noun, self.state);
        if lagging.is_empty() {
            let message = format!("All {total} {noun} are {state}");
            condition(self.type_, true, self.true_reason, message, generation)
        } else {
            let message = format!(
                "{} of {total} {noun} are not {state}: {}",
                lagging.len(),
                lagging.join("; ")
            );
            condition(self.type_, false, self.false_reason, message, generation)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_semantics::contract::APPLIED;

    #[test]
    fn an_unchanged_status_keeps_its_transition_time() {
        let mut old = condition(APPLIED, true, "AppliedManifestComplete", "ok", 1);
        old.last_transition_unix_seconds = 5;
        let mut same = [condition(APPLIED, true, "AppliedManifestComplete", "ok", 2)];
        carry_transition_times(std::slice::from_ref(&old), &mut same);
        assert_eq!(same[0].last_transition_unix_seconds, 5);

        let mut flipped = [condition(APPLIED, false, "ApplyFailed", "no", 2)];
        carry_transition_times(&[old], &mut flipped);
        assert_ne!(flipped[0].last_transition_unix_seconds, 5);
    }

    fn manifest(ordinal: i32, conditions: Vec<v1::Condition>) -> v1::ManifestStatus {
        v1::ManifestStatus {
            resource_meta: Some(v1::ResourceMeta {
                ordinal,
                kind: "ConfigMap".into(),
                name: format!("cm{ordinal}"),
                ..Default::default()
            }),
            conditions,
            ..Default::default()
        }
    }

    fn available(status: &str) -> v1::Condition {
        condition_of(AVAILABLE, status, "r", "m", 1)
    }

    #[test]
    fn work_available_follows_ocm_false_then_unknown_then_true() {
        let m = |s: &str| manifest(0, vec![available(s)]);
        let c = work_available_condition(&[m("True"), m("False"), m("Unknown")], 1);
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("False", "ResourcesNotAvailable")
        );
        assert!(c.message.starts_with("1 of 3 resources are not available"));
        let c = work_available_condition(&[m("True"), m("Unknown")], 1);
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("Unknown", "ResourcesStatusUnknown")
        );
        let c = work_available_condition(&[], 1);
        assert_eq!(c.status, "Unknown");
        let c = work_available_condition(&[m("True"), m("True")], 1);
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("True", "ResourcesAvailable")
        );
    }

    #[test]
    fn work_progressing_is_failed_applying_or_completed() {
        let applied = |ok: bool| condition(APPLIED, ok, "r", "m", 1);
        let progressing = |p: bool| condition(PROGRESSING, p, "r", "rolling", 1);
        let c = work_progressing_condition(
            &[
                manifest(0, vec![applied(false)]),
                manifest(1, vec![applied(true)]),
            ],
            1,
        );
        assert_eq!((c.status.as_str(), c.reason.as_str()), ("True", "Failed"));
        let c =
            work_progressing_condition(&[manifest(0, vec![applied(true), progressing(true)])], 1);
        assert_eq!((c.status.as_str(), c.reason.as_str()), ("True", "Applying"));
        assert!(
            c.message.contains("#0 ConfigMap cm0: rolling"),
            "{}",
            c.message
        );
        let c =
            work_progressing_condition(&[manifest(0, vec![applied(true), progressing(false)])], 1);
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("False", "Completed")
        );
        let degraded = condition(DEGRADED, true, "r", "the job failed", 1);
        let c = work_degraded_condition(&[manifest(0, vec![degraded])], 1);
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("True", "ResourcesDegraded")
        );
        let c = work_degraded_condition(&[manifest(0, vec![])], 1);
        assert_eq!(c.status, "False");
    }

    #[test]
    fn every_observed_manifest_carries_status_feedback_synced() {
        let meta = v1::ResourceMeta {
            kind: "ConfigMap".into(),
            ..Default::default()
        };
        let observed = Observed {
            object: serde_json::json!({"data": {}}),
            rules: vec![],
            condition_rules: vec![],
        };
        let (conditions, values) = observe(&meta, &observed, 3, 1024);
        assert!(values.is_empty());
        let types: Vec<(&str, &str, &str)> = conditions
            .iter()
            .map(|c| (c.r#type.as_str(), c.status.as_str(), c.reason.as_str()))
            .collect();
        assert_eq!(
            types,
            vec![
                (AVAILABLE, "True", "ResourceAvailable"),
                (FEEDBACK_SYNCED, "True", "NoStatusFeedbackSynced"),
            ]
        );
    }

    #[test]
    fn a_job_reports_progressing_and_degraded_from_its_conditions() {
        let meta = v1::ResourceMeta {
            group: "batch".into(),
            kind: "Job".into(),
            ..Default::default()
        };
        let observed = Observed {
            object: serde_json::json!({"status": {"failed": 1, "conditions": [
                {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}
            ]}}),
            rules: vec![],
            condition_rules: vec![],
        };
        let (conditions, _) = observe(&meta, &observed, 1, 1024);
        let find = |t: &str| {
            conditions
                .iter()
                .find(|c| c.r#type == t)
                .expect("condition reported")
        };
        assert_eq!(find(AVAILABLE).status, "True");
        assert_eq!(find(PROGRESSING).status, "True");
        assert_eq!(find(DEGRADED).status, "True");
        assert!(find(DEGRADED).message.contains("BackoffLimitExceeded"));
    }

    #[test]
    fn transition_times_follow_the_object_not_its_position() {
        let old_stamp = 5;
        let applied = |stamp| {
            let mut c = condition(APPLIED, true, "Applied", "ok", 1);
            c.last_transition_unix_seconds = stamp;
            c
        };
        let at = |ordinal: i32, kind: &str, name: &str, stamp| v1::ManifestStatus {
            resource_meta: Some(v1::ResourceMeta {
                ordinal,
                kind: kind.into(),
                name: name.into(),
                ..Default::default()
            }),
            conditions: vec![applied(stamp)],
            ..Default::default()
        };
        let previous = v1::WorkStatus {
            manifests: vec![
                at(0, "Deployment", "web", old_stamp),
                at(1, "ConfigMap", "cfg", old_stamp),
            ],
            ..Default::default()
        };
        // The edit put a new ServiceAccount where the Deployment was and
        // moved the ConfigMap.
        let mut current = v1::WorkStatus {
            manifests: vec![
                at(0, "ServiceAccount", "sa", 100),
                at(1, "Deployment", "other", 100),
                at(2, "ConfigMap", "cfg", 100),
            ],
            ..Default::default()
        };
        carry_work_transition_times(&previous, &mut current);
        let stamps: Vec<i64> = current
            .manifests
            .iter()
            .map(|m| m.conditions[0].last_transition_unix_seconds)
            .collect();
        assert_eq!(
            stamps,
            vec![100, 100, old_stamp],
            "only the ConfigMap is the same object"
        );
    }

    #[test]
    fn changed_feedback_values_move_the_feedback_transition_time_only() {
        let report = |value: i64, stamp: i64| {
            let mut m = manifest(
                0,
                vec![
                    condition(AVAILABLE, true, "r", "m", 1),
                    condition(FEEDBACK_SYNCED, true, "StatusFeedbackSynced", "m", 1),
                ],
            );
            for c in &mut m.conditions {
                c.last_transition_unix_seconds = stamp;
            }
            m.feedback = vec![v1::FeedbackValue {
                name: "v".into(),
                r#type: "Integer".into(),
                integer: value,
                ..Default::default()
            }];
            v1::WorkStatus {
                manifests: vec![m],
                ..Default::default()
            }
        };
        let previous = report(1, 5);
        let mut same = report(1, 9);
        carry_work_transition_times(&previous, &mut same);
        assert!(
            same.manifests[0]
                .conditions
                .iter()
                .all(|c| c.last_transition_unix_seconds == 5)
        );
        let mut changed = report(2, 9);
        carry_work_transition_times(&previous, &mut changed);
        let stamps: Vec<(&str, i64)> = changed.manifests[0]
            .conditions
            .iter()
            .map(|c| (c.r#type.as_str(), c.last_transition_unix_seconds))
            .collect();
        assert_eq!(stamps, vec![(AVAILABLE, 5), (FEEDBACK_SYNCED, 9)]);
    }

    #[test]
    fn rule_conditions_aggregate_to_the_work_as_ocm_does() {
        let rule = |type_: &str, status: &str, message: &str| {
            condition_of(type_, status, "ConditionRuleEvaluated", message, 1)
        };
        let manifests = [
            manifest(
                0,
                vec![
                    rule("Complete", "True", "Job is finished"),
                    rule("Ready", "True", "a"),
                ],
            ),
            manifest(
                1,
                vec![
                    rule("Ready", "False", "b"),
                    condition(AVAILABLE, true, "x", "m", 1),
                ],
            ),
        ];
        let work = work_rule_conditions(&manifests, 2);
        let view: Vec<(&str, &str, &str)> = work
            .iter()
            .map(|c| (c.r#type.as_str(), c.status.as_str(), c.message.as_str()))
            .collect();
        assert_eq!(
            view,
            vec![
                ("Complete", "True", "Job is finished"),
                ("Ready", "False", "Aggregated from 2 manifest conditions"),
            ]
        );
        assert!(work.iter().all(|c| c.reason == "ConditionRulesAggregated"));
        let status = v1::WorkStatus {
            conditions: work,
            ..Default::default()
        };
        assert!(is_complete(&status));
        assert!(!is_complete(&v1::WorkStatus::default()));
    }
}
