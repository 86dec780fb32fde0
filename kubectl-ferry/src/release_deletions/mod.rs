//! `kubectl ferry release-deletions CLUSTER`: a platform admin releases
//! what a spoke agent's deletion brake holds.
//!
//! - `plan.rs`: what to do, from what the hub shows (pure).
//! - `act.rs`: reads the hub, writes the release on the spoke, waits.

pub mod act;
pub mod plan;
