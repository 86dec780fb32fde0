//! Waiting for the agent to go over an object again. Each pass of the agent
//! over a work reads each of its objects once, and the spoke's audit log
//! records those reads; passes of one work run one after another, so `n + 1`
//! reads after a point prove `n` whole passes since (writes included). That
//! is the signal a test waits for before asserting that a pass changed
//! nothing, instead of sleeping for a resync period.

use std::time::Duration;

use crate::harness::audit::count_reads;

/// The agent did not read the object often enough in time.
#[derive(Debug, thiserror::Error)]
pub enum PassesError {
    /// Fewer reads than awaited within `timeout`.
    #[error("the agent read {uri} {seen} more times, not {wanted}, within {timeout:?}")]
    Timeout {
        /// The object's request URI.
        uri: String,
        /// Reads seen since the start.
        seen: usize,
        /// Reads awaited.
        wanted: usize,
        /// How long was waited.
        timeout: Duration,
    },
}

/// Reads of the object at `uri` (e.g.
/// `/api/v1/namespaces/default/configmaps/a`) in the audit log at
/// `audit_log` so far; the starting point for [`wait_for_passes`].
pub fn reads_so_far(audit_log: &str, uri: &str) -> usize {
    count_reads(audit_log, uri)
}

/// Waits until the agent has made `passes` whole passes over the object at
/// `uri` since `start` reads (see [`reads_so_far`]). Fails after `timeout`
/// with how many reads it saw.
pub async fn wait_for_passes(
    audit_log: &str,
    uri: &str,
    start: usize,
    passes: usize,
    timeout: Duration,
) -> Result<(), PassesError> {
    let wanted = passes + 1;
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let seen = count_reads(audit_log, uri).saturating_sub(start);
        if seen >= wanted {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(PassesError::Timeout {
                uri: uri.to_string(),
                seen,
                wanted,
                timeout,
            });
        }
        // The audit log is a file: there is nothing to watch but its size.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
