//! Builds the conditions an agent reports: per manifest from the live object
//! (availability, feedback), per work as a summary of its manifests, keeping
//! `lastTransitionTime` from the previous report when a status did not change.

use std::time::{SystemTime, UNIX_EPOCH};

use ferry_proto::v1;
use ferry_semantics::availability::availability;
use ferry_semantics::contract::{APPLIED, AVAILABLE, FEEDBACK_SYNCED};
use ferry_semantics::feedback::evaluate_feedback;
use serde_json::Value;

/// A condition of `type_` at `generation`, stamped now.
pub fn condition(
    type_: &str,
    ok: bool,
    reason: &str,
    message: impl Into<String>,
    generation: i64,
) -> v1::Condition {
    v1::Condition {
        r#type: type_.to_string(),
        status: if ok { "True" } else { "False" }.to_string(),
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

/// Applies `carry_transition_times` to a whole work report.
pub fn carry_work_transition_times(previous: &v1::WorkStatus, current: &mut v1::WorkStatus) {
    carry_transition_times(&previous.conditions, &mut current.conditions);
    for m in &mut current.manifests {
        let ordinal = m.resource_meta.as_ref().map(|r| r.ordinal);
        if let Some(prev) = previous
            .manifests
            .iter()
            .find(|p| p.resource_meta.as_ref().map(|r| r.ordinal) == ordinal)
        {
            carry_transition_times(&prev.conditions, &mut m.conditions);
        }
    }
}

fn now_seconds() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or_default()
}

/// The object as it is on the spoke after applying, and the feedback rules
/// its manifest config asks for.
pub struct Observed {
    /// The live object, status included.
    pub object: Value,
    /// The manifest's feedback rules.
    pub rules: Vec<v1::FeedbackRule>,
}

/// The `Available` and `StatusFeedbackSynced` conditions and the feedback
/// values of one applied manifest.
pub fn observe(
    meta: &v1::ResourceMeta,
    observed: &Observed,
    generation: i64,
) -> (Vec<v1::Condition>, Vec<v1::FeedbackValue>) {
    let (available, reason, message) = availability(&meta.group, &meta.kind, &observed.object);
    let mut conditions = vec![condition(AVAILABLE, available, reason, message, generation)];
    if observed.rules.is_empty() {
        return (conditions, vec![]);
    }
    let outcome = evaluate_feedback((&meta.group, &meta.kind), &observed.object, &observed.rules);
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
            "StatusFeedbackIncomplete",
            problems.join("; "),
            generation,
        )
    };
    conditions.push(synced);
    (conditions, outcome.values)
}

/// The work's `Available` condition: True when every manifest is available,
/// else naming those that are not and why.
pub fn work_available_condition(
    manifests: &[v1::ManifestStatus],
    generation: i64,
) -> v1::Condition {
    let summary = Summary {
        type_: AVAILABLE,
        noun: "resources",
        state: "available",
        true_reason: "ResourcesAvailable",
        false_reason: "ResourcesNotAvailable",
    };
    summary.of(manifests, generation)
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
}
