//! The order of each cluster's live agent sessions on this replica. Two
//! live sessions of one cluster (an agent rollout): the newer one's reports
//! win, so status delivery asks its session's ticket whether it is the newest
//! before writing. At most [`MAX_LIVE_SESSIONS`] live at once: an older one
//! is told to end, so one agent token cannot pile up sessions.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::watch;

/// Live sessions of one cluster this replica keeps: the newest and the one
/// before (an agent being replaced); a session with this many newer ones
/// ends.
pub const MAX_LIVE_SESSIONS: usize = 2;

/// The live sessions of each cluster on this replica, in the order they
/// opened, so that the newest one's reports win.
#[derive(Default)]
pub struct SessionOrder {
    next: AtomicU64,
    live: watch::Sender<HashMap<String, BTreeSet<u64>>>,
}

impl SessionOrder {
    /// Enters a new session of `cluster`, after every one opened before; it
    /// leaves when the ticket is dropped.
    pub fn open(self: &Arc<Self>, cluster: &str) -> SessionTicket {
        let seq = self.next.fetch_add(1, Ordering::Relaxed);
        self.live.send_modify(|live| {
            live.entry(cluster.to_string()).or_default().insert(seq);
        });
        SessionTicket {
            order: self.clone(),
            cluster: cluster.to_string(),
            seq,
        }
    }
}

/// One session's place in its cluster's order; leaves it when dropped.
pub struct SessionTicket {
    order: Arc<SessionOrder>,
    cluster: String,
    seq: u64,
}

impl SessionTicket {
    /// Whether no newer session of the cluster is live.
    pub fn is_newest(&self) -> bool {
        self.order
            .live
            .borrow()
            .get(&self.cluster)
            .and_then(|seqs| seqs.last())
            == Some(&self.seq)
    }

    /// Returns once [`MAX_LIVE_SESSIONS`] newer sessions of the cluster are
    /// live: this one must end.
    pub async fn pushed_out(&self) {
        let mut live = self.order.live.subscribe();
        let _ = live
            .wait_for(|live| {
                live.get(&self.cluster)
                    .is_some_and(|seqs| seqs.range(self.seq + 1..).count() >= MAX_LIVE_SESSIONS)
            })
            .await;
    }

    /// Returns once no newer session of the cluster is live.
    pub async fn wait_newest(&self) {
        let mut live = self.order.live.subscribe();
        let _ = live
            .wait_for(|live| live.get(&self.cluster).and_then(|s| s.last()) == Some(&self.seq))
            .await;
    }
}

impl Drop for SessionTicket {
    fn drop(&mut self) {
        self.order.live.send_modify(|live| {
            if let Some(seqs) = live.get_mut(&self.cluster) {
                seqs.remove(&self.seq);
                if seqs.is_empty() {
                    live.remove(&self.cluster);
                }
            }
        });
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
}
