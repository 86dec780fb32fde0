//! OnSpokePresent: once the object exists, the listed fields are never written
//! again, whatever the hub does — and never deleted by omission either, both
//! when ferry is their only owner and when another manager owns or co-owns them.
//! One test per kind of path: a single field, a whole structure, a list item
//! selected by a filter, and a map key with dots and slashes.

use std::time::Duration;

use ferry_api::manifest_work::IgnoreCondition;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::passes::{reads_so_far, wait_for_passes};
use ferry_e2e::helpers::spoke_actor::apply_as;
use ferry_e2e::helpers::work_helpers::{
    APPLY_TIMEOUT, edit_and_wait, manifest_work, ssa_config, wait_applied,
};
use serde_json::{Value, json};

const RESYNC: Duration = Duration::from_secs(2);

/// One ignored path on one kind of object.
struct Case {
    api_version: &'static str,
    kind: &'static str,
    group: &'static str,
    resource: &'static str,
    path: &'static str,
    /// The manifest with `ignored` at the path and `other` in an unrelated field.
    manifest: fn(ignored: &Value, other: &str) -> Value,
    /// The ignored value as found in a live object.
    read_ignored: fn(&Value) -> Value,
    /// The unrelated field as found in a live object.
    read_other: fn(&Value) -> Value,
    /// What a spoke actor applies to own the ignored field with `value`.
    actor_patch: fn(value: &Value) -> Value,
    /// Values: as created by the hub, as set by the spoke actor, as later set by the hub.
    values: [Value; 3],
}

async fn prove_on_spoke_present(case: Case) {
    let mut options = FleetOptions::with_spokes(&["cluster-a"]);
    options.resync = RESYNC;
    options.audit_spokes = true;
    let fleet = Fleet::start(options).await.expect("fleet starts");
    let [created, spoke_value, hub_value] = case.values.clone();
    let mut work = manifest_work("cluster-a", "w", vec![(case.manifest)(&created, "o1")]);
    work.spec.manifest_configs = vec![ssa_config(
        case.group,
        case.resource,
        "default",
        "target",
        false,
        &[(IgnoreCondition::OnSpokePresent, &[case.path])],
    )];
    let works = fleet.create_work(&work).await.expect("create work");
    wait_applied(&works, "w").await.expect("applied");
    let spoke = fleet
        .spoke("cluster-a")
        .api(case.api_version, case.kind, Some("default"));
    let live = || async {
        serde_json::to_value(spoke.get("target").await.expect("read spoke object")).expect("json")
    };
    let now = live().await;
    assert_eq!(
        (case.read_ignored)(&now),
        created,
        "create sets the hub value"
    );

    // ferry is the field's only owner: a hub change to it is not applied, a
    // hub change elsewhere is, and the field is neither deleted nor reset.
    let rewrite = |other: &'static str| {
        let hub_value = hub_value.clone();
        let manifest = case.manifest;
        move |manifests: &mut Vec<Value>| manifests[0] = manifest(&hub_value, other)
    };
    edit_and_wait(&works, "w", rewrite("o2"))
        .await
        .expect("edit applied");
    let now = live().await;
    assert_eq!(
        (case.read_other)(&now),
        json!("o2"),
        "a hub change to another field is applied"
    );
    assert_eq!(
        (case.read_ignored)(&now),
        created,
        "sole owner: ignored field kept, not deleted, not reset"
    );

    // Another manager co-owns the field with the same value.
    apply_as(
        &spoke,
        "target",
        "spoke-actor",
        &(case.actor_patch)(&created),
    )
    .await
    .expect("co-own");
    edit_and_wait(&works, "w", rewrite("o3"))
        .await
        .expect("edit applied");
    let now = live().await;
    assert_eq!((case.read_other)(&now), json!("o3"));
    assert_eq!(
        (case.read_ignored)(&now),
        created,
        "co-owned: ignored field kept"
    );

    // Another manager takes the field over with its own value.
    apply_as(
        &spoke,
        "target",
        "spoke-actor",
        &(case.actor_patch)(&spoke_value),
    )
    .await
    .expect("take over");
    edit_and_wait(&works, "w", rewrite("o4"))
        .await
        .expect("edit applied");
    let now = live().await;
    assert_eq!((case.read_other)(&now), json!("o4"));
    assert_eq!(
        (case.read_ignored)(&now),
        spoke_value,
        "a spoke change survives re-apply"
    );

    // Two whole passes of the agent over the object (its reads in the
    // spoke's audit log), in which it could wrongly revert.
    let audit = &fleet.spoke("cluster-a").control_plane.info.audit_log;
    let prefix = if case.group.is_empty() { "api" } else { "apis" };
    let uri = format!(
        "/{prefix}/{}/namespaces/default/{}/target",
        case.api_version, case.resource
    );
    let start = reads_so_far(audit, &uri);
    wait_for_passes(audit, &uri, start, 2, APPLY_TIMEOUT)
        .await
        .expect("the agent keeps resyncing");
    assert_eq!(
        (case.read_ignored)(&live().await),
        spoke_value,
        "a spoke change survives resync"
    );
    fleet.stop().await;
}

fn deployment(replicas: &Value, image: &Value, tier: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "target", "namespace": "default", "labels": {"tier": tier}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "target"}},
            "template": {"metadata": {"labels": {"app": "target"}}, "spec": {"containers": [
                {"name": "app", "image": image},
                {"name": "helper", "image": "busybox:1.36"}
            ]}}
        }
    })
}

fn config_map(data: &Value, annotation: &Value, tier: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "target", "namespace": "default", "labels": {"tier": tier},
                     "annotations": {"example.com/owner": annotation}},
        "data": data
    })
}

fn tier(live: &Value) -> Value {
    live["metadata"]["labels"]["tier"].clone()
}

fn app_image(live: &Value) -> Value {
    live["spec"]["template"]["spec"]["containers"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == "app"))
        .map(|c| c["image"].clone())
        .unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_spoke_present_keeps_a_single_field_spec_replicas() {
    prove_on_spoke_present(Case {
        api_version: "apps/v1",
        kind: "Deployment",
        group: "apps",
        resource: "deployments",
        path: ".spec.replicas",
        manifest: |replicas, other| deployment(replicas, &json!("nginx:1.27"), other),
        read_ignored: |live| live["spec"]["replicas"].clone(),
        read_other: tier,
        actor_patch: |replicas| {
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                   "metadata": {"name": "target", "namespace": "default"},
                   "spec": {"replicas": replicas}})
        },
        values: [json!(3), json!(5), json!(9)],
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_spoke_present_keeps_a_whole_structure_data() {
    prove_on_spoke_present(Case {
        api_version: "v1",
        kind: "ConfigMap",
        group: "",
        resource: "configmaps",
        path: ".data",
        manifest: |data, other| config_map(data, &json!("team-a"), other),
        read_ignored: |live| live["data"].clone(),
        read_other: tier,
        actor_patch: |data| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "target", "namespace": "default"}, "data": data})
        },
        values: [
            json!({"a": "1"}),
            json!({"a": "spoke"}),
            json!({"a": "hub", "b": "2"}),
        ],
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_spoke_present_keeps_a_list_item_field_selected_by_a_filter() {
    prove_on_spoke_present(Case {
        api_version: "apps/v1",
        kind: "Deployment",
        group: "apps",
        resource: "deployments",
        path: "$.spec.template.spec.containers[?@.name=='app'].image",
        manifest: |image, other| deployment(&json!(2), image, other),
        read_ignored: app_image,
        read_other: tier,
        actor_patch: |image| {
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
                   "metadata": {"name": "target", "namespace": "default"},
                   "spec": {"template": {"spec": {"containers": [{"name": "app", "image": image}]}}}})
        },
        values: [json!("nginx:1.27"), json!("nginx:1.27-spoke"), json!("nginx:1.28")],
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_spoke_present_keeps_a_map_key_with_dots_and_slashes() {
    prove_on_spoke_present(Case {
        api_version: "v1",
        kind: "ConfigMap",
        group: "",
        resource: "configmaps",
        path: "$.metadata.annotations['example.com/owner']",
        manifest: |owner, other| config_map(&json!({"x": "1"}), owner, other),
        read_ignored: |live| live["metadata"]["annotations"]["example.com/owner"].clone(),
        read_other: tier,
        actor_patch: |owner| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "target", "namespace": "default",
                                "annotations": {"example.com/owner": owner}}})
        },
        values: [json!("team-a"), json!("team-spoke"), json!("team-hub")],
    })
    .await;
}
