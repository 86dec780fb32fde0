//! Who may name an executor is decided by the hub API server itself: writing
//! a ManifestWork, or a ManifestWorkReplicaSet whose template names an
//! executor, needs `execute-as` on `work.ferry.dev/manifestworks` for the
//! executor's user name (OCM's rule). The policy asks the API server's
//! authorizer about the requester, so it holds with no hub process running
//! at all (none runs here) and follows RBAC as it is granted.

use std::time::Duration;

use ferry_api::contract::EXECUTE_AS_VERB;
use ferry_e2e::harness::controlplane::{ControlPlane, ControlPlaneOptions};
use ferry_e2e::harness::helm::render_with;
use ferry_hub::admission::executor_policy::EXECUTOR_POLICY_NAME;
use ferry_hub::crds::install_crds;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ObjectMeta, PostParams};
use serde::Deserialize as _;
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

/// Namespaces of two clusters on the hub (a work's namespace is its cluster's).
const CLUSTER_A: &str = "cluster-a";
const CLUSTER_B: &str = "cluster-b";

/// A hub control plane with the CRDs and policies and the namespaces
/// `namespaces`, in which `AUTHOR` may create, get and update works.
async fn hub_with_author(namespaces: &[&str]) -> (ControlPlane, kube::Client) {
    let hub = ControlPlane::start("hub", ControlPlaneOptions::default())
        .await
        .expect("control plane");
    let admin = hub.client().await.expect("admin client");
    install_crds(&admin).await.expect("CRDs and policies");
    for namespace in namespaces {
        let object = Namespace {
            metadata: ObjectMeta {
                name: Some((*namespace).into()),
                ..Default::default()
            },
            ..Default::default()
        };
        Api::<Namespace>::all(admin.clone())
            .create(&PostParams::default(), &object)
            .await
            .expect("namespace");
        let author_rule = PolicyRule {
            api_groups: Some(vec!["work.ferry.dev".into()]),
            resources: Some(vec![
                "manifestworks".into(),
                "manifestworkreplicasets".into(),
            ]),
            verbs: vec![
                "create".into(),
                "get".into(),
                "update".into(),
                "patch".into(),
                "delete".into(),
            ],
            ..Default::default()
        };
        let mut author = role("author", vec![author_rule]);
        author.metadata.namespace = Some((*namespace).into());
        Api::<Role>::namespaced(admin.clone(), namespace)
            .create(&PostParams::default(), &author)
            .await
            .expect("author role");
        let mut binding = bind("author");
        binding.metadata.namespace = Some((*namespace).into());
        Api::<RoleBinding>::namespaced(admin.clone(), namespace)
            .create(&PostParams::default(), &binding)
            .await
            .expect("author binding");
    }
    (hub, admin)
}

fn api_in(client: &kube::Client, kind: &str, namespace: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("work.ferry.dev", "v1alpha1", kind);
    Api::namespaced_with(client.clone(), namespace, &ApiResource::from_gvk(&gvk))
}

/// A work in `namespace` naming the executor `account` (`NAMESPACE/NAME`).
fn work_as(namespace: &str, name: &str, account: &str) -> DynamicObject {
    let (sa_namespace, sa_name) = account.split_once('/').expect("NAMESPACE/NAME");
    serde_json::from_value(json!({
        "apiVersion": "work.ferry.dev/v1alpha1", "kind": "ManifestWork",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"workload": workload(),
                 "executor": {"subject": {"type": "ServiceAccount",
                     "serviceAccount": {"namespace": sa_namespace, "name": sa_name}}}},
    }))
    .expect("a work")
}

/// The hub chart's `ferry-hub-work-executor` ClusterRole, rendered with
/// `sets` and created on the hub; returns its name.
async fn shipped_executor_role(admin: &kube::Client, sets: &'static [&'static str]) -> String {
    let rendered = tokio::task::spawn_blocking(move || render_with("ferry-hub", "ferry", sets))
        .await
        .expect("blocking task")
        .expect("render the hub chart");
    let role: ClusterRole = serde_yaml::Deserializer::from_str(&rendered)
        .map(|doc| Value::deserialize(doc).expect("rendered YAML parses"))
        .find(|doc| {
            doc["kind"] == "ClusterRole"
                && doc["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.ends_with("-work-executor"))
        })
        .map(|doc| serde_json::from_value(doc).expect("a ClusterRole"))
        .expect("the chart renders the work-executor role");
    let name = role.metadata.name.clone().expect("name");
    Api::<ClusterRole>::all(admin.clone())
        .create(&PostParams::default(), &role)
        .await
        .expect("create the shipped role");
    name
}

/// `AUTHOR` bound to ClusterRole `role` in `namespace` (None: cluster-wide).
async fn grant(admin: &kube::Client, role: &str, namespace: Option<&str>) {
    let subjects = Some(vec![Subject {
        kind: "User".into(),
        name: AUTHOR.into(),
        api_group: Some("rbac.authorization.k8s.io".into()),
        ..Default::default()
    }]);
    let role_ref = RoleRef {
        api_group: "rbac.authorization.k8s.io".into(),
        kind: "ClusterRole".into(),
        name: role.into(),
    };
    let metadata = ObjectMeta {
        name: Some(format!("{AUTHOR}-{role}")),
        namespace: namespace.map(Into::into),
        ..Default::default()
    };
    match namespace {
        Some(namespace) => {
            Api::<RoleBinding>::namespaced(admin.clone(), namespace)
                .create(
                    &PostParams::default(),
                    &RoleBinding {
                        metadata,
                        role_ref,
                        subjects,
                    },
                )
                .await
                .expect("role binding");
        }
        None => {
            Api::<ClusterRoleBinding>::all(admin.clone())
                .create(
                    &PostParams::default(),
                    &ClusterRoleBinding {
                        metadata,
                        role_ref,
                        subjects,
                    },
                )
                .await
                .expect("cluster role binding");
        }
    }
}

/// The shipped executor role rendered with `rbac.workExecutors` names its
/// executors by `resourceNames`: a cluster namespace granted it may name
/// `apps/deployer`, and neither `kube-system/deployer` (the same name in
/// another namespace) nor a controller's account of `kube-system`. Before,
/// the role had no `resourceNames` and both were admitted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_executor_role_names_only_its_listed_executors_not_kube_system_accounts() {
    let (hub, admin) = hub_with_author(&[CLUSTER_A]).await;
    let role = shipped_executor_role(&admin, &["rbac.workExecutors={apps/deployer}"]).await;
    grant(&admin, &role, Some(CLUSTER_A)).await;
    let alice = hub.client_as(AUTHOR).await.expect("alice");
    let works = api_in(&alice, "ManifestWork", CLUSTER_A);
    until(
        &works,
        &work_as(CLUSTER_A, "listed", "apps/deployer"),
        Result::is_ok,
    )
    .await
    .expect("the listed executor is admitted");
    for attack in [
        "kube-system/deployer",
        "kube-system/generic-garbage-collector",
    ] {
        // Retried until refused by the policy: the listed executor's
        // admission above does not show that the API server has loaded the
        // policy yet (it admits that work either way); an attack the role
        // admitted for good stays admitted and fails here at the deadline.
        let refused = until(&works, &work_as(CLUSTER_A, "attack", attack), |o| {
            o.as_ref().is_err_and(|m| m.contains(EXECUTOR_POLICY_NAME))
        })
        .await
        .expect_err("an executor the role does not list is refused");
        println!("refusal: {refused}");
        assert!(
            refused.contains(EXECUTOR_POLICY_NAME) && refused.contains(attack),
            "the refusal names the policy and the executor: {refused}"
        );
    }
    hub.stop().await;
}

/// `execute-as` granted by a RoleBinding in one cluster's namespace holds
/// for that cluster's works only; a ClusterRoleBinding, for every cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_as_granted_in_one_cluster_namespace_does_not_reach_another_cluster() {
    let (hub, admin) = hub_with_author(&[CLUSTER_A, CLUSTER_B]).await;
    let role = shipped_executor_role(&admin, &["rbac.workExecutors={apps/deployer}"]).await;
    let alice = hub.client_as(AUTHOR).await.expect("alice");
    let in_a = api_in(&alice, "ManifestWork", CLUSTER_A);
    let in_b = api_in(&alice, "ManifestWork", CLUSTER_B);
    // First the signal that the API server enforces the policy and alice's
    // author role in cluster-b: her work there refused by the policy. The
    // admission in cluster-a below does not show it (a policy not loaded
    // yet admits that work too), and the one-shot check in cluster-b after
    // it then saw a work admitted under load.
    until(&in_b, &work_as(CLUSTER_B, "w", "apps/deployer"), |o| {
        o.as_ref().is_err_and(|m| m.contains(EXECUTOR_POLICY_NAME))
    })
    .await
    .expect_err("before any grant: refused by the policy in cluster-b");
    grant(&admin, &role, Some(CLUSTER_A)).await;
    until(
        &in_a,
        &work_as(CLUSTER_A, "w", "apps/deployer"),
        Result::is_ok,
    )
    .await
    .expect("granted in cluster-a: admitted there");
    let refused = try_create(&in_b, &work_as(CLUSTER_B, "w", "apps/deployer"))
        .await
        .expect_err("not granted in cluster-b: refused there");
    assert!(
        refused.contains(EXECUTOR_POLICY_NAME) && refused.contains(CLUSTER_B),
        "the refusal names the policy and the cluster's namespace: {refused}"
    );
    // A ClusterRoleBinding keeps granting it for every cluster.
    grant(&admin, &role, None).await;
    until(
        &in_b,
        &work_as(CLUSTER_B, "w", "apps/deployer"),
        Result::is_ok,
    )
    .await
    .expect("granted cluster-wide: admitted in cluster-b too");
    hub.stop().await;
}

/// Keeping the executor is no pass: once the author's grant is revoked, a
/// change of a work's spec (or a replica set's) that keeps its executor is
/// refused, while a metadata-only update and the deletion still go through,
/// so the work can be labelled, finalized and deleted. Before, every update
/// keeping the executor was admitted unchecked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_grant_refuses_the_next_spec_change_even_when_it_keeps_the_executor() {
    let (hub, admin) = hub_with_author(&[CLUSTER_A]).await;
    let role = shipped_executor_role(&admin, &["rbac.workExecutors={apps/deployer}"]).await;
    grant(&admin, &role, Some(CLUSTER_A)).await;
    let alice = hub.client_as(AUTHOR).await.expect("alice");
    let works = api_in(&alice, "ManifestWork", CLUSTER_A);
    let replica_sets = api_in(&alice, "ManifestWorkReplicaSet", CLUSTER_A);
    until(
        &works,
        &work_as(CLUSTER_A, "w", "apps/deployer"),
        Result::is_ok,
    )
    .await
    .expect("granted: admitted");
    works
        .create(
            &PostParams::default(),
            &work_as(CLUSTER_A, "w", "apps/deployer"),
        )
        .await
        .expect("stored");
    let mut template = replica_set("rs", "deployer");
    template.metadata.namespace = Some(CLUSTER_A.into());
    template.data["spec"]["manifestWorkTemplate"]["executor"]["subject"]["serviceAccount"]["namespace"] =
        json!("apps");
    replica_sets
        .create(&PostParams::default(), &template)
        .await
        .expect("replica set stored");

    // Revoked: the signal that the API server enforces it is a new work
    // naming the executor being refused.
    Api::<RoleBinding>::namespaced(admin.clone(), CLUSTER_A)
        .delete(&format!("{AUTHOR}-{role}"), &Default::default())
        .await
        .expect("revoke");
    until(&works, &work_as(CLUSTER_A, "probe", "apps/deployer"), |o| {
        o.as_ref().is_err_and(|m| m.contains(EXECUTOR_POLICY_NAME))
    })
    .await
    .expect_err("revoked: a new work is refused");

    let spec_change = |field: &str| {
        json!({"spec": {field: {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cfg", "namespace": "default"}, "data": {"a": "2"}}]}}})
    };
    let merge = |patch: Value| kube::api::Patch::Merge(patch);
    let refused = works
        .patch("w", &Default::default(), &merge(spec_change("workload")))
        .await
        .expect_err("a spec change keeping the executor is checked again, and refused");
    println!("refusal: {refused}");
    assert!(
        refused.to_string().contains(EXECUTOR_POLICY_NAME),
        "{refused}"
    );
    let template_change = json!({"spec": {"manifestWorkTemplate": {"workload":
        {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cfg", "namespace": "default"}, "data": {"a": "2"}}]}}}});
    let refused = replica_sets
        .patch("rs", &Default::default(), &merge(template_change))
        .await
        .expect_err("so is a replica set's template change");
    assert!(
        refused.to_string().contains(EXECUTOR_POLICY_NAME),
        "{refused}"
    );
    let stored = Api::<DynamicObject>::namespaced_with(
        admin.clone(),
        CLUSTER_A,
        &ApiResource::from_gvk(&GroupVersionKind::gvk(
            "work.ferry.dev",
            "v1alpha1",
            "ManifestWork",
        )),
    )
    .get("w")
    .await
    .expect("read");
    assert_eq!(
        stored.data["spec"]["workload"]["manifests"][0]["data"]["a"], "1",
        "the stored work is as it was admitted"
    );

    // Metadata only: no change to what the agent does, not checked.
    works
        .patch(
            "w",
            &Default::default(),
            &merge(json!({"metadata": {"labels": {"team": "a"},
                                       "finalizers": ["example.com/hold"]}})),
        )
        .await
        .expect("a metadata-only update is admitted");
    works
        .delete("w", &Default::default())
        .await
        .expect("the deletion is not checked");
    works
        .patch(
            "w",
            &Default::default(),
            &merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .expect("and the work can be finalized");
    replica_sets
        .delete("rs", &Default::default())
        .await
        .expect("the replica set can be deleted");
    hub.stop().await;
}
