//! `ferry-hub join` in one command (issue 10, item 4): with the hub's and
//! the spoke's credentials it prepares the hub (namespace, agent
//! ServiceAccount, ManagedCluster, token) and installs the agent on the
//! spoke (namespace, hub Secret, the ferry-agent chart's manifests); an agent
//! run from the spoke Secret's content connects and applies a work. Running
//! it again changes nothing; `--rotate-token` replaces the token under a
//! running agent; `--output` writes a bundle and leaves the spoke alone.

use std::time::Duration;

use ferry_api::contract::{AGENT_SERVICE_ACCOUNT, TOKEN_BINDING_LABEL};
use ferry_api::managed_cluster::ManagedCluster;
use ferry_e2e::harness::controlplane::{ControlPlane, ControlPlaneOptions};
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::harness::joined_agent::JoinedAgent;
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{config_map, manifest_work, wait_applied};
use ferry_hub::join::both::{JoinOptions, SpokeTarget, join_both_sides};
use ferry_hub::join::bundle::{
    AGENT_HUB_SECRET, AGENT_NAMESPACE, BUNDLE_AGENT_FILE, BUNDLE_SECRET_FILE, BUNDLE_VALUES_FILE,
    HubAccess,
};
use ferry_hub::join::hub_side::{Change, token_refusal};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::Client;
use kube::api::{Api, ListParams};
use serde_json::json;

const CLUSTER: &str = "cluster-a";
const IMAGE: &str = "registry.test/ferry:e2e";
const HEARTBEAT: Duration = Duration::from_secs(5);
/// Longer than the hub's token re-review interval (30 s), which is what ends
/// a session whose token was revoked.
const SESSION_CHANGE: Duration = Duration::from_secs(90);

/// A hub (TLS, CRDs, no spokes of its own) and a spoke control plane nobody
/// joined yet.
async fn hub_and_fresh_spoke() -> (Fleet, ControlPlane, Client) {
    let (fleet, spoke) = tokio::join!(
        Fleet::start(FleetOptions::with_spokes(&[])),
        ControlPlane::start(CLUSTER, ControlPlaneOptions::default())
    );
    let fleet = fleet.expect("the hub starts");
    let spoke = spoke.expect("the spoke starts");
    let client = spoke.client().await.expect("spoke client");
    (fleet, spoke, client)
}

fn join_options(fleet: &Fleet) -> JoinOptions {
    JoinOptions {
        cluster: CLUSTER.into(),
        service_account: AGENT_SERVICE_ACCOUNT.into(),
        hub_url: fleet.hub_url.clone(),
        ca_pem: fleet.hub_ca_pem.clone(),
        image: Some(IMAGE.into()),
        token_seconds: 3600,
        rotate_token: false,
        accept: true,
    }
}

/// Creates a work holding one ConfigMap and waits until the spoke has it.
async fn work_reaches_the_spoke(fleet: &Fleet, spoke: &Client, name: &str) {
    let work = manifest_work(
        CLUSTER,
        name,
        vec![config_map("default", name, json!({"from": "the hub"}))],
    );
    let works = fleet.create_work(&work).await.expect("work created");
    wait_applied(&works, name)
        .await
        .expect("the joined agent applies the work");
    let config_maps: Api<ConfigMap> = Api::namespaced(spoke.clone(), "default");
    let applied = config_maps
        .get(name)
        .await
        .expect("the ConfigMap is on the spoke");
    assert_eq!(
        applied.data.and_then(|d| d.get("from").cloned()).as_deref(),
        Some("the hub")
    );
}

async fn connected_session(hub: &Client, other_than: Option<&str>) -> String {
    let clusters: Api<ManagedCluster> = Api::all(hub.clone());
    let cluster = wait_until(
        &clusters,
        CLUSTER,
        "the joined agent holds a new session",
        SESSION_CHANGE,
        |c| {
            c.status
                .as_ref()
                .is_some_and(|s| s.connected && Some(s.session_id.as_str()) != other_than)
        },
    )
    .await
    .expect("the agent connects");
    cluster.status.expect("status").session_id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_join_sets_up_both_sides_and_an_agent_run_from_the_spoke_secret_applies_a_work() {
    let (fleet, _spoke_plane, spoke) = hub_and_fresh_spoke().await;
    let options = join_options(&fleet);

    let first = join_both_sides(&fleet.hub_client, SpokeTarget::Cluster(&spoke), &options)
        .await
        .expect("join succeeds");
    let lines: Vec<String> = first.applied.iter().map(|a| a.to_string()).collect();
    for expected in [
        "hub: namespace/cluster-a created",
        "hub: serviceaccount/ferry-agent -n cluster-a created",
        "hub: managedcluster/cluster-a created",
        "spoke: namespace/ferry-agent created",
        "spoke: secret/ferry-agent-hub -n ferry-agent created",
        "spoke: serviceaccount/ferry-agent -n ferry-agent created",
        "spoke: clusterrole.rbac.authorization.k8s.io/ferry-agent created",
        "spoke: clusterrolebinding.rbac.authorization.k8s.io/ferry-agent created",
        "spoke: deployment.apps/ferry-agent -n ferry-agent created",
    ] {
        assert!(
            lines.iter().any(|l| l == expected),
            "{expected} in {lines:#?}"
        );
    }
    assert!(
        first.accepted,
        "join accepts the cluster unless told --pending"
    );

    // The spoke holds what the chart's Deployment reads, and the chart's objects.
    let secrets: Api<Secret> = Api::namespaced(spoke.clone(), AGENT_NAMESPACE);
    let secret = secrets.get(AGENT_HUB_SECRET).await.expect("the hub Secret");
    let access = HubAccess::from_secret(&secret).expect("a complete hub Secret");
    assert_eq!(access.cluster_name, CLUSTER);
    assert_eq!(access.hub_url, fleet.hub_url);
    assert_eq!(access.ca_pem, fleet.hub_ca_pem);
    assert_eq!(
        token_refusal(
            &fleet.hub_client,
            CLUSTER,
            AGENT_SERVICE_ACCOUNT,
            &access.token
        )
        .await
        .expect("review"),
        None,
        "the hub takes the Secret's token as the agent's"
    );
    let deployments: Api<Deployment> = Api::namespaced(spoke.clone(), AGENT_NAMESPACE);
    let deployment = deployments
        .get("ferry-agent")
        .await
        .expect("the agent Deployment");
    let pod = deployment
        .spec
        .and_then(|s| s.template.spec)
        .expect("a pod template");
    assert_eq!(pod.containers[0].image.as_deref(), Some(IMAGE));
    Api::<ServiceAccount>::namespaced(spoke.clone(), AGENT_NAMESPACE)
        .get("ferry-agent")
        .await
        .expect("the agent ServiceAccount");
    Api::<ClusterRole>::all(spoke.clone())
        .get("ferry-agent")
        .await
        .expect("the agent ClusterRole");
    Api::<ClusterRoleBinding>::all(spoke.clone())
        .get("ferry-agent")
        .await
        .expect("the agent ClusterRoleBinding");

    // No kubelet runs the Deployment here: the agent runs in this process
    // from exactly what the Secret holds.
    let agent = JoinedAgent::start(&spoke, HEARTBEAT)
        .await
        .expect("an agent from the Secret");
    work_reaches_the_spoke(&fleet, &spoke, "joined").await;

    // Again: nothing changes on either side, and no token is minted.
    let second = join_both_sides(&fleet.hub_client, SpokeTarget::Cluster(&spoke), &options)
        .await
        .expect("join again succeeds");
    assert!(
        second.applied.iter().all(|a| a.change == Change::Unchanged),
        "{:#?}",
        second.applied
    );
    assert_eq!(
        second.applied.len(),
        lines.len() - 1,
        "no new token: {:#?}",
        second.applied
    );
    let again = HubAccess::from_secret(&secrets.get(AGENT_HUB_SECRET).await.expect("Secret"))
        .expect("complete");
    assert_eq!(again, access, "the spoke Secret is as it was");

    agent.stop().await;
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_token_replaces_the_old_one_under_a_running_agent() {
    let (fleet, _spoke_plane, spoke) = hub_and_fresh_spoke().await;
    let mut options = join_options(&fleet);
    join_both_sides(&fleet.hub_client, SpokeTarget::Cluster(&spoke), &options)
        .await
        .expect("join succeeds");
    let agent = JoinedAgent::start(&spoke, HEARTBEAT)
        .await
        .expect("an agent from the Secret");
    let old_token = agent.access.token.clone();
    let first_session = connected_session(&fleet.hub_client, None).await;
    work_reaches_the_spoke(&fleet, &spoke, "before-rotation").await;

    options.rotate_token = true;
    let rotated = join_both_sides(&fleet.hub_client, SpokeTarget::Cluster(&spoke), &options)
        .await
        .expect("rotation succeeds");
    let changed: Vec<String> = rotated
        .applied
        .iter()
        .filter(|a| a.change != Change::Unchanged)
        .map(|a| a.to_string())
        .collect();
    assert!(
        changed
            .iter()
            .any(|l| l == "spoke: secret/ferry-agent-hub -n ferry-agent configured"),
        "{changed:#?}"
    );
    assert!(
        changed.iter().any(|l| l.contains("revoked")),
        "the old token's Secret goes: {changed:#?}"
    );
    // The kubelet updates a mounted Secret's files; here the test does.
    let new_token = agent.refresh_token(&spoke).await.expect("the new token");
    assert_ne!(new_token, old_token);
    let bindings: Api<Secret> = Api::namespaced(fleet.hub_client.clone(), CLUSTER);
    let left = bindings
        .list(&ListParams::default().labels(TOKEN_BINDING_LABEL))
        .await
        .expect("list");
    assert_eq!(left.items.len(), 1, "one token binding is left");

    // The rotation ends the session (its certificate is revoked at once; a
    // token session would end at the hub's next review of the old token);
    // the agent reconnects with the token it reads from its file, and keeps
    // working.
    connected_session(&fleet.hub_client, Some(&first_session)).await;
    work_reaches_the_spoke(&fleet, &spoke, "after-rotation").await;
    // The rotation also revoked the agent's certificate, so its session
    // may have ended before the API server's cache of good reviews (10 s)
    // let the old token go: its verdict is the signal.
    let refusal = tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let mut tick = tokio::time::interval(std::time::Duration::from_millis(500));
        loop {
            tick.tick().await;
            let refusal = token_refusal(
                &fleet.hub_client,
                CLUSTER,
                AGENT_SERVICE_ACCOUNT,
                &old_token,
            )
            .await
            .expect("review");
            if refusal.is_some() {
                return refusal;
            }
        }
    })
    .await
    .expect("the API server refuses the old token once its cache lets it go");
    assert!(
        refusal.as_deref().is_some_and(|r| r.contains("not valid")),
        "the old token is revoked: {refusal:?}"
    );

    agent.stop().await;
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn join_with_output_writes_a_bundle_and_leaves_the_spoke_alone() {
    let (fleet, _spoke_plane, spoke) = hub_and_fresh_spoke().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("bundle");
    let report = join_both_sides(
        &fleet.hub_client,
        SpokeTarget::Bundle(&out),
        &join_options(&fleet),
    )
    .await
    .expect("join --output succeeds");
    assert!(
        report.applied.iter().all(|a| a.side == "hub"),
        "{:#?}",
        report.applied
    );
    let names: Vec<_> = report
        .bundle
        .iter()
        .filter_map(|p| p.file_name()?.to_str())
        .collect();
    assert_eq!(
        names,
        [BUNDLE_AGENT_FILE, BUNDLE_SECRET_FILE, BUNDLE_VALUES_FILE]
    );

    let secret_yaml = std::fs::read_to_string(out.join(BUNDLE_SECRET_FILE)).expect("secret file");
    let document = secret_yaml.split("---\n").nth(1).expect("a document");
    let secret: Secret = serde_yaml::from_str(document).expect("a Secret");
    let access = HubAccess::from_secret(&secret).expect("complete");
    assert_eq!(access.cluster_name, CLUSTER);
    assert_eq!(
        token_refusal(
            &fleet.hub_client,
            CLUSTER,
            AGENT_SERVICE_ACCOUNT,
            &access.token
        )
        .await
        .expect("review"),
        None,
        "the bundle's token is good on the hub"
    );
    let agent_yaml = std::fs::read_to_string(out.join(BUNDLE_AGENT_FILE)).expect("agent file");
    assert!(agent_yaml.contains(IMAGE), "the image is replaced");
    assert!(
        !agent_yaml.contains(&access.token),
        "the token is only in the Secret file"
    );

    let namespaces: Api<Namespace> = Api::all(spoke.clone());
    assert!(
        namespaces
            .get_opt(AGENT_NAMESPACE)
            .await
            .expect("read")
            .is_none(),
        "nothing was applied on the spoke"
    );
    fleet.stop().await;
}

/// Runs the real `ferry-hub join` with `args`; returns its stdout lines.
async fn run_join(binary: &std::path::Path, args: &[String]) -> Vec<String> {
    let output = tokio::process::Command::new(binary)
        .arg("join")
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .expect("ferry-hub runs");
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(
        output.status.success(),
        "ferry-hub join failed: {}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout.lines().map(str::to_string).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_join_command_prints_one_line_per_object_and_unchanged_when_run_again() {
    let [binary, _] = tokio::task::spawn_blocking(ferry_e2e::harness::image::build_binaries)
        .await
        .expect("build task")
        .expect("ferry-hub builds");
    let (fleet, spoke_plane, spoke) = hub_and_fresh_spoke().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let ca = dir.path().join("hub-ca.crt");
    std::fs::write(&ca, &fleet.hub_ca_pem).expect("CA file");
    let args: Vec<String> = [
        "--cluster",
        CLUSTER,
        "--hub-url",
        &fleet.hub_url,
        "--ca",
        &ca.display().to_string(),
        "--hub-kubeconfig",
        &fleet.hub.info.kubeconfig.display().to_string(),
        "--spoke-kubeconfig",
        &spoke_plane.info.kubeconfig.display().to_string(),
        "--image",
        IMAGE,
        "--clusterset",
        "team-a",
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();

    let started = std::time::Instant::now();
    let first = run_join(&binary, &args).await;
    let first_took = started.elapsed();
    for expected in [
        "hub: managedcluster/cluster-a created",
        "spoke: secret/ferry-agent-hub -n ferry-agent created",
        "spoke: deployment.apps/ferry-agent -n ferry-agent created",
    ] {
        assert!(
            first.iter().any(|l| l == expected),
            "{expected} in {first:#?}"
        );
    }
    let started = std::time::Instant::now();
    let second = run_join(&binary, &args).await;
    // A figure for the README, not a limit.
    println!(
        "ferry-hub join: first run {} ms ({} lines), second run {} ms",
        first_took.as_millis(),
        first.len(),
        started.elapsed().as_millis()
    );
    let objects: Vec<&String> = second
        .iter()
        .filter(|l| l.starts_with("hub: ") || l.starts_with("spoke: "))
        .collect();
    assert!(!objects.is_empty(), "{second:#?}");
    assert!(
        objects.iter().all(|l| l.ends_with(" unchanged")),
        "a second run changes nothing: {second:#?}"
    );
    let secrets: Api<Secret> = Api::namespaced(spoke.clone(), AGENT_NAMESPACE);
    let access = HubAccess::from_secret(&secrets.get(AGENT_HUB_SECRET).await.expect("Secret"))
        .expect("complete");
    assert_eq!(access.hub_url, fleet.hub_url);
    let cluster = Api::<ferry_api::managed_cluster::ManagedCluster>::all(fleet.hub_client.clone())
        .get(CLUSTER)
        .await
        .expect("ManagedCluster");
    assert_eq!(
        cluster
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(ferry_api::contract::CLUSTER_SET_LABEL))
            .map(String::as_str),
        Some("team-a"),
        "--clusterset labels the cluster into its set"
    );
    fleet.stop().await;
}
