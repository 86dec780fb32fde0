//! The real `ferry-agent` binary run against a fleet's hub and one of its
//! spokes, with its probe and metrics endpoints on a loopback port: what the
//! tests of `/metrics` and `/readyz` scrape, as Kubernetes and Prometheus
//! would.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use crate::harness::fleet::Fleet;
use crate::harness::hub_metrics::{ScrapeError, get};

/// The agent could not be started, or an endpoint did not answer as awaited.
#[derive(Debug, thiserror::Error)]
pub enum AgentProcessError {
    /// Writing its files, finding a port or spawning it failed.
    #[error("starting ferry-agent: {0}")]
    Start(#[from] std::io::Error),
    /// The spoke's agent has no inline token to copy.
    #[error("spoke {0} has no inline hub token")]
    NoToken(String),
    /// The endpoint never answered as awaited.
    #[error(
        "GET {path} did not answer {status} with {what} within {timeout:?}; last answer: {last}"
    )]
    Timeout {
        /// The path.
        path: String,
        /// The status awaited.
        status: u16,
        /// The body awaited.
        what: String,
        /// How long.
        timeout: Duration,
        /// The last answer (or error).
        last: String,
    },
}

/// The `ferry-agent` binary: `FERRY_AGENT_BIN`, or the one cargo builds next
/// to the running test (`target/<profile>/deps/<test>` →
/// `target/<profile>/ferry-agent`; `cargo build -p ferry-agent` or
/// `cargo test --workspace` builds it).
///
/// Panics when it is missing, naming the command that builds it.
pub fn agent_binary() -> PathBuf {
    crate::harness::local_pod::workspace_binary("ferry-agent", "FERRY_AGENT_BIN")
}

/// How long the agent may take to serve its probes after it is spawned.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

/// A running `ferry-agent` process; killed when dropped.
pub struct AgentProcess {
    child: tokio::process::Child,
    /// Where it serves `/healthz`, `/readyz` and `/metrics`.
    pub probe_addr: SocketAddr,
    dir: tempfile::TempDir,
}

impl AgentProcess {
    /// Runs the agent of spoke `cluster` against `fleet`'s first hub (its
    /// direct address, not the spoke's link), presenting `token` (the
    /// spoke's own when None) and passing `extra_args`.
    pub async fn start(
        fleet: &Fleet,
        cluster: &str,
        token: Option<&str>,
        extra_args: &[&str],
    ) -> Result<Self, AgentProcessError> {
        let hub = (fleet.hub_url.as_str(), fleet.hub_ca_pem.as_str());
        Self::start_with_hub(fleet, cluster, hub, token, extra_args).await
    }

    /// Runs the agent of spoke `cluster` of `fleet` against another hub:
    /// `hub` is its URL and the PEM CA of its certificate (e.g. a
    /// `ferry-hub` process's); otherwise as [`AgentProcess::start`].
    pub async fn start_with_hub(
        fleet: &Fleet,
        cluster: &str,
        (hub_url, hub_ca_pem): (&str, &str),
        token: Option<&str>,
        extra_args: &[&str],
    ) -> Result<Self, AgentProcessError> {
        let spoke = fleet.spoke(cluster);
        let token = match token {
            Some(token) => token,
            None => spoke
                .agent_token()
                .ok_or_else(|| AgentProcessError::NoToken(cluster.to_string()))?,
        };
        let dir = tempfile::tempdir()?;
        let token_file = dir.path().join("token");
        std::fs::write(&token_file, token)?;
        let ca = dir.path().join("hub-ca.crt");
        std::fs::write(&ca, hub_ca_pem)?;
        let log = std::fs::File::create(dir.path().join("agent.log"))?;
        let probe_addr = free_loopback_port()?;
        let child = tokio::process::Command::new(agent_binary())
            .args(["--hub-url", hub_url, "--cluster-name", cluster])
            .arg("--token-file")
            .arg(&token_file)
            .arg("--hub-ca")
            .arg(&ca)
            .args(["--probe-addr", &probe_addr.to_string()])
            .args(["--heartbeat-seconds", "2"])
            .args(extra_args)
            .env("KUBECONFIG", &spoke.control_plane.info.kubeconfig)
            .env("RUST_LOG", "info")
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log))
            .kill_on_drop(true)
            .spawn()?;
        let agent = Self {
            child,
            probe_addr,
            dir,
        };
        // Up once it answers its liveness probe; the tests scrape from then on.
        agent
            .wait_for_answer("/healthz", 200, "ok", STARTUP_TIMEOUT)
            .await?;
        Ok(agent)
    }

    /// Its process id, None once it has exited and been reaped.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("agent.log")
    }

    /// The directory holding its token, CA and log.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// GETs `path` every 100 ms until it answers `status` with a body
    /// containing `contains`, and returns that body.
    pub async fn wait_for_answer(
        &self,
        path: &str,
        status: u16,
        contains: &str,
        timeout: Duration,
    ) -> Result<String, AgentProcessError> {
        let what = format!("a body containing {contains:?}");
        self.wait_for(path, status, &what, |body| body.contains(contains), timeout)
            .await
    }

    /// GETs `path` every 100 ms until it answers `status` with a body
    /// `accept` takes (described by `what`), and returns that body.
    pub async fn wait_for(
        &self,
        path: &str,
        status: u16,
        what: &str,
        accept: impl Fn(&str) -> bool,
        timeout: Duration,
    ) -> Result<String, AgentProcessError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let last = match get(self.probe_addr, path).await {
                Ok((code, body)) if code == status && accept(&body) => return Ok(body),
                Ok((code, body)) => format!("{code} {body}"),
                Err(ScrapeError::Request { message, .. }) => message,
            };
            if tokio::time::Instant::now() >= deadline {
                return Err(AgentProcessError::Timeout {
                    path: path.to_string(),
                    status,
                    what: what.to_string(),
                    timeout,
                    last,
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Kills the process and waits for it.
    pub async fn kill(mut self) {
        let _ = self.child.kill().await;
    }
}

/// A loopback address with a port free right now (the OS picks it), for a
/// process the test starts next. Fails when no port can be bound.
pub fn free_loopback_port() -> std::io::Result<SocketAddr> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    listener.local_addr()
}
