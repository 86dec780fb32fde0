//! The agent brakes a mass deletion whatever the hub says (issue 49, the
//! last line): one event on the hub that removes every work of a cluster
//! removes at most the agent's budget of objects; the rest stay, each held
//! work says so and how to release it, the hold survives the agent's
//! restart (it is recorded on the spoke), and a platform admin's release on
//! the spoke (`kubectl annotate`, or `kubectl ferry release-deletions
//! CLUSTER`) lets the held deletions go, recorded with who released them;
//! someone without rights on the spoke's ledger cannot release.
//!
//! - the works deleted on the hub all at once (as a deleted CRD or cluster
//!   namespace deletes them);
//! - a hub whose store is wiped and restarted empty: the agent evicts what
//!   the hub no longer has, within the same budget.
//!
//! Both fail without the brake: every object goes. Each hold shows on the
//! cluster's ManagedCluster (`status.deletionBrake`, reported again by a
//! restarted agent's new session) and in the hub's
//! `ferry_hub_clusters_deletions_held`, and goes from both once released.

use std::time::Duration;

use ferry_agent::DeletionBrakeOptions;
use ferry_agent::Observability;
use ferry_agent::deletion_brake::decide::Limits;
use ferry_agent::deletion_brake::ledger::Ledger;
use ferry_api::contract::{DELETION_BRAKE_LEDGER, RELEASE_DELETIONS_ANNOTATION};
use ferry_api::managed_cluster::ManagedCluster;
use ferry_api::manifest_work::ManifestWork;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions, Spoke};
use ferry_e2e::harness::hub_metrics::{
    STATUS_REPORTS_RECEIVED, hub_metric, wait_metric_above, wait_metric_at_most,
};
use ferry_e2e::helpers::brake_ledger::ledger_of;
use ferry_e2e::helpers::kubectl_ferry::{kubectl_ferry, succeeded};
use ferry_e2e::helpers::wait::{wait_deleted, wait_until};
use ferry_e2e::helpers::work_helpers::{
    APPLY_TIMEOUT, config_map, manifest_work, wait_applied, work_condition,
};
use ferry_semantics::contract::{DELETING, REASON_DELETION_BRAKE_HELD};
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::config::Kubeconfig;
use serde_json::json;

const SPOKE: &str = "cluster-a";
const WORKS: usize = 8;
/// A quarter of 8 objects, and the floor: 2 may go per window.
const BUDGET: usize = 2;
/// Where the agent keeps its ledger in these tests.
const LEDGER_NAMESPACE: &str = "default";
/// Who released, as the platform admin writes it.
const RELEASED_BY: &str = "platform-admin: hub restored, deletions checked";

fn braked(eviction_grace: Duration) -> FleetOptions {
    let mut options = FleetOptions::with_spokes(&[SPOKE]);
    options.eviction_grace = eviction_grace;
    options.deletion_brake = Some(DeletionBrakeOptions {
        namespace: LEDGER_NAMESPACE.into(),
        limits: Limits {
            percent: 25,
            floor: BUDGET as u64,
            // Longer than the test: nothing is let go by the clock.
            window: Duration::from_secs(3600),
        },
    });
    options
}

fn name(i: usize) -> String {
    format!("braked-{i}")
}

/// `WORKS` works of one ConfigMap each, applied.
async fn applied_works(fleet: &Fleet) -> Api<ManifestWork> {
    let mut works = None;
    for i in 0..WORKS {
        let work = manifest_work(
            SPOKE,
            &name(i),
            vec![config_map("default", &name(i), json!({"k": "v"}))],
        );
        works = Some(fleet.create_work(&work).await.expect("create work"));
    }
    let works = works.expect("at least one work");
    for i in 0..WORKS {
        wait_applied(&works, &name(i)).await.expect("applied");
    }
    works
}

/// Waits until the agent has decided on every one of the `WORKS` deletions:
/// `BUDGET` admitted, the rest held.
async fn wait_decided(ledgers: &Api<ConfigMap>) -> Ledger {
    let ledger = wait_until(
        ledgers,
        DELETION_BRAKE_LEDGER,
        "every deletion admitted or held",
        APPLY_TIMEOUT,
        |c| {
            let ledger = ledger_of(c);
            ledger.admitted.len() + ledger.held.len() == WORKS
        },
    )
    .await
    .expect("the agent decides on every deletion");
    ledger_of(&ledger)
}

/// The ConfigMaps of the works still on the spoke.
async fn remaining(config_maps: &Api<ConfigMap>) -> Vec<String> {
    let mut left = Vec::new();
    for i in 0..WORKS {
        if config_maps.get_opt(&name(i)).await.expect("read").is_some() {
            left.push(name(i));
        }
    }
    left
}

/// The hub's gauge of clusters whose brake holds deletions.
const CLUSTERS_DELETIONS_HELD: &str = "ferry_hub_clusters_deletions_held";

fn session_of(cluster: &ManagedCluster) -> String {
    cluster
        .status
        .as_ref()
        .map(|s| s.session_id.clone())
        .unwrap_or_default()
}

/// Waits until the spoke's ManagedCluster shows the held works (None:
/// nothing held) as reported in a session other than `not_session`.
async fn wait_cluster_shows(
    fleet: &Fleet,
    held: Option<usize>,
    not_session: &str,
) -> ManagedCluster {
    let clusters: Api<ManagedCluster> = Api::all(fleet.hub_client.clone());
    let cluster = wait_until(
        &clusters,
        SPOKE,
        "the agent's brake shown on its ManagedCluster",
        APPLY_TIMEOUT,
        |c| {
            let brake = c.status.as_ref().and_then(|s| s.deletion_brake.as_ref());
            session_of(c) != not_session
                && brake.map(|b| b.held_works as usize) == held
                && brake.is_none_or(|b| b.held_objects as usize == held.unwrap_or_default())
        },
    )
    .await
    .expect("the hub shows what the agent's brake holds");
    if held.is_some() {
        let brake = cluster
            .status
            .as_ref()
            .and_then(|s| s.deletion_brake.as_ref())
            .expect("shown");
        assert!(!brake.since.is_empty(), "{brake:?}");
        assert_eq!(brake.ledger_namespace, LEDGER_NAMESPACE, "{brake:?}");
        assert!(
            brake.release.contains(&format!(
                "-n {LEDGER_NAMESPACE} {DELETION_BRAKE_LEDGER} {RELEASE_DELETIONS_ANNOTATION}="
            )),
            "the cluster says how to release: {brake:?}"
        );
    }
    cluster
}

/// How a platform admin releases the hold.
enum Release<'a> {
    /// `kubectl annotate` on the spoke's ledger.
    Annotate,
    /// `kubectl ferry release-deletions CLUSTER`, with the hub's and the
    /// spoke's admin kubeconfigs.
    Cli(&'a Fleet),
}

/// A platform admin releases the hold on the spoke, and every held object
/// goes; the release is recorded with who (as the spoke knows them) and
/// the field manager that wrote it.
async fn release_and_wait(
    ledgers: &Api<ConfigMap>,
    config_maps: &Api<ConfigMap>,
    how: Release<'_>,
) {
    let (by, manager) = match how {
        Release::Annotate => {
            let release =
                json!({"metadata": {"annotations": {RELEASE_DELETIONS_ANNOTATION: RELEASED_BY}}});
            ledgers
                .patch(
                    DELETION_BRAKE_LEDGER,
                    &PatchParams::apply("kubectl-annotate").force(),
                    &Patch::Apply(&json!({
                        "apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": DELETION_BRAKE_LEDGER, "annotations": release["metadata"]["annotations"]},
                    })),
                )
                .await
                .expect("annotate the ledger");
            (RELEASED_BY.to_string(), "kubectl-annotate")
        }
        Release::Cli(fleet) => {
            let spoke = fleet.spoke(SPOKE);
            let output = kubectl_ferry(
                &fleet.hub.info.kubeconfig,
                &[
                    "release-deletions",
                    SPOKE,
                    "--reason",
                    "hub restored, deletions checked",
                    "--spoke-kubeconfig",
                    &spoke.control_plane.info.kubeconfig.display().to_string(),
                ],
            )
            .await;
            let printed = succeeded(&output, "kubectl ferry release-deletions");
            println!("{printed}");
            assert!(
                printed.contains(&format!("released {} held works", WORKS - BUDGET)),
                "{printed}"
            );
            let user = user_name(&spoke.client).await;
            (
                format!("{user}: hub restored, deletions checked ("),
                "kubectl-ferry",
            )
        }
    };
    for i in 0..WORKS {
        wait_deleted(
            config_maps,
            &name(i),
            "released object deleted",
            APPLY_TIMEOUT,
        )
        .await
        .expect("a release lets the held deletions go");
    }
    let ledger = wait_until(
        ledgers,
        DELETION_BRAKE_LEDGER,
        "release recorded",
        APPLY_TIMEOUT,
        |c| ledger_of(c).held.is_empty(),
    )
    .await
    .expect("the release is recorded");
    let record = ledger_of(&ledger)
        .releases
        .last()
        .cloned()
        .expect("a release is recorded");
    assert!(record.by.starts_with(&by), "{record:?}");
    assert_eq!(record.manager, manager);
    assert_eq!(record.works as usize, WORKS - BUDGET);
}

/// The user name the API server of `client` knows it as.
async fn user_name(client: &kube::Client) -> String {
    Api::<SelfSubjectReview>::all(client.clone())
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .expect("self subject review")
        .status
        .and_then(|s| s.user_info)
        .and_then(|u| u.username)
        .expect("a user name")
}

/// A kubeconfig for `spoke` that acts as `user` (impersonated by its
/// admin), written under `dir`.
fn kubeconfig_as(spoke: &Spoke, user: &str, dir: &std::path::Path) -> std::path::PathBuf {
    let mut kubeconfig =
        Kubeconfig::read_from(&spoke.control_plane.info.kubeconfig).expect("spoke kubeconfig");
    for auth in &mut kubeconfig.auth_infos {
        if let Some(info) = auth.auth_info.as_mut() {
            info.impersonate = Some(user.to_string());
        }
    }
    let path = dir.join(format!("{user}.kubeconfig"));
    std::fs::write(&path, serde_yaml::to_string(&kubeconfig).expect("yaml")).expect("write");
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn works_deleted_all_at_once_on_the_hub_remove_only_the_budget_until_released_on_the_spoke() {
    let mut fleet = Fleet::start(braked(Duration::from_secs(3600)))
        .await
        .expect("fleet starts");
    let works = applied_works(&fleet).await;
    let spoke = fleet.spoke(SPOKE).client.clone();
    let config_maps: Api<ConfigMap> = Api::namespaced(spoke.clone(), "default");
    let ledgers: Api<ConfigMap> = Api::namespaced(spoke, LEDGER_NAMESPACE);

    // One event removes every work of the cluster.
    works
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .expect("delete every work");
    let ledger = wait_decided(&ledgers).await;
    assert_eq!(ledger.admitted.len(), BUDGET, "{ledger:?}");
    let held: Vec<String> = ledger.held.iter().map(|h| h.work.clone()).collect();
    assert_eq!(held.len(), WORKS - BUDGET);
    // The admitted ones go; the held ones stay and say why on the hub.
    for admitted in &ledger.admitted {
        wait_deleted(&works, &admitted.work, "admitted work gone", APPLY_TIMEOUT)
            .await
            .expect("an admitted deletion completes");
    }
    for work in &held {
        let work = wait_until(&works, work, "held on the hub", APPLY_TIMEOUT, |w| {
            work_condition(w, DELETING).is_some_and(|c| c.reason == REASON_DELETION_BRAKE_HELD)
        })
        .await
        .expect("a held work says so");
        let message = &work_condition(&work, DELETING).expect("Deleting").message;
        assert!(
            message.contains("kubectl annotate") && message.contains(DELETION_BRAKE_LEDGER),
            "the message says how to release: {message}"
        );
    }
    assert_eq!(remaining(&config_maps).await, {
        let mut held = held.clone();
        held.sort();
        held
    });
    // The cluster says so on the hub, for whoever looks at clusters.
    let shown = wait_cluster_shows(&fleet, Some(WORKS - BUDGET), "").await;
    wait_metric_above(
        fleet.hub_probes_addr,
        CLUSTERS_DELETIONS_HELD,
        0.0,
        APPLY_TIMEOUT,
    )
    .await
    .expect("the hub counts the cluster as holding");

    // Restarted, the agent reads its hold from the spoke: once it has
    // reported every held work again, none of their objects went.
    fleet.stop_agent(SPOKE).await;
    let observability = Observability::default();
    fleet.set_agent_options(SPOKE, |o| o.observability = observability.clone());
    let reports = hub_metric(fleet.hub_probes_addr, STATUS_REPORTS_RECEIVED)
        .await
        .expect("scrape the hub");
    fleet.start_agent(SPOKE);
    wait_metric_above(
        fleet.hub_probes_addr,
        STATUS_REPORTS_RECEIVED,
        reports + (WORKS - BUDGET - 1) as f64,
        APPLY_TIMEOUT,
    )
    .await
    .expect("the restarted agent reports every held work");
    assert_eq!(
        remaining(&config_maps).await.len(),
        WORKS - BUDGET,
        "the hold survives the agent's restart"
    );
    assert_eq!(
        observability.metrics.deletions_held.get(),
        (WORKS - BUDGET) as i64,
        "the agent's metric shows the held works"
    );
    // The new session's start clears the report; its agent reports again.
    wait_cluster_shows(&fleet, Some(WORKS - BUDGET), &session_of(&shown)).await;

    release_and_wait(&ledgers, &config_maps, Release::Annotate).await;
    wait_cluster_shows(&fleet, None, "").await;
    wait_metric_at_most(
        fleet.hub_probes_addr,
        CLUSTERS_DELETIONS_HELD,
        0.0,
        APPLY_TIMEOUT,
    )
    .await
    .expect("the hub no longer counts the cluster");
    for work in &held {
        wait_deleted(
            &works,
            work,
            "released work gone from the hub",
            APPLY_TIMEOUT,
        )
        .await
        .expect("a released work completes its deletion");
    }
    fleet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_restarted_with_an_empty_store_evicts_only_the_budget_until_released_on_the_spoke() {
    let grace = Duration::from_secs(2);
    let mut fleet = Fleet::start(braked(grace)).await.expect("fleet starts");
    let works = applied_works(&fleet).await;
    let spoke = fleet.spoke(SPOKE).client.clone();
    let config_maps: Api<ConfigMap> = Api::namespaced(spoke.clone(), "default");
    let ledgers: Api<ConfigMap> = Api::namespaced(spoke, LEDGER_NAMESPACE);

    // The hub's store loses every work while no hub watches (a restore of
    // an empty or old etcd): the hub that starts knows none of them.
    fleet.stop_hub().await;
    works
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .expect("delete every work");
    let no_finalizers = json!({"metadata": {"finalizers": null}});
    for i in 0..WORKS {
        works
            .patch(
                &name(i),
                &PatchParams::default(),
                &Patch::Merge(&no_finalizers),
            )
            .await
            .expect("strip the finalizer");
    }
    for i in 0..WORKS {
        wait_deleted(&works, &name(i), "work gone from the hub", APPLY_TIMEOUT)
            .await
            .expect("gone");
    }
    fleet.start_hub().await.expect("hub starts again");

    let ledger = wait_decided(&ledgers).await;
    assert_eq!(ledger.admitted.len(), BUDGET, "{ledger:?}");
    for admitted in &ledger.admitted {
        wait_deleted(
            &config_maps,
            &admitted.work,
            "admitted eviction",
            APPLY_TIMEOUT,
        )
        .await
        .expect("an admitted eviction completes");
    }
    // Decided and recorded before acting: the held ones are untouched.
    assert_eq!(remaining(&config_maps).await.len(), WORKS - BUDGET);
    wait_cluster_shows(&fleet, Some(WORKS - BUDGET), "").await;

    // Someone without rights on the spoke's ledger (a tenant with the
    // hub's kubeconfig and a spoke identity of its own) cannot release.
    let dir = tempfile::tempdir().expect("temp dir");
    let outsider = kubeconfig_as(fleet.spoke(SPOKE), "tenant-dave", dir.path());
    let refused = kubectl_ferry(
        &fleet.hub.info.kubeconfig,
        &[
            "release-deletions",
            SPOKE,
            "--reason",
            "let me",
            "--spoke-kubeconfig",
            &outsider.display().to_string(),
        ],
    )
    .await;
    let stderr = String::from_utf8_lossy(&refused.stderr).to_string();
    assert!(
        !refused.status.success() && stderr.contains("Forbidden"),
        "{stderr}"
    );
    assert_eq!(remaining(&config_maps).await.len(), WORKS - BUDGET);

    release_and_wait(&ledgers, &config_maps, Release::Cli(&fleet)).await;
    wait_cluster_shows(&fleet, None, "").await;
    fleet.stop().await;
}
