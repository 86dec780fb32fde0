//! The child's side of a share (see `shares.rs`): reads what to run from
//! stdin, runs it, and writes its counters to stdout until stdin closes.

use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::loadgen::error::LoadgenError;
use crate::loadgen::run::{SimFleet, hub_endpoint};
use crate::loadgen::shares::ShareSpec;

/// How often a child reports its counters.
const REPORT_EVERY: Duration = Duration::from_millis(250);

/// Runs the share described by the first line of stdin until stdin closes,
/// writing the share's counters to stdout every 250 ms. Fails when the
/// line is not a share or a hub's endpoint is refused.
pub async fn serve_share() -> Result<(), LoadgenError> {
    let mut stdin = BufReader::new(tokio::io::stdin()).lines();
    let line = stdin
        .next_line()
        .await
        .ok()
        .flatten()
        .ok_or_else(|| LoadgenError::Share {
            first: 0,
            detail: "no share on stdin".into(),
        })?;
    let spec: ShareSpec = serde_json::from_str(&line).map_err(|e| LoadgenError::Share {
        first: 0,
        detail: format!("not a share: {e}"),
    })?;
    let endpoints = spec
        .hubs
        .iter()
        .map(|hub| hub_endpoint(&hub.url, hub.ca_pem.as_deref()))
        .collect::<Result<Vec<_>, _>>()?;
    let fleet = SimFleet::spread_from(
        spec.first,
        spec.clusters.clone(),
        endpoints,
        spec.behaviour(),
    );
    let mut stdout = tokio::io::stdout();
    let mut tick = tokio::time::interval(REPORT_EVERY);
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let Ok(mut line) = serde_json::to_vec(&fleet.snapshot()) else { break };
                line.push(b'\n');
                if stdout.write_all(&line).await.is_err() || stdout.flush().await.is_err() {
                    break;
                }
            }
            // EOF (the parent is done or gone) or any further line: stop.
            _ = stdin.next_line() => break,
        }
    }
    fleet.stop().await;
    Ok(())
}
