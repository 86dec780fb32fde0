//! CreateOnly creates once and never updates; ReadOnly never writes and still
//! reports whether the object is there.

use ferry_api::manifest_work::ManifestWork;
use ferry_api::manifest_work::UpdateStrategyType;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::APPLY_TIMEOUT;
use ferry_e2e::helpers::work_helpers::{
    edit_and_wait, manifest_condition, manifest_work, set_at, strategy_config, wait_applied,
};
use kube::api::PostParams;
use serde_json::json;

fn config_map(name: &str, value: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"}, "data": {"value": value}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_only_creates_once_and_never_updates() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let mut work = manifest_work("cluster-a", "once", vec![config_map("once", "first")]);
    work.spec.manifest_configs = vec![strategy_config(
        "",
        "configmaps",
        "default",
        "once",
        UpdateStrategyType::CreateOnly,
    )];
    let works = fleet.create_work(&work).await.expect("create");
    wait_applied(&works, "once").await.expect("applied");
    let spoke = fleet
        .spoke("cluster-a")
        .api("v1", "ConfigMap", Some("default"));
    assert_eq!(
        spoke.get("once").await.expect("created").data["data"]["value"],
        "first"
    );
    let version = spoke
        .get("once")
        .await
        .expect("read")
        .metadata
        .resource_version;
    let work = edit_and_wait(&works, "once", |m| {
        set_at(&mut m[0], "/data/value", json!("second"))
    })
    .await
    .expect("edit observed");
    let condition = manifest_condition(&work, 0, "Applied").expect("condition");
    assert!(
        condition.message.contains("CreateOnly"),
        "{}",
        condition.message
    );
    let now = spoke.get("once").await.expect("read");
    assert_eq!(now.data["data"]["value"], "first", "never updated");
    assert_eq!(now.metadata.resource_version, version, "not written at all");
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_never_writes_and_reports_whether_the_object_exists() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let spoke = fleet
        .spoke("cluster-a")
        .api("v1", "ConfigMap", Some("default"));
    spoke
        .create(
            &PostParams::default(),
            &serde_json::from_value(config_map("watched", "spoke's")).expect("object"),
        )
        .await
        .expect("pre-create");
    let version = spoke
        .get("watched")
        .await
        .expect("read")
        .metadata
        .resource_version;
    let mut work = manifest_work(
        "cluster-a",
        "ro",
        vec![
            config_map("watched", "hub's"),
            config_map("absent", "hub's"),
        ],
    );
    work.spec.manifest_configs = vec![
        strategy_config(
            "",
            "configmaps",
            "default",
            "watched",
            UpdateStrategyType::ReadOnly,
        ),
        strategy_config(
            "",
            "configmaps",
            "default",
            "absent",
            UpdateStrategyType::ReadOnly,
        ),
    ];
    let works = fleet.create_work(&work).await.expect("create");
    let reported = |w: &ManifestWork| {
        manifest_condition(w, 0, "Applied").is_some()
            && manifest_condition(w, 1, "Applied").is_some()
    };
    let work = wait_until(
        &works,
        "ro",
        "both manifests reported",
        APPLY_TIMEOUT,
        reported,
    )
    .await
    .expect("reported");
    let present = manifest_condition(&work, 0, "Applied").expect("condition");
    assert_eq!(
        (present.status.as_str(), present.reason.as_str()),
        ("True", "ReadOnly")
    );
    let absent = manifest_condition(&work, 1, "Applied").expect("condition");
    assert_eq!(
        (absent.status.as_str(), absent.reason.as_str()),
        ("False", "ObjectNotFound")
    );
    let now = spoke.get("watched").await.expect("read");
    assert_eq!(now.data["data"]["value"], "spoke's");
    assert_eq!(now.metadata.resource_version, version, "never written");
    assert!(
        spoke.get_opt("absent").await.expect("read").is_none(),
        "never created"
    );
    fleet.stop().await;
}
