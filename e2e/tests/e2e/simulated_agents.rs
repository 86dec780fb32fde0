//! The load generator's simulated agents are real agents to the hub (issue
//! 11, item 1): joined with real tokens over real TLS, each receives the
//! work written for its cluster, its Applied report reaches the hub, and a
//! hub restart resends nothing to agents that hold every work.

use std::time::Duration;

use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_tools::loadgen::agent::Behaviour;
use ferry_tools::loadgen::clusters::join_clusters;
use ferry_tools::loadgen::hub_watch::AppliedWatch;
use ferry_tools::loadgen::run::{SimFleet, hub_endpoint};
use ferry_tools::loadgen::scenarios::create_works;

const CLUSTERS: usize = 20;
const TIMEOUT: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulated_agents_receive_their_works_report_applied_and_get_nothing_resent_after_a_hub_restart()
 {
    let mut fleet = Fleet::start(FleetOptions::with_spokes(&[]))
        .await
        .expect("fleet");
    let clusters = join_clusters(&fleet.hub_client, 0, CLUSTERS, 8, 3600)
        .await
        .expect("join");
    let names: Vec<String> = clusters.iter().map(|c| c.name.clone()).collect();
    let endpoint = hub_endpoint(&fleet.hub_url, Some(&fleet.hub_ca_pem)).expect("endpoint");
    let agents = SimFleet::start(
        clusters,
        endpoint,
        Behaviour::steady(Duration::from_secs(5)),
    );
    agents.wait_connected(TIMEOUT).await.expect("connected");

    let watch = AppliedWatch::start(fleet.hub_client.clone());
    create_works(&fleet.hub_client, &names, &["smoke".to_string()], 8)
        .await
        .expect("works");
    for cluster in &names {
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        loop {
            let received = agents.arrivals().arrived(cluster, "smoke", 1).await;
            let applied = watch.applied(cluster, "smoke", 1).await;
            if received.is_some() && applied.is_some() {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "work {cluster}/smoke: received {}, Applied on the hub {}",
                received.is_some(),
                applied.is_some()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let before = agents.snapshot();
    assert_eq!(before.upserts, CLUSTERS as u64, "one upsert per agent");
    assert!(before.held_bytes > 0);

    // A restarted hub welcomes every agent again and sends no work it
    // holds: each agent's Hello lists them. A work written after the
    // welcomes is the signal: the initial sync was queued on each stream
    // before it, so every resent work would have arrived first.
    fleet.stop_hub().await;
    agents
        .wait_for(TIMEOUT, |s| s.connected == 0)
        .await
        .expect("every agent saw the hub go");
    fleet.start_hub().await.expect("hub again");
    let all = CLUSTERS as u64;
    agents
        .wait_for(TIMEOUT, |s| {
            s.connected == all && s.since(&before).welcomes >= all
        })
        .await
        .expect("every agent served again");
    create_works(&fleet.hub_client, &names, &["after".to_string()], 8)
        .await
        .expect("works after the restart");
    for cluster in &names {
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        while agents
            .arrivals()
            .arrived(cluster, "after", 1)
            .await
            .is_none()
        {
            assert!(
                tokio::time::Instant::now() < deadline,
                "work {cluster}/after never arrived"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    assert_eq!(
        agents.snapshot().since(&before).upserts,
        all,
        "only the works written after the restart were sent"
    );
    agents.stop().await;
    fleet.stop().await;
}
