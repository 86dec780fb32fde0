//! Leader election among hub replicas: the controllers that must run once
//! (placement, taints, replica sets, work TTL, work deletion, the liveness
//! sweep) run only in the replica holding a `coordination.k8s.io` Lease;
//! every replica serves agents. The Lease is kept by `kube-lease-manager`
//! (server-side apply, so two replicas cannot both take it); a replica that
//! stops releases it at once, and one that dies loses it after the lease
//! duration.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use kube::Client;
use kube_lease_manager::LeaseManagerBuilder;
use tokio::sync::watch;
use tracing::{info, warn};

/// How this replica takes part in leader election.
#[derive(Debug, Clone)]
pub struct LeaderElection {
    /// Name of the Lease.
    pub lease_name: String,
    /// Namespace of the Lease (the hub's own).
    pub namespace: String,
    /// This replica's name in the Lease (the pod name).
    pub identity: String,
    /// How long the Lease holds without renewal: the longest a dead leader
    /// keeps the controllers from running elsewhere.
    pub lease_duration: Duration,
    /// How long before the Lease ends the leader renews it.
    pub renew_before: Duration,
}

/// Taking part in the election failed at the start.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// The Lease could not be read or created (RBAC: get, create, patch on
    /// `leases` in the hub's namespace).
    #[error("leader election with Lease {namespace}/{name}: {source}")]
    Lease {
        /// Lease namespace.
        namespace: String,
        /// Lease name.
        name: String,
        /// What went wrong.
        #[source]
        source: kube_lease_manager::LeaseManagerError,
    },
}

/// Starts taking part in the election; the receiver says whether this
/// replica leads. The Lease is released once every receiver is dropped.
/// Fails when the Lease cannot be set up.
pub async fn elect(
    client: Client,
    election: &LeaderElection,
) -> Result<watch::Receiver<bool>, LeaderError> {
    let manager = LeaseManagerBuilder::new(client, election.lease_name.clone())
        .with_namespace(election.namespace.clone())
        .with_identity(election.identity.clone())
        .with_duration(election.lease_duration.as_secs().max(2))
        .with_grace(election.renew_before.as_secs().max(1))
        .build()
        .await
        .map_err(|source| LeaderError::Lease {
            namespace: election.namespace.clone(),
            name: election.lease_name.clone(),
            source,
        })?;
    let (leading, task) = manager.watch().await;
    let identity = election.identity.clone();
    tokio::spawn(async move {
        match task.await {
            Ok(Ok(_)) => info!(%identity, "left the leader election"),
            Ok(Err(error)) => warn!(%identity, %error, "leader election ended"),
            Err(error) => warn!(%identity, %error, "leader election task failed"),
        }
    });
    Ok(leading)
}

/// How long [`while_leading`] waits before starting a controller again that
/// ended by itself while this replica leads.
const RESTART_AFTER: Duration = Duration::from_secs(5);

/// A future that completes when the controller it is given must stop.
pub type StopSignal = Pin<Box<dyn Future<Output = ()> + Send + Sync>>;

/// Runs `controller` whenever this replica leads (always, with no
/// election), until `stopping` turns true. The controller is given a signal
/// that fires when leadership is lost or the hub stops; it is started again
/// on the next win. Never fails: a controller's own errors are its own.
pub async fn while_leading<F, Fut>(
    leading: Option<watch::Receiver<bool>>,
    mut stopping: watch::Receiver<bool>,
    name: &'static str,
    controller: F,
) where
    F: Fn(StopSignal) -> Fut,
    Fut: Future<Output = ()>,
{
    let Some(mut leading) = leading else {
        let stop = Box::pin(async move {
            let _ = stopping.wait_for(|s| *s).await;
        });
        controller(stop).await;
        return;
    };
    loop {
        tokio::select! {
            won = leading.wait_for(|l| *l) => if won.is_err() { return },
            _ = stopping.wait_for(|s| *s) => return,
        }
        info!(controller = name, "leading: starting");
        let mut lost = leading.clone();
        let mut stop_rx = stopping.clone();
        let stop = Box::pin(async move {
            tokio::select! {
                _ = lost.wait_for(|l| !*l) => {}
                _ = stop_rx.wait_for(|s| *s) => {}
            }
        });
        controller(stop).await;
        if *stopping.borrow() {
            return;
        }
        if *leading.borrow() {
            // It ended by itself while this replica still leads. Starting
            // it again at once would spin a core for as long as it keeps
            // ending (as a disabled one does); wait a moment, or for the
            // loss of leadership or the hub's stop, whichever comes first.
            warn!(
                controller = name,
                "ended while leading; starting it again in {RESTART_AFTER:?}"
            );
            tokio::select! {
                _ = tokio::time::sleep(RESTART_AFTER) => {}
                _ = leading.wait_for(|l| !*l) => {}
                _ = stopping.wait_for(|s| *s) => return,
            }
            continue;
        }
        info!(controller = name, "no longer leading: stopped");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn a_controller_runs_only_while_leading_and_restarts_on_the_next_win() {
        let (lead_tx, lead_rx) = watch::channel(false);
        let (stop_tx, stop_rx) = watch::channel(false);
        // (starts, stops) of the controller so far.
        let (runs_tx, mut runs_rx) = watch::channel((0usize, 0usize));
        let runs_tx = Arc::new(runs_tx);
        let starts = Arc::new(AtomicUsize::new(0));
        let counted = starts.clone();
        let task = tokio::spawn(while_leading(Some(lead_rx), stop_rx, "test", move |stop| {
            counted.fetch_add(1, Ordering::SeqCst);
            let runs = runs_tx.clone();
            async move {
                runs.send_modify(|(s, _)| *s += 1);
                stop.await;
                runs.send_modify(|(_, e)| *e += 1);
            }
        }));
        assert_eq!(starts.load(Ordering::SeqCst), 0, "not leading: not started");
        lead_tx.send_replace(true);
        runs_rx
            .wait_for(|r| *r == (1, 0))
            .await
            .expect("started on a win");
        lead_tx.send_replace(false);
        runs_rx
            .wait_for(|r| *r == (1, 1))
            .await
            .expect("stopped on a loss");
        lead_tx.send_replace(true);
        runs_rx
            .wait_for(|r| *r == (2, 1))
            .await
            .expect("restarted on the next win");
        stop_tx.send_replace(true);
        task.await.expect("ends when the hub stops");
        assert_eq!(starts.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_controller_that_ends_by_itself_while_leading_is_restarted_after_a_pause_not_at_once()
    {
        let (_lead_tx, lead_rx) = watch::channel(true);
        let (stop_tx, stop_rx) = watch::channel(false);
        let stop_tx = Arc::new(stop_tx);
        let starts = Arc::new(AtomicUsize::new(0));
        let (counted, stopper) = (starts.clone(), stop_tx.clone());
        let task = tokio::spawn(while_leading(
            Some(lead_rx),
            stop_rx,
            "test",
            move |_stop| {
                // Paused time moves only while every task waits, so a loop
                // that restarts at once would hold it still for ever: past the
                // expected starts the hub is stopped, which ends any loop.
                if counted.fetch_add(1, Ordering::SeqCst) + 1 > 3 {
                    stopper.send_replace(true);
                }
                async {}
            },
        ));
        tokio::time::sleep(RESTART_AFTER * 2 + Duration::from_secs(2)).await;
        assert_eq!(starts.load(Ordering::SeqCst), 3, "at 0, 5 and 10 s");
        stop_tx.send_replace(true);
        task.await.expect("ends when the hub stops");
    }

    #[tokio::test]
    async fn without_an_election_the_controller_runs_until_the_hub_stops() {
        let (stop_tx, stop_rx) = watch::channel(false);
        let task = tokio::spawn(while_leading(None, stop_rx, "test", |stop| stop));
        stop_tx.send_replace(true);
        task.await.expect("ends when the hub stops");
    }
}
