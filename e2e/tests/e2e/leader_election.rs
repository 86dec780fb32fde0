//! Hub replicas elect a leader through a `coordination.k8s.io` Lease: only
//! the leader runs the controllers that must run once (here the placement
//! and replica-set controllers write works), every replica keeps serving its
//! agents, and when the leader stops the other replica takes the Lease and
//! the controllers go on from there.

use std::time::Instant;

use ferry_api::contract::UNREACHABLE_TAINT;
use ferry_api::manifest_work::ManifestWork;
use ferry_api::replica_set::ManifestWorkReplicaSet;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions, LEADER_LEASE, LEADER_LEASE_DURATION};
use ferry_e2e::helpers::placement_helpers::create_placement;
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{APPLY_TIMEOUT, config_map, manifest_work, wait_applied};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

fn holder(lease: &Lease) -> Option<String> {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.clone())
        .filter(|h| !h.is_empty())
}

fn works_carry(value: &'static str) -> impl Fn(&ManifestWork) -> bool {
    move |w: &ManifestWork| {
        w.spec.workload.manifests.first().map(|m| &m.0["data"]["v"]) == Some(&json!(value))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_lease_holder_runs_the_controllers_and_the_other_replica_takes_over_when_it_stops()
{
    let mut options = FleetOptions::with_spokes(&["cluster-a", "cluster-b"]);
    options.hub_replicas = 2;
    let mut fleet = Fleet::start(options).await.expect("fleet starts");
    let hub = fleet.hub_client.clone();
    let leases: Api<Lease> = Api::namespaced(hub.clone(), LEADER_LEASE.0);
    let first = wait_until(&leases, LEADER_LEASE.1, "a leader", APPLY_TIMEOUT, |l| {
        holder(l).is_some()
    })
    .await
    .expect("one replica takes the Lease");
    let leader = holder(&first).expect("holder");
    println!("leader: {leader}");

    // The leader's controllers place a replica set's works on both clusters.
    // Tolerating unreachable clusters: the stopped replica's agent stays
    // disconnected, and its cluster keeps its work.
    create_placement(
        &hub,
        "default",
        "everywhere",
        json!({"tolerations": [{"key": UNREACHABLE_TAINT, "operator": "Exists"}]}),
    )
    .await;
    let rs: ManifestWorkReplicaSet = serde_json::from_value(json!({
        "apiVersion": "work.ferry.dev/v1alpha1", "kind": "ManifestWorkReplicaSet",
        "metadata": {"name": "elected", "namespace": "default"},
        "spec": {
            "manifestWorkTemplate": {"workload": {"manifests": [
                config_map("default", "elected", json!({"v": "1"}))]}},
            "placementRefs": [{"name": "everywhere", "rolloutStrategy": {"type": "All"}}],
        },
    }))
    .expect("replica set");
    let replica_sets: Api<ManifestWorkReplicaSet> = Api::namespaced(hub.clone(), "default");
    replica_sets
        .create(&PostParams::default(), &rs)
        .await
        .expect("create replica set");
    for cluster in ["cluster-a", "cluster-b"] {
        let works: Api<ManifestWork> = Api::namespaced(hub.clone(), cluster);
        wait_until(
            &works,
            "elected",
            "the work placed",
            APPLY_TIMEOUT,
            works_carry("1"),
        )
        .await
        .expect("the leader's controllers write the works");
    }

    // The leader stops cleanly: it releases the Lease and the other replica
    // takes it well within one lease duration.
    let stopped = Instant::now();
    if leader == "replica-0" {
        fleet.stop_hub().await;
    } else {
        fleet.stop_hub_replica(1).await;
    }
    let next = wait_until(
        &leases,
        LEADER_LEASE.1,
        "a new leader",
        APPLY_TIMEOUT,
        |l| holder(l).is_some_and(|h| h != leader),
    )
    .await
    .expect("the other replica takes the Lease");
    let handover = stopped.elapsed();
    println!(
        "handover to {} took {handover:?} (lease duration {LEADER_LEASE_DURATION:?})",
        holder(&next).unwrap_or_default()
    );
    assert!(
        handover < LEADER_LEASE_DURATION * 3,
        "a clean stop hands the Lease over promptly: {handover:?}"
    );

    // The new leader's controllers carry on: a template change reaches the
    // works, and the surviving replica's agent still applies a plain work.
    replica_sets
        .patch(
            "elected",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"spec": {"manifestWorkTemplate": {"workload": {"manifests": [
                config_map("default", "elected", json!({"v": "2"}))]}}}}),
            ),
        )
        .await
        .expect("change the template");
    for cluster in ["cluster-a", "cluster-b"] {
        let works: Api<ManifestWork> = Api::namespaced(hub.clone(), cluster);
        wait_until(
            &works,
            "elected",
            "the new template",
            APPLY_TIMEOUT,
            works_carry("2"),
        )
        .await
        .expect("the new leader's controllers write the change");
    }
    let surviving = if leader == "replica-0" {
        "cluster-b"
    } else {
        "cluster-a"
    };
    let works = fleet
        .create_work(&manifest_work(
            surviving,
            "served",
            vec![config_map("default", "served", json!({"v": "1"}))],
        ))
        .await
        .expect("create work");
    wait_applied(&works, "served")
        .await
        .expect("the surviving replica serves its agent");
    fleet.stop().await;
}
