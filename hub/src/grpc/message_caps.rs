//! How large a message an authenticated agent may send the hub: its Hello,
//! sized from what a Hello carries, and its status reports, sized from the
//! largest work the hub admits (`--max-work-bytes`). Pure arithmetic; the
//! session enforces the caps (`crate::grpc::handshake`,
//! `crate::grpc::session`).

use ferry_proto::MAX_MESSAGE_BYTES;

/// Room a status report gets beyond `--max-work-bytes`: the envelope
/// (work reference, generation, the work's own conditions) and per-manifest
/// entries (identity, a few conditions, feedback values of at most 1 KiB).
/// A report describes the manifests of one work, so it grows with the work;
/// the hub keeps at most 128 KiB of it (`STATUS_BUDGET_BYTES`) anyway.
pub const REPORT_MARGIN_BYTES: usize = 256 * 1024;

/// Most works a Hello may list as held. An agent lists every work it holds
/// for its cluster; 100,000 is far above what one cluster namespace holds in
/// practice and keeps a Hello under 5 MiB.
pub const MAX_HELLO_WORKS: usize = 100_000;

/// Largest encoding of one `WorkVersion` inside a Hello: 2 bytes of field
/// tag and length, the UID (a Kubernetes UID is 36 characters; tag, length
/// and the text: 38) and the generation (tag and a varint of up to 10).
pub const WORK_VERSION_BYTES: usize = 2 + 38 + 11;

/// Room for the rest of a Hello and its envelope: the protocol version, a
/// cluster name of at most 253 bytes, the agent's version string (an agent
/// sends a short one; 512 bytes allowed), field tags and lengths.
pub const HELLO_ENVELOPE_BYTES: usize = 1024;

/// Room for what a Hello says of the spoke: its Kubernetes version (an
/// agent sends at most 64 bytes) and at most
/// [`ferry_semantics::sealing::MAX_CLUSTER_KEYS`] sealing keys (an id of 18
/// bytes, an age public key of 62, a flag, and their tags and lengths: under
/// 128 bytes each).
pub const HELLO_SPOKE_FACTS_BYTES: usize =
    2 + 64 + ferry_semantics::sealing::MAX_CLUSTER_KEYS * 128;

/// The message caps of the agent port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MessageCaps {
    /// Largest Hello, in encoded bytes.
    pub hello: usize,
    /// Largest message after the Hello (a status report or a heartbeat).
    pub report: usize,
}

impl MessageCaps {
    /// The caps for a hub admitting works of up to `max_work_bytes` of JSON:
    /// reports up to that plus [`REPORT_MARGIN_BYTES`], Hellos listing up to
    /// [`MAX_HELLO_WORKS`] works. Neither exceeds [`MAX_MESSAGE_BYTES`], the
    /// most either side of the protocol ever sends.
    pub fn for_max_work_bytes(max_work_bytes: usize) -> Self {
        Self {
            hello: hello_cap(MAX_HELLO_WORKS),
            report: max_work_bytes
                .saturating_add(REPORT_MARGIN_BYTES)
                .min(MAX_MESSAGE_BYTES),
        }
    }

    /// What the transport lets one message of a stream reach before the
    /// hub decodes it: the larger cap. The smaller one is checked on the
    /// decoded message, so what a stream buffers is bounded by this.
    pub fn transport(&self) -> usize {
        self.hello.max(self.report)
    }
}

impl Default for MessageCaps {
    fn default() -> Self {
        Self::for_max_work_bytes(crate::admission::webhook::DEFAULT_MAX_WORK_BYTES)
    }
}

/// The largest Hello of an agent holding `works` works.
pub fn hello_cap(works: usize) -> usize {
    HELLO_ENVELOPE_BYTES
        .saturating_add(HELLO_SPOKE_FACTS_BYTES)
        .saturating_add(works.saturating_mul(WORK_VERSION_BYTES))
        .min(MAX_MESSAGE_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_proto::v1::{self, agent_message};
    use prost::Message;

    /// The Hello of an agent holding `works` works with real-looking UIDs,
    /// generations of the longest encoding (a negative varint: 10 bytes) and
    /// long names.
    fn hello(works: usize) -> v1::AgentMessage {
        v1::AgentMessage {
            body: Some(agent_message::Body::Hello(v1::Hello {
                protocol_version: u32::MAX,
                cluster_name: "c".repeat(253),
                agent_version: "v".repeat(512),
                known_works: (0..works)
                    .map(|i| v1::WorkVersion {
                        uid: format!("{i:08x}-0000-4000-8000-000000000000"),
                        generation: -1,
                    })
                    .collect(),
                kubernetes_version: "v".repeat(64),
                sealing_keys: (0..ferry_semantics::sealing::MAX_CLUSTER_KEYS)
                    .map(|i| v1::SealingKey {
                        key_id: format!("k-{i:016x}"),
                        public_key: format!("age1{}", "q".repeat(58)),
                        retiring: true,
                    })
                    .collect(),
            })),
        }
    }

    #[test]
    fn the_hello_of_an_agent_holding_the_most_works_fits_its_cap() {
        let largest = hello(MAX_HELLO_WORKS).encoded_len();
        let caps = MessageCaps::default();
        assert!(largest <= caps.hello, "{largest} > {}", caps.hello);
        // And the cap is not far above it: a tight bound, not a guess.
        assert!(caps.hello - largest < 4096, "{} vs {largest}", caps.hello);
        println!("largest Hello {largest} bytes, cap {}", caps.hello);
    }

    #[test]
    fn reports_follow_max_work_bytes_and_the_transport_takes_the_larger_cap() {
        let caps = MessageCaps::for_max_work_bytes(1_400_000);
        assert_eq!(caps.report, 1_400_000 + REPORT_MARGIN_BYTES);
        assert_eq!(caps.transport(), caps.hello.max(caps.report));
        let small = MessageCaps::for_max_work_bytes(10_000);
        assert_eq!(small.report, 10_000 + REPORT_MARGIN_BYTES);
        let huge = MessageCaps::for_max_work_bytes(usize::MAX);
        assert_eq!(huge.report, MAX_MESSAGE_BYTES);
        assert!(huge.transport() <= MAX_MESSAGE_BYTES);
        assert!(caps.transport() < MAX_MESSAGE_BYTES / 3, "{caps:?}");
    }
}
