//! Simulated agents spread over several processes. Every agent holds one
//! connection, and one process may hold only as many as its open-file limit
//! allows (20,000 where the hard limit cannot be raised), so a larger fleet
//! runs its agents in shares: this process runs the first, and a child
//! process of the same binary runs each other one, told what to run by one
//! JSON line on its stdin and answering with its counters, one JSON line
//! every 250 ms on its stdout. A child stops when its stdin closes. This
//! file is the parent's side; `share_child.rs` is the child's.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::task::JoinHandle;

use crate::loadgen::agent::{Behaviour, SimCluster};
use crate::loadgen::counters::Snapshot;
use crate::loadgen::error::LoadgenError;

/// One hub replica as a child dials it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HubTarget {
    /// The replica's agent URL.
    pub url: String,
    /// The PEM CA its serving certificate chains to (None: plaintext).
    pub ca_pem: Option<String>,
}

/// What one child runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShareSpec {
    /// The hub replicas; agent `first + i` dials replica `(first + i) % len`.
    pub hubs: Vec<HubTarget>,
    /// The fleet-wide index of this share's first agent.
    pub first: usize,
    /// The share's clusters.
    pub clusters: Vec<SimCluster>,
    /// Heartbeat interval until a Welcome says otherwise, milliseconds.
    pub heartbeat_ms: u64,
    /// See [`Behaviour::status_delay`], milliseconds.
    pub status_delay_ms: u64,
    /// See [`Behaviour::flap_every`], seconds.
    pub flap_seconds: Option<u64>,
    /// See [`Behaviour::certificates`] (each hub's CA).
    #[serde(default)]
    pub certificates: bool,
}

impl ShareSpec {
    /// How the share's agents behave.
    pub(crate) fn behaviour(&self) -> Behaviour {
        Behaviour {
            heartbeat: Duration::from_millis(self.heartbeat_ms),
            status_delay: Duration::from_millis(self.status_delay_ms),
            flap_every: self.flap_seconds.map(Duration::from_secs),
            certificates: self.certificates.then(|| {
                self.hubs
                    .iter()
                    .filter_map(|hub| hub.ca_pem.clone())
                    .collect()
            }),
        }
    }
}

/// Splits `total` agents into the fewest shares of at most `per_process`
/// each, as even as possible (sizes differ by at most one).
pub fn share_sizes(total: usize, per_process: usize) -> Vec<usize> {
    let shares = total.div_ceil(per_process.max(1)).max(1);
    (0..shares)
        .map(|i| total / shares + usize::from(i < total % shares))
        .collect()
}

/// A child process running one share, and its latest counters.
pub struct RemoteShare {
    child: Child,
    /// Dropped to stop the child.
    stdin: Option<ChildStdin>,
    latest: Arc<Mutex<Snapshot>>,
    reader: JoinHandle<()>,
    size: usize,
}

impl RemoteShare {
    /// Starts `program` with `args` (a binary that serves a share with
    /// [`serve_share`] when given them) and hands it `spec`. Fails when the
    /// child cannot start or take its spec.
    pub async fn start(
        program: &std::path::Path,
        args: &[&str],
        spec: &ShareSpec,
    ) -> Result<Self, LoadgenError> {
        let failed = |detail: String| LoadgenError::Share {
            first: spec.first,
            detail,
        };
        let mut child = Command::new(program)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| failed(format!("starting {}: {e}", program.display())))?;
        let mut stdin = child
            .stdin
            .take()
            .ok_or_else(|| failed("no stdin".into()))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| failed("no stdout".into()))?;
        let mut line = serde_json::to_vec(spec).map_err(|e| failed(e.to_string()))?;
        line.push(b'\n');
        stdin
            .write_all(&line)
            .await
            .map_err(|e| failed(format!("sending the share: {e}")))?;
        let latest = Arc::new(Mutex::new(Snapshot::default()));
        let reader = tokio::spawn(read_reports(stdout, latest.clone()));
        Ok(Self {
            child,
            stdin: Some(stdin),
            latest,
            reader,
            size: spec.clusters.len(),
        })
    }

    /// The child's counters as it last reported them.
    pub fn snapshot(&self) -> Snapshot {
        self.latest.lock().map(|s| *s).unwrap_or_default()
    }

    /// Agents in this share.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Closes the child's stdin and waits for it to stop its agents and exit.
    pub async fn stop(mut self) {
        self.stdin.take();
        let _ = self.child.wait().await;
        self.reader.abort();
    }
}

/// Keeps `latest` at the last counters line the child wrote.
async fn read_reports(stdout: tokio::process::ChildStdout, latest: Arc<Mutex<Snapshot>>) {
    let mut lines = BufReader::new(stdout).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        if let Ok(snapshot) = serde_json::from_str::<Snapshot>(&line)
            && let Ok(mut held) = latest.lock()
        {
            *held = snapshot;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_are_as_few_and_as_even_as_the_limit_allows() {
        assert_eq!(share_sizes(30_000, 18_976), vec![15_000, 15_000]);
        assert_eq!(share_sizes(40_001, 18_976), vec![13_334, 13_334, 13_333]);
        assert_eq!(share_sizes(100, 18_976), vec![100]);
        assert_eq!(share_sizes(0, 10), vec![0]);
        assert_eq!(share_sizes(5, 0), vec![1, 1, 1, 1, 1]);
    }

    #[test]
    fn a_share_survives_its_trip_through_json() {
        let spec = ShareSpec {
            hubs: vec![HubTarget {
                url: "https://127.0.0.1:1".into(),
                ca_pem: None,
            }],
            first: 15_000,
            clusters: vec![SimCluster {
                name: "sim-15000".into(),
                token: "t".into(),
            }],
            heartbeat_ms: 10_000,
            status_delay_ms: 0,
            flap_seconds: None,
            certificates: true,
        };
        let back: ShareSpec =
            serde_json::from_str(&serde_json::to_string(&spec).expect("json")).expect("back");
        assert_eq!(back.first, 15_000);
        assert_eq!(back.clusters[0].name, "sim-15000");
        assert_eq!(back.behaviour().heartbeat, Duration::from_secs(10));
    }
}
