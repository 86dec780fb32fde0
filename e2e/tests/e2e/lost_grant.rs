//! A lost grant holds, and deletions pass a budget (issue 31). Deleting the
//! ManagedClusterSetBinding a replica set's placement relies on keeps the
//! last decisions, the works and the spoke objects (same UIDs) and says so
//! on the Placement; binding again changes nothing; the confirm annotation
//! lets the empty decision through. (What the deletion budget does with
//! removals is proven in `deletion_budget_on_the_hub`.)

use ferry_api::cluster_set::ManagedClusterSetBinding;
use ferry_api::contract::{CONFIRM_EMPTY_DECISIONS_ANNOTATION, GLOBAL_CLUSTER_SET};
use ferry_api::manifest_work::{Condition, ManifestWork};
use ferry_api::placement::Placement;
use ferry_api::replica_set::ManifestWorkReplicaSet;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::namespaces::create_namespace;
use ferry_e2e::helpers::placement_helpers::{bind_global, create_placement};
use ferry_e2e::helpers::wait::{wait_deleted, wait_until};
use ferry_e2e::helpers::work_helpers::{APPLY_TIMEOUT, config_map, wait_applied};
use ferry_semantics::contract::{
    NO_MANAGED_CLUSTER_SET_BINDINGS, PLACEMENT_DECISIONS_HELD, PLACEMENT_SATISFIED,
};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;

const TEAM: &str = "team";
const SPOKE: &str = "spoke-a";
const APP: &str = "app";

async fn create_replica_set(client: &Client, placement: &str) {
    let rs: ManifestWorkReplicaSet = serde_json::from_value(json!({
        "apiVersion": "work.ferry.dev/v1alpha1",
        "kind": "ManifestWorkReplicaSet",
        "metadata": {"name": APP, "namespace": TEAM},
        "spec": {
            "manifestWorkTemplate": {"workload": {"manifests": [
                config_map("default", APP, json!({"from": "lost-grant"})),
            ]}},
            "placementRefs": [{"name": placement, "rolloutStrategy": {"type": "All"}}],
        },
    }))
    .expect("replica set");
    Api::<ManifestWorkReplicaSet>::namespaced(client.clone(), TEAM)
        .create(&PostParams::default(), &rs)
        .await
        .expect("create ManifestWorkReplicaSet");
}

fn condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

fn placement_condition<'a>(p: &'a Placement, type_: &str) -> Option<&'a Condition> {
    p.status
        .as_ref()
        .and_then(|s| condition(&s.conditions, type_))
}

async fn annotate<K>(api: &Api<K>, name: &str, key: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {key: "true"}}})),
    )
    .await
    .unwrap_or_else(|e| panic!("annotate {name} {key}: {e}"));
}

/// One spoke, the `global` set bound into TEAM, a placement choosing every
/// cluster and a replica set placed by it, applied: returns the UIDs of the
/// work and of the spoke object.
async fn placed(fleet: &Fleet) -> (String, String) {
    let hub = fleet.hub_client.clone();
    create_namespace(&hub, TEAM).await;
    create_placement(&hub, TEAM, "everywhere", json!({})).await;
    create_replica_set(&hub, "everywhere").await;
    let works: Api<ManifestWork> = Api::namespaced(hub.clone(), SPOKE);
    let work = wait_applied(&works, APP)
        .await
        .expect("the generated work is applied");
    let on_spoke: Api<ConfigMap> = Api::namespaced(fleet.spoke(SPOKE).client.clone(), "default");
    let object = on_spoke.get(APP).await.expect("the object is on the spoke");
    (
        work.uid().expect("work uid"),
        object.uid().expect("object uid"),
    )
}

/// Deletes the `global` binding of TEAM and waits until the placement
/// reports the held grant.
async fn lose_the_binding(hub: &Client) -> Placement {
    Api::<ManagedClusterSetBinding>::namespaced(hub.clone(), TEAM)
        .delete(GLOBAL_CLUSTER_SET, &DeleteParams::default())
        .await
        .expect("delete the binding");
    let placements: Api<Placement> = Api::namespaced(hub.clone(), TEAM);
    wait_until(
        &placements,
        "everywhere",
        "decisions held",
        APPLY_TIMEOUT,
        |p| {
            placement_condition(p, PLACEMENT_DECISIONS_HELD)
                .is_some_and(|c| c.status == "True" && c.reason == NO_MANAGED_CLUSTER_SET_BINDINGS)
        },
    )
    .await
    .expect("the placement reports the held grant")
}

async fn uids(fleet: &Fleet) -> (Option<String>, Option<String>) {
    let works: Api<ManifestWork> = Api::namespaced(fleet.hub_client.clone(), SPOKE);
    let on_spoke: Api<ConfigMap> = Api::namespaced(fleet.spoke(SPOKE).client.clone(), "default");
    let work = works.get_opt(APP).await.expect("read work");
    let object = on_spoke.get_opt(APP).await.expect("read spoke");
    (
        work.filter(|w| w.metadata.deletion_timestamp.is_none())
            .and_then(|w| w.uid()),
        object.and_then(|o| o.uid()),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_binding_keeps_the_works_and_says_so() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&[SPOKE]))
        .await
        .expect("fleet starts");
    let hub = fleet.hub_client.clone();
    let (work_uid, object_uid) = placed(&fleet).await;

    let held = lose_the_binding(&hub).await;
    let message = placement_condition(&held, PLACEMENT_DECISIONS_HELD)
        .map(|c| c.message.clone())
        .unwrap_or_default();
    println!("held: {message}");
    assert!(
        message.contains(CONFIRM_EMPTY_DECISIONS_ANNOTATION),
        "{message}"
    );
    assert_eq!(
        held.status.as_ref().map(|s| s.number_of_selected_clusters),
        Some(1),
        "the held decisions still count"
    );
    assert_eq!(
        placement_condition(&held, PLACEMENT_SATISFIED).map(|c| c.reason.as_str()),
        Some(NO_MANAGED_CLUSTER_SET_BINDINGS)
    );
    // The replica set has seen the placement since (its status is written
    // after the placement's); then nothing of it was deleted.
    let sets: Api<ManifestWorkReplicaSet> = Api::namespaced(hub.clone(), TEAM);
    // It counts its work, and says the placement holds (where its team
    // looks, issue 49).
    let seen = wait_until(
        &sets,
        APP,
        "one work counted, the hold shown",
        APPLY_TIMEOUT,
        |rs| {
            rs.status.as_ref().is_some_and(|s| {
                s.summary.total == 1
                    && condition(&s.conditions, PLACEMENT_DECISIONS_HELD)
                        .is_some_and(|c| c.status == "True")
            })
        },
    )
    .await
    .expect("the replica set still counts its work and shows the hold");
    let shown = seen
        .status
        .as_ref()
        .and_then(|s| condition(&s.conditions, PLACEMENT_DECISIONS_HELD))
        .map(|c| c.message.clone())
        .unwrap_or_default();
    println!("on the replica set: {shown}");
    assert!(
        shown.contains("everywhere") && shown.contains(CONFIRM_EMPTY_DECISIONS_ANNOTATION),
        "{shown}"
    );
    assert_eq!(
        uids(&fleet).await,
        (Some(work_uid.clone()), Some(object_uid.clone())),
        "a lost binding deleted the work or the spoke object"
    );
    // An Event says so.
    let events = Api::<Event>::namespaced(hub.clone(), TEAM)
        .list(&ListParams::default())
        .await
        .expect("list events");
    assert!(
        events
            .items
            .iter()
            .any(|e| e.reason.as_deref() == Some("DecisionsHeld")),
        "no DecisionsHeld event: {:?}",
        events.items.iter().map(|e| &e.reason).collect::<Vec<_>>()
    );

    // The grant comes back: the hold ends and nothing is made again.
    bind_global(&hub, TEAM).await;
    let placements: Api<Placement> = Api::namespaced(hub.clone(), TEAM);
    wait_until(
        &placements,
        "everywhere",
        "hold ended",
        APPLY_TIMEOUT,
        |p| {
            placement_condition(p, PLACEMENT_DECISIONS_HELD).is_none()
                && placement_condition(p, PLACEMENT_SATISFIED)
                    .is_some_and(|c| c.reason == "AllDecisionsScheduled")
        },
    )
    .await
    .expect("the placement is scheduled again");
    let works: Api<ManifestWork> = Api::namespaced(hub.clone(), SPOKE);
    wait_applied(&works, APP)
        .await
        .expect("the work is still applied");
    assert_eq!(
        uids(&fleet).await,
        (Some(work_uid), Some(object_uid)),
        "binding again recreated the work or the spoke object"
    );
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirmed_loss_deletes() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&[SPOKE]))
        .await
        .expect("fleet starts");
    let hub = fleet.hub_client.clone();
    placed(&fleet).await;
    lose_the_binding(&hub).await;
    let placements: Api<Placement> = Api::namespaced(hub.clone(), TEAM);
    annotate(
        &placements,
        "everywhere",
        CONFIRM_EMPTY_DECISIONS_ANNOTATION,
    )
    .await;
    let works: Api<ManifestWork> = Api::namespaced(hub.clone(), SPOKE);
    wait_deleted(&works, APP, "work of a confirmed loss", APPLY_TIMEOUT)
        .await
        .expect("a confirmed loss deletes the work");
    let on_spoke: Api<ConfigMap> = Api::namespaced(fleet.spoke(SPOKE).client.clone(), "default");
    wait_deleted(&on_spoke, APP, "object of a confirmed loss", APPLY_TIMEOUT)
        .await
        .expect("and the spoke object");
    let p = placements.get("everywhere").await.expect("placement");
    assert!(placement_condition(&p, PLACEMENT_DECISIONS_HELD).is_none());
    fleet.stop().await;
}
