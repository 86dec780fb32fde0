//! `kubectl ferry rollout status`: a replica set's rollout as people read
//! it. Per placement, its decision groups (waves) in order with how many of
//! their clusters hold the current revision and how they fare, which group
//! is moving, what each gate waits for, which clusters wait for their
//! maintenance window and until when, and the churn (late joiners,
//! unreachable clusters). Pure: objects in, text out.

use std::collections::BTreeMap;

use ferry_api::contract::REVISION_ANNOTATION;
use ferry_api::manifest_work::ManifestWork;
use ferry_api::replica_set::{
    GateStatus, LocalPlacementReference, ManifestWorkReplicaSet, ManifestWorkReplicaSetStatus,
    PlacementRollout,
};
use ferry_fleet_semantics::revision::{revision_digest, revision_hash};
use ferry_semantics::contract::WAITING_FOR_MAINTENANCE_WINDOW;
use kube::{Resource, ResourceExt};

use crate::table::{indent, render};

/// The revision hash of what `rs` rolls out now (as the hub computes it).
pub fn current_revision(rs: &ManifestWorkReplicaSet) -> String {
    let (template, overrides) = revision_content(rs);
    revision_hash(&template, &overrides)
}

/// The whole revision digest of what `rs` asks for now (as the hub
/// computes it): what an approval names.
pub fn current_revision_digest(rs: &ManifestWorkReplicaSet) -> String {
    let (template, overrides) = revision_content(rs);
    revision_digest(&template, &overrides)
}

fn revision_content(rs: &ManifestWorkReplicaSet) -> (serde_json::Value, serde_json::Value) {
    let template =
        serde_json::to_value(&rs.spec.manifest_work_template).unwrap_or(serde_json::Value::Null);
    let overrides = serde_json::to_value(&rs.spec.overrides)
        .unwrap_or_else(|_| serde_json::Value::Array(Vec::new()));
    (template, overrides)
}

/// One decision group of a placement: its index, name and clusters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Wave {
    /// The decision group index.
    pub index: usize,
    /// The decision group name (may be empty).
    pub name: String,
    /// Its clusters.
    pub clusters: Vec<String>,
}

/// Counts of one wave's clusters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct WaveCounts {
    updated: usize,
    applied: usize,
    available: usize,
    degraded: usize,
}

fn condition_true(work: &ManifestWork, type_: &str) -> bool {
    work.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == type_ && c.status == "True")
    })
}

fn counts(
    wave: &Wave,
    works: &BTreeMap<String, ManifestWork>,
    revision: &str,
    template: &ferry_api::manifest_work::ManifestWorkSpec,
) -> WaveCounts {
    let mut c = WaveCounts::default();
    for work in wave.clusters.iter().filter_map(|name| works.get(name)) {
        // A work holds the revision by its annotation; a work written before
        // works carried one, by its spec.
        let annotated = work.annotations().get(REVISION_ANNOTATION);
        if annotated.map_or(&work.spec == template, |r| r == revision) {
            c.updated += 1;
        }
        let generation = work.meta().generation.unwrap_or(0);
        if work.status.as_ref().is_some_and(|s| {
            s.conditions.iter().any(|c| {
                c.type_ == "Applied" && c.status == "True" && c.observed_generation == generation
            })
        }) {
            c.applied += 1;
        }
        if condition_true(work, "Available") {
            c.available += 1;
        }
        if condition_true(work, "Degraded") {
            c.degraded += 1;
        }
    }
    c
}

/// The first gate not passed whose group comes before `index`, if any.
fn holding_gate<'a>(
    index: usize,
    gates: &'a [GateStatus],
    waves: &[Wave],
) -> Option<&'a GateStatus> {
    gates
        .iter()
        .filter(|g| g.state != "Passed")
        .filter_map(|g| {
            let at = waves.iter().find(|w| w.name == g.after_group)?.index;
            (at < index).then_some((at, g))
        })
        .min_by_key(|(at, _)| *at)
        .map(|(_, g)| g)
}

/// Renders the rollout of `rs`: its `waves` per placement, the generated
/// `works` by cluster.
pub fn rollout_status(
    rs: &ManifestWorkReplicaSet,
    waves: &BTreeMap<String, Vec<Wave>>,
    works: &BTreeMap<String, ManifestWork>,
) -> String {
    let revision = current_revision(rs);
    let status = rs.status.clone().unwrap_or_default();
    let mut out = header(rs, &status, &revision);
    let rollouts: Vec<PlacementRollout> = status.rollout.map(|r| r.placements).unwrap_or_default();
    for reference in &rs.spec.placement_refs {
        let placement = rollouts
            .iter()
            .find(|p| p.name == reference.name)
            .cloned()
            .unwrap_or_default();
        let placement_waves = waves.get(&reference.name).cloned().unwrap_or_default();
        out.push_str(&placement_section(
            rs,
            reference,
            &placement,
            &placement_waves,
            works,
            &revision,
        ));
    }
    out
}

/// The replica set's line, its rollout condition, and what holds it.
fn header(
    rs: &ManifestWorkReplicaSet,
    status: &ManifestWorkReplicaSetStatus,
    revision: &str,
) -> String {
    let mut out = format!(
        "ManifestWorkReplicaSet {}/{}   revision {revision}{}\n",
        rs.namespace().unwrap_or_default(),
        rs.name_any(),
        if rs.spec.paused { "   PAUSED" } else { "" }
    );
    if let Some(c) = status
        .conditions
        .iter()
        .find(|c| c.type_ == "PlacementRolledOut")
    {
        out.push_str(&format!(
            "PlacementRolledOut: {} ({}): {}\n",
            c.status, c.reason, c.message
        ));
    }
    // What holds removals: the deletion budget (until the platform role
    // releases them) and placements holding their decisions (lost grant).
    for (type_, what) in [
        ("DeletionsWaiting", "Deletions held"),
        ("PlacementDecisionsHeld", "Placement decisions held"),
    ] {
        if let Some(c) = status
            .conditions
            .iter()
            .find(|c| c.type_ == type_ && c.status == "True")
        {
            out.push_str(&format!("{what}: {}\n", c.message));
        }
    }
    // Which clusters wait for their maintenance window, and until when:
    // the hub's condition names how many and the first few, soonest first.
    if let Some(c) = status
        .conditions
        .iter()
        .find(|c| c.type_ == WAITING_FOR_MAINTENANCE_WINDOW && c.status == "True")
    {
        out.push_str(&format!("Waiting for maintenance windows: {}\n", c.message));
    }
    out
}

/// One placement: its line, its waves and its gates.
fn placement_section(
    rs: &ManifestWorkReplicaSet,
    reference: &LocalPlacementReference,
    placement: &PlacementRollout,
    placement_waves: &[Wave],
    works: &BTreeMap<String, ManifestWork>,
    revision: &str,
) -> String {
    let strategy = if reference.rollout_strategy.type_.is_empty() {
        "All"
    } else {
        reference.rollout_strategy.type_.as_str()
    };
    let mut out = format!("\nPlacement {} ({strategy})", reference.name);
    if !placement.started_at.is_empty() {
        out.push_str(&format!(", started {}", placement.started_at));
    }
    out.push_str(&format!(
        ", late joiners {}, unreachable {}\n",
        placement.late_joiners, placement.unreachable
    ));
    if placement_waves.is_empty() {
        out.push_str("  no cluster chosen\n");
    }
    let rows = wave_rows(rs, placement, placement_waves, works, revision);
    if !rows.is_empty() {
        out.push_str(&indent(
            &render(
                &[
                    "group",
                    "name",
                    "clusters",
                    "updated",
                    "applied",
                    "available",
                    "degraded",
                    "state",
                ],
                rows,
            ),
            2,
        ));
        out.push('\n');
    }
    if !placement.gates.is_empty() {
        out.push_str(&indent(
            &render(
                &["gate after", "state", "opened", "approved by", "message"],
                gate_rows(&placement.gates),
            ),
            2,
        ));
        out.push('\n');
    }
    out
}

/// A row per wave: its clusters, how many hold the revision, and whether
/// it is rolled out, moving, waiting or held.
fn wave_rows(
    rs: &ManifestWorkReplicaSet,
    placement: &PlacementRollout,
    placement_waves: &[Wave],
    works: &BTreeMap<String, ManifestWork>,
    revision: &str,
) -> Vec<Vec<String>> {
    let mut moving_shown = false;
    placement_waves
        .iter()
        .map(|wave| {
            let c = counts(wave, works, revision, &rs.spec.manifest_work_template);
            let total = wave.clusters.len();
            let state = if c.updated == total {
                "rolled out".to_string()
            } else if let Some(gate) = holding_gate(wave.index, &placement.gates, placement_waves) {
                format!("held by gate after {} ({})", gate.after_group, gate.state)
            } else if rs.spec.paused {
                "paused".to_string()
            } else if !moving_shown {
                moving_shown = true;
                "moving".to_string()
            } else {
                "waiting".to_string()
            };
            vec![
                wave.index.to_string(),
                if wave.name.is_empty() {
                    "-".to_string()
                } else {
                    wave.name.clone()
                },
                total.to_string(),
                c.updated.to_string(),
                c.applied.to_string(),
                c.available.to_string(),
                c.degraded.to_string(),
                state,
            ]
        })
        .collect()
}

/// A row per gate: its state, when it opened, who approved it.
fn gate_rows(gates: &[GateStatus]) -> Vec<Vec<String>> {
    gates
        .iter()
        .map(|g| {
            let who = if g.approved_by.is_empty() {
                "-".to_string()
            } else {
                format!("{} at {}", g.approved_by, g.approved_at)
            };
            vec![
                g.after_group.clone(),
                g.state.clone(),
                if g.opened_at.is_empty() {
                    "-".to_string()
                } else {
                    g.opened_at.clone()
                },
                who,
                g.message.clone(),
            ]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rs() -> ManifestWorkReplicaSet {
        serde_json::from_value(json!({
            "apiVersion": "work.ferry.dev/v1alpha1",
            "kind": "ManifestWorkReplicaSet",
            "metadata": {"name": "app", "namespace": "ns"},
            "spec": {"manifestWorkTemplate": {}, "placementRefs": [{"name": "p", "rolloutStrategy": {
                "type": "ProgressivePerGroup",
                "progressivePerGroup": {"gates": [{"afterGroup": "canary", "approval": true}]}}}]},
            "status": {"rollout": {"placements": [{"name": "p", "startedAt": "2026-11-27T04:00:00Z",
                "lateJoiners": 1, "unreachable": 0,
                "gates": [{"afterGroup": "canary", "state": "AwaitingApproval",
                    "openedAt": "2026-11-27T04:01:00Z", "message": "awaiting approval"}]}]}},
        }))
        .expect("replica set")
    }

    fn work(cluster: &str, revision: &str, available: bool) -> (String, ManifestWork) {
        let mut work: ManifestWork = serde_json::from_value(json!({
            "apiVersion": "work.ferry.dev/v1", "kind": "ManifestWork",
            "metadata": {"name": "app", "namespace": cluster, "generation": 1,
                "annotations": {REVISION_ANNOTATION: revision}},
            "spec": {},
        }))
        .expect("work");
        if available {
            work.status = serde_json::from_value(json!({"conditions": [
                {"type": "Applied", "status": "True", "reason": "x", "observedGeneration": 1, "lastTransitionTime": "2026-11-27T04:00:00Z"},
                {"type": "Available", "status": "True", "reason": "x", "observedGeneration": 1, "lastTransitionTime": "2026-11-27T04:00:00Z"}]}))
            .expect("status");
        }
        (cluster.to_string(), work)
    }

    #[test]
    fn status_shows_each_wave_and_what_holds_the_next() {
        let rs = rs();
        let revision = current_revision(&rs);
        let waves = BTreeMap::from([(
            "p".to_string(),
            vec![
                Wave {
                    index: 0,
                    name: "canary".into(),
                    clusters: vec!["a".into()],
                },
                Wave {
                    index: 1,
                    name: "rest".into(),
                    clusters: vec!["b".into(), "c".into()],
                },
            ],
        )]);
        let works = BTreeMap::from([work("a", &revision, true), work("b", "old", true)]);
        let text = rollout_status(&rs, &waves, &works);
        assert!(text.contains(&format!("revision {revision}")), "{text}");
        assert!(
            text.contains("Placement p (ProgressivePerGroup), started 2026-11-27T04:00:00Z, late joiners 1, unreachable 0"),
            "{text}"
        );
        let lines: Vec<&str> = text.lines().collect();
        let row = |start: &str| {
            lines
                .iter()
                .find(|l| l.trim_start().starts_with(start))
                .unwrap_or_else(|| panic!("no row {start} in {text}"))
                .split_whitespace()
                .collect::<Vec<_>>()
        };
        assert_eq!(
            row("0 "),
            vec!["0", "canary", "1", "1", "1", "1", "0", "rolled", "out"]
        );
        assert_eq!(
            row("1 "),
            vec![
                "1",
                "rest",
                "2",
                "0",
                "1",
                "1",
                "0",
                "held",
                "by",
                "gate",
                "after",
                "canary",
                "(AwaitingApproval)"
            ]
        );
        assert!(
            text.contains("canary       AwaitingApproval   2026-11-27T04:01:00Z   -             awaiting approval"),
            "{text}"
        );
    }

    #[test]
    fn without_a_gate_the_first_unfinished_wave_is_moving() {
        let mut rs = rs();
        rs.status = None;
        let waves = BTreeMap::from([(
            "p".to_string(),
            vec![
                Wave {
                    index: 0,
                    name: String::new(),
                    clusters: vec!["a".into()],
                },
                Wave {
                    index: 1,
                    name: String::new(),
                    clusters: vec!["b".into()],
                },
            ],
        )]);
        let text = rollout_status(&rs, &waves, &BTreeMap::new());
        assert!(text.contains("moving"), "{text}");
        assert!(text.contains("waiting"), "{text}");
        assert!(!text.contains("GATE AFTER"), "{text}");
    }

    #[test]
    fn clusters_waiting_for_their_window_are_named_with_until_when() {
        let mut rs = rs();
        rs.status = serde_json::from_value(json!({"conditions": [{
            "type": WAITING_FOR_MAINTENANCE_WINDOW, "status": "True",
            "reason": "OutsideMaintenanceWindow", "observedGeneration": 1,
            "lastTransitionTime": "2026-11-27T04:00:00Z",
            "message": "1 clusters wait for their maintenance window before the new revision is written: b until 2026-11-28T02:00:00Z"}]}))
        .expect("status");
        let text = rollout_status(&rs, &BTreeMap::new(), &BTreeMap::new());
        assert!(
            text.contains("Waiting for maintenance windows: 1 clusters wait for their maintenance window before the new revision is written: b until 2026-11-28T02:00:00Z"),
            "{text}"
        );
    }

    #[test]
    fn held_deletions_and_decisions_are_shown_with_how_to_release() {
        let mut rs = rs();
        rs.status = serde_json::from_value(json!({"conditions": [
            {"type": "DeletionsWaiting", "status": "True", "reason": "DeletionBudgetExhausted",
             "observedGeneration": 1, "lastTransitionTime": "2026-11-27T04:00:00Z",
             "message": "3 deletions held, first 3: c2, c3, c4; ... annotates the replica set work.ferry.dev/release-deletions"},
            {"type": "PlacementDecisionsHeld", "status": "True", "reason": "GrantLost",
             "observedGeneration": 1, "lastTransitionTime": "2026-11-27T04:00:00Z",
             "message": "placement p holds its last decisions"}]}))
        .expect("status");
        let text = rollout_status(&rs, &BTreeMap::new(), &BTreeMap::new());
        assert!(
            text.contains("Deletions held: 3 deletions held, first 3: c2, c3, c4")
                && text.contains("work.ferry.dev/release-deletions"),
            "{text}"
        );
        assert!(
            text.contains("Placement decisions held: placement p holds its last decisions"),
            "{text}"
        );
    }
}
