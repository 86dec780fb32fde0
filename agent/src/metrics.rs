//! Prometheus metrics of the agent, served on its probe address at
//! `/metrics`. Every name is `ferry_agent_*` and is defined here only.
//!
//! Labels stay bounded: `kind` is the `apiVersion/kind` of a manifest whose
//! kind the spoke serves (the fleet's kinds, never object names), `outcome`
//! and `reason` come from closed sets.

use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;

use ferry_semantics::apply_outcome::Applied;

use crate::applier::ApplyError;

/// Prefix of every agent metric.
pub const PREFIX: &str = "ferry_agent";

/// Label naming a kind: `apiVersion/kind`, e.g. `apps/v1/Deployment`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabel {
    /// `apiVersion/kind` of the manifest.
    pub kind: String,
}

/// Labels of the apply counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ApplyLabel {
    /// `apiVersion/kind` of the manifest.
    pub kind: String,
    /// What the apply did; see [`apply_outcome`] and [`apply_failure`].
    pub outcome: &'static str,
}

/// Label of the session counters: why a session ended or an attempt failed.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabel {
    /// A closed set: see `session::end_reason`.
    pub reason: &'static str,
}

/// Label of the build info.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VersionLabel {
    version: &'static str,
}

/// The `outcome` label of a manifest apply that succeeded.
pub fn apply_outcome(applied: &Applied) -> &'static str {
    match applied {
        Applied::Created => "created",
        Applied::Updated => "updated",
        Applied::Unchanged => "unchanged",
        Applied::LeftAsIs => "left_as_is",
        Applied::Observed => "observed",
        Applied::Missing => "missing",
        Applied::LeftDeleted => "left_deleted",
    }
}

/// The `outcome` label of a manifest apply that failed.
pub fn apply_failure(error: &ApplyError) -> &'static str {
    match error {
        ApplyError::Conflict(_) => "conflict",
        ApplyError::Rejected { .. } => "rejected",
        ApplyError::Request { .. } => "request_failed",
        ApplyError::CrdNotEstablished { .. } => "crd_not_established",
        ApplyError::KindNotServed { .. } => "kind_not_served",
        ApplyError::KindTerminating { .. } => "kind_terminating",
        ApplyError::Missing { .. } => "not_found",
        ApplyError::Stale { .. } => "object_changed",
    }
}

/// Whether an apply wrote the object: what a drift correction is made of.
pub fn wrote(applied: &Applied) -> bool {
    matches!(applied, Applied::Created | Applied::Updated)
}

/// Counters, gauges and histograms the agent updates as it works. Cheap to
/// share: every metric is a handle onto shared atomics.
#[derive(Debug)]
pub struct AgentMetrics {
    /// Manifest applies by kind and outcome.
    pub applies: Family<ApplyLabel, Counter>,
    /// Seconds one manifest's apply call took (read, plan, write).
    pub apply_seconds: Histogram,
    /// Objects written again, by kind, because they drifted on the spoke
    /// after their work was fully applied (seen by a watch or a resync).
    pub drift_corrections: Family<KindLabel, Counter>,
    /// Drift watches open on the spoke, by kind: the label-selected watch
    /// of ferry's objects, plus one per object watched by name (or one
    /// unfiltered watch past the bound, or per namespace where the agent may
    /// not watch the kind cluster-wide).
    pub watches: Family<KindLabel, Gauge>,
    /// Objects the drift watches received (listed, changed or deleted), by
    /// kind: what a crowded spoke costs the agent.
    pub watch_objects: Family<KindLabel, Counter>,
    /// 1 while a session with the hub is established (Welcome received).
    pub hub_connected: Gauge,
    /// Hub sessions established.
    pub sessions_started: Counter,
    /// Established hub sessions that ended, by reason.
    pub sessions_ended: Family<ReasonLabel, Counter>,
    /// Attempts to open a hub session that failed before the hub's
    /// Welcome, by reason.
    pub connect_failures: Family<ReasonLabel, Counter>,
    /// Work status reports handed to the hub stream.
    pub status_reports_sent: Counter,
    /// Status reports that could not be sent because the session ended;
    /// they are sent again on the next session.
    pub status_reports_requeued: Counter,
    /// Deleted works whose objects the deletion brake keeps until a
    /// platform admin releases them.
    pub deletions_held: Gauge,
}

impl Default for AgentMetrics {
    fn default() -> Self {
        Self {
            applies: Family::default(),
            // 1 ms to about 16 s: a cached no-op read up to a slow write
            // with a CRD wait.
            apply_seconds: Histogram::new(exponential_buckets(0.001, 2.0, 15)),
            drift_corrections: Family::default(),
            watches: Family::default(),
            watch_objects: Family::default(),
            hub_connected: Gauge::default(),
            sessions_started: Counter::default(),
            sessions_ended: Family::default(),
            connect_failures: Family::default(),
            status_reports_sent: Counter::default(),
            status_reports_requeued: Counter::default(),
            deletions_held: Gauge::default(),
        }
    }
}

impl AgentMetrics {
    /// Registers every metric under the `ferry_agent` prefix, with the
    /// agent's version as build info.
    pub fn register(&self, registry: &mut Registry) {
        let registry = registry.sub_registry_with_prefix(PREFIX);
        registry.register(
            "build",
            "Build information of the agent",
            Info::new(VersionLabel {
                version: env!("CARGO_PKG_VERSION"),
            }),
        );
        registry.register(
            "applies",
            "Manifest applies by kind and outcome",
            self.applies.clone(),
        );
        registry.register(
            "apply_duration_seconds",
            "Seconds one manifest's apply took",
            self.apply_seconds.clone(),
        );
        registry.register(
            "drift_corrections",
            "Objects written again because they drifted on the spoke, by kind",
            self.drift_corrections.clone(),
        );
        registry.register(
            "watches_open",
            "Drift watches open on the spoke, by kind",
            self.watches.clone(),
        );
        registry.register(
            "watch_objects_received",
            "Objects the drift watches received (listed, changed or deleted), by kind",
            self.watch_objects.clone(),
        );
        registry.register(
            "hub_connected",
            "1 while a session with the hub is established",
            self.hub_connected.clone(),
        );
        registry.register(
            "hub_sessions_started",
            "Hub sessions established",
            self.sessions_started.clone(),
        );
        registry.register(
            "hub_sessions_ended",
            "Established hub sessions that ended, by reason",
            self.sessions_ended.clone(),
        );
        registry.register(
            "hub_connect_failures",
            "Attempts to open a hub session that failed before it was established, by reason",
            self.connect_failures.clone(),
        );
        registry.register(
            "deletions_held",
            "Deleted works whose objects the deletion brake keeps until a platform admin releases them",
            self.deletions_held.clone(),
        );
        registry.register(
            "status_reports_sent",
            "Work status reports sent to the hub",
            self.status_reports_sent.clone(),
        );
        registry.register(
            "status_reports_requeued",
            "Status reports not sent because the session ended; sent again on the next one",
            self.status_reports_requeued.clone(),
        );
    }

    /// Counts one manifest apply of `kind` that started at `started`.
    pub fn observe_apply(&self, kind: &str, outcome: &'static str, started: Instant) {
        self.apply_seconds.observe(started.elapsed().as_secs_f64());
        self.applies
            .get_or_create(&ApplyLabel {
                kind: kind.to_string(),
                outcome,
            })
            .inc();
    }

    /// Marks one drift watch of `kind` open until the guard is dropped.
    pub fn watch_open(&self, kind: &str) -> WatchOpen {
        let gauge = self
            .watches
            .get_or_create(&KindLabel {
                kind: kind.to_string(),
            })
            .clone();
        gauge.inc();
        WatchOpen(gauge)
    }
}

/// One open drift watch; counted in `watches_open` while it lives.
pub struct WatchOpen(Gauge);

impl Drop for WatchOpen {
    fn drop(&mut self) {
        self.0.dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(metrics: &AgentMetrics) -> String {
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
        text
    }

    #[test]
    fn the_exposition_names_build_info_and_counts_by_kind() {
        let metrics = AgentMetrics::default();
        metrics.observe_apply("v1/ConfigMap", "created", Instant::now());
        let text = encoded(&metrics);
        assert!(
            text.contains(&format!(
                "ferry_agent_build_info{{version=\"{}\"}} 1",
                env!("CARGO_PKG_VERSION")
            )),
            "{text}"
        );
        assert!(
            text.contains("ferry_agent_applies_total{kind=\"v1/ConfigMap\",outcome=\"created\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("ferry_agent_apply_duration_seconds_count 1"),
            "{text}"
        );
    }

    #[test]
    fn a_watch_counts_while_its_guard_lives() {
        let metrics = AgentMetrics::default();
        let kind = KindLabel {
            kind: "apps/v1/Deployment".into(),
        };
        let first = metrics.watch_open(&kind.kind);
        let second = metrics.watch_open(&kind.kind);
        assert_eq!(metrics.watches.get_or_create(&kind).get(), 2);
        drop(first);
        assert_eq!(metrics.watches.get_or_create(&kind).get(), 1);
        drop(second);
        assert_eq!(metrics.watches.get_or_create(&kind).get(), 0);
    }
}
