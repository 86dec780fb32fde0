//! `kubectl-ferry`: a fleet view of ferry for people. `kubectl ferry get
//! clusters`, `kubectl ferry get works` and `kubectl ferry describe work
//! NS/NAME` read the hub's ManagedClusters, ManifestWorks and Events and print
//! kubectl-style tables, or the underlying records as JSON or YAML.
//! `kubectl ferry rollout status|approve|pause|resume NS/NAME` read and steer
//! a ManifestWorkReplicaSet's rollout; `kubectl ferry release-deletions
//! CLUSTER` releases what a spoke agent's deletion brake holds; `kubectl
//! ferry seal` seals a Secret to clusters' keys and `kubectl ferry sealed`
//! lists how works' sealed Secrets stand against their clusters' keys.
//!
//! The pure part (objects to rows and text) lives in its own modules with unit
//! tests; [`hub_api`] and [`client`] are the only ones that talk to an API server.
#![forbid(unsafe_code)]

pub mod age;
pub mod cli;
pub mod client;
pub mod cluster_rows;
pub mod cluster_set_rows;
pub mod dashboard;
pub mod describe;
pub mod drift_table;
pub mod error;
pub mod events;
pub mod fleet_rows;
pub mod hub_api;
pub mod output;
pub mod release_deletions;
pub mod rollout;
pub mod rollout_history;
pub mod rollout_view;
pub mod run;
pub mod sealing;
pub mod table;
pub mod work_ref;
pub mod work_rows;
pub mod work_summary;
