//! Which executors a cluster lets works name is its own admins' choice:
//! the agent chart's `rbac.executors` limits the agent's `impersonate`
//! grant (a Role per namespace for `NAMESPACE/NAME`), and the spoke's API
//! server enforces it. An account not listed, here `kube-system/deployer`
//! (the listed executor's name, in another namespace, bound to
//! cluster-admin), bounds nothing: with `rbac.executorOnly` the API server
//! refuses to let the agent impersonate it; in the default mode the agent
//! asks the API server whether it may impersonate the executor before
//! trusting the executor's rights, and refuses the work's manifests
//! (`ExecutorNotAllowed`). Both agents run with exactly the chart's rendered
//! roles and tokens of its ServiceAccount.
//!
//! And on the hub, a running work whose author loses `execute-as` keeps
//! running as admitted until its next change, which is refused, or its
//! deletion, which is not.

use ferry_api::manifest_work::ManifestWork;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use std::time::Duration;

use ferry_e2e::helpers::wait::{wait_deleted, wait_until};
use ferry_e2e::helpers::work_helpers::{
    APPLY_TIMEOUT, config_map, manifest_condition, manifest_work,
};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Client, Config};
use serde_json::json;

use crate::executor_only_agent::{APPS, CLUSTER, EXECUTOR, create, executor, prepare_spoke};

/// The prize: an account named like the listed executor, in `kube-system`,
/// with every right on the spoke.
async fn kube_system_deployer(admin: &Client) {
    create(
        &Api::<ServiceAccount>::namespaced(admin.clone(), "kube-system"),
        json!({"metadata": {"name": EXECUTOR}}),
    )
    .await;
    create(
        &Api::<ClusterRoleBinding>::all(admin.clone()),
        json!({"metadata": {"name": "kube-system-deployer"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
               "subjects": [{"kind": "ServiceAccount", "name": EXECUTOR, "namespace": "kube-system"}]}),
    )
    .await;
}

/// Restarts the fleet's agent with the chart ServiceAccount's connection,
/// writing as executors when `write_as_executor`.
async fn restart_agent_as_chart(fleet: &mut Fleet, config: Config, write_as_executor: bool) {
    fleet.stop_agent(CLUSTER).await;
    fleet.set_agent_client(
        CLUSTER,
        Client::try_from(config.clone()).expect("agent client"),
    );
    if write_as_executor {
        fleet.set_agent_options(CLUSTER, |o| o.write_as_executor = Some(config));
    }
    fleet.start_agent(CLUSTER);
}

/// A work writing ConfigMap `apps/NAME` as executor `EXECUTOR` of
/// `namespace`.
fn work_as(name: &str, namespace: &str) -> ManifestWork {
    let mut work = manifest_work(
        CLUSTER,
        name,
        vec![config_map(APPS, name, json!({"k": "v"}))],
    );
    let mut account = executor();
    if let Some(sa) = account.subject.service_account.as_mut() {
        sa.namespace = namespace.into();
    }
    work.spec.executor = Some(account);
    work
}

/// Creates the attack (`kube-system/deployer`) and the listed work
/// (`apps/deployer`); returns the attack's refusal (reason, message) once
/// the listed work applied.
async fn attack_and_control(fleet: &Fleet) -> (String, String) {
    let works = fleet
        .create_work(&work_as("attack", "kube-system"))
        .await
        .expect("create work");
    let reported = wait_until(
        &works,
        "attack",
        "the manifest reported",
        APPLY_TIMEOUT,
        |w| manifest_condition(w, 0, "Applied").is_some(),
    )
    .await
    .expect("reported");
    let refused = manifest_condition(&reported, 0, "Applied").expect("Applied");
    println!("refused: {} {}", refused.reason, refused.message);
    assert_eq!(refused.status, "False", "{refused:?}");
    let apps_cms = fleet.spoke(CLUSTER).api("v1", "ConfigMap", Some(APPS));
    assert!(apps_cms.get_opt("attack").await.expect("read").is_none());

    // The control: the listed executor is served by the same agent.
    fleet
        .create_work(&work_as("listed", APPS))
        .await
        .expect("create work");
    wait_until(&works, "listed", "applied", APPLY_TIMEOUT, |w| {
        manifest_condition(w, 0, "Applied").is_some_and(|c| c.status == "True")
    })
    .await
    .expect("the listed executor applies");
    assert!(apps_cms.get_opt("listed").await.expect("read").is_some());
    let again = works.get("attack").await.expect("read");
    let still = manifest_condition(&again, 0, "Applied").expect("Applied");
    assert_eq!(still.status, "False", "{still:?}");
    assert!(apps_cms.get_opt("attack").await.expect("read").is_none());
    (refused.reason.clone(), refused.message.clone())
}

/// `rbac.executorOnly` with `rbac.executors={apps/deployer}`: the spoke's
/// API server refuses the agent's impersonation of `kube-system/deployer`,
/// and the manifest carries its message. Before, the list went into the
/// ClusterRole's `resourceNames` as given (`apps/deployer` matched no
/// account, and a bare `deployer` every namespace's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_executor_only_agent_limited_to_listed_executors_cannot_impersonate_a_kube_system_account()
 {
    let mut fleet = Fleet::start(FleetOptions::with_spokes(&[CLUSTER]))
        .await
        .expect("fleet starts");
    let config = prepare_spoke(
        &fleet,
        &["rbac.executorOnly=true", "rbac.executors={apps/deployer}"],
    )
    .await;
    kube_system_deployer(&fleet.spoke(CLUSTER).client).await;
    restart_agent_as_chart(&mut fleet, config, true).await;
    let (_, message) = attack_and_control(&fleet).await;
    // Kubernetes 1.36 words it as the impersonation it looked for, e.g.
    // `cannot impersonate-on:serviceaccount:get resource "configmaps"`.
    assert!(
        message.contains("forbidden") && message.contains("cannot impersonate"),
        "the API server's refusal to let the agent impersonate is reported: {message}"
    );
    fleet.stop().await;
}

/// The default mode with `--require-executor` and
/// `rbac.executors={apps/deployer}`: the agent writes with its own rights,
/// so before it trusted `kube-system/deployer`'s (cluster-admin) reviews and
/// applied the work. Now it asks the API server whether it may impersonate
/// the executor first, and refuses it with `ExecutorNotAllowed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_limited_to_listed_executors_does_not_trust_a_kube_system_account() {
    let mut fleet = Fleet::start(FleetOptions {
        require_executor: true,
        ..FleetOptions::with_spokes(&[CLUSTER])
    })
    .await
    .expect("fleet starts");
    let config = prepare_spoke(&fleet, &["rbac.executors={apps/deployer}"]).await;
    kube_system_deployer(&fleet.spoke(CLUSTER).client).await;
    restart_agent_as_chart(&mut fleet, config, false).await;
    let (reason, message) = attack_and_control(&fleet).await;
    assert_eq!(reason, "ExecutorNotAllowed", "{message}");
    assert!(message.contains("kube-system/deployer"), "{message}");
    fleet.stop().await;
}

/// Retries `attempt` until it returns Ok, or returns its error once RBAC
/// has had `PROPAGATION` to take effect: the signal that the API server
/// enforces a grant.
async fn until_ok<T, F, Fut>(mut attempt: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, kube::Error>>,
{
    let deadline = tokio::time::Instant::now() + PROPAGATION;
    loop {
        let outcome = attempt().await;
        if outcome.is_ok() || tokio::time::Instant::now() >= deadline {
            return outcome;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// How long the hub API server may take to enforce an RBAC change.
const PROPAGATION: Duration = Duration::from_secs(60);
/// The work author on the hub.
const AUTHOR: &str = "alice";

/// What happens to a running work whose author loses `execute-as`: it
/// keeps running as admitted (the agent still corrects drift on its
/// objects), its next spec change is refused, a label still goes through,
/// and deleting it removes its objects from the spoke.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_work_whose_grant_is_revoked_keeps_running_as_admitted_until_it_changes_or_goes() {
    let mut fleet = Fleet::start(FleetOptions::with_spokes(&[CLUSTER]))
        .await
        .expect("fleet starts");
    let config = prepare_spoke(&fleet, &["rbac.executors={apps/deployer}"]).await;
    restart_agent_as_chart(&mut fleet, config, false).await;

    // On the hub: alice writes works in the cluster's namespace and may
    // name apps/deployer there.
    let hub = fleet.hub_client.clone();
    create(
        &Api::<Role>::namespaced(hub.clone(), CLUSTER),
        json!({"metadata": {"name": "author", "namespace": CLUSTER}, "rules": [
            {"apiGroups": ["work.ferry.dev"], "resources": ["manifestworks"],
             "verbs": ["create", "get", "list", "watch", "update", "patch", "delete"]},
        ]}),
    )
    .await;
    create(
        &Api::<Role>::namespaced(hub.clone(), CLUSTER),
        json!({"metadata": {"name": "run-as-deployer", "namespace": CLUSTER}, "rules": [
            {"apiGroups": ["work.ferry.dev"], "resources": ["manifestworks"],
             "resourceNames": ["system:serviceaccount:apps:deployer"], "verbs": ["execute-as"]},
        ]}),
    )
    .await;
    for role in ["author", "run-as-deployer"] {
        create(
            &Api::<RoleBinding>::namespaced(hub.clone(), CLUSTER),
            json!({"metadata": {"name": role, "namespace": CLUSTER},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
                   "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": AUTHOR}]}),
        )
        .await;
    }
    let alice = fleet.hub.client_as(AUTHOR).await.expect("alice");
    let as_alice: Api<ManifestWork> = Api::namespaced(alice, CLUSTER);
    let work = work_as("running", APPS);
    let params = PostParams::default();
    until_ok(|| as_alice.create(&params, &work))
        .await
        .expect("alice creates a work naming apps/deployer");
    let works: Api<ManifestWork> = Api::namespaced(hub.clone(), CLUSTER);
    wait_until(&works, "running", "applied", APPLY_TIMEOUT, |w| {
        manifest_condition(w, 0, "Applied").is_some_and(|c| c.status == "True")
    })
    .await
    .expect("applied as apps/deployer");

    // Revoked; the signal that it holds is a dry-run change being refused.
    Api::<RoleBinding>::namespaced(hub.clone(), CLUSTER)
        .delete("run-as-deployer", &Default::default())
        .await
        .expect("revoke");
    let change = Patch::Merge(json!({"spec": {"workload": {"manifests": [
        config_map(APPS, "running", json!({"k": "changed"}))]}}}));
    let dry_run = PatchParams {
        dry_run: true,
        ..Default::default()
    };
    let refused = async {
        let deadline = tokio::time::Instant::now() + PROPAGATION;
        loop {
            match as_alice.patch("running", &dry_run, &change).await {
                Err(kube::Error::Api(status)) if status.code == 403 => return Ok(status.message),
                other if tokio::time::Instant::now() >= deadline => return Err(other),
                _ => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }
    .await
    .expect("revoked: a spec change is refused");
    println!("refused: {refused}");
    assert!(
        refused.contains("manifestwork-executors.work.ferry.dev"),
        "{refused}"
    );
    as_alice
        .patch("running", &PatchParams::default(), &change)
        .await
        .expect_err("the change itself is refused");

    // The running work keeps what it had: the agent still corrects drift.
    let spoke_cms = fleet.spoke(CLUSTER).api("v1", "ConfigMap", Some(APPS));
    spoke_cms
        .patch(
            "running",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "tampered"}})),
        )
        .await
        .expect("tamper on the spoke");
    wait_until(
        &spoke_cms,
        "running",
        "drift corrected",
        APPLY_TIMEOUT,
        |cm| cm.data["data"]["k"] == "v",
    )
    .await
    .expect("the running work still corrects drift as admitted");

    // Metadata and the deletion are not checked.
    as_alice
        .patch(
            "running",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"revoked": "true"}}})),
        )
        .await
        .expect("a label still goes through");
    as_alice
        .delete("running", &Default::default())
        .await
        .expect("the author may delete it");
    wait_deleted(&spoke_cms, "running", "the object removed", APPLY_TIMEOUT)
        .await
        .expect("its objects go with it");
    fleet.stop().await;
}
