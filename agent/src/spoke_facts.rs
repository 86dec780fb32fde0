//! What each Hello tells the hub of the spoke: its Kubernetes version (for
//! the cluster's inventory entry) and the public halves of its sealing
//! keys (read again, and made or rotated when asked, at every session's
//! start). Neither may hold up a session: a spoke that does not answer in
//! time gives an empty version and the keys already held.

use std::time::Duration;

use ferry_proto::v1;
use tracing::warn;

use crate::reconcile::Reconciler;

/// How long a session's start waits for the spoke's version.
const VERSION_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest version text sent (the hub bounds it too).
const MAX_VERSION: usize = 64;

/// The spoke's facts for a Hello.
pub struct SpokeFacts {
    /// The spoke API server's gitVersion; empty when it did not answer.
    pub kubernetes_version: String,
    /// The cluster's sealing keys, current first.
    pub sealing_keys: Vec<v1::SealingKey>,
}

/// Reads the spoke's version and refreshes the sealing keys, together.
/// Never fails: what could not be read is logged and left out.
pub async fn gather(reconciler: &Reconciler) -> SpokeFacts {
    let keyring = reconciler.keyring();
    let (version, refreshed) = tokio::join!(
        tokio::time::timeout(VERSION_TIMEOUT, reconciler.client().apiserver_version()),
        keyring.refresh()
    );
    if let Err(error) = refreshed {
        warn!(%error, "cannot refresh the sealing keys; publishing those held");
    }
    let kubernetes_version = match version {
        Ok(Ok(info)) => info.git_version.chars().take(MAX_VERSION).collect(),
        Ok(Err(error)) => {
            warn!(%error, "cannot read the spoke's version");
            String::new()
        }
        Err(_) => String::new(),
    };
    SpokeFacts {
        kubernetes_version,
        sealing_keys: keyring.published().await,
    }
}
