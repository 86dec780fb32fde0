//! A session lives at most `--max-session-seconds`: the hub then ends it, the
//! agent reconnects (and is authenticated afresh), and works keep flowing
//! (issue 9, item 3).

use std::time::Duration;

use ferry_api::managed_cluster::ManagedCluster;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{config_map, manifest_work, wait_applied};
use kube::Api;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_ends_at_its_maximum_age_and_the_agent_reconnects() {
    let mut options = FleetOptions::with_spokes(&["cluster-a"]);
    options.max_session_age = Duration::from_secs(8);
    let fleet = Fleet::start(options).await.expect("fleet starts");
    let works = fleet
        .create_work(&manifest_work(
            "cluster-a",
            "first",
            vec![config_map("default", "first", json!({"k": "v"}))],
        ))
        .await
        .expect("create");
    wait_applied(&works, "first")
        .await
        .expect("the agent is served");

    let clusters: Api<ManagedCluster> = Api::all(fleet.hub_client.clone());
    let connected = |c: &ManagedCluster| {
        c.status
            .as_ref()
            .is_some_and(|s| s.connected && !s.session_id.is_empty())
    };
    let first = wait_until(
        &clusters,
        "cluster-a",
        "cluster-a connected",
        Duration::from_secs(30),
        connected,
    )
    .await
    .expect("connected")
    .status
    .expect("status")
    .session_id;
    let second = wait_until(
        &clusters,
        "cluster-a",
        "cluster-a connected with a new session",
        Duration::from_secs(60),
        |c| connected(c) && c.status.as_ref().is_some_and(|s| s.session_id != first),
    )
    .await
    .expect("the agent opens a new session once the old one reached its age");
    println!(
        "session {first} was replaced by {}",
        second.status.expect("status").session_id
    );

    let works = fleet
        .create_work(&manifest_work(
            "cluster-a",
            "second",
            vec![config_map("default", "second", json!({"k": "v"}))],
        ))
        .await
        .expect("create");
    wait_applied(&works, "second")
        .await
        .expect("the new session is served");
    fleet.stop().await;
}
