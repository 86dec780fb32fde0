//! What a tenant cannot do to the hub (issue 30). Item 2: a rollout gate's
//! `health.expression` is tenant CEL the hub evaluates; nine nested `.all`
//! over a ten-element list is 10^9 steps in 200 bytes. Run as the tenant
//! would (impersonating a user with only the README's tenant rights in
//! `team-a`), against the real `ferry-hub` binary with simulated agents:
//! the hostile replica sets get in (the webhook is not serving, as while
//! the hub is down with the default `Ignore` failure policy), and the hub
//! still answers `/readyz`, applies another team's work, reports the
//! hostile gate `Unhealthy` naming the limit, and exits on SIGTERM.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ferry_api::manifest_work::ManifestWork;
use ferry_api::replica_set::ManifestWorkReplicaSet;
use ferry_e2e::harness::agent_process::free_loopback_port;
use ferry_e2e::harness::controlplane::{ControlPlane, ControlPlaneOptions};
use ferry_e2e::harness::hub_metrics::get;
use ferry_e2e::harness::hub_process::{HubProcess, HubProcessOptions};
use ferry_e2e::helpers::placement_helpers::create_placement;
use ferry_e2e::helpers::placement_helpers::label_cluster;
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{config_map, is_applied_at_current_generation};
use ferry_tools::loadgen::agent::Behaviour;
use ferry_tools::loadgen::clusters::join_clusters;
use ferry_tools::loadgen::run::{SimFleet, hub_endpoint};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};
use serde_json::json;

const TEAM: &str = "team-a";
/// Generous: the hub under attack must still do these, not do them fast.
const EVENTUALLY: Duration = Duration::from_secs(60);

fn sim(index: usize) -> String {
    format!("sim-{index:05}")
}

/// Nine nested `.all` over a ten-element list: 10^9 steps, CPU only.
fn hostile_expression() -> String {
    let list = "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]";
    let mut expression = "true".to_string();
    for level in (0..9).rev() {
        expression = format!("{list}.all(x{level}, {expression})");
    }
    expression
}

/// Lets `user` do `verbs` on `resources` of `work.ferry.dev` in `namespace`.
async fn grant(admin: &Client, namespace: &str, user: &str, resources: &[&str], verbs: &[&str]) {
    let meta = ObjectMeta {
        name: Some(format!("{user}-tenant")),
        namespace: Some(namespace.into()),
        ..Default::default()
    };
    let rule = PolicyRule {
        api_groups: Some(vec!["work.ferry.dev".into(), "cluster.ferry.dev".into()]),
        resources: Some(resources.iter().map(|r| r.to_string()).collect()),
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        ..Default::default()
    };
    Api::<Role>::namespaced(admin.clone(), namespace)
        .create(
            &PostParams::default(),
            &Role {
                metadata: meta.clone(),
                rules: Some(vec![rule]),
            },
        )
        .await
        .expect("create Role");
    Api::<RoleBinding>::namespaced(admin.clone(), namespace)
        .create(
            &PostParams::default(),
            &RoleBinding {
                metadata: meta,
                role_ref: RoleRef {
                    api_group: "rbac.authorization.k8s.io".into(),
                    kind: "Role".into(),
                    name: format!("{user}-tenant"),
                },
                subjects: Some(vec![Subject {
                    kind: "User".into(),
                    name: user.into(),
                    api_group: Some("rbac.authorization.k8s.io".into()),
                    ..Default::default()
                }]),
            },
        )
        .await
        .expect("create RoleBinding");
}

/// A replica set of `team-a` on placement `staged` whose gate after the
/// canary group runs `expression`.
async fn create_gated(tenant: &Client, name: &str, expression: &str) {
    let rs: ManifestWorkReplicaSet = serde_json::from_value(json!({
        "apiVersion": "work.ferry.dev/v1alpha1",
        "kind": "ManifestWorkReplicaSet",
        "metadata": {"name": name, "namespace": TEAM},
        "spec": {
            "manifestWorkTemplate": {"workload": {"manifests": [
                config_map("default", name, json!({"v": "1"}))]}},
            "placementRefs": [{"name": "staged", "rolloutStrategy": {
                "type": "ProgressivePerGroup",
                "progressivePerGroup": {"gates": [{"afterGroup": "canary",
                    "health": {"expression": expression}}]}}}],
        },
    }))
    .expect("replica set");
    Api::<ManifestWorkReplicaSet>::namespaced(tenant.clone(), TEAM)
        .create(&PostParams::default(), &rs)
        .await
        .expect("the tenant creates its replica set");
}

/// How long `/readyz` takes to answer 200, or `None` when it does not
/// within 10 s (a starved hub).
async fn readyz(probes: SocketAddr) -> Option<Duration> {
    let started = Instant::now();
    match tokio::time::timeout(Duration::from_secs(10), get(probes, "/readyz")).await {
        Ok(Ok((200, _))) => Some(started.elapsed()),
        _ => None,
    }
}

/// The slowest of five `/readyz` answers (`None`: one did not answer).
async fn worst_readyz(probes: SocketAddr) -> Option<Duration> {
    let mut worst = Duration::ZERO;
    for _ in 0..5 {
        worst = worst.max(readyz(probes).await?);
    }
    Some(worst)
}

/// Another team's plain work on its own cluster: how long until Applied
/// (`None`: not within [`EVENTUALLY`]).
async fn other_team_apply(other: &Client, cluster: &str, name: &str) -> Option<Duration> {
    let works: Api<ManifestWork> = Api::namespaced(other.clone(), cluster);
    let work: ManifestWork = serde_json::from_value(json!({
        "apiVersion": "work.ferry.dev/v1alpha1", "kind": "ManifestWork",
        "metadata": {"name": name, "namespace": cluster},
        "spec": {"workload": {"manifests": [config_map("default", name, json!({"k": "v"}))]}},
    }))
    .expect("work");
    let started = Instant::now();
    works
        .create(&PostParams::default(), &work)
        .await
        .expect("team b creates its work");
    wait_until(
        &works,
        name,
        "applied",
        EVENTUALLY,
        is_applied_at_current_generation,
    )
    .await
    .ok()
    .map(|_| started.elapsed())
}

/// Waits until every hostile replica set's canary work is applied (so its
/// gate opens and the hub evaluates the expression).
async fn wait_canaries(admin: &Client, names: &[String]) {
    let works: Api<ManifestWork> = Api::namespaced(admin.clone(), &sim(0));
    for name in names {
        wait_until(
            &works,
            name,
            "canary applied",
            EVENTUALLY,
            is_applied_at_current_generation,
        )
        .await
        .expect("the hostile replica set's canary work is applied");
    }
}

/// The hostile gate's message once it is Unhealthy (`None`: not within
/// [`EVENTUALLY`]).
async fn hostile_gate(tenant: &Client, name: &str) -> Option<String> {
    let sets: Api<ManifestWorkReplicaSet> = Api::namespaced(tenant.clone(), TEAM);
    let gate_of = |rs: &ManifestWorkReplicaSet| {
        rs.status
            .as_ref()?
            .rollout
            .as_ref()?
            .placements
            .iter()
            .find(|p| p.name == "staged")?
            .gates
            .iter()
            .find(|g| g.after_group == "canary")
            .cloned()
    };
    let rs = wait_until(&sets, name, "gate Unhealthy", EVENTUALLY, |rs| {
        gate_of(rs).is_some_and(|g| g.state == "Unhealthy")
    })
    .await
    .ok()?;
    gate_of(&rs).map(|g| g.message)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_health_gate_neither_starves_the_hub_nor_other_teams() {
    tokio::task::spawn_blocking(ferry_e2e::harness::image::build_binaries)
        .await
        .expect("build task")
        .expect("ferry-hub builds");
    let plane = ControlPlane::start("tenant-attacks", ControlPlaneOptions::default())
        .await
        .expect("control plane");
    let admin = plane.client().await.expect("admin client");
    ferry_hub::crds::install_crds(&admin)
        .await
        .expect("install CRDs");
    let free = || free_loopback_port().expect("a free port");
    // The hub as its own process, as deployed: two runtime workers, like
    // the 2-CPU pod of the attack report.
    let mut hub = HubProcess::start(
        &plane,
        HubProcessOptions {
            grpc: free(),
            probes: free(),
            extra_args: vec!["--heartbeat-seconds=1".into()],
            env: vec![("TOKIO_WORKER_THREADS".into(), "2".into())],
        },
    )
    .await
    .expect("the hub starts");
    let clusters = join_clusters(&admin, 0, 3, 3, 3600)
        .await
        .expect("join simulated clusters");
    let agents = SimFleet::start(
        clusters,
        hub_endpoint(&hub.url(), Some(&hub.ca_pem)).expect("endpoint"),
        Behaviour::steady(Duration::from_secs(1)),
    );
    agents
        .wait_connected(EVENTUALLY)
        .await
        .expect("agents connect");
    label_cluster(&admin, &sim(0), json!({"team": "a", "ring": "canary"})).await;
    label_cluster(&admin, &sim(1), json!({"team": "a"})).await;

    // Team a: a namespace, the README's tenant rights, a placement the
    // platform team bound; mallory is a member of team a.
    Api::<Namespace>::all(admin.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": TEAM}})).expect("namespace"),
        )
        .await
        .expect("create namespace");
    grant(
        &admin,
        TEAM,
        "mallory",
        &["manifestworkreplicasets", "placements"],
        &["create", "get", "list", "watch", "update", "patch"],
    )
    .await;
    create_placement(
        &admin,
        TEAM,
        "staged",
        json!({
            "predicates": [{"requiredClusterSelector": {"labelSelector": {"matchLabels": {"team": "a"}}}}],
            "decisionStrategy": {"groupStrategy": {"decisionGroups": [
                {"groupName": "canary", "groupClusterSelector": {"labelSelector": {"matchLabels": {"ring": "canary"}}}}
            ]}},
        }),
    )
    .await;
    // Team b owns cluster sim-00002 and writes works there.
    grant(
        &admin,
        &sim(2),
        "bob",
        &["manifestworks"],
        &["create", "get", "list", "watch"],
    )
    .await;
    let mallory = plane.client_as("mallory").await.expect("mallory");
    let bob = plane.client_as("bob").await.expect("bob");

    let baseline_readyz = worst_readyz(hub.probes()).await;
    let baseline_apply = other_team_apply(&bob, &sim(2), "b-before").await;
    println!("no attack: /readyz worst {baseline_readyz:?}, team b applied in {baseline_apply:?}");

    let expression = hostile_expression();
    let mut hostile = Vec::new();
    let mut failures = Vec::new();
    for (count, stage) in [(2usize, "b-two"), (10, "b-ten")] {
        let names: Vec<String> = (hostile.len()..count)
            .map(|i| format!("hostile-{i}"))
            .collect();
        for name in &names {
            create_gated(&mallory, name, &expression).await;
        }
        hostile.extend(names);
        wait_canaries(&admin, &hostile).await;
        let worst = worst_readyz(hub.probes()).await;
        let applied = other_team_apply(&bob, &sim(2), stage).await;
        println!(
            "{count} hostile replica sets: /readyz worst {worst:?}, team b applied in {applied:?}"
        );
        if worst.is_none() {
            failures.push(format!(
                "{count} hostile: /readyz did not answer 200 within 10 s"
            ));
        }
        if applied.is_none() {
            failures.push(format!(
                "{count} hostile: team b's work was not Applied within {EVENTUALLY:?}"
            ));
        }
        for name in &hostile {
            match hostile_gate(&mallory, name).await {
                Some(message) if message.contains("static cost limit") => {}
                other => failures.push(format!(
                    "{count} hostile: gate of {name} is not Unhealthy naming the limit: {other:?}"
                )),
            }
        }
        if !failures.is_empty() {
            break;
        }
    }
    let exited = hub.terminate(Duration::from_secs(30)).await;
    println!("after SIGTERM: {exited:?}");
    if exited.is_none() {
        failures.push("the hub did not exit within 30 s of SIGTERM".into());
        // A starved hub ignores SIGTERM: end it so the agents can stop.
        hub.kill().await;
    }
    let _ = tokio::time::timeout(Duration::from_secs(30), agents.stop()).await;
    assert!(failures.is_empty(), "{failures:#?}");
}
