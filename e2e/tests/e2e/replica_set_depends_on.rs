//! Replica-set `dependsOn` (issue 33) on real control planes with real
//! agents: replica set `app` depends on `db`, and is created first. The hub
//! writes no `app` work to a cluster until `db`'s work there is Available,
//! and `app`'s `DependenciesReady` condition names the waiting clusters and
//! what each waits for; `db` first places on one spoke only, so `app`
//! starts there and the other waits ("does not place on it") until `db`
//! places there too. `app`'s works carry `dependsOn` naming `db`'s work.
//! A tenant's cycle is reported on both replica sets and writes nothing; a
//! replica set naming itself is refused by the hub API server. The tenant
//! acts through impersonation with a namespaced Role, as a real one would.
//!
//! The controller's sweep is an hour here: every step is brought about by
//! the events the controller watches (the dependency's works and specs).

use std::time::Duration;

use ferry_api::manifest_work::{Condition, ManifestWork};
use ferry_api::placement::Placement;
use ferry_api::replica_set::ManifestWorkReplicaSet;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::harness::image::workspace_dir;
use ferry_e2e::helpers::placement_helpers::create_placement;
use ferry_e2e::helpers::placement_helpers::label_cluster;
use ferry_e2e::helpers::tenant_rbac::grant_work_resources;
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{APPLY_TIMEOUT, config_map, work_condition};
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};
use serde::Deserialize;
use serde_json::{Value, json};

const NAMESPACE: &str = "default";
const SPOKES: [&str; 2] = ["spoke-a", "spoke-b"];
const TENANT: &str = "tenant";

/// The replica sets of `examples/replica-set-depends-on.yaml`.
fn example_replica_sets() -> Vec<ManifestWorkReplicaSet> {
    let path = workspace_dir().join("examples/replica-set-depends-on.yaml");
    let text = std::fs::read_to_string(&path).expect("read the example");
    serde_yaml::Deserializer::from_str(&text)
        .map(|doc| ManifestWorkReplicaSet::deserialize(doc).expect("a replica set"))
        .collect()
}

#[test]
fn the_example_parses_into_a_replica_set_depending_on_another() {
    let sets = example_replica_sets();
    let names: Vec<String> = sets.iter().map(|rs| rs.name_any()).collect();
    assert_eq!(names, ["db", "app"]);
    assert!(sets[0].spec.depends_on.is_empty());
    assert_eq!(sets[1].spec.depends_on.len(), 1);
    assert_eq!(sets[1].spec.depends_on[0].name, "db");
    assert_eq!(sets[1].spec.depends_on[0].condition_type(), "Available");
}

/// Lets user `TENANT` manage replica sets in `NAMESPACE`, nothing more.
async fn grant_tenant_replica_sets(admin: &Client) {
    grant_work_resources(
        admin,
        NAMESPACE,
        "replica-sets",
        TENANT,
        &["manifestworkreplicasets"],
    )
    .await;
}

fn replica_set(name: &str, placement: &str, depends_on: &[&str]) -> ManifestWorkReplicaSet {
    let depends_on: Vec<Value> = depends_on.iter().map(|d| json!({"name": d})).collect();
    serde_json::from_value(json!({
        "apiVersion": "work.ferry.dev/v1alpha1",
        "kind": "ManifestWorkReplicaSet",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "manifestWorkTemplate": {"workload": {"manifests": [
                config_map(NAMESPACE, name, json!({"from": name}))]}},
            "placementRefs": [{"name": placement, "rolloutStrategy": {"type": "All"}}],
            "dependsOn": depends_on,
        },
    }))
    .expect("replica set")
}

/// Creates `rs` as the tenant (whose grant is in effect: see
/// `grant_work_resources`).
async fn create_as_tenant(
    sets: &Api<ManifestWorkReplicaSet>,
    rs: &ManifestWorkReplicaSet,
) -> Result<(), kube::Error> {
    sets.create(&PostParams::default(), rs).await.map(|_| ())
}

fn dependencies_ready(rs: &ManifestWorkReplicaSet) -> Option<&Condition> {
    rs.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == "DependenciesReady")
}

/// Whether `rs` says it waits (status False) with `reason`, and its
/// message holds every one of `naming`.
fn waits(rs: &ManifestWorkReplicaSet, reason: &str, naming: &[&str]) -> bool {
    dependencies_ready(rs).is_some_and(|c| {
        c.status == "False" && c.reason == reason && naming.iter().all(|n| c.message.contains(n))
    })
}

/// The work replica set `name` has on `spoke`, if any.
async fn work_of(hub: &Client, spoke: &str, name: &str) -> Option<ManifestWork> {
    Api::<ManifestWork>::namespaced(hub.clone(), spoke)
        .get_opt(name)
        .await
        .expect("read work")
}

async fn wait_selected(hub: &Client, placement: &str, count: u32) {
    let placements: Api<Placement> = Api::namespaced(hub.clone(), NAMESPACE);
    wait_until(&placements, placement, "its clusters", APPLY_TIMEOUT, |p| {
        p.status
            .as_ref()
            .is_some_and(|s| u32::try_from(s.number_of_selected_clusters) == Ok(count))
    })
    .await
    .unwrap_or_else(|e| panic!("placement {placement} selects {count}: {e}"));
}

/// Waits until `name`'s work on `spoke` is Available, as its agent reports.
async fn wait_available(hub: &Client, spoke: &str, name: &str) -> ManifestWork {
    let works: Api<ManifestWork> = Api::namespaced(hub.clone(), spoke);
    wait_until(&works, name, "Available", APPLY_TIMEOUT, |w| {
        work_condition(w, "Available").is_some_and(|c| c.status == "True")
    })
    .await
    .unwrap_or_else(|e| panic!("{name} Available on {spoke}: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn app_starts_on_each_cluster_only_once_db_is_available_there() {
    let fleet = Fleet::start(FleetOptions {
        controller_sweep: Duration::from_secs(3600),
        ..FleetOptions::with_spokes(&SPOKES)
    })
    .await
    .expect("fleet starts");
    let hub = fleet.hub_client.clone();
    grant_tenant_replica_sets(&hub).await;
    let tenant = fleet.hub.client_as(TENANT).await.expect("tenant client");
    let sets: Api<ManifestWorkReplicaSet> = Api::namespaced(tenant, NAMESPACE);
    let admin_sets: Api<ManifestWorkReplicaSet> = Api::namespaced(hub.clone(), NAMESPACE);

    // `both` chooses every spoke; `db-tier` those labelled tier=db, at
    // first spoke-a only.
    label_cluster(&hub, "spoke-a", json!({"tier": "db"})).await;
    create_placement(&hub, NAMESPACE, "both", json!({})).await;
    create_placement(
        &hub,
        NAMESPACE,
        "db-tier",
        json!({"predicates": [{"requiredClusterSelector": {"labelSelector": {"matchLabels": {"tier": "db"}}}}]}),
    )
    .await;
    wait_selected(&hub, "both", 2).await;
    wait_selected(&hub, "db-tier", 1).await;

    // app first: db does not exist, so no cluster starts.
    create_as_tenant(&sets, &replica_set("app", "both", &["db"]))
        .await
        .expect("the tenant creates app");
    let missing = wait_until(
        &admin_sets,
        "app",
        "app waits for db",
        APPLY_TIMEOUT,
        |rs| {
            waits(
                rs,
                "DependencyMissing",
                &[
                    "2 clusters wait",
                    "spoke-a (replica set db does not exist)",
                    "spoke-b (replica set db does not exist)",
                ],
            )
        },
    )
    .await
    .expect("app names both clusters as waiting");
    println!("{:?}", dependencies_ready(&missing));
    for spoke in SPOKES {
        assert!(
            work_of(&hub, spoke, "app").await.is_none(),
            "no app work on {spoke} before db"
        );
    }

    // db places on spoke-a only: app starts there once db's work is
    // Available, and spoke-b waits, saying why.
    create_as_tenant(&sets, &replica_set("db", "db-tier", &[]))
        .await
        .expect("the tenant creates db");
    let db_a = wait_available(&hub, "spoke-a", "db").await;
    let one_waits = wait_until(&admin_sets, "app", "spoke-b waits", APPLY_TIMEOUT, |rs| {
        waits(
            rs,
            "WaitingForDependency",
            &[
                "1 clusters wait",
                "spoke-b (replica set db does not place on it)",
            ],
        ) && rs.status.as_ref().is_some_and(|s| s.summary.total == 1)
    })
    .await
    .expect("app starts on spoke-a and holds spoke-b");
    println!("{:?}", dependencies_ready(&one_waits));
    let app_a = work_of(&hub, "spoke-a", "app")
        .await
        .expect("app's work on spoke-a");
    // The agent keeps the order on the cluster: app's work names db's.
    let named: Vec<(&str, &str)> = app_a
        .spec
        .depends_on
        .iter()
        .map(|d| (d.name.as_str(), d.condition_type()))
        .collect();
    assert_eq!(named, [("db", "Available")]);
    assert_eq!(db_a.name_any(), "db", "db's work on spoke-a has that name");
    assert!(
        work_of(&hub, "spoke-b", "app").await.is_none(),
        "no app work on spoke-b while db does not place there"
    );
    wait_available(&hub, "spoke-a", "app").await;

    // db places on spoke-b too: app starts there, brought back by db's work.
    label_cluster(&hub, "spoke-b", json!({"tier": "db"})).await;
    wait_available(&hub, "spoke-b", "db").await;
    let ready = wait_until(&admin_sets, "app", "app everywhere", APPLY_TIMEOUT, |rs| {
        dependencies_ready(rs).is_some_and(|c| c.status == "True")
            && rs.status.as_ref().is_some_and(|s| s.summary.total == 2)
    })
    .await
    .expect("app starts on spoke-b once db is Available there");
    println!("{:?}", dependencies_ready(&ready));
    wait_available(&hub, "spoke-b", "app").await;
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_cycle_is_reported_on_each_and_writes_nothing() {
    let fleet = Fleet::start(FleetOptions {
        controller_sweep: Duration::from_secs(3600),
        ..FleetOptions::with_spokes(&SPOKES[..1])
    })
    .await
    .expect("fleet starts");
    let hub = fleet.hub_client.clone();
    grant_tenant_replica_sets(&hub).await;
    let tenant = fleet.hub.client_as(TENANT).await.expect("tenant client");
    let sets: Api<ManifestWorkReplicaSet> = Api::namespaced(tenant, NAMESPACE);
    let admin_sets: Api<ManifestWorkReplicaSet> = Api::namespaced(hub.clone(), NAMESPACE);
    create_placement(&hub, NAMESPACE, "both", json!({})).await;
    wait_selected(&hub, "both", 1).await;

    // Naming itself is refused by the API server (the CRD's rule).
    let error = create_as_tenant(&sets, &replica_set("narcissus", "both", &["narcissus"]))
        .await
        .expect_err("a replica set depending on itself is refused");
    assert!(
        error
            .to_string()
            .contains("a replica set cannot depend on itself (narcissus)"),
        "{error}"
    );

    // x then y, each naming the other: x, reconciled before y existed,
    // is brought back by y's creation.
    create_as_tenant(&sets, &replica_set("x", "both", &["y"]))
        .await
        .expect("create x");
    create_as_tenant(&sets, &replica_set("y", "both", &["x"]))
        .await
        .expect("create y");
    for name in ["x", "y"] {
        let rs = wait_until(&admin_sets, name, "a cycle", APPLY_TIMEOUT, |rs| {
            waits(rs, "DependencyCycle", &["replica sets x, y"])
        })
        .await
        .unwrap_or_else(|e| panic!("{name} reports the cycle: {e}"));
        println!("{name}: {:?}", dependencies_ready(&rs));
        assert!(
            work_of(&hub, SPOKES[0], name).await.is_none(),
            "{name} in a cycle writes no work"
        );
    }
    fleet.stop().await;
}
