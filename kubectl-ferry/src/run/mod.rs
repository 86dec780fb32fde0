//! One command from parsed arguments to the text to print: this file picks
//! the command; each family has its file.
//!
//! - `get.rs`: `get clusters|clustersets|works|replicasets|placements`.
//! - `describe.rs`: `describe work`.
//! - `rollout.rs`: `rollout status|approve|pause|resume|history|undo`.

mod describe;
mod get;
mod rollout;

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;

use crate::cli::{Cli, Command, DescribeCommand, GlobalArgs};
use crate::client::connect;
use crate::dashboard::run_dashboard;
use crate::error::CliError;
use crate::output::hide_managed_fields;
use crate::release_deletions::act::{ReleaseRequest, release_deletions};
use crate::sealing::act::{SealRequest, seal, sealed};

/// Runs `cli` against the cluster its flags name, with ages relative to
/// `now`, and returns what to print on stdout. Fails with a [`CliError`]
/// for every reason listed there; a bad `NS/NAME` fails before any
/// connection is made.
pub async fn run(cli: &Cli, now: Timestamp) -> Result<String, CliError> {
    let global = &cli.global;
    match &cli.command {
        Command::Get(command) => get::get(global, command, now).await,
        Command::Dashboard { port, open } => {
            let connection = connect(global).await?;
            run_dashboard(connection, *port, *open).await?;
            Ok(String::new())
        }
        Command::Describe(DescribeCommand::Work { work }) => {
            describe::describe(global, work, now).await
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
            release_deletions(global, &request, now).await
        }
        Command::Rollout(command) => rollout::rollout(global, command, now).await,
        Command::Seal {
            file,
            clusters,
            placements,
            cluster_sets,
            replica_set,
        } => {
            let request = SealRequest {
                file,
                clusters,
                placements,
                cluster_sets,
                replica_set: replica_set.as_deref(),
            };
            seal(global, &request).await
        }
        Command::Sealed => sealed(global).await,
    }
}

/// `object` as printed: without `metadata.managedFields` unless asked.
fn shown(global: &GlobalArgs, mut object: Value) -> Value {
    if !global.show_managed_fields {
        hide_managed_fields(&mut object);
    }
    object
}

fn with_newline(mut text: String) -> String {
    text.push('\n');
    text
}
