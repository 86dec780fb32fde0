//! `kubectl ferry dashboard` (issue 24) driven in headless Chromium over
//! WebDriver on real control planes: the fleet page shows every cluster with
//! its state, a work turning Applied=False shows on its tile without a
//! reload, an approval clicked in the page is created as the user, a user
//! without rights sees the action refused with the verb and resource named,
//! and a 1,000-cluster fleet page renders quickly (figures printed).
//! Screenshots of every page go to `<target>/dashboard-screenshots/`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use fantoccini::Locator;
use ferry_api::contract::CLUSTER_SET_LABEL;
use ferry_api::managed_cluster::ManagedCluster;
use ferry_api::replica_set::ManifestWorkReplicaSet;
use ferry_api::rollout_approval::RolloutApproval;
use ferry_e2e::harness::browser::{Browser, target_dir};
use ferry_e2e::harness::controlplane::{ControlPlane, ControlPlaneOptions};
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::harness::local_pod::workspace_binary;
use ferry_e2e::helpers::placement_helpers;
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{
    APPLY_TIMEOUT, config_map, manifest_condition, manifest_work, wait_applied,
};
use futures::StreamExt;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use kube::Client;
use kube::api::{Api, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

/// How long the page may take to show a change made on the hub.
const LIVE_DEADLINE: Duration = Duration::from_secs(15);

/// A running `kubectl ferry dashboard`: its address and the one-time link
/// it printed.
struct Dashboard {
    /// `http://127.0.0.1:PORT`, no trailing slash.
    url: String,
    /// The one-time link (`{url}/session/<secret>`).
    link: String,
    _process: tokio::process::Child,
}

impl Dashboard {
    /// Opens the one-time link in `browser`, which then holds the session
    /// and is on the fleet page.
    async fn sign_in(&self, browser: &Browser) {
        browser
            .client
            .goto(&self.link)
            .await
            .expect("open the one-time link");
        let at = browser.client.current_url().await.expect("current URL");
        assert_eq!(
            at.as_str(),
            format!("{}/", self.url),
            "the one-time link leads to the fleet page"
        );
    }
}

/// Starts the dashboard with `kubeconfig` and waits for its URL.
async fn start_dashboard(kubeconfig: &Path) -> Dashboard {
    let binary = workspace_binary("kubectl-ferry", "KUBECTL_FERRY_BIN");
    let mut process = tokio::process::Command::new(binary)
        .args(["dashboard", "--port", "0"])
        .env("KUBECONFIG", kubeconfig)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("kubectl-ferry dashboard starts");
    let stdout = process.stdout.take().expect("piped stdout");
    let mut lines = BufReader::new(stdout).lines();
    let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("the dashboard prints its URL within 30 s")
        .expect("stdout readable")
        .expect("a line");
    let link = line
        .split_whitespace()
        .find(|w| w.starts_with("http://127.0.0.1:"))
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .to_string();
    let url = link
        .split_once("/session/")
        .unwrap_or_else(|| panic!("no one-time link in {line:?}"))
        .0
        .to_string();
    Dashboard {
        url,
        link,
        _process: process,
    }
}

fn screenshots() -> PathBuf {
    target_dir().join("dashboard-screenshots")
}

/// Runs `script` in the page until it returns `expected`, polling the DOM
/// (no reload); panics with the last value after `deadline`.
async fn wait_dom(
    browser: &Browser,
    what: &str,
    script: &str,
    expected: &Value,
    deadline: Duration,
) -> Duration {
    let start = Instant::now();
    let mut last = Value::Null;
    while start.elapsed() < deadline {
        match browser.client.execute(script, Vec::new()).await {
            Ok(value) if value == *expected => return start.elapsed(),
            Ok(value) => last = value,
            Err(error) => last = json!(error.to_string()),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let page = browser
        .client
        .execute(
            "return document.getElementById('live').textContent + ' | ' + document.getElementById('main').innerText.slice(0, 1500);",
            Vec::new(),
        )
        .await
        .map(|v| v.to_string())
        .unwrap_or_else(|e| e.to_string());
    panic!("{what}: expected {expected} within {deadline:?}, last saw {last}; the page: {page}");
}

fn tile_state(cluster: &str) -> String {
    format!(
        "var t = document.querySelector('[data-cluster=\"{cluster}\"]'); return t ? t.dataset.state : null;"
    )
}

/// Bytes of the page's HTML, CSS and JS as the browser received them.
async fn page_weight(browser: &Browser) -> u64 {
    let script = "var n = performance.getEntriesByType('navigation')[0].encodedBodySize; \
                  performance.getEntriesByType('resource').forEach(function (r) { \
                    if (r.name.indexOf('/assets/') >= 0) { n += r.encodedBodySize; } }); return n;";
    browser
        .client
        .execute(script, Vec::new())
        .await
        .expect("performance entries")
        .as_u64()
        .expect("a byte count")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_fleet_shows_every_cluster_and_a_failing_work_on_its_tile_without_reload() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a", "cluster-b"]))
        .await
        .expect("fleet starts");
    let clusters: Api<ManagedCluster> = Api::all(fleet.hub_client.clone());
    // A cluster whose agent never connects, and cluster sets to filter by.
    let gone: ManagedCluster = serde_json::from_value(json!({
        "apiVersion": "cluster.ferry.dev/v1alpha1", "kind": "ManagedCluster",
        "metadata": {"name": "cluster-gone", "labels": {CLUSTER_SET_LABEL: "red"}},
        "spec": {}
    }))
    .expect("cluster");
    clusters
        .create(&PostParams::default(), &gone)
        .await
        .expect("create cluster-gone");
    for (name, set) in [("cluster-a", "blue"), ("cluster-b", "red")] {
        clusters
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {CLUSTER_SET_LABEL: set}}})),
            )
            .await
            .expect("label the cluster");
        wait_until(&clusters, name, "connected", APPLY_TIMEOUT, |c| {
            c.status.as_ref().is_some_and(|s| s.connected)
        })
        .await
        .expect("the spoke connects");
        let works = fleet
            .create_work(&manifest_work(
                name,
                "web",
                vec![config_map("default", "web", json!({"a": "1"}))],
            ))
            .await
            .expect("create web");
        wait_applied(&works, "web").await.expect("web applies");
    }

    let dashboard = start_dashboard(&fleet.hub.info.kubeconfig).await;
    let browser = Browser::start(1280, 800).await.expect("headless Chromium");
    dashboard.sign_in(&browser).await;
    browser
        .client
        .goto(&format!("{}/", dashboard.url))
        .await
        .expect("open the fleet page");
    for (cluster, state) in [
        ("cluster-a", "healthy"),
        ("cluster-b", "healthy"),
        ("cluster-gone", "disconnected"),
    ] {
        wait_dom(
            &browser,
            cluster,
            &tile_state(cluster),
            &json!(state),
            LIVE_DEADLINE,
        )
        .await;
    }
    let tiles = browser
        .client
        .find_all(Locator::Css(".grid [data-cluster]"))
        .await
        .expect("tiles");
    assert_eq!(tiles.len(), 3, "one tile per cluster");
    let weight = page_weight(&browser).await;
    println!("figure: fleet page weight (HTML+CSS+JS, 3 clusters): {weight} bytes");
    assert!(
        weight < 64 * 1024,
        "the fleet page stays small: {weight} bytes"
    );
    browser
        .screenshot(&screenshots(), "fleet")
        .await
        .expect("fleet screenshot");

    // The page is never reloaded from here on: a reload would lose this.
    browser
        .client
        .execute("window.ferryNoReload = true; return true;", Vec::new())
        .await
        .expect("mark the page");
    let broken = manifest_work(
        "cluster-b",
        "broken",
        vec![
            json!({"apiVersion": "gadgets.example.com/v1", "kind": "Gadget",
                    "metadata": {"name": "g", "namespace": "default"}}),
        ],
    );
    let changed = Instant::now();
    let works_b = fleet.create_work(&broken).await.expect("create broken");
    wait_until(&works_b, "broken", "Applied=False", APPLY_TIMEOUT, |w| {
        manifest_condition(w, 0, "Applied").is_some_and(|c| c.status == "False")
    })
    .await
    .expect("the spoke reports the Gadget failing");
    let reported = changed.elapsed();
    let shown = wait_dom(
        &browser,
        "cluster-b's tile turns failing",
        &tile_state("cluster-b"),
        &json!("failing"),
        LIVE_DEADLINE,
    )
    .await;
    println!(
        "figure: Applied=False on the hub after {reported:?}, on the tile {shown:?} later, without reload"
    );
    let still = browser
        .client
        .execute("return window.ferryNoReload === true;", Vec::new())
        .await
        .expect("read the mark");
    assert_eq!(
        still,
        json!(true),
        "the page was updated in place, not reloaded"
    );
    assert_eq!(
        browser
            .client
            .execute(&tile_state("cluster-a"), Vec::new())
            .await
            .expect("tile a"),
        json!("healthy"),
        "the other cluster's tile is unchanged"
    );

    // The filter by cluster set.
    browser
        .client
        .goto(&format!("{}/?set=red", dashboard.url))
        .await
        .expect("filtered page");
    let shown: Vec<String> = {
        let mut names = Vec::new();
        for tile in browser
            .client
            .find_all(Locator::Css(".grid [data-cluster]"))
            .await
            .expect("tiles")
        {
            names.push(
                tile.attr("data-cluster")
                    .await
                    .expect("attr")
                    .unwrap_or_default(),
            );
        }
        names
    };
    assert_eq!(shown, ["cluster-b", "cluster-gone"], "only the red set");

    // The tile opens the cluster: its failing work with the manifest's reason.
    browser
        .client
        .find(Locator::Css("[data-cluster=\"cluster-b\"]"))
        .await
        .expect("cluster-b tile")
        .click()
        .await
        .expect("open cluster-b");
    wait_dom(
        &browser,
        "cluster page shows broken as Applied False",
        "var c = document.querySelector('[data-work=\"broken\"] [data-condition=\"Applied\"]'); return c ? c.textContent : null;",
        &json!("Applied: False"),
        LIVE_DEADLINE,
    )
    .await;
    let text = browser
        .client
        .find(Locator::Css("[data-work=\"broken\"]"))
        .await
        .expect("broken section")
        .text()
        .await
        .expect("text");
    assert!(text.contains("Gadget"), "the manifest is named: {text}");
    assert!(
        text.contains("Applied=False"),
        "the manifest's condition: {text}"
    );
    browser
        .screenshot(&screenshots(), "cluster")
        .await
        .expect("cluster screenshot");
    browser.close().await;
    drop(dashboard);
    fleet.stop().await;
}

/// A kubeconfig for the hub acting as `user` (the admin impersonates it), so
/// the dashboard runs with exactly that user's RBAC.
fn impersonating_kubeconfig(fleet: &Fleet, user: &str, dir: &Path) -> PathBuf {
    let info = &fleet.hub.info;
    let text = info
        .token_kubeconfig("admin", &info.token, &info.ca_file.display().to_string())
        .replace(
            &format!("    token: {}\n", info.token),
            &format!(
                "    token: {}\n    as: {user}\n    as-groups:\n    - system:authenticated\n",
                info.token
            ),
        );
    let path = dir.join(format!("{user}.kubeconfig"));
    std::fs::write(&path, text).expect("write kubeconfig");
    path
}

/// Gives `user` the ClusterRole `rules` (named after the user).
async fn grant(admin: &Client, user: &str, rules: Vec<PolicyRule>) {
    let role = ClusterRole {
        metadata: ObjectMeta {
            name: Some(format!("dashboard-{user}")),
            ..Default::default()
        },
        rules: Some(rules),
        ..Default::default()
    };
    let binding = ClusterRoleBinding {
        metadata: ObjectMeta {
            name: Some(format!("dashboard-{user}")),
            ..Default::default()
        },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: format!("dashboard-{user}"),
        },
        subjects: Some(vec![Subject {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "User".into(),
            name: user.into(),
            namespace: None,
        }]),
    };
    Api::<ClusterRole>::all(admin.clone())
        .create(&PostParams::default(), &role)
        .await
        .expect("create role");
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &binding)
        .await
        .expect("create binding");
}

fn read_everything() -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec!["*".into()]),
        resources: Some(vec!["*".into()]),
        verbs: vec!["get".into(), "list".into(), "watch".into()],
        ..Default::default()
    }
}

/// Clicks the button `selector`, accepts the confirmation and returns what
/// the notice region then says.
async fn click_confirmed(browser: &Browser, selector: &str) -> String {
    browser
        .client
        .execute(
            "document.getElementById('notice').textContent = ''; return true;",
            Vec::new(),
        )
        .await
        .expect("clear the notice");
    // A live update may replace the button between finding and clicking
    // it: find it again then.
    let start = Instant::now();
    loop {
        let clicked = match browser.client.find(Locator::Css(selector)).await {
            Ok(button) => button.click().await,
            Err(error) => Err(error),
        };
        match clicked {
            Ok(()) => break,
            Err(error) if start.elapsed() > LIVE_DEADLINE => panic!("{selector}: {error}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    let question = browser
        .client
        .get_alert_text()
        .await
        .expect("a confirmation");
    assert!(!question.is_empty(), "the confirmation asks");
    browser.client.accept_alert().await.expect("confirm");
    let start = Instant::now();
    loop {
        let text = browser
            .client
            .execute(
                "return document.getElementById('notice').textContent;",
                Vec::new(),
            )
            .await
            .expect("notice");
        if let Some(text) = text.as_str().filter(|t| !t.is_empty()) {
            return text.to_string();
        }
        assert!(start.elapsed() < LIVE_DEADLINE, "no answer to the action");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A rollout held at a real approval gate: cluster-a labelled the canary,
/// placement `placement` with the canary as its first decision group
/// (waited for until it chose both clusters), and replica set `name`
/// (template value `value`) gated after the canary; returns the replica set
/// once the hub holds it at the gate.
async fn gated_replica_set(
    admin: &kube::Client,
    placement: &str,
    name: &str,
    value: &str,
) -> ManifestWorkReplicaSet {
    let clusters: Api<ManagedCluster> = Api::all(admin.clone());
    clusters
        .patch(
            "cluster-a",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"ring": "canary"}}})),
        )
        .await
        .expect("label the canary");
    placement_helpers::create_placement(
        admin,
        "default",
        placement,
        json!({"decisionStrategy": {"groupStrategy": {"decisionGroups": [
            {"groupName": "canary", "groupClusterSelector": {"labelSelector": {"matchLabels": {"ring": "canary"}}}}
        ]}}}),
    )
    .await;
    // The placement has chosen both clusters (and so its groups) first.
    let placements: Api<ferry_api::placement::Placement> =
        Api::namespaced(admin.clone(), "default");
    wait_until(
        &placements,
        placement,
        "both clusters chosen",
        APPLY_TIMEOUT,
        |p| {
            p.status
                .as_ref()
                .is_some_and(|s| s.number_of_selected_clusters == 2)
        },
    )
    .await
    .expect("the placement chooses both clusters");
    let rs: ManifestWorkReplicaSet = serde_json::from_value(json!({
        "apiVersion": "work.ferry.dev/v1alpha1", "kind": "ManifestWorkReplicaSet",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "manifestWorkTemplate": {"workload": {"manifests": [
                config_map("default", name, json!({"v": value}))]}},
            "placementRefs": [{"name": placement, "rolloutStrategy": {
                "type": "ProgressivePerGroup",
                "progressivePerGroup": {"minSuccessTime": "1s",
                                        "gates": [{"afterGroup": "canary", "approval": true}]}}}]
        }
    }))
    .expect("replica set");
    let replica_sets: Api<ManifestWorkReplicaSet> = Api::namespaced(admin.clone(), "default");
    replica_sets
        .create(&PostParams::default(), &rs)
        .await
        .expect("create the gated replica set");
    wait_until(
        &replica_sets,
        name,
        "the gate awaits approval",
        APPLY_TIMEOUT,
        |rs| {
            rs.status
                .as_ref()
                .and_then(|s| s.rollout.as_ref())
                .and_then(|r| r.placements.iter().find(|p| p.name == placement))
                .and_then(|p| p.gates.iter().find(|g| g.after_group == "canary"))
                .is_some_and(|g| g.state == "AwaitingApproval")
        },
    )
    .await
    .expect("the hub holds the rollout at the gate")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_approval_is_created_as_the_user_and_a_read_only_user_is_refused() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a", "cluster-b"]))
        .await
        .expect("fleet starts");
    let admin = fleet.hub_client.clone();
    // A real gate: cluster-a is the canary group, the approval gate after
    // it holds cluster-b.
    let awaiting = gated_replica_set(&admin, "all", "web", "2").await;
    let replica_sets: Api<ManifestWorkReplicaSet> = Api::namespaced(admin.clone(), "default");
    let hash = awaiting
        .status
        .as_ref()
        .and_then(|s| s.rollout.as_ref())
        .and_then(|r| r.placements.iter().find(|p| p.name == "all"))
        .map(|p| p.revision_digest.clone())
        .unwrap_or_default();
    assert_eq!(hash.len(), 64, "the status gives the whole digest: {hash}");
    let hash = hash.as_str();

    let dir = tempfile::tempdir().expect("tempdir");
    grant(
        &admin,
        "alice",
        vec![
            read_everything(),
            PolicyRule {
                api_groups: Some(vec!["work.ferry.dev".into()]),
                resources: Some(vec!["rolloutapprovals".into()]),
                verbs: vec!["create".into()],
                ..Default::default()
            },
            PolicyRule {
                api_groups: Some(vec!["work.ferry.dev".into()]),
                resources: Some(vec!["manifestworkreplicasets".into()]),
                verbs: vec!["patch".into()],
                ..Default::default()
            },
        ],
    )
    .await;
    grant(&admin, "viewer", vec![read_everything()]).await;

    let gate = "[data-replica-set=\"default/web\"] [data-gate=\"canary\"]";
    // viewer may read, not act.
    let approvals: Api<RolloutApproval> = Api::namespaced(admin.clone(), "default");
    let viewer = start_dashboard(&impersonating_kubeconfig(&fleet, "viewer", dir.path())).await;
    let browser = Browser::start(1280, 900).await.expect("headless Chromium");
    viewer.sign_in(&browser).await;
    browser
        .client
        .goto(&format!("{}/rollouts", viewer.url))
        .await
        .expect("open the rollouts page");
    wait_dom(
        &browser,
        "the viewer sees the gate",
        &format!("return !!document.querySelector('{gate} button[data-action=\"approve\"]');"),
        &json!(true),
        LIVE_DEADLINE,
    )
    .await;
    let answer =
        click_confirmed(&browser, &format!("{gate} button[data-action=\"approve\"]")).await;
    assert!(
        answer.starts_with(
            "forbidden: you may not create rolloutapprovals.work.ferry.dev in namespace default"
        ),
        "{answer}"
    );
    let answer = click_confirmed(
        &browser,
        "[data-replica-set=\"default/web\"] button[data-action=\"pause\"]",
    )
    .await;
    assert!(
        answer.starts_with("forbidden: you may not patch manifestworkreplicasets.work.ferry.dev in namespace default"),
        "{answer}"
    );
    let class = browser
        .client
        .execute(
            "return document.getElementById('notice').className;",
            Vec::new(),
        )
        .await
        .expect("class");
    assert_eq!(class, json!("notice error"), "shown as an error");
    browser
        .screenshot(&screenshots(), "rollouts-forbidden")
        .await
        .expect("forbidden screenshot");
    assert_eq!(
        approvals
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
            .len(),
        0,
        "the refused approval created nothing"
    );
    assert!(
        !replica_sets.get("web").await.expect("get web").spec.paused,
        "the refused pause changed nothing"
    );
    browser.close().await;
    drop(viewer);

    // alice approves and pauses.
    let alice = start_dashboard(&impersonating_kubeconfig(&fleet, "alice", dir.path())).await;
    let browser = Browser::start(1280, 900).await.expect("headless Chromium");
    alice.sign_in(&browser).await;
    browser
        .client
        .goto(&format!("{}/rollouts", alice.url))
        .await
        .expect("open the rollouts page");
    wait_dom(
        &browser,
        "the gate awaits approval",
        &format!("var g = document.querySelector('{gate}'); return g ? g.dataset.state : null;"),
        &json!("AwaitingApproval"),
        LIVE_DEADLINE,
    )
    .await;
    browser
        .screenshot(&screenshots(), "rollouts")
        .await
        .expect("rollouts screenshot");
    let answer =
        click_confirmed(&browser, &format!("{gate} button[data-action=\"approve\"]")).await;
    assert!(
        answer.starts_with("approved the gate after group canary of default/web as alice"),
        "{answer}"
    );
    let list = approvals
        .list(&ListParams::default())
        .await
        .expect("list approvals");
    assert_eq!(list.items.len(), 1, "one approval");
    let spec = &list.items[0].spec;
    assert_eq!(
        (
            spec.replica_set.as_str(),
            spec.placement.as_str(),
            spec.after_group.as_str(),
            spec.revision.as_str(),
            spec.approved_by.as_str()
        ),
        ("web", "all", "canary", hash, "alice"),
        "the approval names the gate, the whole revision digest and the user"
    );

    let answer = click_confirmed(
        &browser,
        "[data-replica-set=\"default/web\"] button[data-action=\"pause\"]",
    )
    .await;
    assert_eq!(answer, "paused the rollout of default/web");
    wait_until(&replica_sets, "web", "paused", APPLY_TIMEOUT, |rs| {
        rs.spec.paused
    })
    .await
    .expect("the replica set is paused");
    wait_dom(
        &browser,
        "the page shows the pause live",
        "return !!document.querySelector('[data-replica-set=\"default/web\"] button[data-action=\"resume\"]');",
        &json!(true),
        LIVE_DEADLINE,
    )
    .await;
    browser.close().await;
    drop(alice);

    // A user who may not even list sees why the fleet is empty.
    let nobody = start_dashboard(&impersonating_kubeconfig(&fleet, "nobody", dir.path())).await;
    let browser = Browser::start(1280, 600).await.expect("headless Chromium");
    nobody.sign_in(&browser).await;
    browser
        .client
        .goto(&format!("{}/", nobody.url))
        .await
        .expect("open the fleet page");
    wait_dom(
        &browser,
        "the fleet page names the refused list",
        "return Array.from(document.querySelectorAll('.banner.error')).some(function (b) { \
           return b.textContent.indexOf('forbidden: you may not list or watch managedclusters.cluster.ferry.dev') === 0; });",
        &json!(true),
        LIVE_DEADLINE,
    )
    .await;
    browser.close().await;
    drop(nobody);
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_says_the_hub_is_unreachable_instead_of_showing_an_empty_fleet() {
    // Nothing listens on this port: the kubeconfig's hub is down.
    let port = ferry_e2e::harness::local_pod::free_port(std::net::Ipv4Addr::LOCALHOST.into());
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("down.kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:{port}\n    insecure-skip-tls-verify: true\nusers:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\n"
        ),
    )
    .expect("write kubeconfig");
    let dashboard = start_dashboard(&kubeconfig).await;
    let browser = Browser::start(1280, 600).await.expect("headless Chromium");
    dashboard.sign_in(&browser).await;
    browser
        .client
        .goto(&format!("{}/", dashboard.url))
        .await
        .expect("open the fleet page");
    wait_dom(
        &browser,
        "the fleet page says the hub is unreachable",
        "return Array.from(document.querySelectorAll('.banner.error')).some(function (b) { \
           return b.textContent.indexOf('hub unreachable while watching managedclusters.cluster.ferry.dev') === 0; });",
        &json!(true),
        LIVE_DEADLINE,
    )
    .await;
    browser
        .screenshot(&screenshots(), "hub-unreachable")
        .await
        .expect("screenshot");
    browser.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_fleet_page_of_1000_clusters_renders_every_tile_quickly() {
    const CLUSTERS: usize = 1000;
    let hub = ControlPlane::start("hub", ControlPlaneOptions::default())
        .await
        .expect("hub control plane");
    let admin = hub.client().await.expect("admin client");
    ferry_hub::crds::install_crds(&admin).await.expect("CRDs");
    let clusters: Api<ManagedCluster> = Api::all(admin.clone());
    let created = Instant::now();
    futures::stream::iter(0..CLUSTERS)
        .for_each_concurrent(16, |i| {
            let clusters = clusters.clone();
            let admin = admin.clone();
            async move {
                let name = format!("cluster-{i:04}");
                let set = ["blue", "red", "green"][i % 3];
                let cluster: ManagedCluster = serde_json::from_value(json!({
                    "apiVersion": "cluster.ferry.dev/v1alpha1", "kind": "ManagedCluster",
                    "metadata": {"name": name, "labels": {CLUSTER_SET_LABEL: set}},
                    "spec": {}
                }))
                .expect("cluster");
                clusters
                    .create(&PostParams::default(), &cluster)
                    .await
                    .expect("create cluster");
                if i % 50 == 1 || i % 50 == 2 {
                    add_work(&admin, &name, i % 50 == 1).await;
                }
                if i % 10 != 0 {
                    clusters
                        .patch_status(
                            &name,
                            &PatchParams::default(),
                            &Patch::Merge(
                                json!({"status": {"connected": true, "agentVersion": "sim"}}),
                            ),
                        )
                        .await
                        .expect("connect cluster");
                }
            }
        })
        .await;
    println!(
        "created {CLUSTERS} ManagedClusters in {:?}",
        created.elapsed()
    );

    let dashboard = start_dashboard(&hub.info.kubeconfig).await;
    let browser = Browser::start(1400, 1000).await.expect("headless Chromium");
    dashboard.sign_in(&browser).await;
    let url = format!("{}/", dashboard.url);
    browser
        .client
        .goto(&url)
        .await
        .expect("open the fleet page");
    // Until the dashboard's watch holds all of them.
    wait_dom(
        &browser,
        "every cluster shown",
        "var c = document.querySelector('[data-count=\"shown\"]'); return c ? Number(c.textContent) : null;",
        &json!(CLUSTERS),
        Duration::from_secs(60),
    )
    .await;
    // Now the measured navigation.
    let started = Instant::now();
    browser
        .client
        .goto(&url)
        .await
        .expect("open the fleet page again");
    let navigation = started.elapsed();
    let timing = browser
        .client
        .execute(
            "var n = performance.getEntriesByType('navigation')[0]; \
             return [n.responseEnd, n.domContentLoadedEventEnd, document.querySelectorAll('.grid [data-cluster]').length];",
            Vec::new(),
        )
        .await
        .expect("timing");
    let weight = page_weight(&browser).await;
    let ready_ms = timing[1].as_f64().expect("domContentLoadedEventEnd");
    println!(
        "figure: fleet page with {CLUSTERS} clusters: {weight} bytes HTML+CSS+JS, response complete {:.0} ms, DOM ready {ready_ms:.0} ms after navigation start, WebDriver navigation {navigation:?}",
        timing[0].as_f64().unwrap_or_default()
    );
    assert_eq!(timing[2], json!(CLUSTERS), "one tile per cluster");
    let disconnected = browser
        .client
        .find_all(Locator::Css(".grid [data-state=\"disconnected\"]"))
        .await
        .expect("tiles")
        .len();
    assert_eq!(
        disconnected,
        CLUSTERS / 10,
        "every tenth cluster is not connected"
    );
    for (state, expected) in [("failing", 20), ("drifted", 20), ("healthy", 860)] {
        let count = browser
            .client
            .execute(
                &format!(
                    "return Number(document.querySelector('[data-count=\"{state}\"]').textContent);"
                ),
                Vec::new(),
            )
            .await
            .expect("legend count");
        assert_eq!(count, json!(expected), "{state} tiles");
    }
    assert!(
        ready_ms < 10_000.0,
        "DOM ready within 10 s, took {ready_ms} ms"
    );
    browser
        .screenshot(&screenshots(), "fleet-1000")
        .await
        .expect("screenshot");
    browser.close().await;
    drop(dashboard);
    hub.stop().await;
}

/// A work in the namespace of cluster `name` whose status says it failed to
/// apply (`failing`) or applied with a drifted field, written as an agent
/// would report it.
async fn add_work(admin: &Client, name: &str, failing: bool) {
    use k8s_openapi::api::core::v1::Namespace;
    let namespace: Namespace =
        serde_json::from_value(json!({"metadata": {"name": name}})).expect("ns");
    Api::<Namespace>::all(admin.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .expect("create namespace");
    let works: Api<ferry_api::manifest_work::ManifestWork> = Api::namespaced(admin.clone(), name);
    works
        .create(
            &PostParams::default(),
            &manifest_work(
                name,
                "app",
                vec![config_map("default", "app", json!({"a": "1"}))],
            ),
        )
        .await
        .expect("create work");
    let condition = |type_: &str, status: &str, reason: &str| {
        json!({"type": type_, "status": status, "reason": reason, "message": "",
               "observedGeneration": 1, "lastTransitionTime": "2026-11-27T00:00:00Z"})
    };
    let applied = if failing { "False" } else { "True" };
    let mut manifest = json!({
        "resourceMeta": {"ordinal": 0, "group": "", "version": "v1", "kind": "ConfigMap",
                         "resource": "configmaps", "name": "app", "namespace": "default"},
        "conditions": [condition("Applied", applied, if failing { "Conflict" } else { "Applied" })]
    });
    if !failing {
        manifest["drift"] = json!({"fields": [{"pointer": "/data/a", "hubValue": "\"1\"",
                                                "spokeValue": "\"2\"", "manager": "kubectl-edit",
                                                "firstSeenTime": "2026-11-27T00:00:00Z"}]});
    }
    works
        .patch_status(
            "app",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "conditions": [condition("Applied", applied, "AppliedManifestWorkComplete")],
                "resourceStatus": {"manifests": [manifest]}
            }})),
        )
        .await
        .expect("report the work's status");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_approval_clicked_lets_the_gated_rollout_continue() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a", "cluster-b"]))
        .await
        .expect("fleet starts");
    let admin = fleet.hub_client.clone();
    gated_replica_set(&admin, "staged", "gated", "1").await;
    let replica_sets: Api<ManifestWorkReplicaSet> = Api::namespaced(admin.clone(), "default");
    let gate_state = |rs: &ManifestWorkReplicaSet| {
        rs.status
            .as_ref()
            .and_then(|s| s.rollout.as_ref())
            .and_then(|r| r.placements.iter().find(|p| p.name == "staged"))
            .and_then(|p| p.gates.iter().find(|g| g.after_group == "canary"))
            .map(|g| g.state.clone())
    };
    let works_b: Api<ferry_api::manifest_work::ManifestWork> =
        Api::namespaced(admin.clone(), "cluster-b");
    assert!(
        works_b
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
            .is_empty(),
        "cluster-b gets nothing before the approval"
    );

    let dashboard = start_dashboard(&fleet.hub.info.kubeconfig).await;
    let browser = Browser::start(1280, 900).await.expect("headless Chromium");
    dashboard.sign_in(&browser).await;
    browser
        .client
        .goto(&format!("{}/rollouts", dashboard.url))
        .await
        .expect("open the rollouts page");
    let gate = "[data-replica-set=\"default/gated\"] [data-gate=\"canary\"]";
    wait_dom(
        &browser,
        "the page shows the gate awaiting approval",
        &format!("var g = document.querySelector('{gate}'); return g ? g.dataset.state : null;"),
        &json!("AwaitingApproval"),
        LIVE_DEADLINE,
    )
    .await;
    browser
        .screenshot(&screenshots(), "rollouts-gated")
        .await
        .expect("screenshot");
    let answer =
        click_confirmed(&browser, &format!("{gate} button[data-action=\"approve\"]")).await;
    assert!(
        answer.starts_with("approved the gate after group canary of default/gated as "),
        "{answer}"
    );
    wait_until(
        &replica_sets,
        "gated",
        "the gate passes",
        APPLY_TIMEOUT,
        |rs| gate_state(rs).as_deref() == Some("Passed"),
    )
    .await
    .expect("the approval opens the gate");
    wait_dom(
        &browser,
        "the page shows the gate passed, live",
        &format!("var g = document.querySelector('{gate}'); return g ? g.dataset.state : null;"),
        &json!("Passed"),
        LIVE_DEADLINE,
    )
    .await;
    let start = Instant::now();
    while works_b
        .list(&ListParams::default())
        .await
        .expect("list")
        .items
        .is_empty()
    {
        assert!(
            start.elapsed() < APPLY_TIMEOUT,
            "cluster-b never got the rollout"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    browser
        .screenshot(&screenshots(), "rollouts-approved")
        .await
        .expect("screenshot");
    browser.close().await;
    drop(dashboard);
    fleet.stop().await;
}

/// One answer of the dashboard to a plain HTTP request.
struct Answer {
    status: u16,
    headers: http::HeaderMap,
    body: String,
}

/// Sends `method` `path` to the dashboard at `url` with `Host: host`, the
/// `cookie` header when given and a form `body` when given.
async fn send(
    url: &str,
    method: &str,
    path: &str,
    host: &str,
    cookie: Option<&str>,
    form: Option<&str>,
) -> Answer {
    use http_body_util::{BodyExt, Full};
    use hyper_util::client::legacy::Client as HttpClient;
    use hyper_util::rt::TokioExecutor;
    let client: HttpClient<_, Full<bytes::Bytes>> =
        HttpClient::builder(TokioExecutor::new()).build_http();
    let mut request = http::Request::builder()
        .method(method)
        .uri(format!("{url}{path}"))
        .header(http::header::HOST, host);
    if let Some(cookie) = cookie {
        request = request.header(http::header::COOKIE, cookie);
    }
    if form.is_some() {
        request = request.header(
            http::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        );
    }
    let request = request
        .body(Full::new(bytes::Bytes::from(
            form.unwrap_or_default().to_string(),
        )))
        .expect("request");
    let response = tokio::time::timeout(Duration::from_secs(30), client.request(request))
        .await
        .expect("the dashboard answers within 30 s")
        .expect("the dashboard answers");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    Answer {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

/// The strict policy every response carries, asserted on `answer` of `what`.
fn assert_strict_headers(answer: &Answer, what: &str) {
    let csp = answer
        .headers
        .get(http::header::CONTENT_SECURITY_POLICY)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_else(|| panic!("{what}: no Content-Security-Policy"));
    for directive in [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "frame-ancestors 'none'",
        "form-action 'self'",
    ] {
        assert!(
            csp.contains(directive),
            "{what}: {directive} missing in {csp}"
        );
    }
    assert!(!csp.contains("unsafe-inline"), "{what}: {csp}");
    assert_eq!(
        answer
            .headers
            .get(http::header::X_CONTENT_TYPE_OPTIONS)
            .and_then(|v| v.to_str().ok()),
        Some("nosniff"),
        "{what}"
    );
}

/// A form field's value in `html`: `name="{name}" value="..."`.
fn form_value(html: &str, name: &str) -> String {
    let marker = format!(r#"name="{name}" value=""#);
    let start = html
        .find(&marker)
        .unwrap_or_else(|| panic!("no form field {name} in {html}"))
        + marker.len();
    let end = html[start..].find('"').expect("closing quote") + start;
    html[start..end].to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_answers_only_its_one_time_session_on_its_own_host_and_writes_nothing_without_it()
{
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a", "cluster-b"]))
        .await
        .expect("fleet starts");
    let admin = fleet.hub_client.clone();
    gated_replica_set(&admin, "all", "web", "1").await;
    let replica_sets: Api<ManifestWorkReplicaSet> = Api::namespaced(admin.clone(), "default");
    let approvals: Api<RolloutApproval> = Api::namespaced(admin.clone(), "default");
    let dashboard = start_dashboard(&fleet.hub.info.kubeconfig).await;
    let url = dashboard.url.clone();
    let host = url.trim_start_matches("http://").to_string();
    let port = host.rsplit(':').next().expect("port").to_string();
    let link_path = dashboard
        .link
        .strip_prefix(&url)
        .expect("the link is on the dashboard")
        .to_string();

    // Before the link is used, nothing is shown: not the pages, not the
    // token, not the event stream.
    for path in ["/", "/rollouts", "/events", "/clusters/cluster-a"] {
        let answer = send(&url, "GET", path, &host, None, None).await;
        assert_eq!(
            answer.status, 401,
            "{path} without a session: {}",
            answer.body
        );
        assert!(
            answer.body.contains("open the one-time link"),
            "{path}: {}",
            answer.body
        );
        assert_strict_headers(&answer, path);
    }
    // A wrong secret is refused and does not use the link up.
    let wrong = send(
        &url,
        "GET",
        "/session/00000000000000000000000000000000",
        &host,
        None,
        None,
    )
    .await;
    assert_eq!(wrong.status, 403, "{}", wrong.body);
    assert!(wrong.headers.get(http::header::SET_COOKIE).is_none());
    // A foreign Host (DNS rebinding) is refused, even on the link.
    for foreign in [
        format!("evil.example:{port}"),
        format!("127.0.0.1.nip.io:{port}"),
        "127.0.0.1".to_string(),
    ] {
        let answer = send(&url, "GET", &link_path, &foreign, None, None).await;
        assert_eq!(answer.status, 421, "Host {foreign}: {}", answer.body);
        assert!(
            answer.body.contains("answers only on its loopback address"),
            "{}",
            answer.body
        );
        assert!(answer.headers.get(http::header::SET_COOKIE).is_none());
        assert_strict_headers(&answer, "a foreign Host");
    }

    // The first use of the link sets the session cookie and leads home.
    let first = send(&url, "GET", &link_path, &host, None, None).await;
    assert_eq!(first.status, 303, "{}", first.body);
    assert_eq!(
        first
            .headers
            .get(http::header::LOCATION)
            .and_then(|v| v.to_str().ok()),
        Some("/")
    );
    let set_cookie = first
        .headers
        .get(http::header::SET_COOKIE)
        .and_then(|v| v.to_str().ok())
        .expect("the link sets a cookie")
        .to_string();
    assert!(set_cookie.contains("HttpOnly"), "{set_cookie}");
    assert!(set_cookie.contains("SameSite=Strict"), "{set_cookie}");
    assert!(
        set_cookie.starts_with(&format!("ferry-dashboard-{port}=")),
        "{set_cookie}"
    );
    let cookie = set_cookie
        .split(';')
        .next()
        .expect("name=value")
        .to_string();
    // A second use, by anyone without the session, is refused.
    let second = send(&url, "GET", &link_path, &host, None, None).await;
    assert_eq!(second.status, 403, "{}", second.body);
    assert!(second.body.contains("used already"), "{}", second.body);
    assert!(second.headers.get(http::header::SET_COOKIE).is_none());
    // A made-up session is no session.
    let forged_cookie = format!("ferry-dashboard-{port}=00000000000000000000000000000000");
    let forged = send(&url, "GET", "/rollouts", &host, Some(&forged_cookie), None).await;
    assert_eq!(forged.status, 401, "{}", forged.body);

    // With the session: the pages, with a strict policy, only external
    // scripts, and the form token.
    let page = send(&url, "GET", "/rollouts", &host, Some(&cookie), None).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert_strict_headers(&page, "the rollouts page");
    for (at, _) in page.body.match_indices("<script") {
        let tag = &page.body[at..at + page.body[at..].find('>').expect("tag end")];
        assert!(tag.contains(" src="), "an inline script: {tag}");
    }
    assert!(!page.body.contains(" style="), "inline style in the page");
    let token = form_value(&page.body, "token");
    let digest = form_value(&page.body, "revision");
    assert_eq!(digest.len(), 64, "the form names the whole digest");
    let asset = send(&url, "GET", "/assets/live.js", &host, Some(&cookie), None).await;
    assert_eq!(asset.status, 200);
    assert_strict_headers(&asset, "the script");
    // ... but not under another Host, cookie or not.
    let rebound = send(
        &url,
        "GET",
        "/rollouts",
        &format!("evil.example:{port}"),
        Some(&cookie),
        None,
    )
    .await;
    assert_eq!(rebound.status, 421, "{}", rebound.body);

    // Actions: without the session, with a forged one, with the session
    // but a wrong or missing token, and from a foreign Host: each refused,
    // nothing written.
    let approve = |token: &str| {
        format!(
            "token={token}&namespace=default&replicaSet=web&placement=all&afterGroup=canary&revision={digest}"
        )
    };
    let pause = |token: &str| format!("token={token}&namespace=default&name=web");
    let refusals = [
        ("no session", None, host.clone(), token.clone(), 401),
        (
            "a forged session",
            Some(forged_cookie.as_str()),
            host.clone(),
            token.clone(),
            401,
        ),
        (
            "a wrong token",
            Some(cookie.as_str()),
            host.clone(),
            "0".repeat(32),
            400,
        ),
        (
            "no token",
            Some(cookie.as_str()),
            host.clone(),
            String::new(),
            400,
        ),
        (
            "a foreign Host",
            Some(cookie.as_str()),
            format!("evil.example:{port}"),
            token.clone(),
            421,
        ),
    ];
    for (what, cookie, host, token, status) in &refusals {
        for (verb, form) in [("approve", approve(token)), ("pause", pause(token))] {
            let answer = send(
                &url,
                "POST",
                &format!("/actions/{verb}"),
                host,
                *cookie,
                Some(&form),
            )
            .await;
            assert_eq!(
                answer.status, *status,
                "{verb} with {what}: {}",
                answer.body
            );
        }
    }
    assert!(
        approvals
            .list(&ListParams::default())
            .await
            .expect("list approvals")
            .items
            .is_empty(),
        "a refused action created an approval"
    );
    assert!(
        !replica_sets.get("web").await.expect("read").spec.paused,
        "a refused action paused the rollout"
    );
    // The same actions with the session and the token are done.
    let done = send(
        &url,
        "POST",
        "/actions/approve",
        &host,
        Some(&cookie),
        Some(&approve(&token)),
    )
    .await;
    assert_eq!(done.status, 200, "{}", done.body);
    assert_strict_headers(&done, "an action's answer");
    let list = approvals
        .list(&ListParams::default())
        .await
        .expect("list approvals");
    assert_eq!(list.items.len(), 1, "one approval");
    assert_eq!(list.items[0].spec.revision, digest);
    let done = send(
        &url,
        "POST",
        "/actions/pause",
        &host,
        Some(&cookie),
        Some(&pause(&token)),
    )
    .await;
    assert_eq!(done.status, 200, "{}", done.body);
    assert!(replica_sets.get("web").await.expect("read").spec.paused);
    drop(dashboard);
    fleet.stop().await;
}

/// Markup, quotes and a closing `</textarea>` with script in them, as a
/// hostile tenant might put in a message or an object name.
const HOSTILE: &str = r#"</textarea></pre><script>alert('x');window.ferryPwned=1</script><img id="pwned" src=x onerror="window.ferryPwned=2">"quoted" 'single' <b id=bold>b</b>"#;

/// The same in an object name (which may hold no `/`).
const HOSTILE_NAME: &str = r#""'><svg id="pwned" onload="alert('n')"><b id=bold>n<textarea>"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_shows_hostile_names_and_messages_as_text_and_runs_no_injected_script() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&[]))
        .await
        .expect("fleet starts");
    let admin = fleet.hub_client.clone();
    // A cluster without an agent, so the work status written here stays.
    let cluster = "cluster-x";
    let clusters: Api<ManagedCluster> = Api::all(admin.clone());
    let managed: ManagedCluster = serde_json::from_value(json!({
        "apiVersion": "cluster.ferry.dev/v1alpha1", "kind": "ManagedCluster",
        "metadata": {"name": cluster}, "spec": {}
    }))
    .expect("cluster");
    clusters
        .create(&PostParams::default(), &managed)
        .await
        .expect("create the cluster");
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(admin.clone());
    match namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": cluster}})).expect("namespace"),
        )
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => panic!("create the namespace: {e}"),
    }
    let works: Api<ferry_api::manifest_work::ManifestWork> =
        Api::namespaced(admin.clone(), cluster);
    works
        .create(
            &PostParams::default(),
            &manifest_work(
                cluster,
                "web",
                vec![
                    config_map("default", "web", json!({"a": HOSTILE})),
                    // An object named with markup (the hub stores it; a
                    // spoke would refuse it).
                    config_map("default", HOSTILE_NAME, json!({})),
                ],
            ),
        )
        .await
        .expect("create the work");
    let condition = json!({"type": "Applied", "status": "False", "reason": "Hostile",
        "message": HOSTILE, "observedGeneration": 1, "lastTransitionTime": "2026-11-27T00:00:00Z"});
    works
        .patch_status(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "conditions": [condition],
                "resourceStatus": {"manifests": [{
                    "resourceMeta": {"ordinal": 0, "group": "", "version": "v1", "kind": "ConfigMap",
                                     "resource": "configmaps", "name": HOSTILE, "namespace": "default"},
                    "conditions": [condition]}]}}})),
        )
        .await
        .expect("write the hostile status");
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(admin.clone(), cluster);
    events
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "hostile", "namespace": cluster},
                "involvedObject": {"kind": "ManifestWork", "name": "web", "namespace": cluster},
                "reason": "Hostile", "message": HOSTILE, "type": "Warning",
                "source": {"component": HOSTILE},
                "lastTimestamp": "2026-11-27T00:00:00Z", "count": 1
            }))
            .expect("event"),
        )
        .await
        .expect("create the hostile event");

    let dashboard = start_dashboard(&fleet.hub.info.kubeconfig).await;
    let browser = Browser::start(1280, 900).await.expect("headless Chromium");
    dashboard.sign_in(&browser).await;
    browser
        .client
        .goto(&format!("{}/clusters/{cluster}", dashboard.url))
        .await
        .expect("open the cluster page");
    let shown = serde_json::to_string(HOSTILE).expect("JSON string");
    let name = serde_json::to_string(HOSTILE_NAME).expect("JSON string");
    // The condition message, the event's source and its message, and the
    // object name, each shown as the very text written.
    wait_dom(
        &browser,
        "the hostile text is shown as text",
        &format!(
            "var t = document.getElementById('main').textContent; \
             return [t.split({shown}).length - 1, t.split({name}).length - 1];"
        ),
        &json!([3, 1]),
        LIVE_DEADLINE,
    )
    .await;
    browser
        .screenshot(&screenshots(), "hostile-text")
        .await
        .expect("screenshot");
    let injected = browser
        .client
        .execute(
            "return [document.querySelectorAll('#main script, #main img, #main svg, #pwned, #bold, #main textarea').length, \
             typeof window.ferryPwned];",
            Vec::new(),
        )
        .await
        .expect("look for injected elements");
    assert_eq!(
        injected,
        json!([0, "undefined"]),
        "markup got into the page"
    );
    assert!(
        browser.client.get_alert_text().await.is_err(),
        "an injected alert is open"
    );
    // The policy is in force in the browser: a script element added to the
    // page is not run.
    let ran = browser
        .client
        .execute(
            "window.ferryInline = false; var s = document.createElement('script'); \
             s.textContent = 'window.ferryInline = true;'; document.body.appendChild(s); \
             return window.ferryInline;",
            Vec::new(),
        )
        .await
        .expect("try an inline script");
    assert_eq!(ran, json!(false), "an inline script ran despite the policy");
    // The live updates still work under the policy.
    wait_dom(
        &browser,
        "the page follows the hub under the policy",
        "return document.getElementById('live').textContent.indexOf('live') === 0;",
        &json!(true),
        LIVE_DEADLINE,
    )
    .await;
    browser.close().await;
    drop(dashboard);
    fleet.stop().await;
}
