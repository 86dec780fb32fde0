//! The pieces of `ferry-bench`, one job per file: percentiles and RSS, the
//! wait for works to be applied, the side-by-side workload, OCM's work agent
//! built from the Go module cache, the comparison table, and what new works
//! cost the spoke's API server (from its audit log).

pub mod agent_rss;
pub mod compare;
pub mod ocm;
pub mod progress;
pub mod spoke_requests;
pub mod stats;
pub mod webhook_burst;
pub mod workload;
