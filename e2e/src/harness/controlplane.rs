//! A running control plane: one child process with etcd, kube-apiserver and
//! kube-controller-manager, its data in a temporary directory.
//!
//! The child watches its stdin and exits when it closes, so it goes away with
//! the test process even when that is killed; dropping the handle kills it too.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde::Deserialize;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};

use crate::harness::controlplane_build::{BuildError, ensure_controlplane_binary};

const READY_PREFIX: &str = "FERRY_CONTROLPLANE_READY ";
const START_TIMEOUT: Duration = Duration::from_secs(120);
const STOP_TIMEOUT: Duration = Duration::from_secs(15);

/// A control plane could not be started.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Building the binary failed.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// Process or file IO failed.
    #[error("{action}: {source}")]
    Io {
        /// What was being done.
        action: String,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// The process exited or stayed silent before it was ready.
    #[error("control plane {name} did not become ready: {why}; last log lines:\n{log_tail}")]
    NotReady {
        /// Control plane name.
        name: String,
        /// What went wrong.
        why: String,
        /// The end of its stderr.
        log_tail: String,
    },
    /// The kubeconfig it wrote could not be used.
    #[error("using the kubeconfig of {name}: {source}")]
    Kubeconfig {
        /// Control plane name.
        name: String,
        /// The kube error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// What the control plane prints once `/readyz` answers.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadyInfo {
    /// Name given with `--name`.
    pub name: String,
    /// Admin kubeconfig.
    pub kubeconfig: PathBuf,
    /// API server URL.
    pub server: String,
    /// Admin bearer token.
    pub token: String,
    /// CA of the serving certificate.
    pub ca_file: PathBuf,
    /// etcd's client port; 0 from a binary that does not report it.
    #[serde(default)]
    pub etcd_client_port: u16,
    /// Audit log path, empty when auditing is off.
    #[serde(default)]
    pub audit_log: String,
}

impl ReadyInfo {
    /// A kubeconfig for this API server authenticating as `user` with
    /// bearer `token`, trusting the CA at `ca_path` (a path the process that
    /// reads the kubeconfig sees, which need not be `ca_file`).
    pub fn token_kubeconfig(&self, user: &str, token: &str, ca_path: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\n    certificate-authority: {ca_path}\nusers:\n- name: {user}\n  user:\n    token: {token}\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: {user}\ncurrent-context: c\n",
            self.server
        )
    }
}

/// Options of one control plane.
#[derive(Debug, Clone, Default)]
pub struct ControlPlaneOptions {
    /// Record write requests in an audit log under the data directory.
    pub audit: bool,
    /// Serve watches straight from etcd (`--watch-cache=false`): a watch
    /// from a resource version etcd compacted away then fails with 410
    /// Gone, which the watch cache would have hidden.
    pub without_watch_cache: bool,
}

/// A running control plane.
pub struct ControlPlane {
    /// Its name.
    pub name: String,
    /// What it reported when ready.
    pub info: ReadyInfo,
    /// Seconds from spawn to ready.
    pub startup: Duration,
    options: ControlPlaneOptions,
    child: Child,
    stdin: Option<ChildStdin>,
    // Removed, with everything the control plane wrote, when the handle drops.
    data: tempfile::TempDir,
}

impl ControlPlane {
    /// Builds the binary if needed and starts a control plane named `name`.
    pub async fn start(name: &str, options: ControlPlaneOptions) -> Result<Self, StartError> {
        let data = tempfile::Builder::new()
            .prefix(&format!("ferry-{name}-"))
            .tempdir()
            .map_err(|source| StartError::Io {
                action: "creating a data directory".into(),
                source,
            })?;
        let started = Instant::now();
        let (child, stdin, info) = spawn(name, data.path(), &options, None).await?;
        Ok(Self {
            name: name.to_string(),
            info,
            startup: started.elapsed(),
            options,
            child,
            stdin,
            data,
        })
    }

    /// Kills the process at once (SIGKILL, as a crash would), keeping its
    /// data directory so that [`ControlPlane::start_again`] can bring the
    /// same cluster back. Clients see connection errors until then.
    pub async fn kill(&mut self) {
        self.stdin.take();
        // An error means the process is already gone, which is what we want.
        let _ = self.child.kill().await;
    }

    /// Starts the control plane again on its data directory and on the
    /// ports it had, so existing clients (same URL, CA and token) work
    /// again once it is ready; kills the old process first if it still runs.
    ///
    /// Fails as [`ControlPlane::start`] does, also when another process
    /// took one of its ports in the meantime.
    pub async fn start_again(&mut self) -> Result<(), StartError> {
        self.kill().await;
        let ports = Ports::of(&self.info).ok_or_else(|| StartError::NotReady {
            name: self.name.clone(),
            why: format!(
                "its first start reported no usable ports (server {})",
                self.info.server
            ),
            log_tail: String::new(),
        })?;
        let started = Instant::now();
        let (child, stdin, info) =
            spawn(&self.name, self.data.path(), &self.options, Some(ports)).await?;
        self.child = child;
        self.stdin = stdin;
        self.info = info;
        self.startup = started.elapsed();
        Ok(())
    }

    /// A client with admin rights on this control plane.
    pub async fn client(&self) -> Result<Client, StartError> {
        self.client_impersonating(None).await
    }

    /// A client acting as `user` (in group `system:authenticated`), which has
    /// exactly the rights RBAC grants that user: the admin impersonates it.
    pub async fn client_as(&self, user: &str) -> Result<Client, StartError> {
        self.client_impersonating(Some((user, "system:authenticated")))
            .await
    }

    /// A client acting as `user` in group `system:masters`: every right at
    /// once, with no binding to wait for, for checks that care who the
    /// user is (an admission policy reading the user name), not what RBAC
    /// grants it.
    pub async fn admin_client_as(&self, user: &str) -> Result<Client, StartError> {
        self.client_impersonating(Some((user, "system:masters")))
            .await
    }

    /// A client impersonating (user, group) in `system:authenticated` too,
    /// or the admin itself.
    async fn client_impersonating(&self, user: Option<(&str, &str)>) -> Result<Client, StartError> {
        let wrap = |source: Box<dyn std::error::Error + Send + Sync>| StartError::Kubeconfig {
            name: self.name.clone(),
            source,
        };
        let kubeconfig =
            Kubeconfig::read_from(&self.info.kubeconfig).map_err(|e| wrap(e.into()))?;
        let mut config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .map_err(|e| wrap(e.into()))?;
        if let Some((user, group)) = user {
            config.auth_info.impersonate = Some(user.to_string());
            let mut groups = vec!["system:authenticated".to_string()];
            if group != "system:authenticated" {
                groups.push(group.to_string());
            }
            config.auth_info.impersonate_groups = Some(groups);
        }
        Client::try_from(config).map_err(|e| wrap(e.into()))
    }

    /// The process id, e.g. to read its memory use.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Stops it cleanly: closes stdin, waits, and kills it if it lingers.
    pub async fn stop(mut self) {
        self.stdin.take();
        if tokio::time::timeout(STOP_TIMEOUT, self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

/// The ports a restarted control plane must listen on again.
#[derive(Debug, Clone, Copy)]
struct Ports {
    apiserver: u16,
    etcd_client: u16,
}

impl Ports {
    fn of(info: &ReadyInfo) -> Option<Self> {
        let apiserver = info.server.rsplit_once(':')?.1.parse().ok()?;
        (info.etcd_client_port != 0).then_some(Self {
            apiserver,
            etcd_client: info.etcd_client_port,
        })
    }
}

/// Runs the binary on `data_dir` and waits for its ready line. With `ports`,
/// it listens where it did before; etcd's peer port may change, which a
/// single-member etcd does not mind.
async fn spawn(
    name: &str,
    data_dir: &Path,
    options: &ControlPlaneOptions,
    ports: Option<Ports>,
) -> Result<(Child, Option<ChildStdin>, ReadyInfo), StartError> {
    let binary = tokio::task::spawn_blocking(ensure_controlplane_binary)
        .await
        .map_err(|e| StartError::Io {
            action: "joining the build task".into(),
            source: std::io::Error::other(e),
        })??;
    let log_path = data_dir.join("controlplane.log");
    // Appending keeps the log of earlier runs when it is restarted.
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .map_err(|source| StartError::Io {
            action: format!("opening {}", log_path.display()),
            source,
        })?;
    let mut command = Command::new(&binary);
    command
        .arg("--data-dir")
        .arg(data_dir)
        .args(["--name", name, "--exit-on-stdin-close"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(log))
        .kill_on_drop(true);
    if options.audit {
        command.arg("--audit-log").arg(data_dir.join("audit.log"));
    }
    if options.without_watch_cache {
        command.arg("--watch-cache=false");
    }
    if let Some(ports) = ports {
        command
            .arg("--apiserver-port")
            .arg(ports.apiserver.to_string())
            .arg("--etcd-client-port")
            .arg(ports.etcd_client.to_string());
    }
    let mut child = command.spawn().map_err(|source| StartError::Io {
        action: format!("starting {}", binary.display()),
        source,
    })?;
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let not_ready = |why: String| StartError::NotReady {
        name: name.to_string(),
        why,
        log_tail: log_tail(&log_path),
    };
    let Some(stdout) = stdout else {
        return Err(not_ready("no stdout".into()));
    };
    let mut lines = BufReader::new(stdout).lines();
    let ready = tokio::time::timeout(START_TIMEOUT, async {
        while let Some(line) = lines.next_line().await.map_err(|e| e.to_string())? {
            if let Some(json) = line.strip_prefix(READY_PREFIX) {
                return serde_json::from_str::<ReadyInfo>(json).map_err(|e| e.to_string());
            }
        }
        Err("it exited".to_string())
    })
    .await;
    let info = match ready {
        Ok(Ok(info)) => info,
        Ok(Err(why)) => return Err(not_ready(why)),
        Err(_) => return Err(not_ready(format!("no ready line within {START_TIMEOUT:?}"))),
    };
    // Keep draining stdout so the child never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok((child, stdin, info))
}

fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}
