//! ManagedCluster status follows the agent: connected with its version and
//! the replica serving it, disconnected when heartbeats stop or the agent
//! goes, and connected again when it comes back (issue 5, item 3); an idle
//! connected cluster costs no write, its replica's Lease vouching for it,
//! and a cluster whose replica's Lease lapsed is marked disconnected
//! (issue 22).

use std::time::Duration;

use ferry_api::contract::UNREACHABLE_TAINT;
use ferry_api::managed_cluster::{ManagedCluster, ManagedClusterSpec};
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::harness::hub_metrics::{wait_metric_above, wait_metric_at_most};
use ferry_e2e::harness::link::LinkState;
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::APPLY_TIMEOUT;
use ferry_hub::clusters::replica_lease::lease_name;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

fn connected(c: &ManagedCluster) -> bool {
    c.status.as_ref().is_some_and(|s| {
        s.connected && s.agent_version == env!("CARGO_PKG_VERSION") && !s.last_seen_time.is_empty()
    })
}

fn disconnected_because(why: &'static str) -> impl Fn(&ManagedCluster) -> bool {
    move |c: &ManagedCluster| {
        c.status.as_ref().is_some_and(|s| {
            !s.connected
                && s.disconnect_reason
                    .as_deref()
                    .is_some_and(|r| r.contains(why))
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn managed_cluster_status_follows_heartbeats_and_sessions() {
    let mut options = FleetOptions::with_spokes(&["cluster-a"]);
    options.heartbeat = Duration::from_secs(1);
    let mut fleet = Fleet::start(options).await.expect("fleet starts");
    let clusters: Api<ManagedCluster> = Api::all(fleet.hub_client.clone());
    wait_until(
        &clusters,
        "cluster-a",
        "connected",
        APPLY_TIMEOUT,
        connected,
    )
    .await
    .expect("the agent's session shows as connected");

    // A black-holed link: the TCP connection stays open but nothing arrives.
    fleet.spoke("cluster-a").link.set(LinkState::Frozen);
    wait_until(
        &clusters,
        "cluster-a",
        "disconnected for missed heartbeats",
        APPLY_TIMEOUT,
        disconnected_because("no heartbeat"),
    )
    .await
    .expect("missed heartbeats mark the cluster disconnected");

    fleet.spoke("cluster-a").link.set(LinkState::Up);
    let before = clusters.get("cluster-a").await.expect("read");
    let reconnected = |c: &ManagedCluster| {
        connected(c)
            && c.status.as_ref().map(|s| &s.session_id)
                != before.status.as_ref().map(|s| &s.session_id)
    };
    wait_until(
        &clusters,
        "cluster-a",
        "reconnected",
        APPLY_TIMEOUT,
        reconnected,
    )
    .await
    .expect("the agent reconnects by itself");
    // Idle and connected: the replica's Lease vouches for the session and
    // the ManagedCluster is not written at all. The signal that time passed
    // with heartbeats flowing: the Lease was renewed twice.
    // Taken once the connect's transitions are written (the unreachable
    // taint the hub removes when the agent connects).
    let idle = wait_until(
        &clusters,
        "cluster-a",
        "untainted",
        APPLY_TIMEOUT,
        |c: &ManagedCluster| {
            connected(c) && !c.spec.taints.iter().any(|t| t.key == UNREACHABLE_TAINT)
        },
    )
    .await
    .expect("the hub removes the unreachable taint of a connected cluster");
    let replica = idle.status.clone().map(|s| s.served_by).unwrap_or_default();
    assert!(!replica.is_empty(), "the status names the serving replica");
    wait_renewals(&fleet.hub_client, &replica, 2).await;
    let later = clusters.get("cluster-a").await.expect("read");
    assert_eq!(
        later.resource_version(),
        idle.resource_version(),
        "an idle connected cluster costs no ManagedCluster write"
    );
    assert!(connected(&later));

    // Marked disconnected while its session here lives on (as the sweep
    // does when the replica's Lease lapsed in an API server outage): the
    // replica writes it connected again, same session.
    let session = later
        .status
        .clone()
        .map(|s| s.session_id)
        .unwrap_or_default();
    clusters
        .patch_status(
            "cluster-a",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"connected": false, "servedBy": null,
                "disconnectReason": format!("hub replica {replica} stopped renewing its Lease")}})),
        )
        .await
        .expect("mark disconnected");
    let session_again = session.clone();
    wait_until(
        &clusters,
        "cluster-a",
        "connected again",
        APPLY_TIMEOUT,
        move |c: &ManagedCluster| {
            connected(c)
                && c.status
                    .as_ref()
                    .is_some_and(|s| s.session_id == session_again && s.disconnect_reason.is_none())
        },
    )
    .await
    .expect("the serving replica writes its live session connected again");

    fleet.stop_agent("cluster-a").await;
    wait_until(
        &clusters,
        "cluster-a",
        "disconnected after the agent stopped",
        APPLY_TIMEOUT,
        |c: &ManagedCluster| c.status.as_ref().is_some_and(|s| !s.connected),
    )
    .await
    .expect("a stopped agent shows as disconnected");
    let stopped = clusters.get("cluster-a").await.expect("read");
    let status = stopped.status.expect("status");
    assert!(status.served_by.is_empty(), "no replica serves it now");
    // The session began when `idle` was written and the agent was heard
    // after that (the rewrite after the forced mark may be later still than
    // the last heartbeat, so it is not the bound).
    assert!(
        status.last_seen_time >= idle.status.clone().expect("status").last_seen_time,
        "last seen is when the agent was last heard: {} vs the session's start",
        status.last_seen_time
    );
    fleet.stop().await;
}

/// Waits until the replica Lease of `replica` has been renewed `times`
/// times more.
async fn wait_renewals(client: &Client, replica: &str, times: usize) {
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");
    let name = lease_name(replica);
    for _ in 0..times {
        let renewed = |l: &Lease| l.spec.as_ref().and_then(|s| s.renew_time.clone());
        let before = renewed(&leases.get(&name).await.expect("the replica Lease"));
        wait_until(&leases, &name, "a renewal", APPLY_TIMEOUT, |l| {
            renewed(l) != before
        })
        .await
        .expect("the replica renews its Lease");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_whose_replica_lease_lapsed_is_marked_disconnected_and_others_stay() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&[]))
        .await
        .expect("fleet starts");
    let hub = fleet.hub_client.clone();
    let clusters: Api<ManagedCluster> = Api::all(hub.clone());
    let leases: Api<Lease> = Api::namespaced(hub.clone(), "default");
    let now = Timestamp::now();
    // A replica that died a minute ago without releasing its Lease, and one
    // that renews (far into the future here, so it stays current).
    for (replica, renewed, seconds) in [
        ("ghost", now - SignedDuration::from_secs(60), 5),
        ("alive", now, 3600),
    ] {
        let lease: Lease = serde_json::from_value(json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": lease_name(replica), "namespace": "default"},
            "spec": {"holderIdentity": replica, "leaseDurationSeconds": seconds,
                     "renewTime": renewed.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()},
        }))
        .expect("lease");
        leases
            .create(&PostParams::default(), &lease)
            .await
            .expect("create Lease");
    }
    for (cluster, replica) in [("orphaned", "ghost"), ("served", "alive")] {
        clusters
            .create(
                &PostParams::default(),
                &ManagedCluster::new(cluster, ManagedClusterSpec::default()),
            )
            .await
            .expect("create ManagedCluster");
        clusters
            .patch_status(
                cluster,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {
                    "connected": true, "agentVersion": env!("CARGO_PKG_VERSION"),
                    "sessionId": "s1", "servedBy": replica,
                    "lastSeenTime": now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
                }})),
            )
            .await
            .expect("status");
    }
    let swept = wait_until(
        &clusters,
        "orphaned",
        "disconnected by the sweep",
        APPLY_TIMEOUT,
        disconnected_because("hub replica ghost stopped renewing its Lease"),
    )
    .await
    .expect("the leader marks a lapsed replica's cluster disconnected");
    let status = swept.status.expect("status");
    assert!(status.served_by.is_empty());
    assert!(
        status.last_seen_time.as_str() < now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string().as_str(),
        "last seen is when the lapsed Lease last vouched: {}",
        status.last_seen_time
    );
    // The same sweep saw the other cluster, whose replica's Lease is current.
    let served = clusters.get("served").await.expect("read");
    assert!(
        served
            .status
            .is_some_and(|s| s.connected && s.served_by == "alive")
    );
    fleet.stop().await;
}

/// The hub API server's LIST requests for ManagedClusters so far, every
/// client's, from its own request counter.
async fn cluster_lists(hub: &Client) -> f64 {
    let request = http::Request::get("/metrics")
        .body(Vec::new())
        .expect("a GET request");
    let text = hub.request_text(request).await.expect("API server metrics");
    text.lines()
        .filter(|line| line.starts_with("apiserver_request_total{"))
        .filter(|line| {
            line.contains("resource=\"managedclusters\"") && line.contains("verb=\"LIST\"")
        })
        .filter_map(|line| line.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

/// The leader's liveness sweep reads the replica's watch-fed ManagedCluster
/// cache: it used to LIST every cluster each heartbeat, about 1 KB per
/// cluster each time on the API server (issue 32). With a 1 s heartbeat,
/// many sweeps run while a black-holed cluster is marked disconnected and
/// counted by the sweep, and the API server answers no ManagedCluster LIST
/// meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_liveness_sweep_reads_the_cluster_cache_instead_of_listing_every_heartbeat() {
    let mut options = FleetOptions::with_spokes(&["cluster-a"]);
    options.heartbeat = Duration::from_secs(1);
    let fleet = Fleet::start(options).await.expect("fleet starts");
    let clusters: Api<ManagedCluster> = Api::all(fleet.hub_client.clone());
    wait_until(
        &clusters,
        "cluster-a",
        "connected",
        APPLY_TIMEOUT,
        connected,
    )
    .await
    .expect("the agent's session shows as connected");
    // From here the test reads nothing of ManagedClusters through the API
    // server: the sweep's own gauge says when a sweep saw the cluster
    // connected, and later disconnected (several sweeps apart: the hub
    // notices the silence only after missed heartbeats).
    wait_metric_at_most(
        fleet.hub_probes_addr,
        "ferry_hub_clusters_disconnected",
        0.0,
        APPLY_TIMEOUT,
    )
    .await
    .expect("a sweep counts the connected cluster as connected");
    let before = cluster_lists(&fleet.hub_client).await;

    fleet.spoke("cluster-a").link.set(LinkState::Frozen);
    wait_metric_above(
        fleet.hub_probes_addr,
        "ferry_hub_clusters_disconnected",
        0.0,
        APPLY_TIMEOUT,
    )
    .await
    .expect("a sweep counts the black-holed cluster as disconnected");
    let after = cluster_lists(&fleet.hub_client).await;
    assert_eq!(
        after,
        before,
        "the hub API server answered {} ManagedCluster LISTs while the sweep ran every second",
        after - before
    );
}
