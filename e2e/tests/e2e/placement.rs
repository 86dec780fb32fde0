//! Placement chooses ManagedClusters by labels, claims, numberOfClusters and
//! taints, splits them into decision groups, and follows clusters joining,
//! leaving, being relabelled and disconnecting (issue 13, Placement).

use std::collections::BTreeSet;
use std::time::Duration;

use ferry_api::contract::UNREACHABLE_TAINT;
use ferry_api::contract::{DECISION_GROUP_INDEX_LABEL, DECISION_GROUP_NAME_LABEL, PLACEMENT_LABEL};
use ferry_api::managed_cluster::{ManagedCluster, ManagedClusterSpec};
use ferry_api::placement::{Placement, PlacementDecision};
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::placement_helpers;
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::APPLY_TIMEOUT;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

const NAMESPACE: &str = "default";

/// Tolerates the unreachable taint: the hand-made clusters here have no
/// agent, so the hub taints them.
fn tolerate_unreachable() -> serde_json::Value {
    json!([{"key": UNREACHABLE_TAINT, "operator": "Exists"}])
}

async fn add_cluster(client: &Client, name: &str, labels: &[(&str, &str)]) {
    let mut cluster = ManagedCluster::new(name, ManagedClusterSpec::default());
    cluster.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    Api::<ManagedCluster>::all(client.clone())
        .create(&PostParams::default(), &cluster)
        .await
        .expect("create ManagedCluster");
}

async fn relabel(client: &Client, name: &str, labels: serde_json::Value) {
    Api::<ManagedCluster>::all(client.clone())
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": labels}})),
        )
        .await
        .expect("relabel ManagedCluster");
}

async fn create_placement(client: &Client, name: &str, spec: serde_json::Value) {
    placement_helpers::create_placement(client, NAMESPACE, name, spec).await;
}

/// The clusters the placement's PlacementDecisions name, with the group
/// index and name of each.
async fn decided(client: &Client, placement: &str) -> Vec<(String, String, String)> {
    let decisions: Api<PlacementDecision> = Api::namespaced(client.clone(), NAMESPACE);
    let list = decisions
        .list(&ListParams::default().labels(&format!("{PLACEMENT_LABEL}={placement}")))
        .await
        .expect("list PlacementDecisions");
    let mut out = Vec::new();
    for decision in list.items {
        let index = decision.labels()[DECISION_GROUP_INDEX_LABEL].clone();
        let group = decision.labels()[DECISION_GROUP_NAME_LABEL].clone();
        for d in decision.status.iter().flat_map(|s| s.decisions.iter()) {
            out.push((d.cluster_name.clone(), index.clone(), group.clone()));
        }
    }
    out.sort();
    out
}

/// Waits until the placement's decisions name exactly `clusters`, polling
/// the decisions (the state under test) until `APPLY_TIMEOUT`.
async fn wait_decided(client: &Client, placement: &str, clusters: &[&str]) {
    let wanted: BTreeSet<String> = clusters.iter().map(|c| c.to_string()).collect();
    let deadline = tokio::time::Instant::now() + APPLY_TIMEOUT;
    loop {
        let now: BTreeSet<String> = decided(client, placement)
            .await
            .into_iter()
            .map(|(c, _, _)| c)
            .collect();
        if now == wanted {
            return;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!(
                "placement {placement} decided {now:?}, expected {wanted:?}\n{}",
                hub_view(client, placement).await
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// What the hub shows of `placement` and the clusters, for a failure
/// message: the placement's status and every cluster's labels and taints.
async fn hub_view(client: &Client, placement: &str) -> String {
    let status = Api::<Placement>::namespaced(client.clone(), NAMESPACE)
        .get(placement)
        .await
        .map(|p| serde_json::to_string(&p.status).unwrap_or_default())
        .unwrap_or_else(|e| format!("(placement unreadable: {e})"));
    let clusters = Api::<ManagedCluster>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map(|list| {
            list.items
                .iter()
                .map(|c| {
                    format!(
                        "{} labels={:?} taints={:?}",
                        c.name_any(),
                        c.labels(),
                        c.spec.taints
                    )
                })
                .collect::<Vec<_>>()
                .join("\n  ")
        })
        .unwrap_or_else(|e| format!("(clusters unreadable: {e})"));
    format!("placement status: {status}\nclusters:\n  {clusters}")
}

fn condition<'a>(p: &'a Placement, type_: &str) -> Option<&'a ferry_api::manifest_work::Condition> {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == type_))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn label_and_claim_selectors_and_number_of_clusters_follow_joins_leaves_and_relabels() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&[]))
        .await
        .expect("fleet starts");
    let hub = fleet.hub_client.clone();
    add_cluster(&hub, "c1", &[("env", "prod")]).await;
    add_cluster(&hub, "c2", &[("env", "prod")]).await;
    add_cluster(&hub, "c3", &[("env", "dev")]).await;
    Api::<ManagedCluster>::all(hub.clone())
        .patch_status(
            "c3",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"clusterClaims": [{"name": "region", "value": "eu"}]}}),
            ),
        )
        .await
        .expect("claims");
    create_placement(
        &hub,
        "prod",
        json!({
            "predicates": [{"requiredClusterSelector": {"labelSelector": {"matchLabels": {"env": "prod"}}}}],
            "tolerations": tolerate_unreachable(),
        }),
    )
    .await;
    create_placement(
        &hub,
        "eu",
        json!({
            "predicates": [{"requiredClusterSelector": {"claimSelector": {"matchExpressions": [{"key": "region", "operator": "In", "values": ["eu"]}]}}}],
            "tolerations": tolerate_unreachable(),
        }),
    )
    .await;
    create_placement(
        &hub,
        "one",
        // Steady alone: with the default Additive policy, Balance may move a
        // decision to a cluster fewer placements chose (as in OCM).
        json!({
            "numberOfClusters": 1,
            "tolerations": tolerate_unreachable(),
            "prioritizerPolicy": {"mode": "Exact", "configurations": [{"scoreCoordinate": {"type": "BuiltIn", "builtIn": "Steady"}, "weight": 1}]},
        }),
    )
    .await;
    create_placement(
        &hub,
        "untolerant",
        json!({"predicates": [{"requiredClusterSelector": {"labelSelector": {"matchLabels": {"env": "prod"}}}}]}),
    )
    .await;
    wait_decided(&hub, "prod", &["c1", "c2"]).await;
    wait_decided(&hub, "eu", &["c3"]).await;
    // Clusters without agents carry the unreachable taint.
    wait_decided(&hub, "untolerant", &[]).await;
    let placements: Api<Placement> = Api::namespaced(hub.clone(), NAMESPACE);
    let untolerant = wait_until(
        &placements,
        "untolerant",
        "NoManagedClusterMatched",
        APPLY_TIMEOUT,
        |p| {
            condition(p, "PlacementSatisfied")
                .is_some_and(|c| c.status == "False" && c.reason == "NoManagedClusterMatched")
        },
    )
    .await
    .expect("an empty placement is not satisfied");
    assert_eq!(
        untolerant
            .status
            .expect("status")
            .number_of_selected_clusters,
        0
    );
    let one = wait_until(
        &placements,
        "one",
        "one cluster chosen",
        APPLY_TIMEOUT,
        |p| {
            p.status
                .as_ref()
                .is_some_and(|s| s.number_of_selected_clusters == 1)
                && condition(p, "PlacementSatisfied").is_some_and(|c| c.status == "True")
        },
    )
    .await
    .expect("numberOfClusters: 1 chooses one cluster");
    let chosen = decided(&hub, "one").await;
    assert_eq!(chosen.len(), 1);
    let chosen = chosen[0].0.clone();
    assert_eq!(one.status.expect("status").decision_groups.len(), 1);

    // Joining: a prod cluster enters `prod`; `one` keeps its choice (Steady)
    // although c0 sorts first.
    add_cluster(&hub, "c0", &[("env", "prod")]).await;
    wait_decided(&hub, "prod", &["c0", "c1", "c2"]).await;
    assert_eq!(
        decided(&hub, "one")
            .await
            .into_iter()
            .map(|d| d.0)
            .collect::<Vec<_>>(),
        vec![chosen.clone()],
        "a joining cluster moved the decision of a full placement"
    );
    // Relabelled away, and leaving.
    relabel(&hub, "c2", json!({"env": "dev"})).await;
    wait_decided(&hub, "prod", &["c0", "c1"]).await;
    Api::<ManagedCluster>::all(hub.clone())
        .delete("c1", &DeleteParams::default())
        .await
        .expect("delete c1");
    wait_decided(&hub, "prod", &["c0"]).await;

    // A bad spec says so and keeps the decisions it had.
    placements
        .patch(
            "prod",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"predicates": [{"requiredClusterSelector": {"labelSelector": {"matchExpressions": [{"key": "env", "operator": "Near"}]}}}]}})),
        )
        .await
        .expect("patch prod");
    let misconfigured = wait_until(
        &placements,
        "prod",
        "PlacementMisconfigured",
        APPLY_TIMEOUT,
        |p| condition(p, "PlacementMisconfigured").is_some_and(|c| c.status == "True"),
    )
    .await
    .expect("a bad selector is reported");
    let message = &condition(&misconfigured, "PlacementMisconfigured")
        .expect("condition")
        .message;
    assert!(message.contains("unknown operator \"Near\""), "{message}");
    assert_eq!(decided(&hub, "prod").await.len(), 1);
    // Every other placement is still served.
    add_cluster(&hub, "c4", &[("env", "dev")]).await;
    Api::<ManagedCluster>::all(hub.clone())
        .patch_status(
            "c4",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"clusterClaims": [{"name": "region", "value": "eu"}]}}),
            ),
        )
        .await
        .expect("claims");
    wait_decided(&hub, "eu", &["c3", "c4"]).await;
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decision_groups_split_by_group_selector_then_clusters_per_decision_group() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&[]))
        .await
        .expect("fleet starts");
    let hub = fleet.hub_client.clone();
    add_cluster(&hub, "canary-1", &[("canary", "true")]).await;
    for name in ["d1", "d2", "d3"] {
        add_cluster(&hub, name, &[]).await;
    }
    // Once a placement of every cluster names all four, the hub has seen
    // them all, so the groups below do not depend on the order they came in.
    create_placement(&hub, "all", json!({"tolerations": tolerate_unreachable()})).await;
    wait_decided(&hub, "all", &["canary-1", "d1", "d2", "d3"]).await;
    create_placement(
        &hub,
        "staged",
        json!({
            "tolerations": tolerate_unreachable(),
            "decisionStrategy": {"groupStrategy": {
                "decisionGroups": [{"groupName": "canary", "groupClusterSelector": {"labelSelector": {"matchLabels": {"canary": "true"}}}}],
                "clustersPerDecisionGroup": 2,
            }},
        }),
    )
    .await;
    wait_decided(&hub, "staged", &["canary-1", "d1", "d2", "d3"]).await;
    let by = |c: &str, i: &str, g: &str| (c.to_string(), i.to_string(), g.to_string());
    assert_eq!(
        decided(&hub, "staged").await,
        vec![
            by("canary-1", "0", "canary"),
            by("d1", "1", ""),
            by("d2", "1", ""),
            by("d3", "2", ""),
        ]
    );
    let placements: Api<Placement> = Api::namespaced(hub.clone(), NAMESPACE);
    let staged = wait_until(&placements, "staged", "three groups", APPLY_TIMEOUT, |p| {
        p.status
            .as_ref()
            .is_some_and(|s| s.decision_groups.len() == 3)
    })
    .await
    .expect("status lists the groups");
    let groups = staged.status.expect("status").decision_groups;
    assert_eq!(
        groups
            .iter()
            .map(|g| (
                g.decision_group_index,
                g.decision_group_name.as_str(),
                g.clusters_count
            ))
            .collect::<Vec<_>>(),
        vec![(0, "canary", 1), (1, "", 2), (2, "", 1)]
    );
    // A new cluster fills the group with room; nobody moves.
    add_cluster(&hub, "d0", &[]).await;
    wait_decided(&hub, "staged", &["canary-1", "d0", "d1", "d2", "d3"]).await;
    assert_eq!(
        decided(&hub, "staged").await,
        vec![
            by("canary-1", "0", "canary"),
            by("d0", "2", ""),
            by("d1", "1", ""),
            by("d2", "1", ""),
            by("d3", "2", ""),
        ]
    );
    fleet.stop().await;
}

/// The unreachable taint's grace in the disconnect test: longer than an
/// agent restart on a loaded machine takes.
const GRACE: Duration = Duration::from_secs(15);

/// Records, until aborted, whether a watch ever saw `cluster` tainted
/// unreachable or missing from the decisions of placement `placement`.
fn record_flaps(
    client: Client,
    cluster: &'static str,
    placement: &'static str,
) -> (
    tokio::task::JoinHandle<()>,
    std::sync::Arc<tokio::sync::Mutex<Vec<String>>>,
) {
    let seen = std::sync::Arc::new(tokio::sync::Mutex::new(Vec::new()));
    let record = seen.clone();
    let task = tokio::spawn(async move {
        use futures::StreamExt;
        use kube::runtime::{WatchStreamExt, watcher};
        let clusters = watcher(
            Api::<ManagedCluster>::all(client.clone()),
            watcher::Config::default(),
        )
        .applied_objects()
        .map(|c| c.map(futures::future::Either::Left));
        let decisions = watcher(
            Api::<PlacementDecision>::namespaced(client, NAMESPACE),
            watcher::Config::default().labels(&format!("{PLACEMENT_LABEL}={placement}")),
        )
        .applied_objects()
        .map(|d| d.map(futures::future::Either::Right));
        let mut events = std::pin::pin!(futures::stream::select(clusters, decisions));
        while let Some(Ok(event)) = events.next().await {
            match event {
                futures::future::Either::Left(c) if c.name_any() == cluster => {
                    if c.spec.taints.iter().any(|t| t.key == UNREACHABLE_TAINT) {
                        record
                            .lock()
                            .await
                            .push(format!("tainted: {:?}", c.spec.taints));
                    }
                }
                futures::future::Either::Left(_) => {}
                futures::future::Either::Right(d) => {
                    let names: Vec<&str> = d
                        .status
                        .iter()
                        .flat_map(|s| s.decisions.iter())
                        .map(|d| d.cluster_name.as_str())
                        .collect();
                    if !names.contains(&cluster) {
                        record
                            .lock()
                            .await
                            .push(format!("decision {} lists {names:?}", d.name_any()));
                    }
                }
            }
        }
    });
    (task, seen)
}

/// Waits until `cluster` is recorded as connected (or not, as `wanted`).
async fn wait_connected(
    clusters: &Api<ManagedCluster>,
    cluster: &str,
    wanted: bool,
) -> ManagedCluster {
    let what = if wanted {
        "connected"
    } else {
        "marked disconnected"
    };
    wait_until(clusters, cluster, what, APPLY_TIMEOUT, |c| {
        c.status.as_ref().is_some_and(|s| s.connected) == wanted
    })
    .await
    .unwrap_or_else(|e| panic!("{cluster} {what}: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_back_within_the_grace_moves_nothing_and_one_away_longer_is_tainted_and_leaves_strict_placements()
 {
    let mut options = FleetOptions::with_spokes(&["spoke-a", "spoke-b"]);
    options.heartbeat = Duration::from_secs(1);
    options.unreachable_grace = GRACE;
    let mut fleet = Fleet::start(options).await.expect("fleet starts");
    let hub = fleet.hub_client.clone();
    create_placement(&hub, "strict", json!({})).await;
    create_placement(
        &hub,
        "tolerant",
        json!({"tolerations": tolerate_unreachable()}),
    )
    .await;
    // Both agents connect, so neither cluster stays tainted.
    wait_decided(&hub, "strict", &["spoke-a", "spoke-b"]).await;
    wait_decided(&hub, "tolerant", &["spoke-a", "spoke-b"]).await;
    let clusters: Api<ManagedCluster> = Api::all(hub.clone());

    // An agent restart shorter than the grace: the cluster is marked
    // disconnected, but never tainted, and never leaves the decisions.
    let (recorder, flaps) = record_flaps(hub.clone(), "spoke-a", "strict");
    let stopped = std::time::Instant::now();
    fleet.stop_agent("spoke-a").await;
    wait_connected(&clusters, "spoke-a", false).await;
    fleet.start_agent("spoke-a");
    wait_connected(&clusters, "spoke-a", true).await;
    let away = stopped.elapsed();
    println!("agent away for {away:?} (grace {GRACE:?})");
    assert!(
        away < GRACE,
        "the restart took longer than the grace: {away:?}"
    );
    recorder.abort();
    assert_eq!(
        *flaps.lock().await,
        Vec::<String>::new(),
        "a restart within the grace moved something"
    );

    // Away for longer than the grace: tainted then, not before.
    fleet.stop_agent("spoke-a").await;
    let gone = wait_connected(&clusters, "spoke-a", false).await;
    let tainted = wait_until(
        &clusters,
        "spoke-a",
        "unreachable taint",
        APPLY_TIMEOUT,
        |c| {
            c.spec.taints.iter().any(|t| {
                t.key == UNREACHABLE_TAINT && t.effect == "NoSelect" && !t.time_added.is_empty()
            })
        },
    )
    .await
    .expect("a disconnected cluster is tainted");
    let last_seen: k8s_openapi::jiff::Timestamp = gone
        .status
        .as_ref()
        .map(|s| s.last_seen_time.clone())
        .unwrap_or_default()
        .parse()
        .expect("lastSeenTime");
    let added: k8s_openapi::jiff::Timestamp = tainted
        .spec
        .taints
        .iter()
        .find(|t| t.key == UNREACHABLE_TAINT)
        .map(|t| t.time_added.clone())
        .unwrap_or_default()
        .parse()
        .expect("timeAdded");
    let waited = added.duration_since(last_seen);
    println!("tainted {waited:?} after the agent was last heard (grace {GRACE:?})");
    // Whole seconds on both sides.
    assert!(
        waited.as_secs() + 1 >= GRACE.as_secs() as i64,
        "tainted before the grace ended: {waited:?}"
    );
    wait_decided(&hub, "strict", &["spoke-b"]).await;
    wait_decided(&hub, "tolerant", &["spoke-a", "spoke-b"]).await;

    fleet.start_agent("spoke-a");
    wait_until(&clusters, "spoke-a", "taint removed", APPLY_TIMEOUT, |c| {
        c.spec.taints.iter().all(|t| t.key != UNREACHABLE_TAINT)
    })
    .await
    .expect("a reconnected cluster loses the taint");
    wait_decided(&hub, "strict", &["spoke-a", "spoke-b"]).await;
    fleet.stop().await;
}
