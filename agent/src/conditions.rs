//! Builds the conditions an agent reports, keeping `lastTransitionTime` from
//! the previous report when a condition's status did not change.

use std::time::{SystemTime, UNIX_EPOCH};

use ferry_proto::v1;

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
