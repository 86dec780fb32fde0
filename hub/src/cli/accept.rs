//! `ferry-hub accept`: lets a joined cluster's agent in, or keeps it out.

use std::path::PathBuf;

use clap::Args;
use ferry_hub::join::accept::set_accepted;

use super::kubeconfig::client_from;

/// Arguments of `ferry-hub accept`.
#[derive(Args)]
pub struct AcceptArgs {
    /// The cluster's name.
    #[arg(long)]
    pub cluster: String,
    /// Deny instead of accept.
    #[arg(long)]
    pub deny: bool,
    /// Kubeconfig of the hub (default: KUBECONFIG, ~/.kube/config or
    /// in-cluster).
    #[arg(long, env = "FERRY_HUB_KUBECONFIG")]
    pub hub_kubeconfig: Option<PathBuf>,
    /// Context of --hub-kubeconfig.
    #[arg(long)]
    pub hub_context: Option<String>,
}

/// Sets the cluster's `spec.hubAcceptsClient` and prints what changed.
/// Fails when the hub cannot be reached or the cluster is not joined.
pub async fn run(args: AcceptArgs) -> anyhow::Result<()> {
    let AcceptArgs {
        cluster,
        deny,
        hub_kubeconfig,
        hub_context,
    } = args;
    let hub = client_from(hub_kubeconfig.as_deref(), hub_context).await?;
    println!("{}", set_accepted(&hub, &cluster, !deny).await?);
    Ok(())
}
