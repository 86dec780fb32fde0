//! `ferry-hub`: serve agents, join clusters, or print the hub's CRDs.
#![forbid(unsafe_code)]

mod cli;

use clap::Parser;

use cli::{Cli, Command};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // Only `serve` exports traces; the one-shot commands log.
    let trace = match &cli.command {
        Command::Serve(args) => args.trace.clone(),
        _ => ferry_telemetry::TraceArgs::default(),
    };
    let identity = ferry_telemetry::ServiceIdentity {
        service_name: "ferry-hub",
        attributes: Vec::new(),
    };
    let telemetry = ferry_telemetry::init(cli.log_json, &trace, identity)?;
    let result = match cli.command {
        Command::Serve(args) => cli::serve::run(args).await,
        Command::Join(args) => cli::join::run(args).await,
        Command::Accept(args) => cli::accept::run(args).await,
        Command::Crds(args) => cli::crds::run(args),
        Command::Render(args) => cli::render::run(args).await,
    };
    telemetry.shutdown().await;
    result
}
