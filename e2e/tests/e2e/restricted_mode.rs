//! The agent's restricted mode (`--restricted`, the chart's
//! `rbac.restricted`): the agent holds rights on CRDs and on its own
//! AppliedManifestWork records for its own use, so a work carrying a CRD or
//! one of ferry's kinds must not be written with them. Such a manifest fails
//! with `RestrictedKind` and is not written; the work's other manifests
//! apply.

use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{
    APPLY_TIMEOUT, config_map, manifest_condition, manifest_work,
};
use ferry_semantics::restricted::RESTRICTED_KIND_REASON;
use serde_json::json;

const CLUSTER: &str = "cluster-a";
const CRD_NAME: &str = "gadgets.example.com";

fn crd() -> serde_json::Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD_NAME},
        "spec": {
            "group": "example.com",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}
            }]
        }
    })
}

/// A forged record: AppliedManifestWorks decide what the agent deletes.
fn forged_record() -> serde_json::Value {
    json!({
        "apiVersion": "work.ferry.dev/v1alpha1",
        "kind": "AppliedManifestWork",
        "metadata": {"name": "forged"},
        "spec": {}
    })
}

#[tokio::test]
async fn restricted_mode_refuses_a_crd_and_an_applied_manifest_work() {
    let fleet = Fleet::start(FleetOptions {
        restricted: true,
        ..FleetOptions::with_spokes(&[CLUSTER])
    })
    .await
    .expect("fleet starts");
    let work = manifest_work(
        CLUSTER,
        "w",
        vec![
            crd(),
            forged_record(),
            config_map("default", "allowed", json!({"k": "v"})),
        ],
    );
    let works = fleet.create_work(&work).await.expect("create work");
    let reported = wait_until(&works, "w", "every manifest reported", APPLY_TIMEOUT, |w| {
        (0..3).all(|i| manifest_condition(w, i, "Applied").is_some())
    })
    .await
    .expect("reported");
    for (index, what) in [(0, "the CRD"), (1, "the AppliedManifestWork")] {
        let applied = manifest_condition(&reported, index, "Applied").expect("Applied");
        assert_eq!(
            (applied.status.as_str(), applied.reason.as_str()),
            ("False", RESTRICTED_KIND_REASON),
            "{what}: {applied:?}"
        );
        assert!(
            applied.message.contains("--restricted"),
            "{what}: {applied:?}"
        );
    }
    let allowed = manifest_condition(&reported, 2, "Applied").expect("Applied");
    assert_eq!(allowed.status, "True", "the ConfigMap applies: {allowed:?}");

    let spoke = &fleet.spoke(CLUSTER);
    let crds = spoke.api("apiextensions.k8s.io/v1", "CustomResourceDefinition", None);
    assert!(
        crds.get_opt(CRD_NAME).await.expect("read").is_none(),
        "the CRD was not written"
    );
    let records = spoke.api("work.ferry.dev/v1alpha1", "AppliedManifestWork", None);
    assert!(
        records.get_opt("forged").await.expect("read").is_none(),
        "no forged record"
    );
    fleet.stop().await;
}
