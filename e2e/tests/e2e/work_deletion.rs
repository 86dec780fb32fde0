//! Deleting a ManifestWork releases its objects on the spoke as its
//! deleteOption says; under Foreground the hub keeps the work, marked
//! `Deleting`, until the objects are gone (issue 4, item 4).

use ferry_api::manifest_work::{
    DeleteOption, ManifestWork, OrphaningRule, PropagationPolicy, SelectivelyOrphan,
};
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::ownership::{
    APPLIED_WORK_API_VERSION, HOLD_FINALIZER, ferry_owners, has_ferry_annotations, hold, unhold,
};
use ferry_e2e::helpers::spoke_actor::read_json;
use ferry_e2e::helpers::two_config_maps::{CLUSTER, TwoConfigMaps};
use ferry_e2e::helpers::wait::{wait_deleted, wait_until};
use ferry_e2e::helpers::work_helpers::{
    APPLY_TIMEOUT, config_map, manifest_work, wait_applied, work_condition,
};
use kube::ResourceExt;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreground_deletion_keeps_the_work_deleting_until_the_spoke_objects_are_gone() {
    let TwoConfigMaps {
        fleet,
        works,
        config_maps,
        applied,
    } = TwoConfigMaps::start("app", "held", "free").await;
    let spoke = fleet.spoke(CLUSTER);
    let uid = applied.uid().expect("uid");
    hold(&config_maps, "held").await.expect("hold");

    works
        .delete("app", &Default::default())
        .await
        .expect("delete work");
    wait_deleted(&config_maps, "free", "free object deleted", APPLY_TIMEOUT)
        .await
        .expect("the free object goes at once");
    let names_the_blocker = |w: &ManifestWork| {
        work_condition(w, "Deleting").is_some_and(|c| {
            c.status == "True"
                && c.message.contains("ConfigMap default/held")
                && c.message.contains(HOLD_FINALIZER)
        })
    };
    wait_until(
        &works,
        "app",
        "Deleting names the held object",
        APPLY_TIMEOUT,
        names_the_blocker,
    )
    .await
    .expect("the work stays, saying what it waits for");

    unhold(&config_maps, "held").await.expect("release hold");
    wait_deleted(&works, "app", "work gone", APPLY_TIMEOUT)
        .await
        .expect("the work goes once its objects are gone");
    assert!(
        config_maps.get_opt("held").await.expect("read").is_none(),
        "the held object is gone before the work is"
    );
    let records = spoke.api(APPLIED_WORK_API_VERSION, "AppliedManifestWork", None);
    wait_deleted(&records, &uid, "record removed", APPLY_TIMEOUT)
        .await
        .expect("the spoke record is removed too");
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphan_deletion_leaves_the_objects_without_ferrys_marks() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let config_maps = fleet
        .spoke("cluster-a")
        .api("v1", "ConfigMap", Some("default"));
    let mut work = manifest_work(
        "cluster-a",
        "orphaned",
        vec![config_map("default", "kept", json!({"k": "v"}))],
    );
    work.spec.delete_option = Some(DeleteOption {
        propagation_policy: PropagationPolicy::Orphan,
        selectively_orphans: None,
        ..Default::default()
    });
    let works = fleet.create_work(&work).await.expect("create work");
    wait_applied(&works, "orphaned").await.expect("applied");
    let applied = read_json(&config_maps, "kept").await;
    assert_eq!(
        ferry_owners(&applied),
        0,
        "an object the work orphans carries no owner reference while the work lives, as in OCM"
    );
    assert!(has_ferry_annotations(&applied));

    works
        .delete("orphaned", &Default::default())
        .await
        .expect("delete work");
    wait_deleted(&works, "orphaned", "work gone", APPLY_TIMEOUT)
        .await
        .expect("the work goes");
    let left = read_json(&config_maps, "kept").await;
    assert_eq!(left["data"]["k"], "v", "the object stays as it was");
    assert_eq!(ferry_owners(&left), 0, "without ferry's owner reference");
    assert!(
        !has_ferry_annotations(&left),
        "and without ferry's annotations"
    );
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selectively_orphan_keeps_only_the_objects_its_rules_match() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let config_maps = fleet
        .spoke("cluster-a")
        .api("v1", "ConfigMap", Some("default"));
    let mut work = manifest_work(
        "cluster-a",
        "picky",
        vec![
            config_map("default", "keep", json!({"k": "v"})),
            config_map("default", "drop", json!({"k": "v"})),
        ],
    );
    work.spec.delete_option = Some(DeleteOption {
        propagation_policy: PropagationPolicy::SelectivelyOrphan,
        selectively_orphans: Some(SelectivelyOrphan {
            orphaning_rules: vec![OrphaningRule {
                group: String::new(),
                resource: "configmaps".into(),
                name: "keep".into(),
                namespace: "default".into(),
            }],
        }),
        ..Default::default()
    });
    let works = fleet.create_work(&work).await.expect("create work");
    wait_applied(&works, "picky").await.expect("applied");

    works
        .delete("picky", &Default::default())
        .await
        .expect("delete work");
    wait_deleted(&works, "picky", "work gone", APPLY_TIMEOUT)
        .await
        .expect("the work goes");
    assert!(
        config_maps.get_opt("drop").await.expect("read").is_none(),
        "an object no rule matches is deleted"
    );
    let kept = read_json(&config_maps, "keep").await;
    assert_eq!(ferry_owners(&kept), 0, "the orphan loses ferry's mark");
    fleet.stop().await;
}
