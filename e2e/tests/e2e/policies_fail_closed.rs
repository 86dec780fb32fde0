//! Policies fail closed (issue 30, item 4): a deleted admission policy
//! binding is noticed by the leader, which fails its `/readyz` naming it,
//! shows it in `ferry_hub_admission_policy_missing`, and re-applies it; the
//! check is then enforced again.

use std::time::Duration;

use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::harness::hub_metrics::{get, scrape};
use ferry_hub::admission::executor_policy::EXECUTOR_POLICY_NAME;
use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBinding;
use kube::api::{Api, DeleteParams};

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
        if denies && code == 200 && metrics.contains(&format!("{gauge} 0")) {
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
