//! A work reaches exactly the cluster whose namespace it lives in.

use std::time::Duration;

use ferry_e2e::fleet::{Fleet, FleetOptions};
use ferry_e2e::wait::wait_until;
use ferry_e2e::work_helpers::{config_map, is_applied_at_current_generation, manifest_work};
use ferry_hub::manifest_work::ManifestWork;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};

const TIMEOUT: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_work_in_cluster_a_lands_on_spoke_a_and_never_on_spoke_b() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a", "cluster-b"]))
        .await
        .expect("fleet starts");
    let create = |cluster: &str, name: &str, cm: &str| {
        let api: Api<ManifestWork> = Api::namespaced(fleet.hub_client.clone(), cluster);
        let work = manifest_work(
            cluster,
            name,
            vec![config_map("default", cm, serde_json::json!({"k": "v"}))],
        );
        async move {
            api.create(&PostParams::default(), &work)
                .await
                .expect("create work")
        }
    };
    create("cluster-a", "for-a", "only-on-a").await;
    create("cluster-b", "for-b", "only-on-b").await;

    for (cluster, work) in [("cluster-a", "for-a"), ("cluster-b", "for-b")] {
        let works: Api<ManifestWork> = Api::namespaced(fleet.hub_client.clone(), cluster);
        wait_until(
            &works,
            work,
            "work applied",
            TIMEOUT,
            is_applied_at_current_generation,
        )
        .await
        .expect("both works applied");
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
