//! Revisions and automatic rollback of a ManifestWorkReplicaSet (issue 23),
//! on real control planes with real agents: every template that rolls out
//! is kept as a ControllerRevision and every generated work names its
//! revision; a bad revision that fails the canary group past `maxFailures`
//! is put back on the stable revision everywhere it reached with
//! `failureStrategy: rollbackAll` (the status says why) and left in place
//! with `abortAll`; `kubectl ferry rollout undo --to-revision 1` brings
//! revision 1 back as the newest revision, `rollout history` shows it; the
//! history is pruned to `revisionHistoryLimit`. A rollback is recorded in
//! the status before any work is written back, so a leader that dies between
//! the record and the writes is followed by one that finishes the rollback
//! and never pushes the bad revision out again (issue 31), and one paused
//! (SIGSTOP) there and resumed after the follower finished reverses nothing
//! (issue 48).

use ferry_api::contract::{REPLICA_SET_LABEL, REVISION_ANNOTATION};
use ferry_api::managed_cluster::ManagedCluster;
use ferry_api::manifest_work::ManifestWork;
use ferry_api::placement::Placement;
use ferry_api::replica_set::{ManifestWorkReplicaSet, RevisionRef, RolloutStatus};
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::harness::hub_metrics::wait_metric_at_most;
use ferry_e2e::harness::leader_process::{lead_from_process, wait_leader};
use ferry_e2e::helpers::kubectl_ferry::{kubectl_ferry, succeeded};
use ferry_e2e::helpers::placement_helpers::create_placement;
use ferry_e2e::helpers::replica_sets::rolled_out;
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{APPLY_TIMEOUT, config_map};
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::apps::v1::ControllerRevision;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

const NAMESPACE: &str = "default";
const SPOKES: [&str; 3] = ["spoke-a", "spoke-b", "spoke-c"];
/// A namespace every spoke but spoke-b has: a revision putting its
/// ConfigMap there fails on spoke-b alone.
const PARTIAL_NAMESPACE: &str = "not-on-b";

fn template(name: &str, namespace: &str, version: &str) -> Value {
    json!({"workload": {"manifests": [config_map(namespace, name, json!({"version": version}))]}})
}

/// The canary group (spoke-a and spoke-b) goes first; past one failure the
/// `failure_strategy` decides.
fn strategy(failure_strategy: &str) -> Value {
    json!({"type": "ProgressivePerGroup", "progressivePerGroup": {
        "minSuccessTime": "1s", "progressDeadline": "15s", "maxFailures": 0,
        "failureStrategy": failure_strategy}})
}

async fn start_fleet() -> Fleet {
    start_fleet_with(FleetOptions::with_spokes(&SPOKES)).await
}

async fn start_fleet_with(options: FleetOptions) -> Fleet {
    let fleet = Fleet::start(options).await.expect("fleet starts");
    let hub = fleet.hub_client.clone();
    for spoke in ["spoke-a", "spoke-b"] {
        Api::<ManagedCluster>::all(hub.clone())
            .patch(
                spoke,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"ring": "canary"}}})),
            )
            .await
            .expect("label ManagedCluster");
    }
    for spoke in ["spoke-a", "spoke-c"] {
        Api::<Namespace>::all(fleet.spoke(spoke).client.clone())
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": PARTIAL_NAMESPACE}}))
                    .expect("namespace"),
            )
            .await
            .expect("create namespace");
    }
    create_placement(
        &hub,
        NAMESPACE,
        "canary-first",
        json!({"decisionStrategy": {"groupStrategy": {"decisionGroups": [
            {"groupName": "canary", "groupClusterSelector": {"labelSelector": {"matchLabels": {"ring": "canary"}}}}
        ]}}}),
    )
    .await;
    let placements: Api<Placement> = Api::namespaced(hub.clone(), NAMESPACE);
    wait_until(
        &placements,
        "canary-first",
        "three clusters",
        APPLY_TIMEOUT,
        |p| {
            p.status
                .as_ref()
                .is_some_and(|s| s.number_of_selected_clusters == 3)
        },
    )
    .await
    .expect("every spoke is chosen");
    fleet
}

async fn create_replica_set(hub: &Client, name: &str, spec: Value) {
    let rs: ManifestWorkReplicaSet = serde_json::from_value(json!({
        "apiVersion": "work.ferry.dev/v1alpha1",
        "kind": "ManifestWorkReplicaSet",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": spec,
    }))
    .expect("replica set");
    Api::<ManifestWorkReplicaSet>::namespaced(hub.clone(), NAMESPACE)
        .create(&PostParams::default(), &rs)
        .await
        .expect("create ManifestWorkReplicaSet");
}

async fn patch_spec(hub: &Client, name: &str, spec: Value) -> i64 {
    Api::<ManifestWorkReplicaSet>::namespaced(hub.clone(), NAMESPACE)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": spec})),
        )
        .await
        .expect("patch replica set")
        .metadata
        .generation
        .unwrap_or(0)
}

/// Waits until `PlacementRolledOut` of `name`, for `generation`, has
/// `reason` and `check` holds; returns the replica set.
async fn wait_rolled_out(
    hub: &Client,
    name: &str,
    generation: i64,
    reason: &'static str,
    check: impl Fn(&ManifestWorkReplicaSet) -> bool,
) -> ManifestWorkReplicaSet {
    let sets: Api<ManifestWorkReplicaSet> = Api::namespaced(hub.clone(), NAMESPACE);
    wait_until(&sets, name, reason, APPLY_TIMEOUT * 3, |rs| {
        rolled_out(rs).is_some_and(|c| c.observed_generation == generation && c.reason == reason)
            && check(rs)
    })
    .await
    .unwrap_or_else(|e| panic!("{name}: PlacementRolledOut {reason}: {e}"))
}

fn rollout_revision(rs: &ManifestWorkReplicaSet) -> Option<RevisionRef> {
    rs.status.as_ref()?.rollout.as_ref()?.revision.clone()
}

fn stable_revision(rs: &ManifestWorkReplicaSet) -> Option<RevisionRef> {
    rs.status
        .as_ref()?
        .rollout
        .as_ref()?
        .stable_revision
        .clone()
}

/// The revision hash each spoke's work `name` holds.
async fn held(hub: &Client, name: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for spoke in SPOKES {
        let work = Api::<ManifestWork>::namespaced(hub.clone(), spoke)
            .get(name)
            .await
            .expect("read work");
        out.push((
            spoke.to_string(),
            work.annotations()
                .get(REVISION_ANNOTATION)
                .cloned()
                .unwrap_or_default(),
        ));
    }
    out
}

fn every_spoke(hash: &str) -> Vec<(String, String)> {
    SPOKES
        .iter()
        .map(|s| (s.to_string(), hash.to_string()))
        .collect()
}

/// The replica set's ControllerRevisions as (number, name), by number.
async fn revisions(hub: &Client, name: &str) -> Vec<(i64, String)> {
    let api: Api<ControllerRevision> = Api::namespaced(hub.clone(), NAMESPACE);
    let listed = api
        .list(&ListParams::default().labels(&format!("{REPLICA_SET_LABEL}={NAMESPACE}.{name}")))
        .await
        .expect("list ControllerRevisions");
    let mut out: Vec<(i64, String)> = listed
        .items
        .iter()
        .map(|r| (r.revision, r.name_any()))
        .collect();
    out.sort();
    out
}

async fn wait_spoke_version(fleet: &Fleet, spoke: &str, name: &str, version: &'static str) {
    let on_spoke: Api<ConfigMap> = Api::namespaced(fleet.spoke(spoke).client.clone(), NAMESPACE);
    wait_until(&on_spoke, name, version, APPLY_TIMEOUT, |cm| {
        cm.data
            .as_ref()
            .and_then(|d| d.get("version"))
            .map(String::as_str)
            == Some(version)
    })
    .await
    .unwrap_or_else(|e| panic!("{spoke}/{name} at {version}: {e}"));
}

/// Rolls revision 1 out everywhere, then revision 2 (the ConfigMap moved
/// to a namespace spoke-b lacks) with `failure_strategy`; returns the
/// replica set once the rollout of revision 2 halted and the revision 1
/// reference.
async fn bad_revision_halts(
    fleet: &Fleet,
    name: &str,
    failure_strategy: &str,
    reason: &'static str,
) -> (ManifestWorkReplicaSet, RevisionRef) {
    let hub = fleet.hub_client.clone();
    create_replica_set(
        &hub,
        name,
        json!({
            "manifestWorkTemplate": template(name, NAMESPACE, "v1"),
            "placementRefs": [{"name": "canary-first", "rolloutStrategy": strategy(failure_strategy)}],
        }),
    )
    .await;
    // Complete on all three (a decision object the hub has not seen yet
    // would make it complete on fewer).
    let complete = wait_rolled_out(&hub, name, 1, "Complete", |rs| {
        stable_revision(rs).is_some() && rs.status.as_ref().is_some_and(|s| s.summary.total == 3)
    })
    .await;
    let first = rollout_revision(&complete).expect("status names the revision");
    assert_eq!(first.number, 1);
    assert_eq!(stable_revision(&complete), Some(first.clone()));
    assert_eq!(held(&hub, name).await, every_spoke(&first.hash));
    assert_eq!(
        revisions(&hub, name).await,
        vec![(1, format!("{name}-{}", first.hash))]
    );
    let generation = patch_spec(
        &hub,
        name,
        json!({"manifestWorkTemplate": template(name, PARTIAL_NAMESPACE, "v2")}),
    )
    .await;
    let halted = wait_rolled_out(&hub, name, generation, reason, |_| true).await;
    (halted, first)
}

/// What the hub API server stored, in its order (resource versions of one
/// etcd): each version of replica set `name` and of its works, from before
/// the replica set exists.
#[derive(Default)]
struct WriteOrder {
    /// A watch re-listed (its resource version had expired), so versions
    /// in between may be missing and the order proves nothing.
    gap: bool,
    /// (resourceVersion, whether the status records a rollback).
    replica_set: Vec<(u64, bool)>,
    /// (resourceVersion, work namespace, the revision it holds).
    works: Vec<(u64, String, String)>,
}

fn resource_version(meta: &kube::api::ObjectMeta) -> u64 {
    meta.resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .expect("a numeric resourceVersion (one etcd)")
}

/// An event of one of the two watches of [`record_write_order`].
enum Seen {
    ReplicaSet(Box<kube::runtime::watcher::Event<ManifestWorkReplicaSet>>),
    Work(Box<kube::runtime::watcher::Event<ManifestWork>>),
}

/// Records every stored version of replica set `name` and its works until
/// the returned task is aborted.
fn record_write_order(
    hub: &Client,
    name: &str,
) -> (
    tokio::task::JoinHandle<()>,
    std::sync::Arc<std::sync::Mutex<WriteOrder>>,
) {
    use futures::StreamExt;
    use kube::runtime::WatchStreamExt;
    use kube::runtime::watcher::{self, Event, watcher};
    let order = std::sync::Arc::new(std::sync::Mutex::new(WriteOrder::default()));
    let sets = watcher(
        Api::<ManifestWorkReplicaSet>::namespaced(hub.clone(), NAMESPACE),
        watcher::Config::default().fields(&format!("metadata.name={name}")),
    )
    .default_backoff()
    .map(|e| e.map(|e| Seen::ReplicaSet(Box::new(e))));
    let works = watcher(
        Api::<ManifestWork>::all(hub.clone()),
        watcher::Config::default().labels(&format!("{REPLICA_SET_LABEL}={NAMESPACE}.{name}")),
    )
    .default_backoff()
    .map(|e| e.map(|e| Seen::Work(Box::new(e))));
    let recorded = order.clone();
    let task = tokio::spawn(async move {
        let mut events = std::pin::pin!(futures::stream::select(sets, works));
        let mut lists = 0;
        while let Some(event) = events.next().await {
            // A failed watch call is retried by the watcher (a re-list
            // shows as a second Init).
            let Ok(event) = event else { continue };
            let mut order = recorded.lock().expect("not poisoned");
            // One list per watch; another means a watch lost its place.
            let mut relisted = |order: &mut WriteOrder| {
                lists += 1;
                order.gap |= lists > 2;
            };
            match event {
                Seen::ReplicaSet(event) => match *event {
                    Event::Init => relisted(&mut order),
                    Event::Apply(rs) | Event::InitApply(rs) => {
                        let rollback = rs
                            .status
                            .as_ref()
                            .and_then(|s| s.rollout.as_ref())
                            .is_some_and(|r| r.rollback.is_some());
                        order
                            .replica_set
                            .push((resource_version(&rs.metadata), rollback));
                    }
                    _ => {}
                },
                Seen::Work(event) => match *event {
                    Event::Init => relisted(&mut order),
                    Event::Apply(work) | Event::InitApply(work) => order.works.push((
                        resource_version(&work.metadata),
                        work.namespace().unwrap_or_default(),
                        work.annotations()
                            .get(REVISION_ANNOTATION)
                            .cloned()
                            .unwrap_or_default(),
                    )),
                    _ => {}
                },
            }
        }
    });
    (task, order)
}

/// The version at which the status first recorded the rollback, and the
/// version of the first work written back from `failed` to `stable`.
fn rollback_record_and_first_write(
    order: &WriteOrder,
    failed: &str,
    stable: &str,
) -> (Option<u64>, Option<u64>) {
    let recorded = order
        .replica_set
        .iter()
        .filter(|(_, rollback)| *rollback)
        .map(|(rv, _)| *rv)
        .min();
    let mut works = order.works.clone();
    works.sort();
    let mut held: std::collections::BTreeMap<String, String> = Default::default();
    let mut first_write = None;
    for (rv, cluster, revision) in works {
        let before = held.insert(cluster, revision.clone());
        if first_write.is_none() && before.as_deref() == Some(failed) && revision == stable {
            first_write = Some(rv);
        }
    }
    (recorded, first_write)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollback_all_puts_every_cluster_the_bad_revision_reached_back_and_undo_and_history_work() {
    let fleet = start_fleet().await;
    let hub = fleet.hub_client.clone();
    let (recorder, order) = record_write_order(&hub, "app");
    let (halted, first) = bad_revision_halts(&fleet, "app", "rollbackAll", "RolledBack").await;
    let second = rollout_revision(&halted).expect("revision 2");
    assert_eq!(second.number, 2);
    assert_ne!(second.hash, first.hash);
    let rolled = wait_rolled_out(&hub, "app", 2, "RolledBack", |rs| {
        rs.status
            .as_ref()
            .and_then(|s| s.rollout.as_ref())
            .and_then(|r| r.rollback.as_ref())
            .is_some_and(|r| r.clusters == 2)
    })
    .await;
    let rollout = rolled
        .status
        .as_ref()
        .and_then(|s| s.rollout.clone())
        .expect("rollout");
    let rollback = rollout.rollback.expect("rollback");
    assert_eq!(
        (rollback.from, rollback.to),
        (second.clone(), first.clone())
    );
    assert!(rollback.reason.contains("spoke-b"), "{}", rollback.reason);
    let message = &rolled_out(&rolled).expect("condition").message;
    assert!(
        message.contains("rollbackAll") && message.contains("spoke-b"),
        "{message}"
    );
    assert_eq!(rollout.stable_revision, Some(first.clone()));
    // Decide, then act: the rollback was in the status before the first
    // work went back, so a leader taking over in between continues it.
    recorder.abort();
    let order = std::mem::take(&mut *order.lock().expect("not poisoned"));
    let (recorded, first_write) =
        rollback_record_and_first_write(&order, &second.hash, &first.hash);
    println!(
        "rollback recorded at version {recorded:?}, first work written back at {first_write:?}"
    );
    if order.gap {
        println!("a watch re-listed while recording: the write order is not checked this run");
    }
    let (recorded, first_write) = (
        recorded.expect("the status recorded the rollback"),
        first_write.expect("a work went back from revision 2 to 1"),
    );
    assert!(
        order.gap || recorded < first_write,
        "a work went back (version {first_write}) before the status recorded the rollback (version {recorded})"
    );
    // Every work holds revision 1 again: spoke-a and spoke-b were put back,
    // spoke-c never left it; spoke-a's ConfigMap is at v1 in place again.
    assert_eq!(held(&hub, "app").await, every_spoke(&first.hash));
    wait_spoke_version(&fleet, "spoke-a", "app", "v1").await;
    assert_eq!(
        revisions(&hub, "app").await,
        vec![
            (1, format!("app-{}", first.hash)),
            (2, format!("app-{}", second.hash))
        ]
    );

    // kubectl ferry rollout undo --to-revision 1: revision 1 comes back as
    // revision 3 and rolls out; history shows it current and stable.
    let kubeconfig = fleet.hub.info.kubeconfig.clone();
    let missing = kubectl_ferry(
        &kubeconfig,
        &["rollout", "undo", "default/app", "--to-revision", "9"],
    )
    .await;
    assert!(!missing.status.success());
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(
        stderr.contains("revision 9 not found: the replica set has revisions 1, 2"),
        "{stderr}"
    );
    let undone = succeeded(
        &kubectl_ferry(
            &kubeconfig,
            &["rollout", "undo", "default/app", "--to-revision", "1"],
        )
        .await,
        "rollout undo",
    );
    assert!(undone.contains("rolled back to revision 1"), "{undone}");
    let sets: Api<ManifestWorkReplicaSet> = Api::namespaced(hub.clone(), NAMESPACE);
    let generation = sets
        .get("app")
        .await
        .expect("read")
        .metadata
        .generation
        .unwrap_or(0);
    let third = RevisionRef {
        number: 3,
        hash: first.hash.clone(),
        digest: first.digest.clone(),
    };
    wait_rolled_out(&hub, "app", generation, "Complete", |rs| {
        rollout_revision(rs) == Some(third.clone()) && stable_revision(rs) == Some(third.clone())
    })
    .await;
    assert_eq!(
        revisions(&hub, "app").await,
        vec![
            (2, format!("app-{}", second.hash)),
            (3, format!("app-{}", first.hash))
        ]
    );
    let history = succeeded(
        &kubectl_ferry(&kubeconfig, &["rollout", "history", "default/app"]).await,
        "rollout history",
    );
    let lines: Vec<&str> = history.lines().collect();
    assert!(lines[0].starts_with("REVISION"), "{history}");
    let newest: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(
        (newest[0], newest[1], newest[3], newest[4]),
        ("3", first.hash.as_str(), "3", "current,stable"),
        "{history}"
    );
    assert!(
        lines[2].starts_with("2 ") && lines[2].contains(&second.hash),
        "{history}"
    );

    // revisionHistoryLimit 1 and a fourth revision: revision 2 is pruned,
    // revision 3 (one old revision) stays.
    let generation = patch_spec(
        &hub,
        "app",
        json!({"revisionHistoryLimit": 1, "manifestWorkTemplate": template("app", NAMESPACE, "v4")}),
    )
    .await;
    let fourth = wait_rolled_out(&hub, "app", generation, "Complete", |rs| {
        rollout_revision(rs).is_some_and(|r| r.number == 4)
    })
    .await;
    let fourth = rollout_revision(&fourth).expect("revision 4");
    let api: Api<ControllerRevision> = Api::namespaced(hub.clone(), NAMESPACE);
    let expected = vec![
        (3, format!("app-{}", first.hash)),
        (4, format!("app-{}", fourth.hash)),
    ];
    let deadline = tokio::time::Instant::now() + APPLY_TIMEOUT;
    // The pruning is a deletion: waited for on a watch of the revisions.
    let watch = kube::runtime::watcher(
        api,
        kube::runtime::watcher::Config::default()
            .labels(&format!("{REPLICA_SET_LABEL}={NAMESPACE}.app")),
    );
    let mut watch = std::pin::pin!(watch);
    loop {
        use futures::StreamExt;
        let have = revisions(&hub, "app").await;
        if have == expected {
            break;
        }
        if tokio::time::timeout_at(deadline, watch.next())
            .await
            .is_err()
        {
            panic!("history pruned to {expected:?}, have {have:?}");
        }
    }
    assert_eq!(held(&hub, "app").await, every_spoke(&fourth.hash));
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_all_leaves_the_bad_revision_where_it_reached_and_says_so() {
    let fleet = start_fleet().await;
    let hub = fleet.hub_client.clone();
    let (halted, first) = bad_revision_halts(&fleet, "aborted", "abortAll", "Failed").await;
    let second = rollout_revision(&halted).expect("revision 2");
    let message = &rolled_out(&halted).expect("condition").message;
    assert!(
        message.contains("aborted (failureStrategy abortAll)") && message.contains("spoke-b"),
        "{message}"
    );
    let rollout = halted
        .status
        .as_ref()
        .and_then(|s| s.rollout.clone())
        .expect("rollout");
    assert!(rollout.rollback.is_none());
    assert_eq!(rollout.stable_revision, Some(first.clone()));
    // The canary group holds revision 2 and stays there; spoke-c never got it.
    assert_eq!(
        held(&hub, "aborted").await,
        vec![
            ("spoke-a".to_string(), second.hash.clone()),
            ("spoke-b".to_string(), second.hash.clone()),
            ("spoke-c".to_string(), first.hash.clone()),
        ]
    );
    let failing: Vec<&str> = rollout
        .failing_clusters
        .iter()
        .map(|f| f.cluster.as_str())
        .collect();
    assert_eq!(failing, vec!["spoke-b"]);
    assert_eq!(rollout.failing_clusters[0].revision, 2);
    let on_revision_2 = rollout
        .revisions
        .iter()
        .find(|r| r.revision == second)
        .expect("revision 2 counted");
    assert_eq!(
        (
            on_revision_2.clusters.failed,
            on_revision_2.clusters.succeeded,
            on_revision_2.clusters.to_apply
        ),
        (1, 1, 1)
    );
    let on_a: Api<ConfigMap> =
        Api::namespaced(fleet.spoke("spoke-a").client.clone(), PARTIAL_NAMESPACE);
    let cm = on_a
        .get("aborted")
        .await
        .expect("spoke-a keeps revision 2's ConfigMap");
    assert_eq!(
        cm.data.and_then(|d| d.get("version").cloned()).as_deref(),
        Some("v2")
    );
    fleet.stop().await;
}

/// The policy that holds a rollback between its record and its writes.
const HOLD_POLICY: &str = "rollback-writes-held";

/// Makes the hub API server refuse every write that puts a work on revision
/// `hash` from another revision (and every work created on it): the status
/// can record a rollback to `hash`, the works cannot follow, until the
/// policy is deleted. Returns once the API server enforces it (a dry-run
/// create of such a work is refused with the policy's message).
async fn hold_writes_back_to(hub: &Client, hash: &str) {
    let annotation = |of: &str| {
        format!(
            "(has({of}.metadata.annotations) && '{REVISION_ANNOTATION}' in {of}.metadata.annotations && {of}.metadata.annotations['{REVISION_ANNOTATION}'] == '{hash}')"
        )
    };
    let expression = format!(
        "!{} || (request.operation == 'UPDATE' && {})",
        annotation("object"),
        annotation("oldObject")
    );
    let message = "held by the test: no work goes back to the stable revision yet";
    let policy: ValidatingAdmissionPolicy = serde_json::from_value(json!({
        "metadata": {"name": HOLD_POLICY},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": ["work.ferry.dev"], "apiVersions": ["*"],
                "operations": ["CREATE", "UPDATE"], "resources": ["manifestworks"]}]},
            "validations": [{"expression": expression, "message": message}],
        }
    }))
    .expect("policy");
    Api::<ValidatingAdmissionPolicy>::all(hub.clone())
        .create(&PostParams::default(), &policy)
        .await
        .expect("create the policy");
    let binding: ValidatingAdmissionPolicyBinding = serde_json::from_value(json!({
        "metadata": {"name": HOLD_POLICY},
        "spec": {"policyName": HOLD_POLICY, "validationActions": ["Deny"]},
    }))
    .expect("binding");
    Api::<ValidatingAdmissionPolicyBinding>::all(hub.clone())
        .create(&PostParams::default(), &binding)
        .await
        .expect("bind the policy");
    // The API server loads policies from an informer: probe until it
    // refuses what the policy refuses.
    let probe: ManifestWork = serde_json::from_value(json!({
        "apiVersion": "work.ferry.dev/v1alpha1", "kind": "ManifestWork",
        "metadata": {"name": "hold-probe", "namespace": "spoke-c",
            "annotations": {REVISION_ANNOTATION: hash}},
        "spec": {"workload": {"manifests": [config_map(NAMESPACE, "hold-probe", json!({}))]}},
    }))
    .expect("probe work");
    let works: Api<ManifestWork> = Api::namespaced(hub.clone(), "spoke-c");
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let deadline = std::time::Instant::now() + APPLY_TIMEOUT;
    loop {
        match works.create(&dry_run, &probe).await {
            Err(kube::Error::Api(e)) if e.message.contains(message) => return,
            outcome => assert!(
                std::time::Instant::now() < deadline,
                "the hold policy is not enforced: {outcome:?}"
            ),
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}

/// Deletes what [`hold_writes_back_to`] created.
async fn release_writes(hub: &Client) {
    Api::<ValidatingAdmissionPolicyBinding>::all(hub.clone())
        .delete(HOLD_POLICY, &Default::default())
        .await
        .expect("delete the binding");
    Api::<ValidatingAdmissionPolicy>::all(hub.clone())
        .delete(HOLD_POLICY, &Default::default())
        .await
        .expect("delete the policy");
}

/// The rollout status of replica set `held`, once it is checked to still
/// record the rollback from `failed` to `stable`.
async fn rollback_kept(hub: &Client, failed: &RevisionRef, stable: &RevisionRef) -> RolloutStatus {
    let rs = Api::<ManifestWorkReplicaSet>::namespaced(hub.clone(), NAMESPACE)
        .get("held")
        .await
        .expect("read replica set");
    let rollout = rs
        .status
        .as_ref()
        .and_then(|s| s.rollout.clone())
        .expect("rollout");
    let kept = rollout
        .rollback
        .clone()
        .expect("the rollback is still recorded");
    assert_eq!((&kept.from, &kept.to), (failed, stable));
    rollout
}

/// How the leader goes away in the middle of a rollback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LeaderLoss {
    /// SIGKILL: a crash or an OOM kill.
    Killed,
    /// SIGSTOP, then SIGCONT once the follower has finished: a long pause
    /// (a stalled node, a debugger) after which the old leader runs on
    /// with what it read before.
    Paused,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_killed_between_recording_a_rollback_and_its_writes_is_followed_by_one_that_finishes_it_and_never_reverses_it()
 {
    leader_lost_between_recording_a_rollback_and_its_writes(LeaderLoss::Killed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_paused_mid_rollback_and_resumed_after_a_follower_finished_it_reverses_nothing() {
    leader_lost_between_recording_a_rollback_and_its_writes(LeaderLoss::Paused).await;
}

/// Revision 2 fails past `maxFailures` and the leader (a `ferry-hub`
/// process) records the rollback, its writes back held; then it is lost
/// (`how`), the follower takes over and finishes the rollback, and nothing
/// is ever written back onto revision 2.
async fn leader_lost_between_recording_a_rollback_and_its_writes(how: LeaderLoss) {
    tokio::task::spawn_blocking(ferry_e2e::harness::image::build_binaries)
        .await
        .expect("build task")
        .expect("ferry-hub builds");
    let mut options = FleetOptions::with_spokes(&SPOKES);
    options.heartbeat = std::time::Duration::from_secs(1);
    options.elect_leader = true;
    let mut fleet = start_fleet_with(options).await;
    let hub = fleet.hub_client.clone();
    // The controllers run in a real ferry-hub process, so the leader can
    // die by SIGKILL; the fleet's replica follows.
    let mut leader = lead_from_process(&mut fleet, "rollback-leader").await;
    let (recorder, order) = record_write_order(&hub, "held");
    create_replica_set(
        &hub,
        "held",
        json!({
            "manifestWorkTemplate": template("held", NAMESPACE, "v1"),
            "placementRefs": [{"name": "canary-first", "rolloutStrategy": strategy("rollbackAll")}],
        }),
    )
    .await;
    let complete = wait_rolled_out(&hub, "held", 1, "Complete", |rs| {
        stable_revision(rs).is_some() && rs.status.as_ref().is_some_and(|s| s.summary.total == 3)
    })
    .await;
    let first = rollout_revision(&complete).expect("revision 1");

    // Revision 2 fails on spoke-b; the leader records the rollback, and its
    // writes back to revision 1 are refused: the state a leader dying
    // between the record and the writes leaves behind.
    hold_writes_back_to(&hub, &first.hash).await;
    let generation = patch_spec(
        &hub,
        "held",
        json!({"manifestWorkTemplate": template("held", PARTIAL_NAMESPACE, "v2")}),
    )
    .await;
    let recorded = wait_rolled_out(&hub, "held", generation, "RolledBack", |rs| {
        rs.status
            .as_ref()
            .and_then(|s| s.rollout.as_ref())
            .is_some_and(|r| r.rollback.is_some())
    })
    .await;
    let second = rollout_revision(&recorded).expect("revision 2");
    assert_eq!(second.number, 2);
    let rollback = recorded
        .status
        .as_ref()
        .and_then(|s| s.rollout.as_ref())
        .and_then(|r| r.rollback.clone())
        .expect("rollback recorded");
    assert_eq!(
        (rollback.from.clone(), rollback.to.clone()),
        (second.clone(), first.clone())
    );
    let reached: Vec<(String, String)> = held(&hub, "held")
        .await
        .into_iter()
        .filter(|(_, hash)| *hash == second.hash)
        .collect();
    assert!(
        !reached.is_empty(),
        "revision 2 reached the canary group before the rollback: {:?}",
        held(&hub, "held").await
    );

    match how {
        LeaderLoss::Killed => leader.kill().await,
        LeaderLoss::Paused => assert!(leader.pause().await, "SIGSTOP the leader"),
    }
    wait_leader(
        &fleet,
        "replica-0",
        "the follower takes the Lease of the lost leader",
        APPLY_TIMEOUT,
    )
    .await;
    release_writes(&hub).await;

    // The new leader finishes the recorded rollback: every work on
    // revision 1, spoke-a's ConfigMap back at v1, the record unchanged.
    for spoke in SPOKES {
        let works: Api<ManifestWork> = Api::namespaced(hub.clone(), spoke);
        wait_until(
            &works,
            "held",
            "back on revision 1",
            APPLY_TIMEOUT * 2,
            |w| w.annotations().get(REVISION_ANNOTATION) == Some(&first.hash),
        )
        .await
        .unwrap_or_else(|e| panic!("the new leader did not put {spoke} back: {e}"));
    }
    wait_spoke_version(&fleet, "spoke-a", "held", "v1").await;
    let rollout = rollback_kept(&hub, &second, &first).await;
    assert_eq!(rollout.stable_revision, Some(first.clone()));

    if how == LeaderLoss::Paused {
        // The old leader runs on from where it stopped, with what it read
        // before: it finds its Lease gone and stops leading; whatever it
        // tries meanwhile is fenced (its writes carry the versions it
        // read). Nothing it did is reversed below.
        assert!(leader.resume().await, "SIGCONT the old leader");
        wait_metric_at_most(leader.probes(), "ferry_hub_leader", 0.0, APPLY_TIMEOUT)
            .await
            .expect("the resumed leader stops leading");
        let fenced = leader
            .log()
            .lines()
            .filter(|l| l.contains("uperseded"))
            .count();
        println!("the resumed leader's writes refused as superseded: {fenced}");
        for spoke in SPOKES {
            let work = Api::<ManifestWork>::namespaced(hub.clone(), spoke)
                .get("held")
                .await
                .expect("read work");
            assert_eq!(
                work.annotations().get(REVISION_ANNOTATION),
                Some(&first.hash),
                "the resumed leader put {spoke} back on revision 2"
            );
        }
        rollback_kept(&hub, &second, &first).await;
        wait_spoke_version(&fleet, "spoke-a", "held", "v1").await;
    }

    // Never reversed: from the record on, no work was written onto revision
    // 2 again, and the record preceded every write back.
    recorder.abort();
    let order = std::mem::take(&mut *order.lock().expect("not poisoned"));
    let (recorded_at, first_write) =
        rollback_record_and_first_write(&order, &second.hash, &first.hash);
    let recorded_at = recorded_at.expect("the status recorded the rollback");
    let first_write = first_write.expect("a work went back from revision 2 to 1");
    println!("rollback recorded at version {recorded_at}, first write back at {first_write}");
    if order.gap {
        println!("a watch re-listed while recording: the write order is not checked this run");
    } else {
        assert!(recorded_at < first_write);
        let mut writes = order.works.clone();
        writes.sort();
        let mut last: std::collections::BTreeMap<String, String> = Default::default();
        for (rv, cluster, revision) in writes {
            let before = last.insert(cluster.clone(), revision.clone());
            assert!(
                !(rv > recorded_at
                    && revision == second.hash
                    && before.as_deref() != Some(second.hash.as_str())),
                "{cluster}'s work was put on revision 2 at version {rv}, after the rollback was recorded at {recorded_at}"
            );
        }
    }
    leader.kill().await;
    fleet.stop().await;
}
