//! ferry's tools beside the product binaries: the benchmarks (`bench`, run by
//! `ferry-bench`), the load generator of simulated agents (`loadgen`, run by
//! `ferry-loadgen` and `ferry-scale`), a process's memory and CPU from
//! `/proc` (`proc_stats`), and the container image writer (`image`, run by
//! `ferry-tools image`). `ferry-fleet` runs the local fleet of the e2e
//! harness.
#![forbid(unsafe_code)]

pub mod bench;
pub mod image;
pub mod loadgen;
pub mod proc_stats;
