//! The `ferry.v1` messages an agent receives and sends, turned from and into
//! ferry's API types.

/// An agent's status report turned into ManifestWork status, bounded (in
/// `ferry-api`, as the agent reads dependencies' status in the same shape).
pub use ferry_api::status_from_wire;
/// A ManifestWork turned into the message an agent receives.
pub mod to_wire;
