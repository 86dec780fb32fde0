//! The ReadOnly and ReportOnly strategies: nothing is written, the live
//! object is only observed.

use serde_json::Value;

use ferry_semantics::apply_outcome::Applied;

use super::{ApplyOutcome, outcome};

/// What observing the object found: it is there, or it is missing.
pub(super) fn observe(live: Option<Value>) -> ApplyOutcome {
    let applied = if live.is_some() {
        Applied::Observed
    } else {
        Applied::Missing
    };
    outcome(applied, live, vec![])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_observed_object_is_reported_with_its_body_and_an_absent_one_as_missing() {
        let live = json!({"metadata": {"name": "hammer", "uid": "u1"}});
        let seen = observe(Some(live.clone()));
        assert_eq!(seen.applied, Applied::Observed);
        assert_eq!(seen.object, Some(live));
        assert_eq!(seen.uid(), Some("u1"));
        let absent = observe(None);
        assert_eq!(absent.applied, Applied::Missing);
        assert!(absent.object.is_none());
        assert!(absent.notes.is_empty() && absent.before.is_none());
    }
}
