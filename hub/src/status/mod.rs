//! Agents' status reports, written to the ManifestWork status subresource.

/// One session's reports written, or retried with backoff.
pub mod delivery;
/// The order of each cluster's live sessions: the newest one's reports win.
pub mod order;
/// One report written to a work's status, only when it changes something.
pub mod writer;
