//! The ferry agent: dials the hub, applies the works of its cluster with
//! server-side apply, and reports per-manifest status back.
#![forbid(unsafe_code)]

// The pipeline: main -> agent -> session -> work_workers -> reconcile ->
// applier.

/// The composition root: builds and runs every part below.
mod agent;
/// Writes one manifest with its update strategy (one file each).
pub mod applier;
/// The client certificate the hub issued, dialled with instead of the token.
pub mod client_certificate;
/// One pass over a work's manifests, as a status for the hub.
pub mod reconcile;
/// When to dial the hub again after a session ends.
pub mod redial;
/// The connection to the hub: dial, Hello, works in, status out.
pub mod session;
/// What the Hello tells the hub of the spoke: its version, its sealing keys.
pub mod spoke_facts;
/// The latest status of every work, drained by the session.
pub mod status_board;
/// One task per work: applies it, again on drift, and lets it go.
pub mod work_workers;

// What a pass decides with.

/// The conditions the agent reports, per manifest and per work.
pub mod conditions;
/// `dependsOn` between this cluster's works, held by the agent.
pub mod dependencies;
/// Readiness rules of a waiting work's dependencies.
pub mod dependency_readiness;
/// Kinds resolved to API resources.
pub mod discovery;
/// Watches of managed objects that wake their work on drift.
pub mod drift;
/// The executor check (SubjectAccessReviews on the spoke).
pub mod executor;
/// Which lists of a kind merge by key (the spoke's OpenAPI).
pub mod list_schema;
/// Which works list which spoke objects; the younger yields.
pub mod ownership;
/// Condition rules, feedback and readiness rules on the tenant pool.
pub mod rule_pool;
/// The cluster's sealing keys, and sealed Secrets opened at apply time.
pub mod sealing;
/// The breaker against any fight over one spoke object.
pub mod write_breaker;
/// Whose identity the agent writes spoke objects with.
pub mod write_identity;

// What the agent keeps on the spoke, and lets go of.

/// `AppliedManifestWork`: the durable record of what was applied.
pub mod applied_works;
/// Letting go of every object of a work that is going away.
pub mod deletion;
/// The last line against a mass deletion, whatever the hub says.
pub mod deletion_brake;
/// Objects a work no longer names, released after a pass.
mod garbage_collection;
/// Records of works the hub no longer has.
pub mod orphan_records;
/// Marking objects as held by a work, and letting them go.
pub mod release;

// The spoke client and what the agent shows of itself.

/// The agent's Prometheus metrics.
pub mod metrics;
/// Metrics and readiness, shared by every part of the agent.
pub mod observability;
/// `/healthz`, `/readyz` and `/metrics`.
pub mod probes;
/// Whether the agent can do its job right now (`/readyz`).
pub mod readiness;
/// The spoke's Kubernetes client (HTTP/2 when offered).
pub mod spoke_client;
/// One trace span per call to the spoke's API server.
pub mod spoke_trace;

pub use agent::{AgentOptions, DeletionBrakeOptions, run_agent};
pub use observability::{DEFAULT_SPOKE_CHECK_INTERVAL, Observability};
