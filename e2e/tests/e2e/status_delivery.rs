//! Status reaches the hub (issue 9, item 5): a status the hub could not write
//! (its rights on `manifestworks/status` taken away) lands once it can,
//! without any change to the work, and a reconnect rewrites nothing; an older
//! session cannot write an older generation over a newer one; a work with 300
//! failing manifests still gets a (shortened) status saying how many problems
//! were left out; a `gone` whose release is refused at first lets the work go
//! once the hub may remove the finalizer; reports naming another cluster's
//! work are dropped and counted.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ferry_api::contract::CLEANUP_FINALIZER;
use ferry_api::managed_cluster::ManagedCluster;
use ferry_api::manifest_work::{FeedbackRule, FeedbackType, ManifestWork, UpdateStrategyType};
use ferry_e2e::harness::fleet::{Fleet, FleetOptions, HUB_USER, grant_hub};
use ferry_e2e::harness::hub_metrics::hub_metric;
use ferry_e2e::harness::link::LinkState;
use ferry_e2e::helpers::sessions::{
    open_raw_session, raw_session, session_of, wait_agent_session, wait_new_session,
};
use ferry_e2e::helpers::wait::{wait_deleted, wait_until};
use ferry_e2e::helpers::work_helpers::{
    APPLY_TIMEOUT, config_map, edit_and_wait, feedback_value, manifest_work, strategy_config,
    wait_applied, work_condition,
};
use ferry_hub::join::hub_side::join_cluster;
use ferry_proto::v1::{self, agent_message};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::rbac::v1::PolicyRule;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

const CLUSTER: &str = "cluster-a";
const METRIC_TIMEOUT: Duration = Duration::from_secs(60);

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> PolicyRule {
    let strings = |items: &[&str]| Some(items.iter().map(|s| s.to_string()).collect());
    PolicyRule {
        api_groups: strings(groups),
        resources: strings(resources),
        verbs: verbs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

/// What the hub needs, with or without its right to write work status and
/// to patch works (which removes the finalizer).
fn hub_rules(status: bool, patch_works: bool) -> Vec<PolicyRule> {
    let mut rules = vec![
        rule(
            &[
                "",
                "authentication.k8s.io",
                "authorization.k8s.io",
                "admissionregistration.k8s.io",
                "apiextensions.k8s.io",
                "coordination.k8s.io",
                "events.k8s.io",
            ],
            &["*"],
            &["*"],
        ),
        rule(
            &["cluster.ferry.dev"],
            &["managedclusters", "managedclusters/status"],
            &["*"],
        ),
    ];
    rules.push(if patch_works {
        rule(&["work.ferry.dev"], &["manifestworks"], &["*"])
    } else {
        rule(
            &["work.ferry.dev"],
            &["manifestworks"],
            &["get", "list", "watch", "create"],
        )
    });
    if status {
        rules.push(rule(&["work.ferry.dev"], &["manifestworks/status"], &["*"]));
    }
    rules
}

/// Waits until the hub's API server answers `allowed` for the hub's user
/// doing `verb` on `manifestworks` (`subresource`), so a change of its rights
/// is in force before the test relies on it.
async fn wait_hub_allowed(admin: &Client, verb: &str, subresource: &str, allowed: bool) {
    let reviews: Api<SubjectAccessReview> = Api::all(admin.clone());
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(HUB_USER.into()),
            groups: Some(vec!["system:authenticated".into()]),
            resource_attributes: Some(ResourceAttributes {
                group: Some("work.ferry.dev".into()),
                resource: Some("manifestworks".into()),
                subresource: Some(subresource.into()),
                verb: Some(verb.into()),
                namespace: Some(CLUSTER.into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let answer = reviews
            .create(&PostParams::default(), &review)
            .await
            .expect("review access");
        if answer.status.is_some_and(|s| s.allowed == allowed) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the hub's rights did not change to allowed={allowed} within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until hub metric `name` satisfies `done`, and returns its value.
async fn wait_metric(addr: SocketAddr, name: &str, done: impl Fn(f64) -> bool) -> f64 {
    wait_sum(addr, &[name], done).await
}

/// Waits until the sum of hub metrics `names` satisfies `done`, and returns
/// it.
async fn wait_sum(addr: SocketAddr, names: &[&str], done: impl Fn(f64) -> bool) -> f64 {
    let deadline = Instant::now() + METRIC_TIMEOUT;
    loop {
        let value = metric_sum(addr, names).await;
        if done(value) {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "{names:?} = {value} did not reach the expected value within {METRIC_TIMEOUT:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn metric(addr: SocketAddr, name: &str) -> f64 {
    hub_metric(addr, name).await.expect("scrape hub metrics")
}

async fn metric_sum(addr: SocketAddr, names: &[&str]) -> f64 {
    let mut sum = 0.0;
    for name in names {
        sum += metric(addr, name).await;
    }
    sum
}

/// Reports the hub has taken from a newest session: written, or found to
/// match the live status.
const DELIVERED: [&str; 2] = [
    r#"ferry_hub_status_reports_total{outcome="written"}"#,
    r#"ferry_hub_status_reports_total{outcome="unchanged"}"#,
];

fn restricted_fleet() -> FleetOptions {
    FleetOptions {
        hub_rules: Some(hub_rules(true, true)),
        ..FleetOptions::with_spokes(&[CLUSTER])
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_the_hub_could_not_write_lands_once_it_can_without_any_change_to_the_work() {
    let fleet = Fleet::start(restricted_fleet())
        .await
        .expect("fleet starts");
    let metrics = fleet.hub_probes_addr;
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}}});
    let mut work = manifest_work(CLUSTER, "web", vec![deployment]);
    let mut config = strategy_config(
        "apps",
        "deployments",
        "default",
        "web",
        UpdateStrategyType::Update,
    );
    config.feedback_rules = vec![FeedbackRule {
        type_: FeedbackType::WellKnownStatus,
        json_paths: vec![],
    }];
    work.spec.manifest_configs = vec![config];
    let works = fleet.create_work(&work).await.expect("create");
    let applied = wait_applied(&works, "web").await.expect("applied");
    let generation = applied.metadata.generation;

    // The hub loses its right to write work status.
    grant_hub(&fleet.hub_client, &hub_rules(false, true))
        .await
        .expect("revoke");
    wait_hub_allowed(&fleet.hub_client, "patch", "status", false).await;
    let failures = metric(metrics, "ferry_hub_status_write_failures_total").await;

    // Meanwhile the spoke's status changes, and the agent reports it.
    let spoke = fleet
        .spoke(CLUSTER)
        .api("apps/v1", "Deployment", Some("default"));
    let status = json!({"status": {"observedGeneration": 1, "replicas": 3, "readyReplicas": 3,
        "availableReplicas": 3, "updatedReplicas": 3}});
    spoke
        .patch_status("web", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("write spoke status");
    wait_metric(metrics, "ferry_hub_status_write_failures_total", |v| {
        v > failures
    })
    .await;
    assert!(metric(metrics, "ferry_hub_status_reports_pending").await >= 1.0);
    let unwritten = works.get("web").await.expect("read");
    assert_ne!(
        feedback_value(&unwritten, 0, "ReadyReplicas").and_then(|v| v.integer),
        Some(3),
        "the hub had no right to write this yet"
    );

    // The hub keeps trying, with growing waits between tries.
    let retries = metric(metrics, "ferry_hub_status_write_retries_total").await;
    wait_metric(metrics, "ferry_hub_status_write_retries_total", |v| {
        v >= retries + 4.0
    })
    .await;

    // The right comes back; nobody touches the work.
    let restored = Instant::now();
    grant_hub(&fleet.hub_client, &hub_rules(true, true))
        .await
        .expect("restore");
    let landed = wait_until(
        &works,
        "web",
        "the status reported during the gap",
        APPLY_TIMEOUT,
        |w: &ManifestWork| feedback_value(w, 0, "ReadyReplicas").and_then(|v| v.integer) == Some(3),
    )
    .await
    .expect("the status lands without a work change");
    println!(
        "status landed {:?} after the hub's right was restored (retries so far: {})",
        restored.elapsed(),
        metric(metrics, "ferry_hub_status_write_retries_total").await
    );
    assert_eq!(
        landed.metadata.generation, generation,
        "the work did not change"
    );
    wait_metric(metrics, "ferry_hub_status_reports_pending", |v| v == 0.0).await;

    // Steady state: a new session sends every status again and the hub
    // writes none of them.
    let writes = metric(metrics, "ferry_hub_status_writes_total").await;
    let reports = metric(metrics, "ferry_hub_status_reports_total").await;
    fleet.spoke(CLUSTER).link.set(LinkState::Cut);
    wait_metric(metrics, "ferry_hub_agent_sessions", |v| v == 0.0).await;
    fleet.spoke(CLUSTER).link.set(LinkState::Up);
    wait_metric(metrics, "ferry_hub_status_reports_total", |v| v > reports).await;
    let rewritten = metric(metrics, "ferry_hub_status_writes_total").await - writes;
    println!("status writes after a reconnect resent every status: {rewritten}");
    assert_eq!(rewritten, 0.0, "an unchanged status is not written again");
    fleet.stop().await;
}

fn report(work: &ManifestWork, uid: &str, generation: i64, reason: &str) -> v1::WorkStatus {
    v1::WorkStatus {
        work: Some(v1::WorkRef {
            uid: uid.into(),
            namespace: CLUSTER.into(),
            name: work.name_any(),
        }),
        generation,
        conditions: vec![v1::Condition {
            r#type: "Applied".into(),
            status: "False".into(),
            reason: reason.into(),
            message: format!("written by a session that saw generation {generation}"),
            observed_generation: generation,
            last_transition_unix_seconds: 1_700_000_000,
        }],
        manifests: vec![],
        gone: false,
        trace_context: Default::default(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_of_an_older_generation_a_future_one_or_another_work_are_dropped_as_stale() {
    let fleet = Fleet::start(FleetOptions {
        tls: false,
        ..FleetOptions::with_spokes(&[CLUSTER])
    })
    .await
    .expect("fleet starts");
    let metrics = fleet.hub_probes_addr;
    let work = manifest_work(
        CLUSTER,
        "gens",
        vec![config_map("default", "gens", json!({"v": "1"}))],
    );
    let works = fleet.create_work(&work).await.expect("create");
    wait_applied(&works, "gens").await.expect("generation 1");
    let newer = edit_and_wait(&works, "gens", |m| m[0]["data"]["v"] = json!("2"))
        .await
        .expect("generation 2 applied");
    assert_eq!(newer.metadata.generation, Some(2));
    let uid = newer.uid().expect("uid");

    // A second session of the same cluster, with the cluster's real token,
    // that still believes in generation 1; also one from the future and one
    // for another incarnation of the work.
    let token = join_cluster(&fleet.hub_client, CLUSTER, 3600)
        .await
        .expect("token");
    let stale = metric(metrics, "ferry_hub_status_reports_stale_total").await;
    let session = raw_session(
        &fleet.hub_url,
        &token,
        CLUSTER,
        vec![
            report(&newer, &uid, 1, "OlderSession"),
            report(&newer, &uid, 9, "FutureSession"),
            report(&newer, "another-uid", 2, "OtherWork"),
        ],
    )
    .await;
    wait_metric(metrics, "ferry_hub_status_reports_stale_total", |v| {
        v >= stale + 3.0
    })
    .await;
    drop(session);

    let live = works.get("gens").await.expect("read");
    assert_eq!(
        live.status, newer.status,
        "the newer generation's status stands"
    );
    let applied = work_condition(&live, "Applied").expect("Applied");
    assert_eq!(
        (applied.status.as_str(), applied.observed_generation),
        ("True", 2)
    );
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_naming_another_clusters_work_are_dropped_and_counted() {
    let fleet = Fleet::start(FleetOptions {
        tls: false,
        ..FleetOptions::with_spokes(&[CLUSTER])
    })
    .await
    .expect("fleet starts");
    let metrics = fleet.hub_probes_addr;
    // A second cluster joined on the hub, with a work and no agent: nobody
    // has a right to write that work's status.
    let other = "cluster-b";
    join_cluster(&fleet.hub_client, other, 3600)
        .await
        .expect("join cluster-b");
    let theirs = fleet
        .create_work(&manifest_work(
            other,
            "theirs",
            vec![config_map("default", "theirs", json!({"k": "v"}))],
        ))
        .await
        .expect("create cluster-b's work");
    let work = theirs.get("theirs").await.expect("read");
    let uid = work.uid().expect("uid");

    // cluster-a's agent, with its real token, reports on cluster-b's work:
    // once naming cluster-b's namespace, once passing it off as its own.
    let token = join_cluster(&fleet.hub_client, CLUSTER, 3600)
        .await
        .expect("token");
    let unknown_work = "ferry_hub_status_reports_total{outcome=\"unknown_work\"}";
    let before = metric(metrics, unknown_work).await;
    let forged = |namespace: &str| v1::WorkStatus {
        work: Some(v1::WorkRef {
            uid: uid.clone(),
            namespace: namespace.into(),
            name: "theirs".into(),
        }),
        ..report(&work, &uid, 1, "Forged")
    };
    let session = raw_session(
        &fleet.hub_url,
        &token,
        CLUSTER,
        vec![forged(other), forged(CLUSTER)],
    )
    .await;
    let after = wait_metric(metrics, unknown_work, |v| v >= before + 2.0).await;
    println!(
        "reports for another cluster's work counted as unknown_work: {}",
        after - before
    );
    drop(session);

    let live = theirs.get("theirs").await.expect("read");
    assert!(
        work_condition(&live, "Applied").is_none(),
        "cluster-b's work has no status from cluster-a: {:?}",
        live.status
    );
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_work_with_300_failing_manifests_gets_a_shortened_status_counting_what_was_left_out() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&[CLUSTER]))
        .await
        .expect("fleet starts");
    let gadgets: Vec<_> = (0..300)
        .map(|i| {
            json!({"apiVersion": "example.com/v1", "kind": "Gadget",
                "metadata": {"name": format!("gadget-{i}"), "namespace": "default"}})
        })
        .collect();
    let works = fleet
        .create_work(&manifest_work(CLUSTER, "gadgets", gadgets))
        .await
        .expect("create");
    let work = wait_until(
        &works,
        "gadgets",
        "the failure of every manifest reported",
        APPLY_TIMEOUT,
        |w: &ManifestWork| {
            work_condition(w, "Applied").is_some_and(|c| {
                c.status == "False"
                    && c.observed_generation == 1
                    && c.message
                        .starts_with("300 of 300 manifests are not applied")
            })
        },
    )
    .await
    .expect("a status is written");
    let applied = work_condition(&work, "Applied").expect("Applied");
    let message = &applied.message;
    assert!(message.len() <= 1024, "{} bytes", message.len());
    let (kept, rest) = message
        .split_once("… and ")
        .unwrap_or_else(|| panic!("says what was left out: {message}"));
    let left_out: usize = rest
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a count of what was left out: {message}"));
    let listed = kept.matches("; ").count() + 1;
    assert_eq!(listed + left_out, 300, "{message}");
    let manifests = &work
        .status
        .as_ref()
        .and_then(|s| s.resource_status.as_ref())
        .expect("manifests")
        .manifests;
    // Every manifest keeps its entry unless the status would outgrow its
    // budget (each failing manifest carries Applied and, as in OCM, an
    // Unknown Available); then the note counts exactly the entries left out.
    let entries_left_out: usize = message
        .split_once(" manifest entries left out")
        .and_then(|(before, _)| before.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert_eq!(
        manifests.len() + entries_left_out,
        300,
        "every manifest keeps its entry or is counted: {message}"
    );
    assert!(
        manifests.len() >= 250,
        "most entries are kept: {}",
        manifests.len()
    );
    assert!(manifests.iter().all(|m| {
        m.conditions
            .iter()
            .any(|c| c.type_ == "Applied" && c.status == "False")
    }));
    println!(
        "300 failing manifests: Applied message {} bytes, {listed} problems listed, {left_out} counted; status {} bytes",
        message.len(),
        serde_json::to_vec(&work.status).map_or(0, |b| b.len())
    );
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gone_whose_release_is_refused_lets_the_work_go_once_the_hub_may() {
    let fleet = Fleet::start(restricted_fleet())
        .await
        .expect("fleet starts");
    let metrics = fleet.hub_probes_addr;
    let work = manifest_work(
        CLUSTER,
        "leaving",
        vec![config_map("default", "leaving", json!({"a": "1"}))],
    );
    let works = fleet.create_work(&work).await.expect("create");
    wait_applied(&works, "leaving").await.expect("applied");
    wait_until(
        &works,
        "leaving",
        "ferry's finalizer",
        APPLY_TIMEOUT,
        |w: &ManifestWork| w.finalizers().iter().any(|f| f == CLEANUP_FINALIZER),
    )
    .await
    .expect("finalizer added");

    // The hub may no longer patch works, so it cannot remove its finalizer.
    grant_hub(&fleet.hub_client, &hub_rules(true, false))
        .await
        .expect("revoke");
    wait_hub_allowed(&fleet.hub_client, "patch", "", false).await;
    let failures = metric(metrics, "ferry_hub_status_write_failures_total").await;
    works
        .delete("leaving", &DeleteParams::default())
        .await
        .expect("delete");
    let objects = fleet.spoke(CLUSTER).api("v1", "ConfigMap", Some("default"));
    wait_deleted(&objects, "leaving", "the released object", APPLY_TIMEOUT)
        .await
        .expect("the agent releases the objects");
    wait_metric(metrics, "ferry_hub_status_write_failures_total", |v| {
        v > failures
    })
    .await;
    let held = works.get("leaving").await.expect("still there");
    assert!(held.metadata.deletion_timestamp.is_some());
    assert!(held.finalizers().iter().any(|f| f == CLEANUP_FINALIZER));

    let restored = Instant::now();
    grant_hub(&fleet.hub_client, &hub_rules(true, true))
        .await
        .expect("restore");
    wait_deleted(&works, "leaving", "the released work", APPLY_TIMEOUT)
        .await
        .expect("the work goes once the hub may release it");
    println!(
        "work released {:?} after the hub's right was restored",
        restored.elapsed()
    );
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_older_than_the_clusters_newest_cannot_write_its_status() {
    let mut fleet = Fleet::start(FleetOptions {
        tls: false,
        ..FleetOptions::with_spokes(&[CLUSTER])
    })
    .await
    .expect("fleet starts");
    let metrics = fleet.hub_probes_addr;
    let work = manifest_work(
        CLUSTER,
        "sessions",
        vec![config_map("default", "sessions", json!({"v": "1"}))],
    );
    let works = fleet.create_work(&work).await.expect("create");
    let applied = wait_applied(&works, "sessions").await.expect("applied");
    let uid = applied.uid().expect("uid");
    let clusters: Api<ManagedCluster> = Api::all(fleet.hub_client.clone());

    // A second session of the cluster opens (with the cluster's real token)
    // and is the newest for a moment; then the agent restarts, and its new
    // session is newer still.
    let token = join_cluster(&fleet.hub_client, CLUSTER, 3600)
        .await
        .expect("token");
    let before = session_of(&clusters, CLUSTER).await;
    let older = raw_session(&fleet.hub_url, &token, CLUSTER, vec![]).await;
    wait_new_session(&clusters, CLUSTER, before, APPLY_TIMEOUT)
        .await
        .expect("the raw session is recorded");
    let raw = session_of(&clusters, CLUSTER).await;
    fleet.stop_agent(CLUSTER).await;
    // The restarted agent reports the work once it has synced, and that
    // report may land after its session is recorded: the outcome counters
    // say when the hub has taken it (written or found unchanged).
    let delivered = metric_sum(metrics, &DELIVERED).await;
    fleet.start_agent(CLUSTER);
    wait_new_session(&clusters, CLUSTER, raw, APPLY_TIMEOUT)
        .await
        .expect("the agent's new session is recorded");
    wait_sum(metrics, &DELIVERED, |v| v > delivered).await;
    let settled = works.get("sessions").await.expect("read");

    // The older session reports the current generation with another
    // status: only the order of sessions can keep it out.
    let superseded = r#"ferry_hub_status_reports_total{outcome="superseded"}"#;
    let before = metric(metrics, superseded).await;
    older
        .send(v1::AgentMessage {
            body: Some(agent_message::Body::Status(report(
                &settled,
                &uid,
                1,
                "OlderSession",
            ))),
        })
        .await
        .expect("the older session is still open");
    wait_metric(metrics, superseded, |v| v > before).await;
    let live = works.get("sessions").await.expect("read");
    // The agent may report again (its own later news is its right); what
    // must not show is the older session's report, anywhere in the status.
    let applied = work_condition(&live, "Applied").expect("Applied");
    assert_eq!(
        (applied.status.as_str(), applied.reason.as_str()),
        ("True", "AppliedManifestWorkComplete"),
        "the newest session's status stands: {live:?}"
    );
    assert!(
        !serde_json::to_string(&live.status)
            .expect("serialise")
            .contains("OlderSession"),
        "the older session's report was written: {live:?}"
    );
    drop(older);
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_third_live_session_of_a_cluster_ends_the_oldest_and_the_agent_is_served() {
    let fleet = Fleet::start(FleetOptions {
        tls: false,
        ..FleetOptions::with_spokes(&[CLUSTER])
    })
    .await
    .expect("fleet starts");
    let clusters: Api<ManagedCluster> = Api::all(fleet.hub_client.clone());
    let token = join_cluster(&fleet.hub_client, CLUSTER, 3600)
        .await
        .expect("token");
    // The agent's session, then two more with the cluster's token: the
    // agent's is pushed out, reconnects as the newest, and pushes out the
    // oldest remaining one, the first extra session. The agent must hold
    // its session first (under load it may connect after the test's).
    let before = wait_agent_session(&clusters, CLUSTER, String::new(), APPLY_TIMEOUT)
        .await
        .expect("the agent connects")
        .status
        .map(|s| s.session_id)
        .unwrap_or_default();
    let first = open_raw_session(&fleet.hub_url, &token, CLUSTER, vec![]).await;
    wait_new_session(&clusters, CLUSTER, before.clone(), APPLY_TIMEOUT)
        .await
        .expect("the first extra session is recorded");
    let second = open_raw_session(&fleet.hub_url, &token, CLUSTER, vec![]).await;
    tokio::time::timeout(APPLY_TIMEOUT, first.ended)
        .await
        .expect("the oldest extra session is ended by the hub")
        .expect("drain task");
    assert!(
        !second.ended.is_finished(),
        "a session with one newer stays"
    );
    // The second extra session's record may come first: the agent's new
    // session is the one to wait for, not merely a newer one.
    wait_agent_session(&clusters, CLUSTER, before, APPLY_TIMEOUT)
        .await
        .expect("the agent reconnects as the newest");
    let works = fleet
        .create_work(&manifest_work(
            CLUSTER,
            "served",
            vec![config_map("default", "served", json!({"v": "1"}))],
        ))
        .await
        .expect("create");
    wait_applied(&works, "served")
        .await
        .expect("the agent is served");
    drop(second);
    fleet.stop().await;
}
