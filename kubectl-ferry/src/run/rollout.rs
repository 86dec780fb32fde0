//! `kubectl ferry rollout ...`: read and steer a replica set's rollout.

use std::time::Duration;

use backon::{ConstantBuilder, Retryable};
use k8s_openapi::jiff::Timestamp;
use kube::Client;

use super::{shown, with_newline};
use crate::cli::{GlobalArgs, OutputFormat, RolloutCommand};
use crate::client::connect;
use crate::error::CliError;
use crate::hub_api::identity::whoami;
use crate::hub_api::replica_sets::{
    approve, generated_works, list_replica_set_works, list_revisions, replace_replica_set,
    set_paused, stored_replica_set, typed_replica_set, waves,
};
use crate::output::{list, serialize};
use crate::rollout::{ReplicaSetRef, gate_to_approve, parse_replica_set_ref};
use crate::rollout_history::{UndoPlan, history_rows, history_table, undo_plan};
use crate::rollout_view::rollout_status;
use crate::work_ref::parse_work_ref;

/// How many times `rollout undo` reads and writes the replica set again after
/// a write lost to a concurrent change, before it gives up.
const UNDO_RETRIES: usize = 7;

/// Runs the rollout `command`, with ages relative to `now`. Fails on a bad
/// `NS/NAME`, a replica set not on the hub, a refused or lost write, or a
/// hub that cannot be reached.
pub async fn rollout(
    global: &GlobalArgs,
    command: &RolloutCommand,
    now: Timestamp,
) -> Result<String, CliError> {
    let format = global.output;
    let connection = connect(global).await?;
    let client = &connection.client;
    let named = |arg: &str| {
        parse_replica_set_ref(
            arg,
            global.namespace.as_deref(),
            &connection.default_namespace,
        )
    };
    match command {
        RolloutCommand::Status { replica_set } => {
            let reference = named(replica_set)?;
            let rs = typed_replica_set(client, &reference).await?;
            match format {
                OutputFormat::Table => {
                    let waves = waves(client, &rs).await?;
                    let works = generated_works(client, &reference).await?;
                    Ok(rollout_status(&rs, &waves, &works))
                }
                _ => {
                    let value =
                        serde_json::to_value(&rs).map_err(|e| CliError::Print(e.to_string()))?;
                    serialize(&shown(global, value), format)
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
            let rs = typed_replica_set(client, &reference).await?;
            let choice = gate_to_approve(&rs, placement.as_deref(), group.as_deref())?;
            let user = whoami(client).await?;
            let (name, existed) = approve(client, &reference, &choice, &user, comment).await?;
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
        RolloutCommand::History { replica_set } => history(global, client, replica_set, now).await,
        RolloutCommand::Undo {
            replica_set,
            to_revision,
        } => undo(global, client, replica_set, *to_revision).await,
    }
}

/// `rollout history`: the replica set's revisions.
async fn history(
    global: &GlobalArgs,
    client: &Client,
    replica_set: &str,
    now: Timestamp,
) -> Result<String, CliError> {
    let format = global.output;
    let rs = named_by_work_ref(replica_set, global)?;
    let object = stored_replica_set(client, &rs).await?;
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

/// `rollout undo`: writes revision `to_revision`'s template back.
async fn undo(
    global: &GlobalArgs,
    client: &Client,
    replica_set: &str,
    to_revision: i64,
) -> Result<String, CliError> {
    let rs = named_by_work_ref(replica_set, global)?;
    let revisions = list_revisions(client, &rs).await?;
    // The hub writes the replica set's status as its rollout
    // moves, and every write changes its resourceVersion: a
    // write refused for a change since the read is decided
    // again on a fresh read, a bounded number of times.
    let undo_once = || async {
        let object = stored_replica_set(client, &rs).await?;
        match undo_plan(object, &revisions, to_revision)? {
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

/// The replica set `arg` names as `NS/NAME` (or `NAME` with `-n`), checked
/// as a work reference is.
fn named_by_work_ref(arg: &str, global: &GlobalArgs) -> Result<ReplicaSetRef, CliError> {
    let work = parse_work_ref(arg, global.namespace.as_deref())?;
    Ok(ReplicaSetRef {
        namespace: work.namespace,
        name: work.name,
    })
}
