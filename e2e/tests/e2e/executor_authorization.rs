//! Who may name an executor is decided by the hub API server itself: writing
//! a ManifestWork, or a ManifestWorkReplicaSet whose template names an
//! executor, needs `execute-as` on `work.ferry.dev/manifestworks` for the
//! executor's user name (OCM's rule). The policy asks the API server's
//! authorizer about the requester, so it holds with no hub process running
//! at all (none runs here) and follows RBAC as it is granted.

use std::time::Duration;

use ferry_api::contract::EXECUTE_AS_VERB;
use ferry_e2e::harness::controlplane::{ControlPlane, ControlPlaneOptions};
use ferry_hub::admission::executor_policy::EXECUTOR_POLICY_NAME;
use ferry_hub::crds::install_crds;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ObjectMeta, PostParams};
use serde_json::{Value, json};

const TENANT: &str = "team-a";
const AUTHOR: &str = "alice";
/// How long the API server may take to enforce a new policy or RBAC grant.
const PROPAGATION: Duration = Duration::from_secs(60);

fn api(client: &kube::Client, kind: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("work.ferry.dev", "v1alpha1", kind);
    Api::namespaced_with(client.clone(), TENANT, &ApiResource::from_gvk(&gvk))
}

fn executor(name: &str) -> Value {
    json!({"subject": {"type": "ServiceAccount",
                       "serviceAccount": {"namespace": "default", "name": name}}})
}

fn workload() -> Value {
    json!({"manifests": [{"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cfg", "namespace": "default"}, "data": {"a": "1"}}]})
}

fn work(name: &str, runs_as: Option<&str>) -> DynamicObject {
    let mut spec = json!({"workload": workload()});
    if let Some(account) = runs_as {
        spec["executor"] = executor(account);
    }
    serde_json::from_value(json!({
        "apiVersion": "work.ferry.dev/v1alpha1", "kind": "ManifestWork",
        "metadata": {"name": name, "namespace": TENANT}, "spec": spec,
    }))
    .expect("a work")
}

fn replica_set(name: &str, runs_as: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "work.ferry.dev/v1alpha1", "kind": "ManifestWorkReplicaSet",
        "metadata": {"name": name, "namespace": TENANT},
        "spec": {
            "manifestWorkTemplate": {"workload": workload(), "executor": executor(runs_as)},
            "placementRefs": [{"name": "everywhere"}],
        },
    }))
    .expect("a replica set")
}

/// What a dry-run create as the author comes to: Ok, or the refusal's message.
async fn try_create(api: &Api<DynamicObject>, obj: &DynamicObject) -> Result<(), String> {
    let params = PostParams {
        dry_run: true,
        ..Default::default()
    };
    match api.create(&params, obj).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) => Err(status.message),
        Err(other) => Err(other.to_string()),
    }
}

/// Retries a dry-run create until `done` holds for its outcome: the signal
/// that the API server enforces a new policy or RBAC grant.
async fn until(
    api: &Api<DynamicObject>,
    obj: &DynamicObject,
    done: impl Fn(&Result<(), String>) -> bool,
) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + PROPAGATION;
    loop {
        let outcome = try_create(api, obj).await;
        if done(&outcome) || tokio::time::Instant::now() >= deadline {
            return outcome;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn role(name: &str, rules: Vec<PolicyRule>) -> Role {
    Role {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(TENANT.into()),
            ..Default::default()
        },
        rules: Some(rules),
    }
}

fn bind(name: &str) -> RoleBinding {
    RoleBinding {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(TENANT.into()),
            ..Default::default()
        },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: name.into(),
        },
        subjects: Some(vec![Subject {
            kind: "User".into(),
            name: AUTHOR.into(),
            api_group: Some("rbac.authorization.k8s.io".into()),
            ..Default::default()
        }]),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn naming_an_executor_needs_execute_as_on_it_checked_by_the_api_server_with_no_hub_running() {
    let hub = ControlPlane::start("hub", ControlPlaneOptions::default())
        .await
        .expect("control plane");
    let admin = hub.client().await.expect("admin client");
    install_crds(&admin).await.expect("CRDs and policies");
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(TENANT.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<Namespace>::all(admin.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .expect("tenant namespace");
    let roles: Api<Role> = Api::namespaced(admin.clone(), TENANT);
    let bindings: Api<RoleBinding> = Api::namespaced(admin.clone(), TENANT);
    let author_rule = PolicyRule {
        api_groups: Some(vec!["work.ferry.dev".into()]),
        resources: Some(vec![
            "manifestworks".into(),
            "manifestworkreplicasets".into(),
        ]),
        verbs: vec!["create".into(), "get".into(), "update".into()],
        ..Default::default()
    };
    roles
        .create(&PostParams::default(), &role("author", vec![author_rule]))
        .await
        .expect("author role");
    bindings
        .create(&PostParams::default(), &bind("author"))
        .await
        .expect("author binding");

    let alice = hub.client_as(AUTHOR).await.expect("alice");
    let works = api(&alice, "ManifestWork");
    let replica_sets = api(&alice, "ManifestWorkReplicaSet");
    until(&works, &work("plain", None), Result::is_ok)
        .await
        .expect("the author may write works without an executor");

    let refused = until(&works, &work("as-deployer", Some("deployer")), |o| {
        o.as_ref().is_err_and(|m| m.contains(EXECUTOR_POLICY_NAME))
    })
    .await
    .expect_err("naming an executor without execute-as is refused");
    println!("refusal: {refused}");
    assert!(
        refused.contains(EXECUTE_AS_VERB)
            && refused.contains("default/deployer")
            && refused.contains(AUTHOR),
        "the refusal names the right, the executor and the requester: {refused}"
    );
    let refused = try_create(&replica_sets, &replica_set("rs", "deployer"))
        .await
        .expect_err("a replica set template naming an executor is checked too");
    assert!(refused.contains(EXECUTOR_POLICY_NAME), "{refused}");

    // Granted execute-as for one executor only, by name.
    let execute_as = PolicyRule {
        api_groups: Some(vec!["work.ferry.dev".into()]),
        resources: Some(vec!["manifestworks".into()]),
        resource_names: Some(vec!["system:serviceaccount:default:deployer".into()]),
        verbs: vec![EXECUTE_AS_VERB.into()],
        ..Default::default()
    };
    roles
        .create(
            &PostParams::default(),
            &role("run-as-deployer", vec![execute_as]),
        )
        .await
        .expect("execute-as role");
    bindings
        .create(&PostParams::default(), &bind("run-as-deployer"))
        .await
        .expect("execute-as binding");
    until(
        &works,
        &work("as-deployer", Some("deployer")),
        Result::is_ok,
    )
    .await
    .expect("with execute-as on deployer the work is admitted");
    works
        .create(
            &PostParams::default(),
            &work("as-deployer", Some("deployer")),
        )
        .await
        .expect("stored");
    try_create(&replica_sets, &replica_set("rs", "deployer"))
        .await
        .expect("and so is a replica set naming deployer");
    let refused = try_create(&works, &work("as-admin", Some("cluster-admin-sa")))
        .await
        .expect_err("another executor is still refused");
    assert!(refused.contains("default/cluster-admin-sa"), "{refused}");
    hub.stop().await;
}
