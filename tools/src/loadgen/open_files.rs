//! How many simulated agents one process can hold: each holds one TCP
//! connection, so the process's open-file limit bounds the fleet. Without
//! this check a fleet larger than the limit does not fail: the agents past
//! it redial forever on "too many open files" and the hub never hears of
//! them, which looks like a hub that stopped serving.

use std::fmt;

/// File descriptors a simulated fleet's process keeps for everything but
/// its agents: the kube clients' connections, the hub children's pipes,
/// logs, the runtime.
pub const RESERVED_FILES: u64 = 1024;

/// The process's soft limit on open files, read from `/proc/self/limits`;
/// `None` where that file is missing or says "unlimited".
pub fn open_files_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    soft_open_files(&limits)
}

/// The soft "Max open files" limit in the text of a `/proc/<pid>/limits`
/// file; `None` when the line is missing, unlimited or not a number.
pub fn soft_open_files(limits: &str) -> Option<u64> {
    let line = limits
        .lines()
        .find(|line| line.starts_with("Max open files"))?;
    line.trim_start_matches("Max open files")
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// A fleet larger than one process's open-file limit allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooManyAgents {
    /// Agents asked for.
    pub agents: usize,
    /// The process's soft open-file limit.
    pub limit: u64,
}

impl fmt::Display for TooManyAgents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} simulated agents need {} open files in this process (one connection each, {} kept for the rest), but its limit is {}: raise it (`ulimit -n`) or simulate at most {} clusters",
            self.agents,
            self.agents as u64 + RESERVED_FILES,
            RESERVED_FILES,
            self.limit,
            self.limit.saturating_sub(RESERVED_FILES),
        )
    }
}

impl std::error::Error for TooManyAgents {}

/// Whether `agents` simulated agents fit under `limit` open files (no
/// limit known: they fit). Fails with what to change when they do not.
pub fn check_agents_fit(agents: usize, limit: Option<u64>) -> Result<(), TooManyAgents> {
    match limit {
        Some(limit) if agents as u64 + RESERVED_FILES > limit => {
            Err(TooManyAgents { agents, limit })
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: &str = "Limit                     Soft Limit           Hard Limit           Units     \n\
Max processes             96365                96365                processes \n\
Max open files            20000                20000                files     \n\
Max locked memory         8388608              8388608              bytes     \n";

    #[test]
    fn the_soft_open_files_limit_is_read_from_proc_limits() {
        assert_eq!(soft_open_files(LIMITS), Some(20_000));
        assert_eq!(
            soft_open_files(
                "Max open files            unlimited            unlimited            files"
            ),
            None
        );
        assert_eq!(soft_open_files("Max processes 10 10 processes"), None);
    }

    #[test]
    fn a_fleet_past_the_limit_is_refused_with_the_largest_that_fits() {
        assert!(check_agents_fit(18_976, Some(20_000)).is_ok());
        let refused = check_agents_fit(30_000, Some(20_000)).expect_err("too many");
        assert_eq!(refused.limit, 20_000);
        let message = refused.to_string();
        assert!(message.contains("31024 open files"), "{message}");
        assert!(message.contains("at most 18976 clusters"), "{message}");
        assert!(check_agents_fit(1_000_000, None).is_ok());
    }
}
