//! Watches a namespace of ManifestWorks (ferry's or OCM's: both keep the
//! `Applied` condition with `observedGeneration`) and tells when given works
//! are applied at given generations, without missing an event between a
//! write and the wait for it.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::runtime::watcher;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A wait for works ended without them being applied.
#[derive(Debug, thiserror::Error)]
pub enum ProgressError {
    /// Not every work reported Applied in time.
    #[error("{missing} of {wanted} works not applied at their generation within {timeout:?}")]
    Timeout {
        /// How many were still missing.
        missing: usize,
        /// How many were awaited.
        wanted: usize,
        /// How long was waited.
        timeout: Duration,
    },
    /// The watching task ended (its watch failed for good).
    #[error("the ManifestWork watch ended")]
    WatchEnded,
}

/// The generation at which `work` reports `Applied=True`, when its
/// condition's `observedGeneration` is the work's current generation.
pub fn applied_generation(work: &DynamicObject) -> Option<i64> {
    let generation = work.metadata.generation?;
    let conditions = work.data.pointer("/status/conditions")?.as_array()?;
    conditions
        .iter()
        .find(|c| c["type"] == "Applied")
        .filter(|c| c["status"] == "True")
        .and_then(|c| c["observedGeneration"].as_i64())
        .filter(|observed| *observed == generation)
}

/// The applied generation of every work seen, kept up to date by a watch.
pub struct Progress {
    state: watch::Receiver<HashMap<String, i64>>,
    task: JoinHandle<()>,
}

impl Progress {
    /// Starts watching `works`; returns once the watch has listed them, so
    /// writes made after this call are seen.
    pub async fn start(works: Api<DynamicObject>) -> Self {
        let (tx, state) = watch::channel(HashMap::new());
        let (listed_tx, listed) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(async move {
            let mut listed_tx = Some(listed_tx);
            let mut events = watcher(works, watcher::Config::default()).boxed();
            while let Some(event) = events.next().await {
                match event {
                    Ok(watcher::Event::Apply(work) | watcher::Event::InitApply(work)) => {
                        let name = work.metadata.name.clone().unwrap_or_default();
                        if let Some(generation) = applied_generation(&work) {
                            tx.send_modify(|m| {
                                m.insert(name, generation);
                            });
                        }
                    }
                    Ok(watcher::Event::InitDone) => {
                        if let Some(listed) = listed_tx.take() {
                            let _ = listed.send(());
                        }
                    }
                    Ok(_) => {}
                    // The watcher retries by itself; a failing step is logged.
                    Err(error) => tracing::warn!(%error, "ManifestWork watch"),
                }
            }
        });
        let _ = listed.await;
        Self { state, task }
    }

    /// Waits until every work in `wanted` is applied at least at its
    /// generation; returns when that was seen.
    pub async fn wait_for(
        &mut self,
        wanted: &HashMap<String, i64>,
        timeout: Duration,
    ) -> Result<Instant, ProgressError> {
        let done = |m: &HashMap<String, i64>| {
            wanted
                .iter()
                .all(|(name, generation)| m.get(name).is_some_and(|g| g >= generation))
        };
        let waited = tokio::time::timeout(timeout, self.state.wait_for(done))
            .await
            .map(|seen| seen.is_ok());
        match waited {
            Ok(true) => Ok(Instant::now()),
            Ok(false) => Err(ProgressError::WatchEnded),
            Err(_) => {
                let m = self.state.borrow();
                let missing = wanted
                    .iter()
                    .filter(|(name, generation)| m.get(*name).is_none_or(|g| g < *generation))
                    .count();
                Err(ProgressError::Timeout {
                    missing,
                    wanted: wanted.len(),
                    timeout,
                })
            }
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn work(generation: i64, observed: i64, status: &str) -> DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
            "metadata": {"name": "w", "generation": generation},
            "status": {"conditions": [{"type": "Applied", "status": status,
                "observedGeneration": observed}]}
        }))
        .expect("a work")
    }

    #[test]
    fn a_work_is_applied_only_at_its_current_generation() {
        assert_eq!(applied_generation(&work(2, 2, "True")), Some(2));
        assert_eq!(applied_generation(&work(3, 2, "True")), None);
        assert_eq!(applied_generation(&work(2, 2, "False")), None);
    }
}
