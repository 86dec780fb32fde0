//! Runs a publisher only while what it writes can be written: the leader's
//! ClusterProfile and inventory PlacementDecision publishers depend on CRDs
//! (and a namespace) that other projects own and the hub does not install.
//! The gate checks every [`CHECK_EVERY`]; while the check says ready it runs
//! the publisher with a gauge at 1, and stops it (gauge 0) as soon as a
//! check says not ready; each change is logged once.

use std::fmt::Debug;
use std::future::Future;
use std::time::Duration;

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use prometheus_client::metrics::gauge::Gauge;
use tracing::warn;

/// How often the gate checks, while not ready and while publishing.
pub const CHECK_EVERY: Duration = Duration::from_secs(10);

/// The hub's stop, as a publisher is handed it: cloneable, shareable.
pub type Stop = Shared<BoxFuture<'static, ()>>;

/// How a publisher's check reads: whether a state found lets it run, and
/// how a change of state is told.
pub struct Gate<R> {
    /// What is published, for the log (e.g. `ClusterProfiles`).
    pub what: &'static str,
    /// Whether the publisher may run in this state.
    pub ready: fn(R) -> bool,
    /// Logs a state, called at each change.
    pub report: Box<dyn Fn(R) + Send + Sync>,
    /// 1 while the publisher runs, else 0.
    pub gauge: Gauge,
}

/// Runs `publish` while `check` finds a state `gate` calls ready, until
/// `shutdown` completes. A failed check (an API error `check` does not turn
/// into a state) is logged and changes nothing. Never fails.
pub async fn run_while_ready<R, C, CF, P>(
    gate: Gate<R>,
    check: C,
    publish: P,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) where
    R: Copy + Eq + Debug + Send,
    C: Fn() -> CF,
    CF: Future<Output = Result<R, kube::Error>>,
    P: Fn(Stop) -> BoxFuture<'static, ()>,
{
    let Gate {
        what,
        ready,
        report,
        gauge,
    } = gate;
    let shutdown: Stop = shutdown.boxed().shared();
    // What the last check found (None: not checked yet), so the log speaks
    // at changes only.
    let mut last: Option<R> = None;
    loop {
        let found = tokio::select! {
            () = shutdown.clone() => break,
            found = check() => found,
        };
        match found {
            Ok(found) => {
                if last != Some(found) {
                    report(found);
                }
                last = Some(found);
            }
            Err(error) => warn!(%error, "checking whether {what} can be published; checking again"),
        }
        if last.is_some_and(ready) {
            gauge.set(1);
            // Published until a check finds it cannot be, or the hub stops.
            let watching = async {
                let mut checks = tokio::time::interval(CHECK_EVERY);
                checks.tick().await;
                loop {
                    checks.tick().await;
                    if let Ok(found) = check().await
                        && !ready(found)
                    {
                        return found;
                    }
                }
            };
            tokio::select! {
                () = publish(shutdown.clone()) => {}
                found = watching => {
                    report(found);
                    last = Some(found);
                }
            }
        }
        gauge.set(0);
        tokio::select! {
            () = shutdown.clone() => break,
            () = tokio::time::sleep(CHECK_EVERY) => {}
        }
    }
    gauge.set(0);
}
