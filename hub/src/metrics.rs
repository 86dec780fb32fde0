//! Prometheus metrics of the hub.

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;

/// Why the hub refused an agent's stream: the `reason` label of
/// `ferry_hub_agent_refusals_total`. A closed set; a new refusal path adds
/// a variant here (and its label in [`RefusalReason::as_str`]).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum RefusalReason {
    /// No token, not a bearer token, or a token the API server does not
    /// accept for ferry's audience (unknown, expired, revoked).
    Unauthenticated,
    /// A valid token of another account than the cluster's agent
    /// ServiceAccount.
    WrongServiceAccount,
    /// The token is another cluster's agent than the one the agent names.
    WrongCluster,
    /// The cluster the agent names is not a cluster name.
    BadClusterName,
    /// The token's cluster has no ManagedCluster (not joined).
    UnknownCluster,
    /// The token's ManagedCluster does not accept its agent
    /// (`spec.hubAcceptsClient: false`).
    NotAccepted,
    /// The peer presented more unknown tokens than its budget allows.
    OverBudget,
    /// The TokenReview (or ManagedCluster read) failed: the hub's API
    /// server did not answer.
    ReviewFailed,
    /// Every connect-review slot stayed taken (a connect storm): the agent
    /// backs off and redials.
    ReviewBusy,
    /// The agent speaks a protocol version this hub does not serve.
    ProtocolVersion,
    /// No Hello in time, or a first message that is not a usable Hello.
    BadHello,
    /// A client certificate that is not the agent CA's, or that a change
    /// of its cluster or agent account revoked.
    Certificate,
}

impl RefusalReason {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unauthenticated => "unauthenticated",
            Self::WrongServiceAccount => "wrong_service_account",
            Self::WrongCluster => "wrong_cluster",
            Self::BadClusterName => "bad_cluster_name",
            Self::UnknownCluster => "unknown_cluster",
            Self::NotAccepted => "not_accepted",
            Self::OverBudget => "over_budget",
            Self::ReviewFailed => "review_failed",
            Self::ReviewBusy => "review_busy",
            Self::ProtocolVersion => "protocol_version",
            Self::BadHello => "bad_hello",
            Self::Certificate => "certificate",
        }
    }
}

impl std::fmt::Display for RefusalReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl EncodeLabelValue for RefusalReason {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        use std::fmt::Write;
        encoder.write_str(self.as_str())
    }
}

/// Label of the refusal counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RefusalLabel {
    /// Why the agent was refused.
    pub reason: RefusalReason,
}

/// Label of the sessions-opened counter: what the agent authenticated with.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CredentialLabel {
    /// `token` or `certificate`.
    pub credential: &'static str,
}

/// Label of the build info.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VersionLabel {
    version: &'static str,
}

/// A latency histogram in seconds, 0.5 ms to about 16 s: from an in-memory
/// webhook decision to a slow API server round trip.
pub fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0005, 2.0, 16))
}

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

/// Label of the closed-connection counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ConnectionClosedLabel {
    /// `max_connections` (the port held its limit), `max_connections_per_peer`
    /// (the peer's address held its share), `unauthenticated_idle` (no
    /// authenticated stream in time), `tls_handshake_queued` (no turn to
    /// start a TLS handshake in time), `tls_handshake_timeout` or
    /// `tls_handshake_failed`.
    pub reason: &'static str,
}

/// Label of the agent port's TLS handshake gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HandshakeStageLabel {
    /// `waiting` (accepted, waiting for the caches or for its turn) or
    /// `in_progress`.
    pub stage: &'static str,
}

/// Label of the oversized-message counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MessageKindLabel {
    /// `hello` or `report` (any message after the Hello).
    pub message: &'static str,
}

/// Label naming one ManifestWork.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WorkLabel {
    /// The work's namespace (its cluster). Not `namespace`: a Prometheus
    /// scrape sets that to the hub pod's namespace and renames ours.
    pub work_namespace: String,
    /// The work's name.
    pub name: String,
}

/// Label naming one admission policy the hub installs.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PolicyLabel {
    /// The policy's (and its binding's) name.
    pub policy: String,
}

/// Label naming one ManifestWorkReplicaSet. Not `namespace`: a scrape
/// labels every sample with the hub Pod's namespace under that name.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReplicaSetLabel {
    /// The replica set's namespace.
    pub replica_set_namespace: String,
    /// The replica set's name.
    pub replica_set: String,
}

/// The rollout gauges of each replica set, set by the replica set
/// controller from the status it decides (only the leader runs it, so only
/// the leader exports them). Cheap to clone: handles onto shared atomics.
#[derive(Clone, Debug, Default)]
pub struct RolloutMetrics {
    /// 1 while the replica set's rollout is halted, else 0.
    pub halted: Family<ReplicaSetLabel, Gauge>,
    /// 1 while a `rollbackAll` holds its clusters on an older revision.
    pub rolled_back: Family<ReplicaSetLabel, Gauge>,
    /// Its open gates holding the rollout (waiting, awaiting approval,
    /// unhealthy).
    pub gates_holding: Family<ReplicaSetLabel, Gauge>,
    /// Its removals the deletion budget holds until a release.
    pub deletions_held: Family<ReplicaSetLabel, Gauge>,
    /// Its placements holding their decisions after a lost grant.
    pub decisions_held: Family<ReplicaSetLabel, Gauge>,
}

impl RolloutMetrics {
    /// Sets the gauges of the replica set `namespace`/`name`.
    pub fn set(
        &self,
        namespace: &str,
        name: &str,
        signals: &crate::replica_set::rollout_signals::RolloutSignals,
    ) {
        let label = ReplicaSetLabel {
            replica_set_namespace: namespace.to_string(),
            replica_set: name.to_string(),
        };
        self.halted
            .get_or_create(&label)
            .set(i64::from(signals.halted));
        self.rolled_back
            .get_or_create(&label)
            .set(i64::from(signals.rolled_back));
        self.gates_holding
            .get_or_create(&label)
            .set(i64::try_from(signals.gates_holding).unwrap_or(i64::MAX));
        self.deletions_held
            .get_or_create(&label)
            .set(i64::try_from(signals.deletions_held).unwrap_or(i64::MAX));
        self.decisions_held
            .get_or_create(&label)
            .set(i64::try_from(signals.decisions_held).unwrap_or(i64::MAX));
    }

    /// Drops the gauges of a replica set that is gone.
    pub fn forget(&self, namespace: &str, name: &str) {
        let label = ReplicaSetLabel {
            replica_set_namespace: namespace.to_string(),
            replica_set: name.to_string(),
        };
        self.halted.remove(&label);
        self.rolled_back.remove(&label);
        self.gates_holding.remove(&label);
        self.deletions_held.remove(&label);
        self.decisions_held.remove(&label);
    }

    /// Drops every gauge: this replica stopped running the controller.
    pub fn clear(&self) {
        self.halted.clear();
        self.rolled_back.clear();
        self.gates_holding.clear();
        self.deletions_held.clear();
        self.decisions_held.clear();
    }
}

/// Counters, gauges and histograms the hub updates as it serves agents.
pub struct HubMetrics {
    /// 1 for each admission policy the leader found missing, not enforced
    /// or altered at its last check, else 0.
    pub admission_policy_missing: Family<PolicyLabel, Gauge>,
    /// Re-applies of admission policies the leader found missing or altered.
    pub admission_policy_repairs: Family<PolicyLabel, Counter>,
    /// Agent sessions currently open on this replica.
    pub sessions: Gauge,
    /// 1 while this replica holds the leader Lease (runs the controllers
    /// that must run once), else 0.
    pub leader: Gauge,
    /// 1 while the leader publishes ClusterProfiles, else 0 (no CRD, no
    /// namespace, turned off, or not leading).
    pub cluster_profiles_publishing: Gauge,
    /// 1 while the leader publishes placements' vendor-neutral
    /// PlacementDecisions (`multicluster.x-k8s.io`), else 0.
    pub inventory_decisions_publishing: Gauge,
    /// Work upserts sent to agents.
    pub upserts_sent: Counter,
    /// Work deletes sent to agents.
    pub deletes_sent: Counter,
    /// Agent status reports by outcome, counted once each is settled.
    pub status_reports: Family<OutcomeLabel, Counter>,
    /// Agent status reports as they arrive, before any is written: a report
    /// whose status is visible on the API server is already counted here.
    pub status_reports_received: Counter,
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
    /// Seconds each status write request took (work status patches,
    /// `Deleting` conditions, released finalizers), failed ones included.
    pub status_write_seconds: Histogram,
    /// Seconds each TokenReview took, failed ones included.
    pub token_review_seconds: Histogram,
    /// Seconds the admission webhook took to answer each review.
    pub webhook_review_seconds: Histogram,
    /// Agent streams refused, by reason.
    pub agent_refusals: Family<RefusalLabel, Counter>,
    /// Agent sessions opened, by what the agent authenticated with.
    pub sessions_opened: Family<CredentialLabel, Counter>,
    /// Client certificates issued to agents.
    pub certificates_issued: Counter,
    /// Kubernetes Events about works, by outcome.
    pub events: Family<EventOutcomeLabel, Counter>,
    /// Serving certificates (and client CAs) reloaded from changed files.
    pub certificate_reloads: Family<CertReloadLabel, Counter>,
    /// Agent-port connections the hub closed before they were served, or
    /// because they stayed unauthenticated, by reason.
    pub connections_closed: Family<ConnectionClosedLabel, Counter>,
    /// Agent-port connections waiting to start their TLS handshake, and
    /// handshakes in progress.
    pub tls_handshakes: Family<HandshakeStageLabel, Gauge>,
    /// Agent sessions ended because a message was over its cap, by message.
    pub messages_too_large: Family<MessageKindLabel, Counter>,
    /// The rollout gauges of each replica set.
    pub rollouts: RolloutMetrics,
    /// Accepted clusters whose agent is not connected, as of the leader's
    /// last liveness sweep (0 on other replicas).
    pub clusters_disconnected: Gauge,
    /// Clusters whose agent's deletion brake holds deletions, as their
    /// ManagedClusters said at the leader's last liveness sweep (0 on other
    /// replicas).
    pub clusters_deletions_held: Gauge,
}

impl Default for HubMetrics {
    fn default() -> Self {
        Self {
            sessions: Gauge::default(),
            leader: Gauge::default(),
            cluster_profiles_publishing: Gauge::default(),
            inventory_decisions_publishing: Gauge::default(),
            upserts_sent: Counter::default(),
            deletes_sent: Counter::default(),
            status_reports: Family::default(),
            status_reports_received: Counter::default(),
            watch_errors: Family::default(),
            undecodable_works: Family::default(),
            admission_policy_missing: Family::default(),
            admission_policy_repairs: Family::default(),
            status_writes: Counter::default(),
            status_reports_stale: Counter::default(),
            status_write_failures: Counter::default(),
            status_write_retries: Counter::default(),
            status_reports_pending: Gauge::default(),
            status_write_seconds: latency_histogram(),
            token_review_seconds: latency_histogram(),
            webhook_review_seconds: latency_histogram(),
            agent_refusals: Family::default(),
            sessions_opened: Family::default(),
            certificates_issued: Counter::default(),
            events: Family::default(),
            certificate_reloads: Family::default(),
            connections_closed: Family::default(),
            tls_handshakes: Family::default(),
            messages_too_large: Family::default(),
            rollouts: RolloutMetrics::default(),
            clusters_disconnected: Gauge::default(),
            clusters_deletions_held: Gauge::default(),
        }
    }
}

impl HubMetrics {
    /// Registers every metric under the `ferry_hub` prefix.
    pub fn register(&self, registry: &mut Registry) {
        let registry = registry.sub_registry_with_prefix("ferry_hub");
        self.register_replica(registry);
        self.register_agents(registry);
        self.register_status(registry);
        self.register_rollouts(registry);
    }

    /// Registers the metrics of this replica: its build, leadership, what it
    /// publishes, its watches, policies, Events, certificates and webhook.
    fn register_replica(&self, registry: &mut Registry) {
        registry.register(
            "build",
            "Build information of the hub",
            Info::new(VersionLabel {
                version: env!("CARGO_PKG_VERSION"),
            }),
        );
        registry.register(
            "leader",
            "1 while this replica holds the leader Lease",
            self.leader.clone(),
        );
        registry.register(
            "cluster_profiles_publishing",
            "1 while the leader publishes ClusterProfiles (their CRD served, their namespace there)",
            self.cluster_profiles_publishing.clone(),
        );
        registry.register(
            "inventory_decisions_publishing",
            "1 while the leader publishes placements' multicluster.x-k8s.io PlacementDecisions (their CRD served)",
            self.inventory_decisions_publishing.clone(),
        );
        registry.register(
            "watch_errors",
            "Errors of the hub's watches, each retried with backoff",
            self.watch_errors.clone(),
        );
        registry.register(
            "admission_policy_missing",
            "1 for each admission policy found missing, not enforced or altered at the last check",
            self.admission_policy_missing.clone(),
        );
        registry.register(
            "admission_policy_repairs",
            "Re-applies of admission policies found missing or altered",
            self.admission_policy_repairs.clone(),
        );
        registry.register(
            "undecodable_works",
            "Stored ManifestWorks the hub cannot decode and skips, by namespace and name",
            self.undecodable_works.clone(),
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
        registry.register(
            "webhook_review_duration_seconds",
            "Seconds the admission webhook took to answer a review",
            self.webhook_review_seconds.clone(),
        );
    }

    /// Registers the metrics of agents: sessions, what is sent to them, how
    /// they are admitted and refused, and the clusters whose agents are away or
    /// braking.
    fn register_agents(&self, registry: &mut Registry) {
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
            "token_review_duration_seconds",
            "Seconds each TokenReview of an agent token took",
            self.token_review_seconds.clone(),
        );
        registry.register(
            "agent_refusals",
            "Agent streams refused, by reason",
            self.agent_refusals.clone(),
        );
        registry.register(
            "agent_sessions_opened",
            "Agent sessions opened, by what the agent authenticated with (token, certificate)",
            self.sessions_opened.clone(),
        );
        registry.register(
            "agent_certificates_issued",
            "Client certificates issued to agents",
            self.certificates_issued.clone(),
        );
        registry.register(
            "agent_connections_closed",
            "Agent-port connections closed by the hub before or without an authenticated stream, by reason",
            self.connections_closed.clone(),
        );
        registry.register(
            "agent_tls_handshakes",
            "Agent-port connections waiting to start their TLS handshake (waiting) and handshakes under way (in_progress)",
            self.tls_handshakes.clone(),
        );
        registry.register(
            "agent_messages_too_large",
            "Agent sessions ended because a message was over its cap, by message (hello, report)",
            self.messages_too_large.clone(),
        );
        registry.register(
            "clusters_disconnected",
            "Accepted clusters whose agent is not connected, as of the leader's last liveness sweep",
            self.clusters_disconnected.clone(),
        );
        registry.register(
            "clusters_deletions_held",
            "Clusters whose agent's deletion brake holds deletions until a release on the spoke, as of the leader's last liveness sweep",
            self.clusters_deletions_held.clone(),
        );
    }

    /// Registers the metrics of status reports from agents and their writes to
    /// the hub.
    fn register_status(&self, registry: &mut Registry) {
        registry.register(
            "status_reports",
            "Agent status reports by outcome",
            self.status_reports.clone(),
        );
        registry.register(
            "status_reports_received",
            "Agent status reports as they arrive, before any is written",
            self.status_reports_received.clone(),
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
            "status_write_duration_seconds",
            "Seconds each status write request to the API server took",
            self.status_write_seconds.clone(),
        );
    }

    /// Registers the metrics of replica-set rollouts: halts, rollbacks, gates
    /// and held deletions.
    fn register_rollouts(&self, registry: &mut Registry) {
        registry.register(
            "rollout_halted",
            "1 while a replica set's rollout is halted (past maxFailures, or a mandatory group failed)",
            self.rollouts.halted.clone(),
        );
        registry.register(
            "rollout_rolled_back",
            "1 while a rollbackAll holds a replica set's clusters on an older revision",
            self.rollouts.rolled_back.clone(),
        );
        registry.register(
            "rollout_gates_holding",
            "Open rollout gates of a replica set holding it (waiting, awaiting approval, unhealthy)",
            self.rollouts.gates_holding.clone(),
        );
        registry.register(
            "replica_set_deletions_held",
            "Removals of a replica set's works its deletion budget holds until someone with the platform role releases them",
            self.rollouts.deletions_held.clone(),
        );
        registry.register(
            "replica_set_decisions_held",
            "Placements of a replica set holding their decisions after a lost grant",
            self.rollouts.decisions_held.clone(),
        );
    }

    /// Counts one agent-port connection closed for `reason`.
    pub fn connection_closed(&self, reason: &'static str) {
        self.connections_closed
            .get_or_create(&ConnectionClosedLabel { reason })
            .inc();
    }

    /// Counts one session ended for an oversized `message`.
    pub fn message_too_large(&self, message: &'static str) {
        self.messages_too_large
            .get_or_create(&MessageKindLabel { message })
            .inc();
    }

    /// Counts one refused agent stream.
    pub fn refused(&self, reason: RefusalReason) {
        self.agent_refusals
            .get_or_create(&RefusalLabel { reason })
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_info_histograms_and_refusals_by_reason_are_exposed() {
        let metrics = HubMetrics::default();
        metrics.refused(RefusalReason::Unauthenticated);
        metrics.token_review_seconds.observe(0.01);
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
        for expected in [
            format!(
                "ferry_hub_build_info{{version=\"{}\"}} 1",
                env!("CARGO_PKG_VERSION")
            ),
            "ferry_hub_agent_refusals_total{reason=\"unauthenticated\"} 1".to_string(),
            "ferry_hub_token_review_duration_seconds_count 1".to_string(),
            "ferry_hub_status_write_duration_seconds_count 0".to_string(),
            "ferry_hub_webhook_review_duration_seconds_count 0".to_string(),
        ] {
            assert!(text.contains(&expected), "{expected} in:\n{text}");
        }
    }

    #[test]
    fn rollout_gauges_are_set_per_replica_set_forgotten_and_cleared() {
        use crate::replica_set::rollout_signals::RolloutSignals;
        let metrics = HubMetrics::default();
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let encoded = || {
            let mut text = String::new();
            prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
            text
        };
        let halted = RolloutSignals {
            halted: true,
            rolled_back: false,
            gates_holding: 2,
            deletions_held: 3,
            decisions_held: 1,
        };
        metrics.rollouts.set("apps", "web", &halted);
        metrics
            .rollouts
            .set("apps", "api", &RolloutSignals::default());
        let text = encoded();
        for expected in [
            "ferry_hub_rollout_halted{replica_set_namespace=\"apps\",replica_set=\"web\"} 1",
            "ferry_hub_rollout_halted{replica_set_namespace=\"apps\",replica_set=\"api\"} 0",
            "ferry_hub_rollout_rolled_back{replica_set_namespace=\"apps\",replica_set=\"web\"} 0",
            "ferry_hub_rollout_gates_holding{replica_set_namespace=\"apps\",replica_set=\"web\"} 2",
            "ferry_hub_replica_set_deletions_held{replica_set_namespace=\"apps\",replica_set=\"web\"} 3",
            "ferry_hub_replica_set_decisions_held{replica_set_namespace=\"apps\",replica_set=\"web\"} 1",
            "ferry_hub_clusters_disconnected 0",
            "ferry_hub_clusters_deletions_held 0",
        ] {
            assert!(text.contains(expected), "{expected} in:\n{text}");
        }
        metrics.rollouts.forget("apps", "web");
        let text = encoded();
        assert!(!text.contains("replica_set=\"web\""), "{text}");
        assert!(text.contains("replica_set=\"api\""), "{text}");
        metrics.rollouts.clear();
        assert!(!encoded().contains("ferry_hub_rollout_"));
        assert!(!encoded().contains("_held{"));
    }
}
