//! The one pool tenant expressions (CEL, JSONPath) run on, on the hub and
//! on the agent, so the tenancy limits are made once: each evaluation runs
//! on a blocking thread, never on the async runtime; at most `threads` run
//! at once, and one tenant (a namespace on the hub, a work's owner on the
//! agent) holds at most `per_tenant` of them, so a team whose expressions
//! all run to their bounds keeps its own share busy and every other team's
//! still run. A permit is held until the evaluation really ends, past its
//! deadline too (neither CEL nor JSONPath can be stopped midway), so
//! runaways never take more threads than the bounds.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Semaphore;
use tokio::time::{Instant, timeout_at};

/// Why [`TenantPool::run`] gave no value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unfinished {
    /// The tenant's share stayed full until the deadline.
    #[error("the tenant's share of the pool stayed busy")]
    TenantBusy,
    /// Every thread of the pool stayed busy until the deadline.
    #[error("every thread of the pool stayed busy")]
    PoolBusy,
    /// The deadline passed while it ran (it runs on to its end, holding
    /// its permits).
    #[error("ran past its deadline")]
    TimedOut,
    /// The evaluation thread panicked.
    #[error("ended abnormally: {0}")]
    Panicked(String),
}

/// A bounded pool of blocking threads, shared fairly by tenant.
pub struct TenantPool {
    permits: Arc<Semaphore>,
    threads: usize,
    per_tenant: usize,
    /// Each tenant's share, while some evaluation of it runs or waits: an
    /// entry nobody holds is dropped at the next lookup, so the map is
    /// never larger than the evaluations in flight.
    shares: Mutex<HashMap<String, Arc<Semaphore>>>,
}

impl TenantPool {
    /// A pool of `threads` (at least 1) of which one tenant holds at most
    /// `per_tenant` (at least 1, at most `threads`).
    pub fn new(threads: usize, per_tenant: usize) -> Self {
        let threads = threads.max(1);
        Self {
            permits: Arc::new(Semaphore::new(threads)),
            threads,
            per_tenant: per_tenant.clamp(1, threads),
            shares: Mutex::new(HashMap::new()),
        }
    }

    /// How many threads are free now.
    pub fn available(&self) -> usize {
        self.permits.available_permits()
    }

    /// Waits until no evaluation runs, runaways included (every thread
    /// free again).
    pub async fn until_idle(&self) {
        let threads = u32::try_from(self.threads).unwrap_or(u32::MAX);
        // The semaphore is never closed, so this only waits.
        let _all = self.permits.acquire_many(threads).await;
    }

    /// `tenant`'s share of the pool.
    fn share(&self, tenant: &str) -> Arc<Semaphore> {
        let mut shares = self.shares.lock().unwrap_or_else(PoisonError::into_inner);
        shares.retain(|_, share| Arc::strong_count(share) > 1);
        shares
            .entry(tenant.to_string())
            .or_insert_with(|| Arc::new(Semaphore::new(self.per_tenant)))
            .clone()
    }

    /// Runs `evaluate` on a blocking thread once a permit of `tenant`'s
    /// share and one of the pool are free, all before `deadline`. Fails
    /// when no permit came free in time ([`Unfinished::TenantBusy`],
    /// [`Unfinished::PoolBusy`]), the deadline passed first, or `evaluate`
    /// panicked.
    pub async fn run<T: Send + 'static>(
        &self,
        tenant: &str,
        deadline: Instant,
        evaluate: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, Unfinished> {
        let share = self.share(tenant);
        let Ok(Ok(owned)) = timeout_at(deadline, share.acquire_owned()).await else {
            return Err(Unfinished::TenantBusy);
        };
        let Ok(Ok(permit)) = timeout_at(deadline, self.permits.clone().acquire_owned()).await
        else {
            return Err(Unfinished::PoolBusy);
        };
        let task = tokio::task::spawn_blocking(move || {
            let _permits = (owned, permit);
            evaluate()
        });
        match timeout_at(deadline, task).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => Err(Unfinished::Panicked(error.to_string())),
            Err(_) => Err(Unfinished::TimedOut),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Starts an evaluation of `tenant` that runs until its sender is
    /// dropped, and waits until it holds its permits (it times out at
    /// once, and runs on).
    async fn runaway(pool: &TenantPool, tenant: &str) -> std::sync::mpsc::Sender<()> {
        let (release, wait) = std::sync::mpsc::channel::<()>();
        let ran = pool
            .run(
                tenant,
                Instant::now() + Duration::from_millis(20),
                move || {
                    let _ = wait.recv();
                },
            )
            .await;
        assert_eq!(ran, Err(Unfinished::TimedOut));
        release
    }

    /// A deadline for an evaluation expected to be refused as busy.
    fn soon() -> Instant {
        Instant::now() + Duration::from_millis(50)
    }

    /// A deadline for one expected to run: not what is tested, only a
    /// bound, so it is far.
    fn far() -> Instant {
        Instant::now() + Duration::from_secs(60)
    }

    #[tokio::test]
    async fn a_tenants_runaways_fill_its_share_and_leave_the_rest_of_the_pool_to_others() {
        let pool = TenantPool::new(3, 2);
        let a1 = runaway(&pool, "team-a").await;
        let a2 = runaway(&pool, "team-a").await;
        assert_eq!(pool.available(), 1);
        // team-a's share is full: its next evaluation waits, then is busy.
        assert_eq!(
            pool.run("team-a", soon(), || 1).await,
            Err(Unfinished::TenantBusy)
        );
        // Another team still runs on the free thread.
        assert_eq!(pool.run("team-b", far(), || 2).await, Ok(2));
        // Once the runaways really end, their permits are free again.
        drop((a1, a2));
        pool.until_idle().await;
        assert_eq!(pool.run("team-a", far(), || 3).await, Ok(3));
    }

    #[tokio::test]
    async fn with_every_thread_held_by_others_an_evaluation_is_pool_busy() {
        let pool = TenantPool::new(2, 1);
        let a = runaway(&pool, "team-a").await;
        let b = runaway(&pool, "team-b").await;
        assert_eq!(
            pool.run("team-c", soon(), || ()).await,
            Err(Unfinished::PoolBusy)
        );
        drop((a, b));
    }

    #[tokio::test]
    async fn a_panic_is_an_error_and_frees_its_permits() {
        let pool = TenantPool::new(1, 1);
        let ran = pool.run("team-a", far(), || -> u8 { panic!("boom") }).await;
        assert!(matches!(ran, Err(Unfinished::Panicked(_))), "{ran:?}");
        assert_eq!(pool.run("team-a", far(), || 7).await, Ok(7));
    }

    #[test]
    fn the_shares_map_holds_only_tenants_in_flight() {
        let pool = TenantPool::new(2, 1);
        for i in 0..1000 {
            drop(pool.share(&format!("tenant-{i}")));
        }
        let held = pool.share("last");
        assert_eq!(pool.shares.lock().expect("lock").len(), 1);
        drop(held);
    }
}
