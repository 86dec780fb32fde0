//! Whatever an API server returns, the rows, tables and describe text are
//! built without panicking: objects this build cannot read show as such.

use k8s_openapi::jiff::Timestamp;
use kubectl_ferry::cluster_rows::{cluster_records, clusters_table};
use kubectl_ferry::describe::describe_work;
use kubectl_ferry::work_rows::{WorkEntry, works_table};
use proptest::prelude::*;
use serde_json::{Value, json};

/// Any JSON, biased towards the shapes of ferry's objects so that decoding
/// gets past the first field now and then.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "[a-zA-Z0-9:/ -]{0,12}".prop_map(Value::from),
        Just(json!("2026-11-23T17:59:00Z")),
        Just(json!("False")),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        let key = prop_oneof![
            Just("metadata".to_string()),
            Just("name".to_string()),
            Just("namespace".to_string()),
            Just("spec".to_string()),
            Just("status".to_string()),
            Just("conditions".to_string()),
            Just("resourceStatus".to_string()),
            Just("manifests".to_string()),
            Just("workload".to_string()),
            Just("connected".to_string()),
            Just("hubAcceptsClient".to_string()),
            "[a-z]{1,6}",
        ];
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map(key, inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn any_objects_render_without_panicking(
        clusters in proptest::collection::vec(any_json(), 0..4),
        works in proptest::collection::vec(any_json(), 0..4),
    ) {
        let now: Timestamp = "2026-11-23T18:00:00Z".parse().expect("now");
        let entries: Vec<WorkEntry> = works.into_iter().map(WorkEntry::from_raw).collect();
        let records = cluster_records(&clusters, &entries);
        prop_assert_eq!(records.len(), clusters.len());
        let _ = clusters_table(&records, now);
        let table = works_table(&entries, now);
        prop_assert_eq!(table.lines().count(), entries.len() + 1);
        for entry in &entries {
            let _ = describe_work(entry, &Ok((Vec::new(), 0)), now);
        }
    }
}
