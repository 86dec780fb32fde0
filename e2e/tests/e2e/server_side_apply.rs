//! ServerSideApply: a custom field manager; a conflict with another manager
//! without `force` is reported with the manager and the field and retried; with
//! `force` ferry takes ownership.

use ferry_api::manifest_work::ManifestWork;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::spoke_actor::apply_as;
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{
    APPLY_TIMEOUT, manifest_condition, manifest_work, ssa_config, wait_applied,
};
use kube::api::{Patch, PatchParams};
use serde_json::json;

fn config_map(value: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "shared", "namespace": "default"}, "data": {"key": value}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflict_without_force_names_the_manager_and_field_is_retried_and_force_takes_ownership()
{
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let spoke = fleet
        .spoke("cluster-a")
        .api("v1", "ConfigMap", Some("default"));
    // The other manager creates the object by applying it, so it alone owns data.key.
    apply_as(&spoke, "shared", "other-manager", &config_map("theirs"))
        .await
        .expect("other owns data.key");

    let mut work = manifest_work("cluster-a", "ssa", vec![config_map("ours")]);
    let mut config = ssa_config("", "configmaps", "default", "shared", false, &[]);
    if let Some(ssa) = config
        .update_strategy
        .as_mut()
        .and_then(|s| s.server_side_apply.as_mut())
    {
        ssa.field_manager = "team-blue".into();
    }
    work.spec.manifest_configs = vec![config.clone()];
    let works = fleet.create_work(&work).await.expect("create work");
    let conflicted = |w: &ManifestWork| {
        manifest_condition(w, 0, "Applied").is_some_and(|c| c.reason == "ApplyConflict")
    };
    let reported = wait_until(
        &works,
        "ssa",
        "conflict reported",
        APPLY_TIMEOUT,
        conflicted,
    )
    .await
    .expect("conflict");
    let condition = manifest_condition(&reported, 0, "Applied").expect("condition");
    assert_eq!(condition.status, "False");
    assert!(
        condition.message.contains("other-manager") && condition.message.contains(".data.key"),
        "names the manager and the field: {}",
        condition.message
    );

    // Retried with backoff: once the other manager lets go, the apply succeeds
    // without any change on the hub.
    apply_as(
        &spoke,
        "shared",
        "other-manager",
        &json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "shared", "namespace": "default"}}),
    )
    .await
    .expect("release");
    wait_applied(&works, "ssa").await.expect("retry succeeds");
    let live = spoke.get("shared").await.expect("read");
    assert_eq!(live.data["data"]["key"], "ours");
    let managers: Vec<String> = live
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert!(
        managers.contains(&"team-blue".to_string()),
        "custom field manager used: {managers:?}"
    );

    // With force, ferry takes ownership from a manager that holds on.
    apply_as(
        &spoke,
        "shared",
        "other-manager",
        &config_map("theirs-again"),
    )
    .await
    .expect("other takes it back");
    let mut forced = works.get("ssa").await.expect("read work");
    if let Some(ssa) = forced.spec.manifest_configs[0]
        .update_strategy
        .as_mut()
        .and_then(|s| s.server_side_apply.as_mut())
    {
        ssa.force = true;
    }
    let patch = json!({"spec": {"manifestConfigs": forced.spec.manifest_configs}});
    works
        .patch("ssa", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("set force");
    wait_applied(&works, "ssa").await.expect("forced apply");
    let ours = |o: &kube::api::DynamicObject| o.data["data"]["key"] == "ours";
    wait_until(
        &spoke,
        "shared",
        "ferry owns the field",
        APPLY_TIMEOUT,
        ours,
    )
    .await
    .expect("forced");
    fleet.stop().await;
}
