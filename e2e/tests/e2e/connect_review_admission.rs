//! A replica reviews only so many new agent tokens at once (issue 32): a
//! connect that finds every slot taken for a second is refused as busy, with
//! its own reason, instead of queueing its TokenReview behind the others
//! until it times out; the refused agent backs off, redials, and is served
//! once reviews are answered again; the refusal tells it when to come back
//! (the replica's pushback). Here one slot, and the hub's API server paused
//! (SIGSTOP), so the review holding the slot cannot end early.

use std::num::NonZeroU32;
use std::time::Duration;

use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::harness::hub_metrics::{hub_metric, wait_metric_above};
use ferry_tools::loadgen::agent::Behaviour;
use ferry_tools::loadgen::clusters::join_clusters;
use ferry_tools::loadgen::run::{SimFleet, hub_endpoint};

const TIMEOUT: Duration = Duration::from_secs(120);
const BUSY: &str = "ferry_hub_agent_refusals_total{reason=\"review_busy\"}";

/// Sends `signal` (`STOP`, `CONT`) to process `pid`.
fn signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -{signal} {pid}: {status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connect_finding_no_review_slot_is_refused_as_busy_and_served_after_it_redials() {
    let mut options = FleetOptions::with_spokes(&[]);
    options.connect_token_reviews_in_flight = NonZeroU32::MIN;
    let fleet = Fleet::start(options).await.expect("fleet starts");
    let clusters = join_clusters(&fleet.hub_client, 0, 3, 3, 3600)
        .await
        .expect("join");
    let endpoint = hub_endpoint(&fleet.hub_url, Some(&fleet.hub_ca_pem)).expect("endpoint");
    let busy_before = hub_metric(fleet.hub_probes_addr, BUSY)
        .await
        .expect("scrape");

    // With the API server paused, the first review holds the one slot until
    // its time bound; every other connect waits a second and is turned away.
    let api_server = fleet.hub.pid().expect("the hub's control plane runs");
    signal(api_server, "STOP");
    let agents = SimFleet::start(
        clusters,
        endpoint,
        Behaviour::steady(Duration::from_secs(5)),
    );
    let busy = wait_metric_above(fleet.hub_probes_addr, BUSY, busy_before, TIMEOUT).await;
    // The agent reads the refusal after the hub counted it.
    let pushed_back = agents.wait_for(TIMEOUT, |s| s.pushed_back > 0).await;
    signal(api_server, "CONT");
    let busy = busy.expect("a connect was refused as busy while the slot was held");
    println!(
        "{} connects refused as busy while the API server was paused",
        busy - busy_before
    );
    pushed_back.expect("a busy refusal told the agent when to come back (the pushback)");
    let connected = agents.wait_connected(TIMEOUT).await;
    println!("every agent served {connected:?} after the API server resumed");
    connected.expect("the refused agents redialled and were served");
    agents.stop().await;
    fleet.stop().await;
}
