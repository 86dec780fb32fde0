//! An object created while the hub's watch is away, and delivered by the
//! re-list that follows a 410 Gone, is reconciled from that re-list (issue
//! 31): kube-runtime hands the re-listed objects on before its store swaps
//! them in, so a controller triggered by one found nothing and dropped it
//! until the next sweep. Here the hub's API server runs without a watch
//! cache and etcd is compacted while the hub's link to it is cut, so the
//! hub's watch comes back to an expired resource version and must re-list;
//! the sweep is an hour, so only the re-list can reconcile the placement.
//! The race needs a list of more than one page (the watcher asks for 500
//! objects a page): the first page's objects were reconciled while the
//! second was read, before the store held any of them. So 510 placements
//! that sort after the one created during the cut fill the first page.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use ferry_api::placement::Placement;
use ferry_e2e::harness::agent_process::free_loopback_port;
use ferry_e2e::harness::controlplane::{ControlPlane, ControlPlaneOptions};
use ferry_e2e::harness::etcd::compact_to_current;
use ferry_e2e::harness::hub_process::{HubProcess, HubProcessOptions};
use ferry_e2e::harness::link::{Link, LinkState};
use ferry_e2e::helpers::placement_helpers::create_placement_unbound;
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::APPLY_TIMEOUT;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::PostParams;
use serde_json::json;

const NAMESPACE: &str = "default";
/// Placements beside the one under test: more than the watcher's page of
/// 500, named to sort after it.
const FILLERS: usize = 510;
/// How long the hub may take to notice a cut link or log a re-list: a
/// deadline, not a measure.
const LOG_DEADLINE: Duration = Duration::from_secs(60);

/// The admin kubeconfig of `plane` with its server moved to `link`.
fn kubeconfig_through(plane: &ControlPlane, link: &Link, dir: &std::path::Path) -> PathBuf {
    let admin = std::fs::read_to_string(&plane.info.kubeconfig).expect("read the kubeconfig");
    assert!(admin.contains(&plane.info.server), "{admin}");
    let through = admin.replace(&plane.info.server, &format!("https://{}", link.addr()));
    let path = dir.join("kubeconfig");
    std::fs::write(&path, through).expect("write the kubeconfig");
    path
}

/// How many lines of the hub's log say the placement controller's watch
/// failed, and how many of those name an expired resource version.
fn placement_watch_failures(log: &str) -> (usize, usize) {
    let failures: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("watch failed") && l.contains("placement"))
        .collect();
    let expired = failures
        .iter()
        .filter(|l| l.contains("too old resource version") || l.contains("Expired"))
        .count();
    (failures.len(), expired)
}

/// Waits until the hub's log satisfies `done`, reading it as it grows.
async fn wait_log(hub: &HubProcess, what: &str, done: impl Fn(&str) -> bool) {
    let start = Instant::now();
    loop {
        let log = hub.log();
        if done(&log) {
            return;
        }
        assert!(
            start.elapsed() < LOG_DEADLINE,
            "{what}: not in the hub's log after {LOG_DEADLINE:?}:\n{log}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_placement_created_while_the_hubs_watch_was_away_is_reconciled_from_the_relist_after_a_410()
 {
    let plane = ControlPlane::start(
        "hub-relist",
        ControlPlaneOptions {
            without_watch_cache: true,
            ..Default::default()
        },
    )
    .await
    .expect("control plane starts");
    let admin = plane.client().await.expect("admin client");
    let server: std::net::SocketAddr = plane
        .info
        .server
        .trim_start_matches("https://")
        .parse()
        .expect("the server is an address");
    let link = Link::start(server).await.expect("link starts");
    let dir = tempfile::tempdir().expect("a directory");
    let free = || free_loopback_port().expect("a free port");
    let hub = HubProcess::start_with_kubeconfig(
        kubeconfig_through(&plane, &link, dir.path()),
        HubProcessOptions {
            grpc: free(),
            probes: free(),
            extra_args: vec![
                "--install-crds".into(),
                "--watch-admission-policies=false".into(),
                "--replica-lease-namespace=default".into(),
                // Only a watch can reconcile within the test.
                "--controller-sweep-seconds=3600".into(),
            ],
            env: vec![],
        },
    )
    .await
    .expect("the hub process starts");
    let placements: Api<Placement> = Api::namespaced(admin.clone(), NAMESPACE);
    futures::stream::iter(0..FILLERS)
        .map(|n| {
            let admin = admin.clone();
            async move {
                create_placement_unbound(
                    &admin,
                    NAMESPACE,
                    &format!("page-filler-{n:03}"),
                    json!({}),
                )
                .await;
            }
        })
        .buffer_unordered(16)
        .collect::<Vec<()>>()
        .await;
    create_placement_unbound(&admin, NAMESPACE, "before", json!({})).await;
    wait_until(&placements, "before", "a status", APPLY_TIMEOUT, |p| {
        p.status.is_some()
    })
    .await
    .expect("the hub reconciles a placement created while it watches");

    // The link goes; the hub's placement watch fails and retries.
    let (failed_before, _) = placement_watch_failures(&hub.log());
    link.set(LinkState::Cut);
    wait_log(&hub, "the placement watch failing on the cut link", |log| {
        placement_watch_failures(log).0 > failed_before
    })
    .await;

    // Meanwhile a placement is created, one more write follows it, and
    // etcd forgets everything before: the hub's resource version expires
    // with the placement's creation in the forgotten part.
    create_placement_unbound(&admin, NAMESPACE, "during", json!({})).await;
    Api::<ConfigMap>::namespaced(admin.clone(), NAMESPACE)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "after-the-placement"}}))
                .expect("config map"),
        )
        .await
        .expect("one more write");
    let compacted = compact_to_current(plane.info.etcd_client_port)
        .await
        .expect("etcd compacts");
    let (_, expired_before) = placement_watch_failures(&hub.log());
    link.set(LinkState::Up);
    println!("etcd compacted to revision {compacted}; the link is up again");

    wait_log(
        &hub,
        "the placement watch expiring (410) and re-listing",
        |log| placement_watch_failures(log).1 > expired_before,
    )
    .await;
    let during = wait_until(&placements, "during", "a status", APPLY_TIMEOUT, |p| {
        p.status.is_some()
    })
    .await
    .unwrap_or_else(|e| {
        panic!(
            "the placement created while the watch was away was not reconciled from the re-list ({e}); the hub's log:\n{}",
            hub.log()
        )
    });
    assert!(
        during
            .status
            .as_ref()
            .is_some_and(|s| !s.conditions.is_empty()),
        "{:?}",
        during.status
    );
}
