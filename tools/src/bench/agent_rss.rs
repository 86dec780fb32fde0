//! `ferry-bench --agent-rss N`: the real `ferry-agent` binary with N works
//! applied and settled, and where its resident memory is: anonymous (heap,
//! stacks) versus file-backed (the binary's pages), and its threads. The
//! binary is `FERRY_AGENT_BIN`, else the one next to `ferry-bench`; the
//! shipped build is `target/dist/ferry-agent` (`cargo build --profile dist`).
//!
//! With `--crowd M`, the spoke first gets M unrelated objects (ConfigMaps
//! and Secrets, half each, across ten namespaces) that no work names, and
//! while drift is timed on the works' objects, unrelated ConfigMaps keep
//! changing: a crowded, busy cluster. The agent's own count of the objects
//! its drift watches received shows what the crowd cost it.

use std::collections::HashMap;
use std::time::Duration;

use std::time::Instant;

use anyhow::Context;
use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;

use super::progress::Progress;
use super::stats::{histogram, quantile_ms};
use ferry_e2e::harness::agent_process::AgentProcess;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::harness::hub_metrics::{scrape, sum_of};
use ferry_e2e::helpers::wait::wait_until;

/// Namespaces the crowd is spread over.
const CROWD_NAMESPACES: usize = 10;
/// Creates in flight while the crowd is written.
const CROWD_CONCURRENCY: usize = 32;
/// Works whose object is drifted and timed until the agent reverts it.
const DRIFT_SAMPLES: usize = 20;
/// Unrelated ConfigMaps changed per second while drift is timed.
const CHURN_PER_SECOND: u64 = 20;
/// The agent's count of the objects its drift watches received.
const RECEIVED: &str = "ferry_agent_watch_objects_received_total";

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
    crowd: usize,
    agent_args: &[String],
    settle: Duration,
) -> anyhow::Result<()> {
    let mut fleet = Fleet::start(FleetOptions::with_spokes(&["cluster-a"]))
        .await
        .context("starting the fleet")?;
    fleet.stop_agent("cluster-a").await;
    let spoke = fleet.spoke("cluster-a").client.clone();
    if crowd > 0 {
        let started = Instant::now();
        write_crowd(&spoke, crowd).await?;
        println!(
            "crowd: {crowd} unrelated ConfigMaps and Secrets written in {:.1} s",
            started.elapsed().as_secs_f64()
        );
    }
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
    let text = scrape(agent.probe_addr).await.context("scrape")?;
    // Agents before this count existed do not report it.
    let counted = text.contains(RECEIVED);
    let received = sum_of(&text, RECEIVED);
    if counted {
        println!("objects the drift watches received so far: {received}");
    } else {
        println!("objects the drift watches received: not counted by this agent build");
    }
    let churn = (crowd > 0).then(|| tokio::spawn(churn(spoke.clone(), crowd)));
    let latencies = time_drift(&spoke, works.min(DRIFT_SAMPLES)).await?;
    if let Some(churn) = churn {
        churn.abort();
    }
    let timed = histogram(&latencies).context("drift latencies")?;
    println!(
        "drift reverted ({} samples{}): p50 {:.1} ms, p99 {:.1} ms",
        latencies.len(),
        if crowd > 0 {
            ", unrelated objects changing meanwhile"
        } else {
            ""
        },
        quantile_ms(&timed, 0.5),
        quantile_ms(&timed, 0.99)
    );
    let after = sum_of(&scrape(agent.probe_addr).await.context("scrape")?, RECEIVED);
    if counted {
        println!(
            "objects the drift watches received while drift was timed: {}",
            after - received
        );
    }
    println!("memory after drift was timed: {}", memory_breakdown(pid));
    agent.kill().await;
    fleet.stop().await;
    Ok(())
}

fn crowd_object(i: usize) -> (ApiResource, String, serde_json::Value) {
    let namespace = format!("crowd-{}", i % CROWD_NAMESPACES);
    let name = format!("unrelated-{i}");
    if i.is_multiple_of(2) {
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"));
        let body = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "labels": {"app": "unrelated"}},
            "data": {"i": i.to_string(), "payload": "x".repeat(256)}});
        (resource, namespace, body)
    } else {
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "Secret"));
        let body = serde_json::json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": namespace, "labels": {"app": "unrelated"}},
            "stringData": {"i": i.to_string(), "payload": "x".repeat(256)}});
        (resource, namespace, body)
    }
}

/// Writes `count` unrelated objects on the spoke, a bounded number at once.
async fn write_crowd(spoke: &kube::Client, count: usize) -> anyhow::Result<()> {
    let namespaces = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "Namespace"));
    let api: Api<DynamicObject> = Api::all_with(spoke.clone(), &namespaces);
    for n in 0..CROWD_NAMESPACES {
        let ns = DynamicObject::new(&format!("crowd-{n}"), &namespaces);
        api.create(&PostParams::default(), &ns)
            .await
            .context("create a crowd namespace")?;
    }
    futures::stream::iter(0..count)
        .map(|i| async move {
            let (resource, namespace, body) = crowd_object(i);
            let api: Api<DynamicObject> =
                Api::namespaced_with(spoke.clone(), &namespace, &resource);
            let object: DynamicObject = serde_json::from_value(body).context("crowd object")?;
            api.create(&PostParams::default(), &object)
                .await
                .with_context(|| format!("create unrelated object {i}"))?;
            anyhow::Ok(())
        })
        .buffer_unordered(CROWD_CONCURRENCY)
        .try_collect::<()>()
        .await
}

/// Changes unrelated ConfigMaps at [`CHURN_PER_SECOND`] until aborted.
async fn churn(spoke: kube::Client, crowd: usize) {
    let mut tick = tokio::time::interval(Duration::from_millis(1000 / CHURN_PER_SECOND));
    let mut n: u64 = 0;
    loop {
        tick.tick().await;
        // Even indexes are ConfigMaps.
        let i = (n as usize * 2) % crowd.max(2);
        let (resource, namespace, _) = crowd_object(i);
        let api: Api<DynamicObject> = Api::namespaced_with(spoke.clone(), &namespace, &resource);
        let patch = serde_json::json!({"data": {"churn": n.to_string()}});
        let _ = api
            .patch(
                &format!("unrelated-{i}"),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await;
        n += 1;
    }
}

/// Drifts the object of works `rss-0..samples` one after another and times
/// each until the agent has put it back.
async fn time_drift(spoke: &kube::Client, samples: usize) -> anyhow::Result<Vec<Duration>> {
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap"));
    let api: Api<DynamicObject> = Api::namespaced_with(spoke.clone(), "default", &resource);
    let mut latencies = Vec::with_capacity(samples);
    for i in 0..samples {
        let name = format!("rss-{i}");
        let patch = serde_json::json!({"data": {"i": "drifted"}});
        let started = Instant::now();
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .context("drift an object")?;
        let want = i.to_string();
        wait_until(
            &api,
            &name,
            "drift reverted",
            Duration::from_secs(120),
            |o| o.data["data"]["i"] == want.as_str(),
        )
        .await
        .context("the agent reverts the drift")?;
        latencies.push(started.elapsed());
    }
    Ok(latencies)
}
