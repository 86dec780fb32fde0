//! Drift reports: each manifest's status lists the fields where the object on
//! the spoke differs from what ferry would apply (JSON pointer, hub value,
//! spoke value, the field manager that wrote it, when it was first seen), and
//! with a correcting strategy when ferry wrote the hub's value back. The
//! `ReportOnly` strategy writes nothing and only reports. Every wait here is
//! for the report itself (the work's status on the hub), driven by the
//! agent's watch of the object: the resync period is an hour (except where a
//! test needs passes to count).

use std::time::Duration;

use ferry_api::manifest_work::{
    DriftedField, IgnoreCondition, ManifestDrift, ManifestWork, ServerSideApplyConfig,
    UpdateStrategy, UpdateStrategyType,
};
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::harness::hub_metrics::{STATUS_REPORTS_RECEIVED, hub_metric};
use ferry_e2e::helpers::passes::{reads_so_far, wait_for_passes};
use ferry_e2e::helpers::spoke_actor::{apply_as, merge_as, read_json};
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{
    APPLY_TIMEOUT, config_map, manifest_condition, manifest_status, manifest_work, ssa_config,
    strategy_config, wait_applied,
};
use ferry_semantics::drift_report::MAX_DRIFT_FIELDS;
use serde_json::{Value, json};

/// The drift report of the manifest at `ordinal`, if any.
fn drift_of(work: &ManifestWork, ordinal: i32) -> Option<&ManifestDrift> {
    manifest_status(work, ordinal)?.drift.as_ref()
}

/// The drifted field at `pointer` of the manifest at `ordinal`, if listed.
fn drifted<'a>(work: &'a ManifestWork, ordinal: i32, pointer: &str) -> Option<&'a DriftedField> {
    drift_of(work, ordinal)?
        .fields
        .iter()
        .find(|f| f.pointer == pointer)
}

/// A ReportOnly manifest config for one ConfigMap in `default`, leaving
/// `ignored` (OnSpokePresent) to the spoke.
fn report_only(name: &str, ignored: &[&str]) -> ferry_api::manifest_work::ManifestConfigOption {
    let mut config = strategy_config(
        "",
        "configmaps",
        "default",
        name,
        UpdateStrategyType::ReportOnly,
    );
    if !ignored.is_empty() {
        let with_rules = ssa_config(
            "",
            "configmaps",
            "default",
            name,
            false,
            &[(IgnoreCondition::OnSpokePresent, ignored)],
        );
        config.update_strategy = Some(UpdateStrategy {
            type_: UpdateStrategyType::ReportOnly,
            server_side_apply: with_rules
                .update_strategy
                .and_then(|s| s.server_side_apply)
                .or(Some(ServerSideApplyConfig::default())),
        });
    }
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_only_writes_nothing_and_reports_a_spoke_edit_until_the_spoke_matches_again() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let spoke = fleet
        .spoke("cluster-a")
        .api("v1", "ConfigMap", Some("default"));
    // The object belongs to someone else: ReportOnly only watches it.
    apply_as(
        &spoke,
        "observed",
        "owner-tool",
        &config_map(
            "default",
            "observed",
            json!({"a": "hub", "b": "spoke-only"}),
        ),
    )
    .await
    .expect("object on the spoke");
    let mut work = manifest_work(
        "cluster-a",
        "report-only",
        vec![config_map("default", "observed", json!({"a": "hub"}))],
    );
    work.spec.manifest_configs = vec![report_only("observed", &[])];
    let works = fleet.create_work(&work).await.expect("create");
    let applied = wait_applied(&works, "report-only").await.expect("applied");
    assert_eq!(drift_of(&applied, 0), None, "nothing differs yet");

    let edited = merge_as(
        &spoke,
        "observed",
        "kubectl-edit",
        &json!({"data": {"a": "spoke"}}),
    )
    .await
    .expect("spoke edit");
    let reported = wait_until(
        &works,
        "report-only",
        "the spoke edit reported",
        APPLY_TIMEOUT,
        |w| drifted(w, 0, "/data/a").is_some(),
    )
    .await
    .expect("drift reported");
    let field = drifted(&reported, 0, "/data/a").expect("listed");
    assert_eq!(field.hub_value, r#""hub""#);
    assert_eq!(field.spoke_value.as_deref(), Some(r#""spoke""#));
    assert_eq!(field.manager.as_deref(), Some("kubectl-edit"));
    assert_eq!(field.corrected_time, None, "ReportOnly corrects nothing");
    assert!(!field.first_seen_time.is_empty());
    assert_eq!(
        drift_of(&reported, 0).map(|d| (d.fields.len(), d.omitted)),
        Some((1, 0)),
        "a field the hub does not set is not drift"
    );
    // The report came after the agent read the edited object, and nothing
    // was written since: the spoke still holds the edit at its version, and
    // ferry owns no field of it.
    let live = read_json(&spoke, "observed").await;
    assert_eq!(live["data"]["a"], "spoke");
    assert_eq!(
        live["metadata"]["resourceVersion"].as_str(),
        edited.metadata.resource_version.as_deref()
    );
    let managers: Vec<&str> = live["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e["manager"].as_str())
        .collect();
    assert!(!managers.contains(&"ferry-agent"), "{managers:?}");
    assert!(live["metadata"]["ownerReferences"].is_null());

    merge_as(
        &spoke,
        "observed",
        "kubectl-edit",
        &json!({"data": {"a": "hub"}}),
    )
    .await
    .expect("spoke edit back");
    wait_until(
        &works,
        "report-only",
        "the drift report gone",
        APPLY_TIMEOUT,
        |w| manifest_status(w, 0).is_some() && drift_of(w, 0).is_none(),
    )
    .await
    .expect("the entry disappears when the spoke matches again");
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn correcting_strategies_revert_a_spoke_edit_and_record_the_correction() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let mut work = manifest_work(
        "cluster-a",
        "correcting",
        vec![
            config_map("default", "updated", json!({"a": "hub"})),
            config_map("default", "applied", json!({"a": "hub"})),
        ],
    );
    work.spec.manifest_configs = vec![ssa_config(
        "",
        "configmaps",
        "default",
        "applied",
        true,
        &[],
    )];
    let works = fleet.create_work(&work).await.expect("create");
    let applied = wait_applied(&works, "correcting").await.expect("applied");
    assert_eq!(drift_of(&applied, 0), None, "the first apply is not drift");
    assert_eq!(drift_of(&applied, 1), None, "the first apply is not drift");
    let spoke = fleet
        .spoke("cluster-a")
        .api("v1", "ConfigMap", Some("default"));
    for (ordinal, name) in [(0, "updated"), (1, "applied")] {
        merge_as(
            &spoke,
            name,
            "kubectl-edit",
            &json!({"data": {"a": "edited"}}),
        )
        .await
        .expect("spoke edit");
        let reported = wait_until(
            &works,
            "correcting",
            "the correction reported",
            APPLY_TIMEOUT,
            |w| drifted(w, ordinal, "/data/a").is_some_and(|f| f.corrected_time.is_some()),
        )
        .await
        .unwrap_or_else(|e| panic!("{name}: correction not reported: {e}"));
        let field = drifted(&reported, ordinal, "/data/a").expect("listed");
        assert_eq!(field.hub_value, r#""hub""#, "{name}");
        assert_eq!(field.spoke_value.as_deref(), Some(r#""edited""#), "{name}");
        assert_eq!(field.manager.as_deref(), Some("kubectl-edit"), "{name}");
        assert!(
            field.corrected_time.as_deref() >= Some(field.first_seen_time.as_str()),
            "{name}: corrected after it was seen"
        );
        assert_eq!(read_json(&spoke, name).await["data"]["a"], "hub", "{name}");
    }
    // The record of the first correction stays while the object matches.
    let now = works.get("correcting").await.expect("read work");
    assert!(drifted(&now, 0, "/data/a").is_some_and(|f| f.corrected_time.is_some()));

    // A new generation starts a clean record.
    let mut spec = now.spec.clone();
    spec.workload.manifests[0].0["data"]["a"] = json!("hub-2");
    let patch = json!({"spec": {"workload": {"manifests": spec.workload.manifests}}});
    works
        .patch(
            "correcting",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .expect("edit work");
    let next = wait_applied(&works, "correcting").await.expect("applied");
    assert_eq!(drift_of(&next, 0), None, "a hub change is not drift");
    assert_eq!(drift_of(&next, 1), None);
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignored_fields_are_never_reported_and_the_report_is_bounded() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let spoke = fleet
        .spoke("cluster-a")
        .api("v1", "ConfigMap", Some("default"));
    let keys = MAX_DRIFT_FIELDS + 4;
    let data: serde_json::Map<String, Value> = (0..keys)
        .map(|i| (format!("k{i:02}"), json!("hub")))
        .chain([("ignored".to_string(), json!("hub"))])
        .collect();
    let data = Value::Object(data);
    for name in ["small", "large"] {
        apply_as(
            &spoke,
            name,
            "owner-tool",
            &config_map("default", name, data.clone()),
        )
        .await
        .expect("object on the spoke");
    }
    let mut work = manifest_work(
        "cluster-a",
        "bounded",
        vec![
            config_map("default", "small", data.clone()),
            config_map("default", "large", data.clone()),
        ],
    );
    work.spec.manifest_configs = vec![
        report_only("small", &[".data.ignored"]),
        report_only("large", &[".data.ignored"]),
    ];
    let works = fleet.create_work(&work).await.expect("create");
    wait_applied(&works, "bounded").await.expect("applied");

    // One write changes an ignored field and a reported one together: the
    // pass that reports the second has seen the first.
    merge_as(
        &spoke,
        "small",
        "kubectl-edit",
        &json!({"data": {"ignored": "spoke", "k00": "spoke"}}),
    )
    .await
    .expect("spoke edit");
    // Every key of the other object at once: more than the bound.
    let all: serde_json::Map<String, Value> = (0..keys)
        .map(|i| (format!("k{i:02}"), json!("spoke")))
        .collect();
    merge_as(&spoke, "large", "kubectl-edit", &json!({"data": all}))
        .await
        .expect("spoke edit");
    let reported = wait_until(
        &works,
        "bounded",
        "both edits reported",
        APPLY_TIMEOUT,
        |w| drifted(w, 0, "/data/k00").is_some() && drift_of(w, 1).is_some(),
    )
    .await
    .expect("drift reported");
    assert_eq!(
        drifted(&reported, 0, "/data/ignored"),
        None,
        "an ignored field is never drift"
    );
    assert_eq!(drift_of(&reported, 0).map(|d| d.fields.len()), Some(1));
    let large = drift_of(&reported, 1).expect("large drift");
    assert_eq!(
        large.fields.len(),
        MAX_DRIFT_FIELDS,
        "listed up to the bound"
    );
    assert_eq!(
        large.omitted,
        i64::try_from(keys - MAX_DRIFT_FIELDS).expect("small"),
        "the rest counted"
    );
    assert_eq!(read_json(&spoke, "small").await["data"]["ignored"], "spoke");
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unchanged_drift_report_sends_nothing_to_the_hub() {
    let mut options = FleetOptions::with_spokes(&["cluster-a"]);
    options.audit_spokes = true;
    // A pass every second: each one finds the same drift again.
    options.resync = Duration::from_secs(1);
    let fleet = Fleet::start(options).await.expect("fleet starts");
    let spoke = fleet
        .spoke("cluster-a")
        .api("v1", "ConfigMap", Some("default"));
    apply_as(
        &spoke,
        "steady",
        "owner-tool",
        &config_map("default", "steady", json!({"a": "spoke"})),
    )
    .await
    .expect("object on the spoke");
    let mut work = manifest_work(
        "cluster-a",
        "steady",
        vec![config_map("default", "steady", json!({"a": "hub"}))],
    );
    work.spec.manifest_configs = vec![report_only("steady", &[])];
    let works = fleet.create_work(&work).await.expect("create");
    let reported = wait_until(&works, "steady", "the drift reported", APPLY_TIMEOUT, |w| {
        drifted(w, 0, "/data/a").is_some()
    })
    .await
    .expect("drift reported");
    // Counted on arrival, before the write: the report that put the drift
    // on the API server is already in this figure.
    let reports = hub_metric(fleet.hub_probes_addr, STATUS_REPORTS_RECEIVED)
        .await
        .expect("hub metrics");
    assert!(reports >= 1.0, "the hub counts the reports it received");
    let audit = fleet
        .spoke("cluster-a")
        .control_plane
        .info
        .audit_log
        .clone();
    // Five more whole passes, seen as the agent's reads of the object.
    let object = "/api/v1/namespaces/default/configmaps/steady";
    let start = reads_so_far(&audit, object);
    wait_for_passes(&audit, object, start, 5, APPLY_TIMEOUT)
        .await
        .expect("the agent keeps re-reading the object");
    assert_eq!(
        hub_metric(fleet.hub_probes_addr, STATUS_REPORTS_RECEIVED)
            .await
            .expect("hub metrics"),
        reports,
        "the agent sent a report although the drift did not change"
    );
    let now = works.get("steady").await.expect("read work");
    assert_eq!(
        now.metadata.resource_version, reported.metadata.resource_version,
        "the hub rewrote an unchanged status"
    );
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_side_apply_conflict_reports_the_field_and_the_manager_holding_it() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let mut work = manifest_work(
        "cluster-a",
        "conflict",
        vec![config_map("default", "shared", json!({"a": "hub"}))],
    );
    // Server-side apply without force: a field another manager took is a
    // conflict, never overwritten.
    work.spec.manifest_configs = vec![ssa_config(
        "",
        "configmaps",
        "default",
        "shared",
        false,
        &[],
    )];
    let works = fleet.create_work(&work).await.expect("create");
    wait_applied(&works, "conflict").await.expect("applied");
    let spoke = fleet
        .spoke("cluster-a")
        .api("v1", "ConfigMap", Some("default"));
    merge_as(
        &spoke,
        "shared",
        "kubectl-edit",
        &json!({"data": {"a": "edited"}}),
    )
    .await
    .expect("spoke edit");
    let reported = wait_until(
        &works,
        "conflict",
        "the conflict reported with its drift",
        APPLY_TIMEOUT,
        |w| {
            manifest_condition(w, 0, "Applied").is_some_and(|c| c.reason == "ApplyConflict")
                && drifted(w, 0, "/data/a").is_some()
        },
    )
    .await
    .expect("conflict reported");
    let field = drifted(&reported, 0, "/data/a").expect("listed");
    assert_eq!(field.manager.as_deref(), Some("kubectl-edit"));
    assert_eq!(field.spoke_value.as_deref(), Some(r#""edited""#));
    assert_eq!(field.corrected_time, None, "a conflict corrects nothing");
    assert_eq!(read_json(&spoke, "shared").await["data"]["a"], "edited");
    fleet.stop().await;
}
