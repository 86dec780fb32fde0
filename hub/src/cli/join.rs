//! `ferry-hub join`: joins a cluster, both sides at once, the hub side and
//! a bundle for GitOps, or the hub side alone with a token file.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use ferry_api::contract::{AGENT_SERVICE_ACCOUNT, CLUSTER_SET_LABEL};
use ferry_hub::clusters::labels::{parse_pairs, set_labels_and_claims};
use ferry_hub::join::both::{JoinOptions, SpokeTarget, join_both_sides};
use ferry_hub::join::bundle::{BUNDLE_AGENT_FILE, BUNDLE_SECRET_FILE, BUNDLE_VALUES_FILE};
use ferry_hub::join::hub_side::join_cluster_as;
use ferry_hub::join::private_file::write_private;

use super::kubeconfig::client_from;

/// Arguments of `ferry-hub join`.
#[derive(Args)]
pub struct JoinArgs {
    /// The cluster's name (its namespace on the hub).
    #[arg(long)]
    pub cluster: String,
    /// The URL agents dial, e.g. https://hub.example:8443.
    #[arg(long)]
    pub hub_url: String,
    /// The CA (PEM) of the hub's serving certificate (needed for an
    /// https hub URL with --spoke-kubeconfig or --output).
    #[arg(long)]
    pub ca: Option<PathBuf>,
    /// Kubeconfig of the hub (default: KUBECONFIG, ~/.kube/config or
    /// in-cluster).
    #[arg(long, env = "FERRY_HUB_KUBECONFIG")]
    pub hub_kubeconfig: Option<PathBuf>,
    /// Context of the hub in --hub-kubeconfig, or in the default
    /// kubeconfig when that is not given (default: the current one).
    #[arg(long)]
    pub hub_context: Option<String>,
    /// Kubeconfig of the spoke: install the agent there (its current
    /// context unless --spoke-context).
    #[arg(long, conflicts_with = "output")]
    pub spoke_kubeconfig: Option<PathBuf>,
    /// Context of the spoke in --spoke-kubeconfig, or in the default
    /// kubeconfig when that is not given: install the agent there.
    #[arg(long, conflicts_with = "output")]
    pub spoke_context: Option<String>,
    /// Write the spoke side (agent manifests, hub Secret, chart values)
    /// into this directory for GitOps instead of applying it.
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Image of the agent (default: the chart's).
    #[arg(long)]
    pub image: Option<String>,
    /// Mint a new token even when the spoke's still works, write it to
    /// the spoke (or bundle), then revoke the cluster's older tokens.
    #[arg(long)]
    pub rotate_token: bool,
    /// Create the ManagedCluster not accepted: the agent is refused until
    /// `ferry-hub accept --cluster NAME`.
    #[arg(long)]
    pub pending: bool,
    /// Hub-only mode: directory the token (and CA) are written to.
    #[arg(long, default_value = ".")]
    pub out: PathBuf,
    /// Lifetime of a new agent token. Joining again renews a token past
    /// two thirds of its life; --rotate-token replaces it at once.
    #[arg(long, default_value_t = 365 * 24 * 3600)]
    pub token_seconds: i64,
    /// The ServiceAccount the agent authenticates as (the hub's
    /// --agent-service-account).
    #[arg(long, env = "FERRY_AGENT_SERVICE_ACCOUNT", default_value = AGENT_SERVICE_ACCOUNT)]
    pub agent_service_account: String,
    /// Labels of the cluster's ManagedCluster, as key=value pairs
    /// (added to the ones it has), for placements to select on.
    #[arg(long, value_delimiter = ',')]
    pub labels: Vec<String>,
    /// Claims of the cluster (status.clusterClaims), as name=value
    /// pairs, for placements' claimSelector; replace the recorded ones.
    #[arg(long, value_delimiter = ',')]
    pub claims: Vec<String>,
    /// The ManagedClusterSet the cluster joins: sets the label
    /// cluster.ferry.dev/clusterset=NAME on its ManagedCluster (without it
    /// the hub puts the cluster into the `default` set).
    #[arg(long)]
    pub clusterset: Option<String>,
}

/// Joins the cluster and prints one line per object. Fails when a flag
/// pair is incomplete, a file cannot be read or written, or the hub or
/// spoke refuses a write.
pub async fn run(args: JoinArgs) -> anyhow::Result<()> {
    let JoinArgs {
        cluster,
        hub_url,
        ca,
        hub_kubeconfig,
        hub_context,
        spoke_kubeconfig,
        spoke_context,
        output,
        image,
        rotate_token,
        pending,
        out,
        token_seconds,
        agent_service_account,
        labels,
        claims,
        clusterset,
    } = args;
    let mut labels = parse_pairs("--labels", &labels)?;
    if let Some(set) = clusterset {
        if let Some(other) = labels.get(CLUSTER_SET_LABEL).filter(|v| **v != set) {
            anyhow::bail!(
                "--clusterset {set} and --labels {CLUSTER_SET_LABEL}={other} disagree; give one"
            );
        }
        labels.insert(CLUSTER_SET_LABEL.to_string(), set);
    }
    let claims = parse_pairs("--claims", &claims)?;
    let hub = client_from(hub_kubeconfig.as_deref(), hub_context).await?;
    let to_spoke = spoke_kubeconfig.is_some() || spoke_context.is_some();
    if !to_spoke && output.is_none() {
        join_hub_only(
            &hub,
            &cluster,
            &hub_url,
            ca,
            &out,
            token_seconds,
            &agent_service_account,
        )
        .await?;
        set_labels_and_claims(&hub, &cluster, &labels, &claims).await?;
        return Ok(());
    }
    let ca_pem = match &ca {
        Some(path) => {
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?
        }
        None if hub_url.starts_with("http://") => String::new(),
        None => anyhow::bail!("--ca is needed: the agent must trust the certificate of {hub_url}"),
    };
    let options = JoinOptions {
        cluster: cluster.clone(),
        service_account: agent_service_account,
        hub_url,
        ca_pem,
        image,
        token_seconds,
        rotate_token,
        accept: !pending,
    };
    let spoke = if to_spoke {
        Some(client_from(spoke_kubeconfig.as_deref(), spoke_context).await?)
    } else {
        None
    };
    let target = match (&spoke, &output) {
        (Some(spoke), _) => SpokeTarget::Cluster(spoke),
        (None, Some(dir)) => SpokeTarget::Bundle(dir),
        (None, None) => {
            anyhow::bail!("give --spoke-kubeconfig, --spoke-context or --output")
        }
    };
    let report = join_both_sides(&hub, target, &options).await?;
    set_labels_and_claims(&hub, &cluster, &labels, &claims).await?;
    for applied in &report.applied {
        println!("{applied}");
    }
    for file in &report.bundle {
        println!("bundle: wrote {}", file.display());
    }
    for note in &report.notes {
        println!("note: {note}");
    }
    if let Some(dir) = output {
        println!(
            "cluster {cluster} joined the hub; on the spoke apply the bundle:\n  kubectl apply -f {secret} -f {agent}\nor apply the Secret and install the ferry-agent chart with -f {values}",
            secret = dir.join(BUNDLE_SECRET_FILE).display(),
            agent = dir.join(BUNDLE_AGENT_FILE).display(),
            values = dir.join(BUNDLE_VALUES_FILE).display(),
        );
    } else {
        println!("cluster {cluster} joined: its agent runs on the spoke");
    }
    Ok(())
}

/// The hub half only: the token is written to a file someone carries to the
/// spoke.
async fn join_hub_only(
    client: &kube::Client,
    cluster: &str,
    hub_url: &str,
    ca: Option<PathBuf>,
    out: &std::path::Path,
    token_seconds: i64,
    agent_service_account: &str,
) -> anyhow::Result<()> {
    let token = join_cluster_as(client, cluster, agent_service_account, token_seconds).await?;
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let token_path = out.join(format!("{cluster}.token"));
    // 0600, never through a symlink: the token is the agent's credential.
    write_private(&token_path, token.as_bytes())?;
    let mut command = format!(
        "ferry-agent --hub-url {hub_url} --cluster-name {cluster} --token-file {}",
        token_path.display()
    );
    if let Some(ca) = ca {
        let ca_path = out.join("hub-ca.crt");
        std::fs::copy(&ca, &ca_path)
            .with_context(|| format!("copying {} to {}", ca.display(), ca_path.display()))?;
        command.push_str(&format!(" --hub-ca {}", ca_path.display()));
    }
    println!("cluster {cluster} can join; on the cluster run (with its kubeconfig):\n  {command}");
    Ok(())
}
