//! Evaluates rollout gates' health expressions (tenant CEL) off the async
//! runtime, bounded three ways, so no tenant can starve the hub:
//!
//! - the static cost limit ([`compile_health`]) refuses an expression whose
//!   worst case is too large before it runs;
//! - every evaluation runs on a blocking thread holding one of a few
//!   permits, under a deadline; a runaway keeps its permit until it really
//!   ends, so at most that many threads ever burn;
//! - at most one evaluation per namespace is in flight, so one team cannot
//!   hold the whole pool.
//!
//! The threads and the per-namespace share are the agent's tenant pool
//! (`ferry_semantics::tenant_pool`), made once for both.
//!
//! Over any limit the verdict is an error naming it (the gate is then
//! `Unhealthy` with that message). The reconcile awaits the verdict; no
//! runtime worker ever evaluates CEL.

use std::sync::Arc;
use std::time::Duration;

use ferry_fleet_semantics::rollout_gates::{
    GroupFacts, HealthError, compile_health, evaluate_health,
};
use ferry_semantics::tenant_pool::{TenantPool, Unfinished};
use tokio::time::Instant;

/// Default number of health evaluations that may run at once.
pub const DEFAULT_HEALTH_PERMITS: usize = 2;
/// Default time one health evaluation may take, waiting for a permit
/// included.
pub const DEFAULT_HEALTH_DEADLINE: Duration = Duration::from_millis(500);

/// The pool's limits (the hub's `--health-eval-permits` and
/// `--health-eval-deadline-ms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthPoolConfig {
    /// How many evaluations may run at once (at least 1).
    pub permits: usize,
    /// How long one evaluation may take, waiting for its permit included.
    pub deadline: Duration,
}

impl Default for HealthPoolConfig {
    fn default() -> Self {
        Self {
            permits: DEFAULT_HEALTH_PERMITS,
            deadline: DEFAULT_HEALTH_DEADLINE,
        }
    }
}

/// A bounded pool of blocking threads for health expressions: the one
/// tenant pool (`ferry_semantics::tenant_pool`), one thread per namespace.
#[derive(Clone)]
pub struct HealthPool {
    pool: Arc<TenantPool>,
    config: HealthPoolConfig,
}

impl Default for HealthPool {
    fn default() -> Self {
        Self::new(HealthPoolConfig::default())
    }
}

impl HealthPool {
    /// A pool with `config`'s limits (a zero permit count counts as 1).
    pub fn new(config: HealthPoolConfig) -> Self {
        let config = HealthPoolConfig {
            permits: config.permits.max(1),
            ..config
        };
        Self {
            pool: Arc::new(TenantPool::new(config.permits, 1)),
            config,
        }
    }

    /// The verdict of `expression` (a gate's health check in `namespace`)
    /// over `facts`. Fails with what [`evaluate_health`] fails with, with
    /// [`HealthError::TooCostly`] over the static cost limit (without
    /// running it), [`HealthError::PoolBusy`] when no thread frees up
    /// before the deadline or an evaluation of `namespace` is still
    /// running that long, and [`HealthError::TimedOut`] past the deadline
    /// (the evaluation then runs on to its end, keeping its thread).
    pub async fn evaluate(
        &self,
        namespace: &str,
        expression: &str,
        facts: &GroupFacts,
    ) -> Result<bool, HealthError> {
        // Parsing and the estimate are linear in the (length-limited)
        // expression: cheap enough for the runtime, and a refusal needs
        // no permit.
        compile_health(expression)?;
        let expression = expression.to_string();
        let facts = facts.clone();
        self.run(namespace, move || evaluate_health(&expression, &facts))
            .await
    }

    /// Runs `evaluation` on the pool as `namespace`; fails as
    /// [`Self::evaluate`] says for the pool and the deadline.
    async fn run(
        &self,
        namespace: &str,
        evaluation: impl FnOnce() -> Result<bool, HealthError> + Send + 'static,
    ) -> Result<bool, HealthError> {
        let limit_ms = u64::try_from(self.config.deadline.as_millis()).unwrap_or(u64::MAX);
        let deadline = Instant::now() + self.config.deadline;
        match self.pool.run(namespace, deadline, evaluation).await {
            Ok(verdict) => verdict,
            Err(Unfinished::TenantBusy) => Err(HealthError::PoolBusy(format!(
                "an earlier health evaluation of namespace {namespace} is still running"
            ))),
            Err(Unfinished::PoolBusy) => Err(HealthError::PoolBusy(format!(
                "no evaluation slot of {} freed up within {limit_ms} ms",
                self.config.permits
            ))),
            Err(Unfinished::TimedOut) => Err(HealthError::TimedOut { limit_ms }),
            Err(Unfinished::Panicked(error)) => Err(HealthError::Execute(format!(
                "the evaluation ended abnormally: {error}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_fleet_semantics::rollout_gates::ClusterFacts;

    fn facts(n: usize) -> GroupFacts {
        GroupFacts {
            name: "canary".into(),
            total: n,
            succeeded: n,
            failed: 0,
            clusters: (0..n)
                .map(|i| ClusterFacts {
                    name: format!("c{i}"),
                    applied: true,
                    ..ClusterFacts::default()
                })
                .collect(),
        }
    }

    fn pool(permits: usize, ms: u64) -> HealthPool {
        HealthPool::new(HealthPoolConfig {
            permits,
            deadline: Duration::from_millis(ms),
        })
    }

    #[tokio::test]
    async fn an_ordinary_expression_gives_its_verdict() {
        let verdict = HealthPool::default()
            .evaluate("ns", "clusters.all(c, c.applied)", &facts(3))
            .await;
        assert_eq!(verdict, Ok(true));
    }

    #[tokio::test]
    async fn an_expression_over_the_static_limit_is_refused_without_a_permit() {
        let pool = pool(1, 100);
        let list = "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]";
        let mut expression = "true".to_string();
        for level in 0..9 {
            expression = format!("{list}.all(x{level}, {expression})");
        }
        let verdict = pool.evaluate("ns", &expression, &facts(1)).await;
        assert!(
            matches!(verdict, Err(HealthError::TooCostly { .. })),
            "{verdict:?}"
        );
        assert_eq!(pool.pool.available(), 1);
    }

    #[tokio::test]
    async fn a_runaway_times_out_keeps_its_permit_and_blocks_its_namespace() {
        // The deadline bounds the evaluations expected to succeed too: far
        // from what one takes, so only the runaway reaches it.
        let pool = pool(2, 1000);
        // A stand-in for a long CEL evaluation: it runs until released.
        let (release, wait) = std::sync::mpsc::channel::<()>();
        let verdict = pool
            .run("team-a", move || {
                let _ = wait.recv();
                Ok(true)
            })
            .await;
        assert_eq!(verdict, Err(HealthError::TimedOut { limit_ms: 1000 }));
        // The runaway still runs: its permit is held and its namespace
        // may not start another.
        assert_eq!(pool.pool.available(), 1);
        let again = pool.evaluate("team-a", "true", &facts(1)).await;
        assert!(
            matches!(&again, Err(HealthError::PoolBusy(m)) if m.contains("team-a")),
            "{again:?}"
        );
        // Another namespace still gets the free permit.
        assert_eq!(pool.evaluate("team-b", "true", &facts(1)).await, Ok(true));
        // Once the runaway really ends, its permit and namespace are free.
        drop(release);
        pool.pool.until_idle().await;
        assert_eq!(pool.evaluate("team-a", "true", &facts(1)).await, Ok(true));
    }

    #[tokio::test]
    async fn with_every_permit_held_an_evaluation_is_refused_as_pool_busy() {
        let pool = pool(1, 50);
        let (release, wait) = std::sync::mpsc::channel::<()>();
        let _ = pool
            .run("team-a", move || {
                let _ = wait.recv();
                Ok(true)
            })
            .await;
        let busy = pool.evaluate("team-b", "true", &facts(1)).await;
        assert!(
            matches!(&busy, Err(HealthError::PoolBusy(m)) if m.contains("no evaluation slot")),
            "{busy:?}"
        );
        drop(release);
    }
}
