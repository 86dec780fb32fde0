//! The three cases that motivated OnSpokeChange and OnSpokePresent, end to end:
//! a ConfigMap whose data is edited on the spoke, a custom resource whose
//! `.operation` a spoke controller removes after use, and a Deployment whose
//! replicas an autoscaler owns.

use ferry_api::manifest_work::IgnoreCondition;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::spoke_actor::{merge_as, read_json};
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{
    APPLY_TIMEOUT, edit_and_wait, manifest_work, set_at, ssa_config, wait_applied,
};
use kube::api::DynamicObject;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configmap_edited_on_the_spoke_keeps_its_data_until_the_hub_changes_it() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let manifest = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": "default", "labels": {"rev": "1"}},
        "data": {"mode": "fast"}});
    let mut work = manifest_work("cluster-a", "cm", vec![manifest]);
    work.spec.manifest_configs = vec![ssa_config(
        "",
        "configmaps",
        "default",
        "settings",
        true,
        &[(IgnoreCondition::OnSpokeChange, &[".data"])],
    )];
    let works = fleet.create_work(&work).await.expect("create work");
    wait_applied(&works, "cm").await.expect("applied");
    let spoke = fleet
        .spoke("cluster-a")
        .api("v1", "ConfigMap", Some("default"));
    merge_as(
        &spoke,
        "settings",
        "operator",
        &json!({"data": {"mode": "safe", "extra": "x"}}),
    )
    .await
    .expect("edit");
    edit_and_wait(&works, "cm", |m| {
        set_at(&mut m[0], "/metadata/labels/rev", json!("2"))
    })
    .await
    .expect("edit");
    let now = read_json(&spoke, "settings").await;
    assert_eq!(
        now["data"],
        json!({"mode": "safe", "extra": "x"}),
        "the spoke's data is kept"
    );
    assert_eq!(now["metadata"]["labels"]["rev"], "2");
    edit_and_wait(&works, "cm", |m| {
        set_at(&mut m[0], "/data", json!({"mode": "turbo"}))
    })
    .await
    .expect("edit");
    let turbo = |o: &DynamicObject| o.data["data"]["mode"] == "turbo";
    wait_until(&spoke, "settings", "hub data applied", APPLY_TIMEOUT, turbo)
        .await
        .expect("hub change applied");
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_custom_resource_operation_removed_by_a_spoke_controller_is_not_put_back() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "applications.argoproj.example"},
        "spec": {"group": "argoproj.example", "scope": "Namespaced",
            "names": {"kind": "Application", "plural": "applications", "singular": "application"},
            "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "operation": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                }}}}]}
    });
    let app = json!({"apiVersion": "argoproj.example/v1alpha1", "kind": "Application",
        "metadata": {"name": "guestbook", "namespace": "default"},
        "spec": {"path": "guestbook"},
        "operation": {"sync": {"revision": "abc"}}});
    let mut work = manifest_work("cluster-a", "app", vec![crd, app]);
    work.spec.manifest_configs = vec![ssa_config(
        "argoproj.example",
        "applications",
        "default",
        "guestbook",
        true,
        &[(IgnoreCondition::OnSpokeChange, &[".operation"])],
    )];
    let works = fleet.create_work(&work).await.expect("create work");
    wait_applied(&works, "app").await.expect("applied");
    let spoke =
        fleet
            .spoke("cluster-a")
            .api("argoproj.example/v1alpha1", "Application", Some("default"));
    assert_eq!(
        read_json(&spoke, "guestbook").await["operation"]["sync"]["revision"],
        "abc"
    );

    // The controller syncs and clears the operation.
    merge_as(
        &spoke,
        "guestbook",
        "argocd-controller",
        &json!({"operation": null}),
    )
    .await
    .expect("clear");
    edit_and_wait(&works, "app", |m| {
        set_at(&mut m[1], "/spec/path", json!("guestbook-v2"))
    })
    .await
    .expect("edit");
    let now = read_json(&spoke, "guestbook").await;
    assert_eq!(now["spec"]["path"], "guestbook-v2");
    assert!(
        now.get("operation").is_none(),
        "the cleared operation is not put back: {now}"
    );

    // A new operation from the hub is applied once.
    edit_and_wait(&works, "app", |m| {
        set_at(
            &mut m[1],
            "/operation",
            json!({"sync": {"revision": "def"}}),
        )
    })
    .await
    .expect("edit");
    let synced = |o: &DynamicObject| o.data["operation"]["sync"]["revision"] == "def";
    wait_until(
        &spoke,
        "guestbook",
        "new operation applied",
        APPLY_TIMEOUT,
        synced,
    )
    .await
    .expect("applied once");
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_scaled_by_an_autoscaler_keeps_its_replicas() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}}});
    let mut work = manifest_work("cluster-a", "web", vec![deployment]);
    work.spec.manifest_configs = vec![ssa_config(
        "apps",
        "deployments",
        "default",
        "web",
        false,
        &[(IgnoreCondition::OnSpokePresent, &[".spec.replicas"])],
    )];
    let works = fleet.create_work(&work).await.expect("create work");
    wait_applied(&works, "web").await.expect("applied");
    let spoke = fleet
        .spoke("cluster-a")
        .api("apps/v1", "Deployment", Some("default"));
    // An autoscaler scales through an update, as the HPA controller does.
    merge_as(
        &spoke,
        "web",
        "horizontal-pod-autoscaler",
        &json!({"spec": {"replicas": 6}}),
    )
    .await
    .expect("scale");
    edit_and_wait(&works, "web", |m| {
        set_at(
            &mut m[0],
            "/spec/template/spec/containers/0/image",
            json!("nginx:1.28"),
        );
        set_at(&mut m[0], "/spec/replicas", json!(3));
    })
    .await
    .expect("edit");
    let now = read_json(&spoke, "web").await;
    assert_eq!(
        now["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.28"
    );
    assert_eq!(
        now["spec"]["replicas"], 6,
        "the autoscaler's replicas are kept"
    );
    fleet.stop().await;
}
