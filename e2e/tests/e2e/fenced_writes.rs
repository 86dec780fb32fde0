//! A leader that decided from an older replica set writes nothing (issue
//! 48): every write the replica-set controller makes to a replica set (its
//! status, the rollback record, the deletion budget's window) carries the
//! resourceVersion the decision was made from, and a decision that recorded
//! nothing first checks it (writing nothing) before its first work write.
//! Here on a real API server: the "new leader" writes a status; the "old
//! leader", holding the object as it read it before, is refused each of
//! those writes as superseded, and the new leader's status stands.
//!
//! The same for the placement controller: every write of a decision object
//! it read carries the version it read it at, a new object is created
//! (never applied over one that appeared since), deletions carry the
//! version as a precondition, and the placement's status its own; an old
//! leader neither rewrites, deletes nor re-creates decisions the new one
//! wrote, nor overwrites its status.

use ferry_api::contract::{DECISION_GROUP_INDEX_LABEL, DECISION_GROUP_NAME_LABEL, PLACEMENT_LABEL};
use ferry_api::placement::{Placement, PlacementDecision, PlacementStatus};
use ferry_api::replica_set::{ManifestWorkReplicaSet, ManifestWorkReplicaSetStatus};
use ferry_e2e::harness::controlplane::{ControlPlane, ControlPlaneOptions};
use ferry_e2e::helpers::work_helpers::config_map;
use ferry_fleet_semantics::deletion_budget::{Verdict, Window};
use ferry_hub::crds::install_crds;
use ferry_hub::placement::PlacementError;
use ferry_hub::placement::act::{write_decisions, write_status as write_placement_status};
use ferry_hub::placement::decide::DecisionWrites;
use ferry_hub::replica_set::act::records::{fence, write_status};
use ferry_hub::replica_set::budget::window_record;
use ferry_hub::replica_set::error::ReplicaSetError;
use kube::api::{Api, PostParams};
use serde_json::json;
use std::collections::BTreeMap;

const NAMESPACE: &str = "default";

fn superseded<T: std::fmt::Debug>(outcome: Result<T, ReplicaSetError>) -> String {
    match outcome {
        Err(error @ ReplicaSetError::Superseded { .. }) => error.to_string(),
        other => panic!("expected the write to be refused as superseded, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_decided_from_an_older_replica_set_writes_nothing() {
    let hub = ControlPlane::start("hub", ControlPlaneOptions::default())
        .await
        .expect("control plane");
    let admin = hub.client().await.expect("admin client");
    install_crds(&admin).await.expect("CRDs");
    let sets: Api<ManifestWorkReplicaSet> = Api::namespaced(admin.clone(), NAMESPACE);
    let rs: ManifestWorkReplicaSet = serde_json::from_value(json!({
        "apiVersion": "work.ferry.dev/v1alpha1",
        "kind": "ManifestWorkReplicaSet",
        "metadata": {"name": "app", "namespace": NAMESPACE},
        "spec": {
            "manifestWorkTemplate": {"workload": {"manifests": [config_map("default", "app", json!({"v": "1"}))]}},
            "placementRefs": [{"name": "p"}],
        },
    }))
    .expect("replica set");
    let old = sets
        .create(&PostParams::default(), &rs)
        .await
        .expect("create");

    // The new leader records its decision.
    let mut theirs = ManifestWorkReplicaSetStatus::default();
    theirs.summary.total = 7;
    let version = write_status(&admin, &old, theirs.clone())
        .await
        .expect("the current leader writes")
        .expect("a change");
    let current = sets.get("app").await.expect("read");
    assert_eq!(
        current.metadata.resource_version.as_deref(),
        Some(&*version)
    );
    fence(&admin, &current)
        .await
        .expect("the current object passes the fence");
    assert_eq!(
        sets.get("app")
            .await
            .expect("read")
            .metadata
            .resource_version,
        current.metadata.resource_version,
        "the fence writes nothing"
    );

    // The old leader, resumed with the object it read before, writes
    // nothing: not its status, not a budget window, not a work (fence).
    let mut stale = ManifestWorkReplicaSetStatus::default();
    stale.summary.total = 1;
    let refused = superseded(write_status(&admin, &old, stale).await);
    println!("{refused}");
    assert!(refused.contains("default/app"), "{refused}");
    let window = Verdict {
        delete: vec!["c1".into()],
        waiting: Vec::new(),
        window: Some(Window {
            start: 1_000,
            base: 4,
            deleted: 1,
        }),
        release: None,
        removed: vec!["c1".into()],
    };
    let recorded = window_record(&old, &window).expect("a window to record");
    superseded(write_status(&admin, &old, recorded).await);
    superseded(fence(&admin, &old).await);

    let after = sets.get("app").await.expect("read");
    let status = after.status.expect("status");
    assert_eq!(status.summary.total, 7, "the new leader's status stands");
    assert!(status.deletion_budget.is_none(), "no window recorded");
    assert_eq!(
        after.metadata.resource_version,
        current.metadata.resource_version
    );
}

fn placement_superseded<T: std::fmt::Debug>(outcome: Result<T, PlacementError>) -> String {
    match outcome {
        Err(error @ PlacementError::Superseded { .. }) => error.to_string(),
        other => panic!("expected the write to be refused as superseded, got {other:?}"),
    }
}

fn labels() -> BTreeMap<String, String> {
    BTreeMap::from([
        (PLACEMENT_LABEL.to_string(), "p".to_string()),
        (DECISION_GROUP_INDEX_LABEL.to_string(), "0".to_string()),
        (DECISION_GROUP_NAME_LABEL.to_string(), String::new()),
    ])
}

fn list(object: &str, clusters: &[&str]) -> (String, Vec<String>) {
    (
        object.to_string(),
        clusters.iter().map(|c| c.to_string()).collect(),
    )
}

async fn clusters_of(decisions: &Api<PlacementDecision>, object: &str) -> Vec<String> {
    decisions
        .get(object)
        .await
        .expect("read decision")
        .cluster_names()
        .map(str::to_string)
        .collect()
}

fn version(object: &PlacementDecision) -> String {
    object.metadata.resource_version.clone().expect("version")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_placement_leader_that_decided_from_older_decisions_writes_nothing() {
    let hub = ControlPlane::start("hub", ControlPlaneOptions::default())
        .await
        .expect("control plane");
    let admin = hub.client().await.expect("admin client");
    install_crds(&admin).await.expect("CRDs");
    let placements: Api<Placement> = Api::namespaced(admin.clone(), NAMESPACE);
    let decisions: Api<PlacementDecision> = Api::namespaced(admin.clone(), NAMESPACE);
    let placement: Placement = serde_json::from_value(json!({
        "apiVersion": "cluster.ferry.dev/v1alpha1", "kind": "Placement",
        "metadata": {"name": "p", "namespace": NAMESPACE}, "spec": {},
    }))
    .expect("placement");
    let old_placement = placements
        .create(&PostParams::default(), &placement)
        .await
        .expect("create placement");
    // The first decision, as any leader writes it: created, then listed.
    let first = DecisionWrites {
        objects: vec![("p-decision-1".into(), labels())],
        lists: vec![list("p-decision-1", &["c1"])],
        ..DecisionWrites::default()
    };
    write_decisions(&admin, &old_placement, &first)
        .await
        .expect("first write");
    // What the old leader read before it paused.
    let read_before = version(&decisions.get("p-decision-1").await.expect("read"));

    // The new leader moves c1 to c2 and adds a second object.
    let newer = DecisionWrites {
        objects: vec![("p-decision-2".into(), labels())],
        lists: vec![list("p-decision-1", &["c2"]), list("p-decision-2", &["c3"])],
        versions: BTreeMap::from([("p-decision-1".to_string(), read_before.clone())]),
        ..DecisionWrites::default()
    };
    write_decisions(&admin, &old_placement, &newer)
        .await
        .expect("the current leader writes");
    let theirs = PlacementStatus {
        number_of_selected_clusters: 2,
        ..PlacementStatus::default()
    };
    write_placement_status(&admin, &old_placement, &theirs)
        .await
        .expect("the current leader writes its status");

    // The old leader, resumed with what it read before: its list, its
    // deletion, its creation and its status are all refused.
    let stale_list = DecisionWrites {
        lists: vec![list("p-decision-1", &["c1"])],
        versions: BTreeMap::from([("p-decision-1".to_string(), read_before.clone())]),
        ..DecisionWrites::default()
    };
    let refused = placement_superseded(write_decisions(&admin, &old_placement, &stale_list).await);
    println!("{refused}");
    assert!(refused.contains("default/p"), "{refused}");
    let stale_delete = DecisionWrites {
        deletes: vec!["p-decision-1".into()],
        versions: BTreeMap::from([("p-decision-1".to_string(), read_before)]),
        ..DecisionWrites::default()
    };
    placement_superseded(write_decisions(&admin, &old_placement, &stale_delete).await);
    let stale_create = DecisionWrites {
        objects: vec![("p-decision-2".into(), labels())],
        lists: vec![list("p-decision-2", &["c1"])],
        ..DecisionWrites::default()
    };
    placement_superseded(write_decisions(&admin, &old_placement, &stale_create).await);
    let stale_status = PlacementStatus {
        number_of_selected_clusters: 1,
        ..PlacementStatus::default()
    };
    placement_superseded(write_placement_status(&admin, &old_placement, &stale_status).await);

    // The new leader's decisions and status stand.
    assert_eq!(clusters_of(&decisions, "p-decision-1").await, ["c2"]);
    assert_eq!(clusters_of(&decisions, "p-decision-2").await, ["c3"]);
    let status = placements
        .get("p")
        .await
        .expect("read")
        .status
        .expect("status");
    assert_eq!(status.number_of_selected_clusters, 2);
}
