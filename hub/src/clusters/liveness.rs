//! `ManagedCluster` status: whether the cluster's agent holds a session, its
//! version, and when the hub last heard from it. The replica serving the
//! agent writes it; every replica sweeps for clusters whose agent went
//! silent without its session ending (a crashed replica, a dead network), so
//! status stays right whichever replica fails.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio::sync::watch;
use tracing::{debug, warn};

use ferry_semantics::contract::KUBE_TIME_FORMAT;

use ferry_api::managed_cluster::ManagedCluster;

/// A liveness write failed; sessions go on regardless.
#[derive(Debug, thiserror::Error)]
pub enum LivenessError {
    /// The API server refused the status write or could not be reached.
    #[error("{action} ManagedCluster {cluster}: {source}")]
    Write {
        /// What was being done.
        action: &'static str,
        /// Cluster name.
        cluster: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}

fn now_text() -> String {
    Timestamp::now().strftime(KUBE_TIME_FORMAT).to_string()
}

/// Whether a cluster marked connected was last seen longer than `limit` ago
/// (or at an unreadable time) at `now`.
pub fn is_silent(status_last_seen: &str, now: Timestamp, limit: Duration) -> bool {
    let Ok(seen) = status_last_seen.parse::<Timestamp>() else {
        return true;
    };
    let limit = SignedDuration::try_from(limit).unwrap_or(SignedDuration::MAX);
    now.duration_since(seen) > limit
}

/// Clusters whose ManagedCluster does not accept their agent, as of the
/// latest sweep.
pub type NotAccepted = Arc<BTreeSet<String>>;

/// Writes ManagedCluster liveness.
#[derive(Clone)]
pub struct ClusterLiveness {
    api: Api<ManagedCluster>,
    /// Filled by each sweep, which lists every ManagedCluster anyway: live
    /// sessions of a cluster that turns up here have their token reviewed
    /// at once instead of at the next review interval.
    not_accepted: watch::Sender<NotAccepted>,
}

impl ClusterLiveness {
    /// Writes through `client`.
    pub fn new(client: Client) -> Self {
        Self {
            api: Api::all(client),
            not_accepted: watch::Sender::new(NotAccepted::default()),
        }
    }

    /// The clusters not accepted as of the latest sweep; each sweep marks
    /// it changed.
    pub fn not_accepted(&self) -> watch::Receiver<NotAccepted> {
        self.not_accepted.subscribe()
    }

    async fn patch_status(
        &self,
        cluster: &str,
        action: &'static str,
        status: serde_json::Value,
    ) -> Result<(), LivenessError> {
        match self
            .api
            .patch_status(
                cluster,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": status })),
            )
            .await
        {
            Ok(_) => Ok(()),
            // No ManagedCluster for this name: nothing to keep up to date.
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            Err(source) => Err(LivenessError::Write {
                action,
                cluster: cluster.to_string(),
                source,
            }),
        }
    }

    /// A session `session` of `cluster`'s agent, at `agent_version`, opened.
    pub async fn connected(
        &self,
        cluster: &str,
        session: &str,
        agent_version: &str,
    ) -> Result<(), LivenessError> {
        let status = json!({
            "connected": true,
            "agentVersion": agent_version,
            "lastSeenTime": now_text(),
            "sessionId": session,
            "disconnectReason": null,
        });
        self.patch_status(cluster, "marking connected", status)
            .await
    }

    /// The agent of `cluster` was heard from just now.
    pub async fn seen(&self, cluster: &str) -> Result<(), LivenessError> {
        self.patch_status(
            cluster,
            "recording last seen of",
            json!({ "lastSeenTime": now_text() }),
        )
        .await
    }

    /// The ManagedCluster of `cluster`, if there is one.
    async fn read(&self, cluster: &str) -> Result<Option<ManagedCluster>, LivenessError> {
        self.api
            .get_opt(cluster)
            .await
            .map_err(|source| LivenessError::Write {
                action: "reading",
                cluster: cluster.to_string(),
                source,
            })
    }

    /// Session `session` of `cluster` ended for `reason`. Written only when
    /// the status still describes that session: the agent may already hold a
    /// newer one, here or on another replica, whose status must stand.
    pub async fn disconnected(
        &self,
        cluster: &str,
        session: &str,
        reason: &str,
    ) -> Result<(), LivenessError> {
        let current = self.read(cluster).await?;
        let Some(current) = current else {
            return Ok(());
        };
        let status = current.status.clone().unwrap_or_default();
        if status.session_id != session {
            return Ok(());
        }
        self.mark_disconnected(&current, reason).await
    }

    /// An agent of `cluster` was refused for `reason` before any session
    /// opened: the reason is recorded as `disconnectReason`, written only
    /// when it differs from the recorded one, so an agent retrying costs one
    /// read per attempt and no writes.
    pub async fn refused(&self, cluster: &str, reason: &str) -> Result<(), LivenessError> {
        let current = self.read(cluster).await?;
        let recorded = current
            .and_then(|c| c.status)
            .and_then(|s| s.disconnect_reason);
        if recorded.as_deref() == Some(reason) {
            return Ok(());
        }
        self.patch_status(
            cluster,
            "recording the refusal of",
            json!({ "disconnectReason": reason }),
        )
        .await
    }

    async fn mark_disconnected(
        &self,
        cluster: &ManagedCluster,
        reason: &str,
    ) -> Result<(), LivenessError> {
        // The resourceVersion makes a concurrent reconnect win over this write.
        let patch = json!({
            "metadata": { "resourceVersion": cluster.resource_version() },
            "status": { "connected": false, "disconnectReason": reason },
        });
        match self
            .api
            .patch_status(
                &cluster.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 || e.code == 404 => Ok(()),
            Err(source) => Err(LivenessError::Write {
                action: "marking disconnected",
                cluster: cluster.name_any(),
                source,
            }),
        }
    }

    /// Marks every connected cluster not heard from within `limit` as
    /// disconnected, and publishes the clusters not accepted.
    pub async fn sweep(&self, limit: Duration) -> Result<usize, LivenessError> {
        let clusters =
            self.api
                .list(&Default::default())
                .await
                .map_err(|source| LivenessError::Write {
                    action: "listing",
                    cluster: "*".into(),
                    source,
                })?;
        let not_accepted: BTreeSet<String> = clusters
            .items
            .iter()
            .filter(|c| !c.spec.hub_accepts_client)
            .map(|c| c.name_any())
            .collect();
        // Sent on every sweep, changed or not: a cluster accepted and denied
        // again between two sweeps leaves the set as it was, yet its new
        // session must end.
        self.not_accepted.send_replace(Arc::new(not_accepted));
        let now = Timestamp::now();
        let mut marked = 0;
        for cluster in clusters.items {
            let status = cluster.status.clone().unwrap_or_default();
            if status.connected && is_silent(&status.last_seen_time, now, limit) {
                let reason = format!("no heartbeat for more than {} s", limit.as_secs());
                self.mark_disconnected(&cluster, &reason).await?;
                marked += 1;
            }
        }
        Ok(marked)
    }
}

/// Sweeps every `every` until `shutdown`, marking clusters silent for longer
/// than `limit` as disconnected.
pub async fn run_liveness_sweeper(
    liveness: ClusterLiveness,
    every: Duration,
    limit: Duration,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let mut ticker = tokio::time::interval(every);
    let sweeping = async {
        loop {
            ticker.tick().await;
            match liveness.sweep(limit).await {
                Ok(0) => {}
                Ok(marked) => debug!(marked, "marked silent clusters disconnected"),
                Err(error) => warn!(%error, "liveness sweep failed"),
            }
        }
    };
    tokio::select! {
        () = sweeping => {}
        () = shutdown => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_seen_within_the_limit_is_not_silent() {
        let now: Timestamp = "2026-11-21T10:00:30Z".parse().expect("time");
        assert!(!is_silent(
            "2026-11-21T10:00:00Z",
            now,
            Duration::from_secs(31)
        ));
        assert!(is_silent(
            "2026-11-21T10:00:00Z",
            now,
            Duration::from_secs(29)
        ));
    }

    #[test]
    fn an_unreadable_last_seen_time_counts_as_silent() {
        assert!(is_silent(
            "yesterday",
            Timestamp::now(),
            Duration::from_secs(3600)
        ));
        assert!(is_silent("", Timestamp::now(), Duration::from_secs(3600)));
    }
}
