//! `ferry-bench --agent-rss N`: the real `ferry-agent` binary with N works
//! applied and settled, and where its resident memory is: anonymous (heap,
//! stacks) versus file-backed (the binary's pages), and its threads. The
//! binary is `FERRY_AGENT_BIN`, else the one next to `ferry-bench`; the
//! shipped build is `target/dist/ferry-agent` (`cargo build --profile dist`).

use std::collections::HashMap;
use std::time::Duration;

use anyhow::Context;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::core::GroupVersionKind;

use super::progress::Progress;
use ferry_e2e::harness::agent_process::AgentProcess;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};

/// The `VmRSS`, `RssAnon`, `RssFile`, `VmHWM` (KiB) and `Threads` lines of
/// `/proc/<pid>/status`, as one line; empty when the process is gone.
pub fn memory_breakdown(pid: u32) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .filter(|l| {
            ["VmRSS:", "RssAnon:", "RssFile:", "VmHWM:", "Threads:"]
                .iter()
                .any(|k| l.starts_with(k))
        })
        .map(|l| l.split_whitespace().take(2).collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Starts a fleet, runs `ferry-agent` with `agent_args`, applies `works`
/// works of one ConfigMap each, waits `settle`, and prints the agent's memory.
pub async fn agent_rss(
    works: usize,
    agent_args: &[String],
    settle: Duration,
) -> anyhow::Result<()> {
    let mut fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .context("starting the fleet")?;
    fleet.stop_agent("cluster-a").await;
    let args: Vec<&str> = agent_args.iter().map(String::as_str).collect();
    let agent = AgentProcess::start(&fleet, "cluster-a", None, &args)
        .await
        .context("starting ferry-agent")?;
    let pid = agent.pid().context("ferry-agent has no pid")?;
    // Which build is measured matters most (the mapped binary is half the
    // total): FERRY_AGENT_BIN names it, e.g. target/dist/ferry-agent.
    let binary = ferry_e2e::harness::agent_process::agent_binary();
    let size = std::fs::metadata(&binary).map(|m| m.len()).unwrap_or(0);
    println!("agent binary: {} ({size} bytes)", binary.display());
    println!("agent started: {}", memory_breakdown(pid));
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(
        "work.ferry.dev",
        "v1alpha1",
        "ManifestWork",
    ));
    let api: Api<DynamicObject> =
        Api::namespaced_with(fleet.hub_client.clone(), "cluster-a", &resource);
    let mut progress = Progress::start(api.clone()).await;
    let mut wanted = HashMap::new();
    for i in 0..works {
        let name = format!("rss-{i}");
        let work = DynamicObject::new(&name, &resource).data(
            serde_json::json!({"spec": {"workload": {"manifests": [
            {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": name, "namespace": "default"}, "data": {"i": i.to_string()}}]}}}),
        );
        api.create(&PostParams::default(), &work)
            .await
            .context("create")?;
        wanted.insert(name, 1);
    }
    progress
        .wait_for(&wanted, Duration::from_secs(300))
        .await
        .context("works applied")?;
    println!("{works} works applied: {}", memory_breakdown(pid));
    tokio::time::sleep(settle).await;
    println!(
        "after {} s settled: {}",
        settle.as_secs(),
        memory_breakdown(pid)
    );
    agent.kill().await;
    fleet.stop().await;
    Ok(())
}
