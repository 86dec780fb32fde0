//! The order of each cluster's live agent sessions on this replica. Two
//! live sessions of one cluster (an agent rollout): the newer one's reports
//! win, so status delivery asks its session's ticket whether it is the newest
//! before writing. At most [`MAX_LIVE_SESSIONS`] live at once: an older one
//! is told to end, so one agent token cannot pile up sessions.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::watch;

/// Live sessions of one cluster this replica keeps: the newest and the one
/// before (an agent being replaced); a session with this many newer ones
/// ends.
pub const MAX_LIVE_SESSIONS: usize = 2;

/// The live sessions of one cluster, by the order they opened in.
type Live = watch::Sender<BTreeSet<u64>>;

/// The live sessions of each cluster on this replica, in the order they
/// opened, so that the newest one's reports win. One channel per cluster:
/// a session waits only on its own cluster's, so a session opening or
/// ending wakes the sessions of its cluster and no other (one channel for
/// all woke every session of the replica each time: at 10,000 agents
/// reconnecting, 50 million wake-ups, most of the hub's CPU).
#[derive(Default)]
pub struct SessionOrder {
    next: AtomicU64,
    clusters: Mutex<HashMap<String, Live>>,
}

impl SessionOrder {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Live>> {
        // Every update is one statement over the map: a panic elsewhere
        // while it was held leaves it consistent.
        self.clusters.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Enters a new session of `cluster`, after every one opened before; it
    /// leaves when the ticket is dropped.
    pub fn open(self: &Arc<Self>, cluster: &str) -> SessionTicket {
        let seq = self.next.fetch_add(1, Ordering::Relaxed);
        // Entered under the map's lock: a last ticket of the cluster
        // leaving meanwhile would otherwise drop the entry this joins.
        let mut clusters = self.lock();
        let live = clusters
            .entry(cluster.to_string())
            .or_insert_with(|| watch::Sender::new(BTreeSet::new()))
            .clone();
        live.send_modify(|seqs| {
            seqs.insert(seq);
        });
        drop(clusters);
        SessionTicket {
            order: self.clone(),
            cluster: cluster.to_string(),
            live,
            seq,
        }
    }
}

/// One session's place in its cluster's order; leaves it when dropped.
pub struct SessionTicket {
    order: Arc<SessionOrder>,
    cluster: String,
    live: Live,
    seq: u64,
}

impl SessionTicket {
    /// Whether no newer session of the cluster is live.
    pub fn is_newest(&self) -> bool {
        self.live.borrow().last() == Some(&self.seq)
    }

    /// Returns once [`MAX_LIVE_SESSIONS`] newer sessions of the cluster are
    /// live: this one must end.
    pub async fn pushed_out(&self) {
        let mut live = self.live.subscribe();
        let _ = live
            .wait_for(|seqs| seqs.range(self.seq + 1..).count() >= MAX_LIVE_SESSIONS)
            .await;
    }

    /// Returns once no newer session of the cluster is live.
    pub async fn wait_newest(&self) {
        let mut live = self.live.subscribe();
        let _ = live.wait_for(|seqs| seqs.last() == Some(&self.seq)).await;
    }
}

impl Drop for SessionTicket {
    fn drop(&mut self) {
        // Under the map's lock, so that no session of the cluster opens on
        // the channel while its entry goes.
        let mut clusters = self.order.lock();
        self.live.send_modify(|seqs| {
            seqs.remove(&self.seq);
        });
        if self.live.borrow().is_empty() {
            clusters.remove(&self.cluster);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_session_with_two_newer_ones_is_pushed_out_and_the_newest_wins() {
        let order = Arc::new(SessionOrder::default());
        let first = order.open("c");
        let second = order.open("c");
        assert!(second.is_newest() && !first.is_newest());
        let pushed = tokio::spawn(async move {
            first.pushed_out().await;
        });
        let third = order.open("c");
        tokio::time::timeout(std::time::Duration::from_secs(5), pushed)
            .await
            .expect("the oldest is pushed out")
            .expect("task");
        assert!(third.is_newest());
        // The second has only one newer session: it stays.
        let stays = tokio::time::timeout(std::time::Duration::from_millis(50), second.pushed_out());
        assert!(stays.await.is_err(), "one newer session does not push out");
        // Other clusters are not counted.
        let other = order.open("d");
        assert!(other.is_newest() && third.is_newest());
    }

    #[tokio::test]
    async fn a_cluster_whose_sessions_all_ended_is_forgotten_and_starts_afresh() {
        let order = Arc::new(SessionOrder::default());
        let a = order.open("a");
        let b = order.open("b");
        drop(a);
        assert_eq!(order.lock().len(), 1, "only b's cluster is kept");
        drop(b);
        assert!(order.lock().is_empty());
        let again = order.open("a");
        assert!(again.is_newest());
        // A session of another cluster opening does not touch this one's
        // channel: a waiter of it sees no change.
        let mut watched = again.live.subscribe();
        watched.mark_unchanged();
        let _other = order.open("b");
        assert!(
            !watched.has_changed().expect("open"),
            "woken by another cluster"
        );
        let _newer = order.open("a");
        assert!(watched.has_changed().expect("open"));
    }
}
