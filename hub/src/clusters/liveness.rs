//! `ManagedCluster` status: whether the cluster's agent holds a session,
//! its version, and which replica serves it. The replica serving the agent
//! writes it when the session begins and ends, and nothing in between: its
//! replica Lease ([`super::replica_lease`]) vouches for its sessions. The
//! leader sweeps for clusters whose serving replica's Lease lapsed (a
//! crashed replica, a replica cut off from its API server), so status stays
//! right whichever replica fails.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Client, ResourceExt};
use prometheus_client::metrics::gauge::Gauge;
use serde_json::json;
use tokio::sync::{Mutex, watch};
use tracing::{debug, info, warn};

use ferry_semantics::contract::KUBE_TIME_FORMAT;

use crate::store_ready::StoresReady;
use crate::watch::backed_off_watch;

use super::agent_report::AgentReport;
use super::replica_lease::{REPLICA_LEASE_PREFIX, ReplicaLease, vouches_at, vouches_until};
use ferry_api::managed_cluster::{DeletionBrakeStatus, ManagedCluster};

/// A released or lapsed replica Lease is deleted once it has named no
/// connected cluster for this long past its end: by then its replica is
/// gone, and a restarted replica is a new identity with a new Lease.
const LAPSED_LEASE_KEPT: SignedDuration = SignedDuration::from_secs(3600);

/// A session's end is read and written again this often when another
/// change to its ManagedCluster lands in between.
const DISCONNECT_ATTEMPTS: usize = 5;

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
    time_text(Timestamp::now())
}

fn time_text(time: Timestamp) -> String {
    time.strftime(KUBE_TIME_FORMAT).to_string()
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

/// A session this replica recorded as connected: its id and what its
/// agent reported.
type HeldSession = (String, AgentReport);

/// A connected write in flight: its session id and when it lands.
type ConnectInFlight = (String, watch::Receiver<bool>);

/// Writes ManagedCluster liveness.
#[derive(Clone)]
pub struct ClusterLiveness {
    api: Api<ManagedCluster>,
    leases: Api<Lease>,
    /// This replica's identity, written as `servedBy`.
    identity: String,
    /// The sessions this replica recorded as connected, by cluster: written
    /// again when the replica's Lease is held again after lapsing, since
    /// the sweep may have marked them disconnected meanwhile. One entry per
    /// authenticated cluster with a session here.
    held: Arc<Mutex<HashMap<String, HeldSession>>>,
    /// The connected write in flight per cluster (its session and when it
    /// lands): a later session's write waits for it. One entry per
    /// authenticated cluster connecting now.
    connecting: Arc<Mutex<HashMap<String, ConnectInFlight>>>,
    /// Filled by each sweep, which reads every ManagedCluster anyway: live
    /// sessions of a cluster that turns up here have their token reviewed
    /// at once instead of at the next review interval.
    not_accepted: watch::Sender<NotAccepted>,
    /// Set by each sweep: the accepted clusters whose agent is not
    /// connected ([`disconnected_accepted`]).
    disconnected: Gauge,
    /// Set by each sweep: the clusters whose agent's deletion brake holds
    /// deletions.
    deletions_held: Gauge,
}

/// How many of `clusters` the hub accepts yet hold no connected agent, once
/// the sweep has marked those in `marked` disconnected.
pub fn disconnected_accepted(clusters: &[Arc<ManagedCluster>], marked: &BTreeSet<String>) -> usize {
    clusters
        .iter()
        .filter(|c| c.spec.hub_accepts_client)
        .filter(|c| {
            !c.status.as_ref().is_some_and(|s| s.connected) || marked.contains(&c.name_any())
        })
        .count()
}

impl ClusterLiveness {
    /// Writes through `client`, naming `replica` as the server of the
    /// sessions it records; reads replica Leases in `replica`'s namespace.
    pub fn new(client: Client, replica: &ReplicaLease) -> Self {
        Self {
            api: Api::all(client.clone()),
            leases: Api::namespaced(client, &replica.namespace),
            identity: replica.identity.clone(),
            held: Arc::default(),
            connecting: Arc::default(),
            not_accepted: watch::Sender::new(NotAccepted::default()),
            disconnected: Gauge::default(),
            deletions_held: Gauge::default(),
        }
    }

    /// Sets `gauge` to the accepted clusters not connected at each sweep
    /// (and to 0 when the sweeper stops: another replica sweeps then).
    pub fn with_disconnected_gauge(mut self, gauge: Gauge) -> Self {
        self.disconnected = gauge;
        self
    }

    /// Sets `gauge` to the clusters whose agent's deletion brake holds
    /// deletions at each sweep (and to 0 when the sweeper stops).
    pub fn with_deletions_held_gauge(mut self, gauge: Gauge) -> Self {
        self.deletions_held = gauge;
        self
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

    /// Records session `session` of `cluster`'s agent, which said `report`,
    /// opened on this replica, without making the session wait for the
    /// write: an agent is served as soon as it is authenticated, so a fleet
    /// connecting at once is not held to the API server's write rate. The
    /// write is made in the background, after any earlier session's of the
    /// same cluster (so the latest session's lands last); a failed write
    /// is logged, and the next session or sweep writes again.
    /// [`Self::disconnected`] of the session waits for it, so a session's
    /// end is never overwritten by its own start.
    pub async fn connecting(&self, cluster: &str, session: &str, report: &AgentReport) {
        let (landed, recorded) = watch::channel(false);
        let earlier = self
            .connecting
            .lock()
            .await
            .insert(cluster.to_string(), (session.to_string(), recorded.clone()));
        let this = self.clone();
        let (cluster, session, report) = (cluster.to_string(), session.to_string(), report.clone());
        tokio::spawn(async move {
            if let Some((_, mut earlier)) = earlier {
                let _ = earlier.wait_for(|landed| *landed).await;
            }
            if let Err(error) = this.connected(&cluster, &session, &report).await {
                warn!(%cluster, %error, "cannot record the agent as connected");
            }
            landed.send_replace(true);
            let mut in_flight = this.connecting.lock().await;
            if in_flight.get(&cluster).is_some_and(|(s, _)| *s == session) {
                in_flight.remove(&cluster);
            }
        });
    }

    /// A session `session` of `cluster`'s agent, which said `report`, opened
    /// on this replica.
    async fn connected(
        &self,
        cluster: &str,
        session: &str,
        report: &AgentReport,
    ) -> Result<(), LivenessError> {
        self.held
            .lock()
            .await
            .insert(cluster.to_string(), (session.to_string(), report.clone()));
        self.write_connected(cluster, session, report).await
    }

    async fn write_connected(
        &self,
        cluster: &str,
        session: &str,
        report: &AgentReport,
    ) -> Result<(), LivenessError> {
        let mut status = json!({
            "connected": true,
            "agentVersion": report.agent_version,
            "lastSeenTime": now_text(),
            "sessionId": session,
            "servedBy": self.identity,
            "disconnectReason": null,
            // The session's agent reports its brake again at once.
            "deletionBrake": null,
            // What the agent holds now: a list a merge patch replaces whole.
            "sealingKeys": report.sealing_keys,
        });
        // An agent that could not read its spoke's version leaves the last
        // one known in place.
        if !report.kubernetes_version.is_empty() {
            status["version"] = json!({ "kubernetes": report.kubernetes_version });
        }
        self.patch_status(cluster, "marking connected", status)
            .await
    }

    /// Writes `cluster` as connected again when it names a session this
    /// replica holds yet no longer says so: the leader's sweep marked it
    /// disconnected while this replica's Lease had lapsed (an API server
    /// outage), and the session lived on. Returns whether it wrote.
    pub async fn reassert(&self, cluster: &ManagedCluster) -> Result<bool, LivenessError> {
        let name = cluster.name_any();
        let Some((session, report)) = self.held.lock().await.get(&name).cloned() else {
            return Ok(false);
        };
        let status = cluster.status.clone().unwrap_or_default();
        if status.session_id != session || (status.connected && status.served_by == self.identity) {
            return Ok(false);
        }
        self.write_connected(&name, &session, &report).await?;
        Ok(true)
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

    /// Waits until session `session`'s connected write has landed, if it is
    /// still in flight.
    async fn connected_write_landed(&self, cluster: &str, session: &str) {
        let in_flight = self
            .connecting
            .lock()
            .await
            .get(cluster)
            .filter(|(s, _)| s == session)
            .map(|(_, landed)| landed.clone());
        if let Some(mut landed) = in_flight {
            let _ = landed.wait_for(|landed| *landed).await;
        }
    }

    /// Records what `cluster`'s agent's deletion brake holds, as session
    /// `session` reported it (None: nothing). Written after the session's
    /// connected write, only while the status describes that session, and
    /// guarded by the resourceVersion read, so an ended session never
    /// overwrites a newer one's report; nothing is written when the status
    /// already says so.
    pub async fn deletion_brake(
        &self,
        cluster: &str,
        session: &str,
        report: Option<&DeletionBrakeStatus>,
    ) -> Result<(), LivenessError> {
        self.connected_write_landed(cluster, session).await;
        for _ in 0..DISCONNECT_ATTEMPTS {
            let Some(current) = self.read(cluster).await? else {
                return Ok(());
            };
            let status = current.status.clone().unwrap_or_default();
            if status.session_id != session || status.deletion_brake.as_ref() == report {
                return Ok(());
            }
            // Every key named (null deletes), as a merge patch keeps what
            // it does not name.
            let report = report.map(|r| {
                let text = |t: &str| (!t.is_empty()).then(|| t.to_string());
                json!({
                    "heldWorks": r.held_works,
                    "heldObjects": r.held_objects,
                    "since": text(&r.since),
                    "release": text(&r.release),
                    "ledgerNamespace": text(&r.ledger_namespace),
                })
            });
            let patch = json!({
                "metadata": { "resourceVersion": current.resource_version() },
                "status": { "deletionBrake": report },
            });
            match self
                .api
                .patch_status(cluster, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => return Ok(()),
                Err(kube::Error::Api(e)) if e.code == 404 => return Ok(()),
                Err(kube::Error::Api(e)) if e.code == 409 => continue,
                Err(source) => {
                    return Err(LivenessError::Write {
                        action: "recording the deletion brake of",
                        cluster: cluster.to_string(),
                        source,
                    });
                }
            }
        }
        warn!(%cluster, session, "the deletion brake report lost to concurrent changes {DISCONNECT_ATTEMPTS} times; left to the next report");
        Ok(())
    }

    /// Session `session` of `cluster` ended for `reason`; the agent was
    /// last heard at `last_heard`. Written only when the status still
    /// describes that session: the agent may already hold a newer one, here
    /// or on another replica, whose status must stand. Made after the
    /// session's own connected write ([`Self::connecting`]) has landed.
    pub async fn disconnected(
        &self,
        cluster: &str,
        session: &str,
        reason: &str,
        last_heard: Timestamp,
    ) -> Result<(), LivenessError> {
        // This session's connected write, if still in flight, lands first.
        self.connected_write_landed(cluster, session).await;
        {
            let mut held = self.held.lock().await;
            if held.get(cluster).is_some_and(|(s, _)| s == session) {
                held.remove(cluster);
            }
        }
        // Read and written with its resourceVersion, so a reconnect in
        // between wins; any other change in between (a taint, a label) is
        // read again, or the disconnect would be lost for good (the replica's
        // Lease still vouches for the cluster).
        for _ in 0..DISCONNECT_ATTEMPTS {
            let Some(current) = self.read(cluster).await? else {
                return Ok(());
            };
            let status = current.status.clone().unwrap_or_default();
            if status.session_id != session {
                return Ok(());
            }
            if self.mark_disconnected(&current, reason, last_heard).await? {
                return Ok(());
            }
        }
        warn!(%cluster, session, "the disconnect lost to concurrent changes {DISCONNECT_ATTEMPTS} times; left to the next session");
        Ok(())
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
        last_heard: Timestamp,
    ) -> Result<bool, LivenessError> {
        // The resourceVersion makes a concurrent change win over this write;
        // false then (the caller reads again, or the next sweep does).
        let patch = json!({
            "metadata": { "resourceVersion": cluster.resource_version() },
            "status": {
                "connected": false,
                "disconnectReason": reason,
                "lastSeenTime": time_text(last_heard),
                "servedBy": null,
            },
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
            Ok(_) => Ok(true),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(true),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
            Err(source) => Err(LivenessError::Write {
                action: "marking disconnected",
                cluster: cluster.name_any(),
                source,
            }),
        }
    }

    /// Marks disconnected every connected cluster of `clusters` whose
    /// serving replica's Lease no longer vouches for it (and, for a cluster
    /// written by an older hub that names no replica, one not heard from
    /// within `limit`); publishes the clusters not accepted; deletes replica
    /// Leases long released or lapsed. Returns how many clusters were
    /// marked; fails when the Leases cannot be read (then nothing is
    /// marked) or a mark is refused for another reason than a newer write.
    ///
    /// `clusters` is the replica's watch-fed cache, not a fresh list: a
    /// LIST of every ManagedCluster per heartbeat cost the API server about
    /// 1 KB per cluster every 10 s (100 MB per sweep at 100,000 clusters).
    /// A stale entry is harmless: each mark is guarded by the resourceVersion
    /// it was read at, so a cluster written since wins and the next sweep
    /// sees it.
    pub async fn sweep(
        &self,
        clusters: &[Arc<ManagedCluster>],
        limit: Duration,
    ) -> Result<usize, LivenessError> {
        let not_accepted: BTreeSet<String> = clusters
            .iter()
            .filter(|c| !c.spec.hub_accepts_client)
            .map(|c| c.name_any())
            .collect();
        // Sent on every sweep, changed or not: a cluster accepted and denied
        // again between two sweeps leaves the set as it was, yet its new
        // session must end.
        self.not_accepted.send_replace(Arc::new(not_accepted));
        let leases: BTreeMap<String, Lease> = self
            .leases
            .list(&Default::default())
            .await
            .map_err(|source| LivenessError::Write {
                action: "listing replica Leases for",
                cluster: "*".into(),
                source,
            })?
            .items
            .into_iter()
            .filter_map(|l| {
                let identity = l.name_any().strip_prefix(REPLICA_LEASE_PREFIX)?.to_string();
                Some((identity, l))
            })
            .collect();
        let now = Timestamp::now();
        let mut marked = 0;
        let mut marked_names: BTreeSet<String> = BTreeSet::new();
        let mut named: BTreeSet<String> = BTreeSet::new();
        for cluster in clusters {
            let status = cluster.status.clone().unwrap_or_default();
            if !status.connected {
                continue;
            }
            if status.served_by.is_empty() {
                if is_silent(&status.last_seen_time, now, limit) {
                    let reason = format!("no heartbeat for more than {} s", limit.as_secs());
                    let heard = status.last_seen_time.parse().unwrap_or(now);
                    // Lost to a concurrent change: the next sweep sees it.
                    if self.mark_disconnected(cluster, &reason, heard).await? {
                        marked += 1;
                        marked_names.insert(cluster.name_any());
                    }
                }
                continue;
            }
            let lease = leases.get(&status.served_by);
            if lease.is_some_and(|l| vouches_at(l, now)) {
                named.insert(status.served_by.clone());
                continue;
            }
            let reason = format!(
                "hub replica {} stopped renewing its Lease",
                status.served_by
            );
            let heard = lease.and_then(vouches_until).unwrap_or(now).min(now);
            if self.mark_disconnected(cluster, &reason, heard).await? {
                marked += 1;
                marked_names.insert(cluster.name_any());
            }
        }
        let disconnected = disconnected_accepted(clusters, &marked_names);
        self.disconnected
            .set(i64::try_from(disconnected).unwrap_or(i64::MAX));
        let held = clusters
            .iter()
            .filter(|c| {
                c.status
                    .as_ref()
                    .and_then(|s| s.deletion_brake.as_ref())
                    .is_some_and(|b| b.held_works > 0)
            })
            .count();
        self.deletions_held
            .set(i64::try_from(held).unwrap_or(i64::MAX));
        for (identity, lease) in &leases {
            if identity == &self.identity || named.contains(identity) || vouches_at(lease, now) {
                continue;
            }
            let ended = vouches_until(lease)
                .or_else(|| lease.metadata.creation_timestamp.as_ref().map(|t| t.0))
                .unwrap_or(now);
            if now.duration_since(ended) > LAPSED_LEASE_KEPT {
                match self
                    .leases
                    .delete(&lease.name_any(), &DeleteParams::default())
                    .await
                {
                    Ok(_) => info!(replica = %identity, "deleted a lapsed replica Lease"),
                    Err(error) => {
                        debug!(replica = %identity, %error, "cannot delete a lapsed replica Lease")
                    }
                }
            }
        }
        Ok(marked)
    }
}

/// Watches ManagedClusters and writes again, as connected, those naming a
/// session this replica holds that were marked disconnected (see
/// [`ClusterLiveness::reassert`]), until `shutdown`. Keeps the clusters
/// (without `managedFields`) in `cache`, the replica's shared copy that
/// agent authentication reads, and shows `on_event` every event (after the
/// cache took it); watch errors are retried with backoff.
pub async fn reassert_held_sessions(
    liveness: ClusterLiveness,
    cache: reflector::store::Writer<ManagedCluster>,
    on_event: impl Fn(&watcher::Event<ManagedCluster>),
    shutdown: impl std::future::Future<Output = ()>,
) {
    let reasserting = async {
        // Boxed as it is built: the watcher's state is large, and a debug
        // build that assembles the whole chain on the stack overflows it.
        let watch = Box::pin(backed_off_watch(
            liveness.api.clone(),
            watcher::Config::default(),
        ));
        let changes = Box::pin(
            watch
                .modify(|cluster| cluster.managed_fields_mut().clear())
                .reflect(cache),
        )
        .inspect_ok(|event| on_event(event))
        .applied_objects();
        futures::pin_mut!(changes);
        while let Some(change) = changes.next().await {
            match change {
                Ok(cluster) => match liveness.reassert(&cluster).await {
                    Ok(true) => {
                        info!(cluster = %cluster.name_any(), "marked disconnected while its session here lives; written as connected again")
                    }
                    Ok(false) => {}
                    Err(error) => warn!(%error, "cannot write a held session as connected again"),
                },
                Err(error) => debug!(%error, "ManagedCluster watch failed; retrying with backoff"),
            }
        }
    };
    tokio::select! {
        () = reasserting => {}
        () = shutdown => {}
    }
}

/// Sweeps every `every` until `shutdown`, marking clusters silent for longer
/// than `limit` as disconnected. Reads the clusters from `cache` (the
/// replica's ManagedCluster cache, which [`reassert_held_sessions`] keeps)
/// and sweeps only once `listed` says it has been listed (the cache's one
/// readiness, which connects wait on too): an empty cache before its first
/// list would publish that no cluster is refused.
pub async fn run_liveness_sweeper(
    liveness: ClusterLiveness,
    cache: reflector::Store<ManagedCluster>,
    listed: StoresReady,
    every: Duration,
    limit: Duration,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let mut ticker = tokio::time::interval(every);
    let sweeping = async {
        if listed.wait().await.is_err() {
            warn!("the ManagedCluster cache was dropped before its first list; no liveness sweeps");
            return std::future::pending().await;
        }
        loop {
            ticker.tick().await;
            match liveness.sweep(&cache.state(), limit).await {
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
    liveness.disconnected.set(0);
    liveness.deletions_held.set(0);
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_api::managed_cluster::{ManagedClusterSpec, ManagedClusterStatus};

    fn cluster(name: &str, accepted: bool, connected: bool) -> ManagedCluster {
        let mut cluster = ManagedCluster::new(
            name,
            ManagedClusterSpec {
                hub_accepts_client: accepted,
                ..Default::default()
            },
        );
        cluster.status = Some(ManagedClusterStatus {
            connected,
            ..Default::default()
        });
        cluster
    }

    #[test]
    fn accepted_clusters_not_connected_or_just_marked_count_as_disconnected() {
        let clusters = [
            cluster("up", true, true),
            cluster("down", true, false),
            cluster("refused", false, false),
            cluster("silent", true, true),
            ManagedCluster::new("never-seen", ManagedClusterSpec::default()),
        ]
        .map(Arc::new);
        let marked = BTreeSet::from(["silent".to_string()]);
        let never_seen_accepted = usize::from(ManagedClusterSpec::default().hub_accepts_client);
        assert_eq!(
            disconnected_accepted(&clusters, &marked),
            2 + never_seen_accepted
        );
        assert_eq!(disconnected_accepted(&clusters[..1], &BTreeSet::new()), 0);
    }

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
