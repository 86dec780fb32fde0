//! Any work the hub could send: the bytes decode as a work spec (or are
//! dropped, as the agent drops undecodable messages) and then go through
//! every pure step the agent takes to apply it. The steps and the invariants
//! they must keep are the property test's (`semantics/tests/support/`), so
//! the fuzzer and `cargo test` check the same thing.
#![no_main]

#[path = "../../semantics/tests/support/work_pipeline.rs"]
mod work_pipeline;

use ferry_proto::v1;
use libfuzzer_sys::fuzz_target;
use prost::Message;

fuzz_target!(|bytes: &[u8]| {
    if let Ok(spec) = v1::WorkSpec::decode(bytes) {
        work_pipeline::run_work(&spec);
    }
    // The same bytes as one manifest of an otherwise empty work: most of
    // what the fuzzer finds in a JSON parser's corners lives here.
    work_pipeline::run_work(&v1::WorkSpec {
        manifests_json: vec![bytes.to_vec()],
        ..Default::default()
    });
});
