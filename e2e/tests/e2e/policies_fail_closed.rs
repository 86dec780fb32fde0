//! Policies fail closed (issue 30, item 4): a deleted admission policy
//! binding is noticed by the leader, which fails its `/readyz` naming it,
//! shows it in `ferry_hub_admission_policy_missing`, and re-applies it; the
//! check is then enforced again.

use std::time::Duration;

use ferry_api::manifest_work::ManifestWork;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::harness::hub_metrics::{get, scrape};
use ferry_hub::admission::executor_policy::EXECUTOR_POLICY_NAME;
use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBinding;
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::Client;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use serde_json::json;

/// A user who may write works in `cluster-a` but name no executor.
const AUTHOR: &str = "alice";

/// Lets `AUTHOR` create works in `cluster-a` (and nothing else).
async fn grant_author(admin: &Client) {
    let meta = ObjectMeta {
        name: Some("author".into()),
        namespace: Some("cluster-a".into()),
        ..Default::default()
    };
    Api::<Role>::namespaced(admin.clone(), "cluster-a")
        .create(
            &PostParams::default(),
            &Role {
                metadata: meta.clone(),
                rules: Some(vec![PolicyRule {
                    api_groups: Some(vec!["work.ferry.dev".into()]),
                    resources: Some(vec!["manifestworks".into()]),
                    verbs: vec!["create".into()],
                    ..Default::default()
                }]),
            },
        )
        .await
        .expect("author role");
    Api::<RoleBinding>::namespaced(admin.clone(), "cluster-a")
        .create(
            &PostParams::default(),
            &RoleBinding {
                metadata: meta,
                role_ref: RoleRef {
                    api_group: "rbac.authorization.k8s.io".into(),
                    kind: "Role".into(),
                    name: "author".into(),
                },
                subjects: Some(vec![Subject {
                    kind: "User".into(),
                    name: AUTHOR.into(),
                    api_group: Some("rbac.authorization.k8s.io".into()),
                    ..Default::default()
                }]),
            },
        )
        .await
        .expect("author binding");
}

/// A dry-run create, as `AUTHOR`, of a work naming an executor: the
/// refusal's message, or None when admitted.
async fn refusal_of_an_executor(works: &Api<ManifestWork>) -> Option<String> {
    let work: ManifestWork = serde_json::from_value(json!({
        "apiVersion": "work.ferry.dev/v1alpha1", "kind": "ManifestWork",
        "metadata": {"name": "as-deployer", "namespace": "cluster-a"},
        "spec": {
            "workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "cfg", "namespace": "default"}, "data": {"a": "1"}}]},
            "executor": {"subject": {"type": "ServiceAccount",
                "serviceAccount": {"namespace": "default", "name": "deployer"}}},
        },
    }))
    .expect("a work");
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    match works.create(&dry, &work).await {
        Ok(_) => None,
        Err(kube::Error::Api(status)) => Some(status.message),
        Err(other) => Some(other.to_string()),
    }
}

/// How long the leader may take to notice and repair (it checks every few
/// seconds).
const NOTICE: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_policy_binding_fails_readyz_shows_in_metrics_and_is_restored() {
    let fleet = Fleet::start(FleetOptions {
        watch_policies: true,
        ..FleetOptions::with_spokes(&["cluster-a"])
    })
    .await
    .expect("fleet");
    let probes = fleet.hub_probes_addr;
    let gauge = format!("ferry_hub_admission_policy_missing{{policy=\"{EXECUTOR_POLICY_NAME}\"}}");
    // In force at first: ready, gauge 0.
    let deadline = tokio::time::Instant::now() + NOTICE;
    loop {
        let (code, body) = get(probes, "/readyz").await.expect("readyz");
        let metrics = scrape(probes).await.expect("metrics");
        if code == 200 && metrics.contains(&format!("{gauge} 0")) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the hub never reported its policies in force: {code} {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    grant_author(&fleet.hub_client).await;
    let author = fleet.hub.client_as(AUTHOR).await.expect("author client");
    let works: Api<ManifestWork> = Api::namespaced(author, "cluster-a");
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(fleet.hub_client.clone());
    bindings
        .delete(EXECUTOR_POLICY_NAME, &DeleteParams::default())
        .await
        .expect("delete the executor policy's binding");

    // Said: /readyz fails naming it, and the gauge is 1 (both polled: the
    // leader repairs within a check interval).
    let (mut said_readyz, mut said_metric) = (None, false);
    let deadline = tokio::time::Instant::now() + NOTICE;
    while said_readyz.is_none() || !said_metric {
        let (code, body) = get(probes, "/readyz").await.expect("readyz");
        if code == 503 && body.contains(EXECUTOR_POLICY_NAME) {
            said_readyz = Some(body);
        }
        if scrape(probes)
            .await
            .expect("metrics")
            .contains(&format!("{gauge} 1"))
        {
            said_metric = true;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the missing binding was not reported (readyz {said_readyz:?}, metric {said_metric})"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!("readyz while missing: {said_readyz:?}");
    // And an Event regarding the policy says so, for `kubectl get events`.
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(fleet.hub_client.clone(), "default");
    let deadline = tokio::time::Instant::now() + NOTICE;
    let announced = loop {
        let listed = events
            .list(&kube::api::ListParams::default())
            .await
            .expect("list Events");
        if let Some(event) = listed.items.into_iter().find(|e| {
            e.reason.as_deref() == Some("AdmissionPolicyNotInForce")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref())
                    == Some(EXECUTOR_POLICY_NAME)
        }) {
            break event;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no Event said the policy was not in force"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(announced.type_.as_deref(), Some("Warning"));
    println!("event: {:?}", announced.note);

    // Restored: the binding is back, denying, and the hub ready again.
    let deadline = tokio::time::Instant::now() + NOTICE;
    loop {
        let back = bindings
            .get_opt(EXECUTOR_POLICY_NAME)
            .await
            .expect("read binding");
        let denies = back
            .as_ref()
            .and_then(|b| b.spec.as_ref())
            .is_some_and(|s| {
                s.validation_actions
                    .as_ref()
                    .is_some_and(|a| a.iter().any(|a| a == "Deny"))
            });
        let (code, _) = get(probes, "/readyz").await.expect("readyz");
        let metrics = scrape(probes).await.expect("metrics");
        // Enforced again: the API server refuses the executor, quoting the
        // policy (it learns of the binding asynchronously).
        let enforced = refusal_of_an_executor(&works)
            .await
            .is_some_and(|m| m.contains(EXECUTOR_POLICY_NAME));
        if denies && enforced && code == 200 && metrics.contains(&format!("{gauge} 0")) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the binding was not restored (present: {}, readyz {code})",
            back.is_some()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    fleet.stop().await;
}
