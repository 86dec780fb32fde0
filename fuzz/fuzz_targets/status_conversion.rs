//! Any bytes an authenticated agent could send as a status report: decoding
//! fails cleanly, or the hub's conversion yields a status the API server
//! accepts: bounded in size, every condition of `metav1.Condition` shape.
#![no_main]

use ferry_api::manifest_work::Condition;
use ferry_api::status_from_wire::{
    MAX_CONDITIONS, MAX_MESSAGE_BYTES, STATUS_BUDGET_BYTES, work_status,
};
use ferry_proto::v1;
use libfuzzer_sys::fuzz_target;
use prost::Message;

fn check(conditions: &[Condition], generation: i64) {
    assert!(conditions.len() <= MAX_CONDITIONS);
    for c in conditions {
        assert!(!c.type_.is_empty() && c.type_.len() <= 316);
        assert!(["True", "False", "Unknown"].contains(&c.status.as_str()));
        assert!(!c.reason.is_empty() && c.reason.len() <= 1024);
        assert!(c.message.len() <= MAX_MESSAGE_BYTES);
        assert!((0..=generation.max(0)).contains(&c.observed_generation));
        assert_eq!(c.last_transition_time.len(), "1970-01-01T00:00:00Z".len());
    }
}

fuzz_target!(|bytes: &[u8]| {
    let Ok(report) = v1::WorkStatus::decode(bytes) else {
        return;
    };
    let status = work_status(&report);
    let json = serde_json::to_vec(&status).expect("a status serialises");
    assert!(json.len() <= STATUS_BUDGET_BYTES);
    check(&status.conditions, report.generation);
    for m in status.resource_status.iter().flat_map(|r| &r.manifests) {
        check(&m.conditions, report.generation);
    }
});
