//! The ferry agent: dials the hub, applies the works of its cluster with
//! server-side apply, and reports per-manifest status back.
#![forbid(unsafe_code)]

mod agent;
pub mod applied_works;
pub mod applier;
pub mod conditions;
pub mod deletion;
pub mod deletion_brake;
pub mod dependencies;
pub mod dependency_readiness;
pub mod discovery;
pub mod drift;
pub mod executor;
mod garbage_collection;
pub mod list_schema;
pub mod metrics;
pub mod orphan_records;
pub mod ownership;
pub mod probes;
pub mod readiness;
pub mod reconcile;
pub mod redial;
pub mod release;
pub mod rule_pool;
pub mod session;
pub mod spoke_client;
pub mod spoke_trace;
pub mod status_board;
pub mod telemetry;
pub mod work_workers;
pub mod write_breaker;
pub mod write_identity;

pub use agent::{AgentOptions, DeletionBrakeOptions, run_agent};
pub use telemetry::{DEFAULT_SPOKE_CHECK_INTERVAL, Telemetry};
