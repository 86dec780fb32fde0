//! One matcher for every manifest option (OCM's rule): each option comes
//! from the first `manifestConfigs` entry that selects the manifest and sets
//! that option, with `*` anywhere in a name. A first entry carrying only
//! feedback rules does not hide a later entry's update strategy, and
//! `name: web-*` selects `web-1` for the strategy as it does for feedback.
//! The option-by-option table is unit- and property-tested in
//! `semantics/src/config_match.rs`.

use ferry_api::manifest_work::{
    FeedbackRule, FeedbackType, ManifestConfigOption, NamedJsonPath, ResourceIdentifier,
};
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::spoke_actor::read_json;
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{
    APPLY_TIMEOUT, config_map, feedback_value, manifest_work, ssa_config, wait_applied,
};
use ferry_semantics::hash::LAST_APPLIED_ANNOTATION;
use serde_json::{Value, json};

/// The operations (`Apply` or `Update`) ferry's managers used on `object`.
fn ferry_operations(object: &Value) -> Vec<String> {
    object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|entry| {
            entry["manager"]
                .as_str()
                .is_some_and(|m| m.starts_with("ferry"))
        })
        .filter_map(|entry| entry["operation"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wildcard_strategy_applies_even_after_a_feedback_only_entry_for_the_same_object() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let mut work = manifest_work(
        "cluster-a",
        "matched",
        vec![config_map("default", "web-1", json!({"key": "value-1"}))],
    );
    work.spec.manifest_configs = vec![
        // First: exactly this object, feedback only.
        ManifestConfigOption {
            resource_identifier: ResourceIdentifier {
                group: String::new(),
                resource: "configmaps".into(),
                name: "web-1".into(),
                namespace: "default".into(),
            },
            feedback_rules: vec![FeedbackRule {
                type_: FeedbackType::JsonPaths,
                json_paths: vec![NamedJsonPath {
                    name: "key".into(),
                    path: ".data.key".into(),
                    version: None,
                }],
            }],
            ..Default::default()
        },
        // Second: every web-* ConfigMap, server-side apply.
        ssa_config("", "configmaps", "default", "web-*", false, &[]),
    ];
    let works = fleet.create_work(&work).await.expect("create");
    wait_applied(&works, "matched").await.expect("applied");
    wait_until(&works, "matched", "feedback", APPLY_TIMEOUT, |w| {
        feedback_value(w, 0, "key").is_some_and(|v| v.string.as_deref() == Some("value-1"))
    })
    .await
    .expect("the first entry's feedback rules apply");
    let spoke = fleet
        .spoke("cluster-a")
        .api("v1", "ConfigMap", Some("default"));
    let object = read_json(&spoke, "web-1").await;
    let operations = ferry_operations(&object);
    assert_eq!(
        operations,
        vec!["Apply".to_string()],
        "the second entry's ServerSideApply wrote the object: {}",
        object["metadata"]["managedFields"]
    );
    assert!(
        object["metadata"]["annotations"][LAST_APPLIED_ANNOTATION].is_null(),
        "no Update-strategy annotation"
    );
    fleet.stop().await;
}
