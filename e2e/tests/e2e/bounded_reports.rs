//! One work's status cannot cut its cluster off the hub (issue 48, item 2).
//! A tenant who may write works in a cluster's namespace (an impersonated
//! user with only that right) reports a 600 KB ConfigMap value three times
//! as JSONPath feedback: 1.8 MB of status, over the hub's report cap. Before
//! the bound, the hub ended the agent's session for it, the agent redialled
//! and resent, and every other team's works on the cluster stopped
//! reporting. Now the agent leaves the values out of that manifest's report
//! and says so on it (`StatusFeedbackSynced=False/FeedbackValueTooLarge`),
//! nothing over the cap reaches the hub, the session is the same one
//! throughout, and another team's work created after it applies and
//! reports.

use ferry_api::managed_cluster::ManagedCluster;
use ferry_api::manifest_work::{
    FeedbackRule, FeedbackType, ManifestWork, NamedJsonPath, UpdateStrategyType,
};
use ferry_api::report_bounds::REASON_FEEDBACK_VALUE_TOO_LARGE;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::harness::hub_metrics::hub_metric;
use ferry_e2e::helpers::sessions::session_of;
use ferry_e2e::helpers::tenant_rbac::grant_work_resources;
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{
    APPLY_TIMEOUT, config_map, manifest_condition, manifest_work, strategy_config, wait_applied,
};
use ferry_semantics::contract::FEEDBACK_SYNCED;
use kube::api::{Api, PostParams};
use serde_json::json;

const CLUSTER: &str = "cluster-a";
const TENANT: &str = "mallory";
/// Under the 1 MiB a ConfigMap may hold and the 1.4 MB a work may be;
/// three copies are over the hub's report cap (1.4 MB plus 256 KiB).
const VALUE_BYTES: usize = 600_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_oversized_feedback_costs_only_its_own_details_not_the_clusters_session() {
    let fleet = Fleet::start(FleetOptions::with_spokes(&[CLUSTER]))
        .await
        .expect("fleet starts");
    let hub = fleet.hub_client.clone();
    let clusters: Api<ManagedCluster> = Api::all(hub.clone());
    let admin_works: Api<ManifestWork> = Api::namespaced(hub.clone(), CLUSTER);
    let first = fleet
        .create_work(&manifest_work(
            CLUSTER,
            "before",
            vec![config_map("default", "before", json!({"k": "v"}))],
        ))
        .await
        .expect("create");
    wait_applied(&first, "before").await.expect("served");
    let session = session_of(&clusters, CLUSTER).await;
    let too_large = "ferry_hub_agent_messages_too_large_total{message=\"report\"}";
    let too_large_before = hub_metric(fleet.hub_probes_addr, too_large)
        .await
        .expect("scrape");

    grant_work_resources(&hub, CLUSTER, "tenant-works", TENANT, &["manifestworks"]).await;
    let tenant = fleet.hub.client_as(TENANT).await.expect("tenant client");
    let mut attack = manifest_work(
        CLUSTER,
        "oversized",
        vec![config_map(
            "default",
            "oversized",
            json!({"big": "x".repeat(VALUE_BYTES)}),
        )],
    );
    let mut config = strategy_config(
        "",
        "configmaps",
        "default",
        "oversized",
        UpdateStrategyType::Update,
    );
    config.feedback_rules = vec![FeedbackRule {
        type_: FeedbackType::JsonPaths,
        json_paths: ["a", "b", "c"]
            .into_iter()
            .map(|name| NamedJsonPath {
                name: name.into(),
                path: ".data.big".into(),
                version: None,
            })
            .collect(),
    }];
    attack.spec.manifest_configs = vec![config];
    Api::<ManifestWork>::namespaced(tenant, CLUSTER)
        .create(&PostParams::default(), &attack)
        .await
        .expect("the tenant may write works in the cluster's namespace");

    // The oversized values are left out of that manifest's report, and it
    // says why.
    let reported = wait_until(
        &admin_works,
        "oversized",
        "the feedback reported as too large",
        APPLY_TIMEOUT,
        |w| {
            manifest_condition(w, 0, FEEDBACK_SYNCED)
                .is_some_and(|c| c.reason == REASON_FEEDBACK_VALUE_TOO_LARGE)
        },
    )
    .await
    .expect("the agent reports the values as too large");
    let synced = manifest_condition(&reported, 0, FEEDBACK_SYNCED).expect("synced");
    assert_eq!(synced.status, "False");
    assert!(
        synced.message.contains("a; b; c"),
        "names the values: {}",
        synced.message
    );

    // Another team's work still applies and reports, over the same session,
    // and no report over the cap ever reached the hub.
    let victim = fleet
        .create_work(&manifest_work(
            CLUSTER,
            "another-team",
            vec![config_map("default", "another-team", json!({"k": "v"}))],
        ))
        .await
        .expect("create");
    wait_applied(&victim, "another-team")
        .await
        .expect("another team's work reports");
    assert_eq!(
        session_of(&clusters, CLUSTER).await,
        session,
        "the agent kept its session"
    );
    assert_eq!(
        hub_metric(fleet.hub_probes_addr, too_large)
            .await
            .expect("scrape"),
        too_large_before,
        "the agent bounded its own report"
    );
    fleet.stop().await;
}
