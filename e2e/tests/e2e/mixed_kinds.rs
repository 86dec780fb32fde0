//! One work holding core kinds, a workload, a CRD and a custom resource of
//! that CRD applies completely, whatever order the user wrote them in.

use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::work_helpers::{config_map, manifest_work, wait_applied};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use serde_json::json;

fn widget_crd() -> serde_json::Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "names": {"kind": "Widget", "plural": "widgets", "singular": "widget"},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}
                }}}
            }]
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_work_with_namespace_configmap_deployment_crd_and_custom_resource_applies_completely() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    // Written in the worst order: the custom resource before its CRD, and
    // namespaced objects before their namespace.
    let manifests = vec![
        json!({"apiVersion": "example.com/v1", "kind": "Widget",
               "metadata": {"name": "w1", "namespace": "shop"}, "spec": {"size": 3}}),
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "web", "namespace": "shop"},
               "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                        "template": {"metadata": {"labels": {"app": "web"}},
                                     "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}}}),
        config_map("shop", "settings", json!({"mode": "fast"})),
        widget_crd(),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}),
    ];
    let works = fleet
        .create_work(&manifest_work("cluster-a", "shop", manifests))
        .await
        .expect("create work");
    wait_applied(&works, "shop").await.expect("work applied");

    let spoke = fleet.spoke("cluster-a").client.clone();
    let ns: Api<Namespace> = Api::all(spoke.clone());
    assert!(ns.get_opt("shop").await.expect("read").is_some());
    let cm: Api<ConfigMap> = Api::namespaced(spoke.clone(), "shop");
    let settings = cm.get("settings").await.expect("configmap applied");
    assert_eq!(settings.data.expect("data")["mode"], "fast");
    let deploy: Api<Deployment> = Api::namespaced(spoke.clone(), "shop");
    let web = deploy.get("web").await.expect("deployment applied");
    assert_eq!(web.spec.expect("spec").replicas, Some(2));
    let widget_type = ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Widget"));
    let widgets: Api<DynamicObject> = Api::namespaced_with(spoke, "shop", &widget_type);
    let w1 = widgets.get("w1").await.expect("custom resource applied");
    assert_eq!(w1.data["spec"]["size"], 3);
    fleet.stop().await;
}
