//! The only code of the replica-set controller that writes: the works, the
//! ControllerRevisions, and the replica set's records and status. Each
//! write carries out a decision already made (`decide.rs`) from a snapshot.
//!
//! - `works.rs`: the works a decision starts and deletes.
//! - `revisions.rs`: the current revision stored, old ones pruned.
//! - `records.rs`: the rollback, the budget's window and the status.

pub mod records;
pub mod revisions;
pub mod works;
