//! Field managers: every write ferry makes is attributed to a named field
//! manager (under the `Update` strategy too, where creates used to appear
//! as `unknown` in managedFields), and two works that server-side apply one
//! object under different field managers both apply (OCM's "two manifest
//! works with different field manager" case): ferry's own bookkeeping
//! annotations are kept per manager, so they never conflict with each other.

use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::spoke_actor::read_json;
use ferry_e2e::helpers::work_helpers::{
    config_map, edit_and_wait, manifest_condition, manifest_work, ssa_config, wait_applied,
};
use ferry_semantics::contract::AGENT_FIELD_MANAGER;
use ferry_semantics::hash::OBJECT_HASH_ANNOTATION;
use serde_json::{Value, json};

const CLUSTER: &str = "cluster-a";

/// `(manager, operation)` of every managedFields entry of `object`.
fn managers(object: &Value) -> Vec<(String, String)> {
    object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|entry| {
            (
                entry["manager"].as_str().unwrap_or_default().to_string(),
                entry["operation"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn update_strategy_creates_and_updates_are_attributed_to_ferry_agent() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&[CLUSTER]))
        .await
        .expect("fleet starts");
    let work = manifest_work(
        CLUSTER,
        "w",
        vec![config_map("default", "target", json!({"a": "1"}))],
    );
    let works = fleet.create_work(&work).await.expect("create work");
    wait_applied(&works, "w").await.expect("applied");
    let spoke = fleet.spoke(CLUSTER).api("v1", "ConfigMap", Some("default"));
    let created = read_json(&spoke, "target").await;
    assert_eq!(
        managers(&created),
        vec![(AGENT_FIELD_MANAGER.to_string(), "Update".to_string())],
        "the create is ferry-agent's"
    );

    edit_and_wait(&works, "w", |manifests| {
        manifests[0] = config_map("default", "target", json!({"a": "2", "b": "3"}));
    })
    .await
    .expect("edit applied");
    let updated = read_json(&spoke, "target").await;
    assert_eq!(updated["data"], json!({"a": "2", "b": "3"}));
    assert!(
        managers(&updated)
            .iter()
            .all(|(manager, _)| manager == AGENT_FIELD_MANAGER),
        "every write is ferry-agent's: {:?}",
        managers(&updated)
    );
    fleet.stop().await;
}

#[tokio::test]
async fn two_works_applying_one_object_with_different_field_managers_both_apply() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&[CLUSTER]))
        .await
        .expect("fleet starts");
    let work_for = |name: &str, manager: &str, data: Value| {
        let mut work = manifest_work(CLUSTER, name, vec![config_map("default", "shared", data)]);
        let mut config = ssa_config("", "configmaps", "default", "shared", false, &[]);
        if let Some(ssa) = config
            .update_strategy
            .as_mut()
            .and_then(|s| s.server_side_apply.as_mut())
        {
            ssa.field_manager = manager.to_string();
        }
        work.spec.manifest_configs = vec![config];
        work
    };
    let first = fleet
        .create_work(&work_for("first", "manager-one", json!({"one": "1"})))
        .await
        .expect("create first");
    wait_applied(&first, "first").await.expect("first applied");
    let second = fleet
        .create_work(&work_for("second", "manager-two", json!({"two": "2"})))
        .await
        .expect("create second");
    let reported = wait_applied(&second, "second")
        .await
        .expect("the second work applies too, with no conflict on ferry's annotations");
    let applied = manifest_condition(&reported, 0, "Applied").expect("Applied");
    assert_eq!(applied.status, "True", "{applied:?}");

    let spoke = fleet.spoke(CLUSTER).api("v1", "ConfigMap", Some("default"));
    let live = read_json(&spoke, "shared").await;
    assert_eq!(live["data"], json!({"one": "1", "two": "2"}));
    let annotations = live["metadata"]["annotations"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    assert!(
        annotations.contains_key(&format!("{OBJECT_HASH_ANNOTATION}.manager-one"))
            && annotations.contains_key(&format!("{OBJECT_HASH_ANNOTATION}.manager-two")),
        "one bookkeeping key per manager: {annotations:?}"
    );

    // Each keeps applying its own changes afterwards.
    edit_and_wait(&first, "first", |manifests| {
        manifests[0] = config_map("default", "shared", json!({"one": "1b"}));
    })
    .await
    .expect("first edit applied");
    let live = read_json(&spoke, "shared").await;
    assert_eq!(live["data"], json!({"one": "1b", "two": "2"}));
    let first_now = wait_applied(&first, "first").await.expect("first applied");
    assert_eq!(
        manifest_condition(&first_now, 0, "Applied").map(|c| c.status.as_str()),
        Some("True")
    );
    fleet.stop().await;
}
