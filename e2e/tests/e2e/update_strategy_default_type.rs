//! An `updateStrategy` without `type` means `Update`, as in OCM: such a work
//! is admitted under strict field validation with every admission check on
//! (CRD rules, admission policy, webhook), stored with `type: Update`, and
//! applied with the `Update` strategy (the last-applied annotation it keeps).

use ferry_api::manifest_work::{ManifestWork, UpdateStrategyType};
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::spoke_actor::read_json;
use ferry_e2e::helpers::work_helpers::wait_applied;
use ferry_semantics::hash::LAST_APPLIED_ANNOTATION;
use kube::api::{Api, Patch, PatchParams, ValidationDirective};
use serde_json::json;

const CLUSTER: &str = "cluster-a";

#[tokio::test]
async fn an_update_strategy_without_type_is_admitted_and_applies_as_update() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&[CLUSTER]))
        .await
        .expect("fleet starts");
    let works: Api<ManifestWork> = Api::namespaced(fleet.hub_client.clone(), CLUSTER);
    let work = json!({
        "apiVersion": "work.ferry.dev/v1alpha1",
        "kind": "ManifestWork",
        "metadata": {"name": "w", "namespace": CLUSTER},
        "spec": {
            "workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "target", "namespace": "default"}, "data": {"a": "1"}}]},
            "manifestConfigs": [{
                "resourceIdentifier": {"resource": "configmaps", "name": "target", "namespace": "default"},
                "updateStrategy": {}}]
        }
    });
    let stored = works
        .patch(
            "w",
            &PatchParams::apply("test-user").validation(ValidationDirective::Strict),
            &Patch::Apply(&work),
        )
        .await
        .expect("admitted under strict validation");
    let strategy = stored.spec.manifest_configs[0]
        .update_strategy
        .as_ref()
        .expect("strategy kept");
    assert_eq!(strategy.type_, UpdateStrategyType::Update, "defaulted");
    wait_applied(&works, "w").await.expect("applied");
    let spoke = fleet.spoke(CLUSTER).api("v1", "ConfigMap", Some("default"));
    let live = read_json(&spoke, "target").await;
    assert_eq!(live["data"]["a"], "1");
    assert!(
        live["metadata"]["annotations"][LAST_APPLIED_ANNOTATION].is_string(),
        "applied with the Update strategy: {live}"
    );
    fleet.stop().await;
}
