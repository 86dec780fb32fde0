//! The real `ferry-hub` binary as a child process against a control plane,
//! for benchmarks that measure the hub process itself (its RSS and CPU) and
//! kill and restart it as a crash would.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};

use crate::harness::controlplane::ControlPlane;
use crate::harness::hub_metrics::scrape;

/// The hub process could not be started or did not become ready.
#[derive(Debug, thiserror::Error)]
pub enum HubProcessError {
    /// The binary is missing.
    #[error(
        "{0} is missing: build it with `cargo build --release -p ferry-hub`, or set FERRY_HUB_BIN"
    )]
    Missing(PathBuf),
    /// Writing its files or spawning it failed.
    #[error("{action}: {source}")]
    Io {
        /// What was being done.
        action: String,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// Its certificate could not be generated.
    #[error("generating the hub certificate: {0}")]
    Cert(String),
    /// It did not serve `/metrics` in time.
    #[error("the hub did not serve /metrics within {0:?}")]
    NotReady(Duration),
}

/// Where the hub listens and how it is tuned; `extra_args` are passed on
/// as they are (e.g. `--max-connections=20000`).
#[derive(Debug, Clone)]
pub struct HubProcessOptions {
    /// Agent port.
    pub grpc: SocketAddr,
    /// Probe and metrics port.
    pub probes: SocketAddr,
    /// More `ferry-hub serve` arguments.
    pub extra_args: Vec<String>,
    /// More environment variables.
    pub env: Vec<(String, String)>,
}

/// A running `ferry-hub serve` child.
pub struct HubProcess {
    binary: PathBuf,
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
    options: HubProcessOptions,
    child: Child,
    /// The CA agents trust.
    pub ca_pem: String,
}

/// `name` next to the running executable (`target/<profile>/`, also from
/// `target/<profile>/deps/`), or the path in environment variable `env`.
pub fn sibling_binary(name: &str, env: &str) -> PathBuf {
    if let Some(path) = std::env::var_os(env) {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().unwrap_or_default();
    let mut dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    if dir.ends_with("deps") {
        dir.pop();
    }
    dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX))
}

impl HubProcess {
    /// Writes a serving certificate for 127.0.0.1 and starts the hub as the
    /// admin of `plane`; returns once it serves `/metrics`.
    pub async fn start(
        plane: &ControlPlane,
        options: HubProcessOptions,
    ) -> Result<Self, HubProcessError> {
        Self::start_with_kubeconfig(plane.info.kubeconfig.clone(), options).await
    }

    /// As [`HubProcess::start`], with the hub's API server access read from
    /// `kubeconfig` (e.g. the admin's, pointed through a [`super::link::Link`]).
    pub async fn start_with_kubeconfig(
        kubeconfig: PathBuf,
        options: HubProcessOptions,
    ) -> Result<Self, HubProcessError> {
        let binary = sibling_binary("ferry-hub", "FERRY_HUB_BIN");
        if !binary.exists() {
            return Err(HubProcessError::Missing(binary));
        }
        let io = |action: &str| {
            let action = action.to_string();
            move |source| HubProcessError::Io { action, source }
        };
        let dir = tempfile::Builder::new()
            .prefix("ferry-hub-process-")
            .tempdir()
            .map_err(io("creating the hub's directory"))?;
        let cert = ferry_hub::certs::tls::ServingCert::generate(&["127.0.0.1".into()])
            .map_err(|e| HubProcessError::Cert(e.to_string()))?;
        std::fs::write(dir.path().join("tls.crt"), &cert.chain_pem)
            .map_err(io("writing tls.crt"))?;
        std::fs::write(dir.path().join("tls.key"), &cert.key_pem).map_err(io("writing tls.key"))?;
        let child = spawn(&binary, dir.path(), &kubeconfig, &options)?;
        let hub = Self {
            binary,
            dir,
            kubeconfig,
            options,
            child,
            ca_pem: cert.ca_pem,
        };
        hub.wait_ready(Duration::from_secs(60)).await?;
        Ok(hub)
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// `https://<grpc address>`.
    pub fn url(&self) -> String {
        format!("https://{}", self.options.grpc)
    }

    /// Where `/metrics` is served.
    pub fn probes(&self) -> SocketAddr {
        self.options.probes
    }

    /// Kills the hub with SIGKILL, as a crash or OOM kill would.
    pub async fn kill(&mut self) {
        let _ = self.child.kill().await;
    }

    /// Sends SIGTERM (as Kubernetes does to stop a pod) and waits up to
    /// `timeout` for the process to exit; its exit status, or `None` when
    /// it is still running then (it is left running: dropping the handle
    /// kills it).
    pub async fn terminate(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let pid = self.child.id()?;
        let sent = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .await;
        if !sent.is_ok_and(|s| s.success()) {
            return None;
        }
        tokio::time::timeout(timeout, self.child.wait())
            .await
            .ok()
            .and_then(Result::ok)
    }

    /// Sends `signal` (`STOP`, `CONT`, ...) to the process with kill(1);
    /// whether it was sent.
    async fn signal(&self, signal: &str) -> bool {
        let Some(pid) = self.child.id() else {
            return false;
        };
        Command::new("kill")
            .args([format!("-{signal}"), pid.to_string()])
            .status()
            .await
            .is_ok_and(|s| s.success())
    }

    /// Freezes the process with SIGSTOP, as a long GC pause, a stalled
    /// node or a debugger would: it neither runs nor loses its sockets.
    /// Whether the signal was sent.
    pub async fn pause(&self) -> bool {
        self.signal("STOP").await
    }

    /// Lets a paused process run on (SIGCONT) from where it stopped.
    /// Whether the signal was sent.
    pub async fn resume(&self) -> bool {
        self.signal("CONT").await
    }

    /// What the hub wrote to its log so far (empty when unreadable).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("hub.log")).unwrap_or_default()
    }

    /// Starts the hub again with the same certificate, ports and flags;
    /// returns once its process is spawned (not yet serving).
    pub fn restart(&mut self) -> Result<(), HubProcessError> {
        self.child = spawn(
            &self.binary,
            self.dir.path(),
            &self.kubeconfig,
            &self.options,
        )?;
        Ok(())
    }

    /// Waits until `/metrics` answers.
    pub async fn wait_ready(&self, timeout: Duration) -> Result<(), HubProcessError> {
        let start = Instant::now();
        while scrape(self.options.probes).await.is_err() {
            if start.elapsed() > timeout {
                return Err(HubProcessError::NotReady(timeout));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }
}

fn spawn(
    binary: &Path,
    dir: &Path,
    kubeconfig: &Path,
    options: &HubProcessOptions,
) -> Result<Child, HubProcessError> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("hub.log"))
        .map_err(|source| HubProcessError::Io {
            action: "opening hub.log".into(),
            source,
        })?;
    Command::new(binary)
        .arg("serve")
        .arg(format!("--grpc-addr={}", options.grpc))
        .arg(format!("--probe-addr={}", options.probes))
        .arg(format!("--tls-cert={}", dir.join("tls.crt").display()))
        .arg(format!("--tls-key={}", dir.join("tls.key").display()))
        .args(&options.extra_args)
        .env("KUBECONFIG", kubeconfig)
        .env("RUST_LOG", "warn")
        .envs(options.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        // The hub logs on stdout; panics and start-up errors go to stderr.
        .stdout(log.try_clone().map_err(|source| HubProcessError::Io {
            action: "opening hub.log".into(),
            source,
        })?)
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .map_err(|source| HubProcessError::Io {
            action: format!("starting {}", binary.display()),
            source,
        })
}
