//! The latest status of every work, and which ones the hub has not seen yet.
//! Workers publish here; the hub connection drains it. Several reports of one
//! work between two drains collapse into the latest one, so a slow or absent
//! hub never makes the agent queue without bound. Each status is bounded as
//! it is published (`ferry_api::report_bounds`), so one work's report can
//! never be too large for the hub, which would end the session every other
//! work of the cluster reports through.

use std::collections::{HashMap, HashSet};

use ferry_api::report_bounds::{MAX_REPORT_BYTES, bound_report};
use ferry_proto::v1;
use tokio::sync::{Mutex, watch};
use tracing::debug;

/// Latest status per work UID plus the set not yet sent.
pub struct StatusBoard {
    inner: Mutex<Board>,
    changed: watch::Sender<u64>,
}

#[derive(Default)]
struct Board {
    latest: HashMap<String, v1::WorkStatus>,
    unsent: HashSet<String>,
}

impl Default for StatusBoard {
    fn default() -> Self {
        Self {
            inner: Mutex::new(Board::default()),
            changed: watch::Sender::new(0),
        }
    }
}

impl StatusBoard {
    /// Records `status` for `uid`, bounded to
    /// [`MAX_REPORT_BYTES`](ferry_api::report_bounds::MAX_REPORT_BYTES), and
    /// wakes the sender, unless it equals what was last published; returns
    /// whether it was new.
    pub async fn publish(&self, uid: &str, mut status: v1::WorkStatus) -> bool {
        let trimmed = bound_report(&mut status, MAX_REPORT_BYTES);
        if trimmed.any() {
            debug!(%uid, ?trimmed, "a work's report was bounded before sending");
        }
        let mut board = self.inner.lock().await;
        if board.latest.get(uid) == Some(&status) {
            return false;
        }
        board.latest.insert(uid.to_string(), status);
        board.unsent.insert(uid.to_string());
        drop(board);
        self.changed.send_modify(|v| *v = v.wrapping_add(1));
        true
    }

    /// The last published status of `uid`.
    pub async fn latest(&self, uid: &str) -> Option<v1::WorkStatus> {
        self.inner.lock().await.latest.get(uid).cloned()
    }

    /// Forgets a work the hub deleted.
    pub async fn remove(&self, uid: &str) {
        let mut board = self.inner.lock().await;
        board.latest.remove(uid);
        board.unsent.remove(uid);
    }

    /// Marks everything unsent, for a new hub connection.
    pub async fn mark_all_unsent(&self) {
        let mut board = self.inner.lock().await;
        let all: Vec<String> = board.latest.keys().cloned().collect();
        board.unsent.extend(all);
        drop(board);
        self.changed.send_modify(|v| *v = v.wrapping_add(1));
    }

    /// Takes the statuses not yet sent. A `gone` report is the last word on
    /// its work, so it leaves the board once taken.
    pub async fn take_unsent(&self) -> Vec<v1::WorkStatus> {
        let mut board = self.inner.lock().await;
        let unsent = std::mem::take(&mut board.unsent);
        let taken: Vec<v1::WorkStatus> = unsent
            .iter()
            .filter_map(|uid| board.latest.get(uid).cloned())
            .collect();
        board.latest.retain(|_, status| !status.gone);
        taken
    }

    /// Puts statuses back that could not be sent.
    pub async fn requeue(&self, statuses: &[v1::WorkStatus]) {
        let mut board = self.inner.lock().await;
        for s in statuses {
            if let Some(uid) = s.work.as_ref().map(|w| w.uid.clone()) {
                board.latest.entry(uid.clone()).or_insert_with(|| s.clone());
                board.unsent.insert(uid);
            }
        }
    }

    /// Wakes when something new is published.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(uid: &str, generation: i64) -> v1::WorkStatus {
        v1::WorkStatus {
            work: Some(v1::WorkRef {
                uid: uid.into(),
                ..Default::default()
            }),
            generation,
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn reports_between_drains_collapse_into_the_latest() {
        let board = StatusBoard::default();
        board.publish("a", status("a", 1)).await;
        board.publish("a", status("a", 2)).await;
        let sent = board.take_unsent().await;
        assert_eq!(sent, vec![status("a", 2)]);
        assert!(board.take_unsent().await.is_empty());
    }

    #[tokio::test]
    async fn a_gone_report_is_sent_once_and_requeued_if_the_send_fails() {
        let board = StatusBoard::default();
        let last = v1::WorkStatus {
            gone: true,
            ..status("a", 3)
        };
        board.publish("a", last.clone()).await;
        let sent = board.take_unsent().await;
        assert_eq!(sent, vec![last.clone()]);
        assert!(board.latest("a").await.is_none());
        board.requeue(&sent).await;
        assert_eq!(board.take_unsent().await, vec![last]);
        board.mark_all_unsent().await;
        assert!(board.take_unsent().await.is_empty());
    }

    #[tokio::test]
    async fn an_identical_report_is_not_sent_again() {
        let board = StatusBoard::default();
        board.publish("a", status("a", 1)).await;
        board.take_unsent().await;
        board.publish("a", status("a", 1)).await;
        assert!(board.take_unsent().await.is_empty());
        board.mark_all_unsent().await;
        assert_eq!(board.take_unsent().await.len(), 1);
    }
}
