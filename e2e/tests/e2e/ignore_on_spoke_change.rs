//! OnSpokeChange: a listed field keeps the spoke's value until the hub changes
//! THAT field; then the hub value is applied once. Unrelated hub changes never
//! overwrite it, and drift of fields that are not listed is still corrected.

use std::time::Duration;

use ferry_api::manifest_work::IgnoreCondition;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::passes::{reads_so_far, wait_for_passes};
use ferry_e2e::helpers::spoke_actor::merge_as;
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{
    APPLY_TIMEOUT, edit_and_wait, manifest_work, set_at, ssa_config, wait_applied,
};
use kube::api::DynamicObject;
use serde_json::json;

const RESYNC: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_spoke_change_keeps_the_spoke_value_until_the_hub_changes_that_field() {
    let mut options = FleetOptions::with_spokes(&["cluster-a"]);
    options.resync = RESYNC;
    options.audit_spokes = true;
    let fleet = Fleet::start(options).await.expect("fleet starts");
    let manifest = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "target", "namespace": "default", "labels": {"tier": "o1"}},
        "data": {"color": "blue"}
    });
    let mut work = manifest_work("cluster-a", "w", vec![manifest]);
    // force: correcting drift of fields another manager touched needs ownership.
    work.spec.manifest_configs = vec![ssa_config(
        "",
        "configmaps",
        "default",
        "target",
        true,
        &[(IgnoreCondition::OnSpokeChange, &[".data"])],
    )];
    let works = fleet.create_work(&work).await.expect("create work");
    wait_applied(&works, "w").await.expect("applied");
    let spoke = fleet
        .spoke("cluster-a")
        .api("v1", "ConfigMap", Some("default"));
    let read =
        || async { serde_json::to_value(spoke.get("target").await.expect("read")).expect("json") };
    assert_eq!(
        read().await["data"]["color"],
        "blue",
        "create sets the hub value"
    );

    merge_as(
        &spoke,
        "target",
        "kubectl-edit",
        &json!({"data": {"color": "red"}}),
    )
    .await
    .expect("spoke edit");
    edit_and_wait(&works, "w", |m| {
        set_at(&mut m[0], "/metadata/labels/tier", json!("o2"))
    })
    .await
    .expect("edit applied");
    let now = read().await;
    assert_eq!(
        now["metadata"]["labels"]["tier"], "o2",
        "the other hub change is applied"
    );
    assert_eq!(
        now["data"]["color"], "red",
        "a hub change to another field keeps the spoke's value"
    );

    // Two whole passes of the agent over the object (its reads in the
    // spoke's audit log), in which it could wrongly revert.
    let audit = &fleet.spoke("cluster-a").control_plane.info.audit_log;
    let uri = "/api/v1/namespaces/default/configmaps/target";
    let start = reads_so_far(audit, uri);
    wait_for_passes(audit, uri, start, 2, APPLY_TIMEOUT)
        .await
        .expect("the agent keeps resyncing");
    assert_eq!(
        read().await["data"]["color"],
        "red",
        "the spoke change survives resync"
    );

    // Drift of a field that is not listed is still corrected.
    merge_as(
        &spoke,
        "target",
        "kubectl-edit",
        &json!({"metadata": {"labels": {"tier": "drifted"}}}),
    )
    .await
    .expect("spoke drift");
    let corrected = |o: &DynamicObject| {
        o.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("tier"))
            .map(String::as_str)
            == Some("o2")
    };
    wait_until(
        &spoke,
        "target",
        "unlisted drift corrected",
        APPLY_TIMEOUT,
        corrected,
    )
    .await
    .expect("non-listed drift is corrected");
    assert_eq!(
        read().await["data"]["color"],
        "red",
        "correcting other drift keeps the listed field"
    );

    // A hub change to THAT field is applied once...
    edit_and_wait(&works, "w", |m| {
        set_at(&mut m[0], "/data", json!({"color": "green"}))
    })
    .await
    .expect("edit applied");
    let turned_green = |o: &DynamicObject| o.data["data"]["color"] == "green";
    wait_until(
        &spoke,
        "target",
        "hub change of the listed field applied",
        APPLY_TIMEOUT,
        turned_green,
    )
    .await
    .expect("hub change applied once");

    // ...and only once: a later spoke change sticks again.
    merge_as(
        &spoke,
        "target",
        "kubectl-edit",
        &json!({"data": {"color": "purple"}}),
    )
    .await
    .expect("spoke edit");
    edit_and_wait(&works, "w", |m| {
        set_at(&mut m[0], "/metadata/labels/tier", json!("o3"))
    })
    .await
    .expect("edit applied");
    let now = read().await;
    assert_eq!(now["metadata"]["labels"]["tier"], "o3");
    assert_eq!(
        now["data"]["color"], "purple",
        "the hub value was applied once, not kept enforced"
    );
    fleet.stop().await;
}
