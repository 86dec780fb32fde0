//! The spoke's AppliedManifestWork records what was applied, with UIDs, and
//! lets a restarted agent finish a deletion (issue 4, item 8); it carries
//! the work's labels, as OCM's does.

use ferry_api::manifest_work::ManifestWork;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::ownership::{APPLIED_WORK_API_VERSION, hold, unhold};
use ferry_e2e::helpers::spoke_actor::read_json;
use ferry_e2e::helpers::two_config_maps::{CLUSTER, TwoConfigMaps};
use ferry_e2e::helpers::wait::{wait_deleted, wait_until};
use ferry_e2e::helpers::work_helpers::{
    APPLY_TIMEOUT, config_map, manifest_work, wait_applied, work_condition,
};
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_spoke_records_every_applied_object_with_its_uid() {
    let TwoConfigMaps {
        fleet,
        config_maps,
        applied,
        ..
    } = TwoConfigMaps::start("recorded", "one", "two").await;
    let spoke = fleet.spoke(CLUSTER);
    let uid = applied.uid().expect("work uid");

    let records = spoke.api(APPLIED_WORK_API_VERSION, "AppliedManifestWork", None);
    let record = read_json(&records, &uid).await;
    assert_eq!(record["spec"]["workName"], "recorded");
    assert_eq!(record["spec"]["workNamespace"], "cluster-a");
    let resources = record["status"]["appliedResources"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(resources.len(), 2, "both objects recorded: {record}");
    for name in ["one", "two"] {
        let live = read_json(&config_maps, name).await;
        let entry = resources
            .iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("{name} recorded"));
        assert_eq!(entry["uid"], live["metadata"]["uid"]);
        assert_eq!(entry["resource"], "configmaps");
        let owner = &live["metadata"]["ownerReferences"][0];
        assert_eq!(
            owner["uid"], record["metadata"]["uid"],
            "the object points at its record"
        );
    }
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_was_down_when_its_work_was_deleted_deletes_the_objects_on_return() {
    let mut fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let config_maps = fleet
        .spoke("cluster-a")
        .api("v1", "ConfigMap", Some("default"));
    let work = manifest_work(
        "cluster-a",
        "away",
        vec![config_map("default", "away", json!({"k": "v"}))],
    );
    let works = fleet.create_work(&work).await.expect("create work");
    wait_applied(&works, "away").await.expect("applied");

    fleet.stop_agent("cluster-a").await;
    works
        .delete("away", &Default::default())
        .await
        .expect("delete work");
    // The hub has seen the deletion and waits for the agent: it must not let
    // the work go while the objects may still be on the spoke.
    let waiting = |w: &ManifestWork| {
        work_condition(w, "Deleting").is_some_and(|c| c.reason == "WaitingForAgent")
    };
    let held = wait_until(&works, "away", "Deleting", APPLY_TIMEOUT, waiting)
        .await
        .expect("the hub waits for the agent");
    assert!(
        held.metadata
            .finalizers
            .as_ref()
            .is_some_and(|f| !f.is_empty()),
        "the finalizer holds the work while its agent is away"
    );
    fleet.start_agent("cluster-a");

    wait_deleted(&config_maps, "away", "object deleted", APPLY_TIMEOUT)
        .await
        .expect("the restarted agent deletes the object");
    wait_deleted(&works, "away", "work gone", APPLY_TIMEOUT)
        .await
        .expect("and lets the work go");
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_restarted_in_the_middle_of_a_deletion_finishes_it() {
    let TwoConfigMaps {
        mut fleet,
        works,
        config_maps,
        ..
    } = TwoConfigMaps::start("halfway", "held", "free").await;
    hold(&config_maps, "held").await.expect("hold");
    works
        .delete("halfway", &Default::default())
        .await
        .expect("delete work");
    wait_deleted(&config_maps, "free", "free object deleted", APPLY_TIMEOUT)
        .await
        .expect("half done");
    let waiting = |w: &ManifestWork| {
        work_condition(w, "Deleting").is_some_and(|c| c.message.contains("ConfigMap default/held"))
    };
    wait_until(&works, "halfway", "Deleting", APPLY_TIMEOUT, waiting)
        .await
        .expect("waiting for the held object");

    // The new agent knows the work from the spoke's record alone. Once it has
    // reported on it (its first report comes after its first pass), the hub
    // must still be waiting for the held object instead of letting it go.
    fleet
        .restart_agent_until_it_reports("cluster-a", APPLY_TIMEOUT)
        .await
        .expect("the restarted agent reports");
    let work = works
        .get_opt("halfway")
        .await
        .expect("read")
        .expect("the work stays while an object is left");
    assert!(
        work_condition(&work, "Deleting")
            .is_some_and(|c| c.message.contains("ConfigMap default/held")),
        "and still names the object it waits for: {:?}",
        work.status
    );
    unhold(&config_maps, "held").await.expect("release");
    wait_deleted(&works, "halfway", "work gone", APPLY_TIMEOUT)
        .await
        .expect("the restarted agent finishes the deletion");
    assert!(config_maps.get_opt("held").await.expect("read").is_none());
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_works_labels_are_copied_to_its_record_and_follow_label_changes() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let mut work = manifest_work(
        "cluster-a",
        "labelled",
        vec![config_map("default", "labelled", json!({"k": "v"}))],
    );
    work.labels_mut().insert("app".into(), "web".into());
    work.labels_mut().insert("stage".into(), "canary".into());
    let works = fleet.create_work(&work).await.expect("create work");
    let uid = wait_applied(&works, "labelled")
        .await
        .expect("applied")
        .uid()
        .expect("uid");
    let records =
        fleet
            .spoke("cluster-a")
            .api(APPLIED_WORK_API_VERSION, "AppliedManifestWork", None);
    let labelled = |wanted: serde_json::Value| {
        move |r: &kube::api::DynamicObject| {
            serde_json::to_value(&r.metadata.labels).unwrap_or_default() == wanted
        }
    };
    wait_until(
        &records,
        &uid,
        "the work's labels on the record",
        APPLY_TIMEOUT,
        labelled(json!({"app": "web", "stage": "canary"})),
    )
    .await
    .expect("labels copied at creation");

    // A label change alone (no new generation), as OCM's test makes it.
    works
        .patch(
            "labelled",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"stage": null, "team": "a"}}})),
        )
        .await
        .expect("relabel the work");
    wait_until(
        &records,
        &uid,
        "the new labels on the record",
        APPLY_TIMEOUT,
        labelled(json!({"app": "web", "team": "a"})),
    )
    .await
    .expect("labels follow the work");
    fleet.stop().await;
}
