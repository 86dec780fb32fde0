//! A failure is reported in words that name what really failed: a manifest
//! whose namespace does not exist on the spoke reports the API server's own
//! message (`namespaces "x" not found`), not that the object changed while it
//! was being updated; once the namespace exists the manifest applies.

use ferry_api::manifest_work::ManifestWork;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{APPLY_TIMEOUT, manifest_condition, manifest_work};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manifest_whose_namespace_is_missing_reports_the_api_servers_message() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let work = manifest_work(
        "cluster-a",
        "missing-namespace",
        vec![json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "settings", "namespace": "not-there-yet"},
            "data": {"a": "1"}})],
    );
    let works = fleet
        .create_work(&work)
        .await
        .expect("the hub accepts the work");
    let reported =
        |w: &ManifestWork| manifest_condition(w, 0, "Applied").is_some_and(|c| c.status == "False");
    let work = wait_until(
        &works,
        "missing-namespace",
        "the manifest's failure reported",
        APPLY_TIMEOUT,
        reported,
    )
    .await
    .expect("reported");
    let applied = manifest_condition(&work, 0, "Applied").expect("condition");
    assert_eq!(applied.reason, "NotFound", "{applied:?}");
    assert!(
        applied
            .message
            .contains("namespaces \"not-there-yet\" not found"),
        "the API server's own words: {}",
        applied.message
    );

    // The failure is transient: the namespace appearing lets it apply.
    let namespaces: Api<Namespace> = Api::all(fleet.spoke("cluster-a").client.clone());
    let mut namespace = Namespace::default();
    namespace.metadata.name = Some("not-there-yet".into());
    namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .expect("namespace created");
    wait_until(
        &works,
        "missing-namespace",
        "the manifest applied once its namespace exists",
        APPLY_TIMEOUT,
        |w| manifest_condition(w, 0, "Applied").is_some_and(|c| c.status == "True"),
    )
    .await
    .expect("applied");
}
