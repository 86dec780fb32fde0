//! `spec.executor` (OCM's executor): the agent applies a manifest only if the
//! named ServiceAccount may do so on the spoke, as the spoke's own RBAC
//! answers a SubjectAccessReview. A manifest it may not apply fails with
//! OCM's reason and a message naming the ServiceAccount and the verbs, and
//! is not written, while the work's other manifests apply; granting the
//! rights later lets it apply without any change to the work. A work that
//! deletes its objects needs `delete` too, an orphaning one does not. An
//! agent run with `--require-executor` refuses works without an executor.
//! An executor cannot grant, through a Role or binding, rights it holds
//! neither itself nor through `escalate` / `bind` (OCM's escalation case).

use ferry_api::manifest_work::{
    DeleteOption, ExecutorSubjectType, ManifestWork, ManifestWorkExecutor,
    ManifestWorkExecutorSubject, ManifestWorkSubjectServiceAccount, PropagationPolicy,
};
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::namespaces::create_namespace;
use ferry_e2e::helpers::spoke_actor::read_json;
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{
    APPLY_TIMEOUT, config_map, manifest_condition, manifest_work, wait_applied,
};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};
use serde_json::json;

const CLUSTER: &str = "cluster-a";
const ACCOUNT_NAMESPACE: &str = "team";
const ACCOUNT: &str = "deployer";
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

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

/// The ServiceAccount, and namespaces `granted`, `no-delete` and `denied`.
async fn prepare_spoke(client: &Client) {
    for namespace in [ACCOUNT_NAMESPACE, "granted", "no-delete", "denied"] {
        create_namespace(client, namespace).await;
    }
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), ACCOUNT_NAMESPACE);
    accounts
        .create(
            &PostParams::default(),
            &ServiceAccount {
                metadata: ObjectMeta {
                    name: Some(ACCOUNT.into()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .expect("create the executor ServiceAccount");
    grant(
        client,
        "granted",
        &["get", "create", "update", "patch", "delete"],
    )
    .await;
    grant(client, "no-delete", &["get", "create", "update", "patch"]).await;
}

/// Lets the executor do `verbs` on ConfigMaps in `namespace`.
async fn grant(client: &Client, namespace: &str, verbs: &[&str]) {
    grant_rule(client, namespace, "executor", "", &["configmaps"], verbs).await;
}

/// Binds the executor, in `namespace`, to a Role `name` allowing `verbs` on
/// `resources` of API group `group`.
async fn grant_rule(
    client: &Client,
    namespace: &str,
    name: &str,
    group: &str,
    resources: &[&str],
    verbs: &[&str],
) {
    let meta = ObjectMeta {
        name: Some(name.into()),
        namespace: Some(namespace.into()),
        ..Default::default()
    };
    let roles: Api<Role> = Api::namespaced(client.clone(), namespace);
    roles
        .create(
            &PostParams::default(),
            &Role {
                metadata: meta.clone(),
                rules: Some(vec![PolicyRule {
                    api_groups: Some(vec![group.into()]),
                    resources: Some(resources.iter().map(|r| r.to_string()).collect()),
                    verbs: verbs.iter().map(|v| v.to_string()).collect(),
                    ..Default::default()
                }]),
            },
        )
        .await
        .expect("create role");
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), namespace);
    bindings
        .create(
            &PostParams::default(),
            &RoleBinding {
                metadata: meta,
                role_ref: RoleRef {
                    api_group: "rbac.authorization.k8s.io".into(),
                    kind: "Role".into(),
                    name: name.into(),
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

#[tokio::test]
async fn an_executor_applies_only_what_its_service_account_may_and_retries_after_a_grant() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&[CLUSTER]))
        .await
        .expect("fleet starts");
    let admin = fleet.spoke(CLUSTER).client.clone();
    prepare_spoke(&admin).await;
    let mut work = manifest_work(
        CLUSTER,
        "w",
        vec![
            config_map("granted", "a", json!({"k": "v"})),
            config_map("no-delete", "b", json!({"k": "v"})),
            config_map("denied", "c", json!({"k": "v"})),
        ],
    );
    work.spec.executor = Some(executor());
    let works = fleet.create_work(&work).await.expect("create work");
    let status = |w: &ManifestWork, ordinal| {
        manifest_condition(w, ordinal, "Applied").map(|c| c.status.clone())
    };
    let reported = wait_until(
        &works,
        "w",
        "all three manifests reported",
        APPLY_TIMEOUT,
        |w| (0..3).all(|i| status(w, i).is_some()),
    )
    .await
    .expect("reported");
    assert_eq!(status(&reported, 0).as_deref(), Some("True"));
    for (ordinal, namespace, verbs) in [
        (1, "no-delete", "delete"),
        (2, "denied", "get, create, update, patch, delete"),
    ] {
        let applied = manifest_condition(&reported, ordinal, "Applied").expect("Applied");
        assert_eq!(applied.status, "False", "{applied:?}");
        assert_eq!(applied.reason, "AppliedManifestFailed", "{applied:?}");
        assert!(
            applied.message.contains(&format!(
                "ServiceAccount {ACCOUNT_NAMESPACE}/{ACCOUNT} may not {verbs}"
            )) && applied.message.contains(namespace),
            "{}",
            applied.message
        );
    }
    let spoke = |namespace: &str| fleet.spoke(CLUSTER).api("v1", "ConfigMap", Some(namespace));
    assert_eq!(read_json(&spoke("granted"), "a").await["data"]["k"], "v");
    for (namespace, name) in [("no-delete", "b"), ("denied", "c")] {
        assert!(
            spoke(namespace)
                .get_opt(name)
                .await
                .expect("read")
                .is_none(),
            "{namespace}/{name} must not be written"
        );
    }

    // Rights granted on the spoke: the refused manifest applies on a retry,
    // with no change to the work.
    grant(
        &admin,
        "denied",
        &["get", "create", "update", "patch", "delete"],
    )
    .await;
    wait_until(
        &works,
        "w",
        "manifest 2 applied after the grant",
        APPLY_TIMEOUT,
        |w| status(w, 2).as_deref() == Some("True"),
    )
    .await
    .expect("applied after the grant");
    assert_eq!(read_json(&spoke("denied"), "c").await["data"]["k"], "v");
    fleet.stop().await;
}

#[tokio::test]
async fn an_orphaning_work_needs_no_delete_right() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&[CLUSTER]))
        .await
        .expect("fleet starts");
    prepare_spoke(&fleet.spoke(CLUSTER).client).await;
    let mut work = manifest_work(
        CLUSTER,
        "w",
        vec![config_map("no-delete", "b", json!({"k": "v"}))],
    );
    work.spec.executor = Some(executor());
    work.spec.delete_option = Some(DeleteOption {
        propagation_policy: PropagationPolicy::Orphan,
        selectively_orphans: None,
        ttl_seconds_after_finished: None,
    });
    let works = fleet.create_work(&work).await.expect("create work");
    wait_applied(&works, "w")
        .await
        .expect("applied without delete rights");
    let spoke = fleet
        .spoke(CLUSTER)
        .api("v1", "ConfigMap", Some("no-delete"));
    assert_eq!(read_json(&spoke, "b").await["data"]["k"], "v");
    fleet.stop().await;
}

#[tokio::test]
async fn an_agent_that_requires_an_executor_refuses_works_without_one() {
    let fleet = Fleet::start(FleetOptions {
        require_executor: true,
        ..FleetOptions::with_spokes(&[CLUSTER])
    })
    .await
    .expect("fleet starts");
    prepare_spoke(&fleet.spoke(CLUSTER).client).await;
    let bare = manifest_work(
        CLUSTER,
        "bare",
        vec![config_map("granted", "bare", json!({"k": "v"}))],
    );
    let works = fleet.create_work(&bare).await.expect("create work");
    let reported = wait_until(&works, "bare", "manifest reported", APPLY_TIMEOUT, |w| {
        manifest_condition(w, 0, "Applied").is_some()
    })
    .await
    .expect("reported");
    let applied = manifest_condition(&reported, 0, "Applied").expect("Applied");
    assert_eq!(
        (applied.status.as_str(), applied.reason.as_str()),
        ("False", "ExecutorRequired"),
        "{applied:?}"
    );
    let spoke = fleet.spoke(CLUSTER).api("v1", "ConfigMap", Some("granted"));
    assert!(spoke.get_opt("bare").await.expect("read").is_none());

    let mut with_executor = manifest_work(
        CLUSTER,
        "named",
        vec![config_map("granted", "named", json!({"k": "v"}))],
    );
    with_executor.spec.executor = Some(executor());
    fleet
        .create_work(&with_executor)
        .await
        .expect("create work");
    wait_applied(&works, "named")
        .await
        .expect("a work with an executor applies");
    fleet.stop().await;
}

fn cm_role(verbs: &[&str]) -> serde_json::Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "role-cm-creator", "namespace": "escalation"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": verbs}]})
}

#[tokio::test]
async fn an_executor_without_escalate_cannot_widen_a_role_and_can_once_granted() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&[CLUSTER]))
        .await
        .expect("fleet starts");
    let admin = fleet.spoke(CLUSTER).client.clone();
    prepare_spoke(&admin).await;
    create_namespace(&admin, "escalation").await;
    // OCM's escalation case: the executor may write Roles and RoleBindings
    // but holds neither escalate nor bind, and a Role exists with less.
    grant_rule(
        &admin,
        "escalation",
        "rbac-writer",
        RBAC_GROUP,
        &["roles", "rolebindings"],
        &["get", "create", "update", "patch", "delete"],
    )
    .await;
    let existing: Role = serde_json::from_value(cm_role(&["get", "list"])).expect("role");
    Api::<Role>::namespaced(admin.clone(), "escalation")
        .create(&PostParams::default(), &existing)
        .await
        .expect("the existing role");
    let widened = cm_role(&["create", "update", "patch", "get", "list", "delete"]);
    let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "cm-creators", "namespace": "escalation"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "role-cm-creator"},
        "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": ACCOUNT_NAMESPACE}]});
    let mut work = manifest_work(CLUSTER, "widen", vec![widened, binding]);
    work.spec.executor = Some(executor());
    let works = fleet.create_work(&work).await.expect("create work");
    let refused = |w: &ManifestWork, ordinal| {
        manifest_condition(w, ordinal, "Applied")
            .is_some_and(|c| c.status == "False" && c.reason == "AppliedManifestFailed")
    };
    let reported = wait_until(&works, "widen", "both refused", APPLY_TIMEOUT, |w| {
        refused(w, 0) && refused(w, 1)
    })
    .await
    .expect("the escalation is refused");
    let message = &manifest_condition(&reported, 0, "Applied")
        .expect("Applied")
        .message;
    assert!(
        message.contains("permission escalation")
            && message.contains(&format!("{ACCOUNT_NAMESPACE}/{ACCOUNT}")),
        "the refusal names the executor and the escalation: {message}"
    );
    let roles =
        fleet
            .spoke(CLUSTER)
            .api("rbac.authorization.k8s.io/v1", "Role", Some("escalation"));
    assert_eq!(
        read_json(&roles, "role-cm-creator").await["rules"][0]["verbs"],
        json!(["get", "list"]),
        "the Role keeps its verbs"
    );

    // With escalate and bind the same work applies, unchanged.
    grant_rule(
        &admin,
        "escalation",
        "rbac-escalator",
        RBAC_GROUP,
        &["roles"],
        &["escalate", "bind"],
    )
    .await;
    wait_applied(&works, "widen")
        .await
        .expect("applied once the executor may escalate and bind");
    assert_eq!(
        read_json(&roles, "role-cm-creator").await["rules"][0]["verbs"],
        json!(["create", "update", "patch", "get", "list", "delete"])
    );
    fleet.stop().await;
}
