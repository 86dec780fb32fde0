//! OCM compatibility: OCM's own example works from its documentation,
//! rewritten only in `apiVersion`, written with strict field validation, and
//! the behaviour of each field checked on real control planes. Each part of
//! the issue adds its functions under its own prefix (`drift_` here).

use ferry_e2e::fleet::{Fleet, FleetOptions};
use ferry_e2e::spoke_actor::{merge_as, read_json};
use ferry_e2e::wait::wait_until;
use ferry_e2e::work_helpers::{APPLY_TIMEOUT, manifest_status, wait_applied};
use ferry_hub::manifest_work::ManifestWork;
use kube::Api;
use kube::api::{Patch, PatchParams, ValidationDirective};
use serde_json::json;

/// OCM's "hello-work-demo" from its ManifestWork concept page, with only its
/// `apiVersion` changed (and the `<target managed cluster>` placeholder
/// filled in).
const DRIFT_HELLO_WORK: &str = r#"
apiVersion: work.ferry.dev/v1alpha1
kind: ManifestWork
metadata:
  namespace: cluster-a
  name: hello-work-demo
spec:
  workload:
    manifests:
      - apiVersion: apps/v1
        kind: Deployment
        metadata:
          name: hello
          namespace: default
        spec:
          selector:
            matchLabels:
              app: hello
          template:
            metadata:
              labels:
                app: hello
            spec:
              containers:
                - name: hello
                  image: quay.io/asmacdo/busybox
                  command:
                    ["sh", "-c", 'echo "Hello, Kubernetes!" && sleep 3600']
"#;

/// Writes an OCM example work as `kubectl apply --server-side` would, with
/// strict field validation: an unknown field is refused, not pruned.
async fn drift_apply_strict(works: &Api<ManifestWork>, yaml: &str) -> ManifestWork {
    let work: serde_json::Value = serde_yaml::from_str(yaml).expect("example parses");
    let name = work["metadata"]["name"]
        .as_str()
        .expect("named")
        .to_string();
    let params = PatchParams::apply("kubectl").validation(ValidationDirective::Strict);
    works
        .patch(&name, &params, &Patch::Apply(&work))
        .await
        .unwrap_or_else(|e| panic!("strict apply of {name}: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drift_a_spoke_edit_is_reported_with_the_manager_named_and_corrected() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .expect("fleet starts");
    let works: Api<ManifestWork> = Api::namespaced(fleet.hub_client.clone(), "cluster-a");
    drift_apply_strict(&works, DRIFT_HELLO_WORK).await;
    let applied = wait_applied(&works, "hello-work-demo")
        .await
        .expect("applied");
    assert_eq!(
        manifest_status(&applied, 0).and_then(|m| m.drift.as_ref()),
        None
    );

    let deployments = fleet
        .spoke("cluster-a")
        .api("apps/v1", "Deployment", Some("default"));
    let container = json!({"name": "hello", "image": "quay.io/asmacdo/busybox:edited",
        "command": ["sh", "-c", "echo \"Hello, Kubernetes!\" && sleep 3600"]});
    merge_as(
        &deployments,
        "hello",
        "kubectl-edit",
        &json!({"spec": {"template": {"spec": {"containers": [container]}}}}),
    )
    .await
    .expect("spoke edit");
    let pointer = "/spec/template/spec/containers/0/image";
    let reported = wait_until(
        &works,
        "hello-work-demo",
        "the corrected image reported",
        APPLY_TIMEOUT,
        |w| {
            manifest_status(w, 0)
                .and_then(|m| m.drift.as_ref())
                .is_some_and(|d| {
                    d.fields
                        .iter()
                        .any(|f| f.pointer == pointer && f.corrected_time.is_some())
                })
        },
    )
    .await
    .expect("drift reported");
    let drift = manifest_status(&reported, 0)
        .and_then(|m| m.drift.clone())
        .expect("drift");
    let field = drift
        .fields
        .iter()
        .find(|f| f.pointer == pointer)
        .expect("image listed");
    assert_eq!(field.manager.as_deref(), Some("kubectl-edit"));
    assert_eq!(field.hub_value, r#""quay.io/asmacdo/busybox""#);
    assert_eq!(
        field.spoke_value.as_deref(),
        Some(r#""quay.io/asmacdo/busybox:edited""#)
    );
    let live = read_json(&deployments, "hello").await;
    assert_eq!(
        live["spec"]["template"]["spec"]["containers"][0]["image"],
        "quay.io/asmacdo/busybox"
    );
    fleet.stop().await;
}
