//! OCM compatibility: OCM's own documented example works, rewritten only in
//! `apiVersion`, written with strict field validation, behave as OCM documents
//! them on real control planes. Each part of the OCM-parity work adds its
//! functions under its own prefix (`drift_`, `conds_`, `apply_`).

use ferry_e2e::fleet::{Fleet, FleetOptions};
use ferry_e2e::spoke_actor::{merge_as, read_json};
use ferry_e2e::wait::wait_until;
use ferry_e2e::work_helpers::{
    APPLY_TIMEOUT, manifest_condition, manifest_status, wait_applied, work_condition,
};
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

/// OCM's "Workload Completion" example (manifestwork.md): a Job completed by
/// the built-in rule. Only `apiVersion` differs from the documentation.
const OCM_JOB_COMPLETION: &str = r#"
apiVersion: work.ferry.dev/v1alpha1
kind: ManifestWork
metadata:
  namespace: cluster1
  name: example-job
spec:
  workload:
    manifests:
      - apiVersion: batch/v1
        kind: Job
        metadata:
          name: pi-calculation
          namespace: default
        spec:
          template:
            spec:
              containers:
              - name: pi
                image: perl:5.34.0
                command: ["perl", "-Mbignum=bpi", "-wle", "print bpi(2000)"]
              restartPolicy: Never
          backoffLimit: 4
  manifestConfigs:
    - resourceIdentifier:
        group: batch
        resource: jobs
        namespace: default
        name: pi-calculation
      conditionRules:
        - type: WellKnownConditions
          condition: Complete
"#;

/// OCM's custom CEL completion example (manifestwork.md), with its
/// expression written as the API defines `celExpressions` (a list of
/// strings; the page shows `- expression: |`, which OCM's own CRD refuses),
/// applied to a Job so that the cluster has the kind.
const OCM_CEL_COMPLETION: &str = r#"
apiVersion: work.ferry.dev/v1alpha1
kind: ManifestWork
metadata:
  namespace: cluster1
  name: example-cel
spec:
  workload:
    manifests:
      - apiVersion: batch/v1
        kind: Job
        metadata:
          name: my-custom-resource
          namespace: default
        spec:
          template:
            spec:
              containers:
              - name: run
                image: busybox:1.36
                command: ["true"]
              restartPolicy: Never
  manifestConfigs:
    - resourceIdentifier:
        group: batch
        resource: jobs
        namespace: default
        name: my-custom-resource
      conditionRules:
        - condition: Complete
          type: CEL
          celExpressions:
            - |
              object.status.conditions.filter(
                c, c.type == 'Complete' || c.type == 'Failed'
              ).exists(
                c, c.status == 'True'
              )
          messageExpression: |
            result ? "Custom resource is complete" : "Custom resource is not complete"
"#;

/// Creates `yaml` on the hub by server-side apply with strict field
/// validation: an unknown field fails the request instead of being pruned.
async fn create_strict(works: &Api<ManifestWork>, yaml: &str) -> ManifestWork {
    let work: serde_json::Value = serde_yaml::from_str(yaml).expect("the example parses");
    let name = work["metadata"]["name"].as_str().expect("name").to_string();
    works
        .patch(
            &name,
            &PatchParams::apply("ocm-example").validation(ValidationDirective::Strict),
            &Patch::Apply(&work),
        )
        .await
        .expect("the OCM example is accepted with strict validation")
}

/// Writes the status a Job controller writes when the Job succeeds.
async fn finish_job(fleet: &Fleet, name: &str) {
    let jobs = fleet
        .spoke("cluster1")
        .api("batch/v1", "Job", Some("default"));
    let now = "2026-01-01T00:00:00Z";
    let finished = json!({"status": {"startTime": now, "completionTime": now, "succeeded": 1,
        "conditions": [
            {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached",
                "lastProbeTime": now, "lastTransitionTime": now},
            {"type": "Complete", "status": "True", "reason": "CompletionsReached",
                "lastProbeTime": now, "lastTransitionTime": now}]}});
    jobs.patch_status(name, &PatchParams::default(), &Patch::Merge(&finished))
        .await
        .expect("write job status");
}

fn complete(w: &ManifestWork) -> bool {
    work_condition(w, "Complete").is_some_and(|c| c.status == "True")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conds_ocm_job_and_cel_completion_examples_drive_complete() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster1"]))
        .await
        .expect("fleet starts");
    let works: Api<ManifestWork> = Api::namespaced(fleet.hub_client.clone(), "cluster1");
    create_strict(&works, OCM_JOB_COMPLETION).await;
    create_strict(&works, OCM_CEL_COMPLETION).await;

    // Both Jobs are applied and not finished yet.
    for (name, message) in [
        ("example-job", "Job is not finished"),
        ("example-cel", "Custom resource is not complete"),
    ] {
        let evaluated = |w: &ManifestWork| {
            manifest_condition(w, 0, "Complete").is_some()
                && manifest_condition(w, 0, "Applied").is_some_and(|c| c.status == "True")
        };
        let work = wait_until(&works, name, "the rule evaluated", APPLY_TIMEOUT, evaluated)
            .await
            .expect("evaluated");
        let condition = manifest_condition(&work, 0, "Complete").expect("condition");
        // The CEL example reads status.conditions, absent until the Job runs:
        // OCM reports that as an expression error, and so does ferry.
        if name == "example-job" {
            assert_eq!(
                (condition.status.as_str(), condition.message.as_str()),
                ("False", message)
            );
        } else {
            assert_eq!(condition.status, "False", "{}", condition.message);
        }
        assert!(!complete(&work));
    }

    finish_job(&fleet, "pi-calculation").await;
    finish_job(&fleet, "my-custom-resource").await;
    for (name, message) in [
        ("example-job", "Job is finished"),
        ("example-cel", "Custom resource is complete"),
    ] {
        let work = wait_until(&works, name, "work Complete", APPLY_TIMEOUT, complete)
            .await
            .expect("the example work completes");
        let condition = manifest_condition(&work, 0, "Complete").expect("condition");
        assert_eq!(
            (condition.status.as_str(), condition.message.as_str()),
            ("True", message)
        );
    }
    fleet.stop().await;
}
