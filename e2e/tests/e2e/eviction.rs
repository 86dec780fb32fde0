//! A work the hub no longer has (here: removed while the hub was down, the
//! way a rebuilt hub forgets everything) is evicted by the agent after the
//! configured grace period, and not before (issue 4, item 9); a grace
//! period of 100 years or more turns eviction off and calls off one already
//! started (OCM's bound); an eviction is called off when the hub sends the
//! work again.

use std::time::{Duration, Instant};

use ferry_agent::work_workers::EVICTION_OFF_AT;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::ownership::APPLIED_WORK_API_VERSION;
use ferry_e2e::helpers::wait::{wait_deleted, wait_until};
use ferry_e2e::helpers::work_helpers::{APPLY_TIMEOUT, config_map, manifest_work, wait_applied};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::{Client, ResourceExt};
use serde_json::json;

const GRACE: Duration = Duration::from_secs(8);

/// The spoke's ConfigMaps and AppliedManifestWorks, and the UID of work
/// `name` (one ConfigMap of that name), which the agent applied and which
/// then vanished from the hub while no hub watched: its eviction has begun.
async fn evicting_work(
    fleet: &mut Fleet,
    name: &str,
) -> (Api<DynamicObject>, Api<DynamicObject>, String) {
    let spoke = fleet.spoke("cluster-a");
    let config_maps = spoke.api("v1", "ConfigMap", Some("default"));
    let records = spoke.api(APPLIED_WORK_API_VERSION, "AppliedManifestWork", None);
    let work = manifest_work(
        "cluster-a",
        name,
        vec![config_map("default", name, json!({"k": "v"}))],
    );
    let works = fleet.create_work(&work).await.expect("create work");
    let uid = wait_applied(&works, name)
        .await
        .expect("applied")
        .uid()
        .expect("uid");
    // The work disappears while no hub watches: nobody tells the agent.
    fleet
        .forget_work(&works, name)
        .await
        .expect("work forgotten");
    wait_until(&records, &uid, "eviction started", APPLY_TIMEOUT, evicting)
        .await
        .expect("the agent starts the grace period");
    (config_maps, records, uid)
}

fn evicting(record: &DynamicObject) -> bool {
    record.data["status"]["evictionStartTime"]
        .as_str()
        .is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_work_the_hub_no_longer_has_is_evicted_after_the_grace_period_not_before() {
    let mut options = FleetOptions::with_spokes(&["cluster-a"]);
    options.eviction_grace = GRACE;
    let mut fleet = Fleet::start(options).await.expect("fleet starts");
    let (config_maps, records, uid) = evicting_work(&mut fleet, "forgotten").await;
    let started = Instant::now();
    assert!(
        config_maps
            .get_opt("forgotten")
            .await
            .expect("read")
            .is_some(),
        "the object stays during the grace period"
    );
    tokio::time::sleep(GRACE / 2).await;
    assert!(
        config_maps
            .get_opt("forgotten")
            .await
            .expect("read")
            .is_some(),
        "the object still stays halfway through the grace period"
    );

    wait_deleted(&config_maps, "forgotten", "object evicted", APPLY_TIMEOUT)
        .await
        .expect("evicted after the grace period");
    assert!(
        started.elapsed() + Duration::from_secs(2) >= GRACE,
        "not evicted before the grace period ended ({:?} after it began)",
        started.elapsed()
    );
    wait_deleted(&records, &uid, "record removed", APPLY_TIMEOUT)
        .await
        .expect("the record goes too");
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grace_period_of_a_hundred_years_turns_eviction_off_and_calls_off_a_started_one() {
    // An hour: the eviction starts and nothing is released during the test.
    let mut fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let (config_maps, records, uid) = evicting_work(&mut fleet, "kept-forever").await;

    // Restarted with OCM's bound, the agent calls the eviction off.
    fleet.stop_agent("cluster-a").await;
    fleet.set_agent_options("cluster-a", |o| o.eviction_grace = EVICTION_OFF_AT);
    fleet.start_agent("cluster-a");
    wait_until(&records, &uid, "eviction called off", APPLY_TIMEOUT, |r| {
        !evicting(r)
    })
    .await
    .expect("evictionStartTime is cleared");
    assert!(
        config_maps
            .get_opt("kept-forever")
            .await
            .expect("read")
            .is_some(),
        "the object stays"
    );
    fleet.stop().await;
}

const WORKS_CRD: &str = "manifestworks.work.ferry.dev";
/// A version of the ManifestWork CRD the hub does not know, served only
/// while the test writes through it.
const UNKNOWN_VERSION: &str = "v1alpha2";

fn works_at(client: &Client, version: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("work.ferry.dev", version, "ManifestWork"),
        "manifestworks",
    );
    Api::namespaced_with(client.clone(), "cluster-a", &resource)
}

/// Rewrites work `name`'s spec into a shape the hub cannot decode, keeping
/// its UID: through a CRD version the hub does not know (served for a
/// moment with a schema that accepts anything), as a newer writer could.
/// The hub's index then skips the work, as if it were gone.
async fn make_undecodable(client: &Client, name: &str) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let version = serde_json::from_value(json!({
        "name": UNKNOWN_VERSION,
        "served": true,
        "storage": false,
        "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
        "subresources": {"status": {}},
    }))
    .expect("a CRD version");
    let mut crd = crds.get(WORKS_CRD).await.expect("read the CRD");
    crd.spec.versions.push(version);
    crds.replace(WORKS_CRD, &PostParams::default(), &crd)
        .await
        .expect("serve an unknown version");
    let api = works_at(client, UNKNOWN_VERSION);
    let patch = json!({"spec": {"workload": {"manifests": "not-a-list"}}});
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => break,
            Err(kube::Error::Api(status)) if status.code == 404 && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("rewriting {name} through {UNKNOWN_VERSION}: {e}"),
        }
    }
    let mut crd = crds.get(WORKS_CRD).await.expect("read the CRD");
    crd.spec.versions.retain(|v| v.name != UNKNOWN_VERSION);
    crds.replace(WORKS_CRD, &PostParams::default(), &crd)
        .await
        .expect("stop serving the unknown version");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_eviction_is_called_off_when_the_hub_sends_the_work_again() {
    // Without admission: the hub's webhook would review the rewrite below.
    let mut fleet = Fleet::start(FleetOptions {
        admission: false,
        ..FleetOptions::with_spokes(&["cluster-a"])
    })
    .await
    .expect("fleet starts");
    let spoke = fleet.spoke("cluster-a");
    let config_maps = spoke.api("v1", "ConfigMap", Some("default"));
    let records = spoke.api(APPLIED_WORK_API_VERSION, "AppliedManifestWork", None);
    let name = "returns";
    let works = fleet
        .create_work(&manifest_work(
            "cluster-a",
            name,
            vec![config_map("default", name, json!({"k": "v"}))],
        ))
        .await
        .expect("create work");
    let uid = wait_applied(&works, name)
        .await
        .expect("applied")
        .uid()
        .expect("uid");

    // While no hub runs, the work becomes one the hub cannot read: the hub
    // that starts next does not have it, so it tells the agent to evict.
    fleet.stop_hub().await;
    make_undecodable(&fleet.hub_client, name).await;
    fleet.start_hub().await.expect("hub starts again");
    wait_until(&records, &uid, "eviction started", APPLY_TIMEOUT, evicting)
        .await
        .expect("the agent starts the grace period");

    // The work is readable again, same UID: the hub sends it, and the
    // agent calls the eviction off and applies it.
    let manifests = json!({"spec": {"workload": {"manifests": [
        config_map("default", name, json!({"k": "again"}))
    ]}}});
    works_at(&fleet.hub_client, "v1alpha1")
        .patch(name, &PatchParams::default(), &Patch::Merge(&manifests))
        .await
        .expect("the work is readable again");
    wait_until(&records, &uid, "eviction called off", APPLY_TIMEOUT, |r| {
        !evicting(r)
    })
    .await
    .expect("evictionStartTime is cleared once the hub sends the work");
    wait_until(
        &config_maps,
        name,
        "the work's new data",
        APPLY_TIMEOUT,
        |cm| cm.data["data"]["k"] == json!("again"),
    )
    .await
    .expect("the work is applied again, its object kept");
    fleet.stop().await;
}

/// A record of a work no hub has, written while the agent runs (a crash
/// between two hubs leaves one; here the test writes it, with a ConfigMap
/// it owns): the agent finds it at its next sweep after the hub said
/// `Synced`, evicts it after the grace period and removes the record, and
/// the work the hub has is untouched. Before, only a restart found it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_of_a_work_the_hub_never_had_is_evicted_while_the_agent_runs() {
    let mut options = FleetOptions::with_spokes(&["cluster-a"]);
    options.eviction_grace = Duration::from_secs(2);
    options.resync = Duration::from_secs(2);
    let fleet = Fleet::start(options).await.expect("fleet starts");
    let spoke = fleet.spoke("cluster-a");
    let config_maps = spoke.api("v1", "ConfigMap", Some("default"));
    let records = spoke.api(APPLIED_WORK_API_VERSION, "AppliedManifestWork", None);
    let kept = manifest_work(
        "cluster-a",
        "kept",
        vec![config_map("default", "kept", json!({"k": "v"}))],
    );
    let works = fleet.create_work(&kept).await.expect("create work");
    wait_applied(&works, "kept").await.expect("applied");

    let ghost = "0f0f0f0f-0000-4000-8000-00000000ghost";
    let record: DynamicObject = serde_json::from_value(json!({
        "apiVersion": APPLIED_WORK_API_VERSION,
        "kind": "AppliedManifestWork",
        "metadata": {"name": ghost},
        "spec": {"clusterName": "cluster-a", "workNamespace": "cluster-a",
            "workName": "ghost", "workUid": ghost},
    }))
    .expect("record");
    let record = records
        .create(&PostParams::default(), &record)
        .await
        .expect("write the orphaned record");
    let owned: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "ghost", "namespace": "default", "ownerReferences": [{
            "apiVersion": APPLIED_WORK_API_VERSION, "kind": "AppliedManifestWork",
            "name": ghost, "uid": record.uid().expect("record uid")}]},
        "data": {"k": "v"},
    }))
    .expect("config map");
    let owned = config_maps
        .create(&PostParams::default(), &owned)
        .await
        .expect("create the record's ConfigMap");
    records
        .patch_status(
            ghost,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"appliedResources": [{
                "group": "", "version": "v1", "kind": "ConfigMap", "resource": "configmaps",
                "namespace": "default", "name": "ghost", "uid": owned.uid().expect("uid")}]}})),
        )
        .await
        .expect("record the ConfigMap");

    wait_until(&records, ghost, "eviction started", APPLY_TIMEOUT, evicting)
        .await
        .expect("the running agent finds the orphaned record");
    wait_deleted(&config_maps, "ghost", "object evicted", APPLY_TIMEOUT)
        .await
        .expect("its object is released after the grace period");
    wait_deleted(&records, ghost, "record removed", APPLY_TIMEOUT)
        .await
        .expect("and the record goes");
    assert!(
        config_maps.get_opt("kept").await.expect("read").is_some(),
        "the work the hub has keeps its object"
    );
    fleet.stop().await;
}
