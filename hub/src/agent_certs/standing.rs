//! What certificate revocation reads, and whom it wakes: the replica's
//! watched ManagedClusters (the cache agent authentication already keeps)
//! and a metadata watch of the agent ServiceAccounts (their UIDs), plus a
//! wake-up per cluster with live certificate sessions, sent when either
//! watch changes that cluster. A certificate session waits on its wake-up
//! instead of calling the API server, so an idle fleet on certificates costs
//! the API server nothing, and a revocation ends a session as soon as the
//! watch delivers it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::TryStreamExt;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, ObjectMeta, PartialObjectMeta};
use kube::runtime::reflector::{ObjectRef, Store, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use tokio::sync::watch;
use tracing::debug;

use crate::agent_certs::error::IssueError;
use crate::agent_certs::presented::ClientCertificate;
use crate::agent_certs::revocation::{Revoked, rotated_at, standing};
use crate::agent_certs::subject::AgentSubject;
use crate::store_ready::{StoresReady, store_ready};
use crate::watch::watch_backoff;
use ferry_api::managed_cluster::ManagedCluster;

/// The agent ServiceAccounts as the hub sees them (metadata only).
pub type AccountCache = Store<PartialObjectMeta<ServiceAccount>>;

/// Revocation's view of the hub and the sessions waiting on it.
pub struct Standing {
    clusters: Store<ManagedCluster>,
    accounts: AccountCache,
    /// Both caches listed: every connect waits on it at once after a
    /// restart, so not on `Store::wait_until_ready` (one waker; see
    /// `crate::store_ready`).
    listed: StoresReady,
    service_account: String,
    /// Per cluster: live certificate sessions and their wake-up. Keyed by
    /// authenticated cluster names only, so it holds no more entries than
    /// the replica has sessions.
    wakes: Mutex<HashMap<String, (usize, watch::Sender<()>)>>,
}

impl std::fmt::Debug for Standing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Standing").finish_non_exhaustive()
    }
}

/// A live certificate session's wake-up; dropping it forgets the session.
pub struct Wake {
    standing: Arc<Standing>,
    cluster: String,
    /// Changes when the cluster's ManagedCluster or agent account does.
    pub changed: watch::Receiver<()>,
}

impl Drop for Wake {
    fn drop(&mut self) {
        let mut wakes = self.standing.lock();
        if let Some((sessions, _)) = wakes.get_mut(&self.cluster) {
            *sessions -= 1;
            if *sessions == 0 {
                wakes.remove(&self.cluster);
            }
        }
    }
}

impl Standing {
    /// Revocation reading `clusters` (listed once `clusters_listed` is:
    /// the replica's one readiness of that cache, which others wait on too)
    /// and `accounts` (the agent accounts, named `service_account`, kept by
    /// [`watch_agent_accounts`]).
    pub fn new(
        clusters: Store<ManagedCluster>,
        clusters_listed: &StoresReady,
        accounts: AccountCache,
        service_account: String,
    ) -> Arc<Self> {
        let listed = StoresReady::all(vec![
            clusters_listed.as_store_ready(),
            store_ready(&accounts),
        ]);
        Arc::new(Self {
            clusters,
            accounts,
            listed,
            service_account,
            wakes: Mutex::default(),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (usize, watch::Sender<()>)>> {
        // Every update is one statement: a poisoned map is still consistent.
        self.wakes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether both caches have been listed, waiting up to `wait`: before
    /// that an absent cluster or account says nothing.
    pub async fn ready(&self, wait: Duration) -> bool {
        tokio::time::timeout(wait, self.listed.wait())
            .await
            .is_ok_and(|listed| listed.is_ok())
    }

    fn account_uid(&self, cluster: &str) -> Option<String> {
        self.accounts
            .get(&ObjectRef::new(&self.service_account).within(cluster))
            .and_then(|account| account.uid())
    }

    /// Whether `cert` stands at `now` (Unix seconds) by the caches.
    pub fn check(&self, cert: &ClientCertificate, now: i64) -> Result<(), Revoked> {
        let cluster = self.clusters.get(&ObjectRef::new(&cert.subject.cluster));
        let account = self.account_uid(&cert.subject.cluster);
        standing(cert, cluster.as_deref(), account.as_deref(), now)
    }

    /// The subject a certificate for `cluster`'s agent is issued to, from
    /// the caches, and when its identity was last rotated (a certificate
    /// must be issued after that). Fails when they do not hold the cluster
    /// or its account yet (just joined).
    pub fn subject_for(&self, cluster: &str) -> Result<(AgentSubject, Option<i64>), IssueError> {
        let managed = self
            .clusters
            .get(&ObjectRef::new(cluster))
            .ok_or_else(|| IssueError::NotSeen(format!("ManagedCluster {cluster}")))?;
        let cluster_uid = managed
            .uid()
            .ok_or_else(|| IssueError::NotSeen(format!("ManagedCluster {cluster}")))?;
        let rotated = rotated_at(&managed);
        let account_uid = self.account_uid(cluster).ok_or_else(|| {
            IssueError::NotSeen(format!("ServiceAccount {cluster}/{}", self.service_account))
        })?;
        Ok((
            AgentSubject {
                cluster: cluster.to_string(),
                cluster_uid,
                account_uid,
            },
            rotated,
        ))
    }

    /// [`Self::subject_for`], waiting up to `wait` for the caches to hold
    /// the cluster and its account. A token session is let in on the API
    /// server's word (a read of the ManagedCluster when the cache does not
    /// hold it yet), so an agent that just joined asks before the watches
    /// have delivered its cluster: refusing it then would leave it on its
    /// token, re-reviewed on a pace, until its next session. Waits on the
    /// cluster's wake-up, which either watch sends after its cache took the
    /// change; fails as [`Self::subject_for`] does once `wait` is over.
    pub async fn subject_once_seen(
        self: &Arc<Self>,
        cluster: &str,
        wait: Duration,
    ) -> Result<(AgentSubject, Option<i64>), IssueError> {
        // Subscribed before the caches are read, so a change that lands
        // between the read and the wait still wakes it.
        let mut wake = self.wake_for(cluster);
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            match self.subject_for(cluster) {
                Err(IssueError::NotSeen(_)) => {}
                decided => return decided,
            }
            match tokio::time::timeout_at(deadline, wake.changed.changed()).await {
                Ok(Ok(())) => {}
                // Out of time, or the wake-up is gone (never while `wake`
                // is held): the caches' answer as it stands.
                Ok(Err(_)) | Err(_) => return self.subject_for(cluster),
            }
        }
    }

    /// A wake-up for a live certificate session of `cluster`.
    pub fn wake_for(self: &Arc<Self>, cluster: &str) -> Wake {
        let mut wakes = self.lock();
        let (sessions, sender) = wakes
            .entry(cluster.to_string())
            .or_insert_with(|| (0, watch::Sender::new(())));
        *sessions += 1;
        let changed = sender.subscribe();
        drop(wakes);
        Wake {
            standing: self.clone(),
            cluster: cluster.to_string(),
            changed,
        }
    }

    /// Wakes the certificate sessions of `cluster`, if any.
    pub fn touched(&self, cluster: &str) {
        if let Some((_, sender)) = self.lock().get(cluster) {
            sender.send_replace(());
        }
    }

    /// Wakes every certificate session (a watch listed afresh, and may have
    /// missed deletions while it was away).
    pub fn touched_all(&self) {
        for (_, sender) in self.lock().values() {
            sender.send_replace(());
        }
    }

    /// Wakes the sessions a ManagedCluster watch event concerns.
    pub fn cluster_event(&self, event: &watcher::Event<ManagedCluster>) {
        match event {
            watcher::Event::Apply(cluster) | watcher::Event::Delete(cluster) => {
                self.touched(&cluster.name_any());
            }
            watcher::Event::InitDone => self.touched_all(),
            watcher::Event::Init | watcher::Event::InitApply(_) => {}
        }
    }
}

/// Keeps `writer` filled with the metadata of every agent ServiceAccount
/// (named `service_account`, in any namespace) and wakes the certificate
/// sessions of the clusters whose account changes, until the stream ends
/// (never: errors are retried with backoff).
pub async fn watch_agent_accounts(
    client: Client,
    service_account: String,
    writer: Writer<PartialObjectMeta<ServiceAccount>>,
    standing: Arc<Standing>,
) {
    let config = watcher::Config::default().fields(&format!("metadata.name={service_account}"));
    // Boxed as it is built, so no debug build holds the chain on its stack.
    let watch = Box::pin(
        watcher(
            Api::<PartialObjectMeta<ServiceAccount>>::all(client),
            config,
        )
        .backoff(watch_backoff()),
    );
    // Revocation reads an account's UID and nothing else: the rest of its
    // metadata would cost every cluster a few hundred bytes for nothing.
    let events = watch
        .modify(|account| {
            let metadata = std::mem::take(&mut account.metadata);
            account.types = None;
            account.metadata = ObjectMeta {
                name: metadata.name,
                namespace: metadata.namespace,
                uid: metadata.uid,
                ..ObjectMeta::default()
            };
        })
        .reflect(writer);
    events
        .try_for_each(|event| {
            match &event {
                watcher::Event::Apply(account) | watcher::Event::Delete(account) => {
                    if let Some(namespace) = account.namespace() {
                        standing.touched(&namespace);
                    }
                }
                watcher::Event::InitDone => standing.touched_all(),
                watcher::Event::Init | watcher::Event::InitApply(_) => {}
            }
            futures::future::ok(())
        })
        .await
        .unwrap_or_else(|error| debug!(%error, "agent ServiceAccount watch ended"));
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::reflector;
    use kube::runtime::watcher::Event;

    use crate::store_ready::StoresReady;
    use ferry_api::managed_cluster::ManagedClusterSpec;

    fn account(cluster: &str) -> PartialObjectMeta<ServiceAccount> {
        PartialObjectMeta {
            types: None,
            metadata: ObjectMeta {
                name: Some("ferry-agent".into()),
                namespace: Some(cluster.into()),
                uid: Some(format!("account-{cluster}")),
                ..ObjectMeta::default()
            },
            _phantom: std::marker::PhantomData,
        }
    }

    fn cluster(name: &str) -> ManagedCluster {
        let mut cluster = ManagedCluster::new(name, ManagedClusterSpec::default());
        cluster.metadata.uid = Some(format!("cluster-{name}"));
        cluster
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_waits_for_the_watches_to_deliver_a_cluster_that_just_joined() {
        let (clusters, mut clusters_writer) = reflector::store::<ManagedCluster>();
        let (accounts, mut accounts_writer) =
            reflector::store::<PartialObjectMeta<ServiceAccount>>();
        let listed = StoresReady::all(vec![]);
        let standing = Standing::new(clusters, &listed, accounts, "ferry-agent".into());

        let asking = {
            let standing = standing.clone();
            tokio::spawn(async move {
                let start = tokio::time::Instant::now();
                let subject = standing
                    .subject_once_seen("east", Duration::from_secs(5))
                    .await;
                (subject, start.elapsed())
            })
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        // The cluster arrives first, its account later: each watch wakes
        // the request after its cache took the change.
        let joined = Event::Apply(cluster("east"));
        clusters_writer.apply_watcher_event(&joined);
        standing.cluster_event(&joined);
        tokio::time::sleep(Duration::from_millis(300)).await;
        accounts_writer.apply_watcher_event(&Event::Apply(account("east")));
        standing.touched("east");
        let (subject, waited) = asking.await.expect("no panic");
        let (subject, rotated) = subject.expect("issued once both caches hold it");
        assert_eq!(subject.cluster, "east");
        assert_eq!(subject.cluster_uid, "cluster-east");
        assert_eq!(subject.account_uid, "account-east");
        assert_eq!(rotated, None);
        assert_eq!(waited, Duration::from_millis(600), "woken, not polled");
        assert!(
            standing.lock().is_empty(),
            "the wait leaves no wake-up behind"
        );

        // A cluster the watches never deliver is refused once the wait is over.
        let start = tokio::time::Instant::now();
        assert!(matches!(
            standing
                .subject_once_seen("west", Duration::from_secs(5))
                .await,
            Err(IssueError::NotSeen(_))
        ));
        assert_eq!(start.elapsed(), Duration::from_secs(5));
    }
}
