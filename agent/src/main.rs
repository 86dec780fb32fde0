//! `ferry-agent`: apply this cluster's works from the ferry hub.
#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use ferry_agent::session::SessionConfig;
use ferry_agent::{AgentOptions, run_agent};

#[derive(Parser)]
#[command(name = "ferry-agent", version, about = "The ferry agent")]
struct Cli {
    /// Hub gRPC URL.
    #[arg(long, env = "FERRY_HUB_URL")]
    hub_url: String,
    /// This cluster's name (its namespace on the hub).
    #[arg(long, env = "FERRY_CLUSTER_NAME")]
    cluster_name: String,
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
    /// Log as JSON lines instead of human-readable text.
    #[arg(long, env = "FERRY_LOG_JSON")]
    log_json: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
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
        hub_url: cli.hub_url,
        cluster_name: cli.cluster_name,
        heartbeat_interval: Duration::from_secs(cli.heartbeat_seconds.max(1)),
    };
    let options = AgentOptions {
        resync_interval: Duration::from_secs(cli.resync_seconds.max(1)),
    };
    run_agent(client, config, options, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await;
    Ok(())
}
