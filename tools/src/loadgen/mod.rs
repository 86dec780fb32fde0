//! `ferry-loadgen`: many simulated agents in one process, speaking the real
//! protocol to a real hub over real TLS with real ServiceAccount tokens, so
//! the hub can be measured at fleet scale on one machine. Each agent holds
//! its works in memory (no spoke), reports Applied for every generation it
//! receives, and may answer slowly or flap its stream.

pub mod agent;
pub mod clusters;
pub mod counters;
pub mod error;
pub mod hub_watch;
pub mod open_files;
pub mod report;
pub mod run;
pub mod scenarios;
pub mod share_child;
pub mod shares;
pub mod status;
