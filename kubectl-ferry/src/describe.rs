//! `describe work`: everything about one work in kubectl's describe layout:
//! its conditions, each manifest with its conditions, feedback values and
//! drift (when it has any), and the recent events.

use ferry_api::manifest_work::{
    Condition, FieldValue, ManifestCondition, ManifestResourceMeta, ManifestWork,
};
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use crate::age::{age, age_of_text};
use crate::drift_table::drift_table;
use crate::events::{EventLine, events_table};
use crate::table::{indent, render};
use crate::work_rows::WorkEntry;

/// The events of a work as far as they could be listed: the lines and how
/// many older ones were left out, or why listing failed (e.g. no right to
/// list events), which then shows in place of the table.
pub type EventsView = Result<(Vec<EventLine>, usize), String>;

/// The describe text of `entry` with its events at `now`.
pub fn describe_work(entry: &WorkEntry, events: &EventsView, now: Timestamp) -> String {
    let mut out = String::new();
    field(&mut out, "Name", entry.name());
    field(&mut out, "Namespace", entry.namespace());
    match &entry.typed {
        Ok(work) => describe_typed(&mut out, work, now),
        Err(error) => field(
            &mut out,
            "Unreadable",
            &format!(
                "this kubectl-ferry cannot read the work ({error}); -o yaml prints it as stored"
            ),
        ),
    }
    out.push_str("Events:\n");
    let events = match events {
        Ok((lines, dropped)) => events_table(lines, *dropped, now),
        Err(error) => format!("<cannot list events: {error}>"),
    };
    out.push_str(&indent(&events, 2));
    out.push('\n');
    out
}

fn describe_typed(out: &mut String, work: &ManifestWork, now: Timestamp) {
    let meta = &work.metadata;
    if let Some(created) = &meta.creation_timestamp {
        field(
            out,
            "Created",
            &format!("{} ({} ago)", created.0, age(now, created.0)),
        );
    }
    if let Some(generation) = meta.generation {
        field(out, "Generation", &generation.to_string());
    }
    if let Some(deleting) = &meta.deletion_timestamp {
        field(
            out,
            "Deleting",
            &format!("since {} ({} ago)", deleting.0, age(now, deleting.0)),
        );
    }
    let status = work.status.as_ref();
    out.push_str("Conditions:\n");
    let conditions = status.map(|s| s.conditions.as_slice()).unwrap_or_default();
    out.push_str(&indent(&conditions_table(conditions, now), 2));
    out.push('\n');
    let reported = status
        .and_then(|s| s.resource_status.as_ref())
        .map(|r| r.manifests.as_slice())
        .unwrap_or_default();
    let manifests = &work.spec.workload.manifests;
    out.push_str(&format!("Manifests ({}):\n", manifests.len()));
    for (ordinal, manifest) in manifests.iter().enumerate() {
        let status = reported
            .iter()
            .find(|m| usize::try_from(m.resource_meta.ordinal).ok() == Some(ordinal));
        let id = manifest_id(&manifest.0, status.map(|s| &s.resource_meta));
        out.push_str(&indent(&describe_manifest(ordinal, &id, status, now), 2));
        out.push('\n');
    }
    // Status of manifests no longer in the spec: the agent has not reported
    // the current generation yet.
    for extra in reported
        .iter()
        .filter(|m| usize::try_from(m.resource_meta.ordinal).map_or(true, |o| o >= manifests.len()))
    {
        let id = format!(
            "{} (not in the spec any more)",
            meta_id(&extra.resource_meta)
        );
        let ordinal = usize::try_from(extra.resource_meta.ordinal).unwrap_or_default();
        out.push_str(&indent(
            &describe_manifest(ordinal, &id, Some(extra), now),
            2,
        ));
        out.push('\n');
    }
}

fn describe_manifest(
    ordinal: usize,
    id: &str,
    status: Option<&ManifestCondition>,
    now: Timestamp,
) -> String {
    let mut out = format!("[{ordinal}] {id}\n");
    let Some(status) = status else {
        out.push_str("  Status: not reported yet");
        return out;
    };
    out.push_str("  Conditions:\n");
    out.push_str(&indent(&conditions_table(&status.conditions, now), 4));
    out.push('\n');
    out.push_str("  Feedback:\n");
    let values = status
        .status_feedback
        .as_ref()
        .map(|f| f.values.as_slice())
        .unwrap_or_default();
    let feedback = if values.is_empty() {
        "<none>".to_string()
    } else {
        render(
            &["name", "value"],
            values
                .iter()
                .map(|v| vec![v.name.clone(), field_value_text(&v.field_value)])
                .collect(),
        )
    };
    out.push_str(&indent(&feedback, 4));
    // Only works that drifted get the section: most never do.
    if status.drift.is_some() {
        out.push_str("\n  Drift:\n");
        out.push_str(&indent(&drift_table(status.drift.as_ref(), now), 4));
    }
    out
}

/// `apiVersion Kind namespace/name` of a manifest as written, with the
/// resource the agent resolved it to when it reported one.
pub fn manifest_id(manifest: &Value, meta: Option<&ManifestResourceMeta>) -> String {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let api_version = text(&manifest["apiVersion"]);
    let kind = text(&manifest["kind"]);
    let name = text(&manifest["metadata"]["name"]);
    let namespace = text(&manifest["metadata"]["namespace"]);
    let object = if namespace.is_empty() {
        name
    } else {
        format!("{namespace}/{name}")
    };
    let mut id = format!("{api_version} {kind} {object}");
    if let Some(resource) = meta.map(|m| m.resource.as_str()).filter(|r| !r.is_empty()) {
        id.push_str(&format!(" ({resource})"));
    }
    id
}

/// The identity the agent reported, for a status entry without a manifest.
fn meta_id(meta: &ManifestResourceMeta) -> String {
    let api_version = if meta.group.is_empty() {
        meta.version.clone()
    } else {
        format!("{}/{}", meta.group, meta.version)
    };
    let object = if meta.namespace.is_empty() {
        meta.name.clone()
    } else {
        format!("{}/{}", meta.namespace, meta.name)
    };
    format!("{api_version} {} {object}", meta.kind)
}

/// A feedback value as text: the set member of its type; JSON as written.
pub fn field_value_text(value: &FieldValue) -> String {
    if let Some(i) = value.integer {
        return i.to_string();
    }
    if let Some(b) = value.boolean {
        return b.to_string();
    }
    if let Some(s) = &value.string {
        return s.clone();
    }
    if let Some(raw) = &value.json_raw {
        return raw.clone();
    }
    format!("<empty {}>", value.type_)
}

fn conditions_table(conditions: &[Condition], now: Timestamp) -> String {
    if conditions.is_empty() {
        return "<none>".into();
    }
    render(
        &["type", "status", "reason", "age", "message"],
        conditions
            .iter()
            .map(|c| {
                vec![
                    c.type_.clone(),
                    c.status.clone(),
                    c.reason.clone(),
                    age_of_text(now, &c.last_transition_time),
                    c.message.clone(),
                ]
            })
            .collect(),
    )
}

fn field(out: &mut String, label: &str, value: &str) {
    out.push_str(&format!("{:<12}{value}\n", format!("{label}:")));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::event_line;
    use crate::work_summary::tests::{condition, manifest, work_with};
    use ferry_api::manifest_work::{FeedbackValue, Manifest, StatusFeedbackResult};
    use ferry_semantics::contract::APPLIED;
    use k8s_openapi::api::core::v1::Event;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use serde_json::json;

    fn now() -> Timestamp {
        "2026-11-23T18:00:00Z".parse().expect("now")
    }

    fn entry(work: &ManifestWork) -> WorkEntry {
        WorkEntry::from_raw(serde_json::to_value(work).expect("serialise"))
    }

    fn sample() -> ManifestWork {
        let mut ok = manifest(0, vec![condition(APPLIED, "True", "Applied", 1)]);
        ok.status_feedback = Some(StatusFeedbackResult {
            values: vec![
                FeedbackValue {
                    name: "replicas".into(),
                    field_value: FieldValue {
                        type_: "Integer".into(),
                        integer: Some(3),
                        ..Default::default()
                    },
                },
                FeedbackValue {
                    name: "phase".into(),
                    field_value: FieldValue {
                        type_: "String".into(),
                        string: Some("Running".into()),
                        ..Default::default()
                    },
                },
            ],
        });
        let mut bad = manifest(1, vec![condition(APPLIED, "False", "UnknownKind", 1)]);
        bad.conditions[0].message = "no kind Gadget in gadgets.example.com/v1".into();
        let mut work = work_with(
            vec![condition(APPLIED, "False", "AppliedManifestWorkFailed", 1)],
            vec![ok, bad],
        );
        work.metadata.creation_timestamp = Some(Time("2026-11-23T17:00:00Z".parse().expect("t")));
        work.spec.workload.manifests = vec![
            Manifest(json!({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "cm-0", "namespace": "default"}})),
            Manifest(
                json!({"apiVersion": "gadgets.example.com/v1", "kind": "Gadget",
                            "metadata": {"name": "g"}}),
            ),
            Manifest(json!({"apiVersion": "v1", "kind": "Secret",
                            "metadata": {"name": "s", "namespace": "default"}})),
        ];
        work
    }

    #[test]
    fn every_manifest_shows_its_conditions_and_feedback() {
        let event = Event {
            type_: Some("Warning".into()),
            reason: Some("ApplyFailed".into()),
            message: Some("Gadget g: UnknownKind".into()),
            last_timestamp: Some(Time("2026-11-23T17:59:00Z".parse().expect("t"))),
            ..Default::default()
        };
        let text = describe_work(&entry(&sample()), &Ok((vec![event_line(&event)], 0)), now());
        for expected in [
            "Name:       web",
            "Namespace:  cluster-a",
            "Created:    2026-11-23T17:00:00Z (60m ago)",
            "Generation: 1",
            "AppliedManifestWorkFailed",
            "[0] v1 ConfigMap default/cm-0 (configmaps)",
            "replicas   3",
            "phase      Running",
            "[1] gadgets.example.com/v1 Gadget g (configmaps)",
            "UnknownKind",
            "no kind Gadget in gadgets.example.com/v1",
            "[2] v1 Secret default/s\n    Status: not reported yet",
            "ApplyFailed",
            "Gadget g: UnknownKind",
        ] {
            assert!(text.contains(expected), "missing {expected:?} in\n{text}");
        }
    }

    #[test]
    fn status_of_a_manifest_no_longer_in_the_spec_is_still_shown() {
        let mut work = sample();
        work.spec.workload.manifests.truncate(1);
        let text = describe_work(&entry(&work), &Ok((Vec::new(), 0)), now());
        assert!(
            text.contains("[1] v1 ConfigMap default/cm-1 (not in the spec any more)"),
            "{text}"
        );
        assert!(text.ends_with("Events:\n  <none>\n"), "{text}");
    }

    #[test]
    fn a_drifted_manifest_shows_its_drift_and_others_do_not() {
        let mut work = sample();
        if let Some(m) = work
            .status
            .as_mut()
            .and_then(|s| s.resource_status.as_mut())
            .map(|r| &mut r.manifests[0])
        {
            m.drift = Some(ferry_api::manifest_work::ManifestDrift {
                fields: vec![ferry_api::manifest_work::DriftedField {
                    pointer: "/data/a".into(),
                    hub_value: "\"hub\"".into(),
                    spoke_value: Some("\"edited\"".into()),
                    manager: Some("kubectl-edit".into()),
                    first_seen_time: "2026-11-23T17:59:00Z".into(),
                    corrected_time: None,
                }],
                omitted: 0,
            });
        }
        let text = describe_work(&entry(&work), &Ok((Vec::new(), 0)), now());
        assert_eq!(text.matches("Drift:").count(), 1, "{text}");
        assert!(text.contains("/data/a"), "{text}");
        assert!(text.contains("kubectl-edit"), "{text}");
    }

    #[test]
    fn feedback_values_print_their_set_member() {
        let value = |v: Value| serde_json::from_value::<FieldValue>(v).expect("value");
        assert_eq!(
            field_value_text(&value(json!({"type": "Boolean", "boolean": false}))),
            "false"
        );
        assert_eq!(
            field_value_text(&value(json!({"type": "JsonRaw", "jsonRaw": "{\"a\":1}"}))),
            "{\"a\":1}"
        );
        assert_eq!(
            field_value_text(&value(json!({"type": "Integer"}))),
            "<empty Integer>"
        );
    }

    #[test]
    fn an_unreadable_work_is_still_described() {
        let odd = WorkEntry::from_raw(json!({"metadata": {"name": "odd", "namespace": "c"},
                                            "spec": {"workload": 7}}));
        let text = describe_work(&odd, &Err("events is forbidden".into()), now());
        assert!(
            text.contains("Unreadable: this kubectl-ferry cannot read the work"),
            "{text}"
        );
        assert!(
            text.contains("<cannot list events: events is forbidden>"),
            "{text}"
        );
    }
}
