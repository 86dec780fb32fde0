//! `seal` and `sealed` against the hub: the Secret read (bounded), the
//! clusters gathered from the flags, their published keys read, the entry
//! sealed, and a replica set's template written back under its
//! resourceVersion.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read as _;
use std::path::Path;

use ferry_api::managed_cluster::SealingKey;
use kube::Client;
use serde_json::Value;

use super::plan::{Placed, SealPlanError, place_entry, rows_of, seal_targets};
use crate::cli::{GlobalArgs, OutputFormat};
use crate::client::connect;
use crate::error::CliError;
use crate::hub_api::fleet::{cluster_set_members, get_cluster, list_works};
use crate::hub_api::replica_sets::{
    placement_decisions, replace_replica_set, stored_replica_set, typed_replica_set,
};
use crate::output::{list, serialize};
use crate::rollout::parse_replica_set_ref;
use crate::table::render;

/// Writes of a replica set tried before a conflict is reported.
const MAX_WRITE_ATTEMPTS: usize = 5;

/// Largest Secret manifest read: a Secret holds at most 1 MiB of data.
pub const MAX_INPUT_BYTES: u64 = 2 * 1024 * 1024;

/// Why `seal` cannot seal.
#[derive(Debug, thiserror::Error)]
pub enum SealCommandError {
    /// The input could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file (`-`: stdin).
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The input is larger than [`MAX_INPUT_BYTES`].
    #[error("{path} is larger than {MAX_INPUT_BYTES} bytes; a Secret holds at most 1 MiB")]
    TooLarge {
        /// The file.
        path: String,
    },
    /// The input is not one YAML or JSON object.
    #[error("{path} is not one YAML or JSON manifest: {reason}")]
    NotAManifest {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// The clusters cannot be sealed to.
    #[error(transparent)]
    Plan(#[from] SealPlanError),
    /// Sealing failed.
    #[error(transparent)]
    Seal(#[from] ferry_semantics::sealing::SealError),
    /// A placement reference is not `[NS/]NAME`.
    #[error("--placement {0:?} is not NAME or NAMESPACE/NAME")]
    BadPlacement(String),
}

/// What `seal` is asked to do.
pub struct SealRequest<'a> {
    /// The Secret manifest's file (`-`: stdin).
    pub file: &'a Path,
    /// Clusters named directly.
    pub clusters: &'a [String],
    /// Placements (`[NS/]NAME`) whose current decisions to seal to.
    pub placements: &'a [String],
    /// Cluster sets whose clusters to seal to.
    pub cluster_sets: &'a [String],
    /// A replica set (`[NS/]NAME`) whose template gets the entry, sealed to
    /// its placements' current clusters.
    pub replica_set: Option<&'a str>,
}

fn read_manifest(file: &Path) -> Result<Value, SealCommandError> {
    let path = file.display().to_string();
    let failed = |source| SealCommandError::Read {
        path: path.clone(),
        source,
    };
    let mut bytes = Vec::new();
    if path == "-" {
        std::io::stdin()
            .take(MAX_INPUT_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(failed)?;
    } else {
        std::fs::File::open(file)
            .map_err(failed)?
            .take(MAX_INPUT_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(failed)?;
    }
    if bytes.len() as u64 > MAX_INPUT_BYTES {
        return Err(SealCommandError::TooLarge { path });
    }
    let value: Value =
        serde_yaml::from_slice(&bytes).map_err(|e| SealCommandError::NotAManifest {
            path: path.clone(),
            reason: e.to_string(),
        })?;
    if !value.is_object() {
        return Err(SealCommandError::NotAManifest {
            path,
            reason: "not a mapping".into(),
        });
    }
    Ok(value)
}

/// The clusters placement `name` in `namespace` currently chooses.
async fn decided(client: &Client, namespace: &str, name: &str) -> Result<Vec<String>, CliError> {
    Ok(placement_decisions(client, namespace, name)
        .await?
        .iter()
        .flat_map(|d| d.cluster_names().map(str::to_string).collect::<Vec<_>>())
        .collect())
}

/// Runs `seal`: prints the sealed entry, or with a replica set, puts it
/// into its template and says what it did. Fails with what is wrong with
/// the input, the clusters, or the hub's answer.
pub async fn seal(global: &GlobalArgs, request: &SealRequest<'_>) -> Result<String, CliError> {
    let manifest = read_manifest(request.file)?;
    let connection = connect(global).await?;
    let client = &connection.client;
    let namespace = global
        .namespace
        .clone()
        .unwrap_or_else(|| connection.default_namespace.clone());
    let mut names: BTreeSet<String> = request.clusters.iter().cloned().collect();
    for placement in request.placements {
        let (ns, name) = match placement.split_once('/') {
            Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
                (ns.to_string(), name.to_string())
            }
            None if !placement.is_empty() => (namespace.clone(), placement.clone()),
            _ => return Err(SealCommandError::BadPlacement(placement.clone()).into()),
        };
        names.extend(decided(client, &ns, &name).await?);
    }
    for set in request.cluster_sets {
        names.extend(cluster_set_members(client, set).await?);
    }
    let replica_set = match request.replica_set {
        Some(arg) => {
            let rs = parse_replica_set_ref(
                arg,
                global.namespace.as_deref(),
                &connection.default_namespace,
            )?;
            let typed = typed_replica_set(client, &rs).await?;
            for reference in &typed.spec.placement_refs {
                names.extend(decided(client, &rs.namespace, &reference.name).await?);
            }
            Some(rs)
        }
        None => None,
    };
    let mut keys: BTreeMap<String, Vec<SealingKey>> = BTreeMap::new();
    for name in names {
        let cluster = get_cluster(client, &name).await?;
        keys.insert(name, cluster.status.unwrap_or_default().sealing_keys);
    }
    let targets = seal_targets(&keys).map_err(SealCommandError::from)?;
    let entry =
        ferry_semantics::sealing::seal(&manifest, &targets).map_err(SealCommandError::from)?;
    let Some(rs) = replica_set else {
        return serialize(
            &entry,
            match global.output {
                OutputFormat::Json => OutputFormat::Json,
                _ => OutputFormat::Yaml,
            },
        );
    };
    // The hub rewrites the replica set's status as its rollout moves, and
    // every write moves its resourceVersion: read, place and write again on
    // a conflict, never over a newer object.
    let mut attempts = 0;
    let placed = loop {
        attempts += 1;
        let mut stored = stored_replica_set(client, &rs).await?;
        let placed = match stored
            .pointer_mut("/spec/manifestWorkTemplate/workload/manifests")
            .and_then(Value::as_array_mut)
        {
            Some(manifests) => place_entry(manifests, entry.clone()),
            None => {
                stored["spec"]["manifestWorkTemplate"]["workload"]["manifests"] =
                    Value::Array(vec![entry.clone()]);
                Placed::Added
            }
        };
        match replace_replica_set(client, &rs, stored).await {
            Ok(()) => break placed,
            Err(CliError::ChangedSinceRead { .. }) if attempts < MAX_WRITE_ATTEMPTS => continue,
            Err(other) => return Err(other),
        }
    };
    let clusters: Vec<&str> = targets.iter().map(|t| t.cluster.as_str()).collect();
    Ok(format!(
        "manifestworkreplicaset {}/{}: sealed Secret {} for {} cluster(s) ({})\n",
        rs.namespace,
        rs.name,
        match placed {
            Placed::Replaced => "replaced",
            Placed::Added => "added",
        },
        clusters.len(),
        clusters.join(", ")
    ))
}

/// Runs `sealed`: every sealed entry of the works of the namespace (`-A`:
/// all), with its state against its cluster's keys.
pub async fn sealed(global: &GlobalArgs) -> Result<String, CliError> {
    let connection = connect(global).await?;
    let client = &connection.client;
    let namespace = (!global.all_namespaces).then(|| {
        global
            .namespace
            .clone()
            .unwrap_or_else(|| connection.default_namespace.clone())
    });
    let works = list_works(client, namespace.as_deref()).await?;
    let mut keys: BTreeMap<String, Vec<SealingKey>> = BTreeMap::new();
    let mut rows = Vec::new();
    for work in &works {
        let cluster = work
            .raw
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("");
        let name = work
            .raw
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let manifests = work
            .raw
            .pointer("/spec/workload/manifests")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        if !manifests.iter().any(ferry_semantics::sealing::is_sealed) {
            continue;
        }
        if !keys.contains_key(cluster) {
            // A namespace that is no cluster's has no keys.
            let published = match get_cluster(client, cluster).await {
                Ok(c) => c.status.unwrap_or_default().sealing_keys,
                Err(CliError::ClusterNotFound(_)) => Vec::new(),
                Err(other) => return Err(other),
            };
            keys.insert(cluster.to_string(), published);
        }
        rows.extend(rows_of(cluster, name, manifests, &keys[cluster]));
    }
    match global.output {
        OutputFormat::Table if rows.is_empty() => Ok("No sealed Secrets found.\n".to_string()),
        OutputFormat::Table => {
            let mut text = render(
                &["CLUSTER", "WORK", "SECRET", "KEY IDS", "STATE"],
                rows.iter()
                    .map(|r| {
                        vec![
                            r.cluster.clone(),
                            r.work.clone(),
                            r.secret.clone(),
                            r.key_ids.join(","),
                            r.state.clone(),
                        ]
                    })
                    .collect(),
            );
            text.push('\n');
            Ok(text)
        }
        format => serialize(
            &list(
                rows.iter()
                    .filter_map(|r| serde_json::to_value(r).ok())
                    .collect(),
            ),
            format,
        ),
    }
}
