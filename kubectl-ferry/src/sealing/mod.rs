//! `kubectl ferry seal` and `kubectl ferry sealed`: Secrets sealed to the
//! keys clusters' agents publish on their ManagedClusters.
//!
//! - [`plan`]: pure: which key of each cluster to seal to, where a sealed
//!   entry goes in a template, how each work's entries stand against its
//!   cluster's keys.
//! - [`act`]: reading the Secret and the hub, sealing, writing a replica
//!   set back.

pub mod act;
pub mod plan;
