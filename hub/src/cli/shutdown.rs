//! How `ferry-hub serve` stops: on SIGTERM (how Kubernetes stops a pod) or
//! Ctrl-C it stops taking work, releases its Leases and exits, and within
//! `--shutdown-grace-seconds` whatever it is doing.
//!
//! The signals are received on a thread of their own, not by the async
//! runtime: a runtime whose workers are all busy would never see them. The
//! same thread then waits out the grace and ends the process if it is still
//! running (an API server that is gone keeps lease and watch retries going;
//! a blocking task keeps the runtime from dropping), so a hub told to stop
//! is never found running beside its replacement. A second signal ends it
//! at once.

use std::future::Future;
use std::time::Duration;

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// Exit code when the grace ran out or a second signal came.
const FORCED_EXIT: i32 = 1;

/// Starts the signal thread and returns the future that completes on the
/// first SIGTERM or SIGINT. From that signal on, the process ends after
/// `grace` at the latest. Fails when the signal handlers cannot be
/// installed or the thread cannot be started.
pub fn shutdown_signal(grace: Duration) -> std::io::Result<impl Future<Output = ()> + Send> {
    let mut signals = Signals::new([SIGTERM, SIGINT])?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    std::thread::Builder::new()
        .name("ferry-signals".into())
        .spawn(move || {
            let mut received = signals.forever();
            let Some(signal) = received.next() else {
                return;
            };
            tracing::info!(
                signal,
                grace_seconds = grace.as_secs_f64(),
                "stopping: the hub ends within its grace"
            );
            // The receiver may be gone already (the hub ended on its own).
            let _ = stop.send(());
            std::thread::Builder::new()
                .name("ferry-grace".into())
                .spawn(move || {
                    std::thread::sleep(grace);
                    tracing::error!(
                        grace_seconds = grace.as_secs_f64(),
                        "the hub did not stop within its grace; exiting now"
                    );
                    std::process::exit(FORCED_EXIT);
                })
                .map_err(|error| {
                    tracing::error!(%error, "cannot time the grace; exiting now");
                    std::process::exit(FORCED_EXIT);
                })
                .ok();
            if let Some(signal) = received.next() {
                tracing::warn!(signal, "a second signal: exiting now");
                std::process::exit(FORCED_EXIT);
            }
        })?;
    Ok(async move {
        // A dropped sender (the thread could not run) never stops the hub
        // by itself; the grace thread is what bounds the stop.
        if stopped.await.is_err() {
            std::future::pending::<()>().await;
        }
    })
}
