//! The hub as the dashboard sees it: one reflector (watch + local store) per
//! kind it shows, read with the user's own credentials, and a bounded
//! broadcast of "something changed" notices that the browsers' event
//! streams forward.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use ferry_api::managed_cluster::ManagedCluster;
use ferry_api::manifest_work::ManifestWork;
use ferry_api::replica_set::ManifestWorkReplicaSet;
use futures::StreamExt;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::Value;
use tokio::sync::{RwLock, broadcast};

use crate::hub_api::fleet::raw_object;

/// Notices kept for slow browsers; a browser further behind is told to
/// re-fetch once (its stream reports the lag) instead of the server
/// buffering without bound.
pub const NOTICE_CAPACITY: usize = 64;

/// Which watched kind changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Watched {
    /// ManagedClusters.
    Clusters,
    /// ManifestWorks.
    Works,
    /// ManifestWorkReplicaSets.
    ReplicaSets,
}

impl Watched {
    /// The resource as error messages name it (`plural.group`).
    pub fn resource(self) -> String {
        let resource = self.api_resource();
        format!("{}.{}", resource.plural, resource.group)
    }

    fn api_resource(self) -> ApiResource {
        match self {
            Watched::Clusters => ApiResource::erase::<ManagedCluster>(&()),
            Watched::Works => ApiResource::erase::<ManifestWork>(&()),
            Watched::ReplicaSets => ApiResource::erase::<ManifestWorkReplicaSet>(&()),
        }
    }
}

/// The watched hub: stores, the latest watch error per kind, and notices.
#[derive(Clone)]
pub struct Live {
    /// ManagedClusters as stored on the hub.
    pub clusters: Store<DynamicObject>,
    /// ManifestWorks of every namespace.
    pub works: Store<DynamicObject>,
    /// ManifestWorkReplicaSets of every namespace.
    pub replica_sets: Store<DynamicObject>,
    /// Why a kind's watch is failing now, cleared when it recovers. Keyed by
    /// the three [`Watched`] kinds only.
    pub errors: Arc<RwLock<BTreeMap<Watched, String>>>,
    /// "Something changed" notices, bounded.
    pub notices: broadcast::Sender<Watched>,
    /// Notices sent so far: a page records the count it was rendered at,
    /// and its event stream's greeting says the count at subscription, so
    /// a change between the two is not missed.
    pub changes: Arc<AtomicU64>,
}

impl Live {
    /// Starts the three reflectors on the runtime with `client`. They retry
    /// with backoff on errors and record each error in [`Live::errors`] so
    /// pages can say "hub unreachable" or "forbidden" instead of showing an
    /// empty fleet.
    pub fn start(client: &Client) -> Self {
        let errors = Arc::new(RwLock::new(BTreeMap::new()));
        let changes = Arc::new(AtomicU64::new(0));
        let (notices, _) = broadcast::channel(NOTICE_CAPACITY);
        let watch = |kind: Watched| {
            let resource = kind.api_resource();
            let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
            let writer = reflector::store::Writer::new(resource);
            let store = writer.as_reader();
            let stream = reflector::reflector(
                writer,
                watcher(api, watcher::Config::default()).default_backoff(),
            );
            tokio::spawn(forward(
                kind,
                stream,
                errors.clone(),
                Notify {
                    sender: notices.clone(),
                    changes: changes.clone(),
                },
            ));
            store
        };
        Live {
            clusters: watch(Watched::Clusters),
            works: watch(Watched::Works),
            replica_sets: watch(Watched::ReplicaSets),
            errors: errors.clone(),
            notices: notices.clone(),
            changes,
        }
    }

    /// The number of notices sent so far.
    pub fn changes(&self) -> u64 {
        self.changes.load(Ordering::SeqCst)
    }

    /// The error of each failing watch, as sentences for a banner.
    pub async fn error_lines(&self) -> Vec<String> {
        self.errors.read().await.values().cloned().collect()
    }
}

/// Sends notices and counts them.
struct Notify {
    sender: broadcast::Sender<Watched>,
    changes: Arc<AtomicU64>,
}

impl Notify {
    fn send(&self, kind: Watched) {
        self.changes.fetch_add(1, Ordering::SeqCst);
        // No receiver (no browser open) is not an error.
        let _ = self.sender.send(kind);
    }
}

/// Drives one reflector: records errors, clears them on the next event, and
/// sends a notice for every change after the initial list (and one when
/// the list is complete), never the thousand of a re-list.
async fn forward<S>(
    kind: Watched,
    stream: S,
    errors: Arc<RwLock<BTreeMap<Watched, String>>>,
    notices: Notify,
) where
    S: futures::Stream<Item = Result<watcher::Event<DynamicObject>, watcher::Error>>,
{
    let mut stream = std::pin::pin!(stream);
    while let Some(event) = stream.next().await {
        match event {
            Ok(event) => {
                let recovered = errors.write().await.remove(&kind).is_some();
                let changed = matches!(
                    event,
                    watcher::Event::Apply(_) | watcher::Event::Delete(_) | watcher::Event::InitDone
                );
                if changed || recovered {
                    notices.send(kind);
                }
            }
            Err(error) => {
                let text = watch_error_text(kind, &error);
                let mut errors = errors.write().await;
                if errors.get(&kind) != Some(&text) {
                    errors.insert(kind, text);
                    notices.send(kind);
                }
            }
        }
    }
}

/// A watch error as a person can act on it: forbidden names the verb and
/// resource; a missing resource says the CRDs are missing; anything else is
/// the hub being unreachable, with the cause.
pub fn watch_error_text(kind: Watched, error: &watcher::Error) -> String {
    let resource = kind.resource();
    let api_error = match error {
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status)) => {
            Some((status.code, status.message.clone()))
        }
        watcher::Error::WatchError(status) => Some((status.code, status.message.clone())),
        _ => None,
    };
    match api_error {
        Some((403, message)) => {
            format!("forbidden: you may not list or watch {resource} ({message})")
        }
        Some((401, message)) => format!(
            "unauthorized: the hub does not accept your credentials for {resource} ({message}); check the kubeconfig"
        ),
        Some((404, _)) => format!(
            "the hub does not serve {resource}: is this the hub cluster's kubeconfig, and are ferry's CRDs installed?"
        ),
        Some((code, message)) => {
            format!("the hub refused to watch {resource}: {message} (HTTP {code})")
        }
        None => {
            let mut text = format!("hub unreachable while watching {resource}: {error}");
            let mut cause = std::error::Error::source(error);
            while let Some(inner) = cause {
                let inner_text = inner.to_string();
                if !text.contains(&inner_text) {
                    text.push_str(": ");
                    text.push_str(&inner_text);
                }
                cause = inner.source();
            }
            text
        }
    }
}

/// Every object of `store` as JSON (apiVersion and kind set), decoded by the
/// page per item so one odd object cannot hide the others.
pub fn raw_objects(store: &Store<DynamicObject>, kind: Watched) -> Vec<Value> {
    let resource = kind.api_resource();
    store
        .state()
        .iter()
        .map(|o| raw_object(o.as_ref().clone(), &resource))
        .collect()
}
