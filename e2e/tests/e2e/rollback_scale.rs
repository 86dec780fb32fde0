//! Figures, not a timed assertion: how long a `failureStrategy:
//! rollbackAll` takes across 1,000 simulated clusters (issue 23), from the
//! moment the bad revision is everywhere it can go to every work holding
//! the stable revision again, and to every simulated agent reporting it
//! Applied; and how many works the rollback wrote. Ignored by default (it
//! joins 1,000 clusters with simulated agents); run it with
//! `cargo test -p ferry-e2e --test e2e rollback_scale:: -- --ignored --nocapture`
//! (`FERRY_ROLLBACK_CLUSTERS=N` for another fleet size). It fails only
//! when the rollback does not finish. A second run SIGKILLs the leading hub
//! process in the middle of the rollback (issue 31) and measures how long
//! the follower takes to finish it.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use ferry_api::contract::{REPLICA_SET_LABEL, REVISION_ANNOTATION};
use ferry_api::managed_cluster::ManagedCluster;
use ferry_api::manifest_work::ManifestWork;
use ferry_api::placement::Placement;
use ferry_api::replica_set::ManifestWorkReplicaSet;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::harness::leader_process::{lead_from_process, wait_leader};
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::config_map;
use ferry_tools::loadgen::agent::Behaviour;
use ferry_tools::loadgen::clusters::{cluster_name, join_clusters};
use ferry_tools::loadgen::run::{SimFleet, hub_endpoint};
use futures::StreamExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;

/// Clusters simulated: `FERRY_ROLLBACK_CLUSTERS`, or 1,000.
fn clusters() -> usize {
    std::env::var("FERRY_ROLLBACK_CLUSTERS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1000)
}
const TIMEOUT: Duration = Duration::from_secs(900);

/// Each generated work's revision hash and whether it is Applied at its
/// generation, by cluster.
type WorkStates = BTreeMap<String, (String, bool)>;

fn states(works: &[std::sync::Arc<ManifestWork>]) -> WorkStates {
    works
        .iter()
        .map(|w| {
            let generation = w.metadata.generation.unwrap_or(0);
            let applied = w.status.as_ref().is_some_and(|s| {
                s.conditions.iter().any(|c| {
                    c.type_ == "Applied"
                        && c.status == "True"
                        && c.observed_generation == generation
                })
            });
            (
                w.namespace().unwrap_or_default(),
                (
                    w.annotations()
                        .get(REVISION_ANNOTATION)
                        .cloned()
                        .unwrap_or_default(),
                    applied,
                ),
            )
        })
        .collect()
}

/// The replica set's works as a watch sees them: one watch instead of a
/// list of every work per check, so measuring does not load the API
/// server it measures.
struct WorkWatch {
    store: Store<ManifestWork>,
    events: std::pin::Pin<Box<dyn futures::Stream<Item = ()> + Send>>,
}

impl WorkWatch {
    fn start(client: &Client) -> Self {
        let (store, writer) = reflector::store();
        let api: Api<ManifestWork> = Api::all(client.clone());
        let events = watcher(
            api,
            watcher::Config::default().labels(&format!("{REPLICA_SET_LABEL}=default.scale")),
        )
        .default_backoff()
        .reflect(writer)
        .map(|_| ());
        Self {
            store,
            events: Box::pin(events),
        }
    }

    /// Waits until `done` holds for the works; returns how long it took.
    async fn wait(&mut self, what: &str, mut done: impl FnMut(&WorkStates) -> bool) -> Duration {
        let started = Instant::now();
        loop {
            if done(&states(&self.store.state())) {
                return started.elapsed();
            }
            let left = TIMEOUT.saturating_sub(started.elapsed());
            match tokio::time::timeout(left, self.events.next()).await {
                Ok(Some(())) => {}
                Ok(None) => panic!("the work watch ended while waiting for {what}"),
                Err(_) => panic!("{what} in time"),
            }
        }
    }
}

async fn wait_status(
    sets: &Api<ManifestWorkReplicaSet>,
    what: &str,
    done: impl Fn(&ManifestWorkReplicaSet) -> bool,
) -> ManifestWorkReplicaSet {
    wait_until(sets, "scale", what, TIMEOUT, done)
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"))
}

fn reason(rs: &ManifestWorkReplicaSet) -> Option<(String, i64)> {
    rs.status.as_ref()?.conditions.iter().find_map(|c| {
        (c.type_ == "PlacementRolledOut").then(|| (c.reason.clone(), c.observed_generation))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: prints figures; run with --ignored"]
async fn rollback_all_across_1000_simulated_clusters() {
    rollback_all(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: prints figures; run with --ignored"]
async fn rollback_all_across_1000_simulated_clusters_with_the_leader_killed_mid_rollback() {
    rollback_all(true).await;
}

/// Rolls a bad revision out to every simulated cluster and measures the
/// rollback; with `kill_leader` the controllers run in a `ferry-hub`
/// process that is SIGKILLed once the rollback is recorded and some but not
/// all works are back, and the fleet's replica finishes it.
async fn rollback_all(kill_leader: bool) {
    let mut options = FleetOptions::with_spokes(&[]);
    // Every simulated agent dials from 127.0.0.1: the per-peer review
    // budget, meant for one agent per address, would admit 60 a minute.
    options.peer_token_reviews_per_minute = std::num::NonZeroU32::MAX;
    options.elect_leader = kill_leader;
    if kill_leader {
        tokio::task::spawn_blocking(ferry_e2e::harness::image::build_binaries)
            .await
            .expect("build task")
            .expect("ferry-hub builds");
        options.heartbeat = Duration::from_secs(1);
    }
    let mut fleet = Fleet::start(options).await.expect("fleet starts");
    let mut leader = if kill_leader {
        Some(lead_from_process(&mut fleet, "scale-leader").await)
    } else {
        None
    };
    let hub = fleet.hub_client.clone();
    let joined = Instant::now();
    let joined_clusters = join_clusters(&hub, 0, clusters(), 16, 3600)
        .await
        .expect("join");
    let endpoint = hub_endpoint(&fleet.hub_url, Some(&fleet.hub_ca_pem)).expect("endpoint");
    let agents = SimFleet::start(
        joined_clusters,
        endpoint,
        Behaviour::steady(Duration::from_secs(30)),
    );
    agents.wait_connected(TIMEOUT).await.expect("connected");
    eprintln!(
        "{} clusters joined and connected in {:?}",
        clusters(),
        joined.elapsed()
    );
    // The bad revision's override leaves one cluster's manifest nameless:
    // the hub API server refuses that work, the cluster fails, and with
    // maxFailures 0 the rollout halts after every other cluster got it.
    Api::<ManagedCluster>::all(hub.clone())
        .patch(
            &cluster_name(0),
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"broken": "yes"}}})),
        )
        .await
        .expect("label cluster");
    ferry_e2e::helpers::placement_helpers::bind_global(&hub, "default").await;
    let placement: Placement = serde_json::from_value(json!({
        "apiVersion": "cluster.ferry.dev/v1alpha1", "kind": "Placement",
        "metadata": {"name": "scale", "namespace": "default"}, "spec": {},
    }))
    .expect("placement");
    let placements: Api<Placement> = Api::namespaced(hub.clone(), "default");
    placements
        .create(&PostParams::default(), &placement)
        .await
        .expect("placement");
    // Every cluster chosen before the replica set exists, so revision 1
    // goes everywhere in its first rollout.
    wait_until(&placements, "scale", "every cluster chosen", TIMEOUT, |p| {
        p.status
            .as_ref()
            .is_some_and(|s| s.number_of_selected_clusters as usize == clusters())
    })
    .await
    .expect("the placement chooses every cluster");
    let mut work_watch = WorkWatch::start(&hub);
    let template = |v: &str| json!({"workload": {"manifests": [config_map("default", "scale", json!({"version": v}))]}});
    let strategy =
        json!({"type": "All", "all": {"maxFailures": 0, "failureStrategy": "rollbackAll"}});
    let rs: ManifestWorkReplicaSet = serde_json::from_value(json!({
        "apiVersion": "work.ferry.dev/v1alpha1", "kind": "ManifestWorkReplicaSet",
        "metadata": {"name": "scale", "namespace": "default"},
        "spec": {"manifestWorkTemplate": template("v1"),
            "placementRefs": [{"name": "scale", "rolloutStrategy": strategy}]},
    }))
    .expect("replica set");
    let sets: Api<ManifestWorkReplicaSet> = Api::namespaced(hub.clone(), "default");
    let created = Instant::now();
    sets.create(&PostParams::default(), &rs)
        .await
        .expect("replica set");
    let stable = wait_status(&sets, "revision 1 complete and stable", |rs| {
        reason(rs).is_some_and(|(r, _)| r == "Complete")
            && rs
                .status
                .as_ref()
                .and_then(|s| s.rollout.as_ref())
                .is_some_and(|r| r.stable_revision.is_some())
    })
    .await;
    let stable = stable
        .status
        .and_then(|s| s.rollout?.stable_revision)
        .expect("stable revision");
    let hash = stable.hash.clone();
    work_watch
        .wait("revision 1 applied everywhere", |w| {
            w.len() == clusters() && w.values().all(|(r, a)| *r == hash && *a)
        })
        .await;
    eprintln!(
        "revision 1 applied on {} clusters {:?} after the replica set was created",
        clusters(),
        created.elapsed()
    );

    let changed = Instant::now();
    let generation = sets
        .patch(
            "scale",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"manifestWorkTemplate": template("v2"),
                "overrides": [{"name": "nameless", "clusterSelector": {"matchLabels": {"broken": "yes"}},
                    "resourceIdentifier": {"kind": "ConfigMap", "namespace": "default", "name": "scale"},
                    "jsonPatch": [{"op": "remove", "path": "/metadata/name"}]}]}})),
        )
        .await
        .expect("bad revision")
        .metadata
        .generation
        .unwrap_or(0);
    // The works as the watch sees them from the change on: how far the bad
    // revision got and when, then every work back on the stable one.
    let mut peak = (0usize, Duration::ZERO);
    if let Some(process) = leader.as_mut() {
        // Mid-rollback: past the peak, some works back, not all.
        work_watch
            .wait("the rollback under way", |w| {
                let bad = w.values().filter(|(r, _)| *r != hash).count();
                if bad > peak.0 {
                    peak = (bad, changed.elapsed());
                }
                peak.0 > 0 && bad > 0 && bad < peak.0
            })
            .await;
        process.kill().await;
        let killed = Instant::now();
        let left = states(&work_watch.store.state())
            .values()
            .filter(|(r, _)| *r != hash)
            .count();
        wait_leader(&fleet, "replica-0", "the follower takes over", TIMEOUT).await;
        eprintln!(
            "leader SIGKILLed {:?} after the template change with {left} of {} works still on the bad revision; \
             the follower led {:?} later",
            changed.elapsed(),
            peak.0,
            killed.elapsed()
        );
    }
    // Once back on the stable revision, a work stays there: a work seen on
    // it and later on another was pushed out again (a reversed rollback).
    let mut on_stable = std::collections::BTreeSet::new();
    let mut reversed = std::collections::BTreeSet::new();
    work_watch
        .wait("every work back on the stable revision", |w| {
            let bad = w.values().filter(|(r, _)| *r != hash).count();
            if bad > peak.0 {
                peak = (bad, changed.elapsed());
            }
            for (cluster, (revision, _)) in w {
                if *revision == hash {
                    on_stable.insert(cluster.clone());
                } else if on_stable.contains(cluster) {
                    reversed.insert(cluster.clone());
                }
            }
            peak.0 > 0 && w.len() == clusters() && bad == 0
        })
        .await;
    let back = changed.elapsed();
    assert!(
        !kill_leader || reversed.is_empty(),
        "works put back on the bad revision after the leader died: {reversed:?}"
    );
    work_watch
        .wait("every work applied on the stable revision", |w| {
            w.len() == clusters() && w.values().all(|(r, a)| *r == hash && *a)
        })
        .await;
    let applied = changed.elapsed();
    let done = wait_status(&sets, "the rollback recorded and counted", |rs| {
        reason(rs).is_some_and(|(r, g)| r == "RolledBack" && g == generation)
            && rs
                .status
                .as_ref()
                .and_then(|s| s.rollout.as_ref())
                .and_then(|r| r.rollback.as_ref())
                .is_some_and(|r| r.clusters as usize == clusters() - 1)
    })
    .await;
    let rollback = done
        .status
        .and_then(|s| s.rollout?.rollback)
        .expect("rollback");
    eprintln!(
        "rollback across {} clusters, from the template change: bad revision {} on {} works at its peak after {:?}; \
         every work back on stable revision {} after {back:?} (rollback {:?} after the peak); every work Applied there after {applied:?}; \
         {} works written back (one per cluster that got the bad revision)",
        clusters(),
        rollback.from.number,
        peak.0,
        peak.1,
        rollback.to.number,
        back.saturating_sub(peak.1),
        rollback.clusters
    );
    agents.stop().await;
    fleet.stop().await;
}
