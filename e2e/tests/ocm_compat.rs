//! OCM compatibility: the example works of OCM's own ManifestWork
//! documentation, changed only in `apiVersion`, are admitted under strict
//! field validation and behave as OCM documents them on real control planes.
//!
//! The `apply_` tests cover the fields of the apply side: the executor
//! (allowed and denied) and ignored fields (JSONPath, JSON pointer and jq).

use ferry_e2e::fleet::{Fleet, FleetOptions};
use ferry_e2e::spoke_actor::{apply_as, read_json};
use ferry_e2e::wait::wait_until;
use ferry_e2e::work_helpers::{APPLY_TIMEOUT, edit_and_wait, manifest_condition, wait_applied};
use ferry_hub::manifest_work::ManifestWork;
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::Client;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams, ValidationDirective};
use serde_json::{Value, json};

const CLUSTER: &str = "cluster1";

/// Writes an OCM example, its apiVersion changed to ferry's, with
/// server-side apply and strict field validation (what `kubectl apply
/// --server-side` sends): an unknown field would be refused.
async fn apply_ocm_example(works: &Api<ManifestWork>, mut example: Value) {
    example["apiVersion"] = json!("work.ferry.dev/v1alpha1");
    let name = example["metadata"]["name"]
        .as_str()
        .expect("named")
        .to_string();
    works
        .patch(
            &name,
            &PatchParams::apply("kubectl").validation(ValidationDirective::Strict),
            &Patch::Apply(&example),
        )
        .await
        .unwrap_or_else(|e| panic!("OCM example {name} admitted under strict validation: {e}"));
}

/// OCM's "Dynamic identity authorization" example.
fn executor_example() -> Value {
    json!({
        "apiVersion": "work.open-cluster-management.io/v1",
        "kind": "ManifestWork",
        "metadata": {"namespace": CLUSTER, "name": "example-manifestwork"},
        "spec": {
            "executor": {"subject": {"type": "ServiceAccount",
                "serviceAccount": {"namespace": "default", "name": "executor1"}}},
            "workload": {"manifests": [{
                "apiVersion": "v1", "data": {"a": "b"}, "kind": "ConfigMap",
                "metadata": {"namespace": "default", "name": "test"}}]}
        }
    })
}

/// Lets ServiceAccount default/executor1 apply and delete ConfigMaps in default.
async fn grant_executor1(client: &Client) {
    let meta = ObjectMeta {
        name: Some("executor1".into()),
        namespace: Some("default".into()),
        ..Default::default()
    };
    Api::<Role>::namespaced(client.clone(), "default")
        .create(
            &PostParams::default(),
            &Role {
                metadata: meta.clone(),
                rules: Some(vec![PolicyRule {
                    api_groups: Some(vec![String::new()]),
                    resources: Some(vec!["configmaps".into()]),
                    verbs: ["get", "create", "update", "patch", "delete"]
                        .map(String::from)
                        .to_vec(),
                    ..Default::default()
                }]),
            },
        )
        .await
        .expect("create role");
    Api::<RoleBinding>::namespaced(client.clone(), "default")
        .create(
            &PostParams::default(),
            &RoleBinding {
                metadata: meta,
                role_ref: RoleRef {
                    api_group: "rbac.authorization.k8s.io".into(),
                    kind: "Role".into(),
                    name: "executor1".into(),
                },
                subjects: Some(vec![Subject {
                    kind: "ServiceAccount".into(),
                    name: "executor1".into(),
                    namespace: Some("default".into()),
                    ..Default::default()
                }]),
            },
        )
        .await
        .expect("create role binding");
}

#[tokio::test]
async fn apply_executor_example_is_denied_without_rights_and_applies_once_granted() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&[CLUSTER]))
        .await
        .expect("fleet starts");
    let works: Api<ManifestWork> = Api::namespaced(fleet.hub_client.clone(), CLUSTER);
    apply_ocm_example(&works, executor_example()).await;
    let denied = wait_until(
        &works,
        "example-manifestwork",
        "the manifest refused",
        APPLY_TIMEOUT,
        |w| manifest_condition(w, 0, "Applied").is_some_and(|c| c.status == "False"),
    )
    .await
    .expect("refused");
    let applied = manifest_condition(&denied, 0, "Applied").expect("Applied");
    assert_eq!(applied.reason, "AppliedManifestFailed", "{applied:?}");
    assert!(
        applied
            .message
            .contains("ServiceAccount default/executor1 may not"),
        "{}",
        applied.message
    );
    let spoke = fleet.spoke(CLUSTER).api("v1", "ConfigMap", Some("default"));
    assert!(spoke.get_opt("test").await.expect("read").is_none());

    grant_executor1(&fleet.spoke(CLUSTER).client).await;
    wait_applied(&works, "example-manifestwork")
        .await
        .expect("applied once the executor may");
    assert_eq!(read_json(&spoke, "test").await["data"]["a"], "b");
    fleet.stop().await;
}

/// OCM's "Ignore fields in Server Side Apply" example with `ignore` as its
/// ignoreFields entry. OCM's page puts `force: true` under `updateStrategy`,
/// where neither OCM's API nor ferry's has such a field (strict validation
/// refuses it in both); it is left out.
fn ignore_fields_example(ignore: Value) -> Value {
    json!({
        "apiVersion": "work.open-cluster-management.io/v1",
        "kind": "ManifestWork",
        "metadata": {"namespace": CLUSTER, "name": "hello-work-demo"},
        "spec": {
            "workload": {"manifests": [{
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"namespace": "default", "name": "some-configmap"},
                "data": {"a": "hub-1"}}]},
            "manifestConfigs": [{
                "resourceIdentifier": {"resource": "configmaps", "namespace": "default",
                                       "name": "some-configmap"},
                "updateStrategy": {"type": "ServerSideApply",
                    "serverSideApply": {"ignoreFields": [ignore]}}}]
        }
    })
}

/// The example's data is left to the spoke once the ConfigMap exists:
/// a spoke actor's value survives a hub change, whichever way the field is
/// named.
async fn prove_data_is_ignored(ignore: Value) {
    let fleet = Fleet::start(FleetOptions::with_spokes(&[CLUSTER]))
        .await
        .expect("fleet starts");
    let works: Api<ManifestWork> = Api::namespaced(fleet.hub_client.clone(), CLUSTER);
    apply_ocm_example(&works, ignore_fields_example(ignore)).await;
    wait_applied(&works, "hello-work-demo")
        .await
        .expect("applied");
    let spoke = fleet.spoke(CLUSTER).api("v1", "ConfigMap", Some("default"));
    assert_eq!(
        read_json(&spoke, "some-configmap").await["data"]["a"],
        "hub-1"
    );
    apply_as(
        &spoke,
        "some-configmap",
        "another-actor",
        &json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"namespace": "default", "name": "some-configmap"},
                "data": {"a": "spoke"}}),
    )
    .await
    .expect("another actor changes data");
    edit_and_wait(&works, "hello-work-demo", |manifests| {
        manifests[0]["data"] = json!({"a": "hub-2"});
        manifests[0]["metadata"]["labels"] = json!({"edited": "yes"});
    })
    .await
    .expect("edit applied");
    let live = read_json(&spoke, "some-configmap").await;
    assert_eq!(
        live["metadata"]["labels"]["edited"], "yes",
        "other fields apply"
    );
    assert_eq!(live["data"]["a"], "spoke", "data is left to the spoke");
    fleet.stop().await;
}

#[tokio::test]
async fn apply_ignore_fields_example_with_json_paths() {
    prove_data_is_ignored(json!({"condition": "OnSpokePresent", "jsonPaths": [".data"]})).await;
}

#[tokio::test]
async fn apply_ignore_fields_example_with_a_json_pointer_and_no_condition() {
    prove_data_is_ignored(json!({"jsonPointers": ["/data"]})).await;
}

#[tokio::test]
async fn apply_ignore_fields_example_with_a_jq_path_and_no_condition() {
    prove_data_is_ignored(json!({"jqPathExpressions": [".data"]})).await;
}
