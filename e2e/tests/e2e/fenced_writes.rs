//! A leader that decided from an older replica set writes nothing (issue
//! 48): every write the replica-set controller makes to a replica set (its
//! status, the rollback record, the deletion budget's window) carries the
//! resourceVersion the decision was made from, and a decision that recorded
//! nothing first checks it (writing nothing) before its first work write.
//! Here on a real API server: the "new leader" writes a status; the "old
//! leader", holding the object as it read it before, is refused each of
//! those writes as superseded, and the new leader's status stands.

use ferry_api::replica_set::{ManifestWorkReplicaSet, ManifestWorkReplicaSetStatus};
use ferry_e2e::harness::controlplane::{ControlPlane, ControlPlaneOptions};
use ferry_e2e::helpers::work_helpers::config_map;
use ferry_fleet_semantics::deletion_budget::{Verdict, Window};
use ferry_hub::crds::install_crds;
use ferry_hub::replica_set::budget::record_window;
use ferry_hub::replica_set::error::ReplicaSetError;
use ferry_hub::replica_set::status::{fence, write_status};
use kube::api::{Api, PostParams};
use serde_json::json;

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
    superseded(record_window(&admin, &old, &window).await);
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
