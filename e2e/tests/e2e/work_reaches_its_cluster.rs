//! A work reaches exactly the cluster whose namespace it lives in.

use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::work_helpers::{config_map, manifest_work, wait_applied};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_work_in_cluster_a_lands_on_spoke_a_and_never_on_spoke_b() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a", "cluster-b"]))
        .await
        .expect("fleet starts");
    for (cluster, object) in [("cluster-a", "only-on-a"), ("cluster-b", "only-on-b")] {
        let work = manifest_work(
            cluster,
            object,
            vec![config_map("default", object, json!({"k": "v"}))],
        );
        let works = fleet.create_work(&work).await.expect("create work");
        wait_applied(&works, object).await.expect("work applied");
    }

    // Each agent has applied its own work, so it has seen everything the hub
    // sent it: the other cluster's object must not be there.
    let on_a: Api<ConfigMap> = Api::namespaced(fleet.spoke("cluster-a").client.clone(), "default");
    let on_b: Api<ConfigMap> = Api::namespaced(fleet.spoke("cluster-b").client.clone(), "default");
    assert!(on_a.get_opt("only-on-a").await.expect("read A").is_some());
    assert!(on_b.get_opt("only-on-b").await.expect("read B").is_some());
    assert!(
        on_b.get_opt("only-on-a").await.expect("read B").is_none(),
        "cluster-a's object reached cluster-b"
    );
    assert!(
        on_a.get_opt("only-on-b").await.expect("read A").is_none(),
        "cluster-b's object reached cluster-a"
    );
    fleet.stop().await;
}
