//! Sealed Secrets: a manifest entry that carries a Secret encrypted to the
//! age (X25519) keys of the clusters meant to open it. The hub stores,
//! validates and ships only the envelope; the target cluster's agent opens
//! it at apply time with a key that never leaves its spoke.
//!
//! - [`envelope`]: the manifest entry's shape, its bounds, the Secret it
//!   names (what hub and agent treat it as).
//! - [`key_id`]: the short id a public key is known by.
//! - [`seal`]: encrypting a Secret manifest to recipients (`kubectl ferry seal`).
//! - [`open`]: opening an envelope with a cluster's keys (the agent).
//! - [`redact`]: what of an opened Secret may be reported: metadata and a
//!   hash, never data.

pub mod envelope;
pub mod key_id;
pub mod open;
pub mod redact;
pub mod seal;

pub use envelope::{
    EnvelopeError, MAX_CIPHERTEXT_BYTES, MAX_RECIPIENTS, Recipient, SEALED_API_VERSION,
    SEALED_KIND, SealedEnvelope, is_sealed,
};
pub use key_id::{KeyIdError, MAX_CLUSTER_KEYS, key_id, parse_recipient};
pub use open::{OpenError, open};
pub use redact::{redact_object, scrub};
pub use seal::{SealError, SealTo, seal};
