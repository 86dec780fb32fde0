//! Whatever bytes arrive from the network, decoding either fails cleanly or
//! yields a message that encodes and decodes back to itself: no panic, no
//! silent change. Runs a few thousand random and mutated inputs per test.

use ferry_proto::v1;
use proptest::prelude::*;
use prost::Message;

fn valid_status() -> Vec<u8> {
    v1::AgentMessage {
        body: Some(v1::agent_message::Body::Status(v1::WorkStatus {
            work: Some(v1::WorkRef {
                uid: "u".into(),
                namespace: "cluster-a".into(),
                name: "w".into(),
            }),
            generation: 3,
            conditions: vec![v1::Condition {
                r#type: "Applied".into(),
                status: "True".into(),
                reason: "R".into(),
                message: "m".into(),
                observed_generation: 3,
                last_transition_unix_seconds: 1,
            }],
            manifests: vec![],
            gone: false,
            trace_context: [(
                "traceparent".into(),
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into(),
            )]
            .into(),
        })),
    }
    .encode_to_vec()
}

fn round_trips<M: Message + Default + PartialEq + std::fmt::Debug>(bytes: &[u8]) {
    if let Ok(message) = M::decode(bytes) {
        let again = M::decode(message.encode_to_vec().as_slice()).expect("re-encoded bytes decode");
        assert_eq!(again, message);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn random_bytes_never_panic_the_decoders(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        round_trips::<v1::AgentMessage>(&bytes);
        round_trips::<v1::HubMessage>(&bytes);
    }

    #[test]
    fn mutated_valid_messages_decode_cleanly_or_not_at_all(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut bytes = valid_status();
        for (at, value) in flips {
            let i = at.index(bytes.len());
            bytes[i] ^= value;
        }
        let end = cut.index(bytes.len() + 1);
        round_trips::<v1::AgentMessage>(&bytes[..end]);
    }
}
