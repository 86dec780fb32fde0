//! `ferry-bench --webhook-burst`: the same burst of ManifestWork creates on
//! the same hub, once through ferry's admission webhook and once with its
//! registration removed (the CRD's CEL rules and the admission policy stay),
//! so the difference is the webhook alone.

use std::time::{Duration, Instant};

use anyhow::Context;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use kube::api::{Api, DeleteParams, PostParams};

use ferry_api::manifest_work::ManifestWork;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::harness::hub_metrics::{scrape, sum_of};
use ferry_e2e::helpers::work_helpers::{config_map, manifest_work};
use ferry_hub::admission::webhook::{WEBHOOK_CONFIGURATION_NAME, wait_until_enforced};

/// Seconds until `count` creates issued at once all returned.
async fn burst(api: &Api<ManifestWork>, prefix: &str, count: usize) -> anyhow::Result<f64> {
    let started = Instant::now();
    let creates = (0..count).map(|i| {
        let name = format!("{prefix}-{i}");
        let work = manifest_work(
            "cluster-a",
            &name,
            vec![config_map("default", &name, serde_json::json!({"i": "0"}))],
        );
        let api = api.clone();
        async move { api.create(&PostParams::default(), &work).await }
    });
    futures::future::try_join_all(creates)
        .await
        .context("burst create")?;
    Ok(started.elapsed().as_secs_f64())
}

/// Runs `rounds` bursts of `count` creates with the webhook, then as many
/// without, and prints each and the webhook's own review time.
pub async fn webhook_burst(count: usize, rounds: usize) -> anyhow::Result<()> {
    let fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .context("starting the fleet")?;
    let api: Api<ManifestWork> = Api::namespaced(fleet.hub_client.clone(), "cluster-a");
    anyhow::ensure!(
        wait_until_enforced(&fleet.hub_client, "cluster-a", Duration::from_secs(30)).await,
        "the webhook was never enforced"
    );
    let mut with = Vec::new();
    for round in 0..rounds {
        with.push(burst(&api, &format!("hooked-{round}"), count).await?);
    }
    let metrics = scrape(fleet.hub_probes_addr)
        .await
        .context("hub /metrics")?;
    let reviews = sum_of(&metrics, "ferry_hub_webhook_review_duration_seconds_count");
    let review_sum = sum_of(&metrics, "ferry_hub_webhook_review_duration_seconds_sum");
    Api::<ValidatingWebhookConfiguration>::all(fleet.hub_client.clone())
        .delete(WEBHOOK_CONFIGURATION_NAME, &DeleteParams::default())
        .await
        .context("removing the webhook registration")?;
    // The API server drops the webhook asynchronously: wait until the probe
    // it alone refuses is admitted (dry run).
    let deadline = Instant::now() + Duration::from_secs(30);
    while wait_until_enforced(&fleet.hub_client, "cluster-a", Duration::from_millis(100)).await {
        anyhow::ensure!(Instant::now() < deadline, "the webhook stayed enforced");
    }
    let mut without = Vec::new();
    for round in 0..rounds {
        without.push(burst(&api, &format!("plain-{round}"), count).await?);
    }
    for (round, (w, wo)) in with.iter().zip(&without).enumerate() {
        println!(
            "webhook burst round {round}: {count} creates at once: {w:.2} s through the webhook, {wo:.2} s without"
        );
    }
    println!(
        "webhook: {reviews:.0} reviews, {:.2} ms mean time inside the handler",
        if reviews > 0.0 {
            review_sum * 1000.0 / reviews
        } else {
            f64::NAN
        }
    );
    fleet.stop().await;
    Ok(())
}
