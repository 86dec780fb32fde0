//! `Available` means what it means in OCM: the manifest's object exists on
//! the spoke, whether or not ferry's apply of it worked. What ferry knows
//! about workload health is reported as `Progressing` and `Degraded`, per
//! manifest and for the work.

use ferry_api::manifest_work::{ManifestWork, UpdateStrategyType};
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::spoke_actor::apply_as;
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{
    APPLY_TIMEOUT, config_map, manifest_condition, manifest_work, ssa_config, strategy_config,
    wait_applied, work_condition,
};
use kube::api::{Patch, PatchParams};
use serde_json::json;

/// `(status, reason)` of a manifest's condition, for compact asserts.
fn manifest_state(work: &ManifestWork, ordinal: i32, type_: &str) -> (String, String) {
    manifest_condition(work, ordinal, type_)
        .map(|c| (c.status.clone(), c.reason.clone()))
        .unwrap_or_else(|| panic!("manifest #{ordinal} has no {type_} condition"))
}

/// `(status, reason)` of a work condition.
fn work_state(work: &ManifestWork, type_: &str) -> (String, String) {
    work_condition(work, type_)
        .map(|c| (c.status.clone(), c.reason.clone()))
        .unwrap_or_else(|| panic!("the work has no {type_} condition"))
}

fn pair(status: &str, reason: &str) -> (String, String) {
    (status.to_string(), reason.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn available_is_true_when_the_object_exists_even_if_its_apply_failed() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let spoke = fleet
        .spoke("cluster-a")
        .api("v1", "ConfigMap", Some("default"));
    // Another manager owns data.key of "shared": ferry's non-forced
    // server-side apply of another value conflicts, but the object exists.
    apply_as(
        &spoke,
        "shared",
        "other-manager",
        &config_map("default", "shared", json!({"key": "theirs"})),
    )
    .await
    .expect("other owns data.key");
    let manifests = vec![
        config_map("default", "shared", json!({"key": "ours"})),
        config_map("default", "absent", json!({})),
        config_map("default", "plain", json!({"k": "v"})),
    ];
    let mut work = manifest_work("cluster-a", "exists", manifests);
    work.spec.manifest_configs = vec![
        ssa_config("", "configmaps", "default", "shared", false, &[]),
        strategy_config(
            "",
            "configmaps",
            "default",
            "absent",
            UpdateStrategyType::ReadOnly,
        ),
    ];
    let works = fleet.create_work(&work).await.expect("create");
    let reported = |w: &ManifestWork| {
        manifest_condition(w, 0, "Applied").is_some_and(|c| c.reason == "ApplyConflict")
            && manifest_condition(w, 1, "Available").is_some()
            && manifest_condition(w, 2, "Applied").is_some_and(|c| c.status == "True")
    };
    let work = wait_until(
        &works,
        "exists",
        "every manifest reported",
        APPLY_TIMEOUT,
        reported,
    )
    .await
    .expect("reported");

    // The conflicted object exists: Available, though not applied.
    assert_eq!(manifest_state(&work, 0, "Applied").0, "False");
    assert_eq!(
        manifest_state(&work, 0, "Available"),
        pair("True", "ResourceAvailable")
    );
    let available = manifest_condition(&work, 0, "Available").expect("condition");
    assert_eq!(available.message, "Resource is available");
    // The ReadOnly object that is not there: not Available.
    assert_eq!(
        manifest_state(&work, 1, "Applied"),
        pair("False", "ObjectNotFound")
    );
    assert_eq!(
        manifest_state(&work, 1, "Available"),
        pair("False", "ResourceNotAvailable")
    );
    assert_eq!(
        manifest_state(&work, 2, "Available"),
        pair("True", "ResourceAvailable")
    );
    // Every manifest whose object exists carries StatusFeedbackSynced, as in
    // OCM, even without feedback rules.
    for ordinal in [0, 2] {
        assert_eq!(
            manifest_state(&work, ordinal, "StatusFeedbackSynced"),
            pair("True", "NoStatusFeedbackSynced")
        );
    }
    // A ConfigMap has no health: no Progressing/Degraded for it.
    assert!(manifest_condition(&work, 2, "Progressing").is_none());
    let work_available = work_condition(&work, "Available").expect("work Available");
    assert_eq!(work_available.status, "False");
    assert_eq!(work_available.reason, "ResourcesNotAvailable");
    assert!(
        work_available
            .message
            .starts_with("1 of 3 resources are not available"),
        "{}",
        work_available.message
    );
    assert_eq!(work_state(&work, "Progressing"), pair("True", "Failed"));

    // The missing object appears on the spoke: the ReadOnly manifest is
    // observed and every resource of the work now exists.
    apply_as(
        &spoke,
        "absent",
        "someone",
        &config_map("default", "absent", json!({"x": "y"})),
    )
    .await
    .expect("create the observed object");
    let all_exist =
        |w: &ManifestWork| work_condition(w, "Available").is_some_and(|c| c.status == "True");
    let work = wait_until(&works, "exists", "work Available", APPLY_TIMEOUT, all_exist)
        .await
        .expect("all resources exist");
    assert_eq!(
        work_state(&work, "Available"),
        pair("True", "ResourcesAvailable")
    );
    assert_eq!(
        manifest_state(&work, 1, "Available"),
        pair("True", "ResourceAvailable")
    );
    // The conflict is still there: the work is not applied, still Available.
    assert_eq!(manifest_state(&work, 0, "Applied").0, "False");
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workload_health_is_reported_as_progressing_and_degraded_not_as_available() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"automountServiceAccountToken": false,
                    "containers": [{"name": "app", "image": "nginx:1.27"}]}}}});
    let job = json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "once", "namespace": "default"},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "run", "image": "busybox:1.36", "command": ["true"]}]}}}});
    let works = fleet
        .create_work(&manifest_work("cluster-a", "health", vec![deployment, job]))
        .await
        .expect("create");
    let work = wait_applied(&works, "health").await.expect("applied");
    // No controller has reported anything: both exist, both progress.
    for ordinal in [0, 1] {
        assert_eq!(
            manifest_state(&work, ordinal, "Available"),
            pair("True", "ResourceAvailable")
        );
        assert_eq!(
            manifest_state(&work, ordinal, "Progressing"),
            pair("True", "ResourceProgressing")
        );
        assert_eq!(
            manifest_state(&work, ordinal, "Degraded"),
            pair("False", "ResourceNotDegraded")
        );
    }
    let progressing = manifest_condition(&work, 0, "Progressing").expect("condition");
    assert!(
        progressing
            .message
            .contains("0 of 2 replicas are available"),
        "{}",
        progressing.message
    );
    assert_eq!(work_state(&work, "Available").0, "True");
    assert_eq!(work_state(&work, "Progressing"), pair("True", "Applying"));
    assert_eq!(work_state(&work, "Degraded").0, "False");

    // No controllers run: write the status they would.
    let deployments = fleet
        .spoke("cluster-a")
        .api("apps/v1", "Deployment", Some("default"));
    let status = json!({"status": {"observedGeneration": 1, "replicas": 2,
        "readyReplicas": 2, "availableReplicas": 2, "updatedReplicas": 2}});
    deployments
        .patch_status("web", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("write deployment status");
    let rolled_out = |w: &ManifestWork| {
        manifest_condition(w, 0, "Progressing").is_some_and(|c| c.status == "False")
    };
    let work = wait_until(
        &works,
        "health",
        "deployment settled",
        APPLY_TIMEOUT,
        rolled_out,
    )
    .await
    .expect("settled");
    assert_eq!(
        manifest_state(&work, 0, "Progressing"),
        pair("False", "ResourceSettled")
    );
    // The Job still runs.
    assert_eq!(work_state(&work, "Progressing"), pair("True", "Applying"));

    let jobs = fleet
        .spoke("cluster-a")
        .api("batch/v1", "Job", Some("default"));
    let now = "2026-01-01T00:00:00Z";
    let failed = json!({"status": {"startTime": now, "failed": 1, "conditions": [
        {"type": "FailureTarget", "status": "True", "reason": "BackoffLimitExceeded",
            "message": "Job has reached the specified backoff limit",
            "lastProbeTime": now, "lastTransitionTime": now},
        {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
            "message": "Job has reached the specified backoff limit",
            "lastProbeTime": now, "lastTransitionTime": now}]}});
    jobs.patch_status("once", &PatchParams::default(), &Patch::Merge(&failed))
        .await
        .expect("write job status");
    let degraded =
        |w: &ManifestWork| work_condition(w, "Degraded").is_some_and(|c| c.status == "True");
    let work = wait_until(&works, "health", "work degraded", APPLY_TIMEOUT, degraded)
        .await
        .expect("degraded");
    assert_eq!(
        manifest_state(&work, 1, "Degraded"),
        pair("True", "ResourceDegraded")
    );
    // A failed Job stays progressing, so a rollout reading OCM's rule
    // (Progressing and Degraded True) counts it as failed, not succeeded.
    assert_eq!(manifest_state(&work, 1, "Progressing").0, "True");
    assert_eq!(
        manifest_state(&work, 1, "Available"),
        pair("True", "ResourceAvailable")
    );
    let work_degraded = work_condition(&work, "Degraded").expect("condition");
    assert_eq!(work_degraded.reason, "ResourcesDegraded");
    assert!(
        work_degraded.message.contains("Job once")
            && work_degraded.message.contains("BackoffLimitExceeded"),
        "names the job and why: {}",
        work_degraded.message
    );
    assert_eq!(work_state(&work, "Progressing").0, "True");
    assert_eq!(work_state(&work, "Available").0, "True");
    fleet.stop().await;
}
