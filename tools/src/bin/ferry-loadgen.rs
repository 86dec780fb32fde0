//! `ferry-loadgen`: N simulated agents against a running hub, each joined on
//! the hub's API server as `ferry-hub join` would (namespace,
//! ServiceAccount, accepted ManagedCluster, token). Prints what the agents
//! received every few seconds until interrupted.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;

use ferry_tools::loadgen::agent::Behaviour;
use ferry_tools::loadgen::clusters::join_clusters;
use ferry_tools::loadgen::open_files::{check_agents_fit, open_files_limit};
use ferry_tools::loadgen::run::{SimFleet, hub_endpoint};

#[derive(Parser, Debug)]
#[command(about = "Simulated ferry agents speaking the real protocol to a hub")]
struct Args {
    /// The hub's agent URL, e.g. https://127.0.0.1:8443.
    #[arg(long)]
    hub_url: String,
    /// PEM CA the hub's serving certificate chains to (none: plaintext).
    #[arg(long)]
    ca_file: Option<PathBuf>,
    /// Kubeconfig of an admin of the hub API server (joins the clusters);
    /// the default kubeconfig when absent.
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// Simulated clusters.
    #[arg(long, default_value_t = 100)]
    clusters: usize,
    /// Index of the first cluster (`sim-<index>`).
    #[arg(long, default_value_t = 0)]
    first: usize,
    /// Joins in flight at once.
    #[arg(long, default_value_t = 32)]
    join_concurrency: usize,
    /// Milliseconds an agent waits before reporting a work (a slow agent).
    #[arg(long, default_value_t = 0)]
    status_delay_ms: u64,
    /// Seconds after which each agent drops and redials its stream.
    #[arg(long)]
    flap_seconds: Option<u64>,
    /// Dial with the token only, as agents of an older version do,
    /// instead of asking the hub for a client certificate.
    #[arg(long)]
    token_only: bool,
    /// Seconds between progress lines.
    #[arg(long, default_value_t = 5)]
    every_seconds: u64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let config = match &args.kubeconfig {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?
        }
        None => kube::Config::infer().await?,
    };
    let admin = kube::Client::try_from(config)?;
    check_agents_fit(args.clusters, open_files_limit())?;
    let ca = match &args.ca_file {
        Some(path) => Some(
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?,
        ),
        None => None,
    };
    let clusters = join_clusters(
        &admin,
        args.first,
        args.first + args.clusters,
        args.join_concurrency,
        24 * 3600,
    )
    .await?;
    let endpoint = hub_endpoint(&args.hub_url, ca.as_deref())?;
    let fleet = SimFleet::start(
        clusters,
        endpoint,
        Behaviour {
            heartbeat: Duration::from_secs(10),
            status_delay: Duration::from_millis(args.status_delay_ms),
            flap_every: args.flap_seconds.map(Duration::from_secs),
            certificates: (!args.token_only).then(|| ca.clone().into_iter().collect()),
        },
    );
    let mut every = tokio::time::interval(Duration::from_secs(args.every_seconds.max(1)));
    loop {
        tokio::select! {
            _ = every.tick() => println!("{:?}", fleet.snapshot()),
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    fleet.stop().await;
    Ok(())
}
