//! Any bytes from the network: decoding either fails cleanly or yields a
//! message that encodes and decodes back to itself.
#![no_main]

use ferry_proto::v1;
use libfuzzer_sys::fuzz_target;
use prost::Message;

fn round_trips<M: Message + Default + PartialEq + std::fmt::Debug>(bytes: &[u8]) {
    if let Ok(message) = M::decode(bytes) {
        let again = M::decode(message.encode_to_vec().as_slice());
        assert_eq!(again.ok(), Some(message));
    }
}

fuzz_target!(|bytes: &[u8]| {
    round_trips::<v1::AgentMessage>(bytes);
    round_trips::<v1::HubMessage>(bytes);
});
