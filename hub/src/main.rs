//! `ferry-hub`: serve agents, or print the hub's CRDs.
#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use ferry_hub::admission::tls::ServingCert;
use ferry_hub::admission::{AdmissionOptions, DEFAULT_MAX_WORK_BYTES};
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
        /// Address of the ManifestWork admission webhook (HTTPS). With it,
        /// the hub registers a ValidatingWebhookConfiguration so invalid
        /// works are refused when written.
        #[arg(long, env = "FERRY_WEBHOOK_ADDR", requires = "webhook_url")]
        webhook_addr: Option<SocketAddr>,
        /// Base URL at which the hub API server reaches the webhook, e.g.
        /// https://ferry-hub.ferry.svc:9443.
        #[arg(long, env = "FERRY_WEBHOOK_URL", requires = "webhook_addr")]
        webhook_url: Option<String>,
        /// PEM certificate chain of the webhook; a certificate for the URL's
        /// host is generated at start when absent.
        #[arg(long, env = "FERRY_WEBHOOK_CERT", requires = "webhook_key")]
        webhook_cert: Option<PathBuf>,
        /// PEM private key of the webhook certificate.
        #[arg(long, env = "FERRY_WEBHOOK_KEY", requires = "webhook_cert")]
        webhook_key: Option<PathBuf>,
        /// PEM CA bundle the API server uses to trust the webhook
        /// certificate; defaults to the certificate file itself.
        #[arg(long, env = "FERRY_WEBHOOK_CA", requires = "webhook_cert")]
        webhook_ca: Option<PathBuf>,
        /// Largest ManifestWork admitted, in bytes of JSON.
        #[arg(long, env = "FERRY_MAX_WORK_BYTES", default_value_t = DEFAULT_MAX_WORK_BYTES)]
        max_work_bytes: usize,
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
            webhook_addr,
            webhook_url,
            webhook_cert,
            webhook_key,
            webhook_ca,
            max_work_bytes,
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
                admission: match (webhook_addr, webhook_url) {
                    (Some(addr), Some(url)) => {
                        let cert = match (webhook_cert, webhook_key) {
                            (Some(cert), Some(key)) => {
                                ServingCert::load(&cert, &key, webhook_ca.as_deref())?
                            }
                            _ => ServingCert::generate(&[url_host(&url)?])?,
                        };
                        Some(AdmissionOptions {
                            listener: TcpListener::bind(addr)
                                .await
                                .with_context(|| format!("binding {addr}"))?,
                            url,
                            cert,
                            max_work_bytes,
                        })
                    }
                    _ => None,
                },
            };
            let session = SessionConfig {
                heartbeat_interval: Duration::from_secs(heartbeat_seconds.max(1)),
            };
            run_hub(client, listeners, session, shutdown_signal()).await?;
            Ok(())
        }
    }
}

/// The host of an https URL, for the generated certificate's name.
fn url_host(url: &str) -> anyhow::Result<String> {
    let uri: http::Uri = url
        .parse()
        .with_context(|| format!("--webhook-url {url:?} is not a URL"))?;
    anyhow::ensure!(
        uri.scheme_str() == Some("https"),
        "--webhook-url {url:?} must be https: the API server only calls webhooks over TLS"
    );
    let host = uri
        .host()
        .with_context(|| format!("--webhook-url {url:?} has no host"))?;
    // IPv6 hosts come bracketed; the certificate wants the bare address.
    Ok(host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string())
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
