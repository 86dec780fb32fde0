//! The order of each cluster's live agent sessions on this replica. Two
//! live sessions of one cluster (an agent rollout): the newer one's reports
//! win, so status delivery asks its session's ticket whether it is the newest
//! before writing.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::watch;

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
