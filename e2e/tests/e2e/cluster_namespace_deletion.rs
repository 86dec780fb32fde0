//! Deleting a cluster's namespace on the hub is never one step (issue 49):
//! it would delete every work there, and through their finalizers what the
//! cluster's agent applied. The join labels the namespace as the cluster's
//! (also one that existed before the join), and the API server refuses its
//! deletion until a platform admin annotates it
//! `work.ferry.dev/confirm-deletion=true`, with no hub running; other
//! namespaces are not matched.

use std::time::Duration;

use ferry_api::contract::{CLUSTER_NAMESPACE_LABEL, CONFIRM_DELETION_ANNOTATION};
use ferry_e2e::harness::controlplane::{ControlPlane, ControlPlaneOptions};
use ferry_e2e::helpers::admission::{refusal, until_refused_by};
use ferry_hub::admission::cluster_namespace_policy::CLUSTER_NAMESPACE_POLICY_NAME;
use ferry_hub::crds::install_crds;
use ferry_hub::join::hub_side::prepare_hub;
use k8s_openapi::api::core::v1::Namespace;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;

fn namespace(name: &str) -> Namespace {
    Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_cluster_namespace_is_refused_until_a_platform_admin_confirms_it() {
    let hub = ControlPlane::start("hub", ControlPlaneOptions::default())
        .await
        .expect("control plane");
    let admin = hub.client().await.expect("admin client");
    install_crds(&admin).await.expect("CRDs and policies");
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    // spoke-b's namespace existed before its join; "apps" is no cluster's.
    for name in ["spoke-b", "apps"] {
        namespaces
            .create(&PostParams::default(), &namespace(name))
            .await
            .expect("create namespace");
    }
    for cluster in ["spoke-a", "spoke-b"] {
        prepare_hub(&admin, cluster, "agent", true)
            .await
            .expect("join on the hub side");
        let made = namespaces.get(cluster).await.expect("cluster namespace");
        assert_eq!(
            made.labels()
                .get(CLUSTER_NAMESPACE_LABEL)
                .map(String::as_str),
            Some(cluster),
            "the join labels {cluster}'s namespace"
        );
    }
    let dry = DeleteParams {
        dry_run: true,
        ..DeleteParams::default()
    };

    // No hub process runs: the API server itself refuses.
    let refused = until_refused_by(
        CLUSTER_NAMESPACE_POLICY_NAME,
        Duration::from_secs(60),
        || async {
            namespaces
                .delete("spoke-a", &dry)
                .await
                .map(|_| ())
                .map_err(refusal)
        },
    )
    .await
    .expect_err("deleting a cluster's namespace is refused");
    println!("refused: {refused}");
    assert!(
        refused.contains("namespace spoke-a is the namespace of cluster spoke-a")
            && refused.contains(CONFIRM_DELETION_ANNOTATION),
        "the refusal names the namespace, the cluster and the annotation: {refused}"
    );
    let before = namespaces
        .delete("spoke-b", &dry)
        .await
        .expect_err("a namespace labelled by a later join too");
    assert!(
        refusal(before).contains(CLUSTER_NAMESPACE_POLICY_NAME),
        "spoke-b"
    );
    namespaces
        .delete("apps", &dry)
        .await
        .expect("a namespace of no cluster is not guarded");

    // Confirmed, it goes.
    namespaces
        .patch(
            "spoke-a",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {CONFIRM_DELETION_ANNOTATION: "true"}}}),
            ),
        )
        .await
        .expect("annotate");
    namespaces
        .delete("spoke-a", &DeleteParams::default())
        .await
        .expect("a confirmed deletion is admitted");
    namespaces
        .get("spoke-b")
        .await
        .expect("the unconfirmed namespace stays");
}
