//! A manifest of a kind the spoke does not serve fails alone, with a reason
//! and message a user can act on; the rest of the work still applies.

use ferry_api::manifest_work::ManifestWork;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{
    APPLY_TIMEOUT, config_map, manifest_condition, manifest_work, work_condition,
};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::Api;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_kind_fails_only_its_own_manifest_with_a_clear_reason() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let work = manifest_work(
        "cluster-a",
        "mixed",
        vec![
            config_map("default", "before", json!({"x": "1"})),
            json!({"apiVersion": "gadgets.example.com/v1", "kind": "Gadget",
                   "metadata": {"name": "g", "namespace": "default"}}),
            json!({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": "after", "namespace": "default"}, "stringData": {"y": "2"}}),
        ],
    );
    let works = fleet.create_work(&work).await.expect("create work");
    let reported = |w: &ManifestWork| {
        manifest_condition(w, 1, "Applied").is_some()
            && manifest_condition(w, 2, "Applied").is_some()
    };
    let work = wait_until(
        &works,
        "mixed",
        "all manifests reported",
        APPLY_TIMEOUT,
        reported,
    )
    .await
    .expect("reported");

    let gadget = manifest_condition(&work, 1, "Applied").expect("condition");
    assert_eq!(gadget.status, "False");
    assert_eq!(gadget.reason, "UnknownKind");
    assert!(
        gadget.message.contains("Gadget") && gadget.message.contains("gadgets.example.com/v1"),
        "message names the kind and apiVersion: {}",
        gadget.message
    );
    for ordinal in [0, 2] {
        let c = manifest_condition(&work, ordinal, "Applied").expect("condition");
        assert_eq!(
            c.status, "True",
            "manifest {ordinal} is applied despite the unknown kind"
        );
    }
    let whole = work_condition(&work, "Applied").expect("work condition");
    assert_eq!(whole.status, "False");
    assert!(
        whole
            .message
            .starts_with("1 of 3 manifests are not applied"),
        "{}",
        whole.message
    );

    let spoke = fleet.spoke("cluster-a").client.clone();
    let cms: Api<ConfigMap> = Api::namespaced(spoke.clone(), "default");
    let secrets: Api<Secret> = Api::namespaced(spoke, "default");
    assert!(cms.get_opt("before").await.expect("read").is_some());
    assert!(secrets.get_opt("after").await.expect("read").is_some());
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_whose_crd_is_deleted_on_the_spoke_becomes_unknown() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    // The CRD belongs to the spoke, not to the work.
    let crds =
        fleet
            .spoke("cluster-a")
            .api("apiextensions.k8s.io/v1", "CustomResourceDefinition", None);
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "tools.spoke.example"},
        "spec": {"group": "spoke.example", "scope": "Namespaced",
            "names": {"kind": "Tool", "plural": "tools", "singular": "tool"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}});
    ferry_e2e::helpers::spoke_actor::apply_as(&crds, "tools.spoke.example", "spoke-admin", &crd)
        .await
        .expect("install CRD");
    let established = |o: &kube::api::DynamicObject| {
        o.data["status"]["conditions"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Established" && c["status"] == "True")
        })
    };
    wait_until(
        &crds,
        "tools.spoke.example",
        "CRD established",
        APPLY_TIMEOUT,
        established,
    )
    .await
    .expect("established");
    let tool = json!({"apiVersion": "spoke.example/v1", "kind": "Tool",
        "metadata": {"name": "hammer", "namespace": "default"}, "spec": {"size": 1}});
    let works = fleet
        .create_work(&manifest_work("cluster-a", "tool", vec![tool]))
        .await
        .expect("create work");
    ferry_e2e::helpers::work_helpers::wait_applied(&works, "tool")
        .await
        .expect("applied");

    crds.delete("tools.spoke.example", &Default::default())
        .await
        .expect("delete CRD");
    let unknown = |w: &ManifestWork| {
        manifest_condition(w, 0, "Applied")
            .is_some_and(|c| c.status == "False" && c.reason == "UnknownKind")
    };
    wait_until(
        &works,
        "tool",
        "the kind reported unknown",
        APPLY_TIMEOUT,
        unknown,
    )
    .await
    .expect("a vanished kind is reported as UnknownKind");
    fleet.stop().await;
}
