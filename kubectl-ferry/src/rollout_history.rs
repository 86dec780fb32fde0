//! `kubectl ferry rollout history` and `rollout undo`: a replica set's
//! revisions (its ControllerRevisions) as rows, and the spec an undo
//! writes back. Pure: the objects come from [`crate::rollout_fetch`].

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;
use serde_json::Value;

use crate::age::age_of_text;
use crate::table::render;
use ferry_api::contract::REVISION_ANNOTATION;

/// One revision as `rollout history` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryRow {
    /// The revision's number.
    pub revision: i64,
    /// Its revision hash.
    pub hash: String,
    /// When its ControllerRevision was created (RFC 3339).
    pub created: String,
    /// Clusters whose work holds it.
    pub clusters: usize,
    /// Whether the spec asks for it.
    pub current: bool,
    /// Whether it is the last revision that rolled out everywhere.
    pub stable: bool,
}

/// The hash a ControllerRevision named `<replica set>-<hash>` holds.
fn hash_of(revision: &Value) -> String {
    revision["metadata"]["name"]
        .as_str()
        .and_then(|n| n.rsplit('-').next())
        .unwrap_or_default()
        .to_string()
}

/// The rows of `revisions` (ControllerRevisions as JSON), newest first,
/// with the clusters of `works` (the replica set's works as JSON) counted
/// by the revision they hold, and the current and stable revisions read
/// from `replica_set`'s status.
pub fn history_rows(replica_set: &Value, revisions: &[Value], works: &[Value]) -> Vec<HistoryRow> {
    let mut held: BTreeMap<&str, usize> = BTreeMap::new();
    for work in works {
        if let Some(hash) = work["metadata"]["annotations"][REVISION_ANNOTATION].as_str() {
            *held.entry(hash).or_default() += 1;
        }
    }
    let rollout = &replica_set["status"]["rollout"];
    let current = rollout["revision"]["hash"].as_str();
    let stable = rollout["stableRevision"]["hash"].as_str();
    let mut rows: Vec<HistoryRow> = revisions
        .iter()
        .map(|r| {
            let hash = hash_of(r);
            HistoryRow {
                revision: r["revision"].as_i64().unwrap_or(0),
                created: r["metadata"]["creationTimestamp"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                clusters: held.get(hash.as_str()).copied().unwrap_or(0),
                current: current == Some(hash.as_str()),
                stable: stable == Some(hash.as_str()),
                hash,
            }
        })
        .collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.revision));
    rows
}

/// The rows as a kubectl-style table, ages relative to `now`.
pub fn history_table(rows: &[HistoryRow], now: Timestamp) -> String {
    render(
        &["revision", "hash", "created", "clusters", "marks"],
        rows.iter()
            .map(|r| {
                let marks: Vec<&str> = [(r.current, "current"), (r.stable, "stable")]
                    .into_iter()
                    .filter_map(|(on, mark)| on.then_some(mark))
                    .collect();
                vec![
                    r.revision.to_string(),
                    r.hash.clone(),
                    age_of_text(now, &r.created),
                    r.clusters.to_string(),
                    marks.join(","),
                ]
            })
            .collect(),
    )
}

/// Why an undo cannot be done.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UndoError {
    /// No ControllerRevision of that number.
    #[error("revision {wanted} not found: the replica set has revisions {available}")]
    NoSuchRevision {
        /// The number asked for.
        wanted: i64,
        /// The numbers it has, comma-separated (or `none`).
        available: String,
    },
    /// The revision's data is not a template and overrides.
    #[error("revision {0} holds no manifestWorkTemplate: it was not written by ferry")]
    BadData(i64),
}

/// The revision numbered `wanted` among `revisions`, and the replica set
/// spec fields it writes back: `manifestWorkTemplate` and `overrides`.
/// Fails when there is no such revision or it holds no template.
pub fn undo_fields(revisions: &[Value], wanted: i64) -> Result<(Value, Value), UndoError> {
    let Some(revision) = revisions
        .iter()
        .find(|r| r["revision"].as_i64() == Some(wanted))
    else {
        let mut numbers: Vec<i64> = revisions
            .iter()
            .filter_map(|r| r["revision"].as_i64())
            .collect();
        numbers.sort_unstable();
        let available = if numbers.is_empty() {
            "none".to_string()
        } else {
            numbers
                .iter()
                .map(i64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        return Err(UndoError::NoSuchRevision { wanted, available });
    };
    let data = &revision["data"];
    let template = data
        .get("manifestWorkTemplate")
        .filter(|t| t.is_object())
        .ok_or(UndoError::BadData(wanted))?;
    let overrides = match data.get("overrides") {
        None | Some(Value::Null) => Value::Array(Vec::new()),
        Some(o) if o.is_array() => o.clone(),
        Some(_) => return Err(UndoError::BadData(wanted)),
    };
    Ok((template.clone(), overrides))
}

/// `replica_set` (as JSON) with its spec's template and overrides replaced
/// by `template` and `overrides`; every other field kept as read.
pub fn with_revision(mut replica_set: Value, template: Value, overrides: Value) -> Value {
    if let Some(spec) = replica_set.get_mut("spec").and_then(Value::as_object_mut) {
        spec.insert("manifestWorkTemplate".into(), template);
        if overrides.as_array().is_some_and(Vec::is_empty) {
            spec.remove("overrides");
        } else {
            spec.insert("overrides".into(), overrides);
        }
    }
    replica_set
}

/// What `rollout undo` does to the replica set as last read.
#[derive(Debug, Clone, PartialEq)]
pub enum UndoPlan {
    /// Its template and overrides already are the revision's: nothing to write.
    AlreadyThere,
    /// Write this object back (the replica set as read, with the revision's
    /// template and overrides; its resourceVersion guards the write).
    Write(Value),
}

/// Decides `rollout undo --to-revision wanted` against `replica_set` as just
/// read. Pure, so it is decided again on every fresh read after a write
/// lost to a concurrent change. Fails as [`undo_fields`] does.
pub fn undo_plan(
    replica_set: Value,
    revisions: &[Value],
    wanted: i64,
) -> Result<UndoPlan, UndoError> {
    let (template, overrides) = undo_fields(revisions, wanted)?;
    let spec = &replica_set["spec"];
    let current_overrides = spec
        .get("overrides")
        .filter(|o| !o.is_null())
        .cloned()
        .unwrap_or_else(|| Value::Array(Vec::new()));
    if spec["manifestWorkTemplate"] == template && current_overrides == overrides {
        return Ok(UndoPlan::AlreadyThere);
    }
    Ok(UndoPlan::Write(with_revision(
        replica_set,
        template,
        overrides,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn revision(number: i64, hash: &str, value: &str) -> Value {
        json!({"metadata": {"name": format!("app-{hash}"), "creationTimestamp": "2026-11-27T10:00:00Z"},
            "revision": number,
            "data": {"manifestWorkTemplate": {"workload": {"manifests": [{"data": {"v": value}}]}}, "overrides": []}})
    }

    #[test]
    fn history_lists_revisions_newest_first_with_their_clusters_and_marks() {
        let rs = json!({"status": {"rollout": {"revision": {"number": 2, "hash": "bbb"},
            "stableRevision": {"number": 1, "hash": "aaa"}}}});
        let works: Vec<Value> = ["aaa", "aaa", "bbb"]
            .iter()
            .map(|h| json!({"metadata": {"annotations": {REVISION_ANNOTATION: h}}}))
            .collect();
        let rows = history_rows(
            &rs,
            &[revision(1, "aaa", "1"), revision(2, "bbb", "2")],
            &works,
        );
        assert_eq!(rows[0].revision, 2);
        assert_eq!(
            (rows[0].clusters, rows[0].current, rows[0].stable),
            (1, true, false)
        );
        assert_eq!(
            (rows[1].clusters, rows[1].current, rows[1].stable),
            (2, false, true)
        );
        let now: Timestamp = "2026-11-27T10:05:00Z".parse().expect("time");
        let table = history_table(&rows, now);
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].starts_with("REVISION"), "{table}");
        assert!(
            lines[1].starts_with("2 ") && lines[1].ends_with("current"),
            "{table}"
        );
        assert!(
            lines[2].contains("aaa") && lines[2].ends_with("stable"),
            "{table}"
        );
        assert!(lines[1].contains("5m"), "{table}");
    }

    #[test]
    fn undo_writes_the_revisions_template_and_overrides_and_keeps_the_rest() {
        let revisions = [revision(1, "aaa", "1"), revision(3, "ccc", "3")];
        let (template, overrides) = undo_fields(&revisions, 1).expect("found");
        assert_eq!(template["workload"]["manifests"][0]["data"]["v"], "1");
        let rs = json!({"metadata": {"name": "app", "resourceVersion": "7"},
            "spec": {"manifestWorkTemplate": {"x": 1}, "placementRefs": [{"name": "p"}],
                "overrides": [{"name": "o"}], "paused": true}});
        let undone = with_revision(rs, template.clone(), overrides);
        assert_eq!(undone["spec"]["manifestWorkTemplate"], template);
        assert!(undone["spec"].get("overrides").is_none());
        assert_eq!(undone["spec"]["placementRefs"][0]["name"], "p");
        assert_eq!(undone["metadata"]["resourceVersion"], "7");
    }

    #[test]
    fn undo_plans_nothing_when_the_replica_set_already_holds_the_revision() {
        let revisions = [revision(1, "aaa", "1"), revision(2, "bbb", "2")];
        let (template, _) = undo_fields(&revisions, 1).expect("found");
        let there = json!({"metadata": {"name": "app"},
            "spec": {"manifestWorkTemplate": template}});
        assert_eq!(
            undo_plan(there.clone(), &revisions, 1).expect("plan"),
            UndoPlan::AlreadyThere
        );
        let UndoPlan::Write(written) = undo_plan(there, &revisions, 2).expect("plan") else {
            panic!("revision 2 differs from what is there");
        };
        assert_eq!(
            written["spec"]["manifestWorkTemplate"]["workload"]["manifests"][0]["data"]["v"],
            "2"
        );
        assert_eq!(
            undo_plan(json!({}), &revisions, 7).expect_err("missing"),
            UndoError::NoSuchRevision {
                wanted: 7,
                available: "1, 2".into()
            }
        );
    }

    #[test]
    fn undo_to_a_missing_revision_names_the_ones_there_are() {
        let revisions = [revision(3, "ccc", "3"), revision(1, "aaa", "1")];
        assert_eq!(
            undo_fields(&revisions, 2).expect_err("missing").to_string(),
            "revision 2 not found: the replica set has revisions 1, 3"
        );
        assert_eq!(
            undo_fields(&[], 1).expect_err("missing").to_string(),
            "revision 1 not found: the replica set has revisions none"
        );
        let mut bad = revision(4, "ddd", "4");
        bad["data"] = json!({"something": "else"});
        assert!(matches!(undo_fields(&[bad], 4), Err(UndoError::BadData(4))));
    }
}
