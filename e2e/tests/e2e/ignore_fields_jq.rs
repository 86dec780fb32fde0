//! `ignoreFields[].jqPathExpressions` as OCM writes them: a jq path that
//! selects one container of a Deployment by name keeps the spoke's image for
//! it while the hub's other changes apply, the entry needing neither
//! `jsonPaths` nor `condition`; a jq expression outside the accepted part of
//! jq (one that could run away, like a recursive `def`) is refused by the
//! hub's webhook, and, reaching an agent with admission off, fails only its
//! manifest with its own reason, `InvalidJqPathExpression`.

use ferry_api::manifest_work::ManifestWork;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::spoke_actor::{apply_as, read_json};
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{
    APPLY_TIMEOUT, edit_and_wait, manifest_condition, wait_applied,
};
use kube::api::{Api, Patch, PatchParams, ValidationDirective};
use serde_json::{Value, json};

const CLUSTER: &str = "cluster-a";
const SIDECAR: &str = ".spec.template.spec.containers[] | select(.name == \"sidecar\") | .image";

fn deployment(app: &str, sidecar: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "web", "namespace": "default"},
           "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                    "template": {"metadata": {"labels": {"app": "web"}},
                                 "spec": {"containers": [
                                     {"name": "app", "image": app},
                                     {"name": "sidecar", "image": sidecar}]}}}})
}

fn jq_config(expressions: &[&str]) -> Value {
    json!({
        "resourceIdentifier": {"group": "apps", "resource": "deployments",
                               "name": "web", "namespace": "default"},
        "updateStrategy": {"type": "ServerSideApply", "serverSideApply": {
            "ignoreFields": [{"jqPathExpressions": expressions}]}}
    })
}

/// Writes work `name` with server-side apply and strict field validation.
async fn apply_strict(
    works: &Api<ManifestWork>,
    name: &str,
    spec: Value,
) -> Result<(), kube::Error> {
    let work = json!({
        "apiVersion": "work.ferry.dev/v1alpha1",
        "kind": "ManifestWork",
        "metadata": {"name": name, "namespace": CLUSTER},
        "spec": spec,
    });
    works
        .patch(
            name,
            &PatchParams::apply("test-user").validation(ValidationDirective::Strict),
            &Patch::Apply(&work),
        )
        .await
        .map(|_| ())
}

fn image(live: &Value, container: &str) -> Value {
    live["spec"]["template"]["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["name"] == container)
        .map(|c| c["image"].clone())
        .unwrap_or(Value::Null)
}

#[tokio::test]
async fn a_jq_path_keeps_the_spoke_value_of_the_selected_container() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&[CLUSTER]))
        .await
        .expect("fleet starts");
    let works: Api<ManifestWork> = Api::namespaced(fleet.hub_client.clone(), CLUSTER);
    apply_strict(
        &works,
        "w",
        json!({"workload": {"manifests": [deployment("app:1", "sidecar:1")]},
               "manifestConfigs": [jq_config(&[SIDECAR])]}),
    )
    .await
    .expect("admitted under strict validation");
    wait_applied(&works, "w").await.expect("applied");
    let spoke = fleet
        .spoke(CLUSTER)
        .api("apps/v1", "Deployment", Some("default"));
    assert_eq!(
        image(&read_json(&spoke, "web").await, "sidecar"),
        "sidecar:1"
    );

    apply_as(
        &spoke,
        "web",
        "spoke-actor",
        &json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {"template": {"spec": {"containers": [
                    {"name": "sidecar", "image": "sidecar:spoke"}]}}}}),
    )
    .await
    .expect("a spoke actor takes the sidecar image over");
    edit_and_wait(&works, "w", |manifests| {
        manifests[0] = deployment("app:2", "sidecar:2");
    })
    .await
    .expect("edit applied");
    let live = read_json(&spoke, "web").await;
    assert_eq!(
        image(&live, "app"),
        "app:2",
        "a hub change elsewhere applies"
    );
    assert_eq!(
        image(&live, "sidecar"),
        "sidecar:spoke",
        "the selected container keeps the spoke's image"
    );
    fleet.stop().await;
}

#[tokio::test]
async fn a_jq_expression_that_could_run_away_is_refused_by_the_webhook() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&[CLUSTER]))
        .await
        .expect("fleet starts");
    let works: Api<ManifestWork> = Api::namespaced(fleet.hub_client.clone(), CLUSTER);
    let refused = apply_strict(
        &works,
        "w",
        json!({"workload": {"manifests": [deployment("app:1", "sidecar:1")]},
               "manifestConfigs": [jq_config(&["def f: f; f"])]}),
    )
    .await
    .expect_err("refused");
    let message = refused.to_string();
    assert!(
        message.contains("invalid jq path expression \"def f: f; f\""),
        "{message}"
    );
    fleet.stop().await;
}

#[tokio::test]
async fn an_invalid_jq_expression_fails_only_its_manifest_with_its_own_reason() {
    let fleet = Fleet::start(FleetOptions {
        admission: false,
        ..FleetOptions::with_spokes(&[CLUSTER])
    })
    .await
    .expect("fleet starts");
    let works: Api<ManifestWork> = Api::namespaced(fleet.hub_client.clone(), CLUSTER);
    apply_strict(
        &works,
        "w",
        json!({"workload": {"manifests": [
                   deployment("app:1", "sidecar:1"),
                   {"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "fine", "namespace": "default"}}]},
               "manifestConfigs": [jq_config(&["..|.image"])]}),
    )
    .await
    .expect("written without admission");
    let work = wait_until(&works, "w", "both manifests reported", APPLY_TIMEOUT, |w| {
        manifest_condition(w, 0, "Applied").is_some_and(|c| c.status == "False")
            && manifest_condition(w, 1, "Applied").is_some_and(|c| c.status == "True")
    })
    .await
    .expect("reported");
    let applied = manifest_condition(&work, 0, "Applied").expect("condition");
    assert_eq!(applied.reason, "InvalidJqPathExpression", "{applied:?}");
    assert!(
        applied.message.contains("recursion (..)"),
        "{}",
        applied.message
    );
    let spoke = fleet
        .spoke(CLUSTER)
        .api("apps/v1", "Deployment", Some("default"));
    assert!(spoke.get_opt("web").await.expect("read").is_none());
    fleet.stop().await;
}
