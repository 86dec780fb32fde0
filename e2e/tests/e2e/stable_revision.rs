//! A revision becomes the stable one only when every chosen cluster runs
//! it (issue 31): with a chosen cluster unreachable (a placement that
//! tolerates the taint keeps it), the rollout does not wait for it, but
//! `PlacementRolledOut` says `WaitingForClusters`, names it, and
//! `stableRevision` stays unset; once its agent is back and the revision
//! succeeds there, the rollout is `Complete` and the revision stable.

use std::time::Duration;

use ferry_api::contract::UNREACHABLE_TAINT;
use ferry_api::managed_cluster::ManagedCluster;
use ferry_api::replica_set::ManifestWorkReplicaSet;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::placement_helpers::create_placement;
use ferry_e2e::helpers::replica_sets::rolled_out;
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{APPLY_TIMEOUT, config_map};
use kube::api::{Api, PostParams};
use serde_json::json;

const NAMESPACE: &str = "default";

fn stable(rs: &ManifestWorkReplicaSet) -> Option<i64> {
    rs.status
        .as_ref()?
        .rollout
        .as_ref()?
        .stable_revision
        .as_ref()
        .map(|r| r.number)
}

/// How many clusters succeeded on the current revision.
fn succeeded_on_current(rs: &ManifestWorkReplicaSet) -> i32 {
    let Some(rollout) = rs.status.as_ref().and_then(|s| s.rollout.as_ref()) else {
        return 0;
    };
    rollout
        .revisions
        .iter()
        .find(|r| Some(&r.revision) == rollout.revision.as_ref())
        .map_or(0, |r| r.clusters.succeeded)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revision_an_unreachable_cluster_never_ran_is_not_complete_nor_stable() {
    let mut options = FleetOptions::with_spokes(&["spoke-a", "spoke-b"]);
    options.heartbeat = Duration::from_secs(1);
    options.unreachable_grace = Duration::from_secs(3);
    let mut fleet = Fleet::start(options).await.expect("fleet starts");
    let hub = fleet.hub_client.clone();
    create_placement(
        &hub,
        NAMESPACE,
        "everywhere",
        json!({"tolerations": [{"key": UNREACHABLE_TAINT, "operator": "Exists"}]}),
    )
    .await;

    let clusters: Api<ManagedCluster> = Api::all(hub.clone());
    // Both connect first: a cluster that never connected is unreachable
    // without a taint being written, so spoke-b stopped before its first
    // connect would never be tainted.
    for spoke in ["spoke-a", "spoke-b"] {
        wait_until(
            &clusters,
            spoke,
            "connected, untainted",
            APPLY_TIMEOUT,
            |c| {
                c.status.as_ref().is_some_and(|s| s.connected)
                    && c.spec.taints.iter().all(|t| t.key != UNREACHABLE_TAINT)
            },
        )
        .await
        .unwrap_or_else(|e| panic!("{spoke} is connected: {e}"));
    }
    // spoke-b goes away for longer than the grace: tainted, still chosen.
    fleet.stop_agent("spoke-b").await;
    wait_until(
        &clusters,
        "spoke-b",
        "unreachable taint",
        APPLY_TIMEOUT,
        |c| c.spec.taints.iter().any(|t| t.key == UNREACHABLE_TAINT),
    )
    .await
    .expect("spoke-b is tainted unreachable");

    let rs: ManifestWorkReplicaSet = serde_json::from_value(json!({
        "apiVersion": "work.ferry.dev/v1alpha1",
        "kind": "ManifestWorkReplicaSet",
        "metadata": {"name": "app", "namespace": NAMESPACE},
        "spec": {
            "manifestWorkTemplate": {"workload": {"manifests": [config_map("default", "app", json!({"v": "1"}))]}},
            "placementRefs": [{"name": "everywhere", "rolloutStrategy": {"type": "All", "all": {"minSuccessTime": "1s"}}}],
        },
    }))
    .expect("replica set");
    let sets: Api<ManifestWorkReplicaSet> = Api::namespaced(hub.clone(), NAMESPACE);
    sets.create(&PostParams::default(), &rs)
        .await
        .expect("create ManifestWorkReplicaSet");

    // spoke-a succeeds; spoke-b never ran revision 1.
    // (Before spoke-a's success the condition says Progressing, or
    // WaitingForClusters counting none succeeded.)
    let waiting = wait_until(&sets, "app", "WaitingForClusters", APPLY_TIMEOUT, |rs| {
        rolled_out(rs).is_some_and(|c| {
            c.reason == "WaitingForClusters" && c.message.contains("succeeded on 1 of 2")
        })
    })
    .await
    .expect("the rollout waits for the unreachable cluster");
    let condition = rolled_out(&waiting).expect("condition");
    println!("{}: {}", condition.reason, condition.message);
    assert_eq!(condition.status, "False");
    assert!(
        condition.message.contains("succeeded on 1 of 2 clusters")
            && condition.message.contains("1 of them unreachable")
            && condition.message.contains("spoke-b"),
        "{}",
        condition.message
    );
    assert_eq!(
        stable(&waiting),
        None,
        "a revision spoke-b never ran is not stable"
    );

    // spoke-b is back and runs it: Complete, and stable.
    fleet.start_agent("spoke-b");
    let complete = wait_until(&sets, "app", "Complete and stable", APPLY_TIMEOUT, |rs| {
        rolled_out(rs).is_some_and(|c| c.reason == "Complete") && stable(rs) == Some(1)
    })
    .await
    .expect("the rollout completes once spoke-b runs the revision");
    assert_eq!(
        rolled_out(&complete).map(|c| c.status.as_str()),
        Some("True")
    );
    fleet.stop().await;
}

/// Issue 49, step 5: an override added for one cluster makes a revision
/// whose rendering for the other cluster is what its work already holds;
/// nothing is written there, and the revision still completes, because a
/// work that already matches the revision has run it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revision_that_leaves_a_clusters_work_unchanged_completes() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["spoke-a", "spoke-b"]))
        .await
        .expect("fleet starts");
    let hub = fleet.hub_client.clone();
    let clusters: Api<ManagedCluster> = Api::all(hub.clone());
    clusters
        .patch(
            "spoke-b",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"metadata": {"labels": {"ring": "canary"}}})),
        )
        .await
        .expect("label spoke-b");
    create_placement(&hub, NAMESPACE, "everywhere", json!({})).await;
    let sets: Api<ManifestWorkReplicaSet> = Api::namespaced(hub.clone(), NAMESPACE);
    let spec = |overrides: serde_json::Value| {
        json!({
            "manifestWorkTemplate": {"workload": {"manifests": [config_map("default", "app", json!({"v": "1"}))]}},
            "placementRefs": [{"name": "everywhere", "rolloutStrategy": {"type": "All", "all": {"minSuccessTime": "1s"}}}],
            "overrides": overrides,
        })
    };
    let rs: ManifestWorkReplicaSet = serde_json::from_value(json!({
        "apiVersion": "work.ferry.dev/v1alpha1",
        "kind": "ManifestWorkReplicaSet",
        "metadata": {"name": "app", "namespace": NAMESPACE},
        "spec": spec(json!([])),
    }))
    .expect("replica set");
    sets.create(&PostParams::default(), &rs)
        .await
        .expect("create ManifestWorkReplicaSet");
    wait_until(
        &sets,
        "app",
        "revision 1 complete on both",
        APPLY_TIMEOUT,
        |rs| {
            rolled_out(rs).is_some_and(|c| c.reason == "Complete")
                && stable(rs) == Some(1)
                && succeeded_on_current(rs) == 2
        },
    )
    .await
    .expect("revision 1 completes");

    // Revision 2 changes spoke-b's work only.
    sets.patch(
        "app",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(json!({"spec": spec(json!([{
            "name": "canary",
            "clusterSelector": {"matchLabels": {"ring": "canary"}},
            "resourceIdentifier": {"resource": "configmaps", "namespace": "default", "name": "app"},
            "jsonPatch": [{"op": "replace", "path": "/data/v", "value": "2"}],
        }]))})),
    )
    .await
    .expect("add the override");
    let complete = wait_until(
        &sets,
        "app",
        "revision 2 complete on both",
        APPLY_TIMEOUT,
        |rs| {
            rolled_out(rs).is_some_and(|c| c.reason == "Complete")
                && stable(rs) == Some(2)
                && succeeded_on_current(rs) == 2
        },
    )
    .await
    .unwrap_or_else(|e| panic!("revision 2 completes though spoke-a's work did not change: {e}"));
    println!(
        "{:?}",
        complete.status.as_ref().and_then(|s| s.rollout.as_ref())
    );
    fleet.stop().await;
}
