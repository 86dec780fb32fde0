//! What a replica set removes, and who decides (issue 49). Removals the
//! author did not ask for (a fleet-wide relabel) stop at the deletion
//! budget and stay held, whatever the clock, until someone with the platform
//! role releases them under their own name: the owning team, who may edit
//! the replica set, cannot. Removals the author's own spec asks for (its
//! `placementRefs` switched to another Placement) go at the rollout
//! strategy's pace, with nothing held. Four clusters without agents: works
//! for them are written, never applied, so a deleted work stays visible
//! with its deletion timestamp.

use std::collections::BTreeMap;

use ferry_api::contract::{
    CONFIRM_EMPTY_DECISIONS_ANNOTATION, RELEASE_DELETIONS_ANNOTATION, UNREACHABLE_TAINT,
};
use ferry_api::managed_cluster::{ManagedCluster, ManagedClusterSpec};
use ferry_api::manifest_work::{Condition, ManifestWork};
use ferry_api::placement::Placement;
use ferry_api::replica_set::ManifestWorkReplicaSet;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::admission::{refusal, until_refused_by};
use ferry_e2e::helpers::namespaces::create_namespace;
use ferry_e2e::helpers::placement_helpers::create_placement;
use ferry_e2e::helpers::tenant_rbac::grant_work_resources;
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{APPLY_TIMEOUT, config_map};
use ferry_semantics::contract::DELETIONS_WAITING;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

const TEAM: &str = "team";
const APP: &str = "app";
/// Clusters without agents.
const FLEET: [&str; 4] = ["c1", "c2", "c3", "c4"];
/// The owning team: may do anything to its replica sets.
const TENANT: &str = "team-bob";
/// The platform role: may also release held deletions.
const PLATFORM: &str = "platform-alice";
/// The policy that keeps releases to the platform role.
const RELEASE_POLICY: &str = "deletion-releases.work.ferry.dev";

/// The four clusters, labelled env=prod and ring=`ring` by index (c1, c2:
/// ring a; c3, c4: ring b), and TEAM's namespace.
async fn four_clusters(hub: &Client) {
    create_namespace(hub, TEAM).await;
    let clusters: Api<ManagedCluster> = Api::all(hub.clone());
    for (i, name) in FLEET.iter().enumerate() {
        create_namespace(hub, name).await;
        let mut cluster = ManagedCluster::new(name, ManagedClusterSpec::default());
        let ring = if i < 2 { "a" } else { "b" };
        cluster.metadata.labels = Some(BTreeMap::from([
            ("env".into(), "prod".into()),
            ("ring".into(), ring.into()),
        ]));
        clusters
            .create(&PostParams::default(), &cluster)
            .await
            .expect("create ManagedCluster");
    }
}

async fn placement(hub: &Client, name: &str, labels: serde_json::Value) {
    create_placement(
        hub,
        TEAM,
        name,
        json!({
            "predicates": [{"requiredClusterSelector": {"labelSelector": {"matchLabels": labels}}}],
            "tolerations": [{"key": UNREACHABLE_TAINT, "operator": "Exists"}],
        }),
    )
    .await;
}

async fn create_replica_set(hub: &Client, placement: &str) {
    let rs: ManifestWorkReplicaSet = serde_json::from_value(json!({
        "apiVersion": "work.ferry.dev/v1alpha1",
        "kind": "ManifestWorkReplicaSet",
        "metadata": {"name": APP, "namespace": TEAM},
        "spec": {
            "manifestWorkTemplate": {"workload": {"manifests": [
                config_map("default", APP, json!({"from": "budget"})),
            ]}},
            "placementRefs": [{"name": placement, "rolloutStrategy": {"type": "All"}}],
        },
    }))
    .expect("replica set");
    Api::<ManifestWorkReplicaSet>::namespaced(hub.clone(), TEAM)
        .create(&PostParams::default(), &rs)
        .await
        .expect("create ManifestWorkReplicaSet");
}

fn condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// The clusters whose work of APP is there and not being deleted.
async fn live_works(hub: &Client) -> Vec<String> {
    let mut live = Vec::new();
    for name in FLEET {
        let work = Api::<ManifestWork>::namespaced(hub.clone(), name)
            .get_opt(APP)
            .await
            .expect("read work");
        if work.is_some_and(|w| w.metadata.deletion_timestamp.is_none()) {
            live.push(name.to_string());
        }
    }
    live
}

async fn waits_for_works(sets: &Api<ManifestWorkReplicaSet>, count: i32) {
    wait_until(sets, APP, "its works", APPLY_TIMEOUT, |rs| {
        rs.status.as_ref().is_some_and(|s| s.summary.total == count)
    })
    .await
    .expect("every chosen cluster gets a work");
}

/// Sets the release annotation to `value` as `client`.
async fn release(client: &Client, value: &str) -> Result<(), String> {
    Api::<ManifestWorkReplicaSet>::namespaced(client.clone(), TEAM)
        .patch(
            APP,
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {RELEASE_DELETIONS_ANNOTATION: value}}}),
            ),
        )
        .await
        .map(|_| ())
        .map_err(refusal)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_wide_relabel_is_held_past_the_budget_until_the_platform_role_releases_it() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&[]))
        .await
        .expect("fleet starts");
    let hub = fleet.hub_client.clone();
    four_clusters(&hub).await;
    placement(&hub, "prod", json!({"env": "prod"})).await;
    create_replica_set(&hub, "prod").await;
    let sets: Api<ManifestWorkReplicaSet> = Api::namespaced(hub.clone(), TEAM);
    waits_for_works(&sets, 4).await;

    // The user confirms an empty placement; every cluster is relabelled.
    let placements: Api<Placement> = Api::namespaced(hub.clone(), TEAM);
    placements
        .patch(
            "prod",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {CONFIRM_EMPTY_DECISIONS_ANNOTATION: "true"}}}),
            ),
        )
        .await
        .expect("confirm empty decisions");
    let clusters: Api<ManagedCluster> = Api::all(hub.clone());
    for name in FLEET {
        clusters
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"env": "dev"}}})),
            )
            .await
            .expect("relabel");
    }
    // The budget (max(1, 25% of 4) = 1) lets one go; the status names the
    // three held.
    let held = wait_until(&sets, APP, "deletions held", APPLY_TIMEOUT, |rs| {
        rs.status.as_ref().is_some_and(|s| {
            s.deletion_budget
                .as_ref()
                .is_some_and(|b| b.deleted == 1 && b.waiting == 3)
                && condition(&s.conditions, DELETIONS_WAITING).is_some_and(|c| c.status == "True")
        })
    })
    .await
    .expect("the replica set reports the deletions held");
    let status = held.status.expect("status");
    let message = condition(&status.conditions, DELETIONS_WAITING)
        .map(|c| c.message.clone())
        .unwrap_or_default();
    println!("held: {message}");
    assert!(
        message.starts_with("3 deletions held, first 3: "),
        "{message}"
    );
    assert!(
        message.contains(RELEASE_DELETIONS_ANNOTATION) && message.contains("platform role"),
        "{message}"
    );
    let live = live_works(&hub).await;
    assert_eq!(live.len(), 3, "more than the budget was deleted: {live:?}");
    assert_eq!(
        live,
        status.deletion_budget.expect("budget").waiting_clusters
    );

    // The owning team may edit its replica set, not release what it holds.
    grant_work_resources(
        &hub,
        TEAM,
        "owners",
        TENANT,
        &["manifestworkreplicasets", "placements"],
    )
    .await;
    grant_work_resources(
        &hub,
        TEAM,
        "platform",
        PLATFORM,
        &[
            "manifestworkreplicasets",
            "manifestworkreplicasets/release-deletions",
        ],
    )
    .await;
    let tenant = fleet.hub.client_as(TENANT).await.expect("tenant client");
    let refused = until_refused_by(RELEASE_POLICY, APPLY_TIMEOUT, || {
        release(&tenant, "team-bob: let them go")
    })
    .await
    .expect_err("the owning team cannot release");
    println!("tenant: {refused}");
    assert!(refused.contains("platform role"), "{refused}");
    // The platform role releases under its own name, and only so.
    let platform = fleet
        .hub
        .client_as(PLATFORM)
        .await
        .expect("platform client");
    let forged = release(&platform, "team-bob: let them go")
        .await
        .expect_err("a release in another's name is refused");
    assert!(
        forged.contains(RELEASE_POLICY) && forged.contains("platform-alice:"),
        "{forged}"
    );
    release(&platform, "platform-alice: the relabel is wanted")
        .await
        .expect("the platform role releases");

    // Released: the rest go, and the status says who released how many.
    wait_until(&sets, APP, "released", APPLY_TIMEOUT, |rs| {
        rs.status.as_ref().is_some_and(|s| {
            condition(&s.conditions, DELETIONS_WAITING).is_none()
                && s.deletion_budget.as_ref().is_some_and(|b| {
                    b.waiting == 0
                        && b.last_release.as_ref().is_some_and(|r| {
                            r.value == "platform-alice: the relabel is wanted" && r.deleted == 3
                        })
                })
        })
    })
    .await
    .expect("the status records the release");
    assert_eq!(live_works(&hub).await, Vec::<String>::new());
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switching_placement_refs_to_another_placement_moves_at_the_rollout_pace() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&[]))
        .await
        .expect("fleet starts");
    let hub = fleet.hub_client.clone();
    four_clusters(&hub).await;
    placement(&hub, "ring-a", json!({"ring": "a"})).await;
    placement(&hub, "ring-b", json!({"ring": "b"})).await;
    create_replica_set(&hub, "ring-a").await;
    let sets: Api<ManifestWorkReplicaSet> = Api::namespaced(hub.clone(), TEAM);
    waits_for_works(&sets, 2).await;
    assert_eq!(live_works(&hub).await, ["c1", "c2"]);

    // The author moves the replica set to ring b: its own intent, at its
    // strategy's pace (All: at once), with no budget in the way (which
    // would let one of the two go per window and hold the other).
    sets.patch(
        APP,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"placementRefs": [
            {"name": "ring-b", "rolloutStrategy": {"type": "All"}}]}})),
    )
    .await
    .expect("switch placementRefs");
    for name in ["c1", "c2"] {
        let works: Api<ManifestWork> = Api::namespaced(hub.clone(), name);
        let going = kube::runtime::wait::await_condition(works, APP, |w: Option<&ManifestWork>| {
            w.is_none_or(|w| w.metadata.deletion_timestamp.is_some())
        });
        tokio::time::timeout(APPLY_TIMEOUT, going)
            .await
            .unwrap_or_else(|_| panic!("the work of {name} goes with the switch"))
            .unwrap_or_else(|e| panic!("watching the work of {name}: {e}"));
    }
    for name in ["c3", "c4"] {
        let works: Api<ManifestWork> = Api::namespaced(hub.clone(), name);
        wait_until(&works, APP, "written", APPLY_TIMEOUT, |_| true)
            .await
            .unwrap_or_else(|e| panic!("ring b's {name} gets its work: {e}"));
    }
    assert_eq!(live_works(&hub).await, ["c3", "c4"]);
    let moved = sets.get(APP).await.expect("read");
    assert!(
        moved
            .status
            .as_ref()
            .is_none_or(|s| condition(&s.conditions, DELETIONS_WAITING).is_none()),
        "nothing is held: {:?}",
        moved.status
    );
    let budget = moved.status.and_then(|s| s.deletion_budget);
    assert!(
        budget
            .as_ref()
            .is_none_or(|b| b.deleted == 0 && b.waiting == 0),
        "an intended removal is not counted against the budget: {budget:?}"
    );
    fleet.stop().await;
}

/// OCM's "label flaps and ends out" scenario, on two real spokes: the
/// budget (1 of 2 works) lets spoke-a's work go when its label goes, and
/// gets that share back when spoke-a returns with a new work, so the label
/// leaving again removes it again rather than holding it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_whose_label_flaps_and_ends_out_loses_its_work() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["spoke-a", "spoke-b"]))
        .await
        .expect("fleet starts");
    let hub = fleet.hub_client.clone();
    create_namespace(&hub, TEAM).await;
    let clusters: Api<ManagedCluster> = Api::all(hub.clone());
    let label = |env: &'static str| {
        let clusters = clusters.clone();
        async move {
            clusters
                .patch(
                    "spoke-a",
                    &PatchParams::default(),
                    &Patch::Merge(json!({"metadata": {"labels": {"env": env}}})),
                )
                .await
                .expect("label spoke-a");
        }
    };
    label("prod").await;
    clusters
        .patch(
            "spoke-b",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"env": "prod"}}})),
        )
        .await
        .expect("label spoke-b");
    placement(&hub, "prod", json!({"env": "prod"})).await;
    create_replica_set(&hub, "prod").await;
    let sets: Api<ManifestWorkReplicaSet> = Api::namespaced(hub.clone(), TEAM);
    let works: Api<ManifestWork> = Api::namespaced(hub.clone(), "spoke-a");
    let gone = || async {
        let absent =
            kube::runtime::wait::await_condition(works.clone(), APP, |w: Option<&ManifestWork>| {
                w.is_none()
            });
        tokio::time::timeout(APPLY_TIMEOUT, absent)
            .await
            .expect("spoke-a's work goes")
            .expect("watch spoke-a's work");
    };
    for round in ["first", "second"] {
        wait_until(&works, APP, "spoke-a's work", APPLY_TIMEOUT, |_| true)
            .await
            .unwrap_or_else(|e| panic!("spoke-a gets its work ({round} time): {e}"));
        label("dev").await;
        gone().await;
        if round == "first" {
            label("prod").await;
        }
    }
    let status = sets.get(APP).await.expect("read").status.expect("status");
    assert!(
        condition(&status.conditions, DELETIONS_WAITING).is_none(),
        "nothing held: {status:?}"
    );
    let budget = status.deletion_budget.expect("the window");
    assert_eq!(
        (budget.deleted, budget.removed_clusters.as_slice()),
        (1, &["spoke-a".to_string()][..]),
        "one removal counted for two: {budget:?}"
    );
    fleet.stop().await;
}

/// The issue's own case at 100 clusters (no agents): a selector typo in
/// the Placement that matches 1 of 100 clusters removes the budget's 25
/// works and holds the other 74 (that the clock does not release them is
/// `fleet-semantics`' unit and property tests).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selector_typo_matching_1_of_100_clusters_removes_only_the_budget() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&[]))
        .await
        .expect("fleet starts");
    let hub = fleet.hub_client.clone();
    create_namespace(&hub, TEAM).await;
    let clusters: Api<ManagedCluster> = Api::all(hub.clone());
    let names: Vec<String> = (0..100).map(|i| format!("fleet-{i:03}")).collect();
    for name in &names {
        create_namespace(&hub, name).await;
        let mut cluster = ManagedCluster::new(name, ManagedClusterSpec::default());
        cluster.metadata.labels = Some(BTreeMap::from([
            ("env".into(), "prod".into()),
            ("site".into(), name.clone()),
        ]));
        clusters
            .create(&PostParams::default(), &cluster)
            .await
            .expect("create ManagedCluster");
    }
    placement(&hub, "prod", json!({"env": "prod"})).await;
    create_replica_set(&hub, "prod").await;
    let sets: Api<ManifestWorkReplicaSet> = Api::namespaced(hub.clone(), TEAM);
    waits_for_works(&sets, 100).await;

    // The typo: a selector that matches one cluster.
    Api::<Placement>::namespaced(hub.clone(), TEAM)
        .patch(
            "prod",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"predicates": [{"requiredClusterSelector": {
                "labelSelector": {"matchLabels": {"env": "prod", "site": "fleet-000"}}}}]}})),
        )
        .await
        .expect("the typo");
    let held = wait_until(&sets, APP, "74 held", APPLY_TIMEOUT, |rs| {
        rs.status.as_ref().is_some_and(|s| {
            s.deletion_budget
                .as_ref()
                .is_some_and(|b| b.deleted == 25 && b.waiting == 74)
        })
    })
    .await
    .expect("the budget holds the rest");
    // Recorded before carried out: the 25 (taken by name, fleet-001 to
    // fleet-025) are being deleted once their deletions land.
    for name in &names[1..26] {
        let works: Api<ManifestWork> = Api::namespaced(hub.clone(), name);
        let going = kube::runtime::wait::await_condition(works, APP, |w: Option<&ManifestWork>| {
            w.is_none_or(|w| w.metadata.deletion_timestamp.is_some())
        });
        tokio::time::timeout(APPLY_TIMEOUT, going)
            .await
            .unwrap_or_else(|_| panic!("the work of {name} goes within the budget"))
            .unwrap_or_else(|e| panic!("watching the work of {name}: {e}"));
    }
    let mut live = 0;
    for name in &names {
        let work = Api::<ManifestWork>::namespaced(hub.clone(), name)
            .get_opt(APP)
            .await
            .expect("read work");
        live += usize::from(work.is_some_and(|w| w.metadata.deletion_timestamp.is_none()));
    }
    println!(
        "{}",
        held.status
            .as_ref()
            .and_then(|s| condition(&s.conditions, DELETIONS_WAITING))
            .map(|c| c.message.clone())
            .unwrap_or_default()
    );
    assert_eq!(live, 75, "25 of 100 removed, no more");
    fleet.stop().await;
}
