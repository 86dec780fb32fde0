//! The real `ferry-agent` binary stops cleanly on SIGTERM, as a Pod rollout
//! sends it: it takes no new work, abandons a pass stuck waiting (safe, since
//! objects are recorded before they are created), closes its hub stream and
//! exits 0 well within Kubernetes' 30 s grace period (issue 9, item 7).

use std::process::Stdio;
use std::time::{Duration, Instant};

use ferry_api::managed_cluster::ManagedCluster;
use ferry_e2e::harness::agent_process::agent_binary;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{
    APPLY_TIMEOUT, config_map, manifest_work, schemaless_crd, wait_applied,
};
use kube::Api;
use kube::api::{DynamicObject, PostParams};
use serde_json::json;

/// Kubernetes' default terminationGracePeriodSeconds: how long this test
/// waits for the exit (a deadline, not a performance assertion).
const GRACE: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_the_agent_binary_mid_pass_with_exit_zero_and_closes_its_session() {
    let mut fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    // The binary, not the in-process agent, serves the spoke.
    fleet.stop_agent("cluster-a").await;
    let spoke = fleet.spoke("cluster-a");
    let dir = tempfile::tempdir().expect("tempdir");
    let token = dir.path().join("token");
    std::fs::write(&token, spoke.agent_token().expect("inline token")).expect("write token");
    let ca = dir.path().join("hub-ca.crt");
    std::fs::write(&ca, &fleet.hub_ca_pem).expect("write CA");
    let log = std::fs::File::create(dir.path().join("agent.log")).expect("log file");
    let mut agent = tokio::process::Command::new(agent_binary())
        .args(["--hub-url", &fleet.hub_url, "--cluster-name", "cluster-a"])
        .arg("--token-file")
        .arg(&token)
        .arg("--hub-ca")
        .arg(&ca)
        .args(["--probe-addr", "127.0.0.1:0", "--heartbeat-seconds", "2"])
        .env("KUBECONFIG", &spoke.control_plane.info.kubeconfig)
        .env("RUST_LOG", "info")
        .stdout(Stdio::from(log.try_clone().expect("log")))
        .stderr(Stdio::from(log))
        .kill_on_drop(true)
        .spawn()
        .expect("start ferry-agent");

    // The binary serves the cluster: a work reaches the spoke.
    let works = fleet
        .create_work(&manifest_work(
            "cluster-a",
            "served",
            vec![config_map("default", "served", json!({"k": "v"}))],
        ))
        .await
        .expect("create work");
    wait_applied(&works, "served")
        .await
        .expect("the binary applies works");

    // A pass that cannot finish: the work's CRD names a kind another CRD of
    // the spoke already serves, so it is never established and the agent
    // waits for it.
    let crds = spoke.api("apiextensions.k8s.io/v1", "CustomResourceDefinition", None);
    let blocker: DynamicObject =
        serde_json::from_value(schemaless_crd("sigterm.ferry.test", "widgets", "Widget"))
            .expect("crd");
    crds.create(&PostParams::default(), &blocker)
        .await
        .expect("create the spoke's own CRD");
    wait_until(
        &crds,
        "widgets.sigterm.ferry.test",
        "the spoke's own CRD is established",
        APPLY_TIMEOUT,
        |c| {
            c.data["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Established" && c["status"] == "True")
        },
    )
    .await
    .expect("established");
    fleet
        .create_work(&manifest_work(
            "cluster-a",
            "stuck",
            vec![schemaless_crd("sigterm.ferry.test", "gizmos", "Widget")],
        ))
        .await
        .expect("create the stuck work");
    wait_until(
        &crds,
        "gizmos.sigterm.ferry.test",
        "the agent created the CRD it now waits for",
        APPLY_TIMEOUT,
        |_| true,
    )
    .await
    .expect("the agent is mid-pass");

    let pid = agent.id().expect("the agent runs");
    let sent = Instant::now();
    let kill = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(kill.success(), "SIGTERM delivered");
    let status = tokio::time::timeout(GRACE, agent.wait())
        .await
        .unwrap_or_else(|_| {
            let log = std::fs::read_to_string(dir.path().join("agent.log")).unwrap_or_default();
            panic!("ferry-agent did not exit within {GRACE:?} of SIGTERM; its log:\n{log}")
        })
        .expect("wait for ferry-agent");
    let took = sent.elapsed();
    println!("ferry-agent exited with {status} {took:?} after SIGTERM");
    let log = std::fs::read_to_string(dir.path().join("agent.log")).unwrap_or_default();
    assert!(
        status.success(),
        "ferry-agent exits 0 on SIGTERM, got {status}; its log:\n{log}"
    );
    assert!(
        log.contains("shutting down") && log.contains("agent stopped"),
        "the agent says it shuts down and has stopped; its log:\n{log}"
    );

    // Its session is closed: the hub marks the cluster disconnected.
    let clusters: Api<ManagedCluster> = Api::all(fleet.hub_client.clone());
    wait_until(
        &clusters,
        "cluster-a",
        "the hub sees the session closed",
        APPLY_TIMEOUT,
        |c| c.status.as_ref().is_some_and(|s| !s.connected),
    )
    .await
    .expect("the session is closed");
    fleet.stop().await;
}
