//! `ferry-agent`: apply this cluster's works from the ferry hub.
#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use ferry_agent::session::SessionConfig;
use ferry_agent::{AgentOptions, run_agent};

#[derive(Parser)]
#[command(
    name = "ferry-agent",
    version,
    about = "The ferry agent",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Hub gRPC URL.
    #[arg(long, env = "FERRY_HUB_URL")]
    hub_url: Option<String>,
    /// This cluster's name (its namespace on the hub).
    #[arg(long, env = "FERRY_CLUSTER_NAME")]
    cluster_name: Option<String>,
    /// Address of /healthz and /readyz.
    #[arg(long, env = "FERRY_PROBE_ADDR", default_value = "0.0.0.0:8081")]
    probe_addr: SocketAddr,
    /// Seconds between heartbeats to the hub.
    #[arg(long, env = "FERRY_HEARTBEAT_SECONDS", default_value_t = 10)]
    heartbeat_seconds: u64,
    /// Seconds between full re-checks of every work (drift is normally seen
    /// at once by watches; this is the safety net).
    #[arg(long, env = "FERRY_RESYNC_SECONDS", default_value_t = 600)]
    resync_seconds: u64,
    /// Seconds a work the hub does not have (a rebuilt hub, a work removed
    /// while the hub was away) keeps its objects before they are released.
    #[arg(long, env = "FERRY_EVICTION_GRACE_SECONDS", default_value_t = 3600)]
    eviction_grace_seconds: u64,
    /// Log as JSON lines instead of human-readable text.
    #[arg(long, env = "FERRY_LOG_JSON")]
    log_json: bool,
}

#[derive(clap::Subcommand)]
enum Command {
    /// Write the spoke CRDs (AppliedManifestWork) as YAML files into a
    /// directory. The agent installs them itself at start.
    Crds {
        /// Target directory.
        #[arg(long)]
        out: std::path::PathBuf,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if let Some(Command::Crds { out }) = &cli.command {
        for (file, crd) in ferry_agent::applied_works::spoke_crds() {
            let path = out.join(file);
            let yaml = ferry_agent::applied_works::render_spoke_crd(&crd)?;
            std::fs::write(&path, yaml).with_context(|| format!("writing {}", path.display()))?;
        }
        return Ok(());
    }
    let hub_url = cli
        .hub_url
        .context("--hub-url (or FERRY_HUB_URL) is required")?;
    let cluster_name = cli
        .cluster_name
        .context("--cluster-name (or FERRY_CLUSTER_NAME) is required")?;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    if cli.log_json {
        builder.json().init();
    } else {
        builder.init();
    }
    let client = kube::Client::try_default()
        .await
        .context("building a Kubernetes client for the spoke")?;
    let probes = tokio::net::TcpListener::bind(cli.probe_addr)
        .await
        .with_context(|| format!("binding {}", cli.probe_addr))?;
    tokio::spawn(async move { axum::serve(probes, ferry_agent::probes::router()).await });
    let config = SessionConfig {
        hub_url,
        cluster_name,
        heartbeat_interval: Duration::from_secs(cli.heartbeat_seconds.max(1)),
    };
    let options = AgentOptions {
        resync_interval: Duration::from_secs(cli.resync_seconds.max(1)),
        eviction_grace: Duration::from_secs(cli.eviction_grace_seconds),
    };
    run_agent(client, config, options, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await;
    Ok(())
}
