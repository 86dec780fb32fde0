//! Watches the objects works manage and wakes a work's worker when one of
//! them changes or disappears, so spoke drift is corrected within moments and
//! never by polling.
//!
//! One watch serves every managed object of a kind in a namespace (cluster
//! scope for cluster-scoped kinds), shared by all works: a watch holds an API
//! server connection open, so one per object would cost a connection — and a
//! TLS handshake on the next request — per object.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Weak};

use futures::TryStreamExt;
use kube::ResourceExt;
use kube::api::{Api, DynamicObject};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::{Mutex, Notify};
use tokio::task::JoinHandle;
use tracing::debug;

/// One object a work manages, as the drift watch needs to find it.
#[derive(Clone)]
pub struct ManagedObject {
    /// Api handle scoped to the object's namespace (or the cluster).
    pub api: Api<DynamicObject>,
    /// `group/version/kind/namespace`: the watch that sees this object.
    pub scope: String,
    /// Object name.
    pub name: String,
}

impl ManagedObject {
    /// The object `name` of `kind` in `api_version`, reached through `api`
    /// (scoped to `namespace`, empty for cluster-scoped kinds).
    pub fn new(
        api: Api<DynamicObject>,
        api_version: &str,
        kind: &str,
        namespace: &str,
        name: &str,
    ) -> Self {
        Self {
            api,
            scope: format!("{api_version}/{kind}/{namespace}"),
            name: name.to_string(),
        }
    }
}

type Subscribers = Arc<Mutex<HashMap<String, Vec<Weak<Notify>>>>>;

struct ScopeWatch {
    subscribers: Subscribers,
    task: JoinHandle<()>,
}

/// The agent's shared drift watches.
#[derive(Default)]
pub struct DriftWatches {
    scopes: Mutex<HashMap<String, ScopeWatch>>,
}

impl DriftWatches {
    /// No watches yet.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    async fn subscribe(&self, object: &ManagedObject, wake: &Arc<Notify>) {
        let mut scopes = self.scopes.lock().await;
        let scope = scopes.entry(object.scope.clone()).or_insert_with(|| {
            let subscribers: Subscribers = Arc::default();
            let task = tokio::spawn(watch_scope(
                object.api.clone(),
                object.scope.clone(),
                subscribers.clone(),
            ));
            ScopeWatch { subscribers, task }
        });
        let mut subscribers = scope.subscribers.lock().await;
        let entry = subscribers.entry(object.name.clone()).or_default();
        entry.retain(|w| w.strong_count() > 0);
        if !entry
            .iter()
            .any(|w| w.upgrade().is_some_and(|n| Arc::ptr_eq(&n, wake)))
        {
            entry.push(Arc::downgrade(wake));
        }
    }

    async fn unsubscribe(&self, scope: &str, name: &str, wake: &Arc<Notify>) {
        let mut scopes = self.scopes.lock().await;
        let Some(watch) = scopes.get(scope) else {
            return;
        };
        let mut subscribers = watch.subscribers.lock().await;
        if let Some(entry) = subscribers.get_mut(name) {
            entry.retain(|w| w.upgrade().is_some_and(|n| !Arc::ptr_eq(&n, wake)));
            if entry.is_empty() {
                subscribers.remove(name);
            }
        }
        // Works that ended without unsubscribing leave dead entries behind.
        subscribers.retain(|_, entry| {
            entry.retain(|w| w.strong_count() > 0);
            !entry.is_empty()
        });
        let idle = subscribers.is_empty();
        drop(subscribers);
        if idle && let Some(watch) = scopes.remove(scope) {
            watch.task.abort();
        }
    }
}

impl Drop for DriftWatches {
    fn drop(&mut self) {
        for watch in self.scopes.get_mut().values() {
            watch.task.abort();
        }
    }
}

/// The drift interest of one work.
pub struct DriftWatch {
    watches: Arc<DriftWatches>,
    wake: Arc<Notify>,
    tracked: HashSet<(String, String)>,
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
        let wanted: HashSet<(String, String)> = objects
            .iter()
            .map(|o| (o.scope.clone(), o.name.clone()))
            .collect();
        for object in objects {
            if !self
                .tracked
                .contains(&(object.scope.clone(), object.name.clone()))
            {
                self.watches.subscribe(object, &self.wake).await;
            }
        }
        for (scope, name) in self.tracked.difference(&wanted) {
            self.watches.unsubscribe(scope, name, &self.wake).await;
        }
        self.tracked = wanted;
    }
}

async fn watch_scope(api: Api<DynamicObject>, scope: String, subscribers: Subscribers) {
    let mut events = std::pin::pin!(watcher(api, watcher::Config::default()).default_backoff());
    loop {
        match events.try_next().await {
            Ok(Some(watcher::Event::Apply(object) | watcher::Event::Delete(object))) => {
                wake(&subscribers, Some(&object.name_any())).await;
            }
            // Every list may hide changes no event will report: a relist
            // after a broken watch, and the first list too, since an edit
            // made between a work's apply and this list arrives as listed
            // state, not as an event. The woken works check their objects
            // again (reads only; nothing is written when nothing differs).
            Ok(Some(watcher::Event::InitDone)) => {
                wake(&subscribers, None).await;
            }
            Ok(Some(_)) => {}
            Ok(None) => return,
            Err(error) => debug!(%scope, %error, "drift watch error; retrying"),
        }
    }
}

async fn wake(subscribers: &Subscribers, name: Option<&str>) {
    let subscribers = subscribers.lock().await;
    let targets: Vec<&Vec<Weak<Notify>>> = match name {
        Some(name) => subscribers.get(name).into_iter().collect(),
        None => subscribers.values().collect(),
    };
    for notify in targets.into_iter().flatten().filter_map(Weak::upgrade) {
        notify.notify_one();
    }
}
