//! Turns an agent's `WorkStatus` report into the ManifestWork status the hub
//! writes. An agent is untrusted input: whatever it sends, the result has the
//! shape of `metav1.Condition`s the API server accepts and a bounded size, so
//! a large failing work can never make its own status unwritable. What had to
//! be cut is said in the status itself.

use std::collections::HashSet;

use ferry_proto::v1;
use ferry_semantics::contract::{APPLIED, KUBE_TIME_FORMAT};
use k8s_openapi::jiff::Timestamp;

use crate::manifest_work::{
    Condition, FeedbackValue, FieldValue, ManifestCondition, ManifestResourceMeta,
    ManifestResourceStatus, ManifestWorkStatus, StatusFeedbackResult,
};
use crate::manifest_work::{DriftedField, ManifestDrift};
use ferry_semantics::drift_report::{MAX_DRIFT_FIELDS, MAX_DRIFT_VALUE_BYTES};
use ferry_semantics::text::prefix_within;

/// Longest condition message kept, in bytes (the API allows 32 KiB; a
/// readable status needs far less).
pub const MAX_MESSAGE_BYTES: usize = 1024;
/// What manifest messages are cut to when the whole status is over budget.
pub const SHORT_MESSAGE_BYTES: usize = 128;
/// Largest serialised status the hub writes. The API server stores a whole
/// object in one etcd request of at most 1.5 MiB and the admission webhook
/// lets a work's spec reach 1.4 MB, so the status keeps to what is left.
pub const STATUS_BUDGET_BYTES: usize = 128 * 1024;
/// Most conditions kept per list (they are keyed by type).
pub const MAX_CONDITIONS: usize = 16;
/// Most feedback values kept per manifest.
pub const MAX_FEEDBACK_VALUES: usize = 64;
/// Longest feedback value (string or raw JSON) kept, in bytes.
pub const MAX_FEEDBACK_BYTES: usize = 1024;
/// Longest name-like field (resource identity, feedback name) kept, in bytes.
pub const MAX_NAME_BYTES: usize = 253;
/// Reason used when an agent sends none that the API would accept.
pub const UNSPECIFIED_REASON: &str = "Unspecified";
/// How the agent joins the problems it lists in one message; the hub cuts
/// between items and counts the ones it left out.
const ITEM_SEPARATOR: &str = "; ";
/// Room kept for the "… and N more" note when a message is cut.
const CUT_NOTE_ROOM: usize = 40;
/// Longest drift pointer kept, in bytes.
pub const MAX_POINTER_BYTES: usize = 512;
/// Longest field manager name kept (Kubernetes allows 128).
pub const MAX_MANAGER_BYTES: usize = 128;
/// Latest time a `metav1.Time` can hold: 9999-12-31T23:59:59Z.
const MAX_UNIX_SECONDS: i64 = 253_402_300_799;

/// What had to be cut to keep a status within its bounds.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Shortened {
    /// Manifest condition messages cut to fit the status budget.
    pub messages_cut: usize,
    /// Manifest entries left out to fit the status budget.
    pub manifests_left_out: usize,
    /// Feedback values left out (too many, too large, or over budget).
    pub feedback_left_out: usize,
    /// Conditions left out (invalid type, duplicate type, too many).
    pub conditions_left_out: usize,
    /// Drifted fields left out to fit the status budget.
    pub drift_left_out: usize,
}

impl Shortened {
    fn any(&self) -> bool {
        *self != Self::default()
    }

    fn note(&self) -> String {
        let mut parts = Vec::new();
        if self.messages_cut > 0 {
            parts.push(format!("{} manifest messages shortened", self.messages_cut));
        }
        if self.manifests_left_out > 0 {
            parts.push(format!(
                "{} manifest entries left out",
                self.manifests_left_out
            ));
        }
        if self.feedback_left_out > 0 {
            parts.push(format!(
                "{} feedback values left out",
                self.feedback_left_out
            ));
        }
        if self.conditions_left_out > 0 {
            parts.push(format!(
                "{} invalid or duplicate conditions left out",
                self.conditions_left_out
            ));
        }
        if self.drift_left_out > 0 {
            parts.push(format!("{} drifted fields left out", self.drift_left_out));
        }
        format!(" [status shortened to fit: {}]", parts.join(", "))
    }
}

/// The ManifestWork status an agent report describes, bounded to
/// `STATUS_BUDGET_BYTES` and shaped as the API server requires. Never fails:
/// invalid parts are repaired or left out, and the work's `Applied` message
/// says what was left out.
pub fn work_status(report: &v1::WorkStatus) -> ManifestWorkStatus {
    bounded_work_status(report, STATUS_BUDGET_BYTES).0
}

/// `work_status` with an explicit budget, also returning what was cut.
pub fn bounded_work_status(
    report: &v1::WorkStatus,
    budget: usize,
) -> (ManifestWorkStatus, Shortened) {
    let generation = report.generation.max(0);
    let mut shortened = Shortened::default();
    let conditions = conditions(&report.conditions, generation, &mut shortened);
    let manifests: Vec<ManifestCondition> = report
        .manifests
        .iter()
        .map(|m| manifest(m, generation, &mut shortened))
        .collect();
    let mut status = ManifestWorkStatus {
        conditions,
        resource_status: Some(ManifestResourceStatus { manifests }),
    };
    fit(&mut status, budget, &mut shortened);
    if shortened.any() {
        add_note(&mut status, &shortened);
    }
    (status, shortened)
}

/// `text` unchanged if it fits in `max` bytes; otherwise cut at a char
/// boundary (between listed items when it is a `; `-separated list) with a
/// note of how much was left out: "… and 287 more" or "… (5000 more bytes)".
pub fn bounded_message(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    // A list cut before (the agent's message cut once, then again to make
    // room for a note) already counts what it left out: cut what is still
    // listed and add the two counts, so the total stays true.
    let (text, counted) = match text.rsplit_once("… and ").and_then(|(head, tail)| {
        let n = tail.strip_suffix(" more")?.parse::<usize>().ok()?;
        Some((head, n))
    }) {
        Some((head, n)) => (head, n),
        None => (text, 0),
    };
    let room = max.saturating_sub(CUT_NOTE_ROOM);
    let cut = prefix_within(text, room).len();
    let kept = &text[..cut];
    if let Some(end) = kept.rfind(ITEM_SEPARATOR) {
        let left_out = text[end + ITEM_SEPARATOR.len()..]
            .split(ITEM_SEPARATOR)
            .count()
            + counted;
        return format!("{}… and {left_out} more", &text[..end]);
    }
    if counted > 0 {
        return format!("{kept}… and {counted} more");
    }
    format!("{kept}… ({} more bytes)", text.len() - cut)
}

fn truncated(text: &str, max: usize) -> String {
    prefix_within(text, max).to_string()
}

fn conditions(
    wire: &[v1::Condition],
    generation: i64,
    shortened: &mut Shortened,
) -> Vec<Condition> {
    let mut seen = HashSet::new();
    let mut kept = Vec::new();
    for c in wire {
        if kept.len() == MAX_CONDITIONS || !is_condition_type(&c.r#type) || !seen.insert(&c.r#type)
        {
            shortened.conditions_left_out += 1;
            continue;
        }
        kept.push(condition(c, generation));
    }
    kept
}

/// One condition in `metav1.Condition` shape: a known status, a reason the
/// API accepts, a bounded message, an observed generation between 0 and the
/// report's, and an RFC 3339 time.
fn condition(c: &v1::Condition, generation: i64) -> Condition {
    let status = match c.status.as_str() {
        "True" | "False" | "Unknown" => c.status.clone(),
        _ => "Unknown".to_string(),
    };
    Condition {
        type_: c.r#type.clone(),
        status,
        reason: reason(&c.reason),
        message: bounded_message(&c.message, MAX_MESSAGE_BYTES),
        observed_generation: c.observed_generation.clamp(0, generation),
        last_transition_time: rfc3339(c.last_transition_unix_seconds),
    }
}

fn rfc3339(unix_seconds: i64) -> String {
    let time = Timestamp::from_second(unix_seconds.clamp(0, MAX_UNIX_SECONDS))
        .unwrap_or(Timestamp::UNIX_EPOCH);
    time.strftime(KUBE_TIME_FORMAT).to_string()
}

/// `^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`, at most 1024 bytes: the
/// characters the API refuses are dropped.
fn reason(wire: &str) -> String {
    let allowed: String = wire
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | ',' | ':'))
        .skip_while(|c| !c.is_ascii_alphabetic())
        .take(1024)
        .collect();
    let trimmed = allowed.trim_end_matches([',', ':']);
    if trimmed.is_empty() {
        UNSPECIFIED_REASON.to_string()
    } else {
        trimmed.to_string()
    }
}

/// A qualified name as `metav1.Condition.type` requires: an optional DNS
/// subdomain prefix and `/`, then 1-63 alphanumerics, `-`, `_` or `.`,
/// starting and ending alphanumeric.
fn is_condition_type(type_: &str) -> bool {
    let (prefix, name) = match type_.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, type_),
    };
    let name_ok = (1..=63).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    let prefix_ok = prefix.is_none_or(|p| {
        p.len() <= 253
            && p.split('.').all(|label| {
                !label.is_empty()
                    && label
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                    && !label.starts_with('-')
                    && !label.ends_with('-')
            })
    });
    name_ok && prefix_ok
}

fn manifest(
    m: &v1::ManifestStatus,
    generation: i64,
    shortened: &mut Shortened,
) -> ManifestCondition {
    let meta = m.resource_meta.clone().unwrap_or_default();
    let mut values = Vec::new();
    for v in &m.feedback {
        match feedback_value(v) {
            Some(value) if values.len() < MAX_FEEDBACK_VALUES => values.push(value),
            _ => shortened.feedback_left_out += 1,
        }
    }
    ManifestCondition {
        resource_meta: ManifestResourceMeta {
            ordinal: meta.ordinal,
            group: truncated(&meta.group, MAX_NAME_BYTES),
            version: truncated(&meta.version, MAX_NAME_BYTES),
            kind: truncated(&meta.kind, MAX_NAME_BYTES),
            resource: truncated(&meta.resource, MAX_NAME_BYTES),
            name: truncated(&meta.name, MAX_NAME_BYTES),
            namespace: truncated(&meta.namespace, MAX_NAME_BYTES),
        },
        status_feedback: (!values.is_empty()).then_some(StatusFeedbackResult { values }),
        conditions: conditions(&m.conditions, generation, shortened),
        drift: m.drift.as_ref().and_then(drift),
    }
}

/// A manifest's drift report within the agent's own bounds (an agent is
/// untrusted): at most `MAX_DRIFT_FIELDS` fields, each value, pointer and
/// manager cut to size; fields past the bound are counted in `omitted`.
fn drift(wire: &v1::ManifestDrift) -> Option<ManifestDrift> {
    let fields: Vec<DriftedField> = wire
        .fields
        .iter()
        .take(MAX_DRIFT_FIELDS)
        .map(|f| DriftedField {
            pointer: bounded_message(&f.pointer, MAX_POINTER_BYTES),
            hub_value: bounded_message(&f.hub_json, MAX_DRIFT_VALUE_BYTES),
            spoke_value: f
                .spoke_json
                .as_deref()
                .map(|v| bounded_message(v, MAX_DRIFT_VALUE_BYTES)),
            manager: (!f.manager.is_empty()).then(|| truncated(&f.manager, MAX_MANAGER_BYTES)),
            first_seen_time: rfc3339(f.first_seen_unix_seconds),
            corrected_time: (f.corrected_unix_seconds != 0)
                .then(|| rfc3339(f.corrected_unix_seconds)),
        })
        .collect();
    let unlisted = wire.fields.len().saturating_sub(fields.len());
    let omitted =
        i64::from(wire.omitted).saturating_add(i64::try_from(unlisted).unwrap_or(i64::MAX));
    (!fields.is_empty() || omitted > 0).then_some(ManifestDrift { fields, omitted })
}

/// A typed feedback value; an unknown type is shown as a string, and raw
/// JSON too large to keep whole is left out (a cut document is not JSON).
fn feedback_value(v: &v1::FeedbackValue) -> Option<FeedbackValue> {
    let mut field_value = FieldValue::default();
    match v.r#type.as_str() {
        "Integer" => field_value.integer = Some(v.integer),
        "Boolean" => field_value.boolean = Some(v.boolean),
        "JsonRaw" if v.json_raw.len() > MAX_FEEDBACK_BYTES => return None,
        "JsonRaw" => field_value.json_raw = Some(v.json_raw.clone()),
        _ => field_value.string = Some(bounded_message(&v.string, MAX_FEEDBACK_BYTES)),
    }
    field_value.type_ = match v.r#type.as_str() {
        known @ ("Integer" | "Boolean" | "JsonRaw") => known.to_string(),
        _ => "String".to_string(),
    };
    Some(FeedbackValue {
        name: truncated(&v.name, MAX_NAME_BYTES),
        field_value,
    })
}

fn size_of(status: &ManifestWorkStatus) -> usize {
    serde_json::to_vec(status).map_or(usize::MAX, |bytes| bytes.len())
}

fn manifests_mut(status: &mut ManifestWorkStatus) -> &mut Vec<ManifestCondition> {
    &mut status
        .resource_status
        .get_or_insert_with(Default::default)
        .manifests
}

/// Brings `status` within `budget` bytes, giving up detail in this order:
/// long manifest messages, then every manifest message and feedback value,
/// then manifest entries from the end. Work conditions are always kept; a
/// margin is left for the note that says what was cut.
fn fit(status: &mut ManifestWorkStatus, budget: usize, shortened: &mut Shortened) {
    let budget = budget.saturating_sub(256);
    if size_of(status) <= budget {
        return;
    }
    for c in manifests_mut(status)
        .iter_mut()
        .flat_map(|m| &mut m.conditions)
    {
        if c.message.len() > SHORT_MESSAGE_BYTES {
            c.message = bounded_message(&c.message, SHORT_MESSAGE_BYTES);
            shortened.messages_cut += 1;
        }
    }
    if size_of(status) <= budget {
        return;
    }
    for m in manifests_mut(status).iter_mut() {
        if let Some(feedback) = m.status_feedback.take() {
            shortened.feedback_left_out += feedback.values.len();
        }
        if let Some(drift) = m.drift.take() {
            shortened.drift_left_out += drift.fields.len();
        }
        for c in &mut m.conditions {
            if !c.message.is_empty() {
                c.message.clear();
                shortened.messages_cut += 1;
            }
        }
    }
    let mut size = size_of(status);
    let manifests = manifests_mut(status);
    while size > budget {
        let Some(last) = manifests.pop() else {
            break;
        };
        // The entry and the comma before it.
        size = size.saturating_sub(serde_json::to_vec(&last).map_or(0, |b| b.len()) + 1);
        shortened.manifests_left_out += 1;
    }
}

/// Says what was cut in the work's `Applied` message (or its first
/// condition's), keeping that message within `MAX_MESSAGE_BYTES`.
fn add_note(status: &mut ManifestWorkStatus, shortened: &Shortened) {
    let index = status
        .conditions
        .iter()
        .position(|c| c.type_ == APPLIED)
        .unwrap_or(0);
    let Some(target) = status.conditions.get_mut(index) else {
        return;
    };
    let note = shortened.note();
    let room = MAX_MESSAGE_BYTES.saturating_sub(note.len());
    target.message = format!("{}{note}", bounded_message(&target.message, room));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire_condition(type_: &str, message: &str) -> v1::Condition {
        v1::Condition {
            r#type: type_.into(),
            status: "False".into(),
            reason: "UnknownKind".into(),
            message: message.into(),
            observed_generation: 4,
            last_transition_unix_seconds: 1_700_000_000,
        }
    }

    fn report(
        conditions: Vec<v1::Condition>,
        manifests: Vec<v1::ManifestStatus>,
    ) -> v1::WorkStatus {
        v1::WorkStatus {
            work: None,
            generation: 4,
            conditions,
            manifests,
            gone: false,
            trace_context: Default::default(),
        }
    }

    fn failing_manifest(ordinal: i32, message: &str) -> v1::ManifestStatus {
        v1::ManifestStatus {
            resource_meta: Some(v1::ResourceMeta {
                ordinal,
                kind: "Gadget".into(),
                name: format!("g{ordinal}"),
                ..Default::default()
            }),
            conditions: vec![wire_condition("Applied", message)],
            feedback: vec![],
            ..Default::default()
        }
    }

    #[test]
    fn conditions_keep_reason_message_generation_and_time() {
        let status = work_status(&report(
            vec![wire_condition("Applied", "no kind Gadget")],
            vec![],
        ));
        let c = &status.conditions[0];
        assert_eq!(c.reason, "UnknownKind");
        assert_eq!(c.message, "no kind Gadget");
        assert_eq!(c.observed_generation, 4);
        assert_eq!(c.last_transition_time, "2023-11-14T22:13:20Z");
    }

    #[test]
    fn a_short_message_is_kept_whole() {
        assert_eq!(bounded_message("all good", 1024), "all good");
    }

    #[test]
    fn a_long_list_is_cut_between_items_and_counts_the_rest() {
        let items: Vec<String> = (0..300)
            .map(|i| format!("#{i} Gadget g{i}: UnknownKind"))
            .collect();
        let text = format!("300 of 300 manifests are not applied: {}", items.join("; "));
        let cut = bounded_message(&text, 1024);
        assert!(cut.len() <= 1024, "{} bytes", cut.len());
        let kept = cut.matches("UnknownKind").count();
        assert!(
            cut.ends_with(&format!("… and {} more", 300 - kept)),
            "{cut}"
        );
        assert!(!cut.contains("#299 "));
    }

    #[test]
    fn a_list_cut_twice_still_counts_everything_left_out() {
        let items: Vec<String> = (0..300)
            .map(|i| format!("#{i} Gadget g{i}: UnknownKind"))
            .collect();
        let text = format!("300 of 300 manifests are not applied: {}", items.join("; "));
        let once = bounded_message(&text, 1024);
        let twice = bounded_message(&once, 700);
        assert!(twice.len() <= 700, "{} bytes", twice.len());
        let kept = twice.matches("UnknownKind").count();
        assert!(
            twice.ends_with(&format!("… and {} more", 300 - kept)),
            "{twice}"
        );
    }

    #[test]
    fn a_long_text_without_items_says_how_many_bytes_were_cut() {
        let text = "é".repeat(2000);
        let cut = bounded_message(&text, 1024);
        assert!(cut.len() <= 1024);
        assert!(cut.ends_with("more bytes)"), "{cut}");
        let kept = cut.split('…').next().unwrap_or_default().len();
        assert!(cut.contains(&format!("({} more bytes)", 4000 - kept)));
    }

    #[test]
    fn invalid_shapes_are_repaired_or_left_out() {
        let mut bad = wire_condition("Applied", "x");
        bad.status = "Maybe".into();
        bad.reason = "9 bad reason!".into();
        bad.observed_generation = -5;
        bad.last_transition_unix_seconds = i64::MIN;
        let (status, shortened) = bounded_work_status(
            &report(
                vec![
                    bad,
                    wire_condition("Applied", "duplicate"),
                    wire_condition("not a type!", "x"),
                    wire_condition("", "x"),
                ],
                vec![],
            ),
            STATUS_BUDGET_BYTES,
        );
        assert_eq!(status.conditions.len(), 1);
        let c = &status.conditions[0];
        assert_eq!(c.status, "Unknown");
        assert_eq!(c.reason, "badreason");
        assert_eq!(c.observed_generation, 0);
        assert_eq!(c.last_transition_time, "1970-01-01T00:00:00Z");
        assert_eq!(shortened.conditions_left_out, 3);
        assert!(
            c.message
                .contains("3 invalid or duplicate conditions left out")
        );
    }

    #[test]
    fn observed_generation_never_exceeds_the_report() {
        let mut c = wire_condition("Applied", "x");
        c.observed_generation = i64::MAX;
        let status = work_status(&report(vec![c], vec![]));
        assert_eq!(status.conditions[0].observed_generation, 4);
    }

    #[test]
    fn prefixed_condition_types_are_accepted() {
        assert!(is_condition_type("work.ferry.dev/Applied"));
        assert!(is_condition_type("StatusFeedbackSynced"));
        assert!(!is_condition_type("Work.Ferry/Applied"));
        assert!(!is_condition_type("a/b/c"));
        assert!(!is_condition_type(&"A".repeat(64)));
    }

    #[test]
    fn a_huge_manifest_list_is_kept_with_shortened_messages() {
        let long = "x".repeat(900);
        let manifests: Vec<_> = (0..300).map(|i| failing_manifest(i, &long)).collect();
        let (status, shortened) = bounded_work_status(
            &report(
                vec![wire_condition("Applied", "300 of 300 failed")],
                manifests,
            ),
            STATUS_BUDGET_BYTES,
        );
        assert!(size_of(&status) <= STATUS_BUDGET_BYTES);
        assert_eq!(shortened.manifests_left_out, 0);
        assert_eq!(shortened.messages_cut, 300);
        let entries = &status.resource_status.as_ref().map(|r| r.manifests.len());
        assert_eq!(*entries, Some(300));
        assert!(
            status.conditions[0]
                .message
                .contains("300 manifest messages shortened")
        );
    }

    #[test]
    fn entries_are_left_out_only_when_messages_cannot_make_room() {
        let manifests: Vec<_> = (0..3000)
            .map(|i| failing_manifest(i, "no kind Gadget"))
            .collect();
        let (status, shortened) = bounded_work_status(
            &report(vec![wire_condition("Applied", "3000 failed")], manifests),
            STATUS_BUDGET_BYTES,
        );
        assert!(size_of(&status) <= STATUS_BUDGET_BYTES);
        assert!(shortened.manifests_left_out > 0);
        let kept = status
            .resource_status
            .as_ref()
            .map_or(0, |r| r.manifests.len());
        assert_eq!(kept + shortened.manifests_left_out, 3000);
        assert!(status.conditions[0].message.contains(&format!(
            "{} manifest entries left out",
            shortened.manifests_left_out
        )));
    }

    #[test]
    fn oversized_feedback_is_bounded() {
        let mut m = failing_manifest(0, "ok");
        m.feedback = vec![
            v1::FeedbackValue {
                name: "raw".into(),
                r#type: "JsonRaw".into(),
                json_raw: format!("\"{}\"", "a".repeat(5000)),
                ..Default::default()
            },
            v1::FeedbackValue {
                name: "s".into(),
                r#type: "Weird".into(),
                string: "b".repeat(5000),
                ..Default::default()
            },
        ];
        let (status, shortened) =
            bounded_work_status(&report(vec![], vec![m]), STATUS_BUDGET_BYTES);
        let values = &status
            .resource_status
            .as_ref()
            .expect("manifests")
            .manifests[0]
            .status_feedback
            .as_ref()
            .expect("feedback")
            .values;
        assert_eq!(values.len(), 1);
        assert_eq!(values[0].field_value.type_, "String");
        assert!(
            values[0]
                .field_value
                .string
                .as_ref()
                .is_some_and(|s| s.len() <= MAX_FEEDBACK_BYTES)
        );
        assert_eq!(shortened.feedback_left_out, 1);
    }

    fn drifted(pointer: &str, value: &str, corrected: i64) -> v1::DriftedField {
        v1::DriftedField {
            pointer: pointer.into(),
            hub_json: value.into(),
            spoke_json: Some(value.into()),
            manager: "kubectl-edit".into(),
            first_seen_unix_seconds: 1_700_000_000,
            corrected_unix_seconds: corrected,
        }
    }

    #[test]
    fn a_drift_report_becomes_pointer_values_manager_and_times() {
        let mut manifest = failing_manifest(0, "ok");
        manifest.drift = Some(v1::ManifestDrift {
            fields: vec![
                drifted("/data/a", "\"x\"", 0),
                v1::DriftedField {
                    spoke_json: None,
                    manager: String::new(),
                    ..drifted("/data/b", "1", 1_700_000_060)
                },
            ],
            omitted: 3,
        });
        let status = work_status(&report(vec![], vec![manifest]));
        let drift = status.resource_status.expect("manifests").manifests[0]
            .drift
            .clone()
            .expect("drift");
        assert_eq!(drift.omitted, 3);
        let open = &drift.fields[0];
        assert_eq!(open.pointer, "/data/a");
        assert_eq!(open.spoke_value.as_deref(), Some("\"x\""));
        assert_eq!(open.manager.as_deref(), Some("kubectl-edit"));
        assert_eq!(open.first_seen_time, "2023-11-14T22:13:20Z");
        assert_eq!(open.corrected_time, None);
        let fixed = &drift.fields[1];
        assert_eq!(
            (fixed.spoke_value.as_ref(), fixed.manager.as_ref()),
            (None, None)
        );
        assert_eq!(
            fixed.corrected_time.as_deref(),
            Some("2023-11-14T22:14:20Z")
        );
    }

    #[test]
    fn hostile_drift_reports_stay_bounded_and_say_what_was_cut() {
        let huge = "v".repeat(2_000);
        let manifests: Vec<_> = (0..300)
            .map(|i| {
                let mut m = failing_manifest(i, "ok");
                m.drift = Some(v1::ManifestDrift {
                    fields: (0..20).map(|_| drifted(&huge, &huge, 0)).collect(),
                    omitted: u32::MAX,
                });
                m
            })
            .collect();
        let (status, shortened) = bounded_work_status(
            &report(vec![wire_condition("Applied", "ok")], manifests),
            STATUS_BUDGET_BYTES,
        );
        assert!(size_of(&status) <= STATUS_BUDGET_BYTES);
        assert!(shortened.drift_left_out > 0);
        assert!(
            status.conditions[0]
                .message
                .contains("drifted fields left out")
        );
        for m in status.resource_status.iter().flat_map(|r| &r.manifests) {
            if let Some(d) = &m.drift {
                assert!(d.fields.len() <= MAX_DRIFT_FIELDS);
                for f in &d.fields {
                    assert!(f.pointer.len() <= MAX_POINTER_BYTES);
                    assert!(f.hub_value.len() <= MAX_DRIFT_VALUE_BYTES);
                }
            }
        }
        // One manifest alone keeps its bounded list and counts the rest.
        let mut one = failing_manifest(0, "ok");
        one.drift = Some(v1::ManifestDrift {
            fields: (0..1000).map(|_| drifted("/a", &huge, 0)).collect(),
            omitted: 5,
        });
        let status = work_status(&report(vec![], vec![one]));
        let drift = status.resource_status.expect("manifests").manifests[0]
            .drift
            .clone()
            .expect("drift");
        assert_eq!(drift.fields.len(), MAX_DRIFT_FIELDS);
        assert_eq!(drift.omitted, 5 + 1000 - MAX_DRIFT_FIELDS as i64);
    }

    mod arbitrary_reports {
        use super::*;
        use proptest::prelude::*;

        fn text(max: usize) -> impl Strategy<Value = String> {
            prop_oneof![
                proptest::collection::vec(any::<char>(), 0..max).prop_map(String::from_iter),
                Just("Applied".to_string()),
                Just("True".to_string()),
                "[a-z]{1,4}(\\.[a-z]{1,4})?/[A-Za-z][A-Za-z0-9]{0,8}",
                ("[ -~]{0,40}", 0usize..3000).prop_map(|(s, n)| s.repeat(n % 60)),
            ]
        }

        fn condition() -> impl Strategy<Value = v1::Condition> {
            (
                text(64),
                text(12),
                text(64),
                text(2000),
                any::<i64>(),
                any::<i64>(),
            )
                .prop_map(
                    |(r#type, status, reason, message, observed_generation, time)| v1::Condition {
                        r#type,
                        status,
                        reason,
                        message,
                        observed_generation,
                        last_transition_unix_seconds: time,
                    },
                )
        }

        fn feedback() -> impl Strategy<Value = v1::FeedbackValue> {
            (
                text(300),
                text(10),
                any::<i64>(),
                text(2000),
                any::<bool>(),
                text(2000),
            )
                .prop_map(|(name, r#type, integer, string, boolean, json_raw)| {
                    v1::FeedbackValue {
                        name,
                        r#type,
                        integer,
                        string,
                        boolean,
                        json_raw,
                    }
                })
        }

        fn manifest() -> impl Strategy<Value = v1::ManifestStatus> {
            (
                proptest::option::of((any::<i32>(), text(300), text(300))),
                proptest::collection::vec(condition(), 0..5),
                proptest::collection::vec(feedback(), 0..4),
            )
                .prop_map(|(meta, conditions, feedback)| v1::ManifestStatus {
                    resource_meta: meta.map(|(ordinal, kind, name)| v1::ResourceMeta {
                        ordinal,
                        kind,
                        name,
                        ..Default::default()
                    }),
                    conditions,
                    feedback,
                    ..Default::default()
                })
        }

        fn report() -> impl Strategy<Value = v1::WorkStatus> {
            (
                any::<i64>(),
                proptest::collection::vec(condition(), 0..24),
                proptest::collection::vec(manifest(), 0..300),
                any::<bool>(),
            )
                .prop_map(|(generation, conditions, manifests, gone)| v1::WorkStatus {
                    work: None,
                    generation,
                    conditions,
                    manifests,
                    gone,
                    trace_context: Default::default(),
                })
        }

        fn is_reason(reason: &str) -> bool {
            !reason.is_empty()
                && reason.len() <= 1024
                && reason.starts_with(|c: char| c.is_ascii_alphabetic())
                && reason
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | ',' | ':'))
                && !reason.ends_with([',', ':'])
        }

        fn assert_valid(conditions: &[Condition], generation: i64) {
            assert!(conditions.len() <= MAX_CONDITIONS);
            let mut types = HashSet::new();
            for c in conditions {
                assert!(is_condition_type(&c.type_), "type {:?}", c.type_);
                assert!(types.insert(&c.type_), "duplicate type {:?}", c.type_);
                assert!(["True", "False", "Unknown"].contains(&c.status.as_str()));
                assert!(is_reason(&c.reason), "reason {:?}", c.reason);
                assert!(c.message.len() <= MAX_MESSAGE_BYTES);
                assert!((0..=generation.max(0)).contains(&c.observed_generation));
                assert!(
                    c.last_transition_time.parse::<Timestamp>().is_ok(),
                    "time {:?}",
                    c.last_transition_time
                );
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(64))]

            #[test]
            fn any_report_becomes_a_bounded_status_of_valid_shape(report in report()) {
                let (status, _) = bounded_work_status(&report, STATUS_BUDGET_BYTES);
                prop_assert!(size_of(&status) <= STATUS_BUDGET_BYTES);
                assert_valid(&status.conditions, report.generation);
                for m in status.resource_status.iter().flat_map(|r| &r.manifests) {
                    assert_valid(&m.conditions, report.generation);
                    for v in m.status_feedback.iter().flat_map(|f| &f.values) {
                        prop_assert!(v.name.len() <= MAX_NAME_BYTES);
                        let set = [
                            v.field_value.integer.is_some(),
                            v.field_value.string.is_some(),
                            v.field_value.boolean.is_some(),
                            v.field_value.json_raw.is_some(),
                        ];
                        prop_assert_eq!(set.iter().filter(|s| **s).count(), 1);
                        prop_assert!(["Integer", "String", "Boolean", "JsonRaw"]
                            .contains(&v.field_value.type_.as_str()));
                        for s in v.field_value.string.iter().chain(&v.field_value.json_raw) {
                            prop_assert!(s.len() <= MAX_FEEDBACK_BYTES);
                        }
                    }
                }
                // What the hub writes reads back as the same status.
                let json = serde_json::to_vec(&status).expect("serialises");
                let back: ManifestWorkStatus = serde_json::from_slice(&json).expect("reads back");
                prop_assert_eq!(back, status);
            }

            #[test]
            fn a_cut_message_fits_and_keeps_its_start(text in text(5000), max in 41usize..4096) {
                let cut = bounded_message(&text, max);
                prop_assert!(cut.len() <= max);
                if text.len() <= max {
                    prop_assert_eq!(cut, text);
                } else {
                    let kept = cut.rsplit_once('…').map_or("", |(kept, _)| kept);
                    prop_assert!(text.starts_with(kept));
                }
            }
        }
    }
}
