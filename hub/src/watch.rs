//! The one way the hub watches its API server: every watch and controller
//! backs off its errors with [`watch_backoff`] (and with nothing else),
//! counts them where a metric is kept for them, and logs its results alike.
//!
//! A kube `Controller` applies its trigger backoff to the merged stream of
//! all its watches; a watch given to it therefore has no backoff of its own
//! ([`watch`]), or an error would be waited out twice, once at kube's
//! default (client-go's, up to 30 s). A watch read directly
//! ([`backed_off_watch`]) carries the backoff itself.

use std::fmt::Debug;
use std::future::Future;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt, TryFuture};
use kube::Api;
use kube::Resource;
use kube::runtime::WatchStreamExt;
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::utils::{Backoff, ResetTimerBackoff};
use kube::runtime::watcher::{self, ExponentialBackoff, watcher};
use serde::de::DeserializeOwned;
use tracing::{debug, warn};

use crate::metrics::{HubMetrics, WatchLabel};

/// The `resource` label of the hub's ManifestWork watches in metrics.
pub const WORKS_RESOURCE: &str = "manifestworks";

/// How the hub's watches wait after an error: from 0.5 s, doubling up to
/// 2.5 s (jitter adds up to as much again), reset after two healthy
/// minutes. kube's default (client-go's: up to 30 s, up to 60 s with
/// jitter) left agents without changes for 29 s after the hub's API server
/// came back from a 10 s outage; the hub runs two watches per replica, so
/// retrying every few seconds costs a recovering API server nothing.
pub fn watch_backoff() -> impl Backoff {
    let exponential = backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(500))
        .with_max_delay(Duration::from_millis(2500))
        .with_factor(2.0)
        .with_jitter()
        .without_max_times();
    ResetTimerBackoff::new(
        ExponentialBackoff::from(exponential),
        Duration::from_secs(120),
    )
}

/// Ticks every `period`, for a controller's `reconcile_all_on`: the net
/// under a kube `Controller` race. When a watch is re-listed (410 "too old
/// resource version", seen minutes after a hub starts), kube passes each
/// listed object on as a trigger before the reflector's store holds it (the
/// store is swapped in only when the list is done), so the controller finds
/// an object created during the re-list missing, drops its reconcile, and
/// nothing triggers it again: a placement or set is then never reconciled.
/// Reconciling every object in the store this often bounds that to one
/// period; reconciles write only what changed.
pub fn resync_every(period: Duration) -> impl Stream<Item = ()> + Send {
    tokio_stream::wrappers::IntervalStream::new(tokio::time::interval(period)).map(|_| ())
}

/// A watch of `api` for a controller: no backoff of its own, since
/// [`run_controller`] backs off the controller's watches together. Objects
/// come without `metadata.managedFields`, which no controller reads: in the
/// caches built on these watches they were the largest part of each
/// ManagedCluster and work (a heap profile of an idle hub at 1,000 clusters
/// found 28 MiB in the stores, most of it field ownership).
pub fn watch<K>(
    api: Api<K>,
    config: watcher::Config,
) -> impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    watcher(api, config).modify(|object| object.meta_mut().managed_fields = None)
}

/// A watch of `api` read directly (not by a controller): it waits
/// [`watch_backoff`] after each error before it watches again.
pub fn backed_off_watch<K>(
    api: Api<K>,
    config: watcher::Config,
) -> impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    watcher(api, config).backoff(watch_backoff())
}

/// Where a watch's errors are counted: `metrics.watch_errors` under `label`.
#[derive(Clone)]
pub struct WatchErrors {
    /// The hub's metrics.
    pub metrics: Arc<HubMetrics>,
    /// Which watch of which resource.
    pub label: WatchLabel,
}

impl WatchErrors {
    /// Logs and counts one error of the watch; it is retried with backoff.
    pub fn failed(&self, error: &watcher::Error) {
        warn!(
            resource = self.label.resource,
            watch = self.label.watch,
            %error,
            "watch failed; retrying with backoff"
        );
        self.metrics.watch_errors.get_or_create(&self.label).inc();
    }
}

/// Runs `controller` with `reconcile` and `error_policy` until `shutdown`
/// completes, backing off its watches with [`watch_backoff`]. Its results
/// are logged under `name`: a reconcile at debug level; a failed reconcile
/// not at all (`error_policy` logs it, with the object); an object gone
/// before its turn at debug level; a watch error as a warning, counted in
/// `watch_errors` when given; anything else as a warning. No error ends it.
pub async fn run_controller<K, ReconcilerFut, Ctx>(
    name: &'static str,
    controller: Controller<K>,
    watch_errors: Option<WatchErrors>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
    reconcile: impl FnMut(Arc<K>, Arc<Ctx>) -> ReconcilerFut,
    error_policy: impl Fn(Arc<K>, &ReconcilerFut::Error, Arc<Ctx>) -> Action,
    context: Arc<Ctx>,
) where
    K: Clone + Resource + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Debug + Unpin,
    ReconcilerFut: TryFuture<Ok = Action> + Send + 'static,
    ReconcilerFut::Error: std::error::Error + Send + 'static,
{
    controller
        .trigger_backoff(watch_backoff())
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, context)
        .for_each(|result| {
            match result {
                Ok((object, _)) => debug!(controller = name, object = %object, "reconciled"),
                Err(controller::Error::ReconcilerFailed(..)) => {}
                Err(controller::Error::ObjectNotFound(object)) => {
                    debug!(controller = name, %object, "object gone before its reconcile");
                }
                Err(controller::Error::QueueError(error)) => match &watch_errors {
                    Some(errors) => errors.failed(&error),
                    None => warn!(controller = name, %error, "watch failed; retrying with backoff"),
                },
                Err(error) => warn!(controller = name, %error, "controller failed"),
            }
            std::future::ready(())
        })
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_retries_start_at_half_a_second_and_never_wait_over_five() {
        let delays: Vec<Duration> = watch_backoff().take(20).collect();
        assert_eq!(delays.len(), 20, "the backoff never gives up");
        assert!(delays[0] >= Duration::from_millis(500));
        assert!(delays.iter().all(|d| *d < Duration::from_secs(5)));
        assert!(delays[19] >= Duration::from_millis(2500));
    }
}
