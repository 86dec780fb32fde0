//! `kubectl ferry describe work NS/NAME`.

use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use super::shown;
use crate::cli::{GlobalArgs, OutputFormat};
use crate::client::connect;
use crate::describe::describe_work;
use crate::error::CliError;
use crate::events::recent;
use crate::hub_api::fleet::{get_work, work_events};
use crate::output::serialize;
use crate::work_ref::parse_work_ref;

/// Describes the work `work` names, with ages relative to `now`. Fails on
/// a bad `NS/NAME` (before connecting), a work not on the hub, or a hub
/// that cannot be reached or refuses.
pub async fn describe(global: &GlobalArgs, work: &str, now: Timestamp) -> Result<String, CliError> {
    let format = global.output;
    let work_ref = parse_work_ref(work, global.namespace.as_deref())?;
    let connection = connect(global).await?;
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
            let work = shown(global, entry.raw);
            let record = match events {
                Ok(events) => {
                    let events = events
                        .iter()
                        .map(|e| serde_json::to_value(e).map(|v| shown(global, v)))
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
