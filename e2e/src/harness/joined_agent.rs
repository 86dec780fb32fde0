//! An agent run from what `ferry-hub join` wrote on its spoke, as the
//! ferry-agent chart runs it there: the hub Secret's token as a file (re-read
//! on every connection, as the mounted Secret is), its CA, hub URL and
//! cluster name. No kubelet runs in the test control planes, so the agent
//! runs in this process with the spoke's admin client.

use std::path::PathBuf;
use std::time::Duration;

use ferry_agent::session::{ClientTls, SessionConfig, TokenSource};
use ferry_agent::{AgentOptions, run_agent};
use ferry_hub::join::bundle::HubAccess;
use ferry_hub::join::spoke_side::{SpokeJoinError, read_hub_access};
use kube::Client;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The agent could not be started from the spoke Secret.
#[derive(Debug, thiserror::Error)]
pub enum JoinedAgentError {
    /// The spoke could not be read.
    #[error(transparent)]
    Read(#[from] SpokeJoinError),
    /// The spoke has no complete hub Secret.
    #[error("the spoke has no complete ferry-agent-hub Secret")]
    NoSecret,
    /// The token file could not be written.
    #[error("writing the token file: {0}")]
    Io(#[from] std::io::Error),
}

/// An agent running from the spoke's hub Secret.
pub struct JoinedAgent {
    /// What the Secret held when the agent started.
    pub access: HubAccess,
    token_file: PathBuf,
    _dir: tempfile::TempDir,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl JoinedAgent {
    /// Reads the hub Secret on `spoke` and runs an agent from it, with
    /// heartbeats every `heartbeat`. Fails when the Secret is absent or
    /// incomplete.
    pub async fn start(spoke: &Client, heartbeat: Duration) -> Result<Self, JoinedAgentError> {
        let access = read_hub_access(spoke, "the spoke")
            .await?
            .ok_or(JoinedAgentError::NoSecret)?;
        let dir = tempfile::Builder::new().prefix("ferry-joined-").tempdir()?;
        let token_file = dir.path().join("token");
        write_token(&token_file, &access.token).await?;
        let config = SessionConfig {
            hub_url: access.hub_url.clone(),
            cluster_name: access.cluster_name.clone(),
            heartbeat_interval: heartbeat,
            token: TokenSource::File(token_file.clone()),
            tls: (!access.ca_pem.is_empty()).then(|| ClientTls {
                ca_pem: access.ca_pem.clone(),
                identity: None,
            }),
        };
        let options = AgentOptions {
            shutdown_grace: Duration::from_secs(5),
            ..AgentOptions::default()
        };
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(run_agent(spoke.clone(), config, options, async {
            let _ = stopped.await;
        }));
        Ok(Self {
            access,
            token_file,
            _dir: dir,
            stop: Some(stop),
            task,
        })
    }

    /// Copies the token now in the spoke's hub Secret into the agent's token
    /// file, as the kubelet does for a mounted Secret; returns it. Fails when
    /// the Secret is absent or the file cannot be written.
    pub async fn refresh_token(&self, spoke: &Client) -> Result<String, JoinedAgentError> {
        let access = read_hub_access(spoke, "the spoke")
            .await?
            .ok_or(JoinedAgentError::NoSecret)?;
        write_token(&self.token_file, &access.token).await?;
        Ok(access.token)
    }

    /// Stops the agent and waits for it (aborting it after 10 s).
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if tokio::time::timeout(Duration::from_secs(10), &mut self.task)
            .await
            .is_err()
        {
            self.task.abort();
        }
    }
}

/// Writes `token` to `path` off the runtime's threads.
async fn write_token(path: &std::path::Path, token: &str) -> std::io::Result<()> {
    let (path, token) = (path.to_path_buf(), token.to_string());
    tokio::task::spawn_blocking(move || std::fs::write(path, token))
        .await
        .map_err(std::io::Error::other)?
}

impl Drop for JoinedAgent {
    fn drop(&mut self) {
        self.task.abort();
    }
}
