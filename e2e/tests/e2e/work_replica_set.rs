//! ManifestWorkReplicaSet: one template becomes a ManifestWork on every
//! cluster its Placement chooses (rollout `All`), a cluster leaving the
//! decisions loses its work, and deleting the replica set removes its works
//! with either cascade policy; an override patches only the clusters its
//! selector matches, a bad one fails only its cluster, and `ferry-hub
//! render` prints what the controller wrote (issue 13).

use std::time::Duration;

use ferry_api::contract::{PLACEMENT_NAME_LABEL, REPLICA_SET_LABEL};
use ferry_api::manifest_work::ManifestWork;
use ferry_api::replica_set::ManifestWorkReplicaSet;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::placement_helpers;
use ferry_e2e::helpers::wait::{wait_deleted, wait_until};
use ferry_e2e::helpers::work_helpers::{APPLY_TIMEOUT, config_map, wait_applied};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

const NAMESPACE: &str = "default";

async fn create_placement(client: &Client, name: &str, spec: serde_json::Value) {
    placement_helpers::create_placement(client, NAMESPACE, name, spec).await;
}

async fn create_replica_set(client: &Client, name: &str, placement: &str, cascade: &str) {
    let rs: ManifestWorkReplicaSet = serde_json::from_value(json!({
        "apiVersion": "work.ferry.dev/v1alpha1",
        "kind": "ManifestWorkReplicaSet",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "manifestWorkTemplate": {"workload": {"manifests": [
                config_map("default", name, json!({"from": "replica-set"})),
            ]}},
            "placementRefs": [{"name": placement, "rolloutStrategy": {"type": "All"}}],
            "cascadeDeletionPolicy": cascade,
        },
    }))
    .expect("replica set");
    Api::<ManifestWorkReplicaSet>::namespaced(client.clone(), NAMESPACE)
        .create(&PostParams::default(), &rs)
        .await
        .expect("create ManifestWorkReplicaSet");
}

fn condition_true(rs: &ManifestWorkReplicaSet, type_: &str) -> bool {
    rs.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == type_ && c.status == "True")
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_rollout_gives_every_chosen_cluster_a_work_and_a_leaving_cluster_loses_it() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["spoke-a", "spoke-b"]))
        .await
        .expect("fleet starts");
    let hub = fleet.hub_client.clone();
    let clusters: Api<ferry_api::managed_cluster::ManagedCluster> = Api::all(hub.clone());
    for name in ["spoke-a", "spoke-b"] {
        clusters
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"env": "prod"}}})),
            )
            .await
            .expect("label cluster");
    }
    create_placement(
        &hub,
        "prod",
        json!({"predicates": [{"requiredClusterSelector": {"labelSelector": {"matchLabels": {"env": "prod"}}}}]}),
    )
    .await;
    create_replica_set(&hub, "hello-fleet", "prod", "Background").await;

    for cluster in ["spoke-a", "spoke-b"] {
        let works: Api<ManifestWork> = Api::namespaced(hub.clone(), cluster);
        let work = wait_applied(&works, "hello-fleet")
            .await
            .expect("the generated work is applied");
        assert_eq!(
            work.labels().get(REPLICA_SET_LABEL).map(String::as_str),
            Some("default.hello-fleet")
        );
        assert_eq!(
            work.labels().get(PLACEMENT_NAME_LABEL).map(String::as_str),
            Some("prod")
        );
        let on_spoke: Api<ConfigMap> =
            Api::namespaced(fleet.spoke(cluster).client.clone(), "default");
        assert!(
            on_spoke
                .get_opt("hello-fleet")
                .await
                .expect("read spoke")
                .is_some()
        );
    }
    let sets: Api<ManifestWorkReplicaSet> = Api::namespaced(hub.clone(), NAMESPACE);
    let rs = wait_until(&sets, "hello-fleet", "all applied", APPLY_TIMEOUT, |rs| {
        condition_true(rs, "ManifestworkApplied")
            && condition_true(rs, "PlacementVerified")
            && condition_true(rs, "PlacementRolledOut")
    })
    .await
    .expect("the replica set reports every work applied");
    let status = rs.status.expect("status");
    assert_eq!(
        (
            status.summary.total,
            status.summary.applied,
            status.summary.updated
        ),
        (2, 2, 2)
    );
    assert_eq!(status.placement_summary.len(), 1);
    assert_eq!(status.placement_summary[0].summary.total, 2);

    // spoke-b leaves the placement: its work goes, and with it the object.
    clusters
        .patch(
            "spoke-b",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"env": "dev"}}})),
        )
        .await
        .expect("relabel");
    let works_b: Api<ManifestWork> = Api::namespaced(hub.clone(), "spoke-b");
    wait_deleted(
        &works_b,
        "hello-fleet",
        "work of a leaving cluster",
        APPLY_TIMEOUT,
    )
    .await
    .expect("a cluster leaving the decisions loses its work");
    let on_b: Api<ConfigMap> = Api::namespaced(fleet.spoke("spoke-b").client.clone(), "default");
    wait_deleted(
        &on_b,
        "hello-fleet",
        "object on the leaving cluster",
        APPLY_TIMEOUT,
    )
    .await
    .expect("the object leaves with the work");
    wait_until(&sets, "hello-fleet", "one work", APPLY_TIMEOUT, |rs| {
        rs.status.as_ref().is_some_and(|s| s.summary.total == 1)
    })
    .await
    .expect("the summary counts one work");
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_replica_set_removes_its_works_with_either_cascade_policy() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["spoke-a"]))
        .await
        .expect("fleet starts");
    let hub = fleet.hub_client.clone();
    create_placement(&hub, "everywhere", json!({})).await;
    create_replica_set(&hub, "background", "everywhere", "Background").await;
    create_replica_set(&hub, "foreground", "everywhere", "Foreground").await;
    let works: Api<ManifestWork> = Api::namespaced(hub.clone(), "spoke-a");
    for name in ["background", "foreground"] {
        wait_applied(&works, name).await.expect("work applied");
    }
    let sets: Api<ManifestWorkReplicaSet> = Api::namespaced(hub.clone(), NAMESPACE);

    // Foreground: the replica set stays until its work is gone.
    sets.delete("foreground", &DeleteParams::default())
        .await
        .expect("delete foreground");
    wait_deleted(&sets, "foreground", "foreground replica set", APPLY_TIMEOUT)
        .await
        .expect("the replica set goes once its works are gone");
    assert!(
        works.get_opt("foreground").await.expect("read").is_none(),
        "a Foreground replica set went before its work"
    );

    // Background: the replica set goes at once, its work after.
    sets.delete("background", &DeleteParams::default())
        .await
        .expect("delete background");
    wait_deleted(&sets, "background", "background replica set", APPLY_TIMEOUT)
        .await
        .expect("the replica set goes");
    wait_deleted(&works, "background", "background work", APPLY_TIMEOUT)
        .await
        .expect("its work is removed");
    let on_spoke: Api<ConfigMap> =
        Api::namespaced(fleet.spoke("spoke-a").client.clone(), "default");
    for name in ["background", "foreground"] {
        wait_deleted(
            &on_spoke,
            name,
            "object on the spoke",
            Duration::from_secs(60),
        )
        .await
        .expect("the objects leave the spoke");
    }
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_override_patches_one_cluster_only_and_a_bad_override_fails_only_its_cluster() {
    let spokes = ["spoke-a", "spoke-b", "spoke-c"];
    let fleet = Fleet::start(FleetOptions::with_spokes(&spokes))
        .await
        .expect("fleet starts");
    let hub = fleet.hub_client.clone();
    let clusters: Api<ferry_api::managed_cluster::ManagedCluster> = Api::all(hub.clone());
    for (name, labels) in [
        ("spoke-a", json!({"region": "eu", "tier": "gold"})),
        ("spoke-b", json!({"region": "us"})),
        ("spoke-c", json!({"region": "us", "broken": "yes"})),
    ] {
        clusters
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": labels}})),
            )
            .await
            .expect("label cluster");
    }
    create_placement(&hub, "everywhere", json!({})).await;
    let target = json!({"kind": "ConfigMap", "namespace": "default", "name": "tuned"});
    let rs: ManifestWorkReplicaSet = serde_json::from_value(json!({
        "apiVersion": "work.ferry.dev/v1alpha1",
        "kind": "ManifestWorkReplicaSet",
        "metadata": {"name": "tuned", "namespace": NAMESPACE},
        "spec": {
            "manifestWorkTemplate": {"workload": {"manifests": [
                config_map("default", "tuned", json!({
                    "cluster": "${CLUSTER_NAME}",
                    "region": "${CLUSTER_LABEL:region}",
                })),
            ]}},
            // The bad override's cluster counts as one failure: tolerated.
            "placementRefs": [{"name": "everywhere",
                "rolloutStrategy": {"type": "All", "all": {"maxFailures": 1}}}],
            "overrides": [
                {"name": "gold", "clusterSelector": {"matchLabels": {"tier": "gold"}},
                 "resourceIdentifier": target,
                 "jsonPatch": [{"op": "add", "path": "/data/tier", "value": "gold"}]},
                {"name": "broken", "clusterSelector": {"matchLabels": {"broken": "yes"}},
                 "resourceIdentifier": target,
                 "jsonPatch": [{"op": "remove", "path": "/data/missing"}]},
            ],
        },
    }))
    .expect("replica set");
    let sets: Api<ManifestWorkReplicaSet> = Api::namespaced(hub.clone(), NAMESPACE);
    sets.create(&PostParams::default(), &rs)
        .await
        .expect("create ManifestWorkReplicaSet");

    for (cluster, data) in [
        (
            "spoke-a",
            json!({"cluster": "spoke-a", "region": "eu", "tier": "gold"}),
        ),
        ("spoke-b", json!({"cluster": "spoke-b", "region": "us"})),
    ] {
        let on_spoke: Api<ConfigMap> =
            Api::namespaced(fleet.spoke(cluster).client.clone(), "default");
        let want: std::collections::BTreeMap<String, String> =
            serde_json::from_value(data).expect("data");
        wait_until(
            &on_spoke,
            "tuned",
            "the rendered ConfigMap",
            APPLY_TIMEOUT,
            |cm| cm.data.as_ref() == Some(&want),
        )
        .await
        .expect("each cluster gets its own rendering of the template");
    }
    let rs = wait_until(
        &sets,
        "tuned",
        "the override failure",
        APPLY_TIMEOUT,
        |rs| {
            rs.status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "OverridesRendered" && c.status == "False")
                    && s.summary.applied == 2
            })
        },
    )
    .await
    .expect("the replica set reports the failing override");
    let status = rs.status.expect("status");
    let rendered = status
        .conditions
        .iter()
        .find(|c| c.type_ == "OverridesRendered")
        .expect("condition");
    assert_eq!(rendered.reason, "OverrideFailed");
    assert!(
        rendered.message.contains("cluster spoke-c")
            && rendered.message.contains("override \"broken\"")
            && rendered.message.contains("/data/missing"),
        "{}",
        rendered.message
    );
    assert!(
        !rendered.message.contains("spoke-a") && !rendered.message.contains("spoke-b"),
        "{}",
        rendered.message
    );
    // The status is written after the writes of the same reconcile: the
    // failing cluster got no work.
    let works_c: Api<ManifestWork> = Api::namespaced(hub.clone(), "spoke-c");
    assert!(
        works_c.get_opt("tuned").await.expect("read").is_none(),
        "the cluster whose override fails must get no work"
    );
    assert_eq!(status.summary.updated, 2);

    // The dry run, reading the same decisions and labels from the hub,
    // prints exactly the specs the controller wrote, and names the failure.
    let output = std::process::Command::new(ferry_e2e::harness::hub_process::sibling_binary(
        "ferry-hub",
        "FERRY_HUB_BIN",
    ))
    .args([
        "render",
        "--replica-set",
        "default/tuned",
        "--hub-kubeconfig",
    ])
    .arg(&fleet.hub.info.kubeconfig)
    .output()
    .expect("run ferry-hub render (build it with cargo build -p ferry-hub)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        !output.status.success(),
        "spoke-c fails the dry run: {stdout}"
    );
    assert!(
        stdout.contains("# cluster spoke-c: no work: override \"broken\""),
        "{stdout}"
    );
    let printed: Vec<ManifestWork> = serde_yaml::Deserializer::from_str(&stdout)
        .filter_map(|d| serde::Deserialize::deserialize(d).ok())
        .collect();
    assert_eq!(printed.len(), 2, "{stdout}");
    for work in printed {
        let cluster = work.namespace().expect("namespace");
        let written = Api::<ManifestWork>::namespaced(hub.clone(), &cluster)
            .get("tuned")
            .await
            .expect("the written work");
        assert_eq!(work.spec, written.spec, "{cluster}");
    }
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_set_never_changes_a_work_it_did_not_write_and_names_it() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["spoke-a", "spoke-b"]))
        .await
        .expect("fleet starts");
    let hub = fleet.hub_client.clone();
    // Another team's work on spoke-a has the name the replica set will use.
    let theirs = fleet
        .create_work(&ferry_e2e::helpers::work_helpers::manifest_work(
            "spoke-a",
            "shared-name",
            vec![config_map(
                "default",
                "theirs",
                json!({"owner": "other-team"}),
            )],
        ))
        .await
        .expect("the other team's work");
    let before = wait_applied(&theirs, "shared-name").await.expect("applied");
    create_placement(&hub, "everywhere", json!({})).await;
    let placements: Api<ferry_api::placement::Placement> = Api::namespaced(hub.clone(), NAMESPACE);
    wait_until(
        &placements,
        "everywhere",
        "both chosen",
        APPLY_TIMEOUT,
        |p| {
            p.status
                .as_ref()
                .is_some_and(|s| s.number_of_selected_clusters == 2)
        },
    )
    .await
    .expect("the placement chooses both spokes");
    create_replica_set(&hub, "shared-name", "everywhere", "Background").await;

    // spoke-b gets the replica set's work; spoke-a's stays the other team's,
    // and the replica set says why.
    let works_b: Api<ManifestWork> = Api::namespaced(hub.clone(), "spoke-b");
    wait_applied(&works_b, "shared-name")
        .await
        .expect("the free cluster gets its work");
    let sets: Api<ManifestWorkReplicaSet> = Api::namespaced(hub.clone(), NAMESPACE);
    let named = |rs: &ManifestWorkReplicaSet| {
        rs.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.message.contains(
                    "cluster spoke-a: ferry did not write its work: ManifestWork spoke-a/shared-name exists and was not written by this replica set",
                ))
        })
    };
    wait_until(
        &sets,
        "shared-name",
        "the clash named",
        APPLY_TIMEOUT,
        named,
    )
    .await
    .expect("a condition names the work in the way");
    let after = theirs.get("shared-name").await.expect("read");
    assert_eq!(
        after.metadata.resource_version, before.metadata.resource_version,
        "the other team's work is untouched"
    );
    assert!(!after.labels().contains_key(REPLICA_SET_LABEL));

    // Deleting the replica set deletes its own work only.
    sets.delete("shared-name", &DeleteParams::background())
        .await
        .expect("delete the replica set");
    wait_deleted(&works_b, "shared-name", "its own work", APPLY_TIMEOUT)
        .await
        .expect("the replica set's work goes");
    let still = theirs.get("shared-name").await.expect("read");
    assert_eq!(
        still.metadata.resource_version, before.metadata.resource_version,
        "the other team's work survives the replica set"
    );
    fleet.stop().await;
}
