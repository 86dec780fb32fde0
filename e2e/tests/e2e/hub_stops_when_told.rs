//! A hub told to stop stops, whatever it is doing: with its API server gone
//! (lease and watch retries running), SIGTERM ends the real `ferry-hub`
//! binary within its `--shutdown-grace-seconds`, so it is never found
//! serving beside the replica that replaces it.

use std::time::{Duration, Instant};

use ferry_e2e::harness::agent_process::free_loopback_port;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::harness::hub_metrics::hub_metric;
use ferry_e2e::harness::hub_process::{HubProcess, HubProcessOptions};

const WATCH_ERRORS: &str = "ferry_hub_watch_errors_total";
/// The grace the hub is given on its command line.
const GRACE_SECONDS: u64 = 5;
/// How long the test waits for the exit: a deadline well past the grace,
/// not a measure of speed (the time taken is printed).
const EXIT_DEADLINE: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_ends_a_hub_whose_api_server_is_gone_within_its_grace() {
    let mut fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let free = || free_loopback_port().expect("a free port");
    let mut hub = HubProcess::start(
        &fleet.hub,
        HubProcessOptions {
            grpc: free(),
            probes: free(),
            extra_args: vec![
                "--heartbeat-seconds=1".into(),
                "--leader-election-namespace=default".into(),
                "--leader-election-lease=ferry-hub-stops".into(),
                "--replica-lease-namespace=default".into(),
                format!("--shutdown-grace-seconds={GRACE_SECONDS}"),
            ],
            env: vec![("POD_NAME".into(), "stopping-hub".into())],
        },
    )
    .await
    .expect("the hub process starts");

    // The API server goes away; the hub notices (its watches fail and retry).
    let errors_before = hub_metric(hub.probes(), WATCH_ERRORS)
        .await
        .expect("scrape the hub");
    fleet.hub.kill().await;
    let noticed = Instant::now();
    loop {
        let errors = hub_metric(hub.probes(), WATCH_ERRORS)
            .await
            .expect("the hub still serves its metrics");
        if errors > errors_before {
            break;
        }
        assert!(
            noticed.elapsed() < EXIT_DEADLINE,
            "the hub never saw its API server go: {WATCH_ERRORS} stayed {errors}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let told = Instant::now();
    let status = hub.terminate(EXIT_DEADLINE).await;
    let took = told.elapsed();
    let Some(status) = status else {
        panic!(
            "the hub still runs {EXIT_DEADLINE:?} after SIGTERM (grace {GRACE_SECONDS} s); its log:\n{}",
            hub.log()
        );
    };
    println!("ferry-hub exited with {status} {took:?} after SIGTERM, its API server gone");
}
