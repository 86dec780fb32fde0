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
