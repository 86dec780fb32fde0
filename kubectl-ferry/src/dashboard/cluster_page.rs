//! The cluster page: the cluster's connection, its works with
//! Applied/Available/Degraded, every manifest's conditions, feedback values
//! and drift (with the manager that changed each field), and recent Events.

use ferry_api::manifest_work::{ManifestCondition, ManifestWork};
use ferry_semantics::contract::{APPLIED, AVAILABLE, DEGRADED};
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use super::escape::escape;
use crate::age::{age, age_of_text};
use crate::cluster_rows::cluster_records;
use crate::describe::{field_value_text, manifest_id};
use crate::events::EventLine;
use crate::work_rows::WorkEntry;
use crate::work_summary::{condition_cell, work_conditions};

/// Recent events of the cluster's namespace (oldest first, number dropped),
/// or why they could not be listed.
pub type EventsView = Result<(Vec<EventLine>, usize), String>;

/// The cluster page's content for the cluster `name` (`None` when the hub
/// has no such cluster), its `works` and the `events` of its namespace.
pub fn cluster_body(
    name: &str,
    cluster: Option<&Value>,
    works: &[WorkEntry],
    events: &EventsView,
    now: Timestamp,
) -> String {
    let mut out = format!(
        r#"<p><a href="/">← Fleet</a></p><h1>Cluster {}</h1>"#,
        escape(name)
    );
    match cluster {
        None => out.push_str(r#"<p class="banner warn">The hub has no ManagedCluster of this name (or you may not see it); its namespace's works are shown if any.</p>"#),
        Some(cluster) => {
            let record = cluster_records(std::slice::from_ref(cluster), works).remove(0);
            out.push_str("<dl class=\"facts\">");
            let connected = if record.connected { "yes" } else { "no" };
            fact(&mut out, "Connected", connected);
            if let Some(reason) = &record.disconnect_reason {
                fact(&mut out, "Why not", reason);
            }
            if let Some(error) = &record.status_error {
                fact(&mut out, "Status", &format!("unreadable: {error}"));
            }
            fact(&mut out, "Agent", &record.agent_version);
            fact(&mut out, "Last seen", &age_of_text(now, &record.last_seen_time));
            let labels = cluster["metadata"]["labels"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_default();
            fact(&mut out, "Labels", &labels);
            fact(
                &mut out,
                "Works",
                &format!("{} ({} failing)", record.works, record.failing_works),
            );
            out.push_str("</dl>");
        }
    }
    out.push_str("<h2>Works</h2>");
    if works.is_empty() {
        out.push_str("<p>No works in this cluster's namespace.</p>");
    }
    let mut sorted: Vec<&WorkEntry> = works.iter().collect();
    sorted.sort_by(|a, b| a.name().cmp(b.name()));
    for entry in sorted {
        work_section(&mut out, entry, now);
    }
    out.push_str("<h2>Recent events</h2>");
    match events {
        Err(error) => out.push_str(&format!(
            r#"<p class="banner error" role="alert">{}</p>"#,
            escape(error)
        )),
        Ok((lines, _)) if lines.is_empty() => out.push_str("<p>No events.</p>"),
        Ok((lines, dropped)) => {
            out.push_str("<table><thead><tr><th>Type</th><th>Reason</th><th>Age</th><th>From</th><th>Message</th></tr></thead><tbody>");
            for line in lines.iter().rev() {
                let mut when = line
                    .last_seen
                    .map(|t| age(now, t))
                    .unwrap_or_else(|| "?".into());
                if line.count > 1 {
                    when.push_str(&format!(" (×{})", line.count));
                }
                out.push_str(&format!(
                    "<tr class=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                    if line.type_ == "Warning" { "warn" } else { "" },
                    escape(&line.type_),
                    escape(&line.reason),
                    escape(&when),
                    escape(&line.from),
                    escape(&line.message)
                ));
            }
            out.push_str("</tbody></table>");
            if *dropped > 0 {
                out.push_str(&format!("<p>{dropped} older events not shown.</p>"));
            }
        }
    }
    out
}

fn fact(out: &mut String, label: &str, value: &str) {
    let value = if value.is_empty() { "-" } else { value };
    out.push_str(&format!(
        "<dt>{}</dt><dd>{}</dd>",
        escape(label),
        escape(value)
    ));
}

/// One work: its conditions and its manifests, or, when it does not decode,
/// that fact, the decoding error and the stored JSON.
fn work_section(out: &mut String, entry: &WorkEntry, now: Timestamp) {
    out.push_str(&format!(
        r#"<section class="work" data-work="{n}"><h3>{n}</h3>"#,
        n = escape(entry.name())
    ));
    match &entry.typed {
        Err(error) => {
            out.push_str(&format!(
                concat!(
                    "<p class=\"banner error\" data-undecodable>This work does not decode: {}</p>",
                    "<details><summary>Stored JSON</summary><pre>{}</pre></details>"
                ),
                escape(error),
                escape(&serde_json::to_string_pretty(&entry.raw).unwrap_or_default())
            ));
        }
        Ok(work) => typed_work(out, work, now),
    }
    out.push_str("</section>");
}

fn typed_work(out: &mut String, work: &ManifestWork, now: Timestamp) {
    let conditions = work_conditions(work);
    let generation = work.metadata.generation;
    out.push_str("<p class=\"conditions\">");
    for type_ in [APPLIED, AVAILABLE, DEGRADED] {
        let cell = condition_cell(conditions, type_, generation);
        let class = match (type_, cell.split(' ').next().unwrap_or_default()) {
            (DEGRADED, "True") => "bad",
            (DEGRADED, "False") => "good",
            (_, "False") => "bad",
            (_, "True") => "good",
            _ => "unknown",
        };
        out.push_str(&format!(
            r#"<span class="cond {class}" data-condition="{t}">{t}: {c}</span> "#,
            t = escape(type_),
            c = escape(&cell)
        ));
    }
    out.push_str("</p>");
    let statuses: &[ManifestCondition] = work
        .status
        .as_ref()
        .and_then(|s| s.resource_status.as_ref())
        .map(|r| r.manifests.as_slice())
        .unwrap_or_default();
    out.push_str("<table><thead><tr><th>#</th><th>Manifest</th><th>Conditions</th><th>Feedback</th><th>Drift (manager)</th></tr></thead><tbody>");
    let count = work.spec.workload.manifests.len().max(
        statuses
            .iter()
            .map(|s| usize::try_from(s.resource_meta.ordinal).unwrap_or(0) + 1)
            .max()
            .unwrap_or(0),
    );
    for ordinal in 0..count {
        let manifest = work.spec.workload.manifests.get(ordinal).map(|m| &m.0);
        let status = statuses
            .iter()
            .find(|s| usize::try_from(s.resource_meta.ordinal).ok() == Some(ordinal));
        let id = manifest_id(
            manifest.unwrap_or(&Value::Null),
            status.map(|s| &s.resource_meta),
        );
        out.push_str(&format!(
            "<tr><td>{ordinal}</td><td>{}</td><td>",
            escape(&id)
        ));
        for c in status.map(|s| s.conditions.as_slice()).unwrap_or_default() {
            let class = if c.status == "False" { "bad" } else { "" };
            out.push_str(&format!(
                r#"<div class="{class}">{}={} {}{}</div>"#,
                escape(&c.type_),
                escape(&c.status),
                escape(&c.reason),
                if c.message.is_empty() {
                    String::new()
                } else {
                    format!(": {}", escape(&c.message))
                }
            ));
        }
        out.push_str("</td><td>");
        for value in status
            .and_then(|s| s.status_feedback.as_ref())
            .map(|f| f.values.as_slice())
            .unwrap_or_default()
        {
            out.push_str(&format!(
                "<div>{} = {}</div>",
                escape(&value.name),
                escape(&field_value_text(&value.field_value))
            ));
        }
        out.push_str("</td><td>");
        if let Some(drift) = status.and_then(|s| s.drift.as_ref()) {
            for field in &drift.fields {
                let corrected = field
                    .corrected_time
                    .as_deref()
                    .map(|t| format!(", corrected {} ago", age_of_text(now, t)))
                    .unwrap_or_default();
                out.push_str(&format!(
                    r#"<div class="drift" data-drift="{p}">{p}: hub {h}, spoke {s} by <strong>{m}</strong> ({seen} ago{corrected})</div>"#,
                    p = escape(&field.pointer),
                    h = escape(&field.hub_value),
                    s = escape(field.spoke_value.as_deref().unwrap_or("<absent>")),
                    m = escape(field.manager.as_deref().unwrap_or("<unknown>")),
                    seen = escape(&age_of_text(now, &field.first_seen_time)),
                    corrected = escape(&corrected),
                ));
            }
            if drift.omitted > 0 {
                out.push_str(&format!("<div>… and {} more fields</div>", drift.omitted));
            }
        }
        out.push_str("</td></tr>");
    }
    out.push_str("</tbody></table>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn now() -> Timestamp {
        "2026-11-23T18:00:00Z".parse().expect("now")
    }

    #[test]
    fn manifests_show_reasons_feedback_and_drift_with_its_manager_escaped() {
        let work = WorkEntry::from_raw(json!({
            "apiVersion": "work.ferry.dev/v1alpha1", "kind": "ManifestWork",
            "metadata": {"name": "web", "namespace": "c", "generation": 1},
            "spec": {"workload": {"manifests": [
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "d"}}]}},
            "status": {
                "conditions": [{"type": "Applied", "status": "False", "reason": "Failed", "message": "",
                                "observedGeneration": 1, "lastTransitionTime": "2026-11-23T17:00:00Z"}],
                "resourceStatus": {"manifests": [{
                    "resourceMeta": {"ordinal": 0, "group": "", "version": "v1", "kind": "ConfigMap",
                                     "resource": "configmaps", "name": "x", "namespace": "d"},
                    "conditions": [{"type": "Applied", "status": "False", "reason": "Conflict",
                                    "message": "<owned by someone>", "observedGeneration": 1,
                                    "lastTransitionTime": "2026-11-23T17:00:00Z"}],
                    "statusFeedback": {"values": [{"name": "color",
                                                    "fieldValue": {"type": "String", "string": "blue"}}]},
                    "drift": {"fields": [{"pointer": "/data/a", "hubValue": "1", "spokeValue": "2",
                                          "manager": "kubectl-edit",
                                          "firstSeenTime": "2026-11-23T17:59:00Z"}]}
                }]}}
        }));
        assert!(work.typed.is_ok(), "{:?}", work.typed);
        let html = cluster_body("c", None, &[work], &Ok((Vec::new(), 0)), now());
        assert!(
            html.contains(r#"data-condition="Applied">Applied: False<"#),
            "{html}"
        );
        assert!(
            html.contains("Applied=False Conflict: &lt;owned by someone&gt;"),
            "{html}"
        );
        assert!(
            html.contains("by <strong>kubectl-edit</strong> (60s ago)"),
            "{html}"
        );
        assert!(html.contains("<div>color = blue</div>"), "{html}");
        assert!(html.contains("No events."), "{html}");
    }

    #[test]
    fn a_work_that_does_not_decode_is_shown_as_such() {
        let odd = WorkEntry::from_raw(json!({
            "metadata": {"name": "odd", "namespace": "c"},
            "spec": {"workload": {"manifests": "<not a list>"}}
        }));
        let html = cluster_body(
            "c",
            None,
            &[odd],
            &Err("forbidden: you may not list events".into()),
            now(),
        );
        assert!(html.contains("This work does not decode: "), "{html}");
        assert!(html.contains("&lt;not a list&gt;"), "{html}");
        assert!(
            html.contains("forbidden: you may not list events"),
            "{html}"
        );
    }
}
