//! OCM's `Complete`: the built-in Job rule (`WellKnownConditions`) marks a
//! finished Job's (or Pod's) manifest complete, the work becomes `Complete`,
//! a completed work is no longer updated, and the hub deletes it once its
//! `deleteOption.ttlSecondsAfterFinished` runs out.

use ferry_api::manifest_work::{
    ConditionRule, ConditionRuleType, DeleteOption, ManifestWork, UpdateStrategyType,
};
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::harness::hub_metrics::{hub_metric, wait_metric_above};
use ferry_e2e::helpers::spoke_actor::read_json;
use ferry_e2e::helpers::wait::{wait_deleted, wait_until};
use ferry_e2e::helpers::work_helpers::{
    APPLY_TIMEOUT, config_map, edit_manifests, manifest_condition, manifest_work, strategy_config,
    wait_applied, work_condition,
};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use serde_json::json;

const UPSERTS_SENT: &str = "ferry_hub_work_upserts_sent_total";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_job_completes_the_work_and_a_completed_work_is_no_longer_updated() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let job = json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "migrate", "namespace": "default"},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "run", "image": "busybox:1.36", "command": ["true"]}]}}}});
    let settings = config_map("default", "settings", json!({"version": "1"}));
    let mut work = manifest_work("cluster-a", "once", vec![job, settings]);
    let mut config = strategy_config(
        "batch",
        "jobs",
        "default",
        "migrate",
        UpdateStrategyType::Update,
    );
    config.condition_rules = vec![ConditionRule {
        condition: "Complete".into(),
        type_: ConditionRuleType::WellKnownConditions,
        ..Default::default()
    }];
    work.spec.manifest_configs = vec![config];
    let works = fleet.create_work(&work).await.expect("create");
    let applied = wait_applied(&works, "once").await.expect("applied");
    let complete = manifest_condition(&applied, 0, "Complete").expect("rule evaluated");
    assert_eq!(
        (complete.status.as_str(), complete.message.as_str()),
        ("False", "Job is not finished")
    );
    assert_eq!(
        work_condition(&applied, "Complete")
            .expect("work Complete")
            .status,
        "False"
    );
    // No ConfigMap rule: only the Job is completable.
    assert!(manifest_condition(&applied, 1, "Complete").is_none());

    // No Job controller runs: write the status it would on success.
    let jobs = fleet
        .spoke("cluster-a")
        .api("batch/v1", "Job", Some("default"));
    let now = "2026-01-01T00:00:00Z";
    let finished = json!({"status": {"startTime": now, "completionTime": now, "succeeded": 1,
        "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached",
                "lastProbeTime": now, "lastTransitionTime": now},
            {"type": "Complete", "status": "True", "reason": "CompletionsReached",
                "lastProbeTime": now, "lastTransitionTime": now}]}});
    jobs.patch_status("migrate", &PatchParams::default(), &Patch::Merge(&finished))
        .await
        .expect("write job status");
    let is_complete =
        |w: &ManifestWork| work_condition(w, "Complete").is_some_and(|c| c.status == "True");
    let completed = wait_until(&works, "once", "work Complete", APPLY_TIMEOUT, is_complete)
        .await
        .expect("the work completes");
    let manifest = manifest_condition(&completed, 0, "Complete").expect("condition");
    assert_eq!(
        (manifest.status.as_str(), manifest.message.as_str()),
        ("True", "Job is finished")
    );
    let generation = completed.metadata.generation;

    // The hub changes the completed work; the change reaches the agent...
    let hub = fleet.hub_probes_addr;
    let sent = hub_metric(hub, UPSERTS_SENT).await.expect("scrape");
    edit_manifests(&works, "once", |manifests| {
        manifests[1]["data"]["version"] = json!("2");
    })
    .await
    .expect("edit");
    wait_metric_above(hub, UPSERTS_SENT, sent, APPLY_TIMEOUT)
        .await
        .expect("the change is sent to the agent");
    // ...and a work created after it is applied by the same agent, so the
    // agent has handled the change by now.
    let probe = manifest_work(
        "cluster-a",
        "probe",
        vec![config_map("default", "probe", json!({"k": "v"}))],
    );
    fleet.create_work(&probe).await.expect("create probe");
    wait_applied(&works, "probe").await.expect("probe applied");

    let configmaps = fleet
        .spoke("cluster-a")
        .api("v1", "ConfigMap", Some("default"));
    assert_eq!(
        read_json(&configmaps, "settings").await["data"]["version"],
        "1",
        "a completed work is not updated"
    );
    let now = works.get("once").await.expect("read");
    assert_ne!(now.metadata.generation, generation, "the work did change");
    assert!(is_complete(&now), "the work stays Complete");
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hub_deletes_a_completed_work_once_its_ttl_after_finishing_runs_out() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "task", "namespace": "default"},
        "spec": {"restartPolicy": "Never", "automountServiceAccountToken": false,
            "containers": [{"name": "run", "image": "busybox:1.36", "command": ["true"]}]}});
    let mut work = manifest_work("cluster-a", "short-lived", vec![pod]);
    let mut config = strategy_config("", "pods", "default", "task", UpdateStrategyType::Update);
    config.condition_rules = vec![ConditionRule {
        condition: "Complete".into(),
        type_: ConditionRuleType::WellKnownConditions,
        ..Default::default()
    }];
    work.spec.manifest_configs = vec![config];
    work.spec.delete_option = Some(DeleteOption {
        ttl_seconds_after_finished: Some(3),
        ..Default::default()
    });
    let works = fleet.create_work(&work).await.expect("create");
    let applied = wait_applied(&works, "short-lived").await.expect("applied");
    assert_eq!(
        work_condition(&applied, "Complete")
            .expect("work Complete")
            .status,
        "False",
        "a pod that has not run is not complete"
    );

    // No kubelet runs: write the status it would for a pod that succeeded.
    let pods = fleet.spoke("cluster-a").api("v1", "Pod", Some("default"));
    pods.patch_status(
        "task",
        &PatchParams::default(),
        &Patch::Merge(&json!({"status": {"phase": "Succeeded"}})),
    )
    .await
    .expect("write pod status");
    let is_complete =
        |w: &ManifestWork| work_condition(w, "Complete").is_some_and(|c| c.status == "True");
    let completed = wait_until(
        &works,
        "short-lived",
        "work Complete",
        APPLY_TIMEOUT,
        is_complete,
    )
    .await
    .expect("the work completes");
    let completed_at: Timestamp = work_condition(&completed, "Complete")
        .expect("condition")
        .last_transition_time
        .parse()
        .expect("RFC 3339");
    let manifest = manifest_condition(&completed, 0, "Complete").expect("condition");
    assert_eq!(manifest.message, "Pod is in phase Succeeded");

    wait_deleted(
        &works,
        "short-lived",
        "work deleted after its TTL",
        APPLY_TIMEOUT,
    )
    .await
    .expect("the hub deletes the work");
    let deleted_at = Timestamp::now();
    // Transition times have whole seconds: allow one for the rounding.
    assert!(
        deleted_at.duration_since(completed_at).as_secs() >= 2,
        "deleted at {deleted_at}, completed at {completed_at}: not before the TTL"
    );
    fleet.stop().await;
}
