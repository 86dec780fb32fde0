//! ManifestWorkReplicaSet rollouts that progress in stages: `Progressive`
//! with `maxConcurrency: 2` and `minSuccessTime` never has more than two
//! clusters updating; pause holds and resume continues; a cluster whose
//! manifest cannot apply fails at `progressDeadline` and stops the rollout at
//! `maxFailures` (issue 13, rollout).

use std::collections::BTreeMap;

use ferry_api::contract::REPLICA_SET_LABEL;
use ferry_api::manifest_work::ManifestWork;
use ferry_api::placement::Placement;
use ferry_api::replica_set::ManifestWorkReplicaSet;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{APPLY_TIMEOUT, config_map};
use futures::TryStreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

const NAMESPACE: &str = "default";
const SPOKES: [&str; 5] = ["spoke-a", "spoke-b", "spoke-c", "spoke-d", "spoke-e"];

fn template(version: &str, namespace: &str) -> Value {
    json!({"workload": {"manifests": [config_map(namespace, "rolled", json!({"version": version}))]}})
}

fn version_of(work: &ManifestWork) -> Option<String> {
    let manifest = &work.spec.workload.manifests.first()?.0;
    manifest["data"]["version"].as_str().map(str::to_string)
}

fn available_now(work: &ManifestWork) -> bool {
    let generation = work.metadata.generation.unwrap_or(0);
    work.status.as_ref().is_some_and(|s| {
        s.conditions.iter().any(|c| {
            c.type_ == "Available" && c.status == "True" && c.observed_generation == generation
        })
    })
}

fn rolled_out(rs: &ManifestWorkReplicaSet) -> Option<(String, String, i64)> {
    rs.status.as_ref().and_then(|s| {
        s.conditions
            .iter()
            .find(|c| c.type_ == "PlacementRolledOut")
            .map(|c| (c.status.clone(), c.reason.clone(), c.observed_generation))
    })
}

async fn set_spec(sets: &Api<ManifestWorkReplicaSet>, spec: Value) -> i64 {
    let rs = sets
        .patch(
            "rolled",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": spec})),
        )
        .await
        .expect("patch replica set");
    rs.metadata.generation.unwrap_or(0)
}

async fn wait_reason(
    sets: &Api<ManifestWorkReplicaSet>,
    reason: &'static str,
    generation: i64,
) -> ManifestWorkReplicaSet {
    wait_until(sets, "rolled", reason, APPLY_TIMEOUT * 2, move |rs| {
        rolled_out(rs).is_some_and(|(_, r, g)| r == reason && g == generation)
    })
    .await
    .unwrap_or_else(|e| panic!("PlacementRolledOut {reason}: {e}"))
}

/// Watches the generated works while the template goes to `version`, and
/// returns the most clusters seen updating at once (holding `version`, not
/// yet Available at their generation).
async fn most_updating_until_done(client: Client, version: String) -> usize {
    let works: Api<ManifestWork> = Api::all(client);
    let stream = watcher(
        works,
        watcher::Config::default().labels(&format!("{REPLICA_SET_LABEL}={NAMESPACE}.rolled")),
    )
    .applied_objects();
    let mut stream = std::pin::pin!(stream);
    let mut latest: BTreeMap<String, ManifestWork> = BTreeMap::new();
    let mut most = 0;
    let deadline = tokio::time::Instant::now() + APPLY_TIMEOUT * 2;
    loop {
        let next = tokio::time::timeout_at(deadline, stream.try_next())
            .await
            .expect("the rollout finishes in time")
            .expect("watch works")
            .expect("the watch goes on");
        latest.insert(next.namespace().unwrap_or_default(), next);
        let at_version = latest
            .values()
            .filter(|w| version_of(w).as_deref() == Some(version.as_str()));
        let updating = at_version.clone().filter(|w| !available_now(w)).count();
        most = most.max(updating);
        if at_version.filter(|w| available_now(w)).count() == SPOKES.len() {
            return most;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progressive_rollout_keeps_two_clusters_updating_pauses_and_stops_at_max_failures() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&SPOKES))
        .await
        .expect("fleet starts");
    let hub = fleet.hub_client.clone();
    let placement: Placement = serde_json::from_value(json!({
        "apiVersion": "cluster.ferry.dev/v1alpha1",
        "kind": "Placement",
        "metadata": {"name": "five", "namespace": NAMESPACE},
        "spec": {},
    }))
    .expect("placement");
    ferry_e2e::helpers::placement_helpers::bind_global(&hub, NAMESPACE).await;
    let placements: Api<Placement> = Api::namespaced(hub.clone(), NAMESPACE);
    placements
        .create(&PostParams::default(), &placement)
        .await
        .expect("create placement");
    wait_until(&placements, "five", "five clusters", APPLY_TIMEOUT, |p| {
        p.status
            .as_ref()
            .is_some_and(|s| s.number_of_selected_clusters == 5)
    })
    .await
    .expect("every connected spoke is chosen");

    let strategy = json!({"type": "Progressive", "progressive": {
        "maxConcurrency": 2, "minSuccessTime": "3s", "progressDeadline": "None", "maxFailures": 0}});
    let rs: ManifestWorkReplicaSet = serde_json::from_value(json!({
        "apiVersion": "work.ferry.dev/v1alpha1",
        "kind": "ManifestWorkReplicaSet",
        "metadata": {"name": "rolled", "namespace": NAMESPACE},
        "spec": {
            "manifestWorkTemplate": template("v1", "default"),
            "placementRefs": [{"name": "five", "rolloutStrategy": strategy}],
        },
    }))
    .expect("replica set");
    let sets: Api<ManifestWorkReplicaSet> = Api::namespaced(hub.clone(), NAMESPACE);
    sets.create(&PostParams::default(), &rs)
        .await
        .expect("create replica set");
    wait_reason(&sets, "Complete", 1).await;

    // v2: never more than two clusters updating, from a watch of the works.
    let watching = tokio::spawn(most_updating_until_done(hub.clone(), "v2".into()));
    let generation = set_spec(
        &sets,
        json!({"manifestWorkTemplate": template("v2", "default")}),
    )
    .await;
    let most = watching.await.expect("the watch task");
    assert!(most <= 2, "{most} clusters were updating at once");
    assert!(most >= 1, "no cluster was seen updating");
    wait_reason(&sets, "Complete", generation).await;

    // Paused: v3 reaches no cluster; resumed: it reaches all.
    let generation = set_spec(
        &sets,
        json!({"paused": true, "manifestWorkTemplate": template("v3", "default")}),
    )
    .await;
    wait_reason(&sets, "Paused", generation).await;
    for spoke in SPOKES {
        let works: Api<ManifestWork> = Api::namespaced(hub.clone(), spoke);
        let work = works.get("rolled").await.expect("read work");
        assert_eq!(
            version_of(&work).as_deref(),
            Some("v2"),
            "a paused rollout reached {spoke}"
        );
    }
    let generation = set_spec(&sets, json!({"paused": false})).await;
    wait_reason(&sets, "Complete", generation).await;

    // v4 puts the ConfigMap in a namespace spoke-a lacks: spoke-a fails at
    // its progressDeadline, before spoke-b's soak ends, and the rollout
    // stops there with maxFailures 0.
    for spoke in &SPOKES[1..] {
        let namespaces: Api<Namespace> = Api::all(fleet.spoke(spoke).client.clone());
        namespaces
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": "rollout-only"}})).expect("ns"),
            )
            .await
            .expect("create namespace");
    }
    let failing = json!({"type": "Progressive", "progressive": {
        "maxConcurrency": 2, "minSuccessTime": "5s", "progressDeadline": "2s", "maxFailures": 0}});
    let generation = set_spec(
        &sets,
        json!({
            "manifestWorkTemplate": template("v4", "rollout-only"),
            "placementRefs": [{"name": "five", "rolloutStrategy": failing}],
        }),
    )
    .await;
    let failed = wait_reason(&sets, "Failed", generation).await;
    let message = failed
        .status
        .as_ref()
        .and_then(|s| {
            s.conditions
                .iter()
                .find(|c| c.type_ == "PlacementRolledOut")
        })
        .map(|c| c.message.clone())
        .unwrap_or_default();
    assert!(message.contains("spoke-a"), "{message}");
    for spoke in ["spoke-c", "spoke-d", "spoke-e"] {
        let works: Api<ManifestWork> = Api::namespaced(hub.clone(), spoke);
        let work = works.get("rolled").await.expect("read work");
        assert_eq!(
            version_of(&work).as_deref(),
            Some("v3"),
            "a halted rollout reached {spoke}"
        );
    }
    fleet.stop().await;
}
