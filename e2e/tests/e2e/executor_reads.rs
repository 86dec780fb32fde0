//! An executor bounds what the agent reads for a work's status, not only
//! what it writes. Attacking as a tenant would: a work names an executor
//! ServiceAccount with no rights on the spoke and lists a Secret that exists
//! there, asking for `.data.token` through a feedback rule (ReadOnly, or a
//! write the executor may not make) or through a CEL condition rule's
//! message. The agent may read every Secret itself, but reports nothing of
//! one the executor may not `get`: the manifest's `Available` condition says
//! `ExecutorCannotRead`, naming the executor and the verb (a refused write
//! of an object the work never created: `Available=False` with the refusal,
//! known from the work's own record), and the Secret's value appears
//! nowhere in the work's status. Granted `get`, the executor's
//! work sees the value.

use ferry_api::manifest_work::{
    ConditionRule, ConditionRuleType, ExecutorSubjectType, FeedbackRule, FeedbackType,
    ManifestConfigOption, ManifestWork, ManifestWorkExecutor, ManifestWorkExecutorSubject,
    ManifestWorkSubjectServiceAccount, NamedJsonPath, UpdateStrategyType,
};
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{
    APPLY_TIMEOUT, feedback_value, manifest_condition, manifest_work, strategy_config,
};
use k8s_openapi::api::core::v1::{Namespace, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::api::{Api, ObjectMeta, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::{Value, json};

const CLUSTER: &str = "cluster-a";
const ACCOUNT_NAMESPACE: &str = "team";
const ACCOUNT: &str = "deployer";
const VAULT: &str = "vault";
const SECRET: &str = "token";
/// The Secret's value, and its base64 form (what `.data.token` holds).
const CANARY: &str = "ferry-leak-canary-7f3a";
const CANARY_BASE64: &str = "ZmVycnktbGVhay1jYW5hcnktN2YzYQ==";

fn executor() -> ManifestWorkExecutor {
    ManifestWorkExecutor {
        subject: ManifestWorkExecutorSubject {
            type_: ExecutorSubjectType::ServiceAccount,
            service_account: Some(ManifestWorkSubjectServiceAccount {
                namespace: ACCOUNT_NAMESPACE.into(),
                name: ACCOUNT.into(),
            }),
        },
    }
}

fn meta(namespace: Option<&str>, name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: namespace.map(Into::into),
        ..Default::default()
    }
}

/// Namespaces `team` (with the executor ServiceAccount, granted nothing)
/// and `vault` (with the Secret holding [`CANARY`]).
async fn prepare_spoke(client: &Client) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for name in [ACCOUNT_NAMESPACE, VAULT] {
        namespaces
            .create(
                &PostParams::default(),
                &Namespace {
                    metadata: meta(None, name),
                    ..Default::default()
                },
            )
            .await
            .unwrap_or_else(|e| panic!("create namespace {name}: {e}"));
    }
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), ACCOUNT_NAMESPACE);
    accounts
        .create(
            &PostParams::default(),
            &ServiceAccount {
                metadata: meta(Some(ACCOUNT_NAMESPACE), ACCOUNT),
                ..Default::default()
            },
        )
        .await
        .expect("create the executor ServiceAccount");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), VAULT);
    secrets
        .create(
            &PostParams::default(),
            &Secret {
                metadata: meta(Some(VAULT), SECRET),
                string_data: Some([("token".to_string(), CANARY.to_string())].into()),
                ..Default::default()
            },
        )
        .await
        .expect("create the Secret");
}

/// Lets the executor `get` the Secret, and nothing else.
async fn grant_get(client: &Client) {
    let roles: Api<Role> = Api::namespaced(client.clone(), VAULT);
    roles
        .create(
            &PostParams::default(),
            &Role {
                metadata: meta(Some(VAULT), "read-token"),
                rules: Some(vec![PolicyRule {
                    api_groups: Some(vec![String::new()]),
                    resources: Some(vec!["secrets".into()]),
                    resource_names: Some(vec![SECRET.into()]),
                    verbs: vec!["get".into()],
                    ..Default::default()
                }]),
            },
        )
        .await
        .expect("create role");
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), VAULT);
    bindings
        .create(
            &PostParams::default(),
            &RoleBinding {
                metadata: meta(Some(VAULT), "read-token"),
                role_ref: RoleRef {
                    api_group: "rbac.authorization.k8s.io".into(),
                    kind: "Role".into(),
                    name: "read-token".into(),
                },
                subjects: Some(vec![Subject {
                    kind: "ServiceAccount".into(),
                    name: ACCOUNT.into(),
                    namespace: Some(ACCOUNT_NAMESPACE.into()),
                    ..Default::default()
                }]),
            },
        )
        .await
        .expect("create role binding");
}

/// The Secret as a work lists it; `data` is what a writing work sets.
fn secret_manifest(data: Option<Value>) -> Value {
    let mut manifest = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": SECRET, "namespace": VAULT}});
    if let Some(data) = data {
        manifest["stringData"] = data;
    }
    manifest
}

fn token_feedback() -> FeedbackRule {
    FeedbackRule {
        type_: FeedbackType::JsonPaths,
        json_paths: vec![NamedJsonPath {
            name: "token".into(),
            path: ".data.token".into(),
            version: None,
        }],
    }
}

fn secret_config(strategy: UpdateStrategyType) -> ManifestConfigOption {
    strategy_config("", "secrets", VAULT, SECRET, strategy)
}

/// A work for the Secret run by the executor, with `config`.
fn work(name: &str, manifest: Value, config: ManifestConfigOption) -> ManifestWork {
    let mut work = manifest_work(CLUSTER, name, vec![manifest]);
    work.spec.executor = Some(executor());
    work.spec.manifest_configs = vec![config];
    work
}

/// Whether the manifest's `Available` condition says the executor may not
/// read the Secret, naming it and the verb.
fn refused_read(work: &ManifestWork) -> bool {
    manifest_condition(work, 0, "Available").is_some_and(|c| {
        c.reason == "ExecutorCannotRead"
            && c.message.contains(&format!(
                "executor {ACCOUNT_NAMESPACE}/{ACCOUNT} may not get secrets in namespace {VAULT}"
            ))
    })
}

/// Runs `work` on a fresh fleet whose executor has no rights, waits for the
/// refused read, and asserts the Secret's value is nowhere in the status.
async fn assert_no_leak(work: ManifestWork) {
    let fleet = Fleet::start(FleetOptions::with_spokes(&[CLUSTER]))
        .await
        .expect("fleet starts");
    prepare_spoke(&fleet.spoke(CLUSTER).client).await;
    assert_refused_without_leak(&fleet, work, refused_read).await;
    fleet.stop().await;
}

/// Creates `work`, waits until `refused` holds for it (the positive signal
/// that the agent decided not to read), and asserts the Secret's value is
/// nowhere in its status and the Secret is unchanged.
async fn assert_refused_without_leak(
    fleet: &Fleet,
    work: ManifestWork,
    refused: fn(&ManifestWork) -> bool,
) {
    let name = work.metadata.name.clone().expect("work name");
    let works = fleet.create_work(&work).await.expect("create work");
    let reported = wait_until(
        &works,
        &name,
        "the read refused, naming the executor and the verb",
        APPLY_TIMEOUT,
        refused,
    )
    .await
    .expect("the read is refused");
    let status = serde_json::to_string(&reported.status).expect("status serializes");
    for value in [CANARY, CANARY_BASE64] {
        assert!(
            !status.contains(value),
            "the Secret's value leaked into the status: {status}"
        );
    }
    assert!(
        feedback_value(&reported, 0, "token").is_none(),
        "no feedback: {status}"
    );
    // Whatever the work wanted written stays unwritten.
    let secret = fleet.spoke(CLUSTER).api("v1", "Secret", Some(VAULT));
    let live = secret.get(SECRET).await.expect("read the Secret");
    let live = serde_json::to_value(live).expect("json");
    assert_eq!(live["data"]["token"], CANARY_BASE64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_work_cannot_read_a_secret_its_executor_may_not_get() {
    let mut config = secret_config(UpdateStrategyType::ReadOnly);
    config.feedback_rules = vec![token_feedback()];
    assert_no_leak(work("read-only", secret_manifest(None), config)).await;
}

/// A refused write of an object this work never created: its own record
/// says so, with no read, and the manifest is `Available=False` with the
/// refusal as the reason, as OCM reports it (issue 48), where it used to be
/// `Unknown/ExecutorCannotRead`.
fn refused_write_never_created(work: &ManifestWork) -> bool {
    manifest_condition(work, 0, "Available").is_some_and(|c| {
        c.status == "False"
            && c.reason == "AppliedManifestFailed"
            && c.message
                .starts_with("this work never created the object and its write was refused")
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_write_does_not_report_the_object_read_as_the_agent() {
    let mut config = secret_config(UpdateStrategyType::Update);
    config.feedback_rules = vec![token_feedback()];
    let manifest = secret_manifest(Some(json!({"token": "overwritten"})));
    let fleet = Fleet::start(FleetOptions::with_spokes(&[CLUSTER]))
        .await
        .expect("fleet starts");
    prepare_spoke(&fleet.spoke(CLUSTER).client).await;
    assert_refused_without_leak(
        &fleet,
        work("refused-write", manifest, config),
        refused_write_never_created,
    )
    .await;
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_condition_rule_message_cannot_carry_a_secret_the_executor_may_not_read() {
    let mut config = secret_config(UpdateStrategyType::ReadOnly);
    config.condition_rules = vec![ConditionRule {
        condition: "Leak".into(),
        type_: ConditionRuleType::Cel,
        cel_expressions: vec!["true".into()],
        message_expression: "object.data.token".into(),
        ..Default::default()
    }];
    assert_no_leak(work("cel-message", secret_manifest(None), config)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_executor_granted_get_on_the_secret_sees_its_feedback() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&[CLUSTER]))
        .await
        .expect("fleet starts");
    let admin = fleet.spoke(CLUSTER).client.clone();
    prepare_spoke(&admin).await;
    grant_get(&admin).await;
    let mut config = secret_config(UpdateStrategyType::ReadOnly);
    config.feedback_rules = vec![token_feedback()];
    let works = fleet
        .create_work(&work("granted", secret_manifest(None), config))
        .await
        .expect("create work");
    let reported = wait_until(&works, "granted", "the feedback", APPLY_TIMEOUT, |w| {
        feedback_value(w, 0, "token").and_then(|v| v.string.as_deref()) == Some(CANARY_BASE64)
    })
    .await
    .expect("the executor's read is reported");
    let available = manifest_condition(&reported, 0, "Available").expect("Available");
    assert_eq!(available.status, "True", "{available:?}");
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_executor_only_agent_reads_as_the_executor_and_nothing_for_a_work_without_one() {
    let mut fleet = Fleet::start(FleetOptions::with_spokes(&[CLUSTER]))
        .await
        .expect("fleet starts");
    prepare_spoke(&fleet.spoke(CLUSTER).client).await;
    // The agent keeps the admin's rights (it may read every Secret): what
    // it reports must still be only what the executor may read.
    let kubeconfig = Kubeconfig::read_from(&fleet.spoke(CLUSTER).control_plane.info.kubeconfig)
        .expect("kubeconfig");
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("agent config");
    fleet.stop_agent(CLUSTER).await;
    fleet.set_agent_options(CLUSTER, |o| o.write_as_executor = Some(config));
    fleet.start_agent(CLUSTER);

    let mut config = secret_config(UpdateStrategyType::ReadOnly);
    config.feedback_rules = vec![token_feedback()];
    let as_executor = work("impersonated", secret_manifest(None), config.clone());
    assert_refused_without_leak(&fleet, as_executor, refused_read).await;

    let mut bare = work("no-executor", secret_manifest(None), config);
    bare.spec.executor = None;
    assert_refused_without_leak(&fleet, bare, |w| {
        manifest_condition(w, 0, "Available").is_some_and(|c| {
            c.reason == "ExecutorRequired" && c.message.contains("reads objects only as")
        })
    })
    .await;
    fleet.stop().await;
}
