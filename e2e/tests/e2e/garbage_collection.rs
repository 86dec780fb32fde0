//! Objects a work no longer lists are removed from the spoke, and only the
//! objects ferry applied: removed manifests (issue 4, item 5), UID
//! preconditions (item 6), objects shared by two works (item 7), and rapid
//! edit sequences (item 10).

use std::collections::BTreeSet;

use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::ownership::ferry_owners;
use ferry_e2e::helpers::spoke_actor::read_json;
use ferry_e2e::helpers::two_config_maps::TwoConfigMaps;
use ferry_e2e::helpers::wait::{wait_deleted, wait_until};
use ferry_e2e::helpers::work_helpers::{
    APPLY_TIMEOUT, config_map, edit_and_wait, edit_manifests, is_applied_at_current_generation,
    manifest_work, wait_applied,
};
use kube::api::{DynamicObject, ListParams, PostParams};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifest_removed_from_a_work_is_deleted_from_the_spoke() {
    let TwoConfigMaps {
        fleet,
        works,
        config_maps,
        ..
    } = TwoConfigMaps::start("pair", "stays", "goes").await;
    assert!(config_maps.get_opt("goes").await.expect("read").is_some());

    edit_and_wait(&works, "pair", |manifests| {
        manifests.retain(|m| m["metadata"]["name"] != "goes");
    })
    .await
    .expect("edit applied");
    assert!(
        config_maps.get_opt("goes").await.expect("read").is_none(),
        "the removed manifest's object is deleted by the time the edit is reported applied"
    );
    assert!(config_maps.get_opt("stays").await.expect("read").is_some());
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_recreated_by_someone_else_under_the_same_name_is_not_deleted() {
    let TwoConfigMaps {
        mut fleet,
        works,
        config_maps,
        ..
    } = TwoConfigMaps::start("pair", "stays", "taken").await;

    // While the agent is away, someone replaces the object with their own and
    // the work drops it: the record's UID no longer matches.
    fleet.stop_agent("cluster-a").await;
    config_maps
        .delete("taken", &Default::default())
        .await
        .expect("delete");
    wait_deleted(&config_maps, "taken", "old object gone", APPLY_TIMEOUT)
        .await
        .expect("gone");
    let theirs: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "taken", "namespace": "default"},
        "data": {"owner": "someone-else"}}))
    .expect("object");
    config_maps
        .create(&PostParams::default(), &theirs)
        .await
        .expect("recreate");
    edit_manifests(&works, "pair", |manifests| {
        manifests.retain(|m| m["metadata"]["name"] != "taken");
    })
    .await
    .expect("edit");
    fleet.start_agent("cluster-a");

    wait_until(
        &works,
        "pair",
        "the edit applied",
        APPLY_TIMEOUT,
        is_applied_at_current_generation,
    )
    .await
    .expect("applied");
    let survivor = read_json(&config_maps, "taken").await;
    assert_eq!(
        survivor["data"]["owner"], "someone-else",
        "the other object survives"
    );
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_listed_by_two_works_survives_until_both_release_it() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let config_maps = fleet
        .spoke("cluster-a")
        .api("v1", "ConfigMap", Some("default"));
    let shared = config_map("default", "shared", json!({"k": "v"}));
    let first = fleet
        .create_work(&manifest_work("cluster-a", "first", vec![shared.clone()]))
        .await
        .expect("create first");
    let second = fleet
        .create_work(&manifest_work("cluster-a", "second", vec![shared]))
        .await
        .expect("create second");
    wait_applied(&first, "first").await.expect("first applied");
    wait_applied(&second, "second")
        .await
        .expect("second applied");
    let held_twice =
        |o: &DynamicObject| ferry_owners(&serde_json::to_value(o).unwrap_or(Value::Null)) == 2;
    wait_until(
        &config_maps,
        "shared",
        "both works hold the object",
        APPLY_TIMEOUT,
        held_twice,
    )
    .await
    .expect("two marks");

    first
        .delete("first", &Default::default())
        .await
        .expect("delete first");
    wait_deleted(&first, "first", "first work gone", APPLY_TIMEOUT)
        .await
        .expect("first goes");
    let left = read_json(&config_maps, "shared").await;
    assert_eq!(ferry_owners(&left), 1, "still held by the second work");

    second
        .delete("second", &Default::default())
        .await
        .expect("delete second");
    wait_deleted(&config_maps, "shared", "shared object gone", APPLY_TIMEOUT)
        .await
        .expect("deleted once both released it");
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rapid_add_remove_add_sequence_leaves_no_leftover_objects() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let config_maps = fleet
        .spoke("cluster-a")
        .api("v1", "ConfigMap", Some("default"));
    let labelled = |name: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default", "labels": {"test.ferry.dev/rapid": "yes"}},
            "data": {"k": "v"}})
    };
    let works = fleet
        .create_work(&manifest_work("cluster-a", "rapid", vec![labelled("base")]))
        .await
        .expect("create work");
    wait_applied(&works, "rapid").await.expect("applied");

    let mut expected: BTreeSet<String> = BTreeSet::from(["base".to_string()]);
    for round in 0..3 {
        let transient = format!("transient-{round}");
        let lasting = format!("lasting-{round}");
        // Three edits back to back, well within a second.
        edit_manifests(&works, "rapid", |m| m.push(labelled(&transient)))
            .await
            .expect("add");
        edit_manifests(&works, "rapid", |m| {
            m.retain(|x| x["metadata"]["name"] != transient.as_str())
        })
        .await
        .expect("remove");
        edit_manifests(&works, "rapid", |m| m.push(labelled(&lasting)))
            .await
            .expect("add another");
        expected.insert(lasting);
        wait_until(
            &works,
            "rapid",
            "the last edit applied",
            APPLY_TIMEOUT,
            is_applied_at_current_generation,
        )
        .await
        .expect("applied");
        let listed = config_maps
            .list(&ListParams::default().labels("test.ferry.dev/rapid=yes"))
            .await
            .expect("list");
        let present: BTreeSet<String> = listed
            .items
            .iter()
            .filter(|o| o.metadata.deletion_timestamp.is_none())
            .filter_map(|o| o.metadata.name.clone())
            .collect();
        assert_eq!(
            present, expected,
            "round {round}: exactly the work's objects"
        );
    }
    fleet.stop().await;
}
