//! `get works`: one row per ManifestWork.

use ferry_api::manifest_work::ManifestWork;
use ferry_semantics::contract::{APPLIED, AVAILABLE};
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use crate::age::age;
use crate::table;
use crate::work_summary::{condition_cell, failing_cell, failures, work_conditions};

/// A ManifestWork as read from the hub: the object as stored (what `-o
/// json` prints, fields this build does not know included) and its typed
/// form, or why it is not a ManifestWork this build can read.
#[derive(Debug, Clone)]
pub struct WorkEntry {
    /// The object as the API server returned it.
    pub raw: Value,
    /// The typed work, or the decoding error.
    pub typed: Result<ManifestWork, String>,
}

impl WorkEntry {
    /// Decodes `raw`; a work this build cannot read is kept with the reason,
    /// so one odd object never hides the others.
    pub fn from_raw(raw: Value) -> Self {
        let typed = serde_json::from_value::<ManifestWork>(raw.clone()).map_err(|e| e.to_string());
        Self { raw, typed }
    }

    /// Its namespace, which is its cluster's name.
    pub fn namespace(&self) -> &str {
        self.raw["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
    }

    /// Its name.
    pub fn name(&self) -> &str {
        self.raw["metadata"]["name"].as_str().unwrap_or_default()
    }

    /// Whether anything of it fails; a work that cannot be read counts as
    /// failing, since nobody can tell that it is fine.
    pub fn is_failing(&self) -> bool {
        match &self.typed {
            Ok(work) => !failures(work).is_empty(),
            Err(_) => true,
        }
    }
}

/// The columns of `get works`.
pub const HEADER: [&str; 7] = [
    "namespace",
    "name",
    "manifests",
    "applied",
    "available",
    "failing",
    "age",
];

/// The row of one work at `now`.
pub fn work_row(entry: &WorkEntry, now: Timestamp) -> Vec<String> {
    let namespace = entry.namespace().to_string();
    let name = entry.name().to_string();
    let work = match &entry.typed {
        Ok(work) => work,
        Err(error) => {
            return vec![
                namespace,
                name,
                "?".into(),
                "?".into(),
                "?".into(),
                format!("unreadable: {error}"),
                raw_age(&entry.raw, now),
            ];
        }
    };
    let generation = work.metadata.generation;
    let conditions = work_conditions(work);
    let mut age_cell = work
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| age(now, t.0))
        .unwrap_or_else(|| "-".into());
    if work.metadata.deletion_timestamp.is_some() {
        age_cell.push_str(" (deleting)");
    }
    vec![
        namespace,
        name,
        work.spec.workload.manifests.len().to_string(),
        condition_cell(conditions, APPLIED, generation),
        condition_cell(conditions, AVAILABLE, generation),
        failing_cell(&failures(work)),
        age_cell,
    ]
}

/// The age of an object that did not decode, from its raw creationTimestamp.
fn raw_age(raw: &Value, now: Timestamp) -> String {
    crate::age::age_of_text(
        now,
        raw["metadata"]["creationTimestamp"]
            .as_str()
            .unwrap_or_default(),
    )
}

/// The `get works` table, sorted by namespace then name.
pub fn works_table(entries: &[WorkEntry], now: Timestamp) -> String {
    let mut sorted: Vec<&WorkEntry> = entries.iter().collect();
    sorted.sort_by(|a, b| (a.namespace(), a.name()).cmp(&(b.namespace(), b.name())));
    table::render(
        &HEADER,
        sorted.into_iter().map(|e| work_row(e, now)).collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::work_summary::tests::{condition, manifest, work_with};
    use serde_json::json;

    fn entry(work: &ManifestWork) -> WorkEntry {
        WorkEntry::from_raw(serde_json::to_value(work).expect("serialise"))
    }

    fn now() -> Timestamp {
        "2026-11-23T18:00:00Z".parse().expect("now")
    }

    fn created(mut work: ManifestWork, manifests: usize) -> ManifestWork {
        work.metadata.creation_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                "2026-11-23T17:55:00Z".parse().expect("time"),
            ));
        work.spec.workload.manifests =
            vec![ferry_api::manifest_work::Manifest(json!({"kind": "ConfigMap"})); manifests];
        work
    }

    #[test]
    fn a_row_shows_manifests_conditions_failures_and_age() {
        let work = created(
            work_with(
                vec![
                    condition(APPLIED, "False", "AppliedManifestWorkFailed", 1),
                    condition(AVAILABLE, "True", "ResourcesAvailable", 1),
                ],
                vec![
                    manifest(0, vec![condition(APPLIED, "True", "Applied", 1)]),
                    manifest(1, vec![condition(APPLIED, "False", "UnknownKind", 1)]),
                ],
            ),
            2,
        );
        assert_eq!(
            work_row(&entry(&work), now()),
            vec![
                "cluster-a",
                "web",
                "2",
                "False",
                "True",
                "1 (UnknownKind)",
                "5m"
            ]
        );
        assert!(entry(&work).is_failing());
    }

    #[test]
    fn a_deleting_work_says_so_in_its_age() {
        let mut work = created(work_with(Vec::new(), Vec::new()), 1);
        work.metadata.deletion_timestamp = work.metadata.creation_timestamp.clone();
        assert_eq!(work_row(&entry(&work), now())[6], "5m (deleting)");
    }

    #[test]
    fn an_unreadable_work_keeps_its_row_and_counts_as_failing() {
        let raw = json!({
            "apiVersion": "work.ferry.dev/v1alpha1", "kind": "ManifestWork",
            "metadata": {"name": "odd", "namespace": "cluster-b",
                         "creationTimestamp": "2026-11-23T17:59:00Z"},
            "spec": {"workload": {"manifests": "not a list"}}
        });
        let odd = WorkEntry::from_raw(raw);
        assert!(odd.is_failing());
        let row = work_row(&odd, now());
        assert_eq!(row[..2], ["cluster-b".to_string(), "odd".to_string()]);
        assert!(row[5].starts_with("unreadable: "), "{row:?}");
        assert_eq!(row[6], "60s");
    }

    #[test]
    fn the_table_is_sorted_by_namespace_and_name() {
        let mut b = created(work_with(Vec::new(), Vec::new()), 1);
        b.metadata.namespace = Some("cluster-b".into());
        let a = created(work_with(Vec::new(), Vec::new()), 1);
        let text = works_table(&[entry(&b), entry(&a)], now());
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("NAMESPACE"), "{text}");
        assert!(lines[1].starts_with("cluster-a"), "{text}");
        assert!(lines[2].starts_with("cluster-b"), "{text}");
    }
}
