//! `ferry-bench`: measures a fleet on real control planes and prints figures:
//! control-plane start time and memory, and the latency from creating a
//! ManifestWork on the hub to the hub showing it applied on the spoke.
#![forbid(unsafe_code)]

use std::time::{Duration, Instant};

use ferry_api::managed_cluster::ManagedCluster;
use ferry_e2e::helpers::wait::wait_until;

use anyhow::Context;
use clap::Parser;
use ferry_api::manifest_work::ManifestWork;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::spoke_actor::merge_as;
use ferry_e2e::helpers::work_helpers::{
    config_map, is_applied_at_current_generation, manifest_work,
};
use ferry_tools::bench::agent_binary::start_agent_binary;
use ferry_tools::bench::api_requests::{Window, report};
use ferry_tools::bench::stats::{histogram, quantile_ms, rss_mib};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use kube::runtime::{WatchStreamExt, watcher};

#[derive(Parser)]
#[command(name = "ferry-bench", about = "Measure ferry on real control planes")]
struct Cli {
    /// Works to create one after another for the apply-latency figure.
    #[arg(long, default_value_t = 50)]
    works: usize,
    /// Spoke edits to time for the drift-correction figure (0: none).
    #[arg(long, default_value_t = 20)]
    drift_samples: usize,
    /// Instead of the latency figures, apply this many ConfigMaps spread
    /// over `--scale-namespaces` namespaces on one spoke (`--works` works),
    /// and print watch connections, process RSS, first-pass time and drift
    /// correction at that scale. 0 = off.
    #[arg(long, default_value_t = 0)]
    scale_objects: usize,
    /// Namespaces the `--scale-objects` ConfigMaps are spread over.
    #[arg(long, default_value_t = 500)]
    scale_namespaces: usize,
    /// Instead of the figures above, run one workload against ferry and then
    /// against the named system (only `ocm`: OCM's work agent, built from the
    /// Go module cache) and print one table with both.
    #[arg(long, value_parser = ["ocm"])]
    compare: Option<String>,
    /// `--compare`: works created one after another, then as many at once
    /// and updated at once.
    #[arg(long, default_value_t = 100)]
    compare_works: usize,
    /// `--compare`: longest wait for one drift correction, in seconds (OCM's
    /// agent does not watch its objects and corrects on a slow resync).
    #[arg(long, default_value_t = 120)]
    drift_bound_seconds: u64,
    /// `--compare`: Deployment status changes timed for the feedback figure.
    #[arg(long, default_value_t = 5)]
    feedback_samples: usize,
    /// `--compare`: seconds over which steady-state writes are counted.
    #[arg(long, default_value_t = 60)]
    steady_seconds: u64,
    /// Instead of the figures above, time this many ManifestWork creates
    /// issued at once, through the hub's admission webhook and then with its
    /// registration removed. 0 = off.
    #[arg(long, default_value_t = 0)]
    webhook_burst: usize,
    /// `--webhook-burst`: bursts on each side.
    #[arg(long, default_value_t = 3)]
    burst_rounds: usize,
    /// Instead of the figures above, run the `ferry-agent` binary with this
    /// many works applied and print where its resident memory is. 0 = off.
    #[arg(long, default_value_t = 0)]
    agent_rss: usize,
    /// `--agent-rss`: unrelated objects (ConfigMaps and Secrets) written on
    /// the spoke before the agent starts, some of them changing while drift
    /// is timed. 0 = an empty spoke.
    #[arg(long, default_value_t = 0)]
    crowd: usize,
    /// `--agent-rss`: an extra argument for `ferry-agent` (repeatable).
    #[arg(long, allow_hyphen_values = true)]
    agent_arg: Vec<String>,
    /// Instead of the figures above, time this many works of another team
    /// created one after another (create -> Applied with its condition rule
    /// True) on the real `ferry-agent` binary, quiet and then beside a
    /// hostile team's runaway rules and oversized feedback. 0 = off.
    #[arg(long, default_value_t = 0)]
    noisy_neighbour: usize,
    /// Time the real `ferry-agent` binary (as production runs it: its own
    /// process, its own spoke client) instead of the agent in this process,
    /// for the latency and drift figures. `FERRY_AGENT_BIN` names it, else
    /// the one next to `ferry-bench`.
    #[arg(long)]
    agent_binary: bool,
    /// With the latency figure, audit the hub's and the spoke's API servers
    /// and print where each work's create → Applied went: admission, the
    /// agent's spoke writes (in order) and reads with the server's time for
    /// each, the way through hub and agent, the status write, the watch
    /// back. The audit logs are written synchronously, so the latency figure
    /// of such a run is not comparable with one without them.
    #[arg(long)]
    api_requests: bool,
    /// Instead of the figures above, what sealing Secrets costs: sizes per
    /// recipient, opening time, and create -> Applied of this many works of
    /// 1 and of 100 Secrets, plain and sealed. 0 = off.
    #[arg(long, default_value_t = 0)]
    sealed: usize,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    if cli.compare.is_some() {
        let load = ferry_tools::bench::workload::Workload {
            works: cli.compare_works,
            drift_objects: cli.drift_samples,
            drift_bound: Duration::from_secs(cli.drift_bound_seconds),
            feedback_samples: cli.feedback_samples,
            steady_window: Duration::from_secs(cli.steady_seconds),
            step_timeout: Duration::from_secs(300),
        };
        return ferry_tools::bench::compare::compare(&load).await;
    }
    if cli.agent_rss > 0 {
        return ferry_tools::bench::agent_rss::agent_rss(
            cli.agent_rss,
            cli.crowd,
            &cli.agent_arg,
            Duration::from_secs(10),
        )
        .await;
    }
    if cli.sealed > 0 {
        return ferry_tools::bench::sealed::sealed(cli.sealed).await;
    }
    if cli.noisy_neighbour > 0 {
        return ferry_tools::bench::noisy_neighbour::noisy_neighbour(cli.noisy_neighbour).await;
    }
    if cli.webhook_burst > 0 {
        return ferry_tools::bench::webhook_burst::webhook_burst(
            cli.webhook_burst,
            cli.burst_rounds,
        )
        .await;
    }
    let mut options = FleetOptions::with_spokes(&["cluster-a"]);
    options.audit_spokes = cli.api_requests;
    options.audit_hub = cli.api_requests;
    let mut fleet = Fleet::start(options).await.context("starting the fleet")?;
    let agent = if cli.agent_binary {
        Some(start_agent_binary(&mut fleet, "cluster-a", &[]).await?)
    } else {
        None
    };
    for plane in std::iter::once(&fleet.hub).chain(fleet.spokes.iter().map(|s| &s.control_plane)) {
        println!(
            "control plane {:<10} ready in {:>5.2} s, RSS {:>4} MiB",
            plane.name,
            plane.startup.as_secs_f64(),
            plane.pid().map(rss_mib).unwrap_or_default()
        );
    }

    // Time works, not the agent's start: wait until its session is open.
    let started = Instant::now();
    let clusters: Api<ManagedCluster> = Api::all(fleet.hub_client.clone());
    let connected = |c: &ManagedCluster| c.status.as_ref().is_some_and(|s| s.connected);
    wait_until(
        &clusters,
        "cluster-a",
        "agent connected",
        Duration::from_secs(60),
        connected,
    )
    .await
    .context("the agent did not connect")?;
    println!(
        "agent connected {:.2} s after the fleet was up",
        started.elapsed().as_secs_f64()
    );

    if cli.scale_objects > 0 {
        scale(&fleet, &cli).await?;
        if let Some(agent) = agent {
            agent.kill().await;
        }
        fleet.stop().await;
        return Ok(());
    }

    let works: Api<ManifestWork> = Api::namespaced(fleet.hub_client.clone(), "cluster-a");
    let mut applied = watcher(works.clone(), watcher::Config::default())
        .applied_objects()
        .boxed();
    let mut latencies = Vec::with_capacity(cli.works);
    let mut windows = Vec::with_capacity(cli.works);
    for i in 0..cli.works {
        let name = format!("bench-{i}");
        let work = manifest_work(
            "cluster-a",
            &name,
            vec![config_map(
                "default",
                &name,
                serde_json::json!({"i": i.to_string()}),
            )],
        );
        let started = Instant::now();
        let from = Timestamp::now();
        works
            .create(&PostParams::default(), &work)
            .await
            .context("create work")?;
        loop {
            let seen = tokio::time::timeout(Duration::from_secs(60), applied.try_next())
                .await
                .context("no progress for 60 s")?
                .context("watch failed")?
                .context("watch ended")?;
            if seen.name_any() == name && is_applied_at_current_generation(&seen) {
                break;
            }
        }
        latencies.push(started.elapsed());
        windows.push(Window {
            from,
            to: Timestamp::now(),
        });
    }
    let latencies = histogram(&latencies)?;
    let pct = |q: f64| quantile_ms(&latencies, q);
    println!(
        "hub create -> hub shows Applied (spoke read + create with the Update strategy + status write), {} works: p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        latencies.len(),
        pct(0.5),
        pct(0.9),
        pct(0.99),
        pct(1.0)
    );
    if cli.api_requests {
        print_api_requests(
            &fleet.hub.info.audit_log,
            &fleet.spokes[0].control_plane.info.audit_log,
            &windows,
        )?;
    }

    if cli.drift_samples == 0 {
        if let Some(agent) = agent {
            agent.kill().await;
        }
        fleet.stop().await;
        return Ok(());
    }
    // Drift: edit a managed object on the spoke, time until ferry has put it back.
    let spoke = fleet.spokes[0].api("v1", "ConfigMap", Some("default"));
    let mut spoke_changes = watcher(
        spoke.clone(),
        watcher::Config::default().fields("metadata.name=bench-0"),
    )
    .applied_objects()
    .boxed();
    let mut drift = Vec::with_capacity(cli.drift_samples);
    for i in 0..cli.drift_samples {
        let started = Instant::now();
        merge_as(
            &spoke,
            "bench-0",
            "bench-drift",
            &serde_json::json!({"data": {"i": format!("drift-{i}")}}),
        )
        .await
        .context("drift the object")?;
        loop {
            let seen = tokio::time::timeout(Duration::from_secs(30), spoke_changes.try_next())
                .await
                .context("drift not corrected within 30 s")?
                .context("watch failed")?
                .context("watch ended")?;
            if seen.data["data"]["i"] == "0" {
                break;
            }
        }
        drift.push(started.elapsed());
    }
    let drift = histogram(&drift)?;
    println!(
        "spoke edit -> corrected by the agent (watch, Update strategy), {} edits: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        drift.len(),
        quantile_ms(&drift, 0.5),
        quantile_ms(&drift, 0.99),
        quantile_ms(&drift, 1.0)
    );
    if let Some(agent) = agent {
        agent.kill().await;
    }
    fleet.stop().await;
    Ok(())
}

/// The scale figures: `cli.scale_objects` ConfigMaps in
/// `cli.scale_namespaces` namespaces, in `cli.works` works (each work holds
/// its namespaces and their ConfigMaps).
async fn scale(fleet: &Fleet, cli: &Cli) -> anyhow::Result<()> {
    let spoke = &fleet.spokes[0];
    let namespaces = cli.scale_namespaces.max(1);
    let works_count = cli.works.clamp(1, namespaces);
    let per_namespace = cli.scale_objects.div_ceil(namespaces);
    let watches_before = spoke_watches(&spoke.client).await?;
    let rss_before = rss_mib(std::process::id());
    println!(
        "scale: {} ConfigMaps in {namespaces} namespaces, {works_count} works; spoke WATCH requests before: {watches_before}, bench process RSS (hub + agent + harness) before: {rss_before} MiB",
        per_namespace * namespaces
    );
    let works: Api<ManifestWork> = Api::namespaced(fleet.hub_client.clone(), "cluster-a");
    let started = Instant::now();
    let mut names = Vec::new();
    for w in 0..works_count {
        let mut manifests = Vec::new();
        for n in (w..namespaces).step_by(works_count) {
            let ns = format!("scale-{n}");
            manifests.push(
                serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            );
            for c in 0..per_namespace {
                manifests.push(config_map(
                    &ns,
                    &format!("cm-{c}"),
                    serde_json::json!({"i": c.to_string()}),
                ));
            }
        }
        let name = format!("scale-{w}");
        works
            .create(
                &PostParams::default(),
                &manifest_work("cluster-a", &name, manifests),
            )
            .await
            .context("create work")?;
        names.push(name);
    }
    for name in &names {
        wait_until(
            &works,
            name,
            "applied",
            Duration::from_secs(1800),
            is_applied_at_current_generation,
        )
        .await
        .context("work not applied")?;
    }
    let first_pass = started.elapsed();
    // Watches open as passes end; give the last ones a moment to connect.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let watches_after = spoke_watches(&spoke.client).await?;
    println!(
        "scale: first pass (create -> every work Applied) {:.1} s; spoke WATCH requests after: {watches_after} (+{}); bench process RSS after: {} MiB",
        first_pass.as_secs_f64(),
        watches_after.saturating_sub(watches_before),
        rss_mib(std::process::id())
    );

    // Drift: edit one ConfigMap in each of `drift_samples` namespaces at
    // once, time until each is put back.
    let samples = cli.drift_samples.min(namespaces);
    let edits = (0..samples).map(|i| async move {
        let ns = format!("scale-{}", i * namespaces / samples.max(1));
        let api = spoke.api("v1", "ConfigMap", Some(&ns));
        let mut changes = watcher(
            api.clone(),
            watcher::Config::default().fields("metadata.name=cm-0"),
        )
        .applied_objects()
        .boxed();
        // The watch's first event is the current object.
        let _ = changes.try_next().await;
        let started = Instant::now();
        merge_as(
            &api,
            "cm-0",
            "bench-drift",
            &serde_json::json!({"data": {"i": "drift"}}),
        )
        .await
        .context("drift the object")?;
        loop {
            let seen = tokio::time::timeout(Duration::from_secs(700), changes.try_next())
                .await
                .context("drift not corrected within 700 s")?
                .context("watch failed")?
                .context("watch ended")?;
            if seen.data["data"]["i"] == "0" {
                return anyhow::Ok(started.elapsed());
            }
        }
    });
    let drift = futures::future::try_join_all(edits).await?;
    let drift = histogram(&drift)?;
    println!(
        "scale: spoke edit -> corrected, {} edits in different namespaces at once: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        drift.len(),
        quantile_ms(&drift, 0.5),
        quantile_ms(&drift, 0.99),
        quantile_ms(&drift, 1.0)
    );
    Ok(())
}

/// Open WATCH requests on the spoke API server (its own controllers'
/// included), from `apiserver_longrunning_requests` on /metrics.
async fn spoke_watches(client: &kube::Client) -> anyhow::Result<u64> {
    let request = http::Request::get("/metrics")
        .body(Vec::new())
        .context("metrics request")?;
    let text = client
        .request_text(request)
        .await
        .context("reading the spoke's /metrics")?;
    Ok(text
        .lines()
        .filter(|l| {
            l.starts_with("apiserver_longrunning_requests{") && l.contains("verb=\"WATCH\"")
        })
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum::<f64>() as u64)
}

/// A histogram of `samples` in microseconds (3 significant digits), for
/// percentiles without sorting by hand.
/// Where each work's create → Applied went, from the hub's and the
/// spoke's audit logs.
fn print_api_requests(hub_log: &str, spoke_log: &str, windows: &[Window]) -> anyhow::Result<()> {
    let read = |path: &str| {
        std::fs::read_to_string(path).with_context(|| format!("reading the audit log {path}"))
    };
    for line in report(&read(hub_log)?, &read(spoke_log)?, windows)? {
        println!("{line}");
    }
    Ok(())
}
