//! The replica's one copy of every ManagedCluster, and the feed of its
//! changes that the leader's controllers are triggered by. One watch and
//! one cache per replica, whoever reads clusters: each controller that kept
//! its own cache decoded every cluster's every write once more and held
//! every cluster once more (at 10,000 clusters, three more copies and
//! 30,000 more decodes for one connect storm's connected writes).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use futures::Stream;
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;

use crate::store_ready::StoresReady;
use ferry_api::managed_cluster::ManagedCluster;

/// Changes held for a controller that has not taken them yet; one that falls
/// further behind is handed every cluster again instead (nothing is lost,
/// only repeated).
const FEED: usize = 1024;

/// What the cache's watch said, as the feed passes it on.
#[derive(Clone, Debug)]
enum Fed {
    /// A cluster was created or changed; the cache holds it.
    Applied(Arc<ManagedCluster>),
    /// A cluster was deleted; the cache no longer holds it.
    Deleted(Arc<ManagedCluster>),
    /// The watch listed every cluster again: clusters deleted meanwhile
    /// left the cache without an event.
    Relisted,
}

/// One change of a cluster, as a controller sees it.
#[derive(Clone, Debug)]
pub enum ClusterChange {
    /// Created or changed (or handed again after a re-list).
    Applied(Arc<ManagedCluster>),
    /// Deleted.
    Deleted(Arc<ManagedCluster>),
}

impl ClusterChange {
    /// The cluster, as it is now or as it was when deleted.
    pub fn cluster(&self) -> &Arc<ManagedCluster> {
        match self {
            Self::Applied(cluster) | Self::Deleted(cluster) => cluster,
        }
    }
}

/// The replica's ManagedCluster cache (kept by the watch in
/// [`crate::clusters::liveness::reassert_held_sessions`]), whether it has
/// listed, and its change feed. Cheap to clone.
#[derive(Clone)]
pub struct ClusterCache {
    /// Every ManagedCluster, without `managedFields`.
    pub store: Store<ManagedCluster>,
    /// The store's one readiness, which every waiter awaits.
    pub listed: StoresReady,
    feed: broadcast::Sender<Fed>,
}

impl ClusterCache {
    /// A feed for `store`, ready when `listed` is.
    pub fn new(store: Store<ManagedCluster>, listed: StoresReady) -> Self {
        let (feed, _) = broadcast::channel(FEED);
        Self {
            store,
            listed,
            feed,
        }
    }

    /// Passes on one event of the cache's watch, once the store has taken
    /// it. Never waits: a controller that is behind catches up later.
    pub fn publish(&self, event: &watcher::Event<ManagedCluster>) {
        let fed = match event {
            // The store's own copy: nothing is cloned for the feed.
            watcher::Event::Apply(cluster) => match self.store.get(&ObjectRef::from_obj(cluster)) {
                Some(cached) => Fed::Applied(cached),
                None => Fed::Applied(Arc::new(cluster.clone())),
            },
            watcher::Event::Delete(cluster) => Fed::Deleted(Arc::new(cluster.clone())),
            watcher::Event::InitDone => Fed::Relisted,
            watcher::Event::Init | watcher::Event::InitApply(_) => return,
        };
        // No receiver (no controller runs here): nothing to tell.
        let _ = self.feed.send(fed);
    }

    /// Every cluster once the cache has listed, then each change as it
    /// comes (deletions included); after a re-list, or when the reader
    /// fell more than the feed's length behind, every cluster again. Ends
    /// when the cache's watch does (the hub stops).
    pub fn changes(&self) -> impl Stream<Item = ClusterChange> + Send + 'static {
        // Subscribed before the store is read (again once it has listed),
        // so no change falls between.
        let state = Feed {
            feed: self.feed.subscribe(),
            store: self.store.clone(),
            listed: Some(self.listed.clone()),
            pending: VecDeque::new(),
        };
        futures::stream::unfold(state, |mut state| async move {
            let change = state.next().await?;
            Some((change, state))
        })
    }
}

/// One reader's place in the feed.
struct Feed {
    feed: broadcast::Receiver<Fed>,
    store: Store<ManagedCluster>,
    /// Until the cache has listed: what is awaited first.
    listed: Option<StoresReady>,
    /// Clusters to hand on before the next change (after a list).
    pending: VecDeque<Arc<ManagedCluster>>,
}

impl Feed {
    fn hand_everything_again(&mut self) {
        self.pending = self.store.state().into();
    }

    async fn next(&mut self) -> Option<ClusterChange> {
        if let Some(listed) = self.listed.take() {
            listed.wait().await.ok()?;
            // What was fed before now is in the store already: read from
            // here on, so the first list is not handed twice.
            self.feed = self.feed.resubscribe();
            self.hand_everything_again();
        }
        loop {
            if let Some(cluster) = self.pending.pop_front() {
                return Some(ClusterChange::Applied(cluster));
            }
            match self.feed.recv().await {
                Ok(Fed::Applied(cluster)) => return Some(ClusterChange::Applied(cluster)),
                Ok(Fed::Deleted(cluster)) => return Some(ClusterChange::Deleted(cluster)),
                Ok(Fed::Relisted) | Err(RecvError::Lagged(_)) => self.hand_everything_again(),
                Err(RecvError::Closed) => return None,
            }
        }
    }
}

/// The changes of `changes` that a reader looking only at `view` of a
/// cluster would notice: a cluster seen for the first time, one whose view
/// differs from the last one passed on, and every deletion. What a status
/// heartbeat changes, a reader of labels never sees.
pub fn noticed<V, S>(
    changes: S,
    view: impl Fn(&ManagedCluster) -> V + Send + 'static,
) -> impl Stream<Item = ClusterChange> + Send + 'static
where
    V: PartialEq + Send + 'static,
    S: Stream<Item = ClusterChange> + Send + 'static,
{
    use futures::StreamExt;
    // Keyed by name and uid: a cluster deleted and created again under its
    // name is a new one.
    let mut seen: HashMap<(String, Option<String>), V> = HashMap::new();
    changes.filter_map(move |change| {
        let cluster = change.cluster();
        let key = (cluster.name_any(), cluster.uid());
        let passed = match &change {
            ClusterChange::Applied(_) => {
                let now = view(cluster);
                let same = seen.get(&key).is_some_and(|before| *before == now);
                seen.insert(key, now);
                !same
            }
            ClusterChange::Deleted(_) => {
                seen.remove(&key);
                true
            }
        };
        std::future::ready(passed.then_some(change))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::{FutureExt, StreamExt};
    use kube::runtime::reflector;

    use crate::store_ready::store_ready;
    use ferry_api::managed_cluster::ManagedClusterSpec;

    fn cluster(name: &str, label: &str) -> ManagedCluster {
        let mut c = ManagedCluster::new(name, ManagedClusterSpec::default());
        c.metadata.uid = Some(format!("uid-{name}"));
        c.metadata
            .labels
            .get_or_insert_default()
            .insert("env".into(), label.into());
        c
    }

    fn names(changes: &[ClusterChange]) -> Vec<String> {
        changes
            .iter()
            .map(|c| match c {
                ClusterChange::Applied(c) => format!("+{}", c.name_any()),
                ClusterChange::Deleted(c) => format!("-{}", c.name_any()),
            })
            .collect()
    }

    /// A cache and its writer; `events` are applied then published, as the
    /// cache's watch does.
    fn cache() -> (ClusterCache, reflector::store::Writer<ManagedCluster>) {
        let (store, writer) = reflector::store();
        let listed = StoresReady::all(vec![store_ready(&store)]);
        (ClusterCache::new(store, listed), writer)
    }

    fn feed(
        cache: &ClusterCache,
        writer: &mut reflector::store::Writer<ManagedCluster>,
        event: watcher::Event<ManagedCluster>,
    ) {
        writer.apply_watcher_event(&event);
        cache.publish(&event);
    }

    fn list(
        cache: &ClusterCache,
        writer: &mut reflector::store::Writer<ManagedCluster>,
        clusters: &[ManagedCluster],
    ) {
        feed(cache, writer, watcher::Event::Init);
        for c in clusters {
            feed(cache, writer, watcher::Event::InitApply(c.clone()));
        }
        feed(cache, writer, watcher::Event::InitDone);
    }

    async fn take(
        stream: &mut (impl Stream<Item = ClusterChange> + Unpin),
        n: usize,
    ) -> Vec<ClusterChange> {
        let mut out = Vec::new();
        for _ in 0..n {
            out.push(stream.next().await.expect("a change"));
        }
        out
    }

    #[tokio::test]
    async fn a_reader_gets_every_cluster_once_listed_then_each_change() {
        let (cache, mut writer) = cache();
        // Subscribed before the first list: nothing until it ends.
        let mut changes = Box::pin(cache.changes());
        list(&cache, &mut writer, &[cluster("a", "x"), cluster("b", "x")]);
        let mut first = names(&take(&mut changes, 2).await);
        first.sort();
        assert_eq!(first, ["+a", "+b"]);
        feed(
            &cache,
            &mut writer,
            watcher::Event::Apply(cluster("c", "x")),
        );
        feed(
            &cache,
            &mut writer,
            watcher::Event::Delete(cluster("a", "x")),
        );
        assert_eq!(names(&take(&mut changes, 2).await), ["+c", "-a"]);
        // A re-list hands every cluster again (a deletion missed meanwhile
        // leaves no event, only the cluster's absence).
        list(&cache, &mut writer, &[cluster("b", "x")]);
        assert_eq!(names(&take(&mut changes, 1).await), ["+b"]);

        // A reader that comes later starts from what the cache holds.
        let mut late = Box::pin(cache.changes());
        assert_eq!(names(&take(&mut late, 1).await), ["+b"]);
    }

    #[tokio::test]
    async fn a_reader_left_behind_is_handed_every_cluster_again() {
        let (cache, mut writer) = cache();
        list(&cache, &mut writer, &[]);
        let mut changes = Box::pin(cache.changes());
        // Listed (nothing yet) and waiting on the feed before it overflows.
        assert!(changes.next().now_or_never().is_none());
        for i in 0..FEED + 10 {
            feed(
                &cache,
                &mut writer,
                watcher::Event::Apply(cluster(&format!("c{i}"), "x")),
            );
        }
        let mut all = names(&take(&mut changes, FEED + 10).await);
        all.sort();
        all.dedup();
        assert_eq!(
            all.len(),
            FEED + 10,
            "every cluster, though the feed held fewer"
        );
    }

    #[tokio::test]
    async fn only_what_the_view_notices_passes() {
        let (cache, mut writer) = cache();
        list(&cache, &mut writer, &[cluster("a", "x")]);
        let labels = |c: &ManagedCluster| c.labels().clone();
        let mut changes = Box::pin(noticed(cache.changes(), labels));
        assert_eq!(names(&take(&mut changes, 1).await), ["+a"]);
        // A status heartbeat: the same labels, not noticed.
        let mut beat = cluster("a", "x");
        beat.metadata.resource_version = Some("2".into());
        feed(&cache, &mut writer, watcher::Event::Apply(beat));
        feed(
            &cache,
            &mut writer,
            watcher::Event::Apply(cluster("a", "y")),
        );
        let noticed = take(&mut changes, 1).await;
        assert_eq!(
            noticed[0].cluster().labels()["env"],
            "y",
            "the heartbeat passed"
        );
        assert!(
            changes.next().now_or_never().is_none(),
            "nothing else is pending"
        );
        feed(
            &cache,
            &mut writer,
            watcher::Event::Delete(cluster("a", "y")),
        );
        assert_eq!(names(&take(&mut changes, 1).await), ["-a"]);
        // Created again under its name: a new cluster, noticed.
        let mut again = cluster("a", "y");
        again.metadata.uid = Some("uid-a-2".into());
        feed(&cache, &mut writer, watcher::Event::Apply(again));
        assert_eq!(names(&take(&mut changes, 1).await), ["+a"]);
    }
}
