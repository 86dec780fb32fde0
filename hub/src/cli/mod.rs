//! The `ferry-hub` command line: one file per subcommand, each with its
//! arguments and what it runs.

/// `ferry-hub accept`: let a joined cluster's agent in, or keep it out.
pub mod accept;
/// `ferry-hub crds`: the CRDs and admission policy as YAML.
pub mod crds;
/// `ferry-hub join`: join a cluster.
pub mod join;
/// The operator's kube client, from a kubeconfig and context.
pub mod kubeconfig;
/// `ferry-hub render`: a replica set's works, rendered without writing.
pub mod render;
/// `ferry-hub serve`: run one hub replica.
pub mod serve;
/// How `serve` stops: signals on a thread of their own, a bounded grace.
pub mod shutdown;

use clap::{Parser, Subcommand};

/// The command line.
#[derive(Parser)]
#[command(name = "ferry-hub", version, about = "The ferry hub")]
pub struct Cli {
    /// Log as JSON lines instead of human-readable text.
    #[arg(long, env = "FERRY_LOG_JSON", global = true)]
    pub log_json: bool,
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
// Parsed once at start-up and matched at once: its size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
pub enum Command {
    /// Serve agents (uses the ambient kubeconfig or in-cluster config).
    Serve(serve::ServeArgs),
    /// Join a cluster. With --spoke-kubeconfig (or --spoke-context), both
    /// sides at once: on the hub its namespace, agent ServiceAccount and
    /// ManagedCluster; on the spoke the agent's namespace, its hub Secret
    /// (token, CA, hub URL, cluster name) and the agent. With --output, the
    /// spoke side is written as files instead. With neither, only the hub
    /// side, and a token file. Idempotent; prints one line per object.
    Join(join::JoinArgs),
    /// Let a joined cluster's agent in (or, with --deny, keep it out and end
    /// its session): sets its ManagedCluster's spec.hubAcceptsClient.
    Accept(accept::AcceptArgs),
    /// Write the hub CRDs as YAML into a directory, or print them.
    Crds(crds::CrdsArgs),
    /// Print the ManifestWork each cluster chosen by a
    /// ManifestWorkReplicaSet would get (overrides applied), as YAML,
    /// without writing anything. Exits 1 when a cluster's rendering fails.
    Render(render::RenderArgs),
}
