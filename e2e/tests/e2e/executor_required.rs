//! Tenant works name an executor (issue 48, item 4): in a namespace
//! labelled `work.ferry.dev/require-executor=true` the hub API server
//! itself refuses a ManifestWork, or a ManifestWorkReplicaSet's template,
//! that names no executor, so a tenant cannot get the agent's own rights by
//! leaving the field out. Checked with no hub process running (the policy
//! is the API server's), as a tenant holding every right on works and
//! replica sets, `execute-as` included: only the policy stands in the way.
//! Unlabelled namespaces keep OCM's behaviour; a work admitted before the
//! label can still be relabelled, finalized and deleted, but not changed.

use std::time::Duration;

use ferry_api::contract::REQUIRE_EXECUTOR_LABEL;
use ferry_e2e::harness::controlplane::{ControlPlane, ControlPlaneOptions};
use ferry_e2e::helpers::admission::{dry_run_create, until_refused_by};
use ferry_e2e::helpers::namespaces::create_labelled_namespace;
use ferry_e2e::helpers::tenant_rbac::grant_work_resources;
use ferry_hub::admission::executor_required_policy::EXECUTOR_REQUIRED_POLICY_NAME;
use ferry_hub::crds::install_crds;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde_json::{Value, json};

const TENANT: &str = "mallory";
/// How long the API server may take to enforce a new policy or label.
const PROPAGATION: Duration = Duration::from_secs(60);

fn api(client: &kube::Client, namespace: &str, kind: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("work.ferry.dev", "v1alpha1", kind);
    Api::namespaced_with(client.clone(), namespace, &ApiResource::from_gvk(&gvk))
}

fn spec(runs_as: Option<&str>) -> Value {
    let mut spec = json!({"workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cfg", "namespace": "default"}, "data": {"a": "1"}}]}});
    if let Some(name) = runs_as {
        spec["executor"] = json!({"subject": {"type": "ServiceAccount",
            "serviceAccount": {"namespace": "default", "name": name}}});
    }
    spec
}

fn work(namespace: &str, name: &str, runs_as: Option<&str>) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "work.ferry.dev/v1alpha1", "kind": "ManifestWork",
        "metadata": {"name": name, "namespace": namespace}, "spec": spec(runs_as),
    }))
    .expect("a work")
}

fn replica_set(namespace: &str, name: &str, runs_as: Option<&str>) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "work.ferry.dev/v1alpha1", "kind": "ManifestWorkReplicaSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"manifestWorkTemplate": spec(runs_as), "placementRefs": [{"name": "all"}]},
    }))
    .expect("a replica set")
}

async fn create_namespace(admin: &kube::Client, name: &str, requires: bool) {
    let labels: &[(&str, &str)] = if requires {
        &[(REQUIRE_EXECUTOR_LABEL, "true")]
    } else {
        &[]
    };
    create_labelled_namespace(admin, name, labels).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_labelled_namespace_refuses_works_and_replica_sets_without_an_executor() {
    let hub = ControlPlane::start("hub", ControlPlaneOptions::default())
        .await
        .expect("control plane");
    let admin = hub.client().await.expect("admin client");
    install_crds(&admin).await.expect("CRDs and policies");
    create_namespace(&admin, "spoke-a", false).await;
    create_namespace(&admin, "spoke-b", true).await;
    create_namespace(&admin, "team-a", true).await;
    for namespace in ["spoke-a", "spoke-b", "team-a"] {
        grant_work_resources(
            &admin,
            namespace,
            "tenant",
            TENANT,
            &["manifestworks", "manifestworkreplicasets"],
        )
        .await;
    }
    let tenant = hub.client_as(TENANT).await.expect("tenant client");

    let works_b = api(&tenant, "spoke-b", "ManifestWork");
    let bare = work("spoke-b", "bare", None);
    let refused = until_refused_by(EXECUTOR_REQUIRED_POLICY_NAME, PROPAGATION, || {
        dry_run_create(&works_b, &bare)
    })
    .await
    .expect_err("a work without an executor is refused in a labelled namespace");
    println!("refused: {refused}");
    assert!(
        refused.contains(TENANT) && refused.contains("without an executor"),
        "the refusal names the requester and why: {refused}"
    );
    dry_run_create(&works_b, &work("spoke-b", "runs-as", Some("deployer")))
        .await
        .expect("a work naming an executor is admitted");

    let sets = api(&tenant, "team-a", "ManifestWorkReplicaSet");
    let refused = dry_run_create(&sets, &replica_set("team-a", "bare", None))
        .await
        .expect_err("a replica set whose template names no executor is refused");
    assert!(refused.contains(EXECUTOR_REQUIRED_POLICY_NAME), "{refused}");
    dry_run_create(&sets, &replica_set("team-a", "runs-as", Some("deployer")))
        .await
        .expect("a replica set naming an executor is admitted");

    // Unlabelled: OCM's behaviour, no executor needed.
    let works_a = api(&tenant, "spoke-a", "ManifestWork");
    dry_run_create(&works_a, &work("spoke-a", "bare", None))
        .await
        .expect("an unlabelled namespace admits a work without an executor");

    // A work admitted before the namespace was labelled: its spec cannot
    // change any more, but its metadata can, and it can be deleted.
    works_a
        .create(&PostParams::default(), &work("spoke-a", "older", None))
        .await
        .expect("created before the label");
    Api::<Namespace>::all(admin.clone())
        .patch(
            "spoke-a",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {REQUIRE_EXECUTOR_LABEL: "true"}}})),
        )
        .await
        .expect("label spoke-a");
    let changed = until_refused_by(EXECUTOR_REQUIRED_POLICY_NAME, PROPAGATION, || async {
        works_a
            .patch(
                "older",
                &PatchParams {
                    dry_run: true,
                    ..Default::default()
                },
                &Patch::Merge(
                    json!({"spec": {"workload": {"manifests": [{"apiVersion": "v1",
                    "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "default"},
                    "data": {"a": "2"}}]}}}),
                ),
            )
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    })
    .await;
    assert!(
        changed.is_err_and(|m| m.contains(EXECUTOR_REQUIRED_POLICY_NAME)),
        "a spec change without an executor is refused once labelled"
    );
    works_a
        .patch(
            "older",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"note": "seen"}}})),
        )
        .await
        .expect("a metadata-only update is not checked");
    works_a
        .delete("older", &DeleteParams::default())
        .await
        .expect("the deletion is not checked");
}
