//! `kubectl ferry get ...`: the hub's objects as tables or records.

use k8s_openapi::jiff::Timestamp;

use super::{shown, with_newline};
use crate::cli::{GetCommand, GlobalArgs, OutputFormat};
use crate::client::connect;
use crate::cluster_rows::{cluster_records, clusters_table};
use crate::cluster_set_rows::cluster_sets_table;
use crate::error::CliError;
use crate::fleet_rows::{placements_table, replica_sets_table};
use crate::hub_api::fleet::{
    list_cluster_sets, list_clusters, list_placements, list_replica_sets, list_works,
};
use crate::output::{list, serialize};
use crate::work_rows::works_table;

/// Lists what `command` names, with ages relative to `now`. Fails when the
/// hub cannot be reached or refuses, or printing fails.
pub async fn get(
    global: &GlobalArgs,
    command: &GetCommand,
    now: Timestamp,
) -> Result<String, CliError> {
    match command {
        GetCommand::Clusters => clusters(global, now).await,
        GetCommand::Clustersets => cluster_sets(global).await,
        GetCommand::Works => works(global, now).await,
        GetCommand::Replicasets => fleet_objects(global, true, now).await,
        GetCommand::Placements => fleet_objects(global, false, now).await,
    }
}

async fn clusters(global: &GlobalArgs, now: Timestamp) -> Result<String, CliError> {
    let format = global.output;
    let connection = connect(global).await?;
    let clusters = list_clusters(&connection.client).await?;
    let works = list_works(&connection.client, None).await?;
    let mut records = cluster_records(&clusters, &works);
    match format {
        OutputFormat::Table => Ok(with_newline(clusters_table(&records, now))),
        _ => {
            for record in &mut records {
                record.managed_cluster = shown(global, std::mem::take(&mut record.managed_cluster));
            }
            let items = records
                .iter()
                .map(serde_json::to_value)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| CliError::Print(e.to_string()))?;
            serialize(&list(items), format)
        }
    }
}

async fn cluster_sets(global: &GlobalArgs) -> Result<String, CliError> {
    let format = global.output;
    let connection = connect(global).await?;
    let sets = list_cluster_sets(&connection.client).await?;
    match format {
        OutputFormat::Table if sets.is_empty() => Ok("No cluster sets found.\n".to_string()),
        OutputFormat::Table => Ok(with_newline(cluster_sets_table(&sets))),
        _ => serialize(
            &list(sets.into_iter().map(|v| shown(global, v)).collect()),
            format,
        ),
    }
}

async fn works(global: &GlobalArgs, now: Timestamp) -> Result<String, CliError> {
    let format = global.output;
    let connection = connect(global).await?;
    let namespace = if global.all_namespaces {
        None
    } else {
        Some(
            global
                .namespace
                .clone()
                .unwrap_or_else(|| connection.default_namespace.clone()),
        )
    };
    let works = list_works(&connection.client, namespace.as_deref()).await?;
    match format {
        OutputFormat::Table if works.is_empty() => Ok(match namespace {
            Some(ns) => format!("No works found in namespace {ns}.\n"),
            None => "No works found.\n".to_string(),
        }),
        OutputFormat::Table => Ok(with_newline(works_table(&works, now))),
        _ => serialize(
            &list(works.into_iter().map(|w| shown(global, w.raw)).collect()),
            format,
        ),
    }
}

/// Replica sets (`replica_sets`) or placements.
async fn fleet_objects(
    global: &GlobalArgs,
    replica_sets: bool,
    now: Timestamp,
) -> Result<String, CliError> {
    let format = global.output;
    let connection = connect(global).await?;
    let namespace = (!global.all_namespaces).then(|| {
        global
            .namespace
            .clone()
            .unwrap_or_else(|| connection.default_namespace.clone())
    });
    let (objects, what) = if replica_sets {
        (
            list_replica_sets(&connection.client, namespace.as_deref()).await?,
            "replica sets",
        )
    } else {
        (
            list_placements(&connection.client, namespace.as_deref()).await?,
            "placements",
        )
    };
    let all = namespace.is_none();
    match format {
        OutputFormat::Table if objects.is_empty() => Ok(match namespace {
            Some(ns) => format!("No {what} found in namespace {ns}.\n"),
            None => format!("No {what} found.\n"),
        }),
        OutputFormat::Table if replica_sets => {
            Ok(with_newline(replica_sets_table(&objects, all, now)))
        }
        OutputFormat::Table => Ok(with_newline(placements_table(&objects, all, now))),
        _ => serialize(
            &list(objects.into_iter().map(|v| shown(global, v)).collect()),
            format,
        ),
    }
}
