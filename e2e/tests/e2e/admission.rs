//! Admission: invalid works are refused when they are written, naming the
//! manifest and the problem, so no agent ever sees them: by the API server's
//! own rules (CRD CEL rules and the admission policy) whether or not a hub
//! runs, and by the hub's webhook for what CEL cannot check (JSONPath
//! grammar, size); with no hub running, valid works are written and changed
//! freely and a bad path that got through is reported by the agent; a work
//! that was admitted under older rules can still have its metadata changed
//! and be deleted; a work close to the size limit travels and applies, one
//! over it is refused; and the limit sits below what the hub API server can
//! store. With `--webhook-failure-policy Fail` the registration says so and,
//! with no hub running, the API server refuses every work write.

use std::time::{Duration, Instant};

use ferry_api::manifest_work::ManifestWork;
use ferry_e2e::harness::controlplane::{ControlPlane, ControlPlaneOptions};
use ferry_e2e::harness::fleet::{Fleet, FleetOptions, install_crds_without_rules};
use ferry_e2e::helpers::wait::{wait_deleted, wait_until};
use ferry_e2e::helpers::work_helpers::{APPLY_TIMEOUT, manifest_condition, wait_applied};
use ferry_hub::admission::duplicates_policy::{POLICY_NAME, wait_until_policy_enforced};
use ferry_hub::admission::webhook::{
    DEFAULT_MAX_WORK_BYTES, FailurePolicy, WEBHOOK_CONFIGURATION_NAME, WEBHOOK_NAME,
};
use ferry_hub::crds::install_crds;
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicyBinding, ValidatingWebhookConfiguration,
};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde_json::{Value, json};

const CLUSTER: &str = "cluster-a";

/// Room the hub needs above an admitted work for the status it writes into
/// the same object (conditions per manifest, feedback values) and for
/// managed fields.
const STATUS_HEADROOM: usize = 64 * 1024;

fn fleet_options() -> FleetOptions {
    FleetOptions {
        admission: true,
        ..FleetOptions::with_spokes(&[CLUSTER])
    }
}

/// ManifestWorks as untyped objects, so tests can write values the Rust types
/// cannot hold (unknown strategy names).
fn dynamic_works(client: &kube::Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("work.ferry.dev", "v1alpha1", "ManifestWork");
    Api::namespaced_with(client.clone(), CLUSTER, &ApiResource::from_gvk(&gvk))
}

fn work_object(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "work.ferry.dev/v1alpha1",
        "kind": "ManifestWork",
        "metadata": {"name": name, "namespace": CLUSTER},
        "spec": spec,
    }))
    .expect("a ManifestWork object")
}

fn cm(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "namespace": "default"}, "data": {"a": "1"}})
}

fn cm_config(name: &str, extra: Value) -> Value {
    let mut config = json!({"resourceIdentifier":
        {"group": "", "resource": "configmaps", "namespace": "default", "name": name}});
    if let (Some(config), Some(extra)) = (config.as_object_mut(), extra.as_object()) {
        config.extend(extra.clone());
    }
    config
}

/// The API server's message for a write it refused; panics when it was
/// accepted, which is the failure the caller tests for.
async fn refusal(api: &Api<DynamicObject>, name: &str, spec: Value) -> String {
    match api
        .create(&PostParams::default(), &work_object(name, spec))
        .await
    {
        Err(kube::Error::Api(status)) => status.message.clone(),
        Err(other) => panic!("work {name}: not an API refusal: {other}"),
        Ok(_) => panic!("work {name} was accepted"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_works_are_refused_when_written_naming_the_manifest_and_the_problem() {
    let fleet = Fleet::start(fleet_options()).await.expect("fleet starts");
    let works = dynamic_works(&fleet.hub_client);
    let cases: Vec<(&str, Value, Vec<&str>)> = vec![
        (
            "no-api-version",
            json!({"workload": {"manifests": [
                {"kind": "ConfigMap", "metadata": {"name": "refused-1", "namespace": "default"}}]}}),
            vec!["manifests[0]", "apiVersion"],
        ),
        (
            "no-kind",
            json!({"workload": {"manifests": [
                {"apiVersion": "v1", "metadata": {"name": "refused-2", "namespace": "default"}}]}}),
            vec!["manifests[0]", "kind"],
        ),
        (
            "no-name",
            json!({"workload": {"manifests": [
                cm("refused-3"),
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "default"}}]}}),
            vec![
                "spec.workload.manifests[1].metadata.name: Required value: \
                 manifest ConfigMap has no metadata.name",
            ],
        ),
        (
            "duplicate",
            json!({"workload": {"manifests": [cm("refused-4"), cm("refused-4")]}}),
            vec![
                POLICY_NAME,
                "manifests[1] v1 ConfigMap default/refused-4: duplicates manifests[0] \
                 (same group, kind, namespace and name)",
            ],
        ),
        (
            "bad-ignore-path",
            json!({"workload": {"manifests": [cm("refused-5")]},
                   "manifestConfigs": [cm_config("refused-5", json!({"updateStrategy": {
                       "type": "ServerSideApply", "serverSideApply": {"ignoreFields": [
                           {"condition": "OnSpokePresent", "jsonPaths": ["$.data[?(@.x=="]}]}}}))]}),
            vec![
                WEBHOOK_NAME,
                "manifestConfigs[0] configmaps default/refused-5",
                "invalid JSONPath \"$.data[?(@.x==\"",
            ],
        ),
        (
            "bad-feedback-path",
            json!({"workload": {"manifests": [cm("refused-6")]},
                   "manifestConfigs": [cm_config("refused-6", json!({"feedbackRules": [
                       {"type": "JSONPaths", "jsonPaths": [{"name": "x", "path": ".data["}]}]}))]}),
            vec![
                WEBHOOK_NAME,
                "manifestConfigs[0] configmaps default/refused-6",
                "feedback \"x\": invalid JSONPath \".data[\"",
            ],
        ),
        (
            "sealed-to-no-one",
            json!({"workload": {"manifests": [cm("refused-6b"), {
                "apiVersion": "sealing.ferry.dev/v1alpha1", "kind": "SealedSecret",
                "metadata": {"name": "refused-6b", "namespace": "default"},
                "spec": {"recipients": [], "ciphertext":
                    "-----BEGIN AGE ENCRYPTED FILE-----\nYWdl\n-----END AGE ENCRYPTED FILE-----\n"}}]}}),
            vec![
                WEBHOOK_NAME,
                "manifests[1] sealing.ferry.dev/v1alpha1 SealedSecret",
                "SealedSecret default/refused-6b: spec.recipients is empty",
            ],
        ),
        (
            "unknown-strategy",
            json!({"workload": {"manifests": [cm("refused-7")]},
                   "manifestConfigs": [cm_config("refused-7",
                       json!({"updateStrategy": {"type": "Yolo"}}))]}),
            vec!["manifestConfigs[0].updateStrategy.type", "Yolo"],
        ),
        (
            "ssa-settings-under-update",
            json!({"workload": {"manifests": [cm("refused-8")]},
                   "manifestConfigs": [cm_config("refused-8", json!({"updateStrategy": {
                       "type": "Update", "serverSideApply": {"force": true}}}))]}),
            vec![
                "spec.manifestConfigs[0].updateStrategy.serverSideApply: Forbidden: \
                 updateStrategy.serverSideApply is only used with type ServerSideApply, not Update",
            ],
        ),
        (
            "json-paths-without-paths",
            json!({"workload": {"manifests": [cm("refused-9")]},
                   "manifestConfigs": [cm_config("refused-9",
                       json!({"feedbackRules": [{"type": "JSONPaths"}]}))]}),
            vec![
                "spec.manifestConfigs[0].feedbackRules[0].jsonPaths: Required value: \
                 type JSONPaths needs at least one jsonPaths entry",
            ],
        ),
        (
            "unknown-condition",
            json!({"workload": {"manifests": [cm("refused-10")]},
                   "manifestConfigs": [cm_config("refused-10", json!({"updateStrategy": {
                       "type": "ServerSideApply", "serverSideApply": {"ignoreFields": [
                           {"condition": "Sometimes", "jsonPaths": [".data"]}]}}}))]}),
            vec!["ignoreFields[0].condition", "Sometimes"],
        ),
        (
            "unknown-when-deleted",
            json!({"workload": {"manifests": [cm("refused-11")]},
                   "manifestConfigs": [cm_config("refused-11", json!({"whenDeleted": "Never"}))]}),
            vec!["manifestConfigs[0].whenDeleted", "Never"],
        ),
        (
            "selectively-orphan-without-rules",
            json!({"workload": {"manifests": [cm("refused-12")]},
                   "deleteOption": {"propagationPolicy": "SelectivelyOrphan"}}),
            vec![
                "spec.deleteOption.selectivelyOrphans: Required value: \
                 propagationPolicy SelectivelyOrphan needs selectivelyOrphans.orphaningRules",
            ],
        ),
        (
            "orphaning-rules-under-foreground",
            json!({"workload": {"manifests": [cm("refused-13")]},
                   "deleteOption": {"propagationPolicy": "Foreground", "selectivelyOrphans": {
                       "orphaningRules": [{"resource": "configmaps", "name": "refused-13",
                                           "namespace": "default"}]}}}),
            vec![
                "spec.deleteOption.selectivelyOrphans: Forbidden: selectivelyOrphans.orphaningRules \
                 are only used with propagationPolicy SelectivelyOrphan, not Foreground",
            ],
        ),
        (
            "api-version-without-group",
            json!({"workload": {"manifests": [
                {"apiVersion": "/v1", "kind": "ConfigMap",
                 "metadata": {"name": "refused-14", "namespace": "default"}}]}}),
            vec![
                "spec.workload.manifests[0].apiVersion",
                "manifest apiVersion \"/v1\" is not of the form group/version or version",
            ],
        ),
        (
            "duplicate-in-another-version",
            json!({"workload": {"manifests": [
                cm("refused-15"),
                {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
                 "metadata": {"name": "refused-15", "namespace": "default"}},
                {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                 "metadata": {"name": "refused-15", "namespace": "default"}}]}}),
            vec![
                POLICY_NAME,
                "manifests[2] autoscaling/v2 HorizontalPodAutoscaler default/refused-15: \
                 duplicates manifests[1]",
            ],
        ),
        (
            "paths-on-well-known-status",
            json!({"workload": {"manifests": [cm("refused-16")]},
                   "manifestConfigs": [cm_config("refused-16", json!({"feedbackRules": [
                       {"type": "WellKnownStatus", "jsonPaths": [{"name": "a", "path": ".data.a"}]}]}))]}),
            vec![
                "spec.manifestConfigs[0].feedbackRules[0].jsonPaths: Forbidden: \
                 jsonPaths are only read with type JSONPaths, not WellKnownStatus",
            ],
        ),
        (
            "too-many-manifests",
            json!({"workload": {"manifests": (0..501)
                .map(|i| cm(&format!("refused-17-{i}"))).collect::<Vec<_>>()}}),
            vec!["spec.workload.manifests: Too many: 501: must have at most 500 items"],
        ),
    ];
    for (name, spec, expected) in &cases {
        let message = refusal(&works, name, spec.clone()).await;
        eprintln!("{name}: {message}");
        for fragment in expected {
            assert!(
                message.contains(fragment),
                "work {name}: the refusal should contain {fragment:?}: {message}"
            );
        }
    }

    // The good side of every rule above is admitted (dry run: nothing stored).
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let deploy = json!({"apiVersion": "apps/v1", "kind": "Deployment",
                        "metadata": {"name": "ok", "namespace": "default"}});
    let admitted: Vec<(&str, Value)> = vec![
        (
            "same-name-other-kind-namespace-or-group",
            json!({"workload": {"manifests": [
                cm("ok"), deploy.clone(),
                {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ok", "namespace": "other"}},
                {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "ok", "namespace": "default"}},
                {"apiVersion": "example.com/v1", "kind": "ConfigMap",
                 "metadata": {"name": "ok", "namespace": "default"}},
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ok"}}]}}),
        ),
        (
            "ssa-settings-under-ssa",
            json!({"workload": {"manifests": [cm("ok")]},
                   "manifestConfigs": [cm_config("ok", json!({"updateStrategy": {
                       "type": "ServerSideApply", "serverSideApply": {"force": true,
                           "ignoreFields": [{"condition": "OnSpokeChange", "jsonPaths": [".data.a"]}]}}}))]}),
        ),
        (
            "feedback-rules-of-both-types",
            json!({"workload": {"manifests": [cm("ok")]},
                   "manifestConfigs": [cm_config("ok", json!({"feedbackRules": [
                       {"type": "WellKnownStatus"},
                       {"type": "JSONPaths", "jsonPaths": [{"name": "a", "path": ".data.a"}]}]}))]}),
        ),
        (
            "selectively-orphan-with-rules",
            json!({"workload": {"manifests": [cm("ok")]},
                   "deleteOption": {"propagationPolicy": "SelectivelyOrphan", "selectivelyOrphans": {
                       "orphaningRules": [{"resource": "configmaps", "name": "ok", "namespace": "default"}]}}}),
        ),
        (
            "orphan-without-rules",
            json!({"workload": {"manifests": [cm("ok")]}, "deleteOption": {"propagationPolicy": "Orphan"}}),
        ),
    ];
    for (name, spec) in admitted {
        works
            .create(&dry_run, &work_object(name, spec))
            .await
            .unwrap_or_else(|e| panic!("work {name} is valid and must be admitted: {e}"));
    }

    // Nothing was stored, so no agent can have seen any of it: the hub holds
    // no work, and a valid work written afterwards applies alone.
    let stored = works.list(&Default::default()).await.expect("list works");
    assert!(stored.items.is_empty(), "refused works were stored");
    works
        .create(
            &PostParams::default(),
            &work_object("fine", json!({"workload": {"manifests": [cm("fine")]}})),
        )
        .await
        .expect("a valid work is admitted");
    let typed: Api<ManifestWork> = Api::namespaced(fleet.hub_client.clone(), CLUSTER);
    wait_applied(&typed, "fine").await.expect("applied");
    let spoke = fleet.spoke(CLUSTER).api("v1", "ConfigMap", Some("default"));
    let names: Vec<String> = spoke
        .list(&Default::default())
        .await
        .expect("list spoke config maps")
        .items
        .into_iter()
        .filter_map(|o| o.metadata.name)
        .filter(|n| n.starts_with("refused-") || n == "fine")
        .collect();
    assert_eq!(names, vec!["fine".to_string()]);

    // A valid work cannot be edited into an invalid one.
    let patch = json!({"spec": {"workload": {"manifests": [cm("fine"), cm("fine")]}}});
    let err = works
        .patch("fine", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect_err("an edit that makes the work invalid is refused");
    assert!(err.to_string().contains("duplicates manifests[0]"), "{err}");
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_work_admitted_before_the_rules_can_still_be_relabelled_finalized_and_deleted() {
    let mut fleet = Fleet::start(fleet_options()).await.expect("fleet starts");
    let client = fleet.hub_client.clone();
    let works = dynamic_works(&client);

    // Stand in for a work written before these rules existed: take the CRD
    // rules and the policy away, write a work breaking both (a nameless
    // manifest, a duplicate), put them back.
    install_crds_without_rules(&client)
        .await
        .expect("CRDs without rules");
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(client.clone());
    bindings
        .delete(POLICY_NAME, &DeleteParams::default())
        .await
        .expect("unbind the policy");
    let nameless = json!({"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"namespace": "default"}});
    let invalid = json!({"workload": {"manifests": [cm("old"), cm("old"), nameless]}});
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match works
            .create(&PostParams::default(), &work_object("old", invalid.clone()))
            .await
        {
            Ok(_) => break,
            Err(e) if Instant::now() < deadline => {
                eprintln!("rules still enforced: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("the rules stayed enforced after their removal: {e}"),
        }
    }
    install_crds(&client).await.expect("rules restored");
    assert!(
        wait_until_policy_enforced(&client, "default", Duration::from_secs(30)).await,
        "the restored policy is enforced"
    );

    // Metadata-only updates leave the spec alone and are allowed: the CRD
    // rules ratchet (an unchanged value is not re-checked), the policy and
    // the webhook are not even called.
    let relabel = json!({"metadata": {"labels": {"team": "a"},
                                      "finalizers": ["example.com/hold"]}});
    works
        .patch("old", &PatchParams::default(), &Patch::Merge(&relabel))
        .await
        .expect("labels and finalizers can change on an invalid work");
    fleet.stop_hub().await;
    let relabel = json!({"metadata": {"labels": {"team": "b"}}});
    works
        .patch("old", &PatchParams::default(), &Patch::Merge(&relabel))
        .await
        .expect("metadata-only updates need no running hub");
    fleet.start_hub().await.expect("hub restarts");

    // A spec change is checked, and this one is still invalid.
    let respec = json!({"spec": {"workload": {"manifests": [cm("old"), cm("old"), cm("new")]}}});
    let err = works
        .patch("old", &PatchParams::default(), &Patch::Merge(&respec))
        .await
        .expect_err("an edit of an invalid spec is checked");
    assert!(err.to_string().contains("duplicates manifests[0]"), "{err}");
    // Deleting it works, including the finalizer removal that completes it.
    works
        .delete("old", &DeleteParams::default())
        .await
        .expect("delete is never reviewed");
    let release = json!({"metadata": {"finalizers": null}});
    works
        .patch("old", &PatchParams::default(), &Patch::Merge(&release))
        .await
        .expect("removing the last finalizer of a deleted invalid work is allowed");
    wait_deleted(&works, "old", "the work deleted", Duration::from_secs(30))
        .await
        .expect("the work was not deleted");
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_failure_policy_fail_and_no_hub_running_the_api_server_refuses_work_writes() {
    let mut fleet = Fleet::start(FleetOptions {
        webhook_failure_policy: FailurePolicy::Fail,
        ..fleet_options()
    })
    .await
    .expect("fleet starts");
    let works = dynamic_works(&fleet.hub_client);
    let registrations: Api<ValidatingWebhookConfiguration> = Api::all(fleet.hub_client.clone());
    let rendered = registrations
        .get(WEBHOOK_CONFIGURATION_NAME)
        .await
        .expect("the webhook is registered");
    let policies: Vec<Option<String>> = rendered
        .webhooks
        .unwrap_or_default()
        .into_iter()
        .map(|w| w.failure_policy)
        .collect();
    assert!(
        !policies.is_empty() && policies.iter().all(|p| p.as_deref() == Some("Fail")),
        "the registration says Fail: {policies:?}"
    );
    let valid = |name: &str| work_object(name, json!({"workload": {"manifests": [cm(name)]}}));
    works
        .create(&PostParams::default(), &valid("while-up"))
        .await
        .expect("a valid work is written while the hub runs");

    fleet.stop_hub().await;
    let refused = works
        .create(&PostParams::default(), &valid("while-down"))
        .await
        .expect_err("no work is written while nothing answers the webhook");
    println!("create with the hub down: {refused}");
    assert!(
        refused.to_string().contains(WEBHOOK_NAME),
        "the API server names the webhook it could not call: {refused}"
    );
    let respec = json!({"spec": {"workload": {"manifests": [cm("while-up"), cm("while-up-2")]}}});
    let refused = works
        .patch("while-up", &PatchParams::default(), &Patch::Merge(&respec))
        .await
        .expect_err("nor is a spec changed");
    assert!(refused.to_string().contains(WEBHOOK_NAME), "{refused}");
    assert!(
        works.get_opt("while-down").await.expect("read").is_none(),
        "nothing was stored"
    );

    fleet.start_hub().await.expect("hub starts again");
    works
        .create(&PostParams::default(), &valid("while-down"))
        .await
        .expect("written once the hub answers again");
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_hub_running_valid_works_are_written_and_the_api_servers_own_rules_still_refuse_mistakes()
 {
    let mut fleet = Fleet::start(fleet_options()).await.expect("fleet starts");
    let works = dynamic_works(&fleet.hub_client);
    fleet.stop_hub().await;

    // The webhook is registered but nothing answers it: a valid work is
    // written and its spec changed all the same (failurePolicy Ignore).
    works
        .create(
            &PostParams::default(),
            &work_object(
                "while-down",
                json!({"workload": {"manifests": [cm("while-down")]}}),
            ),
        )
        .await
        .expect("a valid work is written with no hub running");
    let respec =
        json!({"spec": {"workload": {"manifests": [cm("while-down"), cm("while-down-2")]}}});
    works
        .patch(
            "while-down",
            &PatchParams::default(),
            &Patch::Merge(&respec),
        )
        .await
        .expect("its spec changes with no hub running");

    // The API server's own rules still refuse mistakes, with clear messages.
    let cases: Vec<(&str, Value, Vec<&str>)> = vec![
        (
            "down-duplicate",
            json!({"workload": {"manifests": [cm("d-1"), cm("d-2"), cm("d-1")]}}),
            vec![
                POLICY_NAME,
                "manifests[2] v1 ConfigMap default/d-1: duplicates manifests[0] \
                 (same group, kind, namespace and name); each object may appear once in a work",
            ],
        ),
        (
            "down-nameless",
            json!({"workload": {"manifests": [
                {"apiVersion": "v1", "kind": "Secret", "metadata": {"namespace": "default"}}]}}),
            vec![
                "spec.workload.manifests[0].metadata.name: Required value: \
                 manifest Secret has no metadata.name",
            ],
        ),
        (
            "down-ssa-under-create-only",
            json!({"workload": {"manifests": [cm("d-3")]},
                   "manifestConfigs": [cm_config("d-3", json!({"updateStrategy": {
                       "type": "CreateOnly", "serverSideApply": {"fieldManager": "x"}}}))]}),
            vec![
                "spec.manifestConfigs[0].updateStrategy.serverSideApply: Forbidden: \
                 updateStrategy.serverSideApply is only used with type ServerSideApply, not CreateOnly",
            ],
        ),
        (
            "down-orphaning-rules-under-orphan",
            json!({"workload": {"manifests": [cm("d-4")]},
                   "deleteOption": {"propagationPolicy": "Orphan", "selectivelyOrphans": {
                       "orphaningRules": [{"resource": "configmaps", "name": "d-4",
                                           "namespace": "default"}]}}}),
            vec![
                "spec.deleteOption.selectivelyOrphans: Forbidden",
                "not Orphan",
            ],
        ),
    ];
    for (name, spec, expected) in &cases {
        let message = refusal(&works, name, spec.clone()).await;
        eprintln!("{name}: {message}");
        assert!(
            !message.contains("failed calling webhook"),
            "work {name}: refused by the API server's rules, not for want of a hub: {message}"
        );
        for fragment in expected {
            assert!(
                message.contains(fragment),
                "work {name}: the refusal should contain {fragment:?}: {message}"
            );
        }
    }
    // An edit that makes a stored work invalid is refused the same way.
    let duplicate =
        json!({"spec": {"workload": {"manifests": [cm("while-down"), cm("while-down")]}}});
    let err = works
        .patch(
            "while-down",
            &PatchParams::default(),
            &Patch::Merge(&duplicate),
        )
        .await
        .expect_err("an edit into a duplicate is refused with no hub running");
    assert!(err.to_string().contains("duplicates manifests[0]"), "{err}");

    // Only the JSONPath grammar needs the webhook: a bad ignore path gets
    // through while no hub runs, and the agent reports it when the hub is
    // back, applying the rest.
    works
        .create(
            &PostParams::default(),
            &work_object(
                "bad-path-while-down",
                json!({"workload": {"manifests": [cm("bad-path-while-down")]},
                       "manifestConfigs": [cm_config("bad-path-while-down", json!({"updateStrategy": {
                           "type": "ServerSideApply", "serverSideApply": {"ignoreFields": [
                               {"condition": "OnSpokePresent", "jsonPaths": ["$.data[?(@.x=="]}]}}}))]}),
            ),
        )
        .await
        .expect("what only the webhook checks is admitted while it is down");
    fleet.start_hub().await.expect("hub restarts");
    let typed: Api<ManifestWork> = Api::namespaced(fleet.hub_client.clone(), CLUSTER);
    let applied = wait_applied(&typed, "while-down")
        .await
        .expect("the work written while the hub was down applies");
    assert_eq!(
        applied.spec.workload.manifests.len(),
        2,
        "with its changed spec"
    );
    let spoke = fleet.spoke(CLUSTER).api("v1", "ConfigMap", Some("default"));
    spoke
        .get("while-down-2")
        .await
        .expect("the manifest added while the hub was down is on the spoke");
    let reported = wait_until(
        &typed,
        "bad-path-while-down",
        "the bad path reported",
        APPLY_TIMEOUT,
        |w: &ManifestWork| manifest_condition(w, 0, "Applied").is_some(),
    )
    .await
    .expect("reported");
    let condition = manifest_condition(&reported, 0, "Applied").expect("condition");
    assert_eq!(
        (condition.status.as_str(), condition.reason.as_str()),
        ("False", "InvalidIgnorePath"),
        "{}",
        condition.message
    );
    assert!(
        condition.message.contains("$.data[?(@.x=="),
        "names the path: {}",
        condition.message
    );

    // Back up, the webhook refuses such a path again.
    let message = refusal(
        &works,
        "bad-path-after",
        json!({"workload": {"manifests": [cm("bad-path-after")]},
               "manifestConfigs": [cm_config("bad-path-after", json!({"updateStrategy": {
                   "type": "ServerSideApply", "serverSideApply": {"ignoreFields": [
                       {"condition": "OnSpokePresent", "jsonPaths": ["$.data["]}]}}}))]}),
    )
    .await;
    assert!(message.contains(WEBHOOK_NAME), "{message}");
    fleet.stop().await;
}

/// A work of `count` ConfigMaps each holding `blob_bytes` of data.
fn big_work_spec(prefix: &str, count: usize, blob_bytes: usize) -> Value {
    let manifests: Vec<Value> = (0..count)
        .map(|i| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": format!("{prefix}-{i}"), "namespace": "default"},
                   "data": {"blob": "x".repeat(blob_bytes)}})
        })
        .collect();
    json!({"workload": {"manifests": manifests}})
}

fn json_size(object: &DynamicObject) -> usize {
    serde_json::to_vec(object).expect("json").len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_work_close_to_the_limit_travels_and_applies_and_one_over_it_is_refused() {
    let fleet = Fleet::start(fleet_options()).await.expect("fleet starts");
    let works = dynamic_works(&fleet.hub_client);

    // Three ConfigMaps of 430 kB each: too large for the last-applied
    // annotation, so this also exercises the Update strategy's fallback.
    let big = work_object("big", big_work_spec("big", 3, 430_000));
    let big_size = json_size(&big);
    assert!(
        big_size < DEFAULT_MAX_WORK_BYTES && big_size > DEFAULT_MAX_WORK_BYTES - 150_000,
        "the work is close to the limit: {big_size}"
    );
    let started = Instant::now();
    works
        .create(&PostParams::default(), &big)
        .await
        .expect("a work under the limit is admitted");
    let typed: Api<ManifestWork> = Api::namespaced(fleet.hub_client.clone(), CLUSTER);
    wait_applied(&typed, "big")
        .await
        .expect("the large work applies");
    eprintln!(
        "a {big_size}-byte work was applied in {:?}",
        started.elapsed()
    );
    let spoke = fleet.spoke(CLUSTER).api("v1", "ConfigMap", Some("default"));
    for i in 0..3 {
        let applied = spoke.get(&format!("big-{i}")).await.expect("on the spoke");
        let blob = applied.data["data"]["blob"].as_str().unwrap_or_default();
        assert_eq!(blob.len(), 430_000, "big-{i} arrived whole");
    }

    let over = work_object("over", big_work_spec("over", 4, 360_000));
    let over_size = json_size(&over);
    assert!(over_size > DEFAULT_MAX_WORK_BYTES);
    let message = match works.create(&PostParams::default(), &over).await {
        Err(kube::Error::Api(status)) => status.message.clone(),
        other => panic!("a work over the limit must be refused, got {other:?}"),
    };
    eprintln!("{message}");
    assert!(message.contains(WEBHOOK_NAME), "{message}");
    assert!(
        message.contains(&format!("limit of {DEFAULT_MAX_WORK_BYTES} bytes")),
        "gives the limit: {message}"
    );
    // The size the webhook counts includes what the API server adds
    // (uid, timestamps, managed fields), so it is a little above ours.
    let counted: usize = message
        .split("work: is ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("gives the work's size: {message}"));
    assert!(
        counted >= over_size && counted < over_size + 4096,
        "counted {counted} for {over_size} bytes sent"
    );
    fleet.stop().await;
}

/// Binary search, on a real hub API server without the webhook, for the
/// largest ManifestWork (bytes of JSON sent) it stores. The figure is printed,
/// not asserted; what is asserted is that everything the hub admits, plus room
/// for its status, fits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_size_limit_is_below_what_the_hub_api_server_stores() {
    let hub = ControlPlane::start("hub", ControlPlaneOptions::default())
        .await
        .expect("control plane starts");
    let client = hub.client().await.expect("client");
    install_crds(&client).await.expect("crds");
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": CLUSTER}})).expect("namespace"),
        )
        .await
        .expect("namespace created");
    let works = dynamic_works(&client);

    let (mut stored, mut refused) = (1_000_000, 3_500_000);
    try_store(&works, stored).await.expect("1 MB is stored");
    let above_body_limit = try_store(&works, refused)
        .await
        .expect_err("3.5 MB is refused");
    let mut above_cap = String::new();
    while refused - stored > 256 {
        let mid = (stored + refused) / 2;
        match try_store(&works, mid).await {
            Ok(()) => stored = mid,
            Err(message) => {
                refused = mid;
                above_cap = message;
            }
        }
    }
    eprintln!(
        "hub API server: stores a ManifestWork of {stored} bytes of JSON, refuses \
         {refused} bytes with: {above_cap}; above 3 MiB: {above_body_limit}"
    );
    assert!(
        DEFAULT_MAX_WORK_BYTES + STATUS_HEADROOM <= stored,
        "the default limit {DEFAULT_MAX_WORK_BYTES} plus {STATUS_HEADROOM} bytes for status \
         must fit under what the API server stores ({stored})"
    );
    hub.stop().await;
}

/// Creates (then deletes) a work of exactly `size` bytes of JSON: one
/// ConfigMap manifest whose blob makes up the size. Err is the API server's
/// refusal.
async fn try_store(works: &Api<DynamicObject>, size: usize) -> Result<(), String> {
    let name = format!("probe-{size}");
    let empty = json_size(&work_object(&name, big_work_spec(&name, 1, 0)));
    let work = work_object(&name, big_work_spec(&name, 1, size.saturating_sub(empty)));
    assert_eq!(json_size(&work), size);
    match works.create(&PostParams::default(), &work).await {
        Ok(_) => {
            works
                .delete(&name, &DeleteParams::default())
                .await
                .expect("delete probe");
            Ok(())
        }
        Err(kube::Error::Api(status)) => Err(format!("{} ({})", status.message, status.code)),
        Err(other) => Err(other.to_string()),
    }
}

/// The API server's own rules fit their run-time cost budget at the largest
/// work they allow (500 manifests): such a work is admitted, and a duplicate
/// among them is still found. Times are printed, not asserted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_servers_rules_fit_their_cost_budget_at_the_largest_manifest_count() {
    let hub = ControlPlane::start("hub", ControlPlaneOptions::default())
        .await
        .expect("control plane starts");
    let client = hub.client().await.expect("client");
    install_crds(&client).await.expect("crds");
    assert!(
        wait_until_policy_enforced(&client, "default", Duration::from_secs(30)).await,
        "the policy is enforced"
    );
    let gvk = GroupVersionKind::gvk("work.ferry.dev", "v1alpha1", "ManifestWork");
    let works: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), "default", &ApiResource::from_gvk(&gvk));
    let dry_run = PostParams {
        dry_run: true,
        ..Default::default()
    };
    // Every example work is admitted by the API server's rules.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut examples = 0;
    for entry in std::fs::read_dir(&dir).expect("examples/") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read");
        for document in serde_yaml::Deserializer::from_str(&text) {
            let mut work: DynamicObject = serde::Deserialize::deserialize(document)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            // The examples also hold Placements and ManifestWorkReplicaSets;
            // this test is about the ManifestWork rules.
            if work.types.as_ref().is_none_or(|t| t.kind != "ManifestWork") {
                continue;
            }
            work.metadata.namespace = Some("default".into());
            works
                .create(&dry_run, &work)
                .await
                .unwrap_or_else(|e| panic!("{} is admitted: {e}", path.display()));
            examples += 1;
        }
    }
    assert!(examples > 0, "no example works in {}", dir.display());

    let mut manifests: Vec<Value> = (0..500).map(|i| cm(&format!("many-{i}"))).collect();
    let mut largest = work_object("largest", json!({"workload": {"manifests": manifests}}));
    largest.metadata.namespace = Some("default".into());
    let started = Instant::now();
    works
        .create(&dry_run, &largest)
        .await
        .expect("500 distinct manifests are admitted within the cost budget");
    eprintln!("500 distinct manifests admitted in {:?}", started.elapsed());

    manifests = (0..499).map(|i| cm(&format!("many-{i}"))).collect();
    manifests.push(cm("many-17"));
    let mut repeated = work_object("repeated", json!({"workload": {"manifests": manifests}}));
    repeated.metadata.namespace = Some("default".into());
    let started = Instant::now();
    let message = match works.create(&dry_run, &repeated).await {
        Err(kube::Error::Api(status)) => status.message,
        other => panic!("a duplicate among 500 manifests must be refused, got {other:?}"),
    };
    eprintln!(
        "a duplicate among 500 manifests refused in {:?}: {message}",
        started.elapsed()
    );
    assert!(message.contains(POLICY_NAME), "{message}");
    // The message's own expression fits the budget too: it names both.
    assert!(
        message.contains("manifests[499] v1 ConfigMap default/many-17: duplicates manifests[17]"),
        "{message}"
    );
    hub.stop().await;
}
