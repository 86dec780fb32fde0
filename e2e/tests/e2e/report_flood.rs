//! Bounded state per agent: a session that is not its cluster's newest used
//! to park every report it sent, keyed by whatever UID it named, with a retry
//! task each. Now the hub keeps nothing for a work it does not hold for that
//! cluster: 100,000 reports naming random UIDs, from an older session with
//! the cluster's real token, are counted and dropped, the hub's memory stays
//! flat (printed) and the cluster's real agent is served throughout.

use ferry_api::managed_cluster::ManagedCluster;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::harness::hub_metrics::{hub_metric, wait_metric_above};
use ferry_e2e::helpers::sessions::{raw_session, session_of, wait_new_session};
use ferry_e2e::helpers::work_helpers::{APPLY_TIMEOUT, config_map, manifest_work, wait_applied};
use ferry_hub::join::hub_side::join_cluster;
use ferry_proto::v1::{self, agent_message};
use ferry_tools::proc_stats::rss_kib;
use kube::api::Api;
use serde_json::json;

const CLUSTER: &str = "cluster-a";
const REPORTS: usize = 100_000;
/// Generous: the whole test process (hub, agent, control-plane clients)
/// may grow this much; parking 100,000 reports took far more.
const GROWTH_BOUND_MIB: f64 = 48.0;

/// This process's resident memory, in MiB.
fn rss_mib() -> f64 {
    rss_kib(std::process::id()).expect("this process's VmRSS") as f64 / 1024.0
}

fn random_report(i: usize) -> v1::AgentMessage {
    v1::AgentMessage {
        body: Some(agent_message::Body::Status(v1::WorkStatus {
            work: Some(v1::WorkRef {
                uid: format!("{:032x}-{i}", rand::random::<u128>()),
                namespace: CLUSTER.into(),
                name: format!("invented-{i}"),
            }),
            generation: 1,
            conditions: vec![v1::Condition {
                r#type: "Applied".into(),
                status: "True".into(),
                reason: "Invented".into(),
                message: "x".repeat(200),
                observed_generation: 1,
                last_transition_unix_seconds: 1_700_000_000,
            }],
            manifests: vec![],
            gone: false,
            trace_context: Default::default(),
        })),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_for_100000_invented_works_keep_the_hubs_memory_flat() {
    // It reads this process's memory: run it where no other test runs.
    if !crate::own_process::alone(
        module_path!(),
        "reports_for_100000_invented_works_keep_the_hubs_memory_flat",
    )
    .await
    {
        return;
    }
    let mut fleet = Fleet::start(FleetOptions {
        tls: false,
        ..FleetOptions::with_spokes(&[CLUSTER])
    })
    .await
    .expect("fleet starts");
    let works = fleet
        .create_work(&manifest_work(
            CLUSTER,
            "real",
            vec![config_map("default", "real", json!({"v": "1"}))],
        ))
        .await
        .expect("create");
    wait_applied(&works, "real").await.expect("applied");
    let clusters: Api<ManagedCluster> = Api::all(fleet.hub_client.clone());

    // A session with the cluster's real token opens, then the agent
    // restarts: the flooding session is the older one.
    let token = join_cluster(&fleet.hub_client, CLUSTER, 3600)
        .await
        .expect("token");
    let before = session_of(&clusters, CLUSTER).await;
    let tx = raw_session(&fleet.hub_url, &token, CLUSTER, vec![]).await;
    wait_new_session(&clusters, CLUSTER, before, APPLY_TIMEOUT)
        .await
        .expect("the flooding session is recorded");
    let flooding = session_of(&clusters, CLUSTER).await;
    fleet.stop_agent(CLUSTER).await;
    fleet.start_agent(CLUSTER);
    wait_new_session(&clusters, CLUSTER, flooding, APPLY_TIMEOUT)
        .await
        .expect("the agent's new session is recorded");

    let unknown = r#"ferry_hub_status_reports_total{outcome="unknown_work"}"#;
    let counted = hub_metric(fleet.hub_probes_addr, unknown)
        .await
        .expect("scrape");
    let baseline = rss_mib();
    let started = std::time::Instant::now();
    for i in 0..REPORTS {
        tx.send(random_report(i))
            .await
            .expect("the hub keeps the session open");
    }
    wait_metric_above(
        fleet.hub_probes_addr,
        unknown,
        counted + REPORTS as f64 - 1.0,
        APPLY_TIMEOUT,
    )
    .await
    .expect("every invented report is counted and dropped");
    let after = rss_mib();
    println!(
        "{REPORTS} reports for invented works in {:?}: RSS {baseline:.1} MiB before, {after:.1} MiB after (+{:.1})",
        started.elapsed(),
        after - baseline
    );
    assert!(
        after - baseline < GROWTH_BOUND_MIB,
        "the hub kept state for invented works: +{:.1} MiB",
        after - baseline
    );

    // The real agent is served meanwhile and after.
    let later = fleet
        .create_work(&manifest_work(
            CLUSTER,
            "later",
            vec![config_map("default", "later", json!({"v": "1"}))],
        ))
        .await
        .expect("create");
    wait_applied(&later, "later")
        .await
        .expect("the cluster's agent is served");
    drop(tx);
    fleet.stop().await;
}
