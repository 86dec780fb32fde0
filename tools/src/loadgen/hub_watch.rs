//! Watches every ManifestWork on the hub and records when each generation
//! was first shown `Applied=True` there: the hub side of a latency.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt};
use tokio::sync::Mutex;
use tokio::task::JoinHandle;

use ferry_api::manifest_work::ManifestWork;

use ferry_e2e::helpers::work_helpers::is_applied_at_current_generation;

/// (namespace, name) → (generation, when the hub first showed it Applied).
type Seen = Arc<Mutex<HashMap<(String, String), (i64, Instant)>>>;

/// Applied times seen by a running watch; the watch stops when this drops.
pub struct AppliedWatch {
    seen: Seen,
    task: JoinHandle<()>,
}

impl AppliedWatch {
    /// Starts watching every work `client` can list. Watch errors are
    /// retried by the watcher's own backoff.
    pub fn start(client: Client) -> Self {
        let seen: Seen = Arc::default();
        let record = seen.clone();
        let task = tokio::spawn(async move {
            let api: Api<ManifestWork> = Api::all(client);
            let events = kube::runtime::WatchStreamExt::default_backoff(watcher::watcher(
                api,
                watcher::Config::default(),
            ));
            futures::pin_mut!(events);
            while let Some(event) = events.next().await {
                let (Ok(Event::Apply(work)) | Ok(Event::InitApply(work))) = event else {
                    continue;
                };
                if !is_applied_at_current_generation(&work) {
                    continue;
                }
                let generation = work.metadata.generation.unwrap_or_default();
                let key = (work.namespace().unwrap_or_default(), work.name_any());
                let mut seen = record.lock().await;
                // The first time a generation shows Applied is what counts.
                if seen.get(&key).is_none_or(|(held, _)| *held < generation) {
                    seen.insert(key, (generation, Instant::now()));
                }
            }
        });
        Self { seen, task }
    }

    /// When the hub first showed work `namespace/name` Applied at
    /// `generation` or later.
    pub async fn applied(&self, namespace: &str, name: &str, generation: i64) -> Option<Instant> {
        self.seen
            .lock()
            .await
            .get(&(namespace.to_string(), name.to_string()))
            .filter(|(held, _)| *held >= generation)
            .map(|(_, at)| *at)
    }
}

impl Drop for AppliedWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}
