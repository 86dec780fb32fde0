//! An agent killed in the middle of a pass leaks nothing: every object is
//! recorded (as an intent) in the AppliedManifestWork before it is created,
//! and created with the owner reference that proves ferry created it, so a
//! work deleted while the agent was down is fully released when it returns
//! (issue 9, item 6).

use std::time::Duration;

use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::ownership::APPLIED_WORK_API_VERSION;
use ferry_e2e::helpers::wait::{wait_deleted, wait_until};
use ferry_e2e::helpers::work_helpers::{APPLY_TIMEOUT, manifest_work, schemaless_crd};
use kube::api::{DynamicObject, PostParams};
use serde_json::json;

const GROUP: &str = "crash.ferry.test";

fn is_established(crd: &DynamicObject) -> bool {
    crd.data["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Established" && c["status"] == "True")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_work_deleted_while_its_agent_was_killed_mid_pass_leaves_nothing_on_the_spoke() {
    let mut fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let spoke = fleet.spoke("cluster-a");
    let crds = spoke.api("apiextensions.k8s.io/v1", "CustomResourceDefinition", None);
    let namespaces = spoke.api("v1", "Namespace", None);

    // A CRD of the spoke's own already serves kind Widget in the group, so
    // the work's CRD for the same kind is never established: the agent
    // creates it and then waits for it, which holds the pass open.
    let blocker: DynamicObject =
        serde_json::from_value(schemaless_crd(GROUP, "widgets", "Widget")).expect("crd");
    crds.create(&PostParams::default(), &blocker)
        .await
        .expect("create the spoke's own CRD");
    wait_until(
        &crds,
        &format!("widgets.{GROUP}"),
        "the spoke's own CRD is established",
        APPLY_TIMEOUT,
        is_established,
    )
    .await
    .expect("established");

    let work = manifest_work(
        "cluster-a",
        "crashy",
        vec![
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "crash-window"}}),
            schemaless_crd(GROUP, "gizmos", "Widget"),
        ],
    );
    let works = fleet.create_work(&work).await.expect("create work");
    let gizmos = format!("gizmos.{GROUP}");
    // The signal: the CRD exists, so the Namespace before it too, and the
    // agent is now waiting for the CRD to be established.
    wait_until(
        &crds,
        &gizmos,
        "the work's CRD is created on the spoke",
        APPLY_TIMEOUT,
        |_| true,
    )
    .await
    .expect("the agent reached its wait");
    assert!(
        namespaces
            .get_opt("crash-window")
            .await
            .expect("read")
            .is_some(),
        "the Namespace is applied before the CRD"
    );
    fleet.kill_agent("cluster-a").await;
    let uid = works
        .get("crashy")
        .await
        .expect("read work")
        .metadata
        .uid
        .expect("uid");

    works
        .delete("crashy", &Default::default())
        .await
        .expect("delete the work while its agent is down");
    fleet.start_agent("cluster-a");

    let spoke = fleet.spoke("cluster-a");
    let crds = spoke.api("apiextensions.k8s.io/v1", "CustomResourceDefinition", None);
    let namespaces = spoke.api("v1", "Namespace", None);
    // Namespace deletion runs through the control plane's namespace
    // controller, which takes a few seconds.
    let deadline = APPLY_TIMEOUT + Duration::from_secs(30);
    wait_deleted(&crds, &gizmos, "the work's CRD deleted", deadline)
        .await
        .expect("the CRD created before the kill is deleted");
    wait_deleted(
        &namespaces,
        "crash-window",
        "the work's Namespace deleted",
        deadline,
    )
    .await
    .expect("the Namespace created before the kill is deleted");
    wait_deleted(&works, "crashy", "the work is gone on the hub", deadline)
        .await
        .expect("the hub lets the work go once the agent released it");
    // The record is named after the work's UID; its deletion finishes once
    // the spoke's garbage collector has orphaned whatever still points at it.
    let records = spoke.api(APPLIED_WORK_API_VERSION, "AppliedManifestWork", None);
    wait_deleted(&records, &uid, "the work's record is removed", deadline)
        .await
        .expect("no record is left");
    assert!(
        crds.get_opt(&format!("widgets.{GROUP}"))
            .await
            .expect("read")
            .is_some(),
        "an object the work never created is not touched"
    );
    fleet.stop().await;
}
