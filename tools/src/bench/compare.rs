//! `ferry-bench --compare ocm`: the same workload against ferry, then against
//! OCM's work agent, never both at once, and one table with both columns and
//! the ratio.

use std::time::Duration;

use anyhow::Context;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::core::GroupVersionKind;

use super::ocm::{OCM_CLUSTER, OCM_VERSION, OcmFleet, ensure_work_agent};
use super::workload::{Figures, Target, Workload, run, write_requests};
use ferry_e2e::harness::agent_process::AgentProcess;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};

fn works_api(client: kube::Client, api_version: &str, namespace: &str) -> Api<DynamicObject> {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, "ManifestWork"));
    Api::namespaced_with(client, namespace, &resource)
}

/// ferry: the hub in this process, the real `ferry-agent` binary as its own
/// process (so its RSS is its own).
async fn ferry(load: &Workload) -> anyhow::Result<Figures> {
    let mut fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .context("starting ferry's fleet")?;
    fleet.stop_agent("cluster-a").await;
    let agent = AgentProcess::start(&fleet, "cluster-a", None, &[])
        .await
        .context("starting ferry-agent")?;
    let pid = agent.pid().context("ferry-agent has no pid")?;
    let api_version = "work.ferry.dev/v1alpha1";
    let target = Target {
        label: "ferry".into(),
        works: works_api(fleet.hub_client.clone(), api_version, "cluster-a"),
        api_version: api_version.into(),
        hub: fleet.hub_client.clone(),
        spoke: fleet.spokes[0].client.clone(),
        agent_pid: pid,
    };
    let figures = run(&target, load).await;
    agent.kill().await;
    fleet.stop().await;
    figures
}

/// OCM's work agent with its defaults on its own two control planes; also
/// the write rate of the bare control planes before the agent starts.
async fn ocm(load: &Workload) -> anyhow::Result<(Figures, (f64, f64))> {
    let binary = tokio::task::spawn_blocking(ensure_work_agent)
        .await
        .context("the OCM build task")??;
    let mut fleet = OcmFleet::start().await?;
    // The API servers' own writes (leases, ...) with no agent at all.
    tokio::time::sleep(Duration::from_secs(15)).await;
    let (spoke0, hub0) = (
        write_requests(&fleet.spoke_client).await?,
        write_requests(&fleet.hub_client).await?,
    );
    tokio::time::sleep(load.steady_window).await;
    let minutes = load.steady_window.as_secs_f64() / 60.0;
    let bare = (
        (write_requests(&fleet.spoke_client).await? - spoke0) / minutes,
        (write_requests(&fleet.hub_client).await? - hub0) / minutes,
    );
    println!(
        "bare control planes (no agent): writes/min spoke {:.1}, hub {:.1}",
        bare.0, bare.1
    );
    let pid = fleet.start_agent(&binary)?;
    let api_version = "work.open-cluster-management.io/v1";
    let target = Target {
        label: format!("OCM {OCM_VERSION}"),
        works: works_api(fleet.hub_client.clone(), api_version, OCM_CLUSTER),
        api_version: api_version.into(),
        hub: fleet.hub_client.clone(),
        spoke: fleet.spoke_client.clone(),
        agent_pid: pid,
    };
    let figures = run(&target, load).await;
    if figures.is_err() {
        eprintln!("OCM's work agent log: {}", fleet.log_path().display());
    }
    fleet.stop().await;
    Ok((figures?, bare))
}

/// Runs ferry, then OCM, and prints the table.
pub async fn compare(load: &Workload) -> anyhow::Result<()> {
    let ferry = ferry(load).await?;
    let (ocm, bare) = ocm(load).await?;
    print_table(load, &ferry, &ocm, bare);
    Ok(())
}

fn ratio(ferry: f64, ocm: f64) -> String {
    if ferry > 0.0 && ocm.is_finite() {
        format!("{:.1}×", ocm / ferry)
    } else {
        "—".into()
    }
}

fn print_table(load: &Workload, f: &Figures, o: &Figures, bare: (f64, f64)) {
    let n = load.works;
    let drift = |x: &Figures| {
        if x.drift_over_bound == load.drift_objects {
            format!(
                "> {:.0} s (none within the bound)",
                load.drift_bound.as_secs_f64()
            )
        } else if x.drift_over_bound > 0 {
            format!(
                "{:.0} / {:.0} ms ({} > {:.0} s)",
                x.drift_ms[0],
                x.drift_ms[1],
                x.drift_over_bound,
                load.drift_bound.as_secs_f64()
            )
        } else {
            format!("{:.1} / {:.1} ms", x.drift_ms[0], x.drift_ms[1])
        }
    };
    let drift_ratio = if o.drift_over_bound > 0 {
        format!(
            "> {:.0}×",
            load.drift_bound.as_secs_f64() * 1000.0 / f.drift_ms[0]
        )
    } else {
        ratio(f.drift_ms[0], o.drift_ms[0])
    };
    let rows: Vec<[String; 4]> = vec![
        [
            format!("create → Applied, {n} works one after another, p50 / p90 / p99"),
            format!(
                "{:.1} / {:.1} / {:.1} ms",
                f.create_ms[0], f.create_ms[1], f.create_ms[2]
            ),
            format!(
                "{:.1} / {:.1} / {:.1} ms",
                o.create_ms[0], o.create_ms[1], o.create_ms[2]
            ),
            format!(
                "{} / {}",
                ratio(f.create_ms[0], o.create_ms[0]),
                ratio(f.create_ms[2], o.create_ms[2])
            ),
        ],
        [
            format!("{n} works created at once, until all Applied (creates alone)"),
            format!("{:.2} s ({:.2} s)", f.burst_create_s.1, f.burst_create_s.0),
            format!("{:.2} s ({:.2} s)", o.burst_create_s.1, o.burst_create_s.0),
            ratio(f.burst_create_s.1, o.burst_create_s.1),
        ],
        [
            format!("{n} works updated at once, until all Applied at the new generation"),
            format!("{:.2} s", f.burst_update_s),
            format!("{:.2} s", o.burst_update_s),
            ratio(f.burst_update_s, o.burst_update_s),
        ],
        [
            format!(
                "spoke drift on {} objects at once, until reverted, p50 / p99",
                load.drift_objects
            ),
            drift(f),
            drift(o),
            drift_ratio,
        ],
        [
            format!(
                "Deployment status change → hub feedback, p50 / max ({} changes)",
                load.feedback_samples
            ),
            format!("{:.1} / {:.1} ms", f.feedback_ms[0], f.feedback_ms[1]),
            format!("{:.0} / {:.0} ms", o.feedback_ms[0], o.feedback_ms[1]),
            ratio(f.feedback_ms[0], o.feedback_ms[0]),
        ],
        [
            format!(
                "steady-state writes/min spoke / hub API server (bare control plane: {:.1} / {:.1})",
                bare.0, bare.1
            ),
            format!(
                "{:.1} / {:.1}",
                f.steady_writes_per_min.0, f.steady_writes_per_min.1
            ),
            format!(
                "{:.1} / {:.1}",
                o.steady_writes_per_min.0, o.steady_writes_per_min.1
            ),
            "—".into(),
        ],
        [
            format!("agent RSS with {n} / {} works", 2 * n + 1),
            format!(
                "{:.1} / {:.1} MiB",
                f.rss_kib.0 as f64 / 1024.0,
                f.rss_kib.1 as f64 / 1024.0
            ),
            format!(
                "{:.1} / {:.1} MiB",
                o.rss_kib.0 as f64 / 1024.0,
                o.rss_kib.1 as f64 / 1024.0
            ),
            format!(
                "{} / {}",
                ratio(f.rss_kib.0 as f64, o.rss_kib.0 as f64),
                ratio(f.rss_kib.1 as f64, o.rss_kib.1 as f64)
            ),
        ],
    ];
    println!();
    println!("| measure | ferry | OCM work agent {OCM_VERSION} | OCM / ferry |");
    println!("|---|---|---|---|");
    for [a, b, c, d] in rows {
        println!("| {a} | {b} | {c} | {d} |");
    }
}
