//! The pieces of `ferry-bench`, one job per file: percentiles and RSS, the
//! wait for works to be applied, the side-by-side workload, OCM's work agent
//! built from the Go module cache, the comparison table, and what new works
//! cost the hub's and the spoke's API servers (from their audit logs).

pub mod agent_rss;
pub mod api_requests;
pub mod compare;
pub mod ocm;
pub mod progress;
pub mod stats;
pub mod webhook_burst;
pub mod workload;
