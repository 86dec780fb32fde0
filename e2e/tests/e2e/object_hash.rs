//! The object-hash annotation, and what happens when an applied object is
//! deleted on the spoke: recreated with the current spec by default, left
//! deleted with `whenDeleted: Leave`.

use ferry_api::manifest_work::{IgnoreCondition, ManifestWork, WhenDeleted};
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{
    APPLY_TIMEOUT, edit_and_wait, manifest_condition, manifest_work, set_at, ssa_config,
    wait_applied,
};
use ferry_semantics::hash::{OBJECT_HASH_ANNOTATION, object_hash};
use ferry_semantics::paths::IgnorePath;
use kube::api::{DeleteParams, DynamicObject};
use serde_json::json;

fn config_map(value: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "hashed", "namespace": "default"},
        "data": {"value": value, "owner": "hub"}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_object_hash_annotation_is_the_sha256_of_the_manifest_without_on_spoke_present_paths() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let manifest = config_map("1");
    let mut work = manifest_work("cluster-a", "hash", vec![manifest.clone()]);
    work.spec.manifest_configs = vec![ssa_config(
        "",
        "configmaps",
        "default",
        "hashed",
        false,
        &[(IgnoreCondition::OnSpokePresent, &[".data.owner"])],
    )];
    let works = fleet.create_work(&work).await.expect("create work");
    wait_applied(&works, "hash").await.expect("applied");
    let spoke = fleet
        .spoke("cluster-a")
        .api("v1", "ConfigMap", Some("default"));
    let live = spoke.get("hashed").await.expect("read");
    let expected = object_hash(
        &manifest,
        &[IgnorePath::parse(".data.owner").expect("path")],
    );
    let annotations = live.metadata.annotations.expect("annotations");
    assert_eq!(annotations[OBJECT_HASH_ANNOTATION], expected);
    assert_eq!(expected.len(), 64, "sha256 in lowercase hex");
    assert!(
        expected
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
    );
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_deleted_on_the_spoke_is_recreated_with_the_current_spec() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let works = fleet
        .create_work(&manifest_work("cluster-a", "re", vec![config_map("1")]))
        .await
        .expect("create work");
    wait_applied(&works, "re").await.expect("applied");
    edit_and_wait(&works, "re", |m| {
        set_at(&mut m[0], "/data/value", json!("2"))
    })
    .await
    .expect("edit");
    let spoke = fleet
        .spoke("cluster-a")
        .api("v1", "ConfigMap", Some("default"));
    let old_uid = spoke.get("hashed").await.expect("read").metadata.uid;
    spoke
        .delete("hashed", &DeleteParams::default())
        .await
        .expect("delete on spoke");
    let recreated = |o: &DynamicObject| o.metadata.uid != old_uid;
    let back = wait_until(
        &spoke,
        "hashed",
        "object recreated",
        APPLY_TIMEOUT,
        recreated,
    )
    .await
    .expect("recreated");
    assert_eq!(
        back.data["data"]["value"], "2",
        "recreated with the current spec"
    );
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_deleted_on_the_spoke_stays_deleted_with_when_deleted_leave_even_after_an_agent_restart()
 {
    let mut fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let mut work = manifest_work("cluster-a", "leave", vec![config_map("1")]);
    let mut config = ssa_config("", "configmaps", "default", "hashed", false, &[]);
    config.when_deleted = Some(WhenDeleted::Leave);
    work.spec.manifest_configs = vec![config];
    let works = fleet.create_work(&work).await.expect("create work");
    wait_applied(&works, "leave").await.expect("applied");
    let spoke = fleet
        .spoke("cluster-a")
        .api("v1", "ConfigMap", Some("default"));
    spoke
        .delete("hashed", &DeleteParams::default())
        .await
        .expect("delete on spoke");
    // The agent reports that it saw the deletion and chose to leave it.
    let left = |w: &ManifestWork| {
        manifest_condition(w, 0, "Applied").is_some_and(|c| c.reason == "DeletedOnSpoke")
    };
    wait_until(&works, "leave", "deletion reported", APPLY_TIMEOUT, left)
        .await
        .expect("reported");
    assert!(
        spoke.get_opt("hashed").await.expect("read").is_none(),
        "not recreated"
    );
    // A fresh agent re-applies the work from the hub; only the spoke's record
    // tells it the object was deleted there. Its first report comes after its
    // first pass: by then it has decided whether to recreate the object.
    fleet
        .restart_agent_until_it_reports("cluster-a", APPLY_TIMEOUT)
        .await
        .expect("the restarted agent reports");
    assert!(
        spoke.get_opt("hashed").await.expect("read").is_none(),
        "not recreated by a restarted agent"
    );
    let work = works.get("leave").await.expect("read");
    assert!(
        manifest_condition(&work, 0, "Applied").is_some_and(|c| c.reason == "DeletedOnSpoke"),
        "the restarted agent still reports the deletion it left alone: {:?}",
        work.status
    );
    fleet.stop().await;
}
