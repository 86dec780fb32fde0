//! Watches the objects works manage and wakes a work's worker when one of
//! them changes or disappears, so spoke drift is corrected within moments and
//! never by polling.
//!
//! Per kind, shared by all works, metadata only: one cluster-wide watch of
//! the objects that carry ferry's label ([`MANAGED_LABEL`], put on every
//! object ferry writes), so the spoke's API server filters and 50,000
//! unrelated ConfigMaps never reach the agent; and, for the objects that do
//! not carry it (read-only or create-only objects ferry never wrote,
//! objects not there yet, objects released or being deleted), one watch per
//! object by name. Connections grow with the kinds ferry manages plus those
//! few objects. Past [`MAX_OBJECT_WATCHES`] unlabelled objects of a kind, one
//! unfiltered watch of the kind replaces their watches (the bound on
//! streams). Where the agent may not list a kind cluster-wide (403), the
//! cluster-wide watches fall back to one watch per namespace that holds
//! subscribed objects. Which watches run is a pure function ([`scopes`]).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Weak};

use futures::TryStreamExt;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use tokio::sync::{Mutex, Notify, mpsc, watch};
use tokio::task::JoinHandle;
use tokio_util::task::AbortOnDropHandle;
use tracing::{debug, warn};

use ferry_semantics::release::{MANAGED_LABEL, MANAGED_LABEL_VALUE};

use crate::metrics::{AgentMetrics, KindLabel};
use prometheus_client::metrics::counter::Counter;

/// Most unlabelled objects of one kind watched one by one; more fall back to
/// one unfiltered watch of the kind. Each watch is a stream on the agent's
/// HTTP/2 connection, which the API server caps (250 by default).
pub const MAX_OBJECT_WATCHES: usize = 32;

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
    /// Whether the object carried ferry's label when last seen: then the
    /// kind's label-selected watch sees it; otherwise it is watched by name.
    pub labelled: bool,
    /// The resourceVersion the work's pass left the object at (written or
    /// read), if known: the watch's echo of that version is no news.
    pub seen: Option<String>,
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
            labelled: false,
            seen: None,
        }
    }

    /// Records whether the object carries ferry's label, as read from the
    /// object after the last write or read. Never fails.
    pub fn set_labelled(&mut self, labelled: bool) {
        self.labelled = labelled;
    }

    /// Records the resourceVersion the pass left the object at, as read
    /// from the object after its last write or read. Never fails.
    pub fn set_seen(&mut self, version: Option<&str>) {
        self.seen = version.map(str::to_string);
    }

    fn key(&self) -> ObjectKey {
        (self.namespace.clone(), self.name.clone())
    }
}

/// Whether a watch event at `event_version` can be news to a work whose
/// last pass left the object at `seen`: not when both name the same
/// version, which is the state the pass wrote or read (typically the echo
/// of the agent's own write, which would otherwise cost a pass of reads
/// after every write). Unknown versions are always news. Never fails.
pub fn is_news(seen: Option<&str>, event_version: Option<&str>) -> bool {
    match (seen, event_version) {
        (Some(seen), Some(event)) => seen != event,
        _ => true,
    }
}

/// Metadata-only requests: list and watch carry no object bodies.
type MetaApi = Api<PartialObjectMeta<DynamicObject>>;

/// (namespace, name) of a watched object.
type ObjectKey = (String, String);

/// One work's interest in one object.
struct Interest {
    wake: Weak<Notify>,
    labelled: bool,
    /// The version the work's last pass left the object at.
    seen: Option<String>,
}

type Subscribers = Arc<Mutex<HashMap<ObjectKey, Vec<Interest>>>>;

/// What the subscriptions of one kind need watched.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Wanted {
    /// Subscribed objects every work saw with ferry's label.
    pub labelled: BTreeSet<ObjectKey>,
    /// Subscribed objects some work saw without ferry's label.
    pub unlabelled: BTreeSet<ObjectKey>,
}

impl Wanted {
    fn of(subscribers: &HashMap<ObjectKey, Vec<Interest>>) -> Self {
        let mut wanted = Wanted::default();
        for (key, interests) in subscribers {
            if interests.iter().any(|i| !i.labelled) {
                wanted.unlabelled.insert(key.clone());
            } else {
                wanted.labelled.insert(key.clone());
            }
        }
        wanted
    }
}

/// Which cluster-wide watches of a kind the API server refused (403).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Refused {
    /// The label-selected watch.
    pub labelled: bool,
    /// The unfiltered watch.
    pub all: bool,
}

/// One watch of a kind.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    /// Objects with ferry's label, cluster-wide.
    Labelled,
    /// Objects with ferry's label in one namespace.
    LabelledIn(String),
    /// One object, by name (in its namespace; empty: cluster-scoped).
    Object(ObjectKey),
    /// Every object of the kind, cluster-wide.
    All,
    /// Every object of the kind in one namespace.
    AllIn(String),
}

/// The watches that cover `wanted`: the label-selected watch for labelled
/// objects, one watch per unlabelled object up to `max_objects`, else one
/// unfiltered watch (which then covers the labelled ones too); where a
/// cluster-wide watch was refused, per-namespace ones (cluster-scoped
/// objects are then watched by name). Never fails.
pub fn scopes(wanted: &Wanted, refused: Refused, max_objects: usize) -> BTreeSet<Scope> {
    let mut out = BTreeSet::new();
    let unfiltered = wanted.unlabelled.len() > max_objects;
    if unfiltered {
        if refused.all {
            for (namespace, name) in &wanted.unlabelled {
                if namespace.is_empty() {
                    out.insert(Scope::Object((String::new(), name.clone())));
                } else {
                    out.insert(Scope::AllIn(namespace.clone()));
                }
            }
        } else {
            // Covers every object of the kind, labelled or not.
            out.insert(Scope::All);
            return out;
        }
    } else {
        out.extend(wanted.unlabelled.iter().cloned().map(Scope::Object));
    }
    if wanted.labelled.is_empty() {
        return out;
    }
    if !refused.labelled {
        out.insert(Scope::Labelled);
        return out;
    }
    for (namespace, name) in &wanted.labelled {
        if namespace.is_empty() {
            out.insert(Scope::Object((String::new(), name.clone())));
        } else if !out.contains(&Scope::AllIn(namespace.clone())) {
            out.insert(Scope::LabelledIn(namespace.clone()));
        }
    }
    out
}

struct KindWatch {
    subscribers: Subscribers,
    /// What the kind's watches must cover, kept in step with `subscribers`.
    wanted: watch::Sender<Wanted>,
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

    /// How many kinds are watched.
    pub async fn watched_kinds(&self) -> usize {
        self.kinds.lock().await.len()
    }

    async fn subscribe(&self, object: &ManagedObject, wake: &Arc<Notify>) {
        let mut kinds = self.kinds.lock().await;
        let kind = kinds.entry(object.kind.clone()).or_insert_with(|| {
            let subscribers: Subscribers = Arc::default();
            let (wanted, wanted_rx) = watch::channel(Wanted::default());
            let task = tokio::spawn(watch_kind(
                object.client.clone(),
                object.resource.clone(),
                object.kind.clone(),
                subscribers.clone(),
                wanted_rx,
                self.metrics.clone(),
            ));
            KindWatch {
                subscribers,
                wanted,
                task,
            }
        });
        let mut subscribers = kind.subscribers.lock().await;
        let entry = subscribers.entry(object.key()).or_default();
        entry.retain(|i| i.wake.strong_count() > 0);
        let present = entry.iter_mut().find(|i| {
            i.labelled == object.labelled && i.wake.upgrade().is_some_and(|n| Arc::ptr_eq(&n, wake))
        });
        match present {
            Some(interest) => interest.seen.clone_from(&object.seen),
            None => entry.push(Interest {
                wake: Arc::downgrade(wake),
                labelled: object.labelled,
                seen: object.seen.clone(),
            }),
        }
        // Only this key can have changed: updated in place, so subscribing
        // n objects costs O(n log n), not O(n²).
        let unlabelled = entry.iter().any(|i| !i.labelled);
        drop(subscribers);
        let key = object.key();
        kind.wanted.send_if_modified(|current| {
            if unlabelled {
                let moved = current.labelled.remove(&key);
                current.unlabelled.insert(key) || moved
            } else {
                let moved = current.unlabelled.remove(&key);
                current.labelled.insert(key) || moved
            }
        });
    }

    async fn unsubscribe(
        &self,
        kind_key: &str,
        key: &ObjectKey,
        labelled: bool,
        wake: &Arc<Notify>,
    ) {
        let mut kinds = self.kinds.lock().await;
        let Some(kind) = kinds.get(kind_key) else {
            return;
        };
        let mut subscribers = kind.subscribers.lock().await;
        if let Some(entry) = subscribers.get_mut(key) {
            entry.retain(|i| {
                !(i.labelled == labelled && i.wake.upgrade().is_some_and(|n| Arc::ptr_eq(&n, wake)))
            });
            if entry.is_empty() {
                subscribers.remove(key);
            }
        }
        // Works that ended without unsubscribing leave dead entries behind.
        subscribers.retain(|_, entry| {
            entry.retain(|i| i.wake.strong_count() > 0);
            !entry.is_empty()
        });
        let wanted = Wanted::of(&subscribers);
        let idle = subscribers.is_empty();
        drop(subscribers);
        kind.wanted.send_if_modified(|current| {
            let changed = *current != wanted;
            *current = wanted;
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
    tracked: HashSet<(String, ObjectKey, bool)>,
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

    /// Watches exactly `objects` from now on, each known at the version
    /// it carries. Subscribes before it unsubscribes, so an object whose
    /// label came or went is covered throughout.
    pub async fn track(&mut self, objects: &[ManagedObject]) {
        let wanted: HashSet<(String, ObjectKey, bool)> = objects
            .iter()
            .map(|o| (o.kind.clone(), o.key(), o.labelled))
            .collect();
        for object in objects {
            // Also for objects tracked already: the version moves.
            self.watches.subscribe(object, &self.wake).await;
        }
        for (kind, key, labelled) in self.tracked.difference(&wanted) {
            self.watches
                .unsubscribe(kind, key, *labelled, &self.wake)
                .await;
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

/// Runs the watches [`scopes`] chooses for one kind, kept in step with
/// `wanted` and with the cluster-wide watches the API server refused. Each
/// open watch is counted in the metrics while it lasts.
async fn watch_kind(
    client: Client,
    resource: ApiResource,
    kind: String,
    subscribers: Subscribers,
    mut wanted: watch::Receiver<Wanted>,
    metrics: Arc<AgentMetrics>,
) {
    // Only cluster-wide scopes report, once each: a small buffer never fills.
    let (refusals, mut refused_rx) = mpsc::channel::<Scope>(4);
    let mut refused = Refused::default();
    let mut running: HashMap<Scope, AbortOnDropHandle<()>> = HashMap::new();
    loop {
        let plan = scopes(&wanted.borrow_and_update(), refused, MAX_OBJECT_WATCHES);
        running.retain(|scope, _| plan.contains(scope));
        for scope in plan {
            if running.contains_key(&scope) {
                continue;
            }
            let (client, resource, kind) = (client.clone(), resource.clone(), kind.clone());
            let (subscribers, refusals) = (subscribers.clone(), refusals.clone());
            let metrics = metrics.clone();
            let open = metrics.watch_open(&kind);
            let task_scope = scope.clone();
            let task = tokio::spawn(async move {
                // Counted while the task lives, aborted or not.
                let _open = open;
                let received = metrics
                    .watch_objects
                    .get_or_create(&KindLabel { kind: kind.clone() })
                    .clone();
                let ended = watch_scope(
                    &client,
                    &resource,
                    (&kind, &received),
                    &task_scope,
                    &subscribers,
                )
                .await;
                if ended == Ended::Forbidden {
                    let _ = refusals.send(task_scope).await;
                }
            });
            running.insert(scope, AbortOnDropHandle::new(task));
        }
        tokio::select! {
            changed = wanted.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            Some(scope) = refused_rx.recv() => {
                warn!(%kind, ?scope, "cannot watch this kind cluster-wide; watching each namespace instead");
                match scope {
                    Scope::Labelled => refused.labelled = true,
                    Scope::All => refused.all = true,
                    _ => {}
                }
            }
        }
    }
}

#[derive(PartialEq)]
enum Ended {
    Closed,
    Forbidden,
}

/// The selectors of the watch of `scope`, and the wake-up its every
/// (re)list calls for.
fn scope_request(
    client: &Client,
    resource: &ApiResource,
    scope: &Scope,
) -> (MetaApi, watcher::Config) {
    let labelled =
        || watcher::Config::default().labels(&format!("{MANAGED_LABEL}={MANAGED_LABEL_VALUE}"));
    match scope {
        Scope::Labelled => (Api::all_with(client.clone(), resource), labelled()),
        Scope::LabelledIn(ns) => (
            Api::namespaced_with(client.clone(), ns, resource),
            labelled(),
        ),
        Scope::Object((ns, name)) => {
            let api = if ns.is_empty() {
                Api::all_with(client.clone(), resource)
            } else {
                Api::namespaced_with(client.clone(), ns, resource)
            };
            // Object names never hold the selector syntax's comma, `=` or backslash.
            (
                api,
                watcher::Config::default().fields(&format!("metadata.name={name}")),
            )
        }
        Scope::All => (
            Api::all_with(client.clone(), resource),
            watcher::Config::default(),
        ),
        Scope::AllIn(ns) => (
            Api::namespaced_with(client.clone(), ns, resource),
            watcher::Config::default(),
        ),
    }
}

/// Runs one metadata watch and wakes the subscribers of what it sees. Ends
/// when the stream ends, or with `Forbidden` when a cluster-wide watch is
/// refused before its first list (a namespaced one retries instead).
async fn watch_scope(
    client: &Client,
    resource: &ApiResource,
    (kind, received): (&str, &Counter),
    scope: &Scope,
    subscribers: &Subscribers,
) -> Ended {
    let (api, config) = scope_request(client, resource, scope);
    let cluster_wide = matches!(scope, Scope::Labelled | Scope::All);
    let mut events = std::pin::pin!(watcher(api, config).default_backoff());
    let mut listed = false;
    loop {
        match events.try_next().await {
            Ok(Some(watcher::Event::InitApply(_))) => {
                received.inc();
            }
            Ok(Some(watcher::Event::Apply(object))) => {
                received.inc();
                let key = (object.namespace().unwrap_or_default(), object.name_any());
                let version = object.resource_version();
                wake(subscribers, Wake::Changed(&key, version.as_deref())).await;
            }
            Ok(Some(watcher::Event::Delete(object))) => {
                received.inc();
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
                let which = match scope {
                    Scope::Labelled | Scope::All => Wake::All,
                    Scope::LabelledIn(ns) | Scope::AllIn(ns) => Wake::Namespace(ns),
                    Scope::Object(key) => Wake::Object(key),
                };
                wake(subscribers, which).await;
            }
            Ok(Some(_)) => {}
            Ok(None) => return Ended::Closed,
            Err(error) if cluster_wide && !listed && is_forbidden(&error) => {
                return Ended::Forbidden;
            }
            Err(error) => debug!(%kind, ?scope, %error, "drift watch error; retrying"),
        }
    }
}

enum Wake<'a> {
    Object(&'a ObjectKey),
    /// The object is now at this version: works that left it there are not
    /// woken.
    Changed(&'a ObjectKey, Option<&'a str>),
    Namespace(&'a str),
    All,
}

async fn wake(subscribers: &Subscribers, which: Wake<'_>) {
    let subscribers = subscribers.lock().await;
    let version = match which {
        Wake::Changed(_, version) => Some(version),
        _ => None,
    };
    let targets: Vec<&Vec<Interest>> = match which {
        Wake::Object(key) | Wake::Changed(key, _) => subscribers.get(key).into_iter().collect(),
        Wake::Namespace(ns) => subscribers
            .iter()
            .filter(|((namespace, _), _)| namespace == ns)
            .map(|(_, v)| v)
            .collect(),
        Wake::All => subscribers.values().collect(),
    };
    for notify in targets
        .into_iter()
        .flatten()
        .filter(|i| version.is_none_or(|v| is_news(i.seen.as_deref(), v)))
        .filter_map(|i| i.wake.upgrade())
    {
        notify.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(ns: &str, name: &str) -> ObjectKey {
        (ns.to_string(), name.to_string())
    }

    fn wanted(labelled: &[(&str, &str)], unlabelled: &[(&str, &str)]) -> Wanted {
        Wanted {
            labelled: labelled.iter().map(|(n, o)| key(n, o)).collect(),
            unlabelled: unlabelled.iter().map(|(n, o)| key(n, o)).collect(),
        }
    }

    fn set(scopes: &[Scope]) -> BTreeSet<Scope> {
        scopes.iter().cloned().collect()
    }

    #[test]
    fn only_a_version_the_work_did_not_leave_the_object_at_is_news() {
        assert!(
            !is_news(Some("41"), Some("41")),
            "the echo of its own write"
        );
        assert!(is_news(Some("41"), Some("42")), "someone wrote after it");
        assert!(is_news(None, Some("42")), "a work that never saw it");
        assert!(is_news(Some("41"), None), "an event without a version");
        assert!(is_news(None, None));
    }

    #[test]
    fn labelled_objects_share_one_label_selected_watch_and_the_rest_are_watched_by_name() {
        let w = wanted(
            &[("a", "x"), ("b", "y"), ("", "crd")],
            &[("a", "read-only")],
        );
        assert_eq!(
            scopes(&w, Refused::default(), 4),
            set(&[Scope::Labelled, Scope::Object(key("a", "read-only"))])
        );
        assert!(scopes(&Wanted::default(), Refused::default(), 4).is_empty());
    }

    #[test]
    fn too_many_unlabelled_objects_fall_back_to_one_unfiltered_watch_of_the_kind() {
        let w = wanted(&[("a", "x")], &[("a", "1"), ("b", "2"), ("c", "3")]);
        assert_eq!(scopes(&w, Refused::default(), 2), set(&[Scope::All]));
        assert_eq!(
            scopes(&w, Refused::default(), 3),
            set(&[
                Scope::Labelled,
                Scope::Object(key("a", "1")),
                Scope::Object(key("b", "2")),
                Scope::Object(key("c", "3")),
            ])
        );
    }

    #[test]
    fn refused_cluster_wide_watches_fall_back_to_namespaces_and_names() {
        let refused = Refused {
            labelled: true,
            all: true,
        };
        let w = wanted(&[("a", "x"), ("b", "y"), ("", "crd")], &[("a", "r")]);
        assert_eq!(
            scopes(&w, refused, 4),
            set(&[
                Scope::LabelledIn("a".into()),
                Scope::LabelledIn("b".into()),
                Scope::Object(key("", "crd")),
                Scope::Object(key("a", "r")),
            ])
        );
        // Unfiltered per namespace covers that namespace's labelled objects.
        let crowded = wanted(
            &[("a", "x"), ("b", "y")],
            &[("a", "1"), ("a", "2"), ("", "3")],
        );
        assert_eq!(
            scopes(&crowded, refused, 2),
            set(&[
                Scope::AllIn("a".into()),
                Scope::Object(key("", "3")),
                Scope::LabelledIn("b".into()),
            ])
        );
    }

    #[test]
    fn an_object_any_work_saw_unlabelled_is_watched_by_name() {
        let wake = Arc::new(Notify::new());
        let mut subscribers: HashMap<ObjectKey, Vec<Interest>> = HashMap::new();
        subscribers.insert(
            key("a", "shared"),
            vec![
                Interest {
                    wake: Arc::downgrade(&wake),
                    labelled: true,
                    seen: None,
                },
                Interest {
                    wake: Arc::downgrade(&wake),
                    labelled: false,
                    seen: None,
                },
            ],
        );
        subscribers.insert(
            key("a", "mine"),
            vec![Interest {
                wake: Arc::downgrade(&wake),
                labelled: true,
                seen: None,
            }],
        );
        assert_eq!(
            Wanted::of(&subscribers),
            wanted(&[("a", "mine")], &[("a", "shared")])
        );
    }
}
