//! A status report bounded on the wire, where it is made (the agent, before
//! it sends) and where it arrives (the hub, for a report that is over its
//! cap anyway): one work's status can never make a report so large that
//! the hub ends the cluster's session, which would cut every other team's
//! works on that cluster off the hub. The hub keeps at most
//! [`STATUS_BUDGET_BYTES`] of JSON status per work, so the wire budget
//! below loses nothing the hub would have stored but what its own bounds
//! would drop.

use ferry_proto::v1;
use prost::Message;

use crate::status_from_wire::{
    MAX_FEEDBACK_BYTES, MAX_MESSAGE_BYTES, SHORT_MESSAGE_BYTES, STATUS_BUDGET_BYTES,
    bounded_message,
};
use ferry_semantics::contract::{APPLIED, DELETING, FEEDBACK_SYNCED};

/// Largest encoded report the agent sends: under the hub's smallest report
/// cap (`--max-work-bytes` plus a 256 KiB margin), and above what the hub
/// stores ([`STATUS_BUDGET_BYTES`]).
pub const MAX_REPORT_BYTES: usize = 192 * 1024;

/// Field number of `WorkStatus.manifests` (proto/ferry/v1/ferry.proto).
const MANIFESTS_TAG: u32 = 4;

/// Reason of `StatusFeedbackSynced=False` on a manifest one of whose
/// feedback values is over [`MAX_FEEDBACK_BYTES`]: the value is left out
/// and the message names it.
pub const REASON_FEEDBACK_VALUE_TOO_LARGE: &str = "FeedbackValueTooLarge";

/// What bounding a report left out or cut.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Trimmed {
    /// Feedback values over [`MAX_FEEDBACK_BYTES`] left out.
    pub large_values: usize,
    /// Condition messages cut.
    pub messages_cut: usize,
    /// Manifests whose feedback and drift were left out to fit the budget.
    pub details_dropped: usize,
    /// Manifest entries left out to fit the budget.
    pub manifests_left_out: usize,
}

impl Trimmed {
    /// Whether anything was left out or cut.
    pub fn any(&self) -> bool {
        *self != Self::default()
    }
}

/// Bounds `report` in place: feedback values over [`MAX_FEEDBACK_BYTES`]
/// are left out (the manifest's `StatusFeedbackSynced` says which),
/// condition messages are cut to [`MAX_MESSAGE_BYTES`], and while the
/// encoded report is over `budget`, manifest messages are shortened, then
/// every manifest's feedback and drift dropped, then manifest entries left
/// out from the end; the work's `Applied` (or `Deleting`) message says what
/// went. Never fails.
pub fn bound_report(report: &mut v1::WorkStatus, budget: usize) -> Trimmed {
    let mut trimmed = Trimmed::default();
    for manifest in &mut report.manifests {
        leave_out_large_values(manifest, &mut trimmed);
    }
    let messages = report
        .conditions
        .iter_mut()
        .chain(report.manifests.iter_mut().flat_map(|m| &mut m.conditions));
    for condition in messages {
        if condition.message.len() > MAX_MESSAGE_BYTES {
            condition.message = bounded_message(&condition.message, MAX_MESSAGE_BYTES);
            trimmed.messages_cut += 1;
        }
    }
    // Room for the note added below.
    let budget = budget.saturating_sub(MAX_MESSAGE_BYTES);
    // Measured once, and again only after a step that shrank the report:
    // every status the agent publishes passes here.
    let mut size = report.encoded_len();
    if size > budget {
        for condition in report.manifests.iter_mut().flat_map(|m| &mut m.conditions) {
            if condition.message.len() > SHORT_MESSAGE_BYTES {
                condition.message = bounded_message(&condition.message, SHORT_MESSAGE_BYTES);
                trimmed.messages_cut += 1;
            }
        }
        size = report.encoded_len();
    }
    if size > budget {
        for manifest in &mut report.manifests {
            if !manifest.feedback.is_empty() || manifest.drift.is_some() {
                manifest.feedback.clear();
                manifest.drift = None;
                trimmed.details_dropped += 1;
            }
        }
        size = report.encoded_len();
    }
    while size > budget {
        let Some(last) = report.manifests.pop() else {
            break;
        };
        trimmed.manifests_left_out += 1;
        // The entry's field tag and length prefix go with it.
        size = size.saturating_sub(prost::encoding::message::encoded_len(MANIFESTS_TAG, &last));
    }
    if trimmed.details_dropped > 0 || trimmed.manifests_left_out > 0 {
        add_note(report, &trimmed);
    }
    trimmed
}

/// Leaves out the manifest's feedback values over [`MAX_FEEDBACK_BYTES`]
/// and says so on its `StatusFeedbackSynced`.
fn leave_out_large_values(manifest: &mut v1::ManifestStatus, trimmed: &mut Trimmed) {
    let mut left_out = Vec::new();
    manifest.feedback.retain(|value| {
        let fits =
            value.string.len() <= MAX_FEEDBACK_BYTES && value.json_raw.len() <= MAX_FEEDBACK_BYTES;
        if !fits {
            left_out.push(value.name.clone());
        }
        fits
    });
    if left_out.is_empty() {
        return;
    }
    trimmed.large_values += left_out.len();
    let message = bounded_message(
        &format!(
            "values over {MAX_FEEDBACK_BYTES} bytes left out: {}",
            left_out.join("; ")
        ),
        MAX_MESSAGE_BYTES,
    );
    let synced = manifest
        .conditions
        .iter_mut()
        .find(|c| c.r#type == FEEDBACK_SYNCED);
    match synced {
        Some(condition) => {
            condition.status = "False".into();
            condition.reason = REASON_FEEDBACK_VALUE_TOO_LARGE.into();
            condition.message = message;
        }
        None => manifest.conditions.push(v1::Condition {
            r#type: FEEDBACK_SYNCED.into(),
            status: "False".into(),
            reason: REASON_FEEDBACK_VALUE_TOO_LARGE.into(),
            message,
            observed_generation: 0,
            last_transition_unix_seconds: 0,
        }),
    }
}

/// Says what was left out in the work's `Applied` message (`Deleting` while
/// it is being deleted; else its first condition's).
fn add_note(report: &mut v1::WorkStatus, trimmed: &Trimmed) {
    let index = report
        .conditions
        .iter()
        .position(|c| c.r#type == APPLIED)
        .or_else(|| report.conditions.iter().position(|c| c.r#type == DELETING))
        .unwrap_or(0);
    let Some(target) = report.conditions.get_mut(index) else {
        return;
    };
    let note = format!(
        " [report over {} KiB: feedback and drift of {} manifests left out, {} manifest entries left out]",
        MAX_REPORT_BYTES / 1024,
        trimmed.details_dropped,
        trimmed.manifests_left_out
    );
    let room = MAX_MESSAGE_BYTES.saturating_sub(note.len());
    target.message = format!("{}{note}", bounded_message(&target.message, room));
}

// The budget must leave the hub room to keep what it stores.
const _: () = assert!(MAX_REPORT_BYTES > STATUS_BUDGET_BYTES);

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn condition(type_: &str, message: String) -> v1::Condition {
        v1::Condition {
            r#type: type_.into(),
            status: "True".into(),
            reason: "R".into(),
            message,
            observed_generation: 1,
            last_transition_unix_seconds: 1,
        }
    }

    fn manifest(ordinal: i32, values: Vec<(&str, usize)>) -> v1::ManifestStatus {
        v1::ManifestStatus {
            resource_meta: Some(v1::ResourceMeta {
                ordinal,
                kind: "ConfigMap".into(),
                name: format!("cm-{ordinal}"),
                ..Default::default()
            }),
            conditions: vec![condition(FEEDBACK_SYNCED, "ok".into())],
            feedback: values
                .into_iter()
                .map(|(name, len)| v1::FeedbackValue {
                    name: name.into(),
                    r#type: "String".into(),
                    string: "x".repeat(len),
                    ..Default::default()
                })
                .collect(),
            drift: None,
        }
    }

    fn report(manifests: Vec<v1::ManifestStatus>) -> v1::WorkStatus {
        v1::WorkStatus {
            work: Some(v1::WorkRef {
                uid: "u".into(),
                namespace: "cluster-a".into(),
                name: "w".into(),
            }),
            generation: 1,
            conditions: vec![condition(APPLIED, "applied".into())],
            manifests,
            gone: false,
            trace_context: Default::default(),
        }
    }

    #[test]
    fn a_value_over_the_bound_is_left_out_and_named_on_its_manifest() {
        let mut report = report(vec![manifest(0, vec![("small", 10), ("big", 700_000)])]);
        let trimmed = bound_report(&mut report, MAX_REPORT_BYTES);
        assert_eq!(trimmed.large_values, 1);
        let manifest = &report.manifests[0];
        assert_eq!(manifest.feedback.len(), 1);
        assert_eq!(manifest.feedback[0].name, "small");
        let synced = &manifest.conditions[0];
        assert_eq!(
            (synced.status.as_str(), synced.reason.as_str()),
            ("False", REASON_FEEDBACK_VALUE_TOO_LARGE)
        );
        assert!(synced.message.contains("big"), "{}", synced.message);
        assert_eq!(
            report.conditions[0].message, "applied",
            "no note: nothing else went"
        );
    }

    #[test]
    fn a_report_over_budget_drops_details_then_entries_and_says_so() {
        let manifests = (0..400)
            .map(|i| manifest(i, vec![("a", 1000), ("b", 1000)]))
            .collect();
        let mut report = report(manifests);
        let trimmed = bound_report(&mut report, MAX_REPORT_BYTES);
        assert!(report.encoded_len() <= MAX_REPORT_BYTES);
        assert_eq!(trimmed.details_dropped, 400);
        assert_eq!(trimmed.manifests_left_out, 0, "400 bare entries fit");
        assert!(report.conditions[0].message.contains("left out"));
    }

    #[test]
    fn entries_left_out_are_subtracted_exactly() {
        let manifests = (0..3000).map(|i| manifest(i, vec![])).collect();
        let mut report = report(manifests);
        let trimmed = bound_report(&mut report, 32 * 1024);
        assert!(trimmed.manifests_left_out > 0);
        assert!(report.encoded_len() <= 32 * 1024);
        let mut full = report.clone();
        full.manifests.push(manifest(9999, vec![]));
        assert_eq!(
            full.encoded_len() - report.encoded_len(),
            prost::encoding::message::encoded_len(MANIFESTS_TAG, &manifest(9999, vec![]))
        );
    }

    #[test]
    fn a_report_within_budget_is_unchanged() {
        let original = report(vec![manifest(0, vec![("a", 100)])]);
        let mut bounded = original.clone();
        assert!(!bound_report(&mut bounded, MAX_REPORT_BYTES).any());
        assert_eq!(bounded, original);
    }

    proptest! {
        /// Whatever the report, the bounded one fits the budget (a budget
        /// that holds the envelope).
        #[test]
        fn the_bounded_report_fits(
            manifests in proptest::collection::vec(
                (proptest::collection::vec(0usize..3000, 0..8), 0usize..3000), 0..120),
            work_message in 0usize..50_000,
            budget in 8_192usize..300_000,
        ) {
            let manifests = manifests
                .into_iter()
                .enumerate()
                .map(|(i, (values, message))| {
                    let mut m = manifest(i as i32, values.iter().map(|len| ("v", *len)).collect());
                    m.conditions.push(condition("Available", "m".repeat(message)));
                    m
                })
                .collect();
            let mut report = report(manifests);
            report.conditions[0].message = "w".repeat(work_message);
            bound_report(&mut report, budget);
            prop_assert!(report.encoded_len() <= budget, "{} > {budget}", report.encoded_len());
        }
    }
}
