//! An in-memory index of ManifestWorks by cluster (the work's namespace), fed by
//! a kube watcher. Agent sessions read only their own cluster's slice and are
//! woken through a per-cluster `watch` channel, so a change in one cluster costs
//! nothing for sessions of the others and bursts of changes coalesce.

use std::collections::HashMap;
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use tokio::sync::{RwLock, watch};

use crate::manifest_work::ManifestWork;

/// Works of every cluster, keyed by cluster then work name.
#[derive(Default)]
pub struct WorkIndex {
    clusters: RwLock<HashMap<String, ClusterSlot>>,
    ready: watch::Sender<bool>,
}

struct ClusterSlot {
    works: HashMap<String, Arc<ManifestWork>>,
    changed: watch::Sender<u64>,
}

impl ClusterSlot {
    fn new() -> Self {
        Self {
            works: HashMap::new(),
            changed: watch::Sender::new(0),
        }
    }

    fn notify(&self) {
        self.changed.send_modify(|v| *v = v.wrapping_add(1));
    }
}

/// The watcher feeding the index ended with an error it does not retry.
#[derive(Debug, thiserror::Error)]
pub enum WorkIndexError {
    /// The ManifestWork watch failed permanently.
    #[error("watching ManifestWorks failed: {0}")]
    Watch(#[from] watcher::Error),
}

impl WorkIndex {
    /// An empty index that is not ready until its first full list arrives.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Waits until the first complete list of works is in the index; sessions
    /// must not diff against a half-filled index or they would delete works.
    pub async fn wait_ready(&self) {
        let mut ready = self.ready.subscribe();
        // The sender lives in self, so wait_for cannot fail while self exists.
        let _ = ready.wait_for(|r| *r).await;
    }

    /// Whether the first complete list has arrived.
    pub fn is_ready(&self) -> bool {
        *self.ready.borrow()
    }

    /// A receiver that changes whenever a work of `cluster` is added, changed
    /// or removed.
    pub async fn subscribe(&self, cluster: &str) -> watch::Receiver<u64> {
        let mut clusters = self.clusters.write().await;
        clusters
            .entry(cluster.to_string())
            .or_insert_with(ClusterSlot::new)
            .changed
            .subscribe()
    }

    /// The current works of `cluster`.
    pub async fn works_of(&self, cluster: &str) -> Vec<Arc<ManifestWork>> {
        let clusters = self.clusters.read().await;
        clusters
            .get(cluster)
            .map(|slot| slot.works.values().cloned().collect())
            .unwrap_or_default()
    }

    /// One work by cluster and name.
    pub async fn get(&self, cluster: &str, name: &str) -> Option<Arc<ManifestWork>> {
        let clusters = self.clusters.read().await;
        clusters.get(cluster)?.works.get(name).cloned()
    }

    async fn upsert(&self, work: ManifestWork) {
        let Some(cluster) = work.namespace() else {
            return;
        };
        let mut clusters = self.clusters.write().await;
        let slot = clusters.entry(cluster).or_insert_with(ClusterSlot::new);
        slot.works.insert(work.name_any(), Arc::new(work));
        slot.notify();
    }

    async fn remove(&self, work: &ManifestWork) {
        let Some(cluster) = work.namespace() else {
            return;
        };
        let mut clusters = self.clusters.write().await;
        if let Some(slot) = clusters.get_mut(&cluster)
            && slot.works.remove(&work.name_any()).is_some()
        {
            slot.notify();
        }
    }

    /// Replaces everything after a (re)list, waking only clusters whose set of
    /// works changed.
    async fn replace_all(&self, listed: Vec<ManifestWork>) {
        let mut fresh: HashMap<String, HashMap<String, Arc<ManifestWork>>> = HashMap::new();
        for work in listed {
            if let Some(cluster) = work.namespace() {
                fresh
                    .entry(cluster)
                    .or_default()
                    .insert(work.name_any(), Arc::new(work));
            }
        }
        let mut clusters = self.clusters.write().await;
        for (cluster, slot) in clusters.iter_mut() {
            let works = fresh.remove(cluster).unwrap_or_default();
            if !same_versions(&slot.works, &works) {
                slot.works = works;
                slot.notify();
            }
        }
        for (cluster, works) in fresh {
            let mut slot = ClusterSlot::new();
            slot.works = works;
            clusters.insert(cluster, slot);
        }
        drop(clusters);
        self.ready.send_replace(true);
    }

    /// Keeps the index in step with the API server until the watch fails
    /// permanently. Transient errors are retried with kube's default backoff.
    pub async fn run(self: Arc<Self>, api: Api<ManifestWork>) -> Result<(), WorkIndexError> {
        let mut events = watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        let mut relist: Vec<ManifestWork> = Vec::new();
        while let Some(event) = events.try_next().await? {
            match event {
                watcher::Event::Init => relist.clear(),
                watcher::Event::InitApply(work) => relist.push(work),
                watcher::Event::InitDone => self.replace_all(std::mem::take(&mut relist)).await,
                watcher::Event::Apply(work) => self.upsert(work).await,
                watcher::Event::Delete(work) => self.remove(&work).await,
            }
        }
        Ok(())
    }
}

fn same_versions(
    a: &HashMap<String, Arc<ManifestWork>>,
    b: &HashMap<String, Arc<ManifestWork>>,
) -> bool {
    a.len() == b.len()
        && a.iter().all(|(name, work)| {
            b.get(name)
                .is_some_and(|other| other.resource_version() == work.resource_version())
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest_work::ManifestWorkSpec;

    fn work(ns: &str, name: &str, rv: &str) -> ManifestWork {
        let mut w = ManifestWork::new(name, ManifestWorkSpec::default());
        w.metadata.namespace = Some(ns.into());
        w.metadata.resource_version = Some(rv.into());
        w
    }

    #[tokio::test]
    async fn a_change_wakes_only_the_cluster_it_belongs_to() {
        let index = WorkIndex::new();
        index.replace_all(vec![]).await;
        let mut a = index.subscribe("cluster-a").await;
        let mut b = index.subscribe("cluster-b").await;
        a.mark_unchanged();
        b.mark_unchanged();
        index.upsert(work("cluster-a", "w1", "1")).await;
        assert!(a.has_changed().expect("sender alive"));
        assert!(!b.has_changed().expect("sender alive"));
        assert_eq!(index.works_of("cluster-a").await.len(), 1);
        assert!(index.works_of("cluster-b").await.is_empty());
    }

    #[tokio::test]
    async fn a_relist_drops_works_that_vanished_and_wakes_their_cluster() {
        let index = WorkIndex::new();
        index
            .replace_all(vec![work("c", "w1", "1"), work("c", "w2", "1")])
            .await;
        let mut rx = index.subscribe("c").await;
        rx.mark_unchanged();
        index.replace_all(vec![work("c", "w1", "1")]).await;
        assert!(rx.has_changed().expect("sender alive"));
        assert!(index.get("c", "w2").await.is_none());
        rx.mark_unchanged();
        index.replace_all(vec![work("c", "w1", "1")]).await;
        assert!(!rx.has_changed().expect("sender alive"));
    }

    #[tokio::test]
    async fn the_index_is_not_ready_before_the_first_list() {
        let index = WorkIndex::new();
        assert!(!index.is_ready());
        index.replace_all(vec![]).await;
        assert!(index.is_ready());
        index.wait_ready().await;
    }
}
