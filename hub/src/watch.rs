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

/// Ticks every `period`, for a controller's `reconcile_all_on`: a slow
/// sweep that reconciles every object in the store, so a reconcile lost for
/// any other reason (a transient error the error policy did not requeue) is
/// redone within one period; reconciles write only what changed. The
/// re-list race it once covered is fixed at its root by [`SettledObjects`].
pub fn resync_every(period: Duration) -> impl Stream<Item = ()> + Send {
    tokio_stream::wrappers::IntervalStream::new(tokio::time::interval(period)).map(|_| ())
}

/// The objects a reflected watch touched, handed on only once the reflector's
/// store holds them. kube's `touched_objects` and `applied_objects` pass each
/// object of a (re-)list on as it arrives, but the reflector swaps the listed
/// objects into its store only when the list is done: a controller triggered
/// by one finds it missing, drops the reconcile, and nothing triggers it
/// again (an object created while a watch re-lists after a 410 was then not
/// reconciled until the next sweep). Here the objects of a list are held
/// until `InitDone` has passed the reflector, then handed on together. Put
/// it after `.reflect(writer)`. A list that restarts drops what it held.
pub trait SettledObjects<K>:
    Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Sized + Send
where
    K: Send,
{
    /// Applied (and listed) objects, listed ones after their list is done.
    fn applied_settled(self) -> impl Stream<Item = Result<K, watcher::Error>> + Send {
        settled(self, false)
    }

    /// Applied, listed and deleted objects, listed ones after their list is
    /// done.
    fn touched_settled(self) -> impl Stream<Item = Result<K, watcher::Error>> + Send {
        settled(self, true)
    }
}

impl<K: Send, S> SettledObjects<K> for S where
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Sized + Send
{
}

fn settled<K: Send>(
    events: impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send,
    with_deletes: bool,
) -> impl Stream<Item = Result<K, watcher::Error>> + Send {
    events
        .scan(Vec::new(), move |listed: &mut Vec<K>, event| {
            let out: Vec<Result<K, watcher::Error>> = match event {
                Ok(watcher::Event::Apply(object)) => vec![Ok(object)],
                Ok(watcher::Event::Delete(object)) if with_deletes => vec![Ok(object)],
                Ok(watcher::Event::Delete(_)) => Vec::new(),
                Ok(watcher::Event::Init) => {
                    listed.clear();
                    Vec::new()
                }
                Ok(watcher::Event::InitApply(object)) => {
                    listed.push(object);
                    Vec::new()
                }
                Ok(watcher::Event::InitDone) => {
                    std::mem::take(listed).into_iter().map(Ok).collect()
                }
                Err(error) => vec![Err(error)],
            };
            std::future::ready(Some(futures::stream::iter(out)))
        })
        .flatten()
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

    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::reflector::{self, ObjectRef};

    fn config_map(name: &str) -> ConfigMap {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(name.into());
        cm.metadata.namespace = Some("team".into());
        cm
    }

    // The re-list race at its root: every object handed on must already be
    // in the reflector's store when the controller looks it up.
    #[tokio::test]
    async fn listed_objects_are_handed_on_only_once_the_store_holds_them() {
        let (reader, writer) = reflector::store::<ConfigMap>();
        let events = futures::stream::iter(vec![
            Ok(watcher::Event::Init),
            Ok(watcher::Event::InitApply(config_map("a"))),
            Ok(watcher::Event::InitApply(config_map("b"))),
            Ok(watcher::Event::InitDone),
            Ok(watcher::Event::Apply(config_map("c"))),
            Ok(watcher::Event::Delete(config_map("a"))),
            // A re-list that restarts drops what the first attempt held.
            Ok(watcher::Event::Init),
            Ok(watcher::Event::InitApply(config_map("d"))),
            Ok(watcher::Event::Init),
            Ok(watcher::Event::InitApply(config_map("e"))),
            Ok(watcher::Event::InitDone),
        ]);
        let mut touched = std::pin::pin!(reflector::reflector(writer, events).touched_settled());
        let mut seen = Vec::new();
        while let Some(object) = touched.next().await {
            let object = object.expect("no error");
            let name = object.metadata.name.clone().expect("named");
            let deleted = name == "a" && seen.contains(&"a".to_string());
            assert_eq!(
                reader.get(&ObjectRef::from_obj(&object)).is_some(),
                !deleted,
                "{name} handed on before the store had it"
            );
            seen.push(name);
        }
        assert_eq!(seen, ["a", "b", "c", "a", "e"]);
    }

    #[tokio::test]
    async fn applied_settled_leaves_deletes_out() {
        let events = futures::stream::iter(vec![
            Ok(watcher::Event::Apply(config_map("a"))),
            Ok(watcher::Event::Delete(config_map("a"))),
        ]);
        let names: Vec<String> = events
            .applied_settled()
            .map(|o| o.expect("no error").metadata.name.expect("named"))
            .collect()
            .await;
        assert_eq!(names, ["a"]);
    }

    #[test]
    fn watch_retries_start_at_half_a_second_and_never_wait_over_five() {
        let delays: Vec<Duration> = watch_backoff().take(20).collect();
        assert_eq!(delays.len(), 20, "the backoff never gives up");
        assert!(delays[0] >= Duration::from_millis(500));
        assert!(delays.iter().all(|d| *d < Duration::from_secs(5)));
        assert!(delays[19] >= Duration::from_millis(2500));
    }
}
