//! A stuck agent never delays another cluster, and the edits it misses
//! coalesce: when it comes back it gets the latest generation of each work
//! (issue 5, item 4).

use std::time::{Duration, Instant};

use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::harness::hub_metrics::hub_metric;
use ferry_e2e::harness::link::LinkState;
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{
    APPLY_TIMEOUT, config_map, edit_manifests, is_applied_at_current_generation, manifest_work,
    wait_applied,
};
use kube::Api;
use serde_json::json;

const WORKS_FOR_STUCK: usize = 60;
const EDITS: usize = 10;
/// The longest the healthy cluster's work may take while the other is stuck.
const HEALTHY_BOUND: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_agent_does_not_delay_another_cluster_and_its_missed_edits_coalesce() {
    let mut options = FleetOptions::with_spokes(&["stuck", "healthy"]);
    // Long enough that the stuck session is not ended for silence during the test.
    options.heartbeat = Duration::from_secs(60);
    let fleet = Fleet::start(options).await.expect("fleet starts");
    let stuck: Api<ferry_api::manifest_work::ManifestWork> =
        Api::namespaced(fleet.hub_client.clone(), "stuck");
    // Large enough that the frozen stream's HTTP/2 window (1 MiB) and the
    // per-agent queue fill up and the hub has to hold back.
    let filler = "x".repeat(128 * 1024);
    let work = |cluster: &str, name: &str| {
        manifest_work(
            cluster,
            name,
            vec![config_map(
                "default",
                name,
                json!({"v": "0", "filler": filler}),
            )],
        )
    };
    fleet
        .create_work(&work("stuck", "first"))
        .await
        .expect("create");
    wait_applied(&stuck, "first")
        .await
        .expect("applied before the link freezes");

    fleet.spoke("stuck").link.set(LinkState::Frozen);
    let upserts_before = hub_metric(fleet.hub_probes_addr, "ferry_hub_work_upserts_sent_total")
        .await
        .expect("scrape");
    for i in 0..WORKS_FOR_STUCK {
        fleet
            .create_work(&work("stuck", &format!("w{i}")))
            .await
            .expect("create");
    }
    for edit in 1..=EDITS {
        edit_manifests(&stuck, "first", |m| {
            m[0]["data"]["v"] = json!(edit.to_string())
        })
        .await
        .expect("edit");
    }

    let started = Instant::now();
    let healthy = fleet
        .create_work(&work("healthy", "unaffected"))
        .await
        .expect("create");
    wait_applied(&healthy, "unaffected")
        .await
        .expect("the healthy cluster is served while the other is stuck");
    let healthy_took = started.elapsed();
    println!("healthy cluster applied in {healthy_took:?} while the other agent was stuck");
    // Generous for a loaded machine (a lone apply takes well under a
    // second); a hub that waited on the stuck stream would never get here
    // before the stuck session's 60 s heartbeat limit.
    assert!(
        healthy_took < HEALTHY_BOUND,
        "the stuck agent delayed the healthy cluster: {healthy_took:?}"
    );
    let first = stuck.get("first").await.expect("read");
    assert!(
        !is_applied_at_current_generation(&first),
        "the stuck agent really is stuck"
    );

    fleet.spoke("stuck").link.set(LinkState::Up);
    let latest = wait_until(
        &stuck,
        "first",
        "latest generation applied",
        APPLY_TIMEOUT,
        is_applied_at_current_generation,
    )
    .await
    .expect("the stuck agent catches up");
    assert_eq!(latest.metadata.generation, Some(1 + EDITS as i64));
    for i in 0..WORKS_FOR_STUCK {
        wait_until(
            &stuck,
            &format!("w{i}"),
            "applied",
            APPLY_TIMEOUT,
            is_applied_at_current_generation,
        )
        .await
        .expect("every work arrives");
    }
    let upserts = hub_metric(fleet.hub_probes_addr, "ferry_hub_work_upserts_sent_total")
        .await
        .expect("scrape")
        - upserts_before;
    println!(
        "upserts sent for {WORKS_FOR_STUCK} new works, {EDITS} edits and 1 other cluster's work: {upserts}"
    );
    assert!(
        upserts < (WORKS_FOR_STUCK + EDITS + 1) as f64,
        "missed edits coalesce instead of queueing one message each ({upserts})"
    );
    fleet.stop().await;
}
