//! `ferry-bench --sealed N`: what sealing costs (issue 52's figures).
//!
//! - Size: one Secret (three keys of 48 random bytes) as a plain manifest
//!   and sealed to 1, 10 and 100 cluster keys; the bytes each recipient
//!   adds.
//! - Opening, on this process's CPU: one entry sealed to one key, and one
//!   sealed to 100 keys opened with the last (each stanza before it costs
//!   an X25519 agreement).
//! - On a fleet (one spoke, the agent in this process, as the e2e tests
//!   run it): create -> Applied of works holding 1 and 100 Secrets, plain
//!   and then sealed, N works each, one after another.

use std::time::{Duration, Instant};

use anyhow::Context;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ferry_api::managed_cluster::ManagedCluster;
use ferry_api::manifest_work::ManifestWork;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::wait::wait_until;
use ferry_e2e::helpers::work_helpers::{is_applied_at_current_generation, manifest_work};
use ferry_semantics::sealing::{SealTo, SealedEnvelope, key_id, open, seal};
use kube::Api;
use serde_json::{Value, json};

use super::stats::{histogram, quantile_ms};

const CLUSTER: &str = "cluster-a";
/// How long one work may take to be applied before the run fails.
const SAMPLE_TIMEOUT: Duration = Duration::from_secs(120);

fn secret(name: &str) -> Value {
    let value = || STANDARD.encode(&rand::random::<[u8; 32]>().repeat(2)[..48]);
    json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
           "metadata": {"name": name, "namespace": "default"},
           "data": {"username": value(), "password": value(), "token": value()}})
}

fn keys(count: usize) -> Vec<(String, age::x25519::Identity, String)> {
    (0..count)
        .map(|_| {
            let identity = age::x25519::Identity::generate();
            let public = identity.to_public().to_string();
            (key_id(&public), identity, public)
        })
        .collect()
}

fn seal_to(
    manifest: &Value,
    keys: &[(String, age::x25519::Identity, String)],
) -> anyhow::Result<Value> {
    let to: Vec<SealTo> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| SealTo {
            cluster: format!("cluster-{i}"),
            public_key: k.2.clone(),
        })
        .collect();
    seal(manifest, &to).context("sealing")
}

/// Prints the size figures and the opening cost; pure CPU.
fn size_and_open() -> anyhow::Result<()> {
    let manifest = secret("db");
    let plain = serde_json::to_vec(&manifest)?.len();
    println!("plain Secret manifest: {plain} bytes");
    let mut sizes = Vec::new();
    for count in [1usize, 10, 100] {
        let sealed = serde_json::to_vec(&seal_to(&manifest, &keys(count))?)?.len();
        println!("sealed to {count:>3} keys: {sealed:>6} bytes");
        sizes.push((count, sealed));
    }
    let (first, last) = (sizes[0], sizes[sizes.len() - 1]);
    println!(
        "per recipient: {:.1} bytes (sealed to one: {} bytes over plain)",
        (last.1 - first.1) as f64 / (last.0 - first.0) as f64,
        first.1 as i64 - plain as i64
    );
    for count in [1usize, 100] {
        let held = keys(count);
        let envelope = SealedEnvelope::parse(&seal_to(&manifest, &held)?).context("parse")?;
        let last = held.last().context("a key")?;
        let mine = vec![(last.0.clone(), last.1.clone())];
        let rounds = 200;
        let started = Instant::now();
        for _ in 0..rounds {
            open(&envelope, &mine).context("open")?;
        }
        println!(
            "open one entry sealed to {count:>3} keys (this cluster's last): {:>8.1} us",
            started.elapsed().as_secs_f64() * 1e6 / f64::from(rounds)
        );
    }
    Ok(())
}

/// Times `samples` works of `secrets` Secrets each, plain or sealed to
/// `public_key`, create -> Applied one after another.
async fn time_works(
    works: &Api<ManifestWork>,
    label: &str,
    secrets: usize,
    public_key: Option<&str>,
    samples: usize,
) -> anyhow::Result<Vec<Duration>> {
    let mut latencies = Vec::with_capacity(samples);
    for sample in 0..samples {
        let name = format!("{label}-{sample}");
        let manifests = (0..secrets)
            .map(|i| {
                let manifest = secret(&format!("{name}-{i}"));
                match public_key {
                    Some(key) => seal(
                        &manifest,
                        &[SealTo {
                            cluster: CLUSTER.into(),
                            public_key: key.into(),
                        }],
                    )
                    .context("sealing"),
                    None => Ok(manifest),
                }
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let work = manifest_work(CLUSTER, &name, manifests);
        let started = Instant::now();
        works
            .create(&Default::default(), &work)
            .await
            .with_context(|| format!("creating {name}"))?;
        wait_until(
            works,
            &name,
            "applied",
            SAMPLE_TIMEOUT,
            is_applied_at_current_generation,
        )
        .await
        .with_context(|| format!("{name} applied"))?;
        latencies.push(started.elapsed());
    }
    Ok(latencies)
}

fn print(label: &str, latencies: &[Duration]) -> anyhow::Result<()> {
    let h = histogram(latencies)?;
    println!(
        "{label:<18} create -> Applied: p50 {:>7.1} ms  p90 {:>7.1} ms  max {:>7.1} ms  ({} works)",
        quantile_ms(&h, 0.50),
        quantile_ms(&h, 0.90),
        quantile_ms(&h, 1.0),
        latencies.len()
    );
    Ok(())
}

/// Runs the figures above with `samples` works per kind.
pub async fn sealed(samples: usize) -> anyhow::Result<()> {
    size_and_open()?;
    let fleet = Fleet::start(FleetOptions::with_spokes(&[CLUSTER]))
        .await
        .context("starting the fleet")?;
    let clusters: Api<ManagedCluster> = Api::all(fleet.hub_client.clone());
    let cluster = wait_until(
        &clusters,
        CLUSTER,
        "sealing key published",
        SAMPLE_TIMEOUT,
        |c| {
            c.status
                .as_ref()
                .is_some_and(|s| s.connected && !s.sealing_keys.is_empty())
        },
    )
    .await
    .context("the agent publishes its key")?;
    let key = cluster.status.unwrap_or_default().sealing_keys[0]
        .public_key
        .clone();
    let works: Api<ManifestWork> = Api::namespaced(fleet.hub_client.clone(), CLUSTER);
    // Warm the agent's discovery of Secrets and the hub's paths.
    time_works(&works, "warm", 1, Some(&key), 2).await?;
    for (label, secrets, sealed) in [
        ("1-plain", 1, false),
        ("1-sealed", 1, true),
        ("100-plain", 100, false),
        ("100-sealed", 100, true),
    ] {
        let latencies = time_works(
            &works,
            label,
            secrets,
            sealed.then_some(key.as_str()),
            samples,
        )
        .await?;
        print(label, &latencies)?;
    }
    fleet.stop().await;
    Ok(())
}
