//! An in-memory index of ManifestWorks by cluster (the work's namespace), fed by
//! a kube watcher. Agent sessions read only their own cluster's slice and are
//! woken through a per-cluster `watch` channel, so a change in one cluster costs
//! nothing for sessions of the others and bursts of changes coalesce.
//!
//! The watch never ends the hub: its errors (API server away, `410 Gone`,
//! connection resets) are logged, counted and retried with backoff
//! while sessions keep being served from what the index holds. Objects are
//! watched untyped and decoded one by one, so a stored work the Rust types
//! cannot decode is skipped with a warning naming it instead of failing the
//! whole list.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use futures::StreamExt;
use kube::api::{ApiResource, DynamicObject, ObjectMeta};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use tokio::sync::{RwLock, watch};
use tracing::warn;

use crate::metrics::{HubMetrics, WatchLabel, WorkLabel};
use crate::watch::{WORKS_RESOURCE, WatchErrors, backed_off_watch};
use ferry_api::manifest_work::ManifestWork;

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

    /// The work `name` of `cluster` once `ready` holds for the index's copy
    /// (or the work is gone), waiting for the index to change for at most
    /// `limit`; after that, what the index holds then. Never fails.
    pub async fn wait_for(
        &self,
        cluster: &str,
        name: &str,
        ready: impl Fn(&ManifestWork) -> bool,
        limit: std::time::Duration,
    ) -> Option<Arc<ManifestWork>> {
        // Subscribed before the first look: a change between the two still
        // wakes the wait.
        let mut changes = self.subscribe(cluster).await;
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let current = self.get(cluster, name).await;
            if current.as_deref().is_none_or(&ready) {
                return current;
            }
            // The sender lives in the index, so `changed` fails only if the
            // slot was replaced; then look once more and stop.
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => return self.get(cluster, name).await,
            }
        }
    }

    /// Stores what `watched` resolves to, replacing what the index held
    /// under its name.
    async fn apply(&self, watched: Watched) {
        let (cluster, name) = watched.key();
        let Some(cluster) = cluster else {
            return;
        };
        let mut clusters = self.clusters.write().await;
        let slot = clusters.entry(cluster).or_insert_with(ClusterSlot::new);
        let previous = slot.works.get(&name);
        let resolved = watched.resolve(previous);
        let unchanged = match (&resolved, previous) {
            (Some(new), Some(old)) => Arc::ptr_eq(new, old),
            (None, None) => true,
            _ => false,
        };
        if unchanged {
            return;
        }
        match resolved {
            Some(work) => slot.works.insert(name, work),
            None => slot.works.remove(&name),
        };
        slot.notify();
    }

    async fn remove(&self, metadata: &ObjectMeta) {
        let (Some(cluster), Some(name)) = (&metadata.namespace, &metadata.name) else {
            return;
        };
        let mut clusters = self.clusters.write().await;
        if let Some(slot) = clusters.get_mut(cluster)
            && slot.works.remove(name).is_some()
        {
            slot.notify();
        }
    }

    /// Replaces everything after a (re)list, waking only clusters whose set of
    /// works changed.
    async fn replace_all(&self, listed: Vec<Watched>) {
        let mut clusters = self.clusters.write().await;
        let mut fresh: HashMap<String, HashMap<String, Arc<ManifestWork>>> = HashMap::new();
        for watched in listed {
            let (Some(cluster), name) = watched.key() else {
                continue;
            };
            let previous = clusters
                .get(&cluster)
                .and_then(|slot| slot.works.get(&name));
            if let Some(work) = watched.resolve(previous) {
                fresh.entry(cluster).or_default().insert(name, work);
            }
        }
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

    /// Keeps the index in step with the hub's API server for as long as the
    /// watch stream lasts (kube's watcher never ends it by itself; the hub
    /// stops it by dropping this future). Every watch error is logged,
    /// counted in `metrics.watch_errors` and retried after
    /// [`crate::watch::watch_backoff`]; meanwhile the index keeps what it has and stays ready, and the
    /// relist that follows an outage brings the changes made meanwhile.
    pub async fn run(self: Arc<Self>, client: Client, metrics: Arc<HubMetrics>) {
        let resource = ApiResource::erase::<ManifestWork>(&());
        let api: Api<DynamicObject> = Api::all_with(client, &resource);
        let mut events = backed_off_watch(api, watcher::Config::default()).boxed();
        let mut feed = Feed::new(self, metrics);
        while let Some(event) = events.next().await {
            match event {
                Ok(event) => feed.handle(event).await,
                Err(error) => feed.errors.failed(&error),
            }
        }
    }
}

/// One watched object: a work, or one the Rust types cannot decode (of which
/// only the metadata is known).
enum Watched {
    // Both boxed: a re-list holds many of these, and the two differ in size.
    Work(Box<ManifestWork>),
    Undecodable(Box<ObjectMeta>),
}

impl Watched {
    /// Decodes `object` as a ManifestWork, keeping only the metadata of one
    /// that does not decode (and why not). Managed fields are dropped: the hub
    /// never reads them and they can be as large as the spec.
    fn decode(object: DynamicObject) -> (Self, Option<serde_json::Error>) {
        match serde_json::to_value(&object).and_then(serde_json::from_value::<ManifestWork>) {
            Ok(mut work) => {
                work.metadata.managed_fields = None;
                (Watched::Work(Box::new(work)), None)
            }
            Err(error) => (Watched::Undecodable(Box::new(object.metadata)), Some(error)),
        }
    }

    fn metadata(&self) -> &ObjectMeta {
        match self {
            Watched::Work(work) => &work.metadata,
            Watched::Undecodable(metadata) => metadata,
        }
    }

    fn key(&self) -> (Option<String>, String) {
        let metadata = self.metadata();
        (
            metadata.namespace.clone(),
            metadata.name.clone().unwrap_or_default(),
        )
    }

    /// What the index holds for this object, given what it `previous`ly held
    /// under the same name. A work the hub cannot decode is never sent in
    /// its new shape: agents keep the last version that decoded (if it is the
    /// same object), and once it is being deleted a stand-in carrying its
    /// current metadata (deletion time, finalizers) and the last known spec
    /// lets the deletion go through as for any other work.
    fn resolve(self, previous: Option<&Arc<ManifestWork>>) -> Option<Arc<ManifestWork>> {
        let metadata = match self {
            Watched::Work(work) => return Some(Arc::new(*work)),
            Watched::Undecodable(metadata) => *metadata,
        };
        let previous = previous.filter(|p| p.metadata.uid == metadata.uid);
        if metadata.deletion_timestamp.is_none() {
            return previous.cloned();
        }
        let mut stand_in = ManifestWork::new(
            metadata.name.as_deref().unwrap_or_default(),
            previous.map(|p| p.spec.clone()).unwrap_or_default(),
        );
        stand_in.status = previous.and_then(|p| p.status.clone());
        stand_in.metadata = metadata;
        stand_in.metadata.managed_fields = None;
        Some(Arc::new(stand_in))
    }
}

/// Turns watch events into index updates, and keeps the warning and the
/// `undecodable_works` gauge of every work that does not decode.
struct Feed {
    index: Arc<WorkIndex>,
    /// Where the watch's errors are logged and counted.
    errors: WatchErrors,
    metrics: Arc<HubMetrics>,
    /// Works currently shown in the gauge.
    undecodable: HashSet<WorkLabel>,
    /// Objects of a relist in progress.
    relist: Vec<Watched>,
    relist_undecodable: HashSet<WorkLabel>,
}

impl Feed {
    fn new(index: Arc<WorkIndex>, metrics: Arc<HubMetrics>) -> Self {
        Self {
            index,
            errors: WatchErrors {
                metrics: metrics.clone(),
                label: WatchLabel {
                    resource: WORKS_RESOURCE,
                    watch: "index",
                },
            },
            metrics,
            undecodable: HashSet::new(),
            relist: Vec::new(),
            relist_undecodable: HashSet::new(),
        }
    }

    async fn handle(&mut self, event: watcher::Event<DynamicObject>) {
        match event {
            watcher::Event::Init => {
                self.relist.clear();
                self.relist_undecodable.clear();
            }
            watcher::Event::InitApply(object) => {
                let watched = self.decode(object);
                if let Watched::Undecodable(metadata) = &watched {
                    self.relist_undecodable.insert(label(metadata));
                }
                self.relist.push(watched);
            }
            watcher::Event::InitDone => {
                self.index
                    .replace_all(std::mem::take(&mut self.relist))
                    .await;
                let still = std::mem::take(&mut self.relist_undecodable);
                for gone in self.undecodable.difference(&still) {
                    self.metrics.undecodable_works.remove(gone);
                }
                self.undecodable = still;
            }
            watcher::Event::Apply(object) => {
                let watched = self.decode(object);
                self.index.apply(watched).await;
            }
            watcher::Event::Delete(object) => {
                self.clear(&label(&object.metadata));
                self.index.remove(&object.metadata).await;
            }
        }
    }

    /// Decodes `object`, warning about (and showing in the gauge) a work that
    /// does not decode and clearing the gauge of one that decodes again.
    fn decode(&mut self, object: DynamicObject) -> Watched {
        let (watched, error) = Watched::decode(object);
        let work = label(watched.metadata());
        match error {
            None => self.clear(&work),
            Some(error) => {
                warn!(
                    namespace = %work.work_namespace,
                    name = %work.name,
                    %error,
                    "ManifestWork {}/{} cannot be decoded and is skipped; agents keep its last version that decoded, if any",
                    work.work_namespace,
                    work.name,
                );
                self.metrics.undecodable_works.get_or_create(&work).set(1);
                self.undecodable.insert(work);
            }
        }
        watched
    }

    fn clear(&mut self, work: &WorkLabel) {
        if self.undecodable.remove(work) {
            self.metrics.undecodable_works.remove(work);
        }
    }
}

fn label(metadata: &ObjectMeta) -> WorkLabel {
    WorkLabel {
        work_namespace: metadata.namespace.clone().unwrap_or_default(),
        name: metadata.name.clone().unwrap_or_default(),
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
    use serde_json::{Value, json};

    /// A stored ManifestWork as the API server would send it.
    fn object(ns: &str, name: &str, uid: &str, rv: &str, spec: Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "work.ferry.dev/v1alpha1",
            "kind": "ManifestWork",
            "metadata": {
                "namespace": ns, "name": name, "uid": uid, "resourceVersion": rv,
                "generation": 1,
                "managedFields": [{"manager": "kubectl", "operation": "Update"}],
            },
            "spec": spec,
        }))
        .expect("a DynamicObject")
    }

    fn good(ns: &str, name: &str, uid: &str, rv: &str) -> DynamicObject {
        object(ns, name, uid, rv, json!({"workload": {"manifests": []}}))
    }

    /// A shape the Rust types refuse: manifests must be a list.
    fn bad(ns: &str, name: &str, uid: &str, rv: &str) -> DynamicObject {
        object(
            ns,
            name,
            uid,
            rv,
            json!({"workload": {"manifests": "not-a-list"}}),
        )
    }

    fn deleting(mut object: DynamicObject) -> DynamicObject {
        object.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::now(),
            ));
        object.metadata.finalizers = Some(vec![ferry_api::contract::CLEANUP_FINALIZER.into()]);
        object
    }

    fn feed() -> Feed {
        Feed::new(WorkIndex::new(), Arc::new(HubMetrics::default()))
    }

    async fn relist(feed: &mut Feed, objects: Vec<DynamicObject>) {
        feed.handle(watcher::Event::Init).await;
        for object in objects {
            feed.handle(watcher::Event::InitApply(object)).await;
        }
        feed.handle(watcher::Event::InitDone).await;
    }

    fn flagged(feed: &Feed, ns: &str, name: &str) -> Option<i64> {
        let work = WorkLabel {
            work_namespace: ns.into(),
            name: name.into(),
        };
        feed.metrics.undecodable_works.get(&work).map(|g| g.get())
    }

    fn rv(work: &ManifestWork) -> String {
        work.resource_version().unwrap_or_default()
    }

    #[tokio::test]
    async fn a_change_wakes_only_the_cluster_it_belongs_to() {
        let mut feed = feed();
        relist(&mut feed, vec![]).await;
        let mut a = feed.index.subscribe("cluster-a").await;
        let mut b = feed.index.subscribe("cluster-b").await;
        a.mark_unchanged();
        b.mark_unchanged();
        feed.handle(watcher::Event::Apply(good("cluster-a", "w1", "u1", "1")))
            .await;
        assert!(a.has_changed().expect("sender alive"));
        assert!(!b.has_changed().expect("sender alive"));
        assert_eq!(feed.index.works_of("cluster-a").await.len(), 1);
        assert!(feed.index.works_of("cluster-b").await.is_empty());
    }

    #[tokio::test]
    async fn a_relist_drops_works_that_vanished_and_wakes_their_cluster() {
        let mut feed = feed();
        relist(
            &mut feed,
            vec![good("c", "w1", "u1", "1"), good("c", "w2", "u2", "1")],
        )
        .await;
        let mut rx = feed.index.subscribe("c").await;
        rx.mark_unchanged();
        relist(&mut feed, vec![good("c", "w1", "u1", "1")]).await;
        assert!(rx.has_changed().expect("sender alive"));
        assert!(feed.index.get("c", "w2").await.is_none());
        rx.mark_unchanged();
        relist(&mut feed, vec![good("c", "w1", "u1", "1")]).await;
        assert!(!rx.has_changed().expect("sender alive"));
    }

    #[tokio::test]
    async fn a_wait_for_a_copy_ends_when_the_index_holds_it_or_the_limit_passes() {
        let mut feed = feed();
        relist(&mut feed, vec![good("c", "w1", "u1", "1")]).await;
        let newer = |work: &ManifestWork| rv(work) == "2";
        let index = feed.index.clone();
        let waiting = tokio::spawn(async move {
            index
                .wait_for("c", "w1", newer, std::time::Duration::from_secs(30))
                .await
        });
        // Other works changing do not end it.
        feed.handle(watcher::Event::Apply(good("c", "w2", "u2", "1")))
            .await;
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        feed.handle(watcher::Event::Apply(good("c", "w1", "u1", "2")))
            .await;
        let held = waiting.await.expect("joined").expect("the work");
        assert_eq!(rv(&held), "2");
        // Never there: the copy the index holds once the limit passed.
        let never = |work: &ManifestWork| rv(work) == "9";
        let held = feed
            .index
            .wait_for("c", "w1", never, std::time::Duration::from_millis(20))
            .await
            .expect("the work");
        assert_eq!(rv(&held), "2");
        // Gone: nothing to wait for.
        assert!(
            feed.index
                .wait_for("c", "gone", never, std::time::Duration::from_secs(30))
                .await
                .is_none()
        );
    }

    #[tokio::test]
    async fn the_index_is_not_ready_before_the_first_list() {
        let mut feed = feed();
        assert!(!feed.index.is_ready());
        relist(&mut feed, vec![]).await;
        assert!(feed.index.is_ready());
        feed.index.wait_ready().await;
    }

    #[tokio::test]
    async fn watch_errors_are_counted_and_the_index_keeps_serving_what_it_has() {
        let mut feed = feed();
        relist(&mut feed, vec![good("c", "w1", "u1", "1")]).await;
        feed.errors.failed(&watcher::Error::NoResourceVersion);
        feed.errors.failed(&watcher::Error::NoResourceVersion);
        let errors = feed
            .metrics
            .watch_errors
            .get(&WatchLabel {
                resource: WORKS_RESOURCE,
                watch: "index",
            })
            .map(|c| c.get());
        assert_eq!(errors, Some(2));
        assert!(feed.index.is_ready());
        assert_eq!(feed.index.works_of("c").await.len(), 1);
    }

    #[tokio::test]
    async fn an_undecodable_work_is_skipped_named_in_the_gauge_and_others_are_indexed() {
        let mut feed = feed();
        relist(
            &mut feed,
            vec![bad("c", "broken", "u1", "1"), good("c", "fine", "u2", "1")],
        )
        .await;
        assert!(feed.index.is_ready());
        assert!(feed.index.get("c", "broken").await.is_none());
        assert!(feed.index.get("c", "fine").await.is_some());
        assert_eq!(flagged(&feed, "c", "broken"), Some(1));
        assert_eq!(flagged(&feed, "c", "fine"), None);
        feed.handle(watcher::Event::Apply(good("c", "later", "u3", "2")))
            .await;
        assert!(feed.index.get("c", "later").await.is_some());
    }

    #[tokio::test]
    async fn an_undecodable_update_keeps_the_last_version_that_decoded() {
        let mut feed = feed();
        relist(&mut feed, vec![good("c", "w", "u1", "1")]).await;
        let mut rx = feed.index.subscribe("c").await;
        rx.mark_unchanged();
        feed.handle(watcher::Event::Apply(bad("c", "w", "u1", "2")))
            .await;
        let kept = feed.index.get("c", "w").await.expect("kept");
        assert_eq!(rv(&kept), "1");
        assert!(!rx.has_changed().expect("sender alive"));
        assert_eq!(flagged(&feed, "c", "w"), Some(1));
        // A relist while it is still undecodable keeps it too.
        relist(&mut feed, vec![bad("c", "w", "u1", "2")]).await;
        assert_eq!(rv(&feed.index.get("c", "w").await.expect("kept")), "1");
        // Fixed: the new version replaces it and the gauge clears.
        feed.handle(watcher::Event::Apply(good("c", "w", "u1", "3")))
            .await;
        assert_eq!(rv(&feed.index.get("c", "w").await.expect("fixed")), "3");
        assert!(rx.has_changed().expect("sender alive"));
        assert_eq!(flagged(&feed, "c", "w"), None);
    }

    #[tokio::test]
    async fn an_undecodable_work_recreated_under_an_old_name_drops_the_old_work() {
        let mut feed = feed();
        relist(&mut feed, vec![good("c", "w", "u1", "1")]).await;
        feed.handle(watcher::Event::Apply(bad("c", "w", "u2", "2")))
            .await;
        assert!(feed.index.get("c", "w").await.is_none());
    }

    #[tokio::test]
    async fn a_deleted_undecodable_work_gets_a_stand_in_that_lets_its_deletion_through() {
        let mut feed = feed();
        relist(&mut feed, vec![good("c", "held", "u1", "1")]).await;
        feed.handle(watcher::Event::Apply(deleting(bad("c", "held", "u1", "2"))))
            .await;
        let stand_in = feed.index.get("c", "held").await.expect("stand-in");
        assert!(crate::works::deletion::awaits_release(&*stand_in));
        assert_eq!(rv(&stand_in), "2");
        assert_eq!(stand_in.uid().as_deref(), Some("u1"));

        feed.handle(watcher::Event::Apply(deleting(bad(
            "c", "never", "u2", "3",
        ))))
        .await;
        let stand_in = feed.index.get("c", "never").await.expect("stand-in");
        assert!(crate::works::deletion::awaits_release(&*stand_in));
        assert_eq!(stand_in.spec, Default::default());

        feed.handle(watcher::Event::Delete(bad("c", "never", "u2", "4")))
            .await;
        assert!(feed.index.get("c", "never").await.is_none());
        assert_eq!(flagged(&feed, "c", "never"), None);
    }

    #[tokio::test]
    async fn a_relist_clears_the_gauge_of_undecodable_works_that_are_gone() {
        let mut feed = feed();
        relist(&mut feed, vec![bad("c", "w", "u1", "1")]).await;
        assert_eq!(flagged(&feed, "c", "w"), Some(1));
        relist(&mut feed, vec![]).await;
        assert_eq!(flagged(&feed, "c", "w"), None);
    }

    #[tokio::test]
    async fn indexed_works_carry_no_managed_fields() {
        let mut feed = feed();
        relist(&mut feed, vec![good("c", "w", "u1", "1")]).await;
        let work = feed.index.get("c", "w").await.expect("indexed");
        assert!(work.metadata.managed_fields.is_none());
    }
}
