//! Sealed Secrets on the spoke: the cluster's own age keys, kept in a
//! Secret of the agent's namespace and never sent anywhere (their public
//! halves go to the hub in every Hello), and the opening of sealed
//! manifest entries at apply time.
//!
//! - [`keys`]: what the key Secret holds and what to write to it (pure).
//! - [`keyring`]: the keys this agent holds, read from and written to the
//!   spoke at each session's start.
//! - [`opening`]: a work's sealed entries opened (off the async runtime)
//!   into the Secrets they carry.
//! - [`report`]: the `Sealed` conditions, and statuses with nothing of a
//!   Secret's data in them.

pub mod keyring;
pub mod keys;
pub mod opening;
pub mod report;

pub use keyring::{Keyring, KeyringError};
pub use opening::{Sealed, open_sealed};
