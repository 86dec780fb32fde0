//! Upgrading a hub whose ManagedClusters an earlier version kept in
//! `work.ferry.dev`: the new hub carries every one over to
//! `cluster.ferry.dev` before it reads them, with its labels, acceptance,
//! taints and status; the agent connects again as the same cluster and its
//! works stay applied; a second start carries nothing.

use std::time::Duration;

use ferry_api::managed_cluster::{LEGACY_GROUP, ManagedCluster};
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{
    APPLY_TIMEOUT, config_map, is_applied_at_current_generation, manifest_work, wait_applied,
};
use ferry_hub::clusters::legacy_group::{carry_over_legacy_clusters, legacy_resource};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, CustomResourceExt, ResourceExt};
use serde_json::{Value, json};

/// The CRD an earlier hub installed: today's ManagedCluster schema, served
/// in the legacy group.
async fn install_legacy_crd(admin: &Client) {
    let mut crd = ManagedCluster::crd();
    crd.spec.group = LEGACY_GROUP.into();
    let name = format!("managedclusters.{LEGACY_GROUP}");
    crd.metadata.name = Some(name.clone());
    let crds: Api<CustomResourceDefinition> = Api::all(admin.clone());
    crds.patch(
        &name,
        &PatchParams::apply("earlier-hub").force(),
        &Patch::Apply(&crd),
    )
    .await
    .expect("the legacy CRD installs");
    tokio::time::timeout(
        APPLY_TIMEOUT,
        await_condition(crds, &name, conditions::is_crd_established()),
    )
    .await
    .expect("the legacy CRD is established in time")
    .expect("watching the legacy CRD");
}

fn legacy_api(admin: &Client) -> Api<DynamicObject> {
    Api::all_with(admin.clone(), &legacy_resource())
}

/// Writes `name` into the legacy group as an earlier hub held it: `spec`,
/// `labels` and `status`.
async fn write_legacy(admin: &Client, name: &str, labels: Value, spec: Value, status: Value) {
    let api = legacy_api(admin);
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{LEGACY_GROUP}/v1alpha1"),
        "kind": "ManagedCluster",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
    }))
    .expect("object");
    api.create(&PostParams::default(), &object)
        .await
        .expect("the legacy cluster is written");
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": status})),
    )
    .await
    .expect("the legacy cluster's status is written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgraded_hub_carries_its_clusters_to_the_new_group_and_its_agents_carry_on() {
    let mut options = FleetOptions::with_spokes(&["cluster-a"]);
    options.heartbeat = Duration::from_secs(1);
    let mut fleet = Fleet::start(options).await.expect("fleet starts");
    let admin = fleet.hub_client.clone();
    let works = fleet
        .create_work(&manifest_work(
            "cluster-a",
            "before",
            vec![config_map("default", "before", json!({"v": "1"}))],
        ))
        .await
        .expect("create");
    wait_applied(&works, "before").await.expect("applied");

    // The hub as an earlier version left it: its clusters in the legacy
    // group only (cluster-a as its join made it, plus a label and a taint
    // a user set; cluster-b denied, with no agent).
    fleet.stop_hub().await;
    let clusters: Api<ManagedCluster> = Api::all(admin.clone());
    let joined = clusters.get("cluster-a").await.expect("cluster-a");
    let mut labels = serde_json::to_value(joined.labels()).expect("labels");
    labels["team"] = json!("blue");
    install_legacy_crd(&admin).await;
    write_legacy(
        &admin,
        "cluster-a",
        labels,
        json!({
            "hubAcceptsClient": true,
            "taints": [{"key": "example.com/maintenance", "effect": "PreferNoSelect"}],
        }),
        json!({"agentVersion": "0.0.9", "connected": false}),
    )
    .await;
    write_legacy(
        &admin,
        "cluster-b",
        json!({"region": "eu"}),
        json!({"hubAcceptsClient": false}),
        json!({
            "agentVersion": "0.0.9",
            "clusterClaims": [{"name": "region.open-cluster-management.io", "value": "eu-west"}],
        }),
    )
    .await;
    clusters
        .delete("cluster-a", &DeleteParams::default())
        .await
        .expect("cluster-a leaves the new group");
    tokio::time::timeout(
        APPLY_TIMEOUT,
        await_condition(clusters.clone(), "cluster-a", conditions::is_deleted("")),
    )
    .await
    .expect("cluster-a is gone from the new group in time")
    .expect("watching cluster-a");

    // The new hub starts: both clusters are in the new group, as they were.
    fleet.start_hub().await.expect("the upgraded hub starts");
    let carried = wait_until(
        &clusters,
        "cluster-a",
        "cluster-a carried over and its agent connected",
        APPLY_TIMEOUT,
        |c: &ManagedCluster| c.status.as_ref().is_some_and(|s| s.connected),
    )
    .await
    .expect("the agent connects again as cluster-a");
    assert_eq!(
        carried.labels().get("team").map(String::as_str),
        Some("blue")
    );
    assert!(
        carried
            .spec
            .taints
            .iter()
            .any(|t| t.key == "example.com/maintenance"),
        "{:?}",
        carried.spec.taints
    );
    let denied = clusters.get("cluster-b").await.expect("cluster-b carried");
    assert!(!denied.spec.hub_accepts_client);
    assert_eq!(
        denied.labels().get("region").map(String::as_str),
        Some("eu")
    );
    let status = denied.status.expect("cluster-b's status carried");
    assert_eq!(status.agent_version, "0.0.9");
    assert_eq!(
        status
            .cluster_claims
            .iter()
            .map(|c| (c.name.as_str(), c.value.as_str()))
            .collect::<Vec<_>>(),
        [("region.open-cluster-management.io", "eu-west")]
    );
    // Nothing of the legacy group is touched: the operator deletes it.
    assert_eq!(
        legacy_api(&admin)
            .list(&Default::default())
            .await
            .expect("legacy list")
            .items
            .len(),
        2
    );

    // The works stayed applied, and a new one reaches the cluster.
    let before = works.get("before").await.expect("before");
    assert!(is_applied_at_current_generation(&before));
    fleet
        .create_work(&manifest_work(
            "cluster-a",
            "after",
            vec![config_map("default", "after", json!({"v": "1"}))],
        ))
        .await
        .expect("create after the upgrade");
    wait_applied(&works, "after")
        .await
        .expect("applied after the upgrade");
    let spoke: Api<ConfigMap> = Api::namespaced(fleet.spoke("cluster-a").client.clone(), "default");
    assert!(spoke.get_opt("before").await.expect("read").is_some());

    // Every start carries over again: nothing is left to carry.
    assert_eq!(
        carry_over_legacy_clusters(&admin).await.expect("carried"),
        0
    );
    fleet.stop().await;
}
