//! An agent run with `--write-as-executor` (the agent chart's
//! `rbac.executorOnly`) holds no workload rights of its own: it reads, keeps
//! its records and impersonates executors. Every object of a work is
//! written, and deleted, as the work's executor, so the spoke's API server
//! judges each write against the executor's RBAC: what it may do applies,
//! what it may not fails on that manifest naming the executor, a work with
//! no executor applies nothing, and an executor without `escalate` cannot
//! widen a Role (OCM's escalation case), all without any check of ferry's.

use ferry_agent::DeletionBrakeOptions;
use ferry_agent::deletion_brake::decide::Limits;
use ferry_agent::deletion_brake::ledger::Ledger;
use ferry_agent::deletion_brake::store::LEDGER_KEY;
use ferry_api::contract::DELETION_BRAKE_LEDGER;
use ferry_api::manifest_work::{
    ExecutorSubjectType, ManifestWorkExecutor, ManifestWorkExecutorSubject,
    ManifestWorkSubjectServiceAccount,
};
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::harness::helm::render_with;
use ferry_e2e::helpers::wait::{wait_deleted, wait_until};
use ferry_e2e::helpers::work_helpers::{
    APPLY_TIMEOUT, config_map, manifest_condition, manifest_work,
};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde::Deserialize as _;
use serde_json::{Value, json};

pub(crate) const CLUSTER: &str = "cluster-a";
pub(crate) const AGENT_NAMESPACE: &str = "ferry-agent";
pub(crate) const AGENT: &str = "executor-only-agent";
pub(crate) const APPS: &str = "apps";
pub(crate) const EXECUTOR: &str = "deployer";

pub(crate) fn executor() -> ManifestWorkExecutor {
    ManifestWorkExecutor {
        subject: ManifestWorkExecutorSubject {
            type_: ExecutorSubjectType::ServiceAccount,
            service_account: Some(ManifestWorkSubjectServiceAccount {
                namespace: APPS.into(),
                name: EXECUTOR.into(),
            }),
        },
    }
}

pub(crate) async fn create<K>(api: &Api<K>, object: Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let object: K = serde_json::from_value(object).expect("object");
    api.create(&PostParams::default(), &object)
        .await
        .expect("create");
}

/// The agent chart rendered with `sets`, for the test's agent
/// ServiceAccount (Helm is fetched like the chart tests do): the test runs
/// the agent with exactly what the chart grants.
async fn agent_chart(sets: &'static [&'static str]) -> Vec<Value> {
    let rendered = tokio::task::spawn_blocking(move || {
        let mut values = vec![format!("serviceAccount.name={AGENT}")];
        values.extend(sets.iter().map(|s| s.to_string()));
        let values: Vec<&str> = values.iter().map(String::as_str).collect();
        render_with("ferry-agent", AGENT_NAMESPACE, &values)
    })
    .await
    .expect("blocking task")
    .expect("render the agent chart");
    serde_yaml::Deserializer::from_str(&rendered)
        .map(|doc| Value::deserialize(doc).expect("rendered YAML parses"))
        .filter(|doc| !doc.is_null())
        .collect()
}

/// The agent's ServiceAccount bound to the chart's roles rendered with
/// `sets`, and the executor allowed to manage ConfigMaps and Roles (without
/// `escalate`) in `apps`; returns the spoke connection of the agent's
/// ServiceAccount.
pub(crate) async fn prepare_spoke(fleet: &Fleet, sets: &'static [&'static str]) -> Config {
    let admin = fleet.spoke(CLUSTER).client.clone();
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    for namespace in [AGENT_NAMESPACE, APPS] {
        create(&namespaces, json!({"metadata": {"name": namespace}})).await;
    }
    let agent_accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), AGENT_NAMESPACE);
    create(&agent_accounts, json!({"metadata": {"name": AGENT}})).await;
    let apps_accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), APPS);
    create(&apps_accounts, json!({"metadata": {"name": EXECUTOR}})).await;
    let chart = agent_chart(sets).await;
    let rules = chart
        .iter()
        .find(|doc| doc["kind"] == "ClusterRole")
        .map(|role| role["rules"].clone())
        .expect("the chart renders a ClusterRole");
    create(
        &Api::<ClusterRole>::all(admin.clone()),
        json!({"metadata": {"name": AGENT}, "rules": rules}),
    )
    .await;
    // The namespaced impersonation grants of `rbac.executors`, as rendered.
    for doc in &chart {
        let namespace = doc["metadata"]["namespace"].as_str().unwrap_or_default();
        if doc["kind"] == "Role" {
            create(
                &Api::<Role>::namespaced(admin.clone(), namespace),
                doc.clone(),
            )
            .await;
        } else if doc["kind"] == "RoleBinding" {
            create(
                &Api::<RoleBinding>::namespaced(admin.clone(), namespace),
                doc.clone(),
            )
            .await;
        }
    }
    create(
        &Api::<ClusterRoleBinding>::all(admin.clone()),
        json!({"metadata": {"name": AGENT},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": AGENT},
               "subjects": [{"kind": "ServiceAccount", "name": AGENT, "namespace": AGENT_NAMESPACE}]}),
    )
    .await;
    create(
        &Api::<Role>::namespaced(admin.clone(), APPS),
        json!({"metadata": {"name": EXECUTOR, "namespace": APPS}, "rules": [
            {"apiGroups": [""], "resources": ["configmaps"],
             "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
            {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"],
             "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
        ]}),
    )
    .await;
    create(
        &Api::<RoleBinding>::namespaced(admin.clone(), APPS),
        json!({"metadata": {"name": EXECUTOR, "namespace": APPS},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": EXECUTOR},
               "subjects": [{"kind": "ServiceAccount", "name": EXECUTOR, "namespace": APPS}]}),
    )
    .await;
    // A pre-existing Role the executor may edit but not widen: it holds no
    // rights on Secrets itself, nor `escalate`.
    create(
        &Api::<Role>::namespaced(admin.clone(), APPS),
        json!({"metadata": {"name": "cm-reader", "namespace": APPS}, "rules": [
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]},
        ]}),
    )
    .await;
    let token = agent_accounts
        .create_token_request(
            AGENT,
            &PostParams::default(),
            &TokenRequest {
                spec: TokenRequestSpec {
                    audiences: vec![],
                    expiration_seconds: Some(3600),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .expect("token request")
        .status
        .expect("token")
        .token;
    // The spoke's kubeconfig with the agent's token instead of the admin's
    // certificate.
    let kubeconfig = Kubeconfig::read_from(&fleet.spoke(CLUSTER).control_plane.info.kubeconfig)
        .expect("kubeconfig");
    let mut raw = serde_json::to_value(&kubeconfig).expect("kubeconfig json");
    for user in raw["users"].as_array_mut().expect("users") {
        user["user"] = json!({"token": token});
    }
    let kubeconfig: Kubeconfig = serde_json::from_value(raw).expect("kubeconfig with token");
    Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("agent config")
}

/// Whether the spoke lets `user` `verb` `resource` in `namespace`.
async fn allowed(admin: &Client, user: &str, verb: &str, resource: &str, namespace: &str) -> bool {
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.into()),
            resource_attributes: Some(ResourceAttributes {
                verb: Some(verb.into()),
                resource: Some(resource.into()),
                namespace: Some(namespace.into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<SubjectAccessReview>::all(admin.clone())
        .create(&PostParams::default(), &review)
        .await
        .expect("review")
        .status
        .is_some_and(|s| s.allowed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_write_goes_as_the_executor_and_the_api_server_judges_it() {
    let mut fleet = Fleet::start(FleetOptions::with_spokes(&[CLUSTER]))
        .await
        .expect("fleet starts");
    let config = prepare_spoke(&fleet, &["rbac.executorOnly=true"]).await;
    let admin = fleet.spoke(CLUSTER).client.clone();
    // The test cannot pass by the agent's own rights: the chart's role
    // gives it none to write workloads with.
    let agent_user = format!("system:serviceaccount:{AGENT_NAMESPACE}:{AGENT}");
    assert!(!allowed(&admin, &agent_user, "create", "configmaps", APPS).await);
    assert!(!allowed(&admin, &agent_user, "delete", "configmaps", APPS).await);
    fleet.stop_agent(CLUSTER).await;
    fleet.set_agent_client(
        CLUSTER,
        Client::try_from(config.clone()).expect("agent client"),
    );
    // With the chart's deletion brake, whose ledger the chart's Role lets
    // the agent keep: the deletion below goes through it.
    fleet.set_agent_options(CLUSTER, |o| {
        o.write_as_executor = Some(config);
        o.deletion_brake = Some(DeletionBrakeOptions {
            namespace: AGENT_NAMESPACE.into(),
            limits: Limits::default(),
        });
    });
    fleet.start_agent(CLUSTER);

    // What the executor may write applies; what it may not fails on its own
    // manifest, naming the executor, and is not there.
    let mut work = manifest_work(
        CLUSTER,
        "as-deployer",
        vec![
            config_map(APPS, "allowed", json!({"k": "v"})),
            config_map("default", "outside", json!({"k": "v"})),
        ],
    );
    work.spec.executor = Some(executor());
    let works = fleet.create_work(&work).await.expect("create work");
    let reported = wait_until(
        &works,
        "as-deployer",
        "both manifests reported",
        APPLY_TIMEOUT,
        |w| {
            manifest_condition(w, 0, "Applied").is_some_and(|c| c.status == "True")
                && manifest_condition(w, 1, "Applied").is_some_and(|c| c.status == "False")
        },
    )
    .await
    .expect("the allowed manifest applies and the other is refused");
    let refused = manifest_condition(&reported, 1, "Applied").expect("Applied");
    println!("refused: {} {}", refused.reason, refused.message);
    assert!(
        refused.message.contains(EXECUTOR),
        "the refusal names the executor: {}",
        refused.message
    );
    let apps_cms = fleet.spoke(CLUSTER).api("v1", "ConfigMap", Some(APPS));
    let default_cms = fleet.spoke(CLUSTER).api("v1", "ConfigMap", Some("default"));
    assert!(apps_cms.get_opt("allowed").await.expect("read").is_some());
    assert!(
        default_cms
            .get_opt("outside")
            .await
            .expect("read")
            .is_none()
    );

    // A work with no executor has nobody to write as.
    let bare = manifest_work(
        CLUSTER,
        "bare",
        vec![config_map(APPS, "bare", json!({"k": "v"}))],
    );
    fleet.create_work(&bare).await.expect("create work");
    let bare = wait_until(&works, "bare", "reported", APPLY_TIMEOUT, |w| {
        manifest_condition(w, 0, "Applied").is_some()
    })
    .await
    .expect("reported");
    let applied = manifest_condition(&bare, 0, "Applied").expect("Applied");
    assert_eq!(
        (applied.status.as_str(), applied.reason.as_str()),
        ("False", "ExecutorRequired"),
        "{applied:?}"
    );
    assert!(apps_cms.get_opt("bare").await.expect("read").is_none());

    // OCM's escalation case: the executor may write Roles but holds no
    // `escalate`; widening a Role beyond its own rights is refused by the
    // API server, and the Role keeps its verbs.
    let mut widen = manifest_work(
        CLUSTER,
        "widen",
        vec![json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "cm-reader", "namespace": APPS},
            "rules": [{"apiGroups": [""], "resources": ["secrets"],
                       "verbs": ["get", "list", "create", "delete"]}],
        })],
    );
    widen.spec.executor = Some(executor());
    fleet.create_work(&widen).await.expect("create work");
    let widened = wait_until(&works, "widen", "reported", APPLY_TIMEOUT, |w| {
        manifest_condition(w, 0, "Applied").is_some()
    })
    .await
    .expect("reported");
    let applied = manifest_condition(&widened, 0, "Applied").expect("Applied");
    assert_eq!(applied.status, "False", "{applied:?}");
    let role = Api::<Role>::namespaced(admin.clone(), APPS)
        .get("cm-reader")
        .await
        .expect("read role");
    assert_eq!(
        role.rules.expect("rules")[0].verbs,
        vec!["get".to_string(), "list".to_string()],
        "the Role keeps its verbs"
    );

    // Deleting the work deletes its object, as the executor.
    works
        .delete("as-deployer", &Default::default())
        .await
        .expect("delete work");
    wait_deleted(&apps_cms, "allowed", "the object deleted", APPLY_TIMEOUT)
        .await
        .expect("the executor deletes what it wrote");
    // ... after the brake recorded it, with the chart's rights.
    let ledger = Api::<ConfigMap>::namespaced(admin.clone(), AGENT_NAMESPACE)
        .get(DELETION_BRAKE_LEDGER)
        .await
        .expect("the agent wrote its ledger");
    let ledger: Ledger = serde_json::from_str(&ledger.data.unwrap_or_default()[LEDGER_KEY])
        .expect("the ledger parses");
    assert_eq!(
        ledger
            .admitted
            .iter()
            .map(|a| a.work.as_str())
            .collect::<Vec<_>>(),
        ["as-deployer"]
    );
    fleet.stop().await;
}
