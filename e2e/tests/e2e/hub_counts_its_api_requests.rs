//! The hub counts its own requests to its API server
//! (`ferry_hub_api_requests_total`, by verb and resource): the real
//! `ferry-hub` binary serving a real agent, with no other client of those
//! resources on the API server, counts exactly what the API server's own
//! `apiserver_request_total` counted from it: the agent's TokenReview, the
//! connected writes to its ManagedCluster, the lists of every
//! ManagedCluster; and it counts its watches as they start (the API server
//! counts a watch only when it ends).

use std::time::{Duration, Instant};

use ferry_e2e::harness::agent_process::{AgentProcess, free_loopback_port};
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::harness::hub_metrics::{scrape, sum_of};
use ferry_e2e::harness::hub_process::{HubProcess, HubProcessOptions};
use kube::Client;

/// How long the counts may take to agree once the agent is connected: a
/// deadline, not a measure (the hub is idle between heartbeats).
const AGREE_DEADLINE: Duration = Duration::from_secs(60);

/// The series compared: (the hub's selector, the API server's selector).
const COMPARED: [(&str, &str); 3] = [
    (
        "ferry_hub_api_requests_total{verb=\"POST\",group=\"authentication.k8s.io\",resource=\"tokenreviews\",subresource=\"\"}",
        "apiserver_request_total{verb=\"POST\",group=\"authentication.k8s.io\",resource=\"tokenreviews\",subresource=\"\"}",
    ),
    (
        "ferry_hub_api_requests_total{verb=\"PATCH\",group=\"cluster.ferry.dev\",resource=\"managedclusters\",subresource=\"status\"}",
        "apiserver_request_total{verb=\"PATCH\",group=\"cluster.ferry.dev\",resource=\"managedclusters\",subresource=\"status\"}",
    ),
    (
        "ferry_hub_api_requests_total{verb=\"LIST\",group=\"cluster.ferry.dev\",resource=\"managedclusters\",subresource=\"\"}",
        "apiserver_request_total{verb=\"LIST\",group=\"cluster.ferry.dev\",resource=\"managedclusters\",subresource=\"\"}",
    ),
];

/// The hub API server's own `/metrics` text.
async fn apiserver_metrics(client: &Client) -> String {
    let request = http::Request::get("/metrics")
        .body(Vec::new())
        .expect("a GET request");
    client
        .request_text(request)
        .await
        .expect("the API server's metrics")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hub_counts_each_request_it_sends_its_api_server() {
    let mut fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    // The fleet's own hub and agent stop: from here the hub process is the
    // only client of these resources on the hub API server.
    fleet.stop_agent("cluster-a").await;
    fleet.stop_hub().await;
    let before = apiserver_metrics(&fleet.hub_client).await;

    let free = || free_loopback_port().expect("a free port");
    let hub = HubProcess::start(
        &fleet.hub,
        HubProcessOptions {
            grpc: free(),
            probes: free(),
            extra_args: vec![],
            env: vec![],
        },
    )
    .await
    .expect("the ferry-hub process starts");
    let agent =
        AgentProcess::start_with_hub(&fleet, "cluster-a", (&hub.url(), &hub.ca_pem), None, &[])
            .await
            .expect("ferry-agent starts");

    // Each series is counted by the hub at least once (the agent's
    // session is reviewed and marked connected) and, once the requests in
    // flight are answered, as often as the API server counted them.
    let started = Instant::now();
    loop {
        let ours = scrape(hub.probes()).await.expect("the hub's metrics");
        let theirs = apiserver_metrics(&fleet.hub_client).await;
        let last = COMPARED
            .iter()
            .map(|(hub_series, api_series)| {
                (
                    *hub_series,
                    sum_of(&ours, hub_series),
                    sum_of(&theirs, api_series) - sum_of(&before, api_series),
                )
            })
            .collect::<Vec<_>>();
        if last
            .iter()
            .all(|(_, counted, answered)| *counted >= 1.0 && counted == answered)
        {
            println!("hub and API server agree: {last:?}");
            break;
        }
        assert!(
            started.elapsed() < AGREE_DEADLINE,
            "the hub's counts never matched the API server's (series, hub, API server): {last:?}\nhub log:\n{}\nagent log:\n{}",
            hub.log(),
            agent.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The watches that followed the lists are counted as they start.
    let ours = scrape(hub.probes()).await.expect("the hub's metrics");
    assert!(
        sum_of(
            &ours,
            "ferry_hub_api_requests_total{verb=\"WATCH\",resource=\"managedclusters\"}"
        ) >= 1.0,
        "the hub's watch of ManagedClusters is counted"
    );
    drop(agent);
    drop(hub);
    fleet.stop().await;
}
