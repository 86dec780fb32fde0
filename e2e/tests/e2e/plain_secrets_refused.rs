//! Nothing in plain text on the hub (issue 52): in a namespace labelled
//! `work.ferry.dev/require-sealed-secrets=true` the hub API server itself
//! refuses a ManifestWork, or a ManifestWorkReplicaSet's template, that
//! carries a plain `v1` Secret, and admits the same Secret sealed to a
//! cluster's key. Checked with no hub process running (the policy is the
//! API server's), as a tenant holding every right on works and replica
//! sets: only the policy stands in the way. Unlabelled namespaces keep
//! OCM's behaviour; a work admitted before the label can still be
//! relabelled and deleted, but not changed while it holds a plain Secret.
//! The check fits the API server's cost budget at the largest work.

use std::time::{Duration, Instant};

use ferry_api::contract::REQUIRE_SEALED_SECRETS_LABEL;
use ferry_e2e::harness::controlplane::{ControlPlane, ControlPlaneOptions};
use ferry_e2e::helpers::admission::{dry_run_create, refusal, until_refused_by};
use ferry_e2e::helpers::namespaces::create_labelled_namespace;
use ferry_e2e::helpers::tenant_rbac::grant_work_resources;
use ferry_hub::admission::sealed_secrets_policy::SEALED_SECRETS_POLICY_NAME;
use ferry_hub::crds::install_crds;
use ferry_semantics::sealing::{SEALED_KIND, SealTo, seal};
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

fn cm(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "app"}, "data": {"a": "1"}})
}

fn secret() -> Value {
    json!({"apiVersion": "v1", "kind": "Secret",
           "metadata": {"name": "db", "namespace": "app"},
           "stringData": {"password": "hunter2"}})
}

/// `secret()` sealed to a fresh key of cluster `spoke-a`, as `kubectl ferry
/// seal` makes it.
fn sealed_secret() -> Value {
    let key = age::x25519::Identity::generate();
    let sealed = seal(
        &secret(),
        &[SealTo {
            cluster: "spoke-a".into(),
            public_key: key.to_public().to_string(),
        }],
    )
    .expect("seal");
    assert_eq!(sealed["kind"], SEALED_KIND);
    sealed
}

fn work(namespace: &str, name: &str, manifests: Vec<Value>) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "work.ferry.dev/v1alpha1", "kind": "ManifestWork",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"workload": {"manifests": manifests}},
    }))
    .expect("a work")
}

fn replica_set(namespace: &str, name: &str, manifests: Vec<Value>) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "work.ferry.dev/v1alpha1", "kind": "ManifestWorkReplicaSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"manifestWorkTemplate": {"workload": {"manifests": manifests}},
                 "placementRefs": [{"name": "all"}]},
    }))
    .expect("a replica set")
}

async fn create_namespace(admin: &kube::Client, name: &str, requires: bool) {
    let labels: &[(&str, &str)] = if requires {
        &[(REQUIRE_SEALED_SECRETS_LABEL, "true")]
    } else {
        &[]
    };
    create_labelled_namespace(admin, name, labels).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_labelled_namespace_refuses_plain_secrets_and_admits_sealed_ones() {
    let hub = ControlPlane::start("hub", ControlPlaneOptions::default())
        .await
        .expect("control plane");
    let admin = hub.client().await.expect("admin client");
    install_crds(&admin).await.expect("CRDs and policies");
    create_namespace(&admin, "spoke-a", false).await;
    create_namespace(&admin, "team-a", true).await;
    for namespace in ["spoke-a", "team-a"] {
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

    let works = api(&tenant, "team-a", "ManifestWork");
    let plain = work("team-a", "plain", vec![cm("cfg"), secret()]);
    let refused = until_refused_by(SEALED_SECRETS_POLICY_NAME, PROPAGATION, || {
        dry_run_create(&works, &plain)
    })
    .await
    .expect_err("a work with a plain Secret is refused in a labelled namespace");
    println!("refused: {refused}");
    for needed in [
        TENANT,
        "spec.workload.manifests[1] is v1 Secret app/db",
        &format!("{REQUIRE_SEALED_SECRETS_LABEL}=true"),
        "kubectl ferry seal",
    ] {
        assert!(
            refused.contains(needed),
            "the refusal says {needed:?}: {refused}"
        );
    }
    dry_run_create(
        &works,
        &work("team-a", "sealed", vec![cm("cfg"), sealed_secret()]),
    )
    .await
    .expect("the same Secret sealed is admitted");

    let sets = api(&tenant, "team-a", "ManifestWorkReplicaSet");
    let refused = dry_run_create(&sets, &replica_set("team-a", "plain", vec![secret()]))
        .await
        .expect_err("a replica set whose template holds a plain Secret is refused");
    assert!(
        refused.contains(SEALED_SECRETS_POLICY_NAME)
            && refused.contains("spec.manifestWorkTemplate.workload.manifests[0]"),
        "{refused}"
    );
    dry_run_create(
        &sets,
        &replica_set("team-a", "sealed", vec![sealed_secret()]),
    )
    .await
    .expect("a replica set whose template holds a sealed Secret is admitted");

    // The largest work the API server admits (500 manifests) is checked
    // within the policy's run-time cost budget, its message included.
    let mut many: Vec<Value> = (0..500).map(|i| cm(&format!("many-{i}"))).collect();
    let started = Instant::now();
    dry_run_create(&works, &work("team-a", "many", many.clone()))
        .await
        .expect("500 manifests without a Secret are admitted within the cost budget");
    eprintln!("500 manifests admitted in {:?}", started.elapsed());
    many[499] = secret();
    let started = Instant::now();
    let refused = dry_run_create(&works, &work("team-a", "many", many))
        .await
        .expect_err("a plain Secret last of 500 manifests is refused");
    eprintln!(
        "a plain Secret among 500 refused in {:?}",
        started.elapsed()
    );
    assert!(
        refused.contains("spec.workload.manifests[499] is v1 Secret app/db"),
        "{refused}"
    );

    // Unlabelled: OCM's behaviour, a plain Secret travels.
    let works_a = api(&tenant, "spoke-a", "ManifestWork");
    works_a
        .create(
            &PostParams::default(),
            &work("spoke-a", "older", vec![secret()]),
        )
        .await
        .expect("an unlabelled namespace admits a plain Secret");

    // Labelled afterwards: its spec cannot change while it holds the plain
    // Secret, but its metadata can, and it can be deleted.
    Api::<Namespace>::all(admin.clone())
        .patch(
            "spoke-a",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {REQUIRE_SEALED_SECRETS_LABEL: "true"}}})),
        )
        .await
        .expect("label spoke-a");
    let changed = until_refused_by(SEALED_SECRETS_POLICY_NAME, PROPAGATION, || async {
        works_a
            .patch(
                "older",
                &PatchParams {
                    dry_run: true,
                    ..Default::default()
                },
                &Patch::Merge(json!({"spec": {"workload": {"manifests": [secret(), cm("cfg")]}}})),
            )
            .await
            .map(|_| ())
            .map_err(refusal)
    })
    .await;
    assert!(
        changed.is_err_and(|m| m.contains(SEALED_SECRETS_POLICY_NAME)),
        "a spec change keeping the plain Secret is refused once labelled"
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
    hub.stop().await;
}
