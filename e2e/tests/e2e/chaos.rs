//! Chaos: the hub, the agents and the spoke control planes are killed and
//! restarted at random points while works in two clusters are created,
//! edited, reshaped and deleted; afterwards every spoke holds exactly the
//! last generation, nothing is leaked, every ManagedCluster shows a live
//! session, and the agents still correct drift (issue 5, item 9).
//!
//! A seeded RNG drives both the updates and the kills; the seed is printed,
//! and `FERRY_CHAOS_SEED=<n>` replays the same sequence of operations (the
//! interleaving with kills still depends on timing).

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ferry_agent::applied_works::AppliedManifestWork;
use ferry_api::managed_cluster::ManagedCluster;
use ferry_api::manifest_work::ManifestWork;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::wait::{wait_deleted, wait_until};
use ferry_e2e::helpers::work_helpers::{APPLY_TIMEOUT, config_map, manifest_work, wait_applied};
use ferry_hub::clusters::replica_lease::{lease_name, vouches_at};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

const CLUSTERS: [&str; 2] = ["chaos-a", "chaos-b"];
/// The requirement asks for at least 200 updates; `FERRY_CHAOS_UPDATES`
/// raises it for longer soak runs.
const MIN_UPDATES: usize = 200;
/// Every kind of kill happens at least this often before the updates stop.
const MIN_KILLS_PER_KIND: usize = 3;
/// Where the works put their ConfigMaps on the spokes.
const NAMESPACE: &str = "default";
/// Every object the test makes carries this label, so leaks can be listed.
const TEST_LABEL: &str = "chaos.ferry.dev/test";
const WORK_LABEL: &str = "chaos.ferry.dev/work";
const MAX_WORKS_PER_CLUSTER: usize = 5;
const MAX_MAPS_PER_WORK: usize = 4;

/// ConfigMap name → data, for one work.
type Maps = BTreeMap<String, BTreeMap<String, String>>;

/// What the hub should hold, and so what the spokes should end up with.
#[derive(Default)]
struct Model {
    /// (cluster, work name) → its ConfigMaps.
    live: BTreeMap<(String, String), Maps>,
    /// Works deleted on the hub.
    deleted: Vec<(String, String)>,
    serial: usize,
}

impl Model {
    fn works_in(&self, cluster: &str) -> Vec<String> {
        self.live
            .keys()
            .filter(|(c, _)| c == cluster)
            .map(|(_, w)| w.clone())
            .collect()
    }

    fn next_name(&mut self, prefix: &str) -> String {
        self.serial += 1;
        format!("{prefix}{:04}", self.serial)
    }

    /// The ConfigMaps cluster `cluster` must hold.
    fn expected_maps(&self, cluster: &str) -> Maps {
        self.live
            .iter()
            .filter(|((c, _), _)| c == cluster)
            .flat_map(|(_, maps)| maps.clone())
            .collect()
    }
}

fn random_data(rng: &mut StdRng, update: usize) -> BTreeMap<String, String> {
    // A changing set of keys makes edits also remove keys, which the
    // agent's 3-way merge must carry to the spoke.
    let keys: Vec<&str> = ["a", "b", "c", "d"]
        .into_iter()
        .filter(|_| rng.random_bool(0.5))
        .collect();
    let keys = if keys.is_empty() { vec!["a"] } else { keys };
    keys.into_iter()
        .map(|k| (k.to_string(), format!("u{update}-{}", rng.random::<u16>())))
        .collect()
}

fn manifests(work: &str, maps: &Maps) -> Vec<Value> {
    maps.iter()
        .map(|(name, data)| {
            let mut manifest = config_map(NAMESPACE, name, json!(data));
            manifest["metadata"]["labels"] = json!({TEST_LABEL: "chaos", WORK_LABEL: work});
            manifest
        })
        .collect()
}

#[derive(Debug, Default)]
struct UpdateCounts {
    creates: usize,
    edits: usize,
    adds: usize,
    removes: usize,
    deletes: usize,
}

impl UpdateCounts {
    fn total(&self) -> usize {
        self.creates + self.edits + self.adds + self.removes + self.deletes
    }
}

/// Writes random updates to the hub until there were at least
/// `min_updates` and enough kills happened; every write must succeed, as
/// the hub API server itself is never killed.
async fn drive_updates(
    hub: Client,
    min_updates: usize,
    rng: &mut StdRng,
    model: &mut Model,
    chaos_enough: &AtomicBool,
    updates_done: &AtomicBool,
) -> UpdateCounts {
    let mut counts = UpdateCounts::default();
    // A bound in case the kills never reach their quota, so a broken fleet
    // fails at the checks rather than hanging.
    while counts.total() < min_updates
        || (!chaos_enough.load(Ordering::SeqCst) && counts.total() < 20 * min_updates)
    {
        let update = counts.total() + 1;
        let cluster = *CLUSTERS.choose(rng).expect("clusters");
        let api: Api<ManifestWork> = Api::namespaced(hub.clone(), cluster);
        let works = model.works_in(cluster);
        let roll = rng.random_range(0..100);
        if works.len() < 2 || (roll < 10 && works.len() < MAX_WORKS_PER_CLUSTER) {
            let name = model.next_name("w");
            let mut maps = Maps::new();
            for _ in 0..rng.random_range(1..=3) {
                maps.insert(
                    model.next_name(&format!("{name}-cm")),
                    random_data(rng, update),
                );
            }
            api.create(
                &PostParams::default(),
                &manifest_work(cluster, &name, manifests(&name, &maps)),
            )
            .await
            .unwrap_or_else(|e| panic!("creating work {cluster}/{name}: {e}"));
            model.live.insert((cluster.to_string(), name), maps);
            counts.creates += 1;
        } else if roll < 16 && works.len() > 2 {
            let name = works.choose(rng).expect("works").clone();
            api.delete(&name, &DeleteParams::default())
                .await
                .unwrap_or_else(|e| panic!("deleting work {cluster}/{name}: {e}"));
            model.live.remove(&(cluster.to_string(), name.clone()));
            model.deleted.push((cluster.to_string(), name));
            counts.deletes += 1;
        } else {
            let name = works.choose(rng).expect("works").clone();
            let key = (cluster.to_string(), name.clone());
            let map_count = model.live[&key].len();
            if roll < 32 && map_count < MAX_MAPS_PER_WORK {
                let map = model.next_name(&format!("{name}-cm"));
                let data = random_data(rng, update);
                model.live.entry(key.clone()).or_default().insert(map, data);
                counts.adds += 1;
            } else if roll < 42 && map_count > 1 {
                let maps = model.live.entry(key.clone()).or_default();
                let victim = maps
                    .keys()
                    .nth(rng.random_range(0..map_count))
                    .expect("a map")
                    .clone();
                maps.remove(&victim);
                counts.removes += 1;
            } else {
                let data = random_data(rng, update);
                let maps = model.live.entry(key.clone()).or_default();
                let target = maps
                    .keys()
                    .nth(rng.random_range(0..map_count))
                    .expect("a map")
                    .clone();
                maps.insert(target, data);
                counts.edits += 1;
            }
            let patch =
                json!({"spec": {"workload": {"manifests": manifests(&name, &model.live[&key])}}});
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .unwrap_or_else(|e| panic!("editing work {cluster}/{name}: {e}"));
        }
        tokio::time::sleep(Duration::from_millis(rng.random_range(10..150))).await;
    }
    updates_done.store(true, Ordering::SeqCst);
    counts
}

/// A component the chaos kills: the hub, or a spoke's agent or control plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Target {
    Hub,
    Agent(&'static str),
    ControlPlane(&'static str),
}

#[derive(Debug, Default)]
struct KillCounts {
    hub: usize,
    agent: usize,
    control_plane: usize,
}

impl KillCounts {
    fn enough(&self) -> bool {
        [self.hub, self.agent, self.control_plane]
            .into_iter()
            .all(|n| n >= MIN_KILLS_PER_KIND)
    }
}

/// Starts a killed component again; panics if it cannot start, as then
/// the fleet, not ferry, is broken.
async fn bring_up(fleet: &mut Fleet, target: Target) {
    match target {
        Target::Hub => fleet.start_hub().await.expect("the hub starts again"),
        Target::Agent(name) => fleet.start_agent(name),
        Target::ControlPlane(name) => fleet
            .start_spoke_control_plane(name)
            .await
            .unwrap_or_else(|e| panic!("control plane {name} starts again: {e}")),
    }
}

/// Every so often picks a component: kills it if it runs, restarts it if it
/// is down, so several may be down at once. Stops once the updates are done
/// and brings everything back up. Returns the kills and when the last kill
/// happened.
async fn drive_kills(
    fleet: &mut Fleet,
    rng: &mut StdRng,
    chaos_enough: &AtomicBool,
    updates_done: &AtomicBool,
) -> (KillCounts, Instant) {
    let mut targets = vec![Target::Hub];
    for cluster in CLUSTERS {
        targets.push(Target::Agent(cluster));
        targets.push(Target::ControlPlane(cluster));
    }
    let mut down = BTreeSet::new();
    let mut kills = KillCounts::default();
    let mut last_kill = Instant::now();
    while !updates_done.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(rng.random_range(200..1200))).await;
        let target = *targets.choose(rng).expect("targets");
        if down.remove(&target) {
            println!("chaos: starting {target:?}");
            bring_up(fleet, target).await;
            continue;
        }
        println!("chaos: killing {target:?}");
        match target {
            Target::Hub => {
                fleet.stop_hub().await;
                kills.hub += 1;
            }
            Target::Agent(name) => {
                fleet.stop_agent(name).await;
                kills.agent += 1;
            }
            Target::ControlPlane(name) => {
                fleet.kill_spoke_control_plane(name).await;
                kills.control_plane += 1;
            }
        }
        down.insert(target);
        last_kill = Instant::now();
        if kills.enough() {
            chaos_enough.store(true, Ordering::SeqCst);
        }
    }
    // Control planes, then agents, then the hub; convergence must not
    // depend on the order, this one merely starts the slowest first.
    for target in down.into_iter().rev() {
        println!("chaos: starting {target:?}");
        bring_up(fleet, target).await;
    }
    (kills, last_kill)
}

/// Retries `check` until it returns `Ok`, failing with its last complaint
/// after `timeout`.
async fn eventually<F, Fut>(what: &str, timeout: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        match check().await {
            Ok(()) => return,
            Err(why) if Instant::now() >= deadline => {
                panic!("{what} not reached within {timeout:?}: {why}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(250)).await,
        }
    }
}

/// The test's ConfigMaps on a spoke, name → data.
async fn spoke_maps(client: &Client) -> Result<Maps, String> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
    let list = api
        .list(&ListParams::default().labels(TEST_LABEL))
        .await
        .map_err(|e| format!("listing ConfigMaps: {e}"))?;
    Ok(list
        .items
        .into_iter()
        .map(|cm| {
            let name = cm.metadata.name.unwrap_or_default();
            (name, cm.data.unwrap_or_default())
        })
        .collect())
}

/// Whether a spoke holds exactly `expected` among the test's ConfigMaps;
/// the difference otherwise.
async fn holds_exactly(client: &Client, expected: &Maps) -> Result<(), String> {
    let maps = spoke_maps(client).await?;
    if &maps == expected {
        Ok(())
    } else {
        Err(format!(
            "ConfigMaps differ:\n  spoke: {maps:?}\n  hub:   {expected:?}"
        ))
    }
}

/// The works that AppliedManifestWorks on a spoke record.
async fn recorded_works(client: &Client) -> Result<BTreeSet<String>, String> {
    let api: Api<AppliedManifestWork> = Api::all(client.clone());
    let list = api
        .list(&ListParams::default())
        .await
        .map_err(|e| format!("listing AppliedManifestWorks: {e}"))?;
    Ok(list.items.into_iter().map(|a| a.spec.work_name).collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_kills_of_hub_agents_and_spoke_api_servers_lose_and_leak_nothing() {
    let seed = match std::env::var("FERRY_CHAOS_SEED") {
        Ok(text) => text.parse().expect("FERRY_CHAOS_SEED is a u64"),
        Err(_) => rand::random::<u64>(),
    };
    let min_updates = match std::env::var("FERRY_CHAOS_UPDATES") {
        Ok(text) => text.parse().expect("FERRY_CHAOS_UPDATES is a count"),
        Err(_) => MIN_UPDATES,
    };
    println!("chaos: seed {seed} (replay with FERRY_CHAOS_SEED={seed})");
    let mut options = FleetOptions::with_spokes(&CLUSTERS);
    options.heartbeat = Duration::from_secs(1);
    // Works are edited while the hub is down. Its admission webhook fails
    // closed, so with a single hub such edits would be refused; the point
    // here is what becomes of edits the API server accepted meanwhile.
    options.admission = false;
    let mut fleet = Fleet::start(options).await.expect("fleet starts");
    let started = Instant::now();

    let mut update_rng = StdRng::seed_from_u64(seed);
    let mut kill_rng = StdRng::seed_from_u64(seed.rotate_left(32) ^ 0x0063_6861_6f73);
    let mut model = Model::default();
    let chaos_enough = AtomicBool::new(false);
    let updates_done = AtomicBool::new(false);
    let hub = fleet.hub_client.clone();
    let (updates, (kills, last_kill)) = tokio::join!(
        drive_updates(
            hub.clone(),
            min_updates,
            &mut update_rng,
            &mut model,
            &chaos_enough,
            &updates_done
        ),
        drive_kills(&mut fleet, &mut kill_rng, &chaos_enough, &updates_done),
    );
    let all_up = Instant::now();
    println!("chaos: updates {updates:?}, kills {kills:?}");

    // (a) every remaining work is applied at its current generation, and
    // (b) every deleted work is gone from the hub.
    for (cluster, name) in model.live.keys() {
        let api: Api<ManifestWork> = Api::namespaced(hub.clone(), cluster);
        wait_applied(&api, name)
            .await
            .unwrap_or_else(|e| panic!("seed {seed}: work {cluster}/{name}: {e}"));
    }
    for (cluster, name) in &model.deleted {
        let api: Api<ManifestWork> = Api::namespaced(hub.clone(), cluster);
        let what = format!("deleted work {cluster}/{name} gone from the hub");
        wait_deleted(&api, name, &what, APPLY_TIMEOUT)
            .await
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }
    // (a) the spokes hold exactly the data of the last generation, and
    // (b) no ConfigMap and no AppliedManifestWork outlives its work.
    for cluster in CLUSTERS {
        let client = fleet.spoke(cluster).client.clone();
        let expected_maps = model.expected_maps(cluster);
        let expected_works: BTreeSet<String> = model.works_in(cluster).into_iter().collect();
        let what = format!("seed {seed}: spoke {cluster} holding exactly the last generation");
        eventually(&what, APPLY_TIMEOUT, || {
            let client = client.clone();
            let expected_maps = &expected_maps;
            let expected_works = &expected_works;
            async move {
                holds_exactly(&client, expected_maps).await?;
                let recorded = recorded_works(&client).await?;
                if &recorded != expected_works {
                    return Err(format!(
                        "AppliedManifestWorks record {recorded:?}, works are {expected_works:?}"
                    ));
                }
                Ok(())
            }
        })
        .await;
    }
    let converged = all_up.elapsed();

    // (d) the agents' watches survived their API servers going away: drift
    // on the spokes is corrected, and resync (an hour) cannot be what does it.
    for cluster in CLUSTERS {
        let client = fleet.spoke(cluster).client.clone();
        let expected_maps = model.expected_maps(cluster);
        let api: Api<ConfigMap> = Api::namespaced(client.clone(), NAMESPACE);
        let mut names = expected_maps.keys();
        if let Some((name, data)) = names.next().map(|n| (n, &expected_maps[n])) {
            let key = data.keys().next().expect("every map has data");
            let patch = json!({"data": {key: "drifted"}});
            api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .unwrap_or_else(|e| panic!("drifting {cluster}/{name}: {e}"));
        }
        if let Some(name) = names.next() {
            api.delete(name, &DeleteParams::default())
                .await
                .unwrap_or_else(|e| panic!("deleting {cluster}/{name}: {e}"));
        }
        let what = format!("seed {seed}: drift on spoke {cluster} corrected");
        eventually(&what, APPLY_TIMEOUT, || {
            let client = client.clone();
            let expected_maps = &expected_maps;
            async move { holds_exactly(&client, expected_maps).await }
        })
        .await;
    }

    // (c) every ManagedCluster shows a connected, current session: one
    // served by a replica whose Lease vouches for it now that everything is
    // back.
    let clusters: Api<ManagedCluster> = Api::all(hub.clone());
    let leases: Api<Lease> = Api::namespaced(hub.clone(), "default");
    for cluster in CLUSTERS {
        let live_session = |c: &ManagedCluster| {
            c.status.as_ref().is_some_and(|s| {
                s.connected
                    && s.agent_version == env!("CARGO_PKG_VERSION")
                    && !s.session_id.is_empty()
                    && !s.served_by.is_empty()
                    && s.disconnect_reason.is_none()
            })
        };
        let live = wait_until(
            &clusters,
            cluster,
            "connected with a current session",
            APPLY_TIMEOUT,
            live_session,
        )
        .await
        .unwrap_or_else(|e| panic!("seed {seed}: ManagedCluster {cluster}: {e}"));
        let replica = live.status.map(|s| s.served_by).unwrap_or_default();
        let lease = leases
            .get(&lease_name(&replica))
            .await
            .unwrap_or_else(|e| panic!("seed {seed}: the Lease of replica {replica}: {e}"));
        assert!(
            vouches_at(&lease, Timestamp::now()),
            "seed {seed}: ManagedCluster {cluster} names replica {replica}, whose Lease has lapsed"
        );
    }

    println!(
        "chaos: seed {seed}: {} updates ({} creates, {} edits, {} manifests added, {} removed, \
         {} works deleted); kills: hub {}, agent {}, spoke control plane {}; total {:.1} s; \
         converged {:.1} s after everything was back up, {:.1} s after the last kill",
        updates.total(),
        updates.creates,
        updates.edits,
        updates.adds,
        updates.removes,
        updates.deletes,
        kills.hub,
        kills.agent,
        kills.control_plane,
        started.elapsed().as_secs_f64(),
        converged.as_secs_f64(),
        (all_up + converged - last_kill).as_secs_f64(),
    );
    fleet.stop().await;
}
