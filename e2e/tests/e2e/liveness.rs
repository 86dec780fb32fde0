//! ManagedCluster status follows the agent: connected with its version and
//! last-seen time, disconnected when heartbeats stop or the agent goes, and
//! connected again when it comes back (issue 5, item 3).

use std::time::Duration;

use ferry_api::managed_cluster::ManagedCluster;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::harness::link::LinkState;
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::APPLY_TIMEOUT;
use kube::Api;

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
    let first_seen = clusters.get("cluster-a").await.expect("read");
    let seen_later = |c: &ManagedCluster| {
        c.status.as_ref().map(|s| &s.last_seen_time)
            > first_seen.status.as_ref().map(|s| &s.last_seen_time)
    };
    wait_until(
        &clusters,
        "cluster-a",
        "last seen moves on",
        APPLY_TIMEOUT,
        seen_later,
    )
    .await
    .expect("heartbeats keep last-seen current");

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
    fleet.stop().await;
}
