//! `ferry-hub`: serve agents, join clusters, or print the hub's CRDs.
#![forbid(unsafe_code)]

mod cli;

use clap::Parser;

use cli::{Cli, Command};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    init_tracing(cli.log_json);
    match cli.command {
        Command::Serve(args) => cli::serve::run(args).await,
        Command::Join(args) => cli::join::run(args).await,
        Command::Accept(args) => cli::accept::run(args).await,
        Command::Crds(args) => cli::crds::run(args),
        Command::Render(args) => cli::render::run(args).await,
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
