//! Watches the objects a work manages and wakes the work's worker when one of
//! them changes or disappears, so spoke drift is corrected within moments and
//! never by polling. One watch per object, narrowed by a name field selector.

use std::collections::HashMap;
use std::sync::Arc;

use futures::TryStreamExt;
use kube::api::{Api, DynamicObject};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tracing::debug;

/// One object a work manages, as the drift watch needs to find it.
#[derive(Clone)]
pub struct ManagedObject {
    /// Api handle scoped to the object's namespace (or cluster).
    pub api: Api<DynamicObject>,
    /// Stable key: `group/version/kind/namespace/name`.
    pub key: String,
    /// Object name.
    pub name: String,
}

/// The drift watches of one work.
pub struct DriftWatch {
    wake: Arc<Notify>,
    watches: HashMap<String, JoinHandle<()>>,
}

impl DriftWatch {
    /// Watches that wake `wake` on any change of a tracked object.
    pub fn new(wake: Arc<Notify>) -> Self {
        Self {
            wake,
            watches: HashMap::new(),
        }
    }

    /// Watches exactly `objects` from now on: starts watches for new ones and
    /// stops those no longer listed.
    pub fn track(&mut self, objects: &[ManagedObject]) {
        self.watches.retain(|key, task| {
            let keep = objects.iter().any(|o| &o.key == key);
            if !keep {
                task.abort();
            }
            keep
        });
        for object in objects {
            if self.watches.contains_key(&object.key) {
                continue;
            }
            let task = tokio::spawn(watch_one(object.clone(), self.wake.clone()));
            self.watches.insert(object.key.clone(), task);
        }
    }

    /// Number of objects watched.
    pub fn len(&self) -> usize {
        self.watches.len()
    }

    /// Whether nothing is watched.
    pub fn is_empty(&self) -> bool {
        self.watches.is_empty()
    }
}

impl Drop for DriftWatch {
    fn drop(&mut self) {
        for task in self.watches.values() {
            task.abort();
        }
    }
}

async fn watch_one(object: ManagedObject, wake: Arc<Notify>) {
    let config = watcher::Config::default().fields(&format!("metadata.name={}", object.name));
    let mut events = std::pin::pin!(watcher(object.api.clone(), config).default_backoff());
    let mut listed = false;
    loop {
        match events.try_next().await {
            Ok(Some(watcher::Event::Apply(_) | watcher::Event::Delete(_))) => wake.notify_one(),
            // A relist after the first one means events may have been missed.
            Ok(Some(watcher::Event::InitDone)) => {
                if listed {
                    wake.notify_one();
                }
                listed = true;
            }
            Ok(Some(_)) => {}
            Ok(None) => return,
            Err(error) => debug!(object = %object.key, %error, "drift watch error; retrying"),
        }
    }
}
