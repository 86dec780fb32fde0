//! Status feedback and workload health flow back to the hub, driven by watching
//! the applied objects: a status written on the spoke shows on the hub without
//! any change to the work. Feedback rules return every JSON type, cap raw
//! values, and report a path that matches nothing as a visible reason.

use ferry_api::manifest_work::{
    FeedbackRule, FeedbackType, ManifestConfigOption, ManifestWork, NamedJsonPath,
    ResourceIdentifier, UpdateStrategyType,
};
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::spoke_actor::apply_as;
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{
    APPLY_TIMEOUT, config_map, feedback_value, manifest_condition, manifest_work, strategy_config,
    wait_applied, work_condition,
};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use serde_json::json;

fn rule(type_: FeedbackType, paths: &[(&str, &str)]) -> FeedbackRule {
    FeedbackRule {
        type_,
        json_paths: paths
            .iter()
            .map(|(name, path)| NamedJsonPath {
                name: name.to_string(),
                path: path.to_string(),
                version: None,
            })
            .collect(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_written_on_the_spoke_shows_on_the_hub_as_feedback_and_progress() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"automountServiceAccountToken": false,
                    "containers": [{"name": "app", "image": "nginx:1.27"}]}}}});
    let mut work = manifest_work("cluster-a", "web", vec![deployment]);
    let mut config = strategy_config(
        "apps",
        "deployments",
        "default",
        "web",
        UpdateStrategyType::Update,
    );
    config.feedback_rules = vec![
        rule(FeedbackType::WellKnownStatus, &[]),
        rule(
            FeedbackType::JsonPaths,
            &[
                ("image", ".spec.template.spec.containers[0].image"),
                (
                    "automount",
                    ".spec.template.spec.automountServiceAccountToken",
                ),
                ("conditions", ".status.conditions"),
                ("missing", ".status.nothing"),
            ],
        ),
    ];
    work.spec.manifest_configs = vec![config];
    let works = fleet.create_work(&work).await.expect("create");
    let applied = wait_applied(&works, "web").await.expect("applied");
    // Available means the Deployment exists (OCM's meaning); its replicas
    // are what Progressing reports.
    let available = manifest_condition(&applied, 0, "Available").expect("Available reported");
    assert_eq!(available.status, "True", "{}", available.message);
    let progressing = manifest_condition(&applied, 0, "Progressing").expect("Progressing");
    assert_eq!(
        progressing.status, "True",
        "no replicas yet: {}",
        progressing.message
    );
    assert!(
        progressing
            .message
            .contains("0 of 3 replicas are available"),
        "{}",
        progressing.message
    );
    let work_progressing = work_condition(&applied, "Progressing").expect("work Progressing");
    assert_eq!(
        (
            work_progressing.status.as_str(),
            work_progressing.reason.as_str()
        ),
        ("True", "Applying")
    );

    // No kubelet or deployment controller runs: write the status a controller would.
    let spoke = fleet
        .spoke("cluster-a")
        .api("apps/v1", "Deployment", Some("default"));
    let status = json!({"status": {"observedGeneration": 1, "replicas": 3, "readyReplicas": 3,
        "availableReplicas": 3, "updatedReplicas": 3,
        "conditions": [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
            "lastUpdateTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    spoke
        .patch_status("web", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("write status");

    let reported = |w: &ManifestWork| {
        feedback_value(w, 0, "ReadyReplicas").and_then(|v| v.integer) == Some(3)
            && work_condition(w, "Progressing").is_some_and(|c| c.status == "False")
    };
    let work = wait_until(
        &works,
        "web",
        "feedback on the hub",
        APPLY_TIMEOUT,
        reported,
    )
    .await
    .expect("status flows back without a work change");
    assert_eq!(
        work.metadata.generation,
        Some(1),
        "the work itself did not change"
    );
    let get = |name: &str| {
        feedback_value(&work, 0, name)
            .cloned()
            .unwrap_or_else(|| panic!("no feedback value {name}"))
    };
    assert_eq!(
        (
            get("AvailableReplicas").type_.as_str(),
            get("AvailableReplicas").integer
        ),
        ("Integer", Some(3))
    );
    assert_eq!(
        (get("image").type_.as_str(), get("image").string.as_deref()),
        ("String", Some("nginx:1.27"))
    );
    assert_eq!(
        (get("automount").type_.as_str(), get("automount").boolean),
        ("Boolean", Some(false))
    );
    let raw = get("conditions");
    assert_eq!(raw.type_, "JsonRaw");
    let conditions: serde_json::Value =
        serde_json::from_str(raw.json_raw.as_deref().expect("raw")).expect("json");
    assert_eq!(conditions[0]["type"], "Available");
    assert!(
        feedback_value(&work, 0, "missing").is_none(),
        "a path that matches nothing yields no value"
    );
    let synced = manifest_condition(&work, 0, "StatusFeedbackSynced").expect("condition");
    assert_eq!(synced.status, "False");
    assert!(
        synced.message.contains(".status.nothing"),
        "the unmatched path is visible: {}",
        synced.message
    );
    assert_eq!(
        manifest_condition(&work, 0, "Progressing")
            .expect("condition")
            .reason,
        "ResourceSettled"
    );
    assert_eq!(
        work_condition(&work, "Progressing")
            .expect("condition")
            .reason,
        "Completed"
    );
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feedback_reports_floats_as_raw_json_and_refuses_oversized_values_with_a_reason() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gauges.metrics.example"},
        "spec": {"group": "metrics.example", "scope": "Namespaced",
            "names": {"kind": "Gauge", "plural": "gauges", "singular": "gauge"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}});
    let gauge = json!({"apiVersion": "metrics.example/v1", "kind": "Gauge",
        "metadata": {"name": "g", "namespace": "default"},
        "report": {"ratio": 0.25, "samples": (0..400).collect::<Vec<_>>()}});
    let mut work = manifest_work("cluster-a", "gauge", vec![crd, gauge]);
    let mut config = strategy_config(
        "metrics.example",
        "gauges",
        "default",
        "g",
        UpdateStrategyType::Update,
    );
    config.feedback_rules = vec![rule(
        FeedbackType::JsonPaths,
        &[("ratio", ".report.ratio"), ("samples", ".report.samples")],
    )];
    work.spec.manifest_configs = vec![config];
    let works = fleet.create_work(&work).await.expect("create");
    let work = wait_applied(&works, "gauge").await.expect("applied");
    let ratio = feedback_value(&work, 1, "ratio").expect("ratio reported");
    assert_eq!(
        (ratio.type_.as_str(), ratio.json_raw.as_deref()),
        ("JsonRaw", Some("0.25"))
    );
    assert!(
        feedback_value(&work, 1, "samples").is_none(),
        "an oversized value is not reported"
    );
    let synced = manifest_condition(&work, 1, "StatusFeedbackSynced").expect("condition");
    assert_eq!(synced.status, "False");
    assert!(
        synced.message.contains("samples"),
        "the size problem names the value: {}",
        synced.message
    );
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn feedback_rules_apply_to_manifests_matched_by_a_wildcard_name() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let mut work = manifest_work(
        "cluster-a",
        "wild",
        vec![
            config_map("default", "deploy-a", json!({"k": "a"})),
            config_map("default", "other", json!({"k": "o"})),
        ],
    );
    // OCM matches `*` anywhere in a name; the config sets only feedback.
    work.spec.manifest_configs = vec![ManifestConfigOption {
        resource_identifier: ResourceIdentifier {
            group: String::new(),
            resource: "configmaps".into(),
            name: "deploy*".into(),
            namespace: "default".into(),
        },
        feedback_rules: vec![rule(FeedbackType::JsonPaths, &[("k", ".data.k")])],
        ..Default::default()
    }];
    let works = fleet.create_work(&work).await.expect("create");
    let reported = |w: &ManifestWork| feedback_value(w, 0, "k").is_some();
    let work = wait_until(
        &works,
        "wild",
        "feedback of deploy-a",
        APPLY_TIMEOUT,
        reported,
    )
    .await
    .expect("deploy-a reports its feedback");
    assert_eq!(
        feedback_value(&work, 0, "k").and_then(|v| v.string.as_deref()),
        Some("a")
    );
    assert!(
        feedback_value(&work, 1, "k").is_none(),
        "other is not matched"
    );
    let other = manifest_condition(&work, 1, "StatusFeedbackSynced").expect("condition");
    assert_eq!(other.reason, "NoStatusFeedbackSynced");
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_feedback_synced_moves_its_transition_time_when_the_values_change() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let mut work = manifest_work(
        "cluster-a",
        "moving",
        vec![config_map("default", "watched", json!({"k": "1"}))],
    );
    let mut config = strategy_config(
        "",
        "configmaps",
        "default",
        "watched",
        UpdateStrategyType::ReadOnly,
    );
    config.feedback_rules = vec![rule(FeedbackType::JsonPaths, &[("k", ".data.k")])];
    work.spec.manifest_configs = vec![config];
    // ReadOnly: the spoke owns the object, so its edits are not drift.
    let spoke = fleet
        .spoke("cluster-a")
        .api("v1", "ConfigMap", Some("default"));
    apply_as(
        &spoke,
        "watched",
        "someone",
        &config_map("default", "watched", json!({"k": "1"})),
    )
    .await
    .expect("create on the spoke");
    let works = fleet.create_work(&work).await.expect("create");
    let first =
        |w: &ManifestWork| feedback_value(w, 0, "k").and_then(|v| v.string.as_deref()) == Some("1");
    let before = wait_until(&works, "moving", "first value", APPLY_TIMEOUT, first)
        .await
        .expect("first value");
    let time_of = |w: &ManifestWork, type_: &str| {
        manifest_condition(w, 0, type_)
            .map(|c| c.last_transition_time.clone())
            .unwrap_or_else(|| panic!("no {type_}"))
    };
    let synced_before = time_of(&before, "StatusFeedbackSynced");
    let available_before = time_of(&before, "Available");
    // Transition times have whole seconds: let the clock pass the first one
    // so a new stamp can differ from it.
    let stamped: Timestamp = synced_before.parse().expect("RFC 3339");
    let later = stamped + std::time::Duration::from_millis(1100);
    if let Ok(wait) = later.duration_since(Timestamp::now()).try_into() {
        tokio::time::sleep(wait).await;
    }

    apply_as(
        &spoke,
        "watched",
        "someone",
        &config_map("default", "watched", json!({"k": "2"})),
    )
    .await
    .expect("change on the spoke");
    let second =
        |w: &ManifestWork| feedback_value(w, 0, "k").and_then(|v| v.string.as_deref()) == Some("2");
    let after = wait_until(&works, "moving", "second value", APPLY_TIMEOUT, second)
        .await
        .expect("second value");
    let synced = manifest_condition(&after, 0, "StatusFeedbackSynced").expect("condition");
    assert_eq!(synced.status, "True", "still synced");
    assert_ne!(
        synced.last_transition_time, synced_before,
        "OCM moves the time when the values change"
    );
    assert_eq!(
        time_of(&after, "Available"),
        available_before,
        "conditions whose status did not change keep their time"
    );
    fleet.stop().await;
}
