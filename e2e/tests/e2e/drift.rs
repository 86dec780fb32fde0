//! Drift: spoke edits to managed fields are corrected by watching the managed
//! objects (the resync period here is an hour, so only a watch can do it), and
//! at steady state ferry sends zero writes to the spoke API, counted from the
//! spoke API server's audit log over several resync periods.

use std::time::Duration;

use ferry_e2e::harness::audit::{count_reads, count_writes, list_writes};
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::spoke_actor::merge_as;
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{APPLY_TIMEOUT, manifest_work, ssa_config, wait_applied};
use kube::api::DynamicObject;
use serde_json::json;

fn manifests() -> Vec<serde_json::Value> {
    vec![
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "merged", "namespace": "default"}, "data": {"a": "hub"}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "applied", "namespace": "default"}, "data": {"a": "hub"}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "app", "image": "nginx:1.27", "ports": [{"containerPort": 80}]}]}}}}),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spoke_edits_to_managed_fields_are_corrected_by_watching() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let mut work = manifest_work("cluster-a", "drift", manifests());
    work.spec.manifest_configs = vec![ssa_config(
        "",
        "configmaps",
        "default",
        "applied",
        true,
        &[],
    )];
    let works = fleet.create_work(&work).await.expect("create");
    wait_applied(&works, "drift").await.expect("applied");
    let spoke = fleet
        .spoke("cluster-a")
        .api("v1", "ConfigMap", Some("default"));
    for name in ["merged", "applied"] {
        merge_as(
            &spoke,
            name,
            "kubectl-edit",
            &json!({"data": {"a": "drifted"}}),
        )
        .await
        .expect("drift");
        let back = |o: &DynamicObject| o.data["data"]["a"] == "hub";
        wait_until(&spoke, name, "drift corrected", APPLY_TIMEOUT, back)
            .await
            .unwrap_or_else(|e| panic!("{name}: drift not corrected: {e}"));
    }
    let deployments = fleet
        .spoke("cluster-a")
        .api("apps/v1", "Deployment", Some("default"));
    merge_as(
        &deployments,
        "web",
        "kubectl-edit",
        &json!({"spec": {"replicas": 7}}),
    )
    .await
    .expect("drift");
    let back = |o: &DynamicObject| o.data["spec"]["replicas"] == 2;
    wait_until(
        &deployments,
        "web",
        "replicas corrected",
        APPLY_TIMEOUT,
        back,
    )
    .await
    .expect("corrected");
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steady_state_sends_zero_writes_to_the_spoke() {
    let mut options = FleetOptions::with_spokes(&["cluster-a"]);
    options.audit_spokes = true;
    options.resync = Duration::from_secs(1);
    let fleet = Fleet::start(options).await.expect("fleet starts");
    let mut work = manifest_work("cluster-a", "quiet", manifests());
    work.spec.manifest_configs = vec![ssa_config(
        "",
        "configmaps",
        "default",
        "applied",
        false,
        &[],
    )];
    let works = fleet.create_work(&work).await.expect("create");
    wait_applied(&works, "quiet").await.expect("applied");
    let audit = fleet
        .spoke("cluster-a")
        .control_plane
        .info
        .audit_log
        .clone();
    assert!(!audit.is_empty(), "the spoke records an audit log");

    // Count over five passes of the agent (resync every second), each seen
    // as the agent's read of the object in the audit log, from the first
    // pass after Applied (ferry's own writes are all done by then).
    let object = "/api/v1/namespaces/default/configmaps/applied";
    let first_pass = wait_for_reads(&audit, object, count_reads(&audit, object) + 1).await;
    let before = count_writes(&audit);
    assert!(
        before >= 3,
        "the count sees ferry's own writes (creating the three objects): {before}"
    );
    wait_for_reads(&audit, object, first_pass + 5).await;
    let after = count_writes(&audit);
    assert_eq!(
        after - before,
        0,
        "ferry wrote to the spoke at steady state: {:?}",
        &list_writes(&audit)[before..]
    );
    fleet.stop().await;
}

/// Waits until the audit log shows at least `reads` reads of `object` by the
/// agent's identity, and returns the count then. Each read is one pass of
/// the agent over the work: the signal that it re-checked the object.
async fn wait_for_reads(audit: &str, object: &str, reads: usize) -> usize {
    let deadline = tokio::time::Instant::now() + APPLY_TIMEOUT;
    loop {
        let seen = count_reads(audit, object);
        if seen >= reads {
            return seen;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the agent read {object} {seen} times, waiting for {reads}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
