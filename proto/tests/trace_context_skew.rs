//! The trace context (field 42 of WorkUpsert, WorkDelete and WorkStatus) is
//! invisible to peers that predate it: their decoders skip the unknown
//! field and read everything else, and a message without it is what they
//! always sent.

use ferry_proto::v1;
use prost::Message;

/// WorkStatus as a peer before the trace context declares it.
#[derive(Clone, PartialEq, prost::Message)]
struct OldWorkStatus {
    #[prost(message, optional, tag = "1")]
    work: Option<v1::WorkRef>,
    #[prost(int64, tag = "2")]
    generation: i64,
    #[prost(message, repeated, tag = "3")]
    conditions: Vec<v1::Condition>,
    #[prost(message, repeated, tag = "4")]
    manifests: Vec<v1::ManifestStatus>,
    #[prost(bool, tag = "5")]
    gone: bool,
}

/// WorkUpsert as a peer before the trace context declares it.
#[derive(Clone, PartialEq, prost::Message)]
struct OldWorkUpsert {
    #[prost(message, optional, tag = "1")]
    work: Option<v1::WorkRef>,
    #[prost(int64, tag = "2")]
    generation: i64,
    #[prost(message, optional, tag = "3")]
    spec: Option<v1::WorkSpec>,
    #[prost(map = "string, string", tag = "4")]
    labels: std::collections::HashMap<String, String>,
}

fn context() -> std::collections::HashMap<String, String> {
    [(
        "traceparent".to_owned(),
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".to_owned(),
    )]
    .into()
}

fn work() -> Option<v1::WorkRef> {
    Some(v1::WorkRef {
        uid: "u".into(),
        namespace: "c".into(),
        name: "w".into(),
    })
}

#[test]
fn an_old_hub_reads_a_traced_status_report() {
    let report = v1::WorkStatus {
        work: work(),
        generation: 7,
        gone: true,
        trace_context: context(),
        ..Default::default()
    };
    let old = OldWorkStatus::decode(report.encode_to_vec().as_slice()).expect("decodes");
    assert_eq!(old.work, work());
    assert_eq!((old.generation, old.gone), (7, true));
}

#[test]
fn an_old_agent_reads_a_traced_upsert() {
    let upsert = v1::WorkUpsert {
        work: work(),
        generation: 3,
        trace_context: context(),
        ..Default::default()
    };
    let old = OldWorkUpsert::decode(upsert.encode_to_vec().as_slice()).expect("decodes");
    assert_eq!((old.work, old.generation), (work(), 3));
}

#[test]
fn untraced_messages_are_byte_for_byte_what_old_peers_sent() {
    let old = OldWorkStatus {
        work: work(),
        generation: 2,
        ..Default::default()
    };
    let new = v1::WorkStatus {
        work: work(),
        generation: 2,
        ..Default::default()
    };
    assert_eq!(old.encode_to_vec(), new.encode_to_vec());
}
