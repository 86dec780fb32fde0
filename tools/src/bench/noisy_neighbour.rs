//! `ferry-bench --noisy-neighbour N`: another team's create → ready time on
//! a spoke, first quiet, then while a hostile team runs its worst condition
//! rules and oversized feedback on the same agent (issue 48's figure).
//!
//! One spoke, the real `ferry-agent` binary (`FERRY_AGENT_BIN`, else the one
//! next to `ferry-bench`), so an older agent's build can be measured the same
//! way. The victim team writes its works straight into the cluster
//! namespace (owner: the namespace); the hostile team's works carry a
//! replica-set label of another namespace (owner: that namespace), as a
//! replica set's works do. Each victim sample is one work of a ConfigMap
//! with a condition rule, created one after another and timed from its
//! create until the hub shows it `Applied` with the rule's condition True:
//! the rule runs on the agent's shared pool, which is what a hostile team's
//! rules compete for.
//!
//! The hostile team's works: [`HOSTILE_RULE_WORKS`] works, each with a
//! ConfigMap of [`HOSTILE_KEYS`] keys and three condition rules: one nested
//! four deep over its keys (10^8 iterations, minutes to hours on an agent
//! that runs it; the current agent refuses it before it starts), two as slow
//! as the agent's static bounds allow (three nested `all` over a literal
//! list, just under the cost limit); and one work reporting a 600 KB value
//! three times as feedback (over the hub's report cap). The hub's webhook,
//! which would refuse the first rule, is off: the agent's own checks are
//! what is measured.

use std::time::{Duration, Instant};

use anyhow::Context;
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};

use super::agent_binary::start_agent_binary;
use super::stats::{histogram, quantile_ms};
use ferry_api::contract::REPLICA_SET_LABEL;
use ferry_api::manifest_work::{FeedbackRule, FeedbackType, ManifestWork, NamedJsonPath};
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{
    cel_rule, config_map_work_with_rules, is_applied_at_current_generation, manifest_condition,
};

const CLUSTER: &str = "cluster-a";
/// The hostile team's owner, as its replica-set label names it.
const HOSTILE_OWNER: &str = "team-hostile.noise";
/// Hostile works with runaway rules.
const HOSTILE_RULE_WORKS: usize = 3;
/// Keys of each hostile ConfigMap: four nested `all`s make 100^4
/// iterations.
const HOSTILE_KEYS: usize = 100;
/// The oversized feedback value, three times over the hub's report cap.
const OVERSIZED_BYTES: usize = 600_000;
/// How long one victim sample may take before it counts as not ready.
const SAMPLE_TIMEOUT: Duration = Duration::from_secs(30);

/// The hostile team's works, labelled as its replica set's.
fn hostile_works() -> Vec<ManifestWork> {
    let keys: serde_json::Map<String, Value> = (0..HOSTILE_KEYS)
        .map(|i| (format!("k{i}"), json!("v")))
        .collect();
    // True for every four keys (strings are ordered), so `all` never stops
    // early.
    let runaway = "object.data.all(a, object.data.all(b, object.data.all(c, \
        object.data.all(d, a >= d || d >= a))))";
    // The slowest a rule may be and still run: three nested `all` over a
    // literal list whose cost is just under the agent's limit.
    let range = format!("{:?}", (0..80).collect::<Vec<i64>>());
    let slow = format!("{range}.all(a, {range}.all(b, {range}.all(c, a + b + c >= 0)))");
    let mut works: Vec<ManifestWork> = (0..HOSTILE_RULE_WORKS)
        .map(|i| {
            config_map_work_with_rules(
                CLUSTER,
                &format!("hostile-rules-{i}"),
                Value::Object(keys.clone()),
                vec![
                    cel_rule("Runaway", &[runaway]),
                    cel_rule("SlowA", &[&slow]),
                    cel_rule("SlowB", &[&slow]),
                ],
            )
        })
        .collect();
    let mut oversized = config_map_work_with_rules(
        CLUSTER,
        "hostile-feedback",
        json!({"big": "x".repeat(OVERSIZED_BYTES)}),
        Vec::new(),
    );
    oversized.spec.manifest_configs[0].feedback_rules = vec![FeedbackRule {
        type_: FeedbackType::JsonPaths,
        json_paths: (0..3)
            .map(|i| NamedJsonPath {
                name: format!("big{i}"),
                path: ".data.big".into(),
                version: None,
            })
            .collect(),
    }];
    works.push(oversized);
    for work in &mut works {
        work.metadata
            .labels
            .get_or_insert_default()
            .insert(REPLICA_SET_LABEL.into(), HOSTILE_OWNER.into());
    }
    works
}

/// Whether the victim `work` is applied and its rule's condition True.
fn ready(work: &ManifestWork) -> bool {
    is_applied_at_current_generation(work)
        && manifest_condition(work, 0, "Ready").is_some_and(|c| c.status == "True")
}

/// Times `samples` victim works created one after another (names from
/// `prefix`): the latencies of those ready within [`SAMPLE_TIMEOUT`], and
/// how many were not.
async fn victim_samples(
    works: &Api<ManifestWork>,
    prefix: &str,
    samples: usize,
) -> anyhow::Result<(Vec<Duration>, usize)> {
    let mut latencies = Vec::with_capacity(samples);
    let mut late = 0;
    for i in 0..samples {
        let name = format!("{prefix}-{i}");
        let work = config_map_work_with_rules(
            CLUSTER,
            &name,
            json!({"k": "v"}),
            vec![cel_rule("Ready", &["object.data.k == 'v'"])],
        );
        let started = Instant::now();
        works
            .create(&PostParams::default(), &work)
            .await
            .with_context(|| format!("creating {name}"))?;
        match wait_until(works, &name, "ready", SAMPLE_TIMEOUT, ready).await {
            Ok(_) => latencies.push(started.elapsed()),
            Err(_) => late += 1,
        }
    }
    Ok((latencies, late))
}

/// Prints one phase's figures.
fn print_phase(phase: &str, latencies: &[Duration], late: usize) {
    match histogram(latencies) {
        Ok(h) => println!(
            "{phase:<8} create -> Applied with its rule True: p50 {:>8.1} ms  p90 {:>8.1} ms  p99 {:>8.1} ms  max {:>8.1} ms  ({} ready, {late} not within {} s)",
            quantile_ms(&h, 0.50),
            quantile_ms(&h, 0.90),
            quantile_ms(&h, 0.99),
            quantile_ms(&h, 1.0),
            latencies.len(),
            SAMPLE_TIMEOUT.as_secs()
        ),
        Err(_) => println!(
            "{phase:<8} create -> Applied with its rule True: none ready ({late} not within {} s)",
            SAMPLE_TIMEOUT.as_secs()
        ),
    }
}

/// Clock ticks per second of `/proc/<pid>/stat` (Linux).
const TICKS_PER_SECOND: f64 = 100.0;

/// Prints what the agent's CPU did during a phase: busy rule threads show
/// as CPU seconds near the threads' count times the phase's length.
fn print_cpu(seconds: f64, phase: Duration) {
    println!(
        "         agent CPU {seconds:.1} s over {:.1} s ({:.2} cores)",
        phase.as_secs_f64(),
        seconds / phase.as_secs_f64().max(0.001)
    );
}

/// Runs the scenario with `samples` victim works per phase and prints both
/// phases. Fails when the fleet, the agent or a create fails.
pub async fn noisy_neighbour(samples: usize) -> anyhow::Result<()> {
    let mut options = FleetOptions::with_spokes(&[CLUSTER]);
    // What reaches the agent when the webhook is not there (it fails open):
    // the agent's own bounds are what is measured.
    options.admission = false;
    let mut fleet = Fleet::start(options).await.context("starting the fleet")?;
    let agent = start_agent_binary(&mut fleet, CLUSTER, &[]).await?;
    let works: Api<ManifestWork> = Api::namespaced(fleet.hub_client.clone(), CLUSTER);

    let cpu = || {
        agent
            .pid()
            .and_then(|pid| crate::proc_stats::cpu_seconds(pid, TICKS_PER_SECOND).ok())
            .unwrap_or_default()
    };
    let (started, cpu_before) = (Instant::now(), cpu());
    let (quiet, quiet_late) = victim_samples(&works, "quiet", samples).await?;
    print_phase("quiet", &quiet, quiet_late);
    print_cpu(cpu() - cpu_before, started.elapsed());

    for work in hostile_works() {
        works
            .create(&PostParams::default(), &work)
            .await
            .with_context(|| format!("creating {}", work.metadata.name.as_deref().unwrap_or("")))?;
    }
    // The hostile rules are running once their works are applied.
    for i in 0..HOSTILE_RULE_WORKS {
        wait_until(
            &works,
            &format!("hostile-rules-{i}"),
            "hostile work applied",
            Duration::from_secs(60),
            is_applied_at_current_generation,
        )
        .await
        .context("the hostile works were not applied")?;
    }
    let (started, cpu_before) = (Instant::now(), cpu());
    let (noisy, noisy_late) = victim_samples(&works, "noisy", samples).await?;
    print_phase("hostile", &noisy, noisy_late);
    print_cpu(cpu() - cpu_before, started.elapsed());
    if let Some(pid) = agent.pid() {
        println!(
            "agent after both phases: {}",
            super::agent_rss::memory_breakdown(pid)
        );
    }
    agent.kill().await;
    fleet.stop().await;
    Ok(())
}
