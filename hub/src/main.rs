//! `ferry-hub`: serve agents, or print the hub's CRDs.
#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use ferry_hub::crds::{hub_crds, install_crds, render_yaml};
use ferry_hub::server::{HubListeners, run_hub};
use ferry_hub::session::SessionConfig;
use tokio::net::TcpListener;

#[derive(Parser)]
#[command(name = "ferry-hub", version, about = "The ferry hub")]
struct Cli {
    /// Log as JSON lines instead of human-readable text.
    #[arg(long, env = "FERRY_LOG_JSON", global = true)]
    log_json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve agents (uses the ambient kubeconfig or in-cluster config).
    Serve {
        /// Address agents connect to.
        #[arg(long, env = "FERRY_GRPC_ADDR", default_value = "0.0.0.0:8443")]
        grpc_addr: SocketAddr,
        /// Address of /healthz, /readyz and /metrics.
        #[arg(long, env = "FERRY_PROBE_ADDR", default_value = "0.0.0.0:8080")]
        probe_addr: SocketAddr,
        /// Seconds between heartbeats to each agent.
        #[arg(long, env = "FERRY_HEARTBEAT_SECONDS", default_value_t = 10)]
        heartbeat_seconds: u64,
        /// Apply the hub CRDs at start-up and wait until they are served.
        #[arg(long, env = "FERRY_INSTALL_CRDS")]
        install_crds: bool,
    },
    /// Write the hub CRDs as YAML into a directory, or print them.
    Crds {
        /// Directory to write into; prints to stdout when absent.
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    init_tracing(cli.log_json);
    match cli.command {
        Command::Crds { out } => {
            for (file, crd) in hub_crds() {
                let yaml = render_yaml(&crd)?;
                match &out {
                    Some(dir) => std::fs::write(dir.join(file), yaml)
                        .with_context(|| format!("writing {}", dir.join(file).display()))?,
                    None => print!("---\n{yaml}"),
                }
            }
            Ok(())
        }
        Command::Serve {
            grpc_addr,
            probe_addr,
            heartbeat_seconds,
            install_crds: install,
        } => {
            let client = kube::Client::try_default()
                .await
                .context("building a Kubernetes client")?;
            if install {
                install_crds(&client).await?;
            }
            let listeners = HubListeners {
                grpc: TcpListener::bind(grpc_addr)
                    .await
                    .with_context(|| format!("binding {grpc_addr}"))?,
                probes: Some(
                    TcpListener::bind(probe_addr)
                        .await
                        .with_context(|| format!("binding {probe_addr}"))?,
                ),
            };
            let session = SessionConfig {
                heartbeat_interval: Duration::from_secs(heartbeat_seconds.max(1)),
            };
            run_hub(client, listeners, session, shutdown_signal()).await?;
            Ok(())
        }
    }
}

fn init_tracing(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(term) => term,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
