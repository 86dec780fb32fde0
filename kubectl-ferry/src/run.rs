//! One command from parsed arguments to the text to print.

use std::time::Duration;

use backon::{ConstantBuilder, Retryable};
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use crate::cli::{Cli, Command, DescribeCommand, GetCommand, OutputFormat, RolloutCommand};
use crate::client::connect;
use crate::cluster_rows::{cluster_records, clusters_table};
use crate::cluster_set_rows::cluster_sets_table;
use crate::dashboard::run_dashboard;
use crate::describe::describe_work;
use crate::error::CliError;
use crate::events::recent;
use crate::fetch::{
    get_work, list_cluster_sets, list_clusters, list_placements, list_replica_sets, list_works,
    work_events,
};
use crate::fleet_rows::{placements_table, replica_sets_table};
use crate::output::{hide_managed_fields, list, serialize};
use crate::release_deletions::act::{ReleaseRequest, release_deletions};
use crate::rollout::{
    approve, gate_to_approve, generated_works, get_replica_set, parse_replica_set_ref, set_paused,
    waves, whoami,
};
use crate::rollout_fetch::{
    get_replica_set as get_replica_set_json, list_replica_set_works, list_revisions,
    replace_replica_set,
};
use crate::rollout_history::{UndoPlan, history_rows, history_table, undo_plan};
use crate::rollout_view::rollout_status;
use crate::work_ref::parse_work_ref;
use crate::work_rows::works_table;

/// How many times `rollout undo` reads and writes the replica set again after
/// a write lost to a concurrent change, before it gives up.
const UNDO_RETRIES: usize = 7;

/// Runs `cli` against the cluster its flags name, with ages relative to
/// `now`, and returns what to print on stdout. Fails with a [`CliError`]
/// for every reason listed there; a bad `NS/NAME` fails before any
/// connection is made.
pub async fn run(cli: &Cli, now: Timestamp) -> Result<String, CliError> {
    let format = cli.global.output;
    let shown = |mut object: Value| {
        if !cli.global.show_managed_fields {
            hide_managed_fields(&mut object);
        }
        object
    };
    match &cli.command {
        Command::Get(GetCommand::Clusters) => {
            let connection = connect(&cli.global).await?;
            let clusters = list_clusters(&connection.client).await?;
            let works = list_works(&connection.client, None).await?;
            let mut records = cluster_records(&clusters, &works);
            match format {
                OutputFormat::Table => Ok(with_newline(clusters_table(&records, now))),
                _ => {
                    for record in &mut records {
                        record.managed_cluster = shown(std::mem::take(&mut record.managed_cluster));
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
        Command::Get(GetCommand::Clustersets) => {
            let connection = connect(&cli.global).await?;
            let sets = list_cluster_sets(&connection.client).await?;
            match format {
                OutputFormat::Table if sets.is_empty() => {
                    Ok("No cluster sets found.\n".to_string())
                }
                OutputFormat::Table => Ok(with_newline(cluster_sets_table(&sets))),
                _ => serialize(&list(sets.into_iter().map(shown).collect()), format),
            }
        }
        Command::Get(GetCommand::Works) => {
            let connection = connect(&cli.global).await?;
            let namespace = if cli.global.all_namespaces {
                None
            } else {
                Some(
                    cli.global
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
                    &list(works.into_iter().map(|w| shown(w.raw)).collect()),
                    format,
                ),
            }
        }
        Command::Get(GetCommand::Replicasets) | Command::Get(GetCommand::Placements) => {
            let connection = connect(&cli.global).await?;
            let namespace = (!cli.global.all_namespaces).then(|| {
                cli.global
                    .namespace
                    .clone()
                    .unwrap_or_else(|| connection.default_namespace.clone())
            });
            let replica_sets = matches!(cli.command, Command::Get(GetCommand::Replicasets));
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
                _ => serialize(&list(objects.into_iter().map(shown).collect()), format),
            }
        }
        Command::Dashboard { port, open } => {
            let connection = connect(&cli.global).await?;
            run_dashboard(connection, *port, *open).await?;
            Ok(String::new())
        }
        Command::Describe(DescribeCommand::Work { work }) => {
            let work_ref = parse_work_ref(work, cli.global.namespace.as_deref())?;
            let connection = connect(&cli.global).await?;
            let entry = get_work(&connection.client, &work_ref).await?;
            // A work is worth showing even when its events cannot be listed
            // (e.g. no right to list events): say why in their place.
            let events = work_events(&connection.client, &entry)
                .await
                .map_err(|e| e.to_string());
            match format {
                OutputFormat::Table => {
                    let view = events.as_deref().map(recent).map_err(Clone::clone);
                    Ok(describe_work(&entry, &view, now))
                }
                _ => {
                    let work = shown(entry.raw);
                    let record = match events {
                        Ok(events) => {
                            let events = events
                                .iter()
                                .map(|e| serde_json::to_value(e).map(&shown))
                                .collect::<Result<Vec<_>, _>>()
                                .map_err(|e| CliError::Print(e.to_string()))?;
                            json!({"work": work, "events": events})
                        }
                        Err(error) => json!({"work": work, "eventsError": error}),
                    };
                    serialize(&record, format)
                }
            }
        }
        Command::ReleaseDeletions {
            cluster,
            reason,
            spoke_kubeconfig,
            spoke_context,
        } => {
            let request = ReleaseRequest {
                cluster,
                reason,
                spoke_kubeconfig: spoke_kubeconfig.as_deref(),
                spoke_context: spoke_context.as_deref(),
            };
            release_deletions(&cli.global, &request, now).await
        }
        Command::Rollout(command) => {
            let connection = connect(&cli.global).await?;
            let client = &connection.client;
            let named = |arg: &str| {
                parse_replica_set_ref(
                    arg,
                    cli.global.namespace.as_deref(),
                    &connection.default_namespace,
                )
            };
            match command {
                RolloutCommand::Status { replica_set } => {
                    let reference = named(replica_set)?;
                    let rs = get_replica_set(client, &reference).await?;
                    match format {
                        OutputFormat::Table => {
                            let waves = waves(client, &rs).await?;
                            let works = generated_works(client, &rs).await?;
                            Ok(rollout_status(&rs, &waves, &works))
                        }
                        _ => {
                            let value = serde_json::to_value(&rs)
                                .map_err(|e| CliError::Print(e.to_string()))?;
                            serialize(&shown(value), format)
                        }
                    }
                }
                RolloutCommand::Approve {
                    replica_set,
                    placement,
                    group,
                    comment,
                } => {
                    let reference = named(replica_set)?;
                    let rs = get_replica_set(client, &reference).await?;
                    let choice = gate_to_approve(&rs, placement.as_deref(), group.as_deref())?;
                    let user = whoami(client).await?;
                    let (name, existed) =
                        approve(client, &reference, &choice, &user, comment).await?;
                    Ok(format!(
                        "rolloutapproval {}/{name} {} (gate after group {} of placement {}, revision {}, approved by {user})\n",
                        reference.namespace,
                        if existed { "already exists" } else { "created" },
                        choice.after_group,
                        choice.placement,
                        choice.revision
                    ))
                }
                RolloutCommand::Pause { replica_set } | RolloutCommand::Resume { replica_set } => {
                    let paused = matches!(command, RolloutCommand::Pause { .. });
                    let reference = named(replica_set)?;
                    set_paused(client, &reference, paused).await?;
                    Ok(format!(
                        "manifestworkreplicaset {}/{} {}\n",
                        reference.namespace,
                        reference.name,
                        if paused { "paused" } else { "resumed" }
                    ))
                }
                RolloutCommand::History { replica_set } => {
                    let rs = parse_work_ref(replica_set, cli.global.namespace.as_deref())?;
                    let object = get_replica_set_json(client, &rs).await?;
                    let revisions = list_revisions(client, &rs).await?;
                    let works = list_replica_set_works(client, &rs).await?;
                    let rows = history_rows(&object, &revisions, &works);
                    match format {
                        OutputFormat::Table if rows.is_empty() => Ok(format!(
                            "No revisions of manifestworkreplicaset {}/{} found.\n",
                            rs.namespace, rs.name
                        )),
                        OutputFormat::Table => Ok(with_newline(history_table(&rows, now))),
                        _ => {
                            let items = rows
                                .iter()
                                .map(serde_json::to_value)
                                .collect::<Result<Vec<_>, _>>()
                                .map_err(|e| CliError::Print(e.to_string()))?;
                            serialize(&list(items), format)
                        }
                    }
                }
                RolloutCommand::Undo {
                    replica_set,
                    to_revision,
                } => {
                    let rs = parse_work_ref(replica_set, cli.global.namespace.as_deref())?;
                    let revisions = list_revisions(client, &rs).await?;
                    // The hub writes the replica set's status as its rollout
                    // moves, and every write changes its resourceVersion: a
                    // write refused for a change since the read is decided
                    // again on a fresh read, a bounded number of times.
                    let undo_once = || async {
                        let object = get_replica_set_json(client, &rs).await?;
                        match undo_plan(object, &revisions, *to_revision)? {
                            UndoPlan::AlreadyThere => Ok(false),
                            UndoPlan::Write(object) => {
                                replace_replica_set(client, &rs, object).await?;
                                Ok(true)
                            }
                        }
                    };
                    let written = undo_once
                        .retry(
                            ConstantBuilder::new()
                                .with_delay(Duration::from_millis(20))
                                .with_max_times(UNDO_RETRIES)
                                .with_jitter(),
                        )
                        .when(|e| matches!(e, CliError::ChangedSinceRead { .. }))
                        .await?;
                    if !written {
                        return Ok(format!(
                            "manifestworkreplicaset.work.ferry.dev/{} skipped rollback (current template already matches revision {to_revision})\n",
                            rs.name
                        ));
                    }
                    Ok(format!(
                        "manifestworkreplicaset.work.ferry.dev/{} rolled back to revision {to_revision}\n",
                        rs.name
                    ))
                }
            }
        }
    }
}

fn with_newline(mut text: String) -> String {
    text.push('\n');
    text
}
