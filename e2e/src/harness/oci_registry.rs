//! A real OCI registry and the tools that push to it and sign, for the
//! release-artifact test: the CNCF `distribution` registry (module
//! `github.com/distribution/distribution/v3`, version [`REGISTRY_VERSION`])
//! storing blobs in a temporary directory and serving plain HTTP on a
//! loopback port; `crane` (go-containerregistry, [`CRANE_VERSION`]) to push
//! an OCI layout; and `cosign` (sigstore, [`COSIGN_VERSION`]) to sign and
//! verify. All three are built from their Go modules with `go install` and
//! cached in the ferry cache directory, as Helm is. Nothing is vendored.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::oneshot;

use crate::harness::go_tool::{GoTool, GoToolError, ensure_go_tool};
use crate::harness::local_pod::free_port;

/// The distribution module version the registry is built from.
pub const REGISTRY_VERSION: &str = "v3.1.2";
/// The go-containerregistry module version crane is built from.
pub const CRANE_VERSION: &str = "v0.22.1";
/// The cosign module version.
pub const COSIGN_VERSION: &str = "v2.6.5";

const REGISTRY: GoTool = GoTool {
    binary: "registry",
    package: "github.com/distribution/distribution/v3/cmd/registry",
    version: REGISTRY_VERSION,
};

const CRANE: GoTool = GoTool {
    binary: "crane",
    package: "github.com/google/go-containerregistry/cmd/crane",
    version: CRANE_VERSION,
};

const COSIGN: GoTool = GoTool {
    binary: "cosign",
    package: "github.com/sigstore/cosign/v2/cmd/cosign",
    version: COSIGN_VERSION,
};

/// How long the registry may take to listen once started.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// The registry could not be built or started.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The registry could not be built from its Go module.
    #[error(transparent)]
    Build(#[from] GoToolError),
    /// A file or the process could not be made.
    #[error("{action}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// The registry did not say it listens.
    #[error("the registry did not listen within {timeout:?}; its log:\n{log}")]
    NotReady {
        /// How long it was given.
        timeout: Duration,
        /// What it wrote.
        log: String,
    },
}

/// A running registry, stopped (killed) with this handle.
pub struct Registry {
    /// `127.0.0.1:port`, the host part of its references.
    pub host: String,
    _child: Child,
    log: Arc<Mutex<String>>,
    _dir: tempfile::TempDir,
}

impl Registry {
    /// Builds (once) and starts a registry on a free loopback port, and
    /// returns once its log says it listens. Fails when the build, the
    /// start or the wait does.
    pub async fn start() -> Result<Self, RegistryError> {
        let binary = tokio::task::spawn_blocking(|| ensure_go_tool(REGISTRY))
            .await
            .map_err(|e| RegistryError::Io {
                action: "building the registry",
                source: std::io::Error::other(e.to_string()),
            })??;
        let dir = tempfile::Builder::new()
            .prefix("ferry-registry-")
            .tempdir()
            .map_err(|source| RegistryError::Io {
                action: "creating the registry's directory",
                source,
            })?;
        let host = format!(
            "127.0.0.1:{}",
            free_port(std::net::Ipv4Addr::LOCALHOST.into())
        );
        let config = dir.path().join("config.yml");
        let storage = dir.path().join("storage");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: info\n  formatter: text\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {host}\n",
                storage.display()
            ),
        )
        .map_err(|source| RegistryError::Io {
            action: "writing the registry's config",
            source,
        })?;
        let mut child = Command::new(binary)
            .arg("serve")
            .arg(&config)
            // Its OpenTelemetry setup would otherwise try a collector.
            .env("OTEL_TRACES_EXPORTER", "none")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| RegistryError::Io {
                action: "starting the registry",
                source,
            })?;
        let stderr = child.stderr.take().ok_or_else(|| RegistryError::Io {
            action: "reading the registry's log",
            source: std::io::Error::other("no stderr"),
        })?;
        let log: Arc<Mutex<String>> = Arc::default();
        let (listening, ready) = oneshot::channel();
        // Keeps its log and says when it listens.
        let kept = log.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            let mut listening = Some(listening);
            while let Ok(Some(line)) = lines.next_line().await {
                if let Ok(mut kept) = kept.lock() {
                    kept.push_str(&line);
                    kept.push('\n');
                }
                if line.contains("listening on")
                    && let Some(tx) = listening.take()
                {
                    let _ = tx.send(());
                }
            }
        });
        match tokio::time::timeout(READY_TIMEOUT, ready).await {
            Ok(Ok(())) => Ok(Self {
                host,
                _child: child,
                log,
                _dir: dir,
            }),
            _ => Err(RegistryError::NotReady {
                timeout: READY_TIMEOUT,
                log: log.lock().map(|l| l.clone()).unwrap_or_default(),
            }),
        }
    }

    /// What the registry logged so far (for a failing test's message).
    pub fn log(&self) -> String {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

/// The cached `crane`, built first when the cache lacks it. Blocking.
pub fn ensure_crane() -> Result<PathBuf, GoToolError> {
    ensure_go_tool(CRANE)
}

/// The cached `cosign`, built first when the cache lacks it. Blocking.
pub fn ensure_cosign() -> Result<PathBuf, GoToolError> {
    ensure_go_tool(COSIGN)
}
