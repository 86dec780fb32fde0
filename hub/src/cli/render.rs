//! `ferry-hub render`: the ManifestWork each cluster chosen by a
//! ManifestWorkReplicaSet would get, printed without writing anything.

use std::path::PathBuf;

use anyhow::Context;
use clap::{ArgGroup, Args};
use ferry_hub::clusters::labels::parse_pairs;

use super::kubeconfig::client_from;

/// Arguments of `ferry-hub render`.
#[derive(Args)]
#[command(group(ArgGroup::new("source").required(true).args(["replica_set", "file"])))]
pub struct RenderArgs {
    /// The replica set on the hub, as NAMESPACE/NAME.
    #[arg(long)]
    pub replica_set: Option<String>,
    /// Read the replica set from this YAML file instead.
    #[arg(short = 'f', long)]
    pub file: Option<PathBuf>,
    /// Render for these clusters instead of the placements' decisions;
    /// with -f, nothing is read from the hub.
    #[arg(long, value_delimiter = ',')]
    pub clusters: Vec<String>,
    /// Labels of a cluster given by --clusters, as CLUSTER:key=value
    /// (repeatable).
    #[arg(long)]
    pub cluster_labels: Vec<String>,
    /// Kubeconfig of the hub (default: KUBECONFIG, ~/.kube/config or
    /// in-cluster).
    #[arg(long, env = "FERRY_HUB_KUBECONFIG")]
    pub hub_kubeconfig: Option<PathBuf>,
    /// Context of --hub-kubeconfig.
    #[arg(long)]
    pub hub_context: Option<String>,
}

/// `ferry-hub render`: reads the replica set (from the hub or a file) and
/// the chosen clusters (from the decisions or the flags), prints the works.
///
/// Fails when the replica set cannot be read, a flag is malformed, or a
/// cluster's rendering fails (after printing the others).
pub async fn run(args: RenderArgs) -> anyhow::Result<()> {
    let RenderArgs {
        replica_set,
        file,
        clusters,
        cluster_labels,
        hub_kubeconfig,
        hub_context,
    } = args;
    use ferry_api::replica_set::ManifestWorkReplicaSet;
    use ferry_hub::replica_set::dry_run::{ChosenCluster, chosen_clusters, render_yaml};
    let offline = file.is_some() && !clusters.is_empty();
    let hub = if offline {
        None
    } else {
        Some(client_from(hub_kubeconfig.as_deref(), hub_context).await?)
    };
    let rs: ManifestWorkReplicaSet = match (&file, &replica_set, &hub) {
        (Some(path), _, _) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            serde_yaml::from_str(&text)
                .with_context(|| format!("{} is not a ManifestWorkReplicaSet", path.display()))?
        }
        (None, Some(reference), Some(hub)) => {
            let (namespace, name) = reference
                .split_once('/')
                .with_context(|| format!("--replica-set {reference:?} is not NAMESPACE/NAME"))?;
            kube::Api::<ManifestWorkReplicaSet>::namespaced(hub.clone(), namespace)
                .get(name)
                .await
                .with_context(|| format!("reading ManifestWorkReplicaSet {reference}"))?
        }
        _ => anyhow::bail!("give --replica-set NAMESPACE/NAME or -f FILE"),
    };
    let chosen = if clusters.is_empty() {
        let hub = hub.context("a hub client")?;
        chosen_clusters(&hub, &rs).await?
    } else {
        let mut labels: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        for entry in &cluster_labels {
            let (cluster, pair) = entry
                .split_once(':')
                .with_context(|| format!("--cluster-labels {entry:?} is not CLUSTER:key=value"))?;
            labels
                .entry(cluster.to_string())
                .or_default()
                .push(pair.to_string());
        }
        if let Some(unknown) = labels.keys().find(|c| !clusters.contains(c)) {
            anyhow::bail!("--cluster-labels names {unknown:?}, which --clusters does not list");
        }
        let placement = rs
            .spec
            .placement_refs
            .first()
            .map(|r| r.name.clone())
            .unwrap_or_default();
        clusters
            .iter()
            .map(|name| {
                Ok(ChosenCluster {
                    name: name.clone(),
                    placement: placement.clone(),
                    labels: parse_pairs(
                        "--cluster-labels",
                        labels.get(name).map(Vec::as_slice).unwrap_or_default(),
                    )?,
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?
    };
    let (yaml, failed) = render_yaml(&rs, &chosen)?;
    print!("{yaml}");
    if failed > 0 {
        anyhow::bail!("{failed} of {} clusters would get no work", chosen.len());
    }
    Ok(())
}
