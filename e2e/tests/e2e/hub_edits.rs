//! Editing a work on the hub changes the objects on the spoke, and the hub
//! reports the new generation as applied.

use ferry_api::manifest_work::Manifest;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{
    APPLY_TIMEOUT, config_map, manifest_work, wait_applied, work_condition,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn editing_a_work_on_the_hub_changes_the_object_on_the_spoke() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let work = manifest_work(
        "cluster-a",
        "paint",
        vec![config_map("default", "paint", json!({"color": "blue"}))],
    );
    let works = fleet.create_work(&work).await.expect("create work");
    let applied = wait_applied(&works, "paint")
        .await
        .expect("generation 1 applied");
    assert_eq!(applied.metadata.generation, Some(1));

    let mut edited = works.get("paint").await.expect("read work");
    edited.spec.workload.manifests[0] = Manifest(config_map(
        "default",
        "paint",
        json!({"color": "green", "shade": "dark"}),
    ));
    let patch = json!({"spec": {"workload": {"manifests": edited.spec.workload.manifests}}});
    works
        .patch("paint", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("edit work");

    let spoke: Api<ConfigMap> = Api::namespaced(fleet.spoke("cluster-a").client.clone(), "default");
    let turned_green = |cm: &ConfigMap| {
        cm.data
            .as_ref()
            .is_some_and(|d| d.get("color").map(String::as_str) == Some("green"))
    };
    let changed = wait_until(
        &spoke,
        "paint",
        "spoke object updated",
        APPLY_TIMEOUT,
        turned_green,
    )
    .await
    .expect("spoke follows the hub");
    assert_eq!(changed.data.expect("data")["shade"], "dark");

    let reapplied = wait_applied(&works, "paint")
        .await
        .expect("generation 2 applied");
    assert_eq!(reapplied.metadata.generation, Some(2));
    let applied = work_condition(&reapplied, "Applied").expect("Applied condition");
    assert_eq!(applied.observed_generation, 2);
    fleet.stop().await;
}
