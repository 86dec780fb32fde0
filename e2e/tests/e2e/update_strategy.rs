//! Update: kubectl-style three-way merge with a last-applied annotation.
//! Fields others set survive, fields removed from the manifest are removed,
//! untouched immutable fields are never sent, sidecars added by other actors
//! survive in native kinds (merge keys from the server's OpenAPI) and in custom
//! resources (list conventions), and an object too large for the annotation
//! falls back to server-side apply. The per-row merge tables are unit tests in
//! `agent/src/semantics/merge.rs`.

use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::spoke_actor::{apply_as, merge_as, read_json};
use ferry_e2e::helpers::work_helpers::{
    edit_and_wait, manifest_condition, manifest_work, set_at, wait_applied,
};
use ferry_semantics::hash::LAST_APPLIED_ANNOTATION;
use ferry_semantics::release::{MANAGED_LABEL, MANAGED_LABEL_VALUE};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_keeps_fields_set_by_others_and_removes_fields_dropped_from_the_manifest() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let manifest = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "merged", "namespace": "default", "labels": {"keep": "yes", "drop": "soon"}},
        "data": {"a": "1", "c": "3"}});
    let works = fleet
        .create_work(&manifest_work("cluster-a", "u", vec![manifest]))
        .await
        .expect("create");
    wait_applied(&works, "u").await.expect("applied");
    let spoke = fleet
        .spoke("cluster-a")
        .api("v1", "ConfigMap", Some("default"));
    merge_as(
        &spoke,
        "merged",
        "someone-else",
        &json!({"data": {"b": "theirs"}, "metadata": {"labels": {"extra": "x"}}}),
    )
    .await
    .expect("other actor");
    edit_and_wait(&works, "u", |m| {
        set_at(&mut m[0], "/data", json!({"a": "changed"}));
        set_at(&mut m[0], "/metadata/labels", json!({"keep": "yes"}));
    })
    .await
    .expect("edit applied");
    let now = read_json(&spoke, "merged").await;
    assert_eq!(
        now["data"],
        json!({"a": "changed", "b": "theirs"}),
        "c removed, b kept, a changed"
    );
    assert_eq!(
        now["metadata"]["labels"],
        json!({"keep": "yes", "extra": "x", MANAGED_LABEL: MANAGED_LABEL_VALUE}),
        "drop removed, extra kept, ferry's own label set"
    );
    assert!(now["metadata"]["annotations"][LAST_APPLIED_ANNOTATION].is_string());
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_never_sends_untouched_immutable_fields() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let service = json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "svc", "namespace": "default", "labels": {"rev": "1"}},
        "spec": {"ports": [{"name": "http", "port": 80}], "selector": {"app": "web"}}});
    let job = json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "once", "namespace": "default", "labels": {"rev": "1"}},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "run", "image": "busybox:1.36", "command": ["true"]}]}}}});
    let works = fleet
        .create_work(&manifest_work("cluster-a", "imm", vec![service, job]))
        .await
        .expect("create");
    wait_applied(&works, "imm").await.expect("applied");
    let services = fleet
        .spoke("cluster-a")
        .api("v1", "Service", Some("default"));
    let cluster_ip = read_json(&services, "svc").await["spec"]["clusterIP"].clone();
    assert!(cluster_ip.is_string(), "the server assigned a clusterIP");
    let applied = edit_and_wait(&works, "imm", |m| {
        set_at(&mut m[0], "/metadata/labels/rev", json!("2"));
        set_at(&mut m[1], "/metadata/labels/rev", json!("2"));
    })
    .await
    .expect("both updates applied without touching immutable fields");
    for ordinal in 0..2 {
        let c = manifest_condition(&applied, ordinal, "Applied").expect("condition");
        assert_eq!(c.status, "True", "{}", c.message);
    }
    assert_eq!(
        read_json(&services, "svc").await["spec"]["clusterIP"],
        cluster_ip
    );
    let jobs = fleet
        .spoke("cluster-a")
        .api("batch/v1", "Job", Some("default"));
    assert_eq!(
        read_json(&jobs, "once").await["metadata"]["labels"]["rev"],
        "2"
    );
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_keeps_a_sidecar_added_to_a_deployment_by_another_actor() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}}});
    let works = fleet
        .create_work(&manifest_work("cluster-a", "web", vec![deployment]))
        .await
        .expect("create");
    wait_applied(&works, "web").await.expect("applied");
    let spoke = fleet
        .spoke("cluster-a")
        .api("apps/v1", "Deployment", Some("default"));
    apply_as(&spoke, "web", "mesh-injector", &json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"template": {"spec": {"containers": [{"name": "proxy", "image": "envoy:1.30"}]}}}}))
        .await
        .expect("inject sidecar");
    edit_and_wait(&works, "web", |m| {
        set_at(
            &mut m[0],
            "/spec/template/spec/containers/0/image",
            json!("nginx:1.28"),
        )
    })
    .await
    .expect("edit applied");
    let containers =
        read_json(&spoke, "web").await["spec"]["template"]["spec"]["containers"].clone();
    let image_of = |name: &str| {
        containers
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["name"] == name))
            .map(|c| c["image"].clone())
    };
    assert_eq!(image_of("app"), Some(json!("nginx:1.28")));
    assert_eq!(
        image_of("proxy"),
        Some(json!("envoy:1.30")),
        "the sidecar survives"
    );
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_keeps_a_sidecar_added_to_a_custom_resource_pod_template() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "catsets.ctl.example"},
        "spec": {"group": "ctl.example", "scope": "Namespaced",
            "names": {"kind": "CatSet", "plural": "catsets", "singular": "catset"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}});
    let catset = json!({"apiVersion": "ctl.example/v1", "kind": "CatSet",
        "metadata": {"name": "cats", "namespace": "default"},
        "spec": {"template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}}}});
    let works = fleet
        .create_work(&manifest_work("cluster-a", "cats", vec![crd, catset]))
        .await
        .expect("create");
    wait_applied(&works, "cats").await.expect("applied");
    let spoke = fleet
        .spoke("cluster-a")
        .api("ctl.example/v1", "CatSet", Some("default"));
    merge_as(&spoke, "cats", "sidecar-injector", &json!({"spec": {"template": {"spec": {"containers": [
        {"name": "nginx", "image": "nginx:1.27"}, {"name": "sidecar", "image": "log-uploader:1"}]}}}}))
        .await
        .expect("inject sidecar");
    edit_and_wait(&works, "cats", |m| {
        set_at(
            &mut m[1],
            "/spec/template/spec/containers/0/image",
            json!("nginx:1.28"),
        )
    })
    .await
    .expect("edit applied");
    let containers =
        read_json(&spoke, "cats").await["spec"]["template"]["spec"]["containers"].clone();
    assert_eq!(
        containers,
        json!([{"name": "nginx", "image": "nginx:1.28"}, {"name": "sidecar", "image": "log-uploader:1"}])
    );
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_falls_back_to_server_side_apply_when_the_annotation_would_be_too_large() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let big = "x".repeat(300 * 1024);
    let manifest = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "big", "namespace": "default"}, "data": {"blob": big}});
    let works = fleet
        .create_work(&manifest_work("cluster-a", "big", vec![manifest]))
        .await
        .expect("create");
    let work = wait_applied(&works, "big").await.expect("applied");
    let condition = manifest_condition(&work, 0, "Applied").expect("condition");
    assert!(
        condition.message.contains("server-side apply"),
        "the fallback is visible: {}",
        condition.message
    );
    let spoke = fleet
        .spoke("cluster-a")
        .api("v1", "ConfigMap", Some("default"));
    let now = read_json(&spoke, "big").await;
    assert_eq!(now["data"]["blob"].as_str().map(str::len), Some(300 * 1024));
    assert!(
        now["metadata"]["annotations"]
            .get(LAST_APPLIED_ANNOTATION)
            .is_none()
    );
    fleet.stop().await;
}
