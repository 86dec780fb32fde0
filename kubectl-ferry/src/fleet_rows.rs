//! `get replicasets` and `get placements`: one row per ManifestWorkReplicaSet
//! (its works by state, where its rollout stands, the revision it rolls
//! out) and per Placement (how many clusters it chose, in how many decision
//! groups, and whether it is satisfied). Read from raw objects, so a field
//! this build does not know never fails the list.

use ferry_semantics::contract::{PLACEMENT_ROLLED_OUT, PLACEMENT_SATISFIED};
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use crate::age::age_of_text;
use crate::table::render;

/// The `get replicasets` table of `sets`, with a NAMESPACE column when
/// `all_namespaces`. A set the hub has not reconciled yet shows `-`.
pub fn replica_sets_table(sets: &[Value], all_namespaces: bool, now: Timestamp) -> String {
    let rows = sets
        .iter()
        .map(|set| {
            let status = &set["status"];
            let summary = &status["summary"];
            let count = |field: &str| {
                summary[field]
                    .as_i64()
                    .map_or_else(|| "-".to_string(), |c| c.to_string())
            };
            let placements = set["spec"]["placementRefs"]
                .as_array()
                .map(|refs| {
                    refs.iter()
                        .filter_map(|r| r["name"].as_str())
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .filter(|names| !names.is_empty())
                .unwrap_or_else(|| "-".to_string());
            let rollout = if set["spec"]["paused"] == Value::Bool(true) {
                "Paused".to_string()
            } else {
                condition_reason(status, PLACEMENT_ROLLED_OUT)
            };
            let revision = status["rollout"]["revision"]["number"]
                .as_i64()
                .map_or_else(|| "-".to_string(), |n| n.to_string());
            let mut row = namespace_column(set, all_namespaces);
            row.extend([
                name_of(set),
                placements,
                count("total"),
                count("updated"),
                count("applied"),
                count("available"),
                count("degraded"),
                rollout,
                revision,
                age_of(set, now),
            ]);
            row
        })
        .collect();
    let mut header = vec![
        "name",
        "placements",
        "works",
        "updated",
        "applied",
        "available",
        "degraded",
        "rollout",
        "revision",
        "age",
    ];
    if all_namespaces {
        header.insert(0, "namespace");
    }
    render(&header, sorted(rows))
}

/// The `get placements` table of `placements`, with a NAMESPACE column when
/// `all_namespaces`.
pub fn placements_table(placements: &[Value], all_namespaces: bool, now: Timestamp) -> String {
    let rows = placements
        .iter()
        .map(|placement| {
            let status = &placement["status"];
            let selected = status["numberOfSelectedClusters"]
                .as_i64()
                .map_or_else(|| "-".to_string(), |n| n.to_string());
            let groups = status["decisionGroups"]
                .as_array()
                .map_or_else(|| "-".to_string(), |g| g.len().to_string());
            let satisfied = match condition(status, PLACEMENT_SATISFIED) {
                Some(c) => format!(
                    "{} ({})",
                    c["status"].as_str().unwrap_or("Unknown"),
                    c["reason"].as_str().unwrap_or("")
                ),
                None => "-".to_string(),
            };
            let mut row = namespace_column(placement, all_namespaces);
            row.extend([
                name_of(placement),
                selected,
                groups,
                satisfied,
                age_of(placement, now),
            ]);
            row
        })
        .collect();
    let mut header = vec!["name", "selected", "groups", "satisfied", "age"];
    if all_namespaces {
        header.insert(0, "namespace");
    }
    render(&header, sorted(rows))
}

fn condition<'a>(status: &'a Value, type_: &str) -> Option<&'a Value> {
    status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

fn condition_reason(status: &Value, type_: &str) -> String {
    condition(status, type_)
        .and_then(|c| c["reason"].as_str())
        .unwrap_or("-")
        .to_string()
}

fn name_of(object: &Value) -> String {
    object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn namespace_column(object: &Value, all_namespaces: bool) -> Vec<String> {
    if all_namespaces {
        vec![
            object["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        ]
    } else {
        Vec::new()
    }
}

fn age_of(object: &Value, now: Timestamp) -> String {
    object["metadata"]["creationTimestamp"]
        .as_str()
        .map_or_else(|| "-".to_string(), |t| age_of_text(now, t))
}

fn sorted(mut rows: Vec<Vec<String>>) -> Vec<Vec<String>> {
    rows.sort();
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn now() -> Timestamp {
        "2026-11-27T12:00:00Z".parse().expect("time")
    }

    #[test]
    fn a_replica_set_row_shows_its_counts_rollout_and_revision() {
        let sets = [
            json!({"metadata": {"name": "web", "namespace": "team-a", "creationTimestamp": "2026-11-27T11:00:00Z"},
                   "spec": {"placementRefs": [{"name": "prod"}, {"name": "canary"}]},
                   "status": {"summary": {"total": 4, "updated": 3, "applied": 3, "available": 2, "degraded": 1},
                              "conditions": [{"type": "PlacementRolledOut", "status": "False", "reason": "Progressing"}],
                              "rollout": {"revision": {"number": 7, "hash": "abc"}}}}),
            json!({"metadata": {"name": "api", "namespace": "team-b"}, "spec": {"paused": true}}),
        ];
        let text = replica_sets_table(&sets, true, now());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(
            lines[0].starts_with("NAMESPACE") && lines[0].contains("REVISION"),
            "{text}"
        );
        let api: Vec<&str> = lines[2].split_whitespace().collect();
        assert_eq!(
            api,
            [
                "team-b", "api", "-", "-", "-", "-", "-", "-", "Paused", "-", "-"
            ],
            "{text}"
        );
        let web: Vec<&str> = lines[1].split_whitespace().collect();
        assert_eq!(
            web,
            [
                "team-a",
                "web",
                "prod,canary",
                "4",
                "3",
                "3",
                "2",
                "1",
                "Progressing",
                "7",
                "60m"
            ],
            "{text}"
        );
    }

    #[test]
    fn a_placement_row_shows_what_it_chose_and_whether_it_is_satisfied() {
        let placements = [json!({
            "metadata": {"name": "prod", "namespace": "team-a"},
            "status": {"numberOfSelectedClusters": 5,
                       "decisionGroups": [{"decisionGroupIndex": 0}, {"decisionGroupIndex": 1}],
                       "conditions": [{"type": "PlacementSatisfied", "status": "False",
                                       "reason": "NoManagedClusterSetBindings"}]}
        })];
        let text = placements_table(&placements, false, now());
        let row: Vec<&str> = text
            .lines()
            .nth(1)
            .expect("row")
            .split_whitespace()
            .collect();
        assert_eq!(
            row,
            [
                "prod",
                "5",
                "2",
                "False",
                "(NoManagedClusterSetBindings)",
                "-"
            ],
            "{text}"
        );
    }
}
