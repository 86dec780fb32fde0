//! Readiness of reflector stores that many reconciles await at once.
//!
//! kube-runtime's `Store::wait_until_ready` polls one futures oneshot
//! receiver shared by every caller, and such a receiver keeps a single
//! waker: the last poller's. Reconciles of the objects of a first list all
//! start before the stores they read have listed, so several wait at once;
//! when the store becomes ready only the last of them is woken, and the
//! others stay pending for ever. The controller holds every later trigger
//! of their objects behind a reconcile that never ends, so those objects
//! are never reconciled again: CI saw ManagedClusterSets created as the hub
//! started never get a status, and placements none either.
//!
//! [`StoresReady`] awaits each store's readiness in one shared future
//! (`futures`' `Shared` wakes every waiter), so any number of reconciles
//! may wait.

use std::hash::Hash;

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use kube::runtime::reflector::{Lookup, Store};

/// A store's watch ended before the store had listed everything; the
/// controller is shutting down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a cache's watch ended before it had listed everything")]
pub struct StoreGone;

/// Resolves (true) once `store` has listed everything, false when its
/// writer went away first. Hand it to [`StoresReady::all`]; awaiting it
/// alone from several tasks at once has kube's lost-wakeup problem.
pub fn store_ready<K>(store: &Store<K>) -> BoxFuture<'static, bool>
where
    K: 'static + Lookup + Clone + Send + Sync,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
{
    let store = store.clone();
    // The one caller allowed: it is polled only through `StoresReady`'s
    // shared future (the workspace's clippy.toml forbids it elsewhere).
    #[allow(clippy::disallowed_methods)]
    async move { store.wait_until_ready().await.is_ok() }.boxed()
}

/// Whether every store of a controller has listed; cheap to clone, and any
/// number of tasks may [`wait`](StoresReady::wait) at once.
#[derive(Clone)]
pub struct StoresReady(Shared<BoxFuture<'static, bool>>);

impl StoresReady {
    /// Ready once every future of [`store_ready`] in `stores` is.
    pub fn all(stores: Vec<BoxFuture<'static, bool>>) -> Self {
        let all = futures::future::join_all(stores).map(|ready| ready.into_iter().all(|r| r));
        Self(all.boxed().shared())
    }

    /// This readiness as one of the futures of another [`StoresReady::all`]
    /// (a cache several owners wait for, each with stores of its own): it
    /// polls the same shared future, so no waiter loses its wake-up.
    pub fn as_store_ready(&self) -> BoxFuture<'static, bool> {
        self.0.clone().boxed()
    }

    /// Waits until every store has listed. Fails with [`StoreGone`] when a
    /// store's writer went away before (the controller is stopping).
    pub async fn wait(&self) -> Result<(), StoreGone> {
        if self.0.clone().await {
            Ok(())
        } else {
            Err(StoreGone)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::reflector;
    use kube::runtime::watcher;

    /// Tasks that are all waiting when the store lists are all woken.
    /// (With `Store::wait_until_ready` in their place only the last one
    /// is, and the test times out for the others.)
    #[tokio::test(flavor = "current_thread")]
    async fn every_waiter_wakes_when_the_stores_list() {
        let (configs, mut config_writer) = reflector::store::<ConfigMap>();
        let (others, mut other_writer) = reflector::store::<ConfigMap>();
        let ready = StoresReady::all(vec![store_ready(&configs), store_ready(&others)]);
        let waiters: Vec<_> = (0..8)
            .map(|_| {
                let ready = ready.clone();
                tokio::spawn(async move { ready.wait().await })
            })
            .collect();
        // Let every waiter run until it waits.
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(
            waiters.iter().all(|w| !w.is_finished()),
            "none is ready yet"
        );
        for writer in [&mut config_writer, &mut other_writer] {
            writer.apply_watcher_event(&watcher::Event::Init);
            writer.apply_watcher_event(&watcher::Event::InitDone);
        }
        for waiter in waiters {
            let woken = tokio::time::timeout(Duration::from_secs(10), waiter)
                .await
                .expect("a waiter was never woken");
            assert_eq!(woken.expect("no panic"), Ok(()));
        }
        // A late waiter finds it ready at once.
        assert_eq!(ready.wait().await, Ok(()));
    }

    #[tokio::test]
    async fn a_writer_gone_before_listing_fails_the_wait() {
        let (configs, writer) = reflector::store::<ConfigMap>();
        let ready = StoresReady::all(vec![store_ready(&configs)]);
        drop(writer);
        assert_eq!(ready.wait().await, Err(StoreGone));
    }
}
