//! Watches the objects works manage and wakes a work's worker when one of
//! them changes or disappears, so spoke drift is corrected within moments and
//! never by polling.
//!
//! One metadata-only watch per kind, cluster-wide, serves every managed
//! object of that kind, shared by all works: connections grow with the kinds
//! ferry manages, not with namespaces or objects, and only object metadata
//! travels. Where the agent may not list a kind cluster-wide (403), that
//! kind falls back to one watch per namespace that holds managed objects.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Weak};

use futures::TryStreamExt;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use tokio::sync::{Mutex, Notify, watch};
use tokio::task::JoinHandle;
use tokio_util::task::AbortOnDropHandle;
use tracing::{debug, warn};

use crate::metrics::{AgentMetrics, WatchOpen};

/// One object a work manages, as the drift watch needs to find it.
#[derive(Clone)]
pub struct ManagedObject {
    client: Client,
    resource: ApiResource,
    /// `group/version/kind`: the watch that sees this object.
    pub kind: String,
    /// Namespace; empty for cluster-scoped objects.
    pub namespace: String,
    /// Object name.
    pub name: String,
}

impl ManagedObject {
    /// The object `name` of `resource` in `namespace` (empty for
    /// cluster-scoped kinds), watched through `client`.
    pub fn new(client: &Client, resource: &ApiResource, namespace: &str, name: &str) -> Self {
        Self {
            client: client.clone(),
            resource: resource.clone(),
            kind: format!("{}/{}", resource.api_version, resource.kind),
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }

    fn key(&self) -> ObjectKey {
        (self.namespace.clone(), self.name.clone())
    }
}

/// Metadata-only requests: list and watch carry no object bodies.
type MetaApi = Api<PartialObjectMeta<DynamicObject>>;

/// (namespace, name) of a watched object.
type ObjectKey = (String, String);
type Subscribers = Arc<Mutex<HashMap<ObjectKey, Vec<Weak<Notify>>>>>;

struct KindWatch {
    subscribers: Subscribers,
    /// The namespaces holding subscribed objects: what a per-namespace
    /// fallback must watch.
    namespaces: watch::Sender<BTreeSet<String>>,
    task: JoinHandle<()>,
}

/// The agent's shared drift watches.
pub struct DriftWatches {
    kinds: Mutex<HashMap<String, KindWatch>>,
    /// Counts the watches open, by kind.
    metrics: Arc<AgentMetrics>,
}

impl DriftWatches {
    /// No watches yet; those opened later are counted in `metrics`.
    pub fn new(metrics: Arc<AgentMetrics>) -> Arc<Self> {
        Arc::new(Self {
            kinds: Mutex::default(),
            metrics,
        })
    }

    /// How many kinds are watched (one connection each, unless a kind fell
    /// back to per-namespace watches).
    pub async fn watched_kinds(&self) -> usize {
        self.kinds.lock().await.len()
    }

    async fn subscribe(&self, object: &ManagedObject, wake: &Arc<Notify>) {
        let mut kinds = self.kinds.lock().await;
        let kind = kinds.entry(object.kind.clone()).or_insert_with(|| {
            let subscribers: Subscribers = Arc::default();
            let (namespaces, namespaces_rx) = watch::channel(BTreeSet::new());
            // Counted from the moment the work relies on it.
            let open = self.metrics.watch_open(&object.kind);
            let task = tokio::spawn(watch_kind(
                open,
                object.client.clone(),
                object.resource.clone(),
                object.kind.clone(),
                subscribers.clone(),
                namespaces_rx,
                self.metrics.clone(),
            ));
            KindWatch {
                subscribers,
                namespaces,
                task,
            }
        });
        let mut subscribers = kind.subscribers.lock().await;
        let entry = subscribers.entry(object.key()).or_default();
        entry.retain(|w| w.strong_count() > 0);
        if !entry
            .iter()
            .any(|w| w.upgrade().is_some_and(|n| Arc::ptr_eq(&n, wake)))
        {
            entry.push(Arc::downgrade(wake));
        }
        kind.namespaces
            .send_if_modified(|set| set.insert(object.namespace.clone()));
    }

    async fn unsubscribe(&self, kind_key: &str, key: &ObjectKey, wake: &Arc<Notify>) {
        let mut kinds = self.kinds.lock().await;
        let Some(kind) = kinds.get(kind_key) else {
            return;
        };
        let mut subscribers = kind.subscribers.lock().await;
        if let Some(entry) = subscribers.get_mut(key) {
            entry.retain(|w| w.upgrade().is_some_and(|n| !Arc::ptr_eq(&n, wake)));
            if entry.is_empty() {
                subscribers.remove(key);
            }
        }
        // Works that ended without unsubscribing leave dead entries behind.
        subscribers.retain(|_, entry| {
            entry.retain(|w| w.strong_count() > 0);
            !entry.is_empty()
        });
        let namespaces: BTreeSet<String> = subscribers.keys().map(|(ns, _)| ns.clone()).collect();
        let idle = subscribers.is_empty();
        drop(subscribers);
        kind.namespaces.send_if_modified(|set| {
            let changed = *set != namespaces;
            *set = namespaces;
            changed
        });
        if idle && let Some(watch) = kinds.remove(kind_key) {
            watch.task.abort();
        }
    }
}

impl Drop for DriftWatches {
    fn drop(&mut self) {
        for watch in self.kinds.get_mut().values() {
            watch.task.abort();
        }
    }
}

/// The drift interest of one work.
pub struct DriftWatch {
    watches: Arc<DriftWatches>,
    wake: Arc<Notify>,
    tracked: HashSet<(String, ObjectKey)>,
}

impl DriftWatch {
    /// Interest that wakes `wake` on any change of a tracked object. When the
    /// work ends, dropping `wake` is enough: watches hold it weakly.
    pub fn new(watches: Arc<DriftWatches>, wake: Arc<Notify>) -> Self {
        Self {
            watches,
            wake,
            tracked: HashSet::new(),
        }
    }

    /// Watches exactly `objects` from now on.
    pub async fn track(&mut self, objects: &[ManagedObject]) {
        let wanted: HashSet<(String, ObjectKey)> =
            objects.iter().map(|o| (o.kind.clone(), o.key())).collect();
        for object in objects {
            if !self.tracked.contains(&(object.kind.clone(), object.key())) {
                self.watches.subscribe(object, &self.wake).await;
            }
        }
        for (kind, key) in self.tracked.difference(&wanted) {
            self.watches.unsubscribe(kind, key, &self.wake).await;
        }
        self.tracked = wanted;
    }
}

/// Whether a watcher error says the agent may not list or watch there.
fn is_forbidden(error: &watcher::Error) -> bool {
    match error {
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status)) => status.code == 403,
        watcher::Error::WatchError(status) => status.code == 403,
        _ => false,
    }
}

/// Watches one kind cluster-wide (counted by `open` while it lasts); on 403
/// falls back to one watch per namespace in `namespaces`, kept in step with
/// it.
async fn watch_kind(
    open: WatchOpen,
    client: Client,
    resource: ApiResource,
    kind: String,
    subscribers: Subscribers,
    mut namespaces: watch::Receiver<BTreeSet<String>>,
    metrics: Arc<AgentMetrics>,
) {
    let all: MetaApi = Api::all_with(client.clone(), &resource);
    let ended = watch_scope(all, &kind, None, &subscribers).await;
    drop(open);
    if ended == Ended::Forbidden {
        warn!(%kind, "cannot watch this kind cluster-wide; watching each namespace instead");
    } else {
        return;
    }
    let mut running: HashMap<String, AbortOnDropHandle<()>> = HashMap::new();
    loop {
        let wanted = namespaces.borrow_and_update().clone();
        running.retain(|ns, _| wanted.contains(ns));
        for ns in wanted {
            if running.contains_key(&ns) || ns.is_empty() {
                continue;
            }
            let api: MetaApi = Api::namespaced_with(client.clone(), &ns, &resource);
            let (kind, subscribers, scope) = (kind.clone(), subscribers.clone(), ns.clone());
            let open = metrics.watch_open(&kind);
            let task = tokio::spawn(async move {
                // Counted while the task lives, aborted or not.
                let _open = open;
                let _ = watch_scope(api, &kind, Some(&scope), &subscribers).await;
            });
            running.insert(ns, AbortOnDropHandle::new(task));
        }
        if namespaces.changed().await.is_err() {
            return;
        }
    }
}

#[derive(PartialEq)]
enum Ended {
    Closed,
    Forbidden,
}

/// Runs one metadata watch (cluster-wide, or in `namespace`) and wakes the
/// subscribers of what it sees. Ends when the stream ends, or with
/// `Forbidden` when a cluster-wide watch is refused before its first list.
async fn watch_scope(
    api: MetaApi,
    kind: &str,
    namespace: Option<&str>,
    subscribers: &Subscribers,
) -> Ended {
    let mut events = std::pin::pin!(watcher(api, watcher::Config::default()).default_backoff());
    let mut listed = false;
    loop {
        match events.try_next().await {
            Ok(Some(watcher::Event::Apply(object) | watcher::Event::Delete(object))) => {
                let key = (object.namespace().unwrap_or_default(), object.name_any());
                wake(subscribers, Wake::Object(&key)).await;
            }
            // Every list may hide changes no event will report: a relist
            // after a broken watch, and the first list too, since an edit
            // made between a work's apply and this list arrives as listed
            // state, not as an event. The woken works check their objects
            // again (reads only; nothing is written when nothing differs).
            Ok(Some(watcher::Event::InitDone)) => {
                listed = true;
                let scope = match namespace {
                    Some(ns) => Wake::Namespace(ns),
                    None => Wake::All,
                };
                wake(subscribers, scope).await;
            }
            Ok(Some(_)) => {}
            Ok(None) => return Ended::Closed,
            Err(error) if namespace.is_none() && !listed && is_forbidden(&error) => {
                return Ended::Forbidden;
            }
            Err(error) => debug!(%kind, ?namespace, %error, "drift watch error; retrying"),
        }
    }
}

enum Wake<'a> {
    Object(&'a ObjectKey),
    Namespace(&'a str),
    All,
}

async fn wake(subscribers: &Subscribers, which: Wake<'_>) {
    let subscribers = subscribers.lock().await;
    let targets: Vec<&Vec<Weak<Notify>>> = match which {
        Wake::Object(key) => subscribers.get(key).into_iter().collect(),
        Wake::Namespace(ns) => subscribers
            .iter()
            .filter(|((namespace, _), _)| namespace == ns)
            .map(|(_, v)| v)
            .collect(),
        Wake::All => subscribers.values().collect(),
    };
    for notify in targets.into_iter().flatten().filter_map(Weak::upgrade) {
        notify.notify_one();
    }
}
