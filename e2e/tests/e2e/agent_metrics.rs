//! The agent's `/metrics` and the hub's latency histograms, build info and
//! refusals, scraped as Prometheus would (issue 10, item 5): the real
//! `ferry-agent` binary counts applies and drift corrections by kind, its
//! open watches, its hub session and the status reports it sent; the hub
//! times its status writes, TokenReviews and webhook reviews, and counts a
//! refused agent under the refusal's reason.

use std::time::Duration;

use ferry_e2e::harness::agent_process::AgentProcess;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::harness::hub_metrics::{hub_metric, scrape, sum_of, wait_metric_above};
use ferry_e2e::helpers::spoke_actor::merge_as;
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{APPLY_TIMEOUT, config_map, manifest_work, wait_applied};
use kube::api::DynamicObject;
use serde_json::json;

/// How long a counter may take to move once what it counts has happened
/// (a deadline for a signal, not a performance assertion).
const METRIC_TIMEOUT: Duration = Duration::from_secs(60);

const CONFIG_MAP: &str = "v1/ConfigMap";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_metrics_count_applies_drift_corrections_watches_session_and_reports_by_kind() {
    let mut fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    // The binary, with its /metrics, serves the spoke.
    fleet.stop_agent("cluster-a").await;
    let agent = AgentProcess::start(&fleet, "cluster-a", None, &[])
        .await
        .expect("ferry-agent starts");
    let metrics = agent.probe_addr;
    wait_metric_above(metrics, "ferry_agent_hub_connected", 0.0, METRIC_TIMEOUT)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "the agent reports its hub session: {e}; log:\n{}",
                agent.log()
            )
        });

    let works = fleet
        .create_work(&manifest_work(
            "cluster-a",
            "counted",
            vec![config_map("default", "counted", json!({"k": "hub"}))],
        ))
        .await
        .expect("create work");
    wait_applied(&works, "counted").await.expect("applied");
    let created = format!("ferry_agent_applies_total{{kind=\"{CONFIG_MAP}\",outcome=\"created\"}}");
    wait_metric_above(metrics, &created, 0.0, METRIC_TIMEOUT)
        .await
        .expect("the create is counted under its kind");
    let text = scrape(metrics).await.expect("scrape the agent");
    println!(
        "agent /metrics after one work: {} bytes, {} samples",
        text.len(),
        text.lines().filter(|l| !l.starts_with('#')).count()
    );
    let value = |selector: &str| sum_of(&text, selector);
    assert!(
        text.contains(&format!(
            "ferry_agent_build_info{{version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        )),
        "build info:\n{text}"
    );
    assert_eq!(value("ferry_agent_hub_connected"), 1.0, "{text}");
    assert!(
        value("ferry_agent_hub_sessions_started_total") >= 1.0,
        "{text}"
    );
    assert!(
        value("ferry_agent_apply_duration_seconds_count") >= 1.0,
        "{text}"
    );
    // The work's status went to the hub after its watch was set up.
    assert_eq!(
        value(&format!(
            "ferry_agent_watches_open{{kind=\"{CONFIG_MAP}\"}}"
        )),
        1.0,
        "one watch for the kind:\n{text}"
    );
    assert!(
        value("ferry_agent_status_reports_sent_total") >= 1.0,
        "{text}"
    );
    let corrections = format!("ferry_agent_drift_corrections_total{{kind=\"{CONFIG_MAP}\"}}");
    assert_eq!(value(&corrections), 0.0, "nothing drifted yet:\n{text}");

    // Someone edits the object on the spoke; the agent puts it back and
    // counts a drift correction for the kind.
    let spoke = fleet
        .spoke("cluster-a")
        .api("v1", "ConfigMap", Some("default"));
    merge_as(
        &spoke,
        "counted",
        "kubectl-edit",
        &json!({"data": {"k": "drifted"}}),
    )
    .await
    .expect("drift the object");
    let back = |o: &DynamicObject| o.data["data"]["k"] == "hub";
    wait_until(&spoke, "counted", "drift corrected", APPLY_TIMEOUT, back)
        .await
        .expect("the agent corrects the drift");
    wait_metric_above(metrics, &corrections, 0.0, METRIC_TIMEOUT)
        .await
        .expect("the correction is counted under its kind");
    let updated = format!("ferry_agent_applies_total{{kind=\"{CONFIG_MAP}\",outcome=\"updated\"}}");
    assert!(
        hub_metric(metrics, &updated).await.expect("scrape") >= 1.0,
        "the correcting write is an update"
    );
    agent.kill().await;
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hub_times_status_writes_token_reviews_and_webhook_reviews_and_counts_refusals_by_reason() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let hub = fleet.hub_probes_addr;
    // A work goes through the webhook, reaches the connected agent and has
    // its status written.
    let works = fleet
        .create_work(&manifest_work(
            "cluster-a",
            "timed",
            vec![config_map("default", "timed", json!({"k": "v"}))],
        ))
        .await
        .expect("create work");
    wait_applied(&works, "timed").await.expect("applied");
    wait_metric_above(
        hub,
        "ferry_hub_status_write_duration_seconds_count",
        0.0,
        METRIC_TIMEOUT,
    )
    .await
    .expect("status writes are timed");
    let text = scrape(hub).await.expect("scrape the hub");
    assert!(
        sum_of(&text, "ferry_hub_token_review_duration_seconds_count") >= 1.0,
        "the agent's TokenReview is timed:\n{text}"
    );
    assert!(
        sum_of(&text, "ferry_hub_webhook_review_duration_seconds_count") >= 1.0,
        "the webhook's reviews are timed:\n{text}"
    );
    assert!(
        text.contains(&format!(
            "ferry_hub_build_info{{version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        )),
        "build info:\n{text}"
    );
    for histogram in [
        "ferry_hub_status_write_duration_seconds",
        "ferry_hub_token_review_duration_seconds",
        "ferry_hub_webhook_review_duration_seconds",
    ] {
        let count = sum_of(&text, &format!("{histogram}_count"));
        let sum = sum_of(&text, &format!("{histogram}_sum"));
        println!(
            "{histogram}: {count} observed, mean {:.2} ms",
            1000.0 * sum / count.max(1.0)
        );
    }
    let unauthenticated = "ferry_hub_agent_refusals_total{reason=\"unauthenticated\"}";
    assert_eq!(sum_of(&text, unauthenticated), 0.0, "{text}");

    // An agent whose token the API server does not know is refused; the
    // hub counts it under `unauthenticated`, the agent under the gRPC code
    // it got back, and it is not ready.
    let refused = AgentProcess::start(&fleet, "cluster-a", Some("not-a-token"), &[])
        .await
        .expect("ferry-agent starts");
    wait_metric_above(hub, unauthenticated, 0.0, METRIC_TIMEOUT)
        .await
        .unwrap_or_else(|e| panic!("the refusal is counted: {e}; log:\n{}", refused.log()));
    wait_metric_above(
        refused.probe_addr,
        "ferry_agent_hub_connect_failures_total{reason=\"unauthenticated\"}",
        0.0,
        METRIC_TIMEOUT,
    )
    .await
    .expect("the refused agent counts why");
    let why = refused
        .wait_for_answer("/readyz", 503, "no hub session", METRIC_TIMEOUT)
        .await
        .expect("a refused agent is not ready");
    assert!(
        why.contains("not valid"),
        "the reason names the refusal: {why}"
    );
    refused.kill().await;
    fleet.stop().await;
}
