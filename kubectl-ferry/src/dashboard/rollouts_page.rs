//! The rollouts page: each replica set with its revisions and how many
//! clusters run each, its placements' gates in order (what holds the next
//! group), failing clusters and rollback, and the actions approve, pause and
//! resume, each a form the page's script confirms before posting.

use ferry_api::replica_set::{
    GateStatus, LocalPlacementReference, ManifestWorkReplicaSet, ManifestWorkReplicaSetStatus,
    RevisionRef, RevisionSummary, RolloutStatus,
};
use serde_json::Value;

use super::escape::escape;
use crate::rollout::placement_digest;
use crate::rollout_view::{current_revision, current_revision_digest};

/// The gate state in which a person's approval is what holds the group.
pub const AWAITING_APPROVAL: &str = "AwaitingApproval";
/// The gate state of a gate that no longer holds anything.
pub const PASSED: &str = "Passed";

/// The rollouts page's content for the replica sets as stored, with `token`
/// in every action form.
pub fn rollouts_body(replica_sets: &[Value], token: &str) -> String {
    let mut out = String::from("<h1>Rollouts</h1>");
    if replica_sets.is_empty() {
        out.push_str("<p>No ManifestWorkReplicaSets on the hub (or none you may list).</p>");
        return out;
    }
    let mut sorted: Vec<&Value> = replica_sets.iter().collect();
    let key = |v: &Value| {
        (
            v["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            v["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        )
    };
    sorted.sort_by_key(|v| key(v));
    for raw in sorted {
        let (namespace, name) = key(raw);
        out.push_str(&format!(
            r#"<section class="rollout" data-replica-set="{id}"><h2>{id}</h2>"#,
            id = escape(&format!("{namespace}/{name}"))
        ));
        match serde_json::from_value::<ManifestWorkReplicaSet>(raw.clone()) {
            Err(error) => out.push_str(&format!(
                r#"<p class="banner error" data-undecodable>This replica set does not decode: {}</p>"#,
                escape(&error.to_string())
            )),
            Ok(rs) => replica_set(&mut out, &namespace, &name, &rs, token),
        }
        out.push_str("</section>");
    }
    out
}

fn revision_text(revision: &RevisionRef) -> String {
    let short: String = revision.hash.chars().take(10).collect();
    format!("#{} ({short})", revision.number)
}

fn replica_set(
    out: &mut String,
    namespace: &str,
    name: &str,
    rs: &ManifestWorkReplicaSet,
    token: &str,
) {
    let status = rs.status.clone().unwrap_or_default();
    let rollout = status.rollout.clone().unwrap_or_default();
    out.push_str("<p class=\"state\">");
    if rs.spec.paused {
        out.push_str(r#"<span class="badge warn" data-paused>paused</span> "#);
    }
    match &rollout.revision {
        Some(revision) => out.push_str(&format!("Revision {}", escape(&revision_text(revision)))),
        None => {
            let short = current_revision(rs);
            out.push_str(&format!(
                "Revision {} (from the spec; not reported yet)",
                escape(&short)
            ));
        }
    }
    if let Some(stable) = &rollout.stable_revision {
        out.push_str(&format!(" · stable {}", escape(&revision_text(stable))));
    }
    let s = &status.summary;
    out.push_str(&format!(
        " · {} works: {} applied, {} available, {} degraded, {} progressing</p>",
        s.total, s.applied, s.available, s.degraded, s.progressing
    ));
    let (verb, label) = if rs.spec.paused {
        ("resume", "Resume")
    } else {
        ("pause", "Pause")
    };
    out.push_str(&action_form(
        verb,
        label,
        &format!("{label} the rollout of {namespace}/{name}?"),
        token,
        &[("namespace", namespace), ("name", name)],
    ));
    revisions_table(out, &rollout.revisions);
    for placement_ref in &rs.spec.placement_refs {
        placement_section(out, namespace, name, rs, placement_ref, &rollout, token);
    }
    holds_and_failures(out, &status, &rollout);
}

/// How many clusters run each revision.
fn revisions_table(out: &mut String, revisions: &[RevisionSummary]) {
    if !revisions.is_empty() {
        out.push_str("<table><caption>Clusters per revision</caption><thead><tr><th>Revision</th><th>Clusters</th><th>To apply</th><th>Progressing</th><th>Succeeded</th><th>Failed</th><th>Unreachable</th></tr></thead><tbody>");
        for r in revisions {
            let c = &r.clusters;
            out.push_str(&format!(
            "<tr data-revision=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            r.revision.number,
            escape(&revision_text(&r.revision)),
            c.total, c.to_apply, c.progressing, c.succeeded, c.failed, c.unreachable
        ));
        }
        out.push_str("</tbody></table>");
    }
}

/// One placement: its strategy, what holds it, its gates.
fn placement_section(
    out: &mut String,
    namespace: &str,
    name: &str,
    rs: &ManifestWorkReplicaSet,
    placement_ref: &LocalPlacementReference,
    rollout: &RolloutStatus,
    token: &str,
) {
    let placement = &placement_ref.name;
    let progress = rollout.placements.iter().find(|p| &p.name == placement);
    let strategy = if placement_ref.rollout_strategy.type_.is_empty() {
        "All"
    } else {
        placement_ref.rollout_strategy.type_.as_str()
    };
    out.push_str(&format!(
    r#"<div class="placement" data-placement="{p}"><h3>Placement {p} <small>({s})</small></h3>"#,
    p = escape(placement),
    s = escape(strategy)
));
    let gates = progress.map(|p| p.gates.as_slice()).unwrap_or_default();
    let revision = approvable_revision(rs, placement);
    out.push_str(&format!(
        "<p class=\"holds\">{}</p>",
        escape(&what_holds(rs.spec.paused, gates))
    ));
    if !gates.is_empty() {
        out.push_str(r#"<ol class="gates">"#);
        for gate in gates {
            gate_item(out, namespace, name, placement, gate, &revision, token);
        }
        out.push_str("</ol>");
    }
    if let Some(p) = progress.filter(|p| p.late_joiners > 0 || p.unreachable > 0) {
        out.push_str(&format!(
            "<p>{} late joiners, {} unreachable clusters.</p>",
            p.late_joiners, p.unreachable
        ));
    }
    out.push_str("</div>");
}

/// Failing clusters, held removals and a rollback, as banners.
fn holds_and_failures(
    out: &mut String,
    status: &ManifestWorkReplicaSetStatus,
    rollout: &RolloutStatus,
) {
    if !rollout.failing_clusters.is_empty() {
        out.push_str("<h3>Failing clusters</h3><ul>");
        for f in &rollout.failing_clusters {
            out.push_str(&format!(
                "<li>{} (revision #{}): {}</li>",
                escape(&f.cluster),
                f.revision,
                escape(&f.reason)
            ));
        }
        out.push_str("</ul>");
    }
    // What holds removals: the deletion budget (until the platform role
    // releases them) and placements holding their decisions.
    for (type_, what, attribute) in [
        ("DeletionsWaiting", "Deletions held", "data-deletions-held"),
        (
            "PlacementDecisionsHeld",
            "Placement decisions held",
            "data-decisions-held",
        ),
    ] {
        if let Some(c) = status
            .conditions
            .iter()
            .find(|c| c.type_ == type_ && c.status == "True")
        {
            out.push_str(&format!(
                "<p class=\"banner warn\" {attribute}>{what}: {}</p>",
                escape(&c.message)
            ));
        }
    }
    if let Some(rollback) = &rollout.rollback {
        out.push_str(&format!(
            "<p class=\"banner warn\">Rolled back from {} to {} ({} clusters): {}</p>",
            escape(&revision_text(&rollback.from)),
            escape(&revision_text(&rollback.to)),
            rollback.clusters,
            escape(&rollback.reason)
        ));
    }
}

/// The whole revision digest an approval of the gates of `placement` of
/// `rs` names: the one the hub reports for the placement's rollout, else
/// the digest of the spec's template and overrides when that is the
/// revision rolling out (as `kubectl ferry rollout approve` chooses); empty
/// when neither is known (nothing to approve yet).
pub fn approvable_revision(rs: &ManifestWorkReplicaSet, placement: &str) -> String {
    let progress = rs
        .status
        .as_ref()
        .and_then(|s| s.rollout.as_ref())
        .and_then(|r| r.placements.iter().find(|p| p.name == placement));
    let digest = current_revision_digest(rs);
    match progress {
        Some(p) => placement_digest(p, &current_revision(rs), &digest),
        None => digest,
    }
}

/// A sentence saying what holds the next group of a placement.
pub fn what_holds(paused: bool, gates: &[GateStatus]) -> String {
    if paused {
        return "Paused: no group starts until the rollout is resumed.".into();
    }
    match gates.iter().find(|g| g.state != PASSED) {
        None if gates.is_empty() => "No gates: groups follow the rollout strategy.".into(),
        None => "Every gate has passed.".into(),
        Some(gate) => {
            let mut text = format!(
                "The group after {} is held by its gate: {}",
                gate.after_group, gate.state
            );
            if !gate.message.is_empty() {
                text.push_str(&format!(" ({})", gate.message));
            }
            text
        }
    }
}

fn gate_item(
    out: &mut String,
    namespace: &str,
    name: &str,
    placement: &str,
    gate: &GateStatus,
    revision: &str,
    token: &str,
) {
    let state_class = match gate.state.as_str() {
        PASSED => "good",
        "Unhealthy" => "bad",
        AWAITING_APPROVAL => "warn",
        _ => "unknown",
    };
    out.push_str(&format!(
        r#"<li class="gate" data-gate="{g}" data-state="{s}">after group <strong>{g}</strong>: <span class="cond {state_class}">{s}</span>"#,
        g = escape(&gate.after_group),
        s = escape(&gate.state),
    ));
    if !gate.message.is_empty() {
        out.push_str(&format!(" — {}", escape(&gate.message)));
    }
    if !gate.approved_by.is_empty() {
        out.push_str(&format!(
            " — approved by {} {}",
            escape(&gate.approved_by),
            escape(&gate.approved_at)
        ));
    }
    if gate.state == AWAITING_APPROVAL && !revision.is_empty() {
        let short: String = revision.chars().take(10).collect();
        out.push_str(&action_form(
            "approve",
            "Approve",
            &format!(
                "Approve the gate after group {} of {namespace}/{name} (placement {placement}) for revision {short}?",
                gate.after_group,
            ),
            token,
            &[
                ("namespace", namespace),
                ("replicaSet", name),
                ("placement", placement),
                ("afterGroup", &gate.after_group),
                ("revision", revision),
            ],
        ));
    }
    out.push_str("</li>");
}

/// A form posting `fields` to `/actions/{verb}`, confirmed with `question`
/// by the page's script before it is sent.
fn action_form(
    verb: &str,
    label: &str,
    question: &str,
    token: &str,
    fields: &[(&str, &str)],
) -> String {
    let mut form = format!(
        r#"<form class="action" method="post" action="/actions/{verb}" data-confirm="{}"><input type="hidden" name="token" value="{}">"#,
        escape(question),
        escape(token)
    );
    for (key, value) in fields {
        form.push_str(&format!(
            r#"<input type="hidden" name="{key}" value="{}">"#,
            escape(value)
        ));
    }
    form.push_str(&format!(
        r#"<button type="submit" data-action="{verb}">{label}</button></form>"#
    ));
    form
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const DIGEST: &str = "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789";

    fn replica_set(paused: bool, gates: Value) -> Value {
        json!({
            "apiVersion": "work.ferry.dev/v1alpha1", "kind": "ManifestWorkReplicaSet",
            "metadata": {"name": "web", "namespace": "apps"},
            "spec": {"paused": paused, "manifestWorkTemplate": {"workload": {"manifests": []}},
                     "placementRefs": [{"name": "canary", "rolloutStrategy": {"type": "ProgressivePerGroup"}}]},
            "status": {"conditions": [], "summary": {"total": 3, "applied": 2, "available": 2,
                                                      "degraded": 0, "progressing": 1, "updated": 2},
                       "rollout": {
                           "revision": {"number": 2, "hash": "abcdef0123456789"},
                           "stableRevision": {"number": 1, "hash": "0011223344"},
                           "revisions": [{"revision": {"number": 2, "hash": "abcdef0123456789"},
                                          "clusters": {"total": 1, "toApply": 0, "progressing": 0, "succeeded": 1, "failed": 0, "unreachable": 0}},
                                         {"revision": {"number": 1, "hash": "0011223344"},
                                          "clusters": {"total": 2, "toApply": 0, "progressing": 0, "succeeded": 2, "failed": 0, "unreachable": 0}}],
                           "placements": [{"name": "canary", "revision": "abcdef0123", "revisionDigest": DIGEST, "gates": gates}]}}
        })
    }

    #[test]
    fn an_awaiting_gate_offers_a_confirmed_approval_of_the_current_revision() {
        let rs = replica_set(
            false,
            json!([{"afterGroup": "canary", "state": "Passed", "approvedBy": "alice",
                    "approvedAt": "2026-11-23T17:00:00Z"},
                   {"afterGroup": "<eu>", "state": "AwaitingApproval", "message": "waiting for a person"}]),
        );
        let html = rollouts_body(&[rs], "tok");
        assert!(html.contains("Revision #2 (abcdef0123)"), "{html}");
        assert!(html.contains("stable #1 (0011223344)"), "{html}");
        assert!(
            html.contains(r#"data-gate="&lt;eu&gt;" data-state="AwaitingApproval""#),
            "{html}"
        );
        assert!(html.contains("The group after &lt;eu&gt; is held by its gate: AwaitingApproval (waiting for a person)"), "{html}");
        assert!(
            html.contains(&format!(r#"name="revision" value="{DIGEST}""#)),
            "{html}"
        );
        assert!(
            html.contains(r#"name="afterGroup" value="&lt;eu&gt;""#),
            "{html}"
        );
        assert!(html.contains("approved by alice"), "{html}");
        assert_eq!(
            html.matches(r#"data-action="approve""#).count(),
            1,
            "{html}"
        );
        assert!(html.contains(r#"data-action="pause""#), "{html}");
        assert!(
            html.contains(r#"data-confirm="Approve the gate after group &lt;eu&gt; of apps/web"#),
            "{html}"
        );
    }

    #[test]
    fn without_a_reported_digest_the_approval_names_the_specs_when_it_is_rolling_out() {
        let mut rs = replica_set(
            false,
            json!([{"afterGroup": "canary", "state": "AwaitingApproval"}]),
        );
        rs["status"]["rollout"]
            .as_object_mut()
            .expect("rollout")
            .remove("revision");
        let placement = &mut rs["status"]["rollout"]["placements"][0];
        placement
            .as_object_mut()
            .expect("placement")
            .remove("revisionDigest");
        let typed: ManifestWorkReplicaSet = serde_json::from_value(rs.clone()).expect("typed");
        let (hash, digest) = (current_revision(&typed), current_revision_digest(&typed));
        rs["status"]["rollout"]["placements"][0]["revision"] = json!(hash);
        let html = rollouts_body(std::slice::from_ref(&rs), "tok");
        assert!(
            html.contains(&format!(r#"name="revision" value="{digest}""#)),
            "{html}"
        );
        assert!(html.contains("(from the spec; not reported yet)"), "{html}");
        // Another revision rolling out than the spec's: nothing to approve.
        rs["status"]["rollout"]["placements"][0]["revision"] = json!("0123456789");
        let html = rollouts_body(&[rs], "tok");
        assert!(!html.contains(r#"data-action="approve""#), "{html}");
    }

    #[test]
    fn a_paused_rollout_offers_resume_and_says_it_is_paused() {
        let html = rollouts_body(&[replica_set(true, json!([]))], "tok");
        assert!(html.contains("data-paused"), "{html}");
        assert!(html.contains(r#"data-action="resume""#), "{html}");
        assert!(html.contains("Paused: no group starts"), "{html}");
        assert!(!html.contains(r#"data-action="approve""#), "{html}");
    }

    #[test]
    fn held_deletions_and_decisions_show_as_banners() {
        let mut rs = replica_set(false, json!([]));
        rs["status"]["conditions"] = json!([
            {"type": "DeletionsWaiting", "status": "True", "reason": "DeletionBudgetExhausted",
             "message": "3 deletions held, first 3: <c2>, c3, c4", "lastTransitionTime": "2026-12-03T00:00:00Z"},
            {"type": "PlacementDecisionsHeld", "status": "True", "reason": "GrantLost",
             "message": "placement p holds its last decisions", "lastTransitionTime": "2026-12-03T00:00:00Z"},
        ]);
        let html = rollouts_body(&[rs], "tok");
        assert!(
            html.contains(
                "data-deletions-held>Deletions held: 3 deletions held, first 3: &lt;c2&gt;"
            ),
            "{html}"
        );
        assert!(
            html.contains("data-decisions-held>Placement decisions held: placement p"),
            "{html}"
        );
        let quiet = rollouts_body(&[replica_set(false, json!([]))], "tok");
        assert!(!quiet.contains("held:"), "{quiet}");
    }

    #[test]
    fn a_replica_set_that_does_not_decode_is_shown_as_such() {
        let odd =
            json!({"metadata": {"name": "odd", "namespace": "apps"}, "spec": {"paused": "maybe"}});
        let html = rollouts_body(&[odd], "tok");
        assert!(html.contains("This replica set does not decode"), "{html}");
    }
}
