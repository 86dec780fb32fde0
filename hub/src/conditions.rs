//! The hub's status conditions (OCM's `metav1.Condition` shape): built with
//! the transition time of when they were decided, merged with the current
//! list so a condition whose status did not change keeps its transition
//! time, and compared without the times the API server rounds.

use k8s_openapi::jiff::Timestamp;

use ferry_api::manifest_work::Condition;
use ferry_semantics::contract::KUBE_TIME_FORMAT;
use ferry_semantics::text::clipped;

/// Bytes of a controller's condition message at most: lists in it name
/// their first ten items, and whatever still runs over is cut.
pub const MAX_CONDITION_MESSAGE: usize = 2048;

/// A condition's status: OCM's three values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Truth {
    /// `True`.
    True,
    /// `False`.
    False,
    /// `Unknown`: the hub cannot tell.
    Unknown,
}

impl Truth {
    /// The status as the API writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Truth::True => "True",
            Truth::False => "False",
            Truth::Unknown => "Unknown",
        }
    }
}

impl From<bool> for Truth {
    fn from(value: bool) -> Self {
        if value { Truth::True } else { Truth::False }
    }
}

/// A condition decided at `now` (`True` or `False` from a bool, or any
/// [`Truth`]); the hub's one condition builder.
pub fn condition_at(
    type_: &str,
    status: impl Into<Truth>,
    reason: &str,
    message: String,
    generation: i64,
    now: Timestamp,
) -> Condition {
    Condition {
        type_: type_.into(),
        status: status.into().as_str().into(),
        reason: reason.into(),
        message,
        observed_generation: generation,
        last_transition_time: now.strftime(KUBE_TIME_FORMAT).to_string(),
    }
}

/// A condition of `type_` for `generation` decided at `now` (the
/// snapshot's time: decisions never read the clock), keeping the transition
/// time of the `current` one of its type when its status is unchanged; its
/// message is cut to [`MAX_CONDITION_MESSAGE`].
pub fn condition_since(
    type_: &str,
    status: bool,
    reason: &str,
    message: String,
    generation: i64,
    current: &[Condition],
    now: Timestamp,
) -> Condition {
    let mut wanted = condition_at(
        type_,
        status,
        reason,
        clipped(message, MAX_CONDITION_MESSAGE),
        generation,
        now,
    );
    keep_transition(current, &mut wanted);
    wanted
}

/// Gives `wanted` the transition time of the `current` condition of its
/// type, when that one has the same status.
fn keep_transition(current: &[Condition], wanted: &mut Condition) {
    if let Some(old) = current.iter().find(|o| o.type_ == wanted.type_)
        && old.status == wanted.status
    {
        wanted.last_transition_time = old.last_transition_time.clone();
    }
}

/// The `wanted` conditions, each keeping its transition time from `current`
/// when its status did not change.
pub fn conditions(current: &[Condition], wanted: Vec<Condition>) -> Vec<Condition> {
    wanted
        .into_iter()
        .map(|mut c| {
            keep_transition(current, &mut c);
            c
        })
        .collect()
}

/// Whether two condition lists are equal but for transition times, which
/// the API server rounds.
pub fn same_conditions(a: &[Condition], b: &[Condition]) -> bool {
    let strip = |list: &[Condition]| {
        list.iter()
            .cloned()
            .map(|mut c| {
                c.last_transition_time.clear();
                c
            })
            .collect::<Vec<_>>()
    };
    strip(a) == strip(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unchanged_status_keeps_its_transition_time_and_a_changed_one_gets_now() {
        let then: Timestamp = "2026-12-01T00:00:00Z".parse().expect("time");
        let now: Timestamp = "2026-12-04T00:00:00Z".parse().expect("time");
        let current = vec![
            condition_at("A", true, "r", "m".into(), 1, then),
            condition_at("B", true, "r", "m".into(), 1, then),
        ];
        let wanted = vec![
            condition_at("A", true, "r2", "m2".into(), 2, now),
            condition_at("B", false, "r", "m".into(), 2, now),
        ];
        let merged = conditions(&current, wanted);
        assert_eq!(merged[0].last_transition_time, "2026-12-01T00:00:00Z");
        assert_eq!(merged[0].reason, "r2");
        assert_eq!(merged[1].last_transition_time, "2026-12-04T00:00:00Z");
        assert!(!same_conditions(&current, &merged));
        let mut retimed = current.clone();
        retimed[0].last_transition_time = "2026-12-02T00:00:00Z".into();
        assert!(same_conditions(&current, &retimed));
    }
}
