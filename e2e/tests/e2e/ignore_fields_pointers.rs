//! `ignoreFields[].jsonPointers` (RFC 6901) as OCM writes them: an entry with
//! pointers only, no `jsonPaths` and no `condition` (which defaults to
//! `OnSpokePresent`), is admitted under strict field validation, and the
//! pointed-at field keeps the spoke's value while the hub's other changes
//! apply; a pointer that does not parse fails its manifest with its own
//! reason, `InvalidJsonPointer`, naming the pointer, while the other
//! manifests of the work still apply.

use ferry_api::manifest_work::ManifestWork;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::spoke_actor::{apply_as, read_json};
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{
    APPLY_TIMEOUT, edit_and_wait, manifest_condition, wait_applied,
};
use kube::api::{Api, Patch, PatchParams, ValidationDirective};
use serde_json::{Value, json};

const CLUSTER: &str = "cluster-a";

fn cm(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "default"}, "data": data})
}

/// Writes work `name` with server-side apply and strict field validation,
/// the way `kubectl apply --server-side` sends an OCM work.
async fn apply_strict(works: &Api<ManifestWork>, name: &str, spec: Value) {
    let work = json!({
        "apiVersion": "work.ferry.dev/v1alpha1",
        "kind": "ManifestWork",
        "metadata": {"name": name, "namespace": CLUSTER},
        "spec": spec,
    });
    works
        .patch(
            name,
            &PatchParams::apply("test-user").validation(ValidationDirective::Strict),
            &Patch::Apply(&work),
        )
        .await
        .unwrap_or_else(|e| panic!("work {name} admitted under strict validation: {e}"));
}

fn pointer_config(name: &str, pointers: &[&str]) -> Value {
    json!({
        "resourceIdentifier": {"resource": "configmaps", "name": name, "namespace": "default"},
        "updateStrategy": {"type": "ServerSideApply", "serverSideApply": {
            "ignoreFields": [{"jsonPointers": pointers}]}}
    })
}

/// A ConfigMap whose annotation `example.com/owner` is `owner`.
fn annotated(owner: &str, other: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": "target", "namespace": "default",
                        "annotations": {"example.com/owner": owner}},
           "data": {"other": other}})
}

#[tokio::test]
async fn a_json_pointer_keeps_the_spoke_value_while_other_hub_changes_apply() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&[CLUSTER]))
        .await
        .expect("fleet starts");
    let works: Api<ManifestWork> = Api::namespaced(fleet.hub_client.clone(), CLUSTER);
    apply_strict(
        &works,
        "w",
        json!({
            "workload": {"manifests": [annotated("hub-1", "o1")]},
            "manifestConfigs": [pointer_config("target", &["/metadata/annotations/example.com~1owner"])],
        }),
    )
    .await;
    wait_applied(&works, "w").await.expect("applied");
    let spoke = fleet.spoke(CLUSTER).api("v1", "ConfigMap", Some("default"));
    let owner = |live: &Value| live["metadata"]["annotations"]["example.com/owner"].clone();
    let live = read_json(&spoke, "target").await;
    assert_eq!(owner(&live), "hub-1", "create sets the hub value");

    apply_as(
        &spoke,
        "target",
        "spoke-actor",
        &json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "target", "namespace": "default",
                             "annotations": {"example.com/owner": "spoke"}}}),
    )
    .await
    .expect("a spoke actor takes the field over");
    edit_and_wait(&works, "w", |manifests| {
        manifests[0] = annotated("hub-2", "o2");
    })
    .await
    .expect("edit applied");
    let live = read_json(&spoke, "target").await;
    assert_eq!(
        live["data"]["other"], "o2",
        "a hub change elsewhere applies"
    );
    assert_eq!(
        owner(&live),
        "spoke",
        "the pointed-at field keeps the spoke's value"
    );
    fleet.stop().await;
}

#[tokio::test]
async fn an_invalid_json_pointer_fails_only_its_manifest_with_its_own_reason() {
    // No admission: what the webhook would refuse reaches the agent, which
    // must report it rather than apply the manifest without the ignore.
    let fleet = Fleet::start(FleetOptions {
        admission: false,
        ..FleetOptions::with_spokes(&[CLUSTER])
    })
    .await
    .expect("fleet starts");
    let works: Api<ManifestWork> = Api::namespaced(fleet.hub_client.clone(), CLUSTER);
    apply_strict(
        &works,
        "w",
        json!({
            "workload": {"manifests": [
                cm("broken", json!({"a": "1"})),
                cm("fine", json!({"a": "1"}))]},
            "manifestConfigs": [pointer_config("broken", &["data/a"])],
        }),
    )
    .await;
    let work = wait_until(
        &works,
        "w",
        "manifest 0 reports its pointer",
        APPLY_TIMEOUT,
        |w| {
            manifest_condition(w, 0, "Applied").is_some_and(|c| c.status == "False")
                && manifest_condition(w, 1, "Applied").is_some_and(|c| c.status == "True")
        },
    )
    .await
    .expect("both manifests reported");
    let applied = manifest_condition(&work, 0, "Applied").expect("condition");
    assert_eq!(applied.reason, "InvalidJsonPointer", "{applied:?}");
    assert!(
        applied.message.contains("\"data/a\""),
        "{}",
        applied.message
    );
    let spoke = fleet.spoke(CLUSTER).api("v1", "ConfigMap", Some("default"));
    assert!(
        spoke.get_opt("broken").await.expect("read spoke").is_none(),
        "a manifest with an unusable ignore rule is not applied"
    );
    assert_eq!(read_json(&spoke, "fine").await["data"]["a"], "1");
    fleet.stop().await;
}
