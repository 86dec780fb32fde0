//! What each Hello tells the hub of the spoke: its Kubernetes version (for
//! the cluster's inventory entry) and the public halves of its sealing
//! keys (read again, and made or rotated when asked, at every session's
//! start). Neither may hold up a session: a spoke that does not answer in
//! time gives an empty version and the keys already held.

use std::time::Duration;

use ferry_proto::v1;
use tracing::warn;

use crate::reconcile::Reconciler;

/// How long a session's start waits for the spoke (its version, the key
/// Secret) before it says Hello with what it has: a spoke that is down
/// must not keep the agent from the hub.
const SPOKE_TIMEOUT: Duration = Duration::from_secs(3);
/// Longest version text sent (the hub bounds it too).
const MAX_VERSION: usize = 64;

/// The spoke's facts for a Hello.
pub struct SpokeFacts {
    /// The spoke API server's gitVersion; empty when it did not answer.
    pub kubernetes_version: String,
    /// The cluster's sealing keys, current first.
    pub sealing_keys: Vec<v1::SealingKey>,
}

/// Reads the spoke's version and refreshes the sealing keys, together,
/// for at most [`SPOKE_TIMEOUT`]. Never fails: what could not be read is
/// logged and left out (the keys already held are published).
pub async fn gather(reconciler: &Reconciler) -> SpokeFacts {
    let keyring = reconciler.keyring();
    let read = async { tokio::join!(reconciler.client().apiserver_version(), keyring.refresh()) };
    let kubernetes_version = match tokio::time::timeout(SPOKE_TIMEOUT, read).await {
        Ok((version, refreshed)) => {
            if let Err(error) = refreshed {
                warn!(%error, "cannot refresh the sealing keys; publishing those held");
            }
            match version {
                Ok(info) => info.git_version.chars().take(MAX_VERSION).collect(),
                Err(error) => {
                    warn!(%error, "cannot read the spoke's version");
                    String::new()
                }
            }
        }
        Err(_) => {
            warn!(timeout = ?SPOKE_TIMEOUT, "the spoke did not answer; saying Hello without its version, with the keys held");
            String::new()
        }
    };
    SpokeFacts {
        kubernetes_version,
        sealing_keys: keyring.published().await,
    }
}
