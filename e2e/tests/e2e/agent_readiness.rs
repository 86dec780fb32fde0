//! The agent's `/readyz` means something (issue 10, item 5): the real
//! `ferry-agent` binary is ready only while it holds a session with the hub
//! and its spoke API server answers; otherwise it answers 503 with the
//! reason. `/healthz` stays liveness: 200 whatever the hub or spoke do.

use std::time::Duration;

use ferry_e2e::harness::agent_process::AgentProcess;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::harness::hub_metrics::{hub_metric, wait_metric_above};

/// How long readiness may take to follow the hub or spoke (a deadline for a
/// signal, not a performance assertion): the agent redials with backoff.
const READY_TIMEOUT: Duration = Duration::from_secs(90);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_is_ok_only_while_the_hub_session_is_up_and_the_spoke_answers() {
    let mut fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    fleet.stop_agent("cluster-a").await;
    fleet.stop_hub().await;
    let agent = AgentProcess::start(&fleet, "cluster-a", None, &["--spoke-check-seconds", "1"])
        .await
        .expect("ferry-agent starts");
    let log = || agent.log();

    // The spoke answers but no hub is there: not ready, for that reason alone.
    let why = agent
        .wait_for(
            "/readyz",
            503,
            "the hub session as the only reason",
            |why| why.starts_with("no hub session since") && !why.contains("spoke"),
            READY_TIMEOUT,
        )
        .await
        .unwrap_or_else(|e| panic!("{e}; log:\n{}", log()));
    println!("/readyz without a hub: 503 {why}");
    agent
        .wait_for_answer("/healthz", 200, "ok", READY_TIMEOUT)
        .await
        .expect("alive without a hub");

    // The hub comes: ready.
    fleet.start_hub().await.expect("hub starts");
    agent
        .wait_for_answer("/readyz", 200, "ok", READY_TIMEOUT)
        .await
        .unwrap_or_else(|e| panic!("ready once the session is up: {e}; log:\n{}", log()));

    // The hub goes away: not ready again.
    let stopped = std::time::Instant::now();
    fleet.stop_hub().await;
    let why = agent
        .wait_for_answer("/readyz", 503, "no hub session since", READY_TIMEOUT)
        .await
        .unwrap_or_else(|e| panic!("not ready without the hub: {e}; log:\n{}", log()));
    println!(
        "/readyz 503 {:?} after the hub was stopped: {why}",
        stopped.elapsed()
    );
    // The stopping hub ended the session itself: the agent did not have to
    // wait for three missed heartbeats to notice.
    wait_metric_above(
        agent.probe_addr,
        "ferry_agent_hub_sessions_ended_total",
        0.0,
        READY_TIMEOUT,
    )
    .await
    .expect("the session's end is counted");
    let silent = "ferry_agent_hub_sessions_ended_total{reason=\"hub_silent\"}";
    assert_eq!(
        hub_metric(agent.probe_addr, silent).await.expect("scrape"),
        0.0,
        "the hub closed the session when it stopped; log:\n{}",
        log()
    );
    fleet.start_hub().await.expect("hub starts again");
    agent
        .wait_for_answer("/readyz", 200, "ok", READY_TIMEOUT)
        .await
        .unwrap_or_else(|e| panic!("ready again: {e}; log:\n{}", log()));

    // The spoke API server goes away while the hub session lives: not ready,
    // saying since when; ready again once it is back.
    let killed = std::time::Instant::now();
    fleet.kill_spoke_control_plane("cluster-a").await;
    let why = agent
        .wait_for_answer("/readyz", 503, "spoke API unreachable since", READY_TIMEOUT)
        .await
        .unwrap_or_else(|e| panic!("not ready without the spoke: {e}; log:\n{}", log()));
    assert!(!why.contains("hub"), "the hub session still lives: {why}");
    println!(
        "/readyz 503 {:?} after the spoke API server was killed (checks every 1 s): {why}",
        killed.elapsed()
    );
    agent
        .wait_for_answer("/healthz", 200, "ok", READY_TIMEOUT)
        .await
        .expect("alive without the spoke");
    fleet
        .start_spoke_control_plane("cluster-a")
        .await
        .expect("spoke starts again");
    agent
        .wait_for_answer("/readyz", 200, "ok", READY_TIMEOUT)
        .await
        .unwrap_or_else(|e| panic!("ready once the spoke is back: {e}; log:\n{}", log()));
    agent.kill().await;
    fleet.stop().await;
}
