//! Deleting one of ferry's CRDs is never one step (issue 49, item 1): the
//! API server refuses the deletion of a CRD of ferry's groups until a
//! platform admin annotates it `work.ferry.dev/confirm-deletion=true`, with
//! no hub running; CRDs of other groups are not matched. Before the policy,
//! `kubectl delete crd manifestworkreplicasets.work.ferry.dev` removed every
//! replica set's objects from every cluster within seconds.

use std::time::Duration;

use ferry_api::contract::CONFIRM_DELETION_ANNOTATION;
use ferry_e2e::harness::controlplane::{ControlPlane, ControlPlaneOptions};
use ferry_e2e::helpers::admission::{refusal, until_refused_by};
use ferry_e2e::helpers::wait::wait_deleted;
use ferry_e2e::helpers::work_helpers::schemaless_crd;
use ferry_hub::admission::crd_deletion_policy::CRD_DELETION_POLICY_NAME;
use ferry_hub::crds::install_crds;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

const REPLICA_SETS: &str = "manifestworkreplicasets.work.ferry.dev";
const WORKS: &str = "manifestworks.work.ferry.dev";
/// A CRD of another group.
const WIDGETS: &str = "widgets.example.dev";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_one_of_ferrys_crds_is_refused_until_a_platform_admin_confirms_it() {
    let hub = ControlPlane::start("hub", ControlPlaneOptions::default())
        .await
        .expect("control plane");
    let admin = hub.client().await.expect("admin client");
    install_crds(&admin).await.expect("CRDs and policies");
    let crds: Api<CustomResourceDefinition> = Api::all(admin);
    let widgets: CustomResourceDefinition =
        serde_json::from_value(schemaless_crd("example.dev", "widgets", "Widget")).expect("CRD");
    crds.create(&PostParams::default(), &widgets)
        .await
        .expect("create a CRD of another group");
    let dry = DeleteParams {
        dry_run: true,
        ..DeleteParams::default()
    };

    // The policy takes effect once the API server has loaded it.
    let refused = until_refused_by(
        CRD_DELETION_POLICY_NAME,
        Duration::from_secs(60),
        || async {
            crds.delete(REPLICA_SETS, &dry)
                .await
                .map(|_| ())
                .map_err(refusal)
        },
    )
    .await
    .expect_err("the deletion of a ferry CRD is refused");
    println!("refused: {refused}");
    assert!(
        refused.contains(CRD_DELETION_POLICY_NAME)
            && refused.contains(REPLICA_SETS)
            && refused.contains(CONFIRM_DELETION_ANNOTATION),
        "the refusal names the policy, the CRD and the annotation: {refused}"
    );
    let works = crds.delete(WORKS, &dry).await.expect_err("works CRD too");
    assert!(
        works.to_string().contains(CRD_DELETION_POLICY_NAME),
        "{works}"
    );
    crds.delete(WIDGETS, &dry)
        .await
        .expect("a CRD of another group is not ferry's to guard");

    // Confirmed, it goes.
    crds.patch(
        REPLICA_SETS,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {CONFIRM_DELETION_ANNOTATION: "true"}}})),
    )
    .await
    .expect("annotate");
    crds.delete(REPLICA_SETS, &DeleteParams::default())
        .await
        .expect("a confirmed deletion is admitted");
    wait_deleted(&crds, REPLICA_SETS, "CRD deleted", Duration::from_secs(60))
        .await
        .expect("the CRD goes");
    crds.get(WORKS).await.expect("the unconfirmed CRD stays");
}
