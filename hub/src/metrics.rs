//! Prometheus metrics of the hub.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Label of the status-write counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabel {
    /// `written`, `unchanged`, `stale` (dropped: older than the live
    /// status, or for a work the hub does not have), `released`, `superseded`
    /// (held back while a newer session of the cluster lives), `coalesced`
    /// (replaced a report still waiting for a retry) or `error` (dropped:
    /// refused for good).
    pub outcome: &'static str,
}

/// Label of the watch-error counter: which watch of which resource failed.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WatchLabel {
    /// The watched resource, e.g. `manifestworks`.
    pub resource: &'static str,
    /// Which of the hub's watches: `index` or `deletion`.
    pub watch: &'static str,
}

/// Label of the Event counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EventOutcomeLabel {
    /// `published`, `failed` (the API server refused it) or `dropped` (the
    /// queue was full).
    pub outcome: &'static str,
}

/// Label of the certificate-reload counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CertReloadLabel {
    /// Whose certificate: `grpc`, `grpc-client-ca` or `webhook`.
    pub listener: &'static str,
    /// `reloaded`, or `failed` (the changed files were unusable; the previous
    /// certificate stays).
    pub outcome: &'static str,
}

/// Label naming one ManifestWork.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WorkLabel {
    /// The work's namespace (its cluster).
    pub namespace: String,
    /// The work's name.
    pub name: String,
}

/// Counters and gauges the hub updates as it serves agents.
#[derive(Default)]
pub struct HubMetrics {
    /// Agent sessions currently open on this replica.
    pub sessions: Gauge,
    /// Work upserts sent to agents.
    pub upserts_sent: Counter,
    /// Work deletes sent to agents.
    pub deletes_sent: Counter,
    /// Agent status reports by outcome.
    pub status_reports: Family<OutcomeLabel, Counter>,
    /// Errors the hub's watches met and recovered from.
    pub watch_errors: Family<WatchLabel, Counter>,
    /// 1 for each stored ManifestWork the hub cannot decode (and so skips).
    pub undecodable_works: Family<WorkLabel, Gauge>,
    /// Status writes the API server accepted (work status, `Deleting`
    /// conditions, released finalizers).
    pub status_writes: Counter,
    /// Reports dropped as stale: older than the live status, claiming a
    /// generation the work never had, or for a work the hub does not have.
    pub status_reports_stale: Counter,
    /// Status reads or writes the API server refused or did not answer.
    pub status_write_failures: Counter,
    /// Retries of status writes (after backoff).
    pub status_write_retries: Counter,
    /// Works whose latest report waits for a retry.
    pub status_reports_pending: Gauge,
    /// Kubernetes Events about works, by outcome.
    pub events: Family<EventOutcomeLabel, Counter>,
    /// Serving certificates (and client CAs) reloaded from changed files.
    pub certificate_reloads: Family<CertReloadLabel, Counter>,
}

impl HubMetrics {
    /// Registers every metric under the `ferry_hub` prefix.
    pub fn register(&self, registry: &mut Registry) {
        let registry = registry.sub_registry_with_prefix("ferry_hub");
        registry.register(
            "agent_sessions",
            "Open agent sessions",
            self.sessions.clone(),
        );
        registry.register(
            "work_upserts_sent",
            "Work upserts sent to agents",
            self.upserts_sent.clone(),
        );
        registry.register(
            "work_deletes_sent",
            "Work deletes sent to agents",
            self.deletes_sent.clone(),
        );
        registry.register(
            "status_reports",
            "Agent status reports by outcome",
            self.status_reports.clone(),
        );
        registry.register(
            "watch_errors",
            "Errors of the hub's watches, each retried with backoff",
            self.watch_errors.clone(),
        );
        registry.register(
            "undecodable_works",
            "Stored ManifestWorks the hub cannot decode and skips, by namespace and name",
            self.undecodable_works.clone(),
        );
        registry.register(
            "status_writes",
            "Status writes the API server accepted",
            self.status_writes.clone(),
        );
        registry.register(
            "status_reports_stale",
            "Status reports dropped as stale",
            self.status_reports_stale.clone(),
        );
        registry.register(
            "status_write_failures",
            "Status writes (or the reads before them) that failed",
            self.status_write_failures.clone(),
        );
        registry.register(
            "status_write_retries",
            "Status writes retried after a failure",
            self.status_write_retries.clone(),
        );
        registry.register(
            "status_reports_pending",
            "Works whose latest status report waits for a retry",
            self.status_reports_pending.clone(),
        );
        registry.register(
            "events",
            "Kubernetes Events about works, by outcome (published, failed, dropped)",
            self.events.clone(),
        );
        registry.register(
            "certificate_reloads",
            "Certificate files that changed, by listener and outcome (reloaded, failed)",
            self.certificate_reloads.clone(),
        );
    }
}
