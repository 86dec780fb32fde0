//! The `ferry.v1` wire contract: messages and the `WorkDistributor` service
//! generated from `ferry/v1/ferry.proto`. The service stubs (tonic) come with
//! the default `grpc` feature; the messages alone need only prost.
#![forbid(unsafe_code)]

#[cfg(feature = "grpc")]
pub mod codec;

/// Generated protobuf types (and, with the `grpc` feature, the gRPC stubs)
/// for package `ferry.v1`.
#[allow(missing_docs, clippy::all)]
pub mod v1 {
    include!(concat!(env!("OUT_DIR"), "/ferry.v1.rs"));
}

/// The protocol version this build speaks; sent in Hello and Welcome so that
/// either side can refuse a peer it does not understand. Version 2 added the
/// work's labels to `WorkUpsert` (a label change alone is sent again to
/// agents of version 2 or later; version 1 agents ignore the field).
pub const PROTOCOL_VERSION: u32 = 2;

/// The oldest agent protocol version a hub of this build serves. The policy:
/// a hub serves agents of its own protocol version and of the one before, so
/// a fleet upgrades the hub first and then its agents, at their own pace.
/// Agents older than this, or newer than [`PROTOCOL_VERSION`], are refused
/// with a message naming both versions. (Were this build at version 1, the
/// first, it would have nothing older to serve.)
pub const MIN_AGENT_PROTOCOL_VERSION: u32 = if PROTOCOL_VERSION > 1 {
    PROTOCOL_VERSION - 1
} else {
    PROTOCOL_VERSION
};

/// Request metadata in which an agent names the cluster it serves, next to
/// its bearer token, so the hub can refuse a misconfigured agent before it
/// reads any message. Optional (the token alone names the cluster); when
/// given it must agree with the token and with the Hello.
pub const CLUSTER_METADATA: &str = "x-ferry-cluster";

/// Metadata on a refusal in which the hub says how many milliseconds the
/// agent should wait before it dials again (gRPC's server pushback name,
/// gRFC A6): in a connect storm it spreads the refused agents over the time
/// the hub needs to serve them, instead of their redials (each a TLS
/// handshake) competing with the work that admits them. A hint: the agent
/// bounds it, and a hub may refuse again.
pub const RETRY_PUSHBACK_METADATA: &str = "grpc-retry-pushback-ms";

/// The most an agent stretches a hub's pushback, at random, as a fraction
/// of it: agents told the same time do not all return together. The hub
/// counts on its refused agents being back within the pushback times
/// `1 + PUSHBACK_SPREAD`.
pub const PUSHBACK_SPREAD: f64 = 0.25;

/// Largest gRPC message either side accepts or sends. The hub API server
/// refuses request bodies over 3 MiB, so every work it stores fits with room
/// for protobuf framing.
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

impl v1::Heartbeat {
    /// A heartbeat stamped with the current wall-clock time in milliseconds
    /// (0 if the clock is before 1970, which only a broken host reports).
    pub fn now() -> Self {
        let millis = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or_default();
        Self {
            sent_unix_millis: millis,
            deletion_brake: None,
        }
    }
}
