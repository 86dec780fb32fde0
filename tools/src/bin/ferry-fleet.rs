//! `ferry-fleet`: a local ferry fleet on real control planes. Starts a hub
//! control plane and spoke control planes, runs the ferry hub and one agent
//! per spoke, applies the example works, prints how to look around, and runs
//! until Ctrl-C.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use clap::Parser;
use ferry_api::manifest_work::ManifestWork;
use ferry_e2e::harness::fleet::{Fleet, FleetOptions};
use ferry_e2e::helpers::work_helpers::{wait_applied, work_condition};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};

#[derive(Parser)]
#[command(
    name = "ferry-fleet",
    version,
    about = "Run a local ferry fleet on real control planes"
)]
struct Cli {
    /// Spoke cluster names.
    #[arg(long, value_delimiter = ',', default_value = "cluster-a,cluster-b")]
    spokes: Vec<String>,
    /// ManifestWork YAML files to apply once the fleet is up.
    #[arg(long = "work", default_value = "examples/hello-work.yaml")]
    works: Vec<PathBuf>,
    /// Start, apply the works, wait until they are applied, then stop (for scripts).
    #[arg(long)]
    exit_when_applied: bool,
    /// Log as JSON lines.
    #[arg(long, env = "FERRY_LOG_JSON")]
    log_json: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new("info,kube=warn,tower=warn,h2=warn")
    });
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if cli.log_json {
        builder.json().init();
    } else {
        builder.init();
    }

    let works = cli
        .works
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            serde_yaml::from_str::<ManifestWork>(&text)
                .with_context(|| format!("{} is not a ManifestWork", path.display()))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;

    let started = Instant::now();
    eprintln!(
        "ferry-fleet: starting a hub and {} spoke control planes…",
        cli.spokes.len()
    );
    let names: Vec<&str> = cli.spokes.iter().map(String::as_str).collect();
    let fleet = Fleet::start(FleetOptions::with_spokes(&names))
        .await
        .context("starting the fleet")?;
    eprintln!(
        "ferry-fleet: fleet up in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    // Placements choose only among the clusters of sets bound to their
    // namespace: the examples use `default`, so the whole fleet (`global`)
    // is bound there.
    ferry_e2e::helpers::placement_helpers::bind_global(&fleet.hub_client, "default").await;

    for work in &works {
        let namespace = work
            .namespace()
            .context("a ManifestWork needs a namespace (its cluster)")?;
        let api: Api<ManifestWork> = Api::namespaced(fleet.hub_client.clone(), &namespace);
        api.patch(
            &work.name_any(),
            &PatchParams::apply("ferry-fleet").force(),
            &Patch::Apply(work),
        )
        .await
        .with_context(|| format!("applying work {namespace}/{}", work.name_any()))?;
        let applied = wait_applied(&api, &work.name_any())
            .await
            .with_context(|| format!("work {namespace}/{} was not applied", work.name_any()))?;
        let message = work_condition(&applied, "Applied")
            .map(|c| c.message.clone())
            .unwrap_or_default();
        println!("work {namespace}/{} applied: {message}", work.name_any());
    }

    println!();
    println!(
        "hub kubeconfig:        {}",
        fleet.hub.info.kubeconfig.display()
    );
    for spoke in &fleet.spokes {
        println!(
            "{:<22} {}",
            format!("{} kubeconfig:", spoke.name),
            spoke.control_plane.info.kubeconfig.display()
        );
    }
    println!();
    println!("look around:");
    println!(
        "  kubectl --kubeconfig {} get manifestworks -A",
        fleet.hub.info.kubeconfig.display()
    );
    println!(
        "  kubectl --kubeconfig {} get manifestwork hello -n cluster-a -o yaml",
        fleet.hub.info.kubeconfig.display()
    );
    println!(
        "  kubectl --kubeconfig {} get managedclusters -o wide",
        fleet.hub.info.kubeconfig.display()
    );
    if let Some(spoke) = fleet.spokes.first() {
        println!(
            "  kubectl --kubeconfig {} get all,configmaps -n hello",
            spoke.control_plane.info.kubeconfig.display()
        );
    }
    println!("agents dial the hub at {}", fleet.hub_url);

    if cli.exit_when_applied {
        fleet.stop().await;
        return Ok(());
    }
    println!("press Ctrl-C to stop the fleet and delete its data");
    tokio::signal::ctrl_c()
        .await
        .context("waiting for Ctrl-C")?;
    eprintln!("ferry-fleet: stopping…");
    fleet.stop().await;
    Ok(())
}
