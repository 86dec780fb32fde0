//! The hub publishes SIG Multicluster's ClusterProfile for every
//! ManagedCluster (issue 33), read here as a consumer of the cluster
//! inventory reads it: the CRD installed from the upstream Go module (not
//! ferry's copy) after the hub started, profiles read untyped by the
//! upstream group and kind; the namespace created after the CRD. A profile per cluster with the manager, labels
//! and properties, readable with exactly the rights of the example reader;
//! a cluster joined later gets one; a stopped agent makes
//! `ControlPlaneHealthy` say so, and a restarted one brings it back; a
//! deleted cluster's profile, a deleted profile and a stray one are each
//! put right; another manager's profile is left alone; the CRD going away
//! stops publishing and says so. And the CRD ferry ships is the module's
//! file, byte for byte, under its header.

use std::time::{Duration, Instant};

use ferry_api::contract::CLUSTER_SET_LABEL;
use ferry_api::managed_cluster::ManagedCluster;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::harness::hub_metrics::hub_metric;
use ferry_e2e::harness::image::workspace_dir;
use ferry_e2e::helpers::cluster_inventory::{
    CLUSTER_PROFILE_CRD, MODULE, PLACEMENT_DECISION_CRD, VERSION, cluster_profiles,
    install_cluster_profile_crd, module_file,
};
use ferry_e2e::helpers::namespaces::create_namespace;
use ferry_e2e::helpers::wait::{wait_deleted, wait_until};
use ferry_hub::join::hub_side::join_cluster;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

/// Where the hub publishes in this test: the chart's default (the release
/// namespace, `ferry`), which the test (not the hub) creates, as does the
/// example reader.
const INVENTORY: &str = "ferry";
/// The consumer of `examples/cluster-inventory/profile-reader.yaml`.
const READER: &str = "system:serviceaccount:ferry:inventory-reader";
/// Long enough for a sweep (every 30 s) or a CRD and namespace check
/// (every 10 s) on a loaded machine.
const TIMEOUT: Duration = Duration::from_secs(90);
const PUBLISHING: &str = "ferry_hub_cluster_profiles_publishing";

fn condition<'a>(profile: &'a DynamicObject, type_: &str) -> Option<&'a Value> {
    profile.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

fn says(profile: &DynamicObject, type_: &str, status: &str, reason: &str) -> bool {
    condition(profile, type_).is_some_and(|c| c["status"] == status && c["reason"] == reason)
}

fn property<'a>(profile: &'a DynamicObject, name: &str) -> Option<&'a str> {
    profile.data["status"]["properties"]
        .as_array()?
        .iter()
        .find(|p| p["name"] == name)?["value"]
        .as_str()
}

fn label<'a>(profile: &'a DynamicObject, key: &str) -> Option<&'a str> {
    profile.labels().get(key).map(String::as_str)
}

/// A connected cluster's profile, as ferry publishes it, in cluster set `set`.
fn published(name: &'static str, set: &'static str) -> impl Fn(&DynamicObject) -> bool {
    move |p: &DynamicObject| {
        label(p, "x-k8s.io/cluster-manager") == Some("ferry")
            && label(p, "cluster.open-cluster-management.io/clusterset") == Some(set)
            && p.data["spec"]["clusterManager"]["name"] == "ferry"
            && p.data["spec"]["displayName"] == name
            && property(p, "agent.ferry.dev/version") == Some(env!("CARGO_PKG_VERSION"))
            && property(p, "clusterset.ferry.dev/name") == Some(set)
            && says(p, "ControlPlaneHealthy", "True", "AgentConnected")
            && says(p, "Joined", "True", "AgentJoined")
    }
}

async fn publishing(fleet: &Fleet) -> f64 {
    hub_metric(fleet.hub_probes_addr, PUBLISHING)
        .await
        .expect("scrape the hub")
}

async fn create_profile(profiles: &Api<DynamicObject>, name: &str, manager: &str, labels: Value) {
    let profile: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "multicluster.x-k8s.io/v1alpha1",
        "kind": "ClusterProfile",
        "metadata": {"name": name, "namespace": INVENTORY, "labels": labels},
        "spec": {"displayName": name, "clusterManager": {"name": manager}},
    }))
    .expect("profile");
    profiles
        .create(&PostParams::default(), &profile)
        .await
        .unwrap_or_else(|e| panic!("create ClusterProfile {name}: {e}"));
}

/// Applies every object of `examples/cluster-inventory/profile-reader.yaml`.
async fn apply_reader_example(client: &Client) {
    let path = workspace_dir().join("examples/cluster-inventory/profile-reader.yaml");
    let text = std::fs::read_to_string(&path).expect("read the example");
    for document in serde_yaml::Deserializer::from_str(&text) {
        let object: DynamicObject =
            serde::Deserialize::deserialize(document).expect("an object of the example");
        let resource = match object.types.as_ref().map(|t| t.kind.as_str()) {
            Some("ServiceAccount") => ApiResource::erase::<ServiceAccount>(&()),
            Some("Role") => ApiResource::erase::<Role>(&()),
            Some("RoleBinding") => ApiResource::erase::<RoleBinding>(&()),
            other => panic!("the example holds an unexpected {other:?}"),
        };
        let namespace = object.namespace().expect("namespaced");
        Api::<DynamicObject>::namespaced_with(client.clone(), &namespace, &resource)
            .patch(
                &object.name_any(),
                &PatchParams::apply("ferry-e2e"),
                &Patch::Apply(&object),
            )
            .await
            .unwrap_or_else(|e| panic!("apply {}: {e}", object.name_any()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_managed_cluster_has_a_cluster_profile_that_follows_it() {
    let mut options = FleetOptions::with_spokes(&["cluster-a", "cluster-b"]);
    options.cluster_profile_namespace = Some(INVENTORY.into());
    let mut fleet = Fleet::start(options).await.expect("fleet starts");
    let client = fleet.hub_client.clone();
    let clusters: Api<ManagedCluster> = Api::all(client.clone());
    for name in ["cluster-a", "cluster-b"] {
        wait_until(&clusters, name, "connected", TIMEOUT, |c| {
            c.status.as_ref().is_some_and(|s| s.connected)
        })
        .await
        .expect("the hub serves its agents without the ClusterProfile CRD");
    }

    // Installed after the hub started: the hub finds it at run time.
    install_cluster_profile_crd(&client)
        .await
        .expect("install the upstream CRD");
    // And the namespace after the CRD: the hub waits for both.
    create_namespace(&client, INVENTORY).await;
    let profiles = cluster_profiles(&client, INVENTORY);
    for name in ["cluster-a", "cluster-b"] {
        wait_until(
            &profiles,
            name,
            "profile published",
            TIMEOUT,
            published(name, "default"),
        )
        .await
        .expect("a profile per joined cluster");
    }
    assert_eq!(publishing(&fleet).await, 1.0);

    // A consumer with exactly the example's rights reads them, and can
    // write nothing.
    apply_reader_example(&client).await;
    let reader = cluster_profiles(
        &fleet.hub.client_as(READER).await.expect("reader client"),
        INVENTORY,
    );
    let listed = reader
        .list(&ListParams::default().labels("x-k8s.io/cluster-manager=ferry"))
        .await
        .expect("the reader lists ferry's profiles");
    let mut names: Vec<String> = listed.items.iter().map(|p| p.name_any()).collect();
    names.sort();
    assert_eq!(names, ["cluster-a", "cluster-b"]);
    match reader.delete("cluster-a", &DeleteParams::default()).await {
        Err(kube::Error::Api(e)) if e.code == 403 => {}
        other => panic!("the reader must not delete a profile: {other:?}"),
    }

    // The cluster's set follows its label.
    clusters
        .patch(
            "cluster-a",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {CLUSTER_SET_LABEL: "team-a"}}})),
        )
        .await
        .expect("move cluster-a into team-a");
    wait_until(
        &profiles,
        "cluster-a",
        "profile in team-a",
        TIMEOUT,
        published("cluster-a", "team-a"),
    )
    .await
    .expect("the profile follows the cluster's set");

    // A cluster joined later gets a profile; its agent never connected.
    join_cluster(&client, "cluster-late", 3600)
        .await
        .expect("join cluster-late");
    wait_until(
        &profiles,
        "cluster-late",
        "profile of a later cluster",
        TIMEOUT,
        |p| {
            label(p, "x-k8s.io/cluster-manager") == Some("ferry")
                && says(p, "Joined", "False", "AgentNeverConnected")
                && says(p, "ControlPlaneHealthy", "Unknown", "AgentNeverConnected")
                && property(p, "agent.ferry.dev/version").is_none()
        },
    )
    .await
    .expect("a cluster joining later gets a profile");

    // The agent stops: the profile says the hub cannot tell; it comes back.
    fleet.stop_agent("cluster-b").await;
    let down = wait_until(&profiles, "cluster-b", "agent disconnected", TIMEOUT, |p| {
        says(p, "ControlPlaneHealthy", "Unknown", "AgentDisconnected")
            && says(p, "Joined", "True", "AgentJoined")
    })
    .await
    .expect("a stopped agent shows in the profile");
    let message = condition(&down, "ControlPlaneHealthy").expect("condition")["message"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(message.contains("disconnected"), "{message}");
    fleet.start_agent("cluster-b");
    wait_until(
        &profiles,
        "cluster-b",
        "agent back",
        TIMEOUT,
        published("cluster-b", "default"),
    )
    .await
    .expect("a restarted agent shows in the profile");

    // A profile deleted by someone else is written again.
    let old = profiles.get("cluster-a").await.expect("read profile");
    profiles
        .delete("cluster-a", &DeleteParams::default())
        .await
        .expect("delete cluster-a's profile");
    wait_until(
        &profiles,
        "cluster-a",
        "profile written again",
        TIMEOUT,
        |p| p.uid() != old.uid() && published("cluster-a", "team-a")(p),
    )
    .await
    .expect("a deleted profile is put back");

    // A stray profile of ferry's is swept; another manager's stays.
    create_profile(
        &profiles,
        "cluster-ghost",
        "ferry",
        json!({"x-k8s.io/cluster-manager": "ferry"}),
    )
    .await;
    create_profile(
        &profiles,
        "cluster-elsewhere",
        "open-cluster-management",
        json!({"x-k8s.io/cluster-manager": "open-cluster-management"}),
    )
    .await;
    wait_deleted(&profiles, "cluster-ghost", "stray profile swept", TIMEOUT)
        .await
        .expect("ferry's profile of no cluster is swept");
    assert!(
        profiles
            .get_opt("cluster-elsewhere")
            .await
            .expect("read")
            .is_some(),
        "the sweep that removed ferry's stray profile left another manager's alone"
    );

    // A deleted cluster's profile goes.
    clusters
        .delete("cluster-late", &DeleteParams::default())
        .await
        .expect("delete cluster-late");
    wait_deleted(
        &profiles,
        "cluster-late",
        "profile of a deleted cluster",
        TIMEOUT,
    )
    .await
    .expect("a deleted ManagedCluster's profile is removed");
    for name in ["cluster-a", "cluster-b"] {
        assert!(
            profiles.get_opt(name).await.expect("read").is_some(),
            "{name}'s profile stays"
        );
    }

    // The CRD goes away: the hub says so and serves on.
    Api::<CustomResourceDefinition>::all(client.clone())
        .delete(
            "clusterprofiles.multicluster.x-k8s.io",
            &DeleteParams::default(),
        )
        .await
        .expect("delete the CRD");
    let deadline = Instant::now() + TIMEOUT;
    while publishing(&fleet).await != 0.0 {
        assert!(
            Instant::now() < deadline,
            "{PUBLISHING} still 1 {TIMEOUT:?} after the CRD was deleted"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let connected = clusters.get("cluster-a").await.expect("read cluster-a");
    assert!(connected.status.is_some_and(|s| s.connected));
    fleet.stop().await;
}

/// The shipped copies are the module's file, apart from a header of
/// comment lines naming the module and version.
#[tokio::test]
async fn the_shipped_inventory_crds_are_the_upstream_modules_files() {
    for (file, shipped) in [
        (CLUSTER_PROFILE_CRD, "clusterprofiles.yaml"),
        (PLACEMENT_DECISION_CRD, "inventory-placementdecisions.yaml"),
    ] {
        let upstream = tokio::task::spawn_blocking(move || module_file(file))
            .await
            .expect("blocking task")
            .expect("the module's CRD file (go mod download)");
        for dir in ["deploy/crds", "deploy/charts/ferry-hub/crds"] {
            let shipped = format!("{dir}/{shipped}");
            let text = std::fs::read_to_string(workspace_dir().join(&shipped))
                .unwrap_or_else(|e| panic!("read {shipped}: {e}"));
            let body_at = text
                .lines()
                .take_while(|l| l.starts_with('#'))
                .map(|l| l.len() + 1)
                .sum::<usize>();
            let (header, body) = text.split_at(body_at);
            assert!(
                header.contains(MODULE) && header.contains(VERSION),
                "{shipped}'s header does not name {MODULE} {VERSION}:\n{header}"
            );
            assert!(
                body == upstream,
                "{shipped} differs from {file} of {MODULE}@{VERSION}; copy it again under the header"
            );
        }
    }
}
