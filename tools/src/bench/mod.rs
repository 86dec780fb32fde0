//! The pieces of `ferry-bench`, one job per file: percentiles and RSS, the
//! wait for works to be applied, the side-by-side workload, OCM's work agent
//! built from the Go module cache, the comparison table, what new works
//! cost the hub's and the spoke's API servers (from their audit logs), and
//! another team's latency beside a hostile one, and what sealing Secrets
//! costs.

pub mod agent_binary;
pub mod agent_rss;
pub mod api_requests;
pub mod compare;
pub mod noisy_neighbour;
pub mod ocm;
pub mod progress;
pub mod sealed;
pub mod stats;
pub mod webhook_burst;
pub mod workload;
