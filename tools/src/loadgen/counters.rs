//! What the simulated agents saw, counted without locks: bytes and messages
//! received from the hub, sessions, status reports sent.

use std::sync::atomic::{AtomicU64, Ordering};

/// Fleet-wide counters every simulated agent adds to.
#[derive(Debug, Default)]
pub struct Counters {
    /// Encoded bytes of every hub message received (protobuf length, not
    /// counting HTTP/2 and TLS framing).
    pub bytes_received: AtomicU64,
    /// Encoded bytes of the `WorkUpsert` messages received.
    pub upsert_bytes: AtomicU64,
    /// `WorkUpsert` messages received.
    pub upserts: AtomicU64,
    /// `WorkDelete` messages received.
    pub deletes: AtomicU64,
    /// `Welcome` messages received: sessions the hub accepted.
    pub welcomes: AtomicU64,
    /// Status reports sent to the hub.
    pub statuses_sent: AtomicU64,
    /// Sessions that ended in an error (refused, broken, hub gone).
    pub session_errors: AtomicU64,
    /// Agents holding a welcomed session right now.
    pub connected: AtomicU64,
    /// Agents dialing (TCP, TLS, HTTP/2) right now.
    pub dialing: AtomicU64,
    /// Agents whose stream is open and sent Hello, waiting for the hub's
    /// response headers right now.
    pub awaiting_response: AtomicU64,
    /// Agents with the hub's response, waiting for its Welcome right now.
    pub awaiting_welcome: AtomicU64,
    /// Sessions given up because the hub said nothing (no response headers
    /// or no Welcome) within the agent's silence limit.
    pub silent_hub: AtomicU64,
    /// Refusals that told the agent when to come back (the hub's pushback
    /// in a connect storm).
    pub pushed_back: AtomicU64,
    /// Encoded bytes of the latest upsert of every work the agents hold:
    /// the full state a hub would send to agents that hold nothing.
    pub held_bytes: AtomicU64,
    /// Client certificates the hub issued.
    pub certificates_issued: AtomicU64,
    /// Certificate requests the hub refused.
    pub certificates_refused: AtomicU64,
}

/// A copy of [`Counters`] at one moment (also what a child process running
/// a share of the fleet reports, as JSON).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Snapshot {
    /// See [`Counters::bytes_received`].
    pub bytes_received: u64,
    /// See [`Counters::upsert_bytes`].
    pub upsert_bytes: u64,
    /// See [`Counters::upserts`].
    pub upserts: u64,
    /// See [`Counters::deletes`].
    pub deletes: u64,
    /// See [`Counters::welcomes`].
    pub welcomes: u64,
    /// See [`Counters::statuses_sent`].
    pub statuses_sent: u64,
    /// See [`Counters::session_errors`].
    pub session_errors: u64,
    /// See [`Counters::connected`] (a gauge: not differenced by `since`).
    pub connected: u64,
    /// See [`Counters::dialing`] (a gauge).
    pub dialing: u64,
    /// See [`Counters::awaiting_response`] (a gauge).
    pub awaiting_response: u64,
    /// See [`Counters::awaiting_welcome`] (a gauge).
    pub awaiting_welcome: u64,
    /// See [`Counters::silent_hub`].
    pub silent_hub: u64,
    /// See [`Counters::pushed_back`].
    #[serde(default)]
    pub pushed_back: u64,
    /// See [`Counters::held_bytes`] (a gauge: not differenced by `since`).
    pub held_bytes: u64,
    /// See [`Counters::certificates_issued`].
    #[serde(default)]
    pub certificates_issued: u64,
    /// See [`Counters::certificates_refused`].
    #[serde(default)]
    pub certificates_refused: u64,
}

impl Counters {
    /// Adds `n` to `counter`.
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// The counters now.
    pub fn snapshot(&self) -> Snapshot {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        Snapshot {
            bytes_received: get(&self.bytes_received),
            upsert_bytes: get(&self.upsert_bytes),
            upserts: get(&self.upserts),
            deletes: get(&self.deletes),
            welcomes: get(&self.welcomes),
            statuses_sent: get(&self.statuses_sent),
            session_errors: get(&self.session_errors),
            connected: get(&self.connected),
            dialing: get(&self.dialing),
            awaiting_response: get(&self.awaiting_response),
            awaiting_welcome: get(&self.awaiting_welcome),
            silent_hub: get(&self.silent_hub),
            pushed_back: get(&self.pushed_back),
            held_bytes: get(&self.held_bytes),
            certificates_issued: get(&self.certificates_issued),
            certificates_refused: get(&self.certificates_refused),
        }
    }
}

impl Snapshot {
    /// Both snapshots together: two shares of one fleet, counted as one.
    pub fn plus(&self, other: &Snapshot) -> Snapshot {
        self.combine(other, |a, b| a + b, |a, b| a + b)
    }

    /// What was counted between `earlier` and this snapshot; the gauges
    /// (`connected`, the session steps, `held_bytes`) are kept as they are
    /// now.
    pub fn since(&self, earlier: &Snapshot) -> Snapshot {
        self.combine(earlier, u64::saturating_sub, |now, _| now)
    }

    /// Every field of this snapshot and `other` through `counter` (for
    /// counters) or `gauge` (for gauges): the one list of which is which.
    fn combine(
        &self,
        other: &Snapshot,
        counter: impl Fn(u64, u64) -> u64,
        gauge: impl Fn(u64, u64) -> u64,
    ) -> Snapshot {
        Snapshot {
            bytes_received: counter(self.bytes_received, other.bytes_received),
            upsert_bytes: counter(self.upsert_bytes, other.upsert_bytes),
            upserts: counter(self.upserts, other.upserts),
            deletes: counter(self.deletes, other.deletes),
            welcomes: counter(self.welcomes, other.welcomes),
            statuses_sent: counter(self.statuses_sent, other.statuses_sent),
            session_errors: counter(self.session_errors, other.session_errors),
            connected: gauge(self.connected, other.connected),
            dialing: gauge(self.dialing, other.dialing),
            awaiting_response: gauge(self.awaiting_response, other.awaiting_response),
            awaiting_welcome: gauge(self.awaiting_welcome, other.awaiting_welcome),
            silent_hub: counter(self.silent_hub, other.silent_hub),
            pushed_back: counter(self.pushed_back, other.pushed_back),
            held_bytes: gauge(self.held_bytes, other.held_bytes),
            certificates_issued: counter(self.certificates_issued, other.certificates_issued),
            certificates_refused: counter(self.certificates_refused, other.certificates_refused),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_differences_counters_and_keeps_the_connected_gauge() {
        let counters = Counters::default();
        Counters::add(&counters.bytes_received, 100);
        Counters::add(&counters.connected, 3);
        let before = counters.snapshot();
        Counters::add(&counters.bytes_received, 40);
        Counters::add(&counters.upserts, 2);
        counters.connected.fetch_sub(1, Ordering::Relaxed);
        let delta = counters.snapshot().since(&before);
        assert_eq!(delta.bytes_received, 40);
        assert_eq!(delta.upserts, 2);
        assert_eq!(delta.connected, 2);
        assert_eq!(delta.welcomes, 0);
    }

    #[test]
    fn plus_adds_every_counter_and_gauge() {
        let one = Snapshot {
            connected: 2,
            silent_hub: 1,
            welcomes: 3,
            ..Default::default()
        };
        let two = Snapshot {
            connected: 5,
            awaiting_welcome: 4,
            welcomes: 1,
            ..Default::default()
        };
        let both = one.plus(&two);
        assert_eq!(both.connected, 7);
        assert_eq!(both.silent_hub, 1);
        assert_eq!(both.awaiting_welcome, 4);
        assert_eq!(both.welcomes, 4);
    }
}
