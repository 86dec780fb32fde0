//! Figures, not a timed assertion: how long the hub takes from a
//! ManifestWorkReplicaSet's template change to every generated work written,
//! across 1,000 clusters (issue 13). Ignored by default (it creates 1,000
//! namespaces and ManagedClusters); run it with
//! `cargo test -p ferry-e2e --test e2e fleet_scale:: -- --ignored --nocapture`.
//! It fails only when the works are not all written.

use std::time::{Duration, Instant};

use ferry_api::contract::REPLICA_SET_LABEL;
use ferry_api::contract::UNREACHABLE_TAINT;
use ferry_api::managed_cluster::{ManagedCluster, ManagedClusterSpec};
use ferry_api::manifest_work::ManifestWork;
use ferry_api::placement::Placement;
use ferry_api::replica_set::ManifestWorkReplicaSet;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::work_helpers::config_map;
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

const CLUSTERS: usize = 1000;

/// How many generated works hold `version`, listed from the API server.
async fn works_at(client: &Client, version: &str) -> usize {
    let works: Api<ManifestWork> = Api::all(client.clone());
    let list = works
        .list(&ListParams::default().labels(&format!("{REPLICA_SET_LABEL}=default.scale")))
        .await
        .expect("list works");
    list.items
        .iter()
        .filter(|w| {
            w.spec
                .workload
                .manifests
                .first()
                .is_some_and(|m| m.0["data"]["version"] == version)
        })
        .count()
}

async fn wait_all_at(client: &Client, version: &str) -> Duration {
    let started = Instant::now();
    loop {
        if works_at(client, version).await == CLUSTERS {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "not every work holds {version}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: prints figures; run with --ignored"]
async fn template_change_to_every_work_written_for_1000_clusters() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&[]))
        .await
        .expect("fleet starts");
    let hub = fleet.hub_client.clone();
    let created = Instant::now();
    stream::iter(0..CLUSTERS)
        .map(|i| {
            let hub = hub.clone();
            async move {
                let name = format!("scale-{i:04}");
                let ns: Namespace =
                    serde_json::from_value(json!({"metadata": {"name": name}})).expect("ns");
                Api::<Namespace>::all(hub.clone())
                    .create(&PostParams::default(), &ns)
                    .await?;
                Api::<ManagedCluster>::all(hub)
                    .create(
                        &PostParams::default(),
                        &ManagedCluster::new(&name, ManagedClusterSpec::default()),
                    )
                    .await
            }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<_>>()
        .await
        .expect("create clusters");
    eprintln!(
        "created {CLUSTERS} namespaces and ManagedClusters in {:?}",
        created.elapsed()
    );
    let placement: Placement = serde_json::from_value(json!({
        "apiVersion": "cluster.ferry.dev/v1alpha1", "kind": "Placement",
        "metadata": {"name": "scale", "namespace": "default"},
        "spec": {"tolerations": [{"key": UNREACHABLE_TAINT, "operator": "Exists"}]},
    }))
    .expect("placement");
    ferry_e2e::helpers::placement_helpers::bind_global(&hub, "default").await;
    let decided = Instant::now();
    let placements: Api<Placement> = Api::namespaced(hub.clone(), "default");
    placements
        .create(&PostParams::default(), &placement)
        .await
        .expect("placement");
    loop {
        let p = placements.get("scale").await.expect("read placement");
        if p.status
            .is_some_and(|s| s.number_of_selected_clusters as usize == CLUSTERS)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!(
        "placement of {CLUSTERS} clusters decided in {:?}",
        decided.elapsed()
    );
    let template = |v: &str| json!({"workload": {"manifests": [config_map("default", "scale", json!({"version": v}))]}});
    let rs: ManifestWorkReplicaSet = serde_json::from_value(json!({
        "apiVersion": "work.ferry.dev/v1alpha1", "kind": "ManifestWorkReplicaSet",
        "metadata": {"name": "scale", "namespace": "default"},
        "spec": {"manifestWorkTemplate": template("v1"), "placementRefs": [{"name": "scale"}]},
    }))
    .expect("replica set");
    let sets: Api<ManifestWorkReplicaSet> = Api::namespaced(hub.clone(), "default");
    sets.create(&PostParams::default(), &rs)
        .await
        .expect("replica set");
    let first = wait_all_at(&hub, "v1").await;
    eprintln!("replica set created -> {CLUSTERS} works written: {first:?}");
    let changed = Instant::now();
    sets.patch(
        "scale",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"manifestWorkTemplate": template("v2")}})),
    )
    .await
    .expect("change template");
    wait_all_at(&hub, "v2").await;
    eprintln!(
        "template change -> {CLUSTERS} works rewritten: {:?}",
        changed.elapsed()
    );
    fleet.stop().await;
}
