//! Two teams' replica sets of one name write works of one name in every
//! cluster namespace they share (issue 48): the name belongs, on every
//! cluster, to the older replica set. Run as the tenants would (impersonated
//! users with only the README's tenant rights, each namespace bound to
//! `global`), on two spokes:
//!
//! - team A's `app` is placed on `env=prod` clusters, only spoke-a so far;
//! - team B then creates its own `app` on every cluster: before, it took the
//!   name on spoke-b (no work was there yet), and team A was refused there
//!   once spoke-b joined `prod`; now team B gets no work, and both replica
//!   sets say so in `NameConflict` without naming the other's namespace;
//! - spoke-b joins `prod`: team A's `app` reaches it.

use ferry_api::contract::REPLICA_SET_LABEL;
use ferry_api::manifest_work::{Condition, ManifestWork};
use ferry_api::replica_set::ManifestWorkReplicaSet;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::placement_helpers::label_cluster;
use ferry_e2e::helpers::tenant_rbac::tenant;
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{APPLY_TIMEOUT, config_map};
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

const SPOKES: [&str; 2] = ["spoke-a", "spoke-b"];
const TEAM_A: &str = "team-a";
const TEAM_B: &str = "team-b";

/// Creates replica set `app` in `team`'s namespace as `client`, on
/// `placement`, with one ConfigMap holding the team's name.
async fn create_app(client: &Client, team: &str, placement: &str) {
    let rs: ManifestWorkReplicaSet = serde_json::from_value(json!({
        "apiVersion": "work.ferry.dev/v1alpha1",
        "kind": "ManifestWorkReplicaSet",
        "metadata": {"name": "app", "namespace": team},
        "spec": {
            "manifestWorkTemplate": {"workload": {"manifests": [
                config_map("default", &format!("app-{team}"), json!({"team": team}))]}},
            "placementRefs": [{"name": placement, "rolloutStrategy": {"type": "All"}}],
        },
    }))
    .expect("replica set");
    Api::<ManifestWorkReplicaSet>::namespaced(client.clone(), team)
        .create(&PostParams::default(), &rs)
        .await
        .unwrap_or_else(|e| panic!("{team} creates its replica set: {e}"));
}

fn name_conflict(rs: &ManifestWorkReplicaSet) -> Option<&Condition> {
    rs.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == "NameConflict")
}

/// The replica set team owner label of `work`.
fn owner(work: &ManifestWork) -> Option<String> {
    work.labels().get(REPLICA_SET_LABEL).cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_replica_set_of_the_same_name_cannot_squat_it_on_a_cluster_that_joins_later() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&SPOKES))
        .await
        .expect("fleet starts");
    let hub = fleet.hub_client.clone();
    label_cluster(&hub, "spoke-a", json!({"env": "prod"})).await;
    let prod = json!({"predicates": [{"requiredClusterSelector":
        {"labelSelector": {"matchLabels": {"env": "prod"}}}}]});
    let team_a = tenant(&fleet, TEAM_A, "prod", prod).await;
    create_app(&team_a, TEAM_A, "prod").await;
    let on_a: Api<ManifestWork> = Api::namespaced(hub.clone(), "spoke-a");
    wait_until(
        &on_a,
        "app",
        "team A's work on spoke-a",
        APPLY_TIMEOUT,
        |w| owner(w).as_deref() == Some("team-a.app"),
    )
    .await
    .expect("team A places app on spoke-a");

    // Team B's app, newer, on every cluster.
    let team_b = tenant(&fleet, TEAM_B, "all", json!({})).await;
    create_app(&team_b, TEAM_B, "all").await;
    let b_sets = Api::<ManifestWorkReplicaSet>::namespaced(team_b.clone(), TEAM_B);
    let told = wait_until(&b_sets, "app", "team B told", APPLY_TIMEOUT, |rs| {
        name_conflict(rs).is_some()
    })
    .await
    .expect("team B's replica set says why");
    let told = name_conflict(&told).expect("condition");
    assert_eq!(
        (told.status.as_str(), told.reason.as_str()),
        ("True", "NameHeldByOlderReplicaSet")
    );
    assert!(!told.message.contains(TEAM_A), "{}", told.message);
    // The status follows the writes: no work of team B on spoke-b.
    let on_b: Api<ManifestWork> = Api::namespaced(hub.clone(), "spoke-b");
    assert!(
        on_b.get_opt("app").await.expect("read").is_none(),
        "team B squatted the name on spoke-b"
    );
    let a_sets = Api::<ManifestWorkReplicaSet>::namespaced(team_a.clone(), TEAM_A);
    let holder = wait_until(&a_sets, "app", "team A told", APPLY_TIMEOUT, |rs| {
        name_conflict(rs).is_some()
    })
    .await
    .expect("team A's replica set says so too");
    assert_eq!(
        name_conflict(&holder).map(|c| c.reason.as_str()),
        Some("NewerReplicaSetRefused")
    );

    // spoke-b joins prod: team A's app reaches it.
    label_cluster(&hub, "spoke-b", json!({"env": "prod"})).await;
    wait_until(
        &on_b,
        "app",
        "team A's work on spoke-b",
        APPLY_TIMEOUT,
        |w| owner(w).as_deref() == Some("team-a.app"),
    )
    .await
    .expect("team A places app on the cluster that joined");
    fleet.stop().await;
}
