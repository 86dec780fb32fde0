//! The leader dies in the middle of a progressive rollout and of placement
//! churn (issue 22): the leading hub is a real `ferry-hub` process, killed
//! with SIGKILL while the second decision group is rolling out and new
//! clusters are joining. The other replica takes the Lease within about one
//! lease duration, the rollout goes on from where it was (every group once,
//! in order, none skipped or written twice), and no cluster's decision
//! flaps (leaves the placement's decisions and comes back).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_api::contract::{DECISION_GROUP_INDEX_LABEL, REPLICA_SET_LABEL};
use ferry_api::manifest_work::ManifestWork;
use ferry_api::placement::{Placement, PlacementDecision};
use ferry_api::replica_set::ManifestWorkReplicaSet;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions, LEADER_LEASE, LEADER_LEASE_DURATION};
use ferry_e2e::harness::leader_process::{holder, lead_from_process};
use ferry_e2e::helpers::placement_helpers::create_placement;
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{APPLY_TIMEOUT, config_map};
use ferry_tools::loadgen::agent::Behaviour;
use ferry_tools::loadgen::clusters::join_clusters;
use ferry_tools::loadgen::run::{SimFleet, hub_endpoint};
use futures::TryStreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use tokio::sync::Mutex;

const NAMESPACE: &str = "default";
const NAME: &str = "chaos";
/// Clusters at the start: three decision groups of three.
const FIRST: usize = 9;
/// Clusters that join while the rollout runs and the leader dies.
const JOINING: usize = 3;
const PER_GROUP: usize = 3;
/// The identity the killed process holds the leader Lease under.
const PROCESS_IDENTITY: &str = "chaos-leader";

fn template(version: &str) -> Value {
    json!({"workload": {"manifests": [config_map(NAMESPACE, NAME, json!({"version": version}))]}})
}

fn version_of(work: &ManifestWork) -> Option<String> {
    let manifest = &work.spec.workload.manifests.first()?.0;
    manifest["data"]["version"].as_str().map(str::to_string)
}

fn rolled_out(rs: &ManifestWorkReplicaSet, generation: i64) -> bool {
    rs.status.as_ref().is_some_and(|s| {
        s.conditions.iter().any(|c| {
            c.type_ == "PlacementRolledOut"
                && c.reason == "Complete"
                && c.observed_generation == generation
        })
    })
}

/// Every write of a generated work seen by a watch: when, which cluster,
/// which version and generation.
#[derive(Default)]
struct WorkLog {
    writes: Vec<(Instant, String, Option<String>, i64)>,
}

/// Every state of the placement's decisions seen by a watch: which clusters
/// each decision object lists, and the group index of each cluster.
#[derive(Default)]
struct DecisionLog {
    objects: BTreeMap<String, BTreeSet<String>>,
    /// The union of the clusters listed, after each event.
    unions: Vec<BTreeSet<String>>,
    group_of: BTreeMap<String, usize>,
}

fn record_works(client: Client, log: Arc<Mutex<WorkLog>>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let works: Api<ManifestWork> = Api::all(client);
        let stream = watcher(
            works,
            watcher::Config::default().labels(&format!("{REPLICA_SET_LABEL}={NAMESPACE}.{NAME}")),
        )
        .applied_objects();
        let mut stream = std::pin::pin!(stream);
        while let Ok(Some(work)) = stream.try_next().await {
            log.lock().await.writes.push((
                Instant::now(),
                work.namespace().unwrap_or_default(),
                version_of(&work),
                work.metadata.generation.unwrap_or(0),
            ));
        }
    })
}

fn record_decisions(client: Client, log: Arc<Mutex<DecisionLog>>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let decisions: Api<PlacementDecision> = Api::namespaced(client, NAMESPACE);
        let stream = watcher(decisions, watcher::Config::default()).applied_objects();
        let mut stream = std::pin::pin!(stream);
        while let Ok(Some(decision)) = stream.try_next().await {
            let group: usize = decision
                .labels()
                .get(DECISION_GROUP_INDEX_LABEL)
                .and_then(|g| g.parse().ok())
                .unwrap_or(usize::MAX);
            let listed: BTreeSet<String> = decision
                .status
                .as_ref()
                .map(|s| s.decisions.iter().map(|d| d.cluster_name.clone()).collect())
                .unwrap_or_default();
            let mut log = log.lock().await;
            for cluster in &listed {
                log.group_of.insert(cluster.clone(), group);
            }
            log.objects.insert(decision.name_any(), listed);
            let union = log.objects.values().flatten().cloned().collect();
            log.unions.push(union);
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_leader_mid_rollout_and_churn_is_replaced_within_a_lease_and_the_rollout_goes_on_without_skipping_repeating_or_flapping()
 {
    tokio::task::spawn_blocking(ferry_e2e::harness::image::build_binaries)
        .await
        .expect("build task")
        .expect("ferry-hub builds");
    let mut options = FleetOptions::with_spokes(&[]);
    options.heartbeat = Duration::from_secs(1);
    options.elect_leader = true;
    let mut fleet = Fleet::start(options).await.expect("fleet starts");
    let hub = fleet.hub_client.clone();
    let leases: Api<Lease> = Api::namespaced(hub.clone(), LEADER_LEASE.0);
    // The real hub process joins the election, and leads once the fleet's
    // replica steps down; the fleet's replica then comes back as follower.
    let mut leader = lead_from_process(&mut fleet, PROCESS_IDENTITY).await;

    // Simulated agents dial the fleet's replica, which serves them while the
    // process runs the controllers.
    let endpoint = hub_endpoint(&fleet.hub_url, Some(&fleet.hub_ca_pem)).expect("endpoint");
    let behaviour = Behaviour::steady(Duration::from_secs(1));
    let first = join_clusters(&hub, 0, FIRST, 8, 3600).await.expect("join");
    let mut agents = SimFleet::start(first, endpoint, behaviour);
    agents
        .wait_connected(APPLY_TIMEOUT)
        .await
        .expect("agents connect");

    let decision_log = Arc::new(Mutex::new(DecisionLog::default()));
    let decision_watch = record_decisions(hub.clone(), decision_log.clone());
    create_placement(
        &hub,
        NAMESPACE,
        NAME,
        json!({"decisionStrategy": {"groupStrategy": {"clustersPerDecisionGroup": PER_GROUP}}}),
    )
    .await;
    // Every cluster is chosen (its unreachable taint gone) before the
    // rollouts start, so the groups are full.
    let placements: Api<Placement> = Api::namespaced(hub.clone(), NAMESPACE);
    wait_until(
        &placements,
        NAME,
        "every cluster chosen",
        APPLY_TIMEOUT,
        |p| {
            p.status
                .as_ref()
                .is_some_and(|s| s.number_of_selected_clusters == FIRST as i32)
        },
    )
    .await
    .expect("the placement chooses every joined cluster");
    let rs: ManifestWorkReplicaSet = serde_json::from_value(json!({
        "apiVersion": "work.ferry.dev/v1alpha1", "kind": "ManifestWorkReplicaSet",
        "metadata": {"name": NAME, "namespace": NAMESPACE},
        "spec": {
            "manifestWorkTemplate": template("1"),
            "placementRefs": [{"name": NAME, "rolloutStrategy": {
                "type": "ProgressivePerGroup",
                "progressivePerGroup": {"minSuccessTime": "4s"}}}],
        },
    }))
    .expect("replica set");
    let sets: Api<ManifestWorkReplicaSet> = Api::namespaced(hub.clone(), NAMESPACE);
    let created = sets
        .create(&PostParams::default(), &rs)
        .await
        .expect("create replica set");
    let generation = created.metadata.generation.unwrap_or(1);
    wait_until(
        &sets,
        NAME,
        "version 1 rolled out",
        APPLY_TIMEOUT * 2,
        |rs| {
            rolled_out(rs, generation)
                && rs
                    .status
                    .as_ref()
                    .is_some_and(|s| s.summary.updated == FIRST as i32)
        },
    )
    .await
    .expect("the process's controllers roll version 1 out");

    // Version 2 rolls out group by group; once the second group has it,
    // clusters start joining and the leader is killed.
    let work_log = Arc::new(Mutex::new(WorkLog::default()));
    let work_watch = record_works(hub.clone(), work_log.clone());
    let changed = sets
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"manifestWorkTemplate": template("2")}})),
        )
        .await
        .expect("change the template");
    let generation = changed.metadata.generation.unwrap_or(0);
    let group_of = decision_log.lock().await.group_of.clone();
    let in_group = |group: usize| -> Vec<String> {
        group_of
            .iter()
            .filter(|(_, g)| **g == group)
            .map(|(c, _)| c.clone())
            .collect()
    };
    assert_eq!(in_group(1).len(), PER_GROUP, "groups: {group_of:?}");
    let second = in_group(1);
    let deadline = Instant::now() + APPLY_TIMEOUT * 2;
    loop {
        let reached = {
            let log = work_log.lock().await;
            log.writes
                .iter()
                .any(|(_, c, v, _)| second.contains(c) && v.as_deref() == Some("2"))
        };
        if reached {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the second group never got version 2"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let joining = join_clusters(&hub, FIRST, FIRST + JOINING, 8, 3600)
        .await
        .expect("join more");
    agents.add(joining);
    leader.kill().await;
    let killed = Instant::now();
    wait_until(
        &leases,
        LEADER_LEASE.1,
        "replica-0 leads again",
        APPLY_TIMEOUT,
        |l| holder(l).as_deref() == Some("replica-0"),
    )
    .await
    .expect("the fleet's replica takes the Lease of the killed leader");
    let handover = killed.elapsed();
    println!("handover after SIGKILL: {handover:?} (lease duration {LEADER_LEASE_DURATION:?})");
    assert!(
        handover < LEADER_LEASE_DURATION * 3,
        "the Lease of a dead leader is taken within about one lease duration: {handover:?}"
    );

    // The rollout finishes on every cluster, the joined ones included.
    wait_until(
        &sets,
        NAME,
        "version 2 rolled out",
        APPLY_TIMEOUT * 3,
        |rs| {
            rolled_out(rs, generation)
                && rs
                    .status
                    .as_ref()
                    .is_some_and(|s| s.summary.updated == (FIRST + JOINING) as i32)
        },
    )
    .await
    .expect("the new leader finishes the rollout");
    work_watch.abort();
    decision_watch.abort();

    // Each cluster got version 2 in exactly one write, and each group only
    // after every earlier group had it: nothing skipped, nothing repeated.
    let log = work_log.lock().await;
    let mut first_v2: BTreeMap<String, Instant> = BTreeMap::new();
    let mut v2_generations: BTreeMap<String, BTreeSet<i64>> = BTreeMap::new();
    let mut last_version: BTreeMap<String, Option<String>> = BTreeMap::new();
    for (at, cluster, version, work_generation) in &log.writes {
        if let Some(previous) = last_version.get(cluster) {
            assert!(
                !(previous.as_deref() == Some("2") && version.as_deref() != Some("2")),
                "cluster {cluster} went back from version 2 to {version:?}"
            );
        }
        last_version.insert(cluster.clone(), version.clone());
        if version.as_deref() == Some("2") {
            first_v2.entry(cluster.clone()).or_insert(*at);
            v2_generations
                .entry(cluster.clone())
                .or_default()
                .insert(*work_generation);
        }
    }
    for (cluster, generations) in &v2_generations {
        assert_eq!(
            generations.len(),
            1,
            "cluster {cluster}'s work was written with version 2 more than once: generations {generations:?}"
        );
    }
    for group in 0..FIRST / PER_GROUP {
        for cluster in in_group(group) {
            assert!(
                first_v2.contains_key(&cluster),
                "cluster {cluster} of group {group} never got version 2"
            );
        }
    }
    for group in 1..FIRST / PER_GROUP {
        let earlier_done = in_group(group - 1)
            .iter()
            .filter_map(|c| first_v2.get(c))
            .max()
            .copied()
            .expect("earlier group");
        let started = in_group(group)
            .iter()
            .filter_map(|c| first_v2.get(c))
            .min()
            .copied()
            .expect("group");
        assert!(
            started >= earlier_done,
            "group {group} started before group {} had version 2",
            group - 1
        );
    }

    // No cluster left the decisions and came back.
    let decisions = decision_log.lock().await;
    let mut seen: BTreeSet<String> = BTreeSet::new();
    for union in &decisions.unions {
        let gone: Vec<&String> = seen.difference(union).collect();
        assert!(
            gone.is_empty(),
            "clusters {gone:?} left the decisions without leaving the placement"
        );
        seen.extend(union.iter().cloned());
    }
    assert_eq!(
        seen.len(),
        FIRST + JOINING,
        "every cluster was decided once"
    );
    println!(
        "{} decision states and {} work writes recorded; every group once and in order",
        decisions.unions.len(),
        log.writes.len()
    );
    drop(log);
    drop(decisions);
    agents.stop().await;
    fleet.stop().await;
}
