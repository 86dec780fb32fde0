//! What the agent tells its probes and Prometheus: its metrics and whether
//! it is ready, shared by every part of the agent.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::registry::Registry;

use crate::metrics::AgentMetrics;
use crate::readiness::Readiness;

/// What the agent tells its probes and Prometheus: metrics, and whether it
/// is ready. Cheap to clone; clones share everything.
#[derive(Debug, Clone)]
pub struct Observability {
    /// The agent's metrics.
    pub metrics: Arc<AgentMetrics>,
    /// Whether the agent has a hub session and spoke access.
    pub readiness: Readiness,
}

impl Observability {
    /// Fresh metrics, not ready; the spoke API server is checked every
    /// `spoke_check_interval` while the agent runs.
    pub fn new(spoke_check_interval: Duration) -> Self {
        Self {
            metrics: Arc::new(AgentMetrics::default()),
            readiness: Readiness::new(spoke_check_interval),
        }
    }

    /// A registry holding every agent metric, for `/metrics`.
    pub fn registry(&self) -> Registry {
        let mut registry = Registry::default();
        self.metrics.register(&mut registry);
        registry
    }
}

impl Default for Observability {
    fn default() -> Self {
        Self::new(DEFAULT_SPOKE_CHECK_INTERVAL)
    }
}

/// How often the spoke API server is checked for readiness by default.
pub const DEFAULT_SPOKE_CHECK_INTERVAL: Duration = Duration::from_secs(10);
