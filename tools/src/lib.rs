//! ferry's tools beside the product binaries: the benchmarks (`bench`, run by
//! `ferry-bench`), the load generator of simulated agents (`loadgen`, run by
//! `ferry-loadgen` and `ferry-scale`), a process's memory and CPU from
//! `/proc` (`proc_stats`), the container image writer (`image`, run by
//! `ferry-tools image`) and kubectl-ferry's krew archives and manifest
//! (`krew`, run by `ferry-tools krew`). `ferry-fleet` runs the local fleet of
//! the e2e harness.
#![forbid(unsafe_code)]

pub mod bench;
pub mod image;
pub mod krew;
pub mod loadgen;
pub mod proc_stats;
