//! The status reports a simulated agent sends: the same messages the real
//! agent sends after a successful pass (work Applied and Available, each
//! manifest Applied and Available), optionally with a feedback value that
//! changes on every report so the hub has something to write.

use ferry_proto::v1;
use ferry_semantics::contract::{APPLIED, AVAILABLE};

/// Reason of the work's Applied condition when every manifest applied.
const WORK_APPLIED_REASON: &str = "AppliedManifestWorkComplete";
/// Reason of the work's Available condition when every manifest is available.
const WORK_AVAILABLE_REASON: &str = "ResourcesAvailable";
/// Reason of a manifest's Applied condition.
const MANIFEST_APPLIED_REASON: &str = "AppliedManifestComplete";
/// Reason of a manifest's Available condition.
const MANIFEST_AVAILABLE_REASON: &str = "ResourceAvailable";
/// Name of the feedback value that changes with every churned report.
pub const TICK_FEEDBACK: &str = "loadgenTick";

/// What a simulated agent keeps of one work: enough to report on it.
#[derive(Debug, Clone, PartialEq)]
pub struct HeldWork {
    /// The work's reference, as the hub sent it.
    pub work: v1::WorkRef,
    /// The generation held.
    pub generation: i64,
    /// One entry per manifest, in order.
    pub manifests: Vec<v1::ResourceMeta>,
    /// Encoded size of the upsert it came in.
    pub upsert_bytes: u64,
}

/// What `upsert` asks to hold: its reference, generation and the identity
/// of each manifest (`apiVersion`, `kind`, `metadata.name/namespace`; a
/// manifest that is not a JSON object is kept with an empty identity, as
/// the real agent would report it failed, which a load test never sends).
pub fn held_work(upsert: &v1::WorkUpsert) -> HeldWork {
    let manifests = upsert
        .spec
        .as_ref()
        .map(|spec| spec.manifests_json.as_slice())
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(ordinal, json)| resource_meta(ordinal, json))
        .collect();
    HeldWork {
        work: upsert.work.clone().unwrap_or_default(),
        generation: upsert.generation,
        manifests,
        upsert_bytes: prost::Message::encoded_len(upsert) as u64,
    }
}

fn resource_meta(ordinal: usize, json: &[u8]) -> v1::ResourceMeta {
    let value: serde_json::Value = serde_json::from_slice(json).unwrap_or_default();
    let text = |pointer: &str| {
        value
            .pointer(pointer)
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let api_version = text("/apiVersion");
    let (group, version) = match api_version.rsplit_once('/') {
        Some((group, version)) => (group.to_string(), version.to_string()),
        None => (String::new(), api_version),
    };
    let kind = text("/kind");
    v1::ResourceMeta {
        ordinal: i32::try_from(ordinal).unwrap_or(i32::MAX),
        group,
        version,
        resource: format!("{}s", kind.to_lowercase()),
        kind,
        name: text("/metadata/name"),
        namespace: text("/metadata/namespace"),
    }
}

fn condition(type_: &str, reason: &str, generation: i64, now: i64) -> v1::Condition {
    v1::Condition {
        r#type: type_.to_string(),
        status: "True".into(),
        reason: reason.into(),
        message: String::new(),
        observed_generation: generation,
        last_transition_unix_seconds: now,
    }
}

/// The report of a successful pass over `work` at `now` (unix seconds);
/// with `tick`, each manifest also carries feedback value
/// [`TICK_FEEDBACK`] = tick.
pub fn applied_status(work: &HeldWork, now: i64, tick: Option<i64>) -> v1::WorkStatus {
    let generation = work.generation;
    let manifests = work
        .manifests
        .iter()
        .map(|meta| v1::ManifestStatus {
            resource_meta: Some(meta.clone()),
            conditions: vec![
                condition(APPLIED, MANIFEST_APPLIED_REASON, generation, now),
                condition(AVAILABLE, MANIFEST_AVAILABLE_REASON, generation, now),
            ],
            feedback: tick
                .map(|tick| v1::FeedbackValue {
                    name: TICK_FEEDBACK.into(),
                    r#type: "Integer".into(),
                    integer: tick,
                    ..Default::default()
                })
                .into_iter()
                .collect(),
            drift: None,
        })
        .collect();
    v1::WorkStatus {
        work: Some(work.work.clone()),
        generation,
        conditions: vec![
            condition(APPLIED, WORK_APPLIED_REASON, generation, now),
            condition(AVAILABLE, WORK_AVAILABLE_REASON, generation, now),
        ],
        manifests,
        gone: false,
        trace_context: Default::default(),
    }
}

/// The report that a deleted work's objects are all released.
pub fn gone_status(work: v1::WorkRef) -> v1::WorkStatus {
    v1::WorkStatus {
        work: Some(work),
        gone: true,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upsert() -> v1::WorkUpsert {
        v1::WorkUpsert {
            work: Some(v1::WorkRef {
                uid: "u1".into(),
                namespace: "c1".into(),
                name: "w".into(),
            }),
            generation: 3,
            spec: Some(v1::WorkSpec {
                manifests_json: vec![
                    br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n"}}"#.to_vec(),
                    br#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","namespace":"n"}}"#.to_vec(),
                ],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_held_work_knows_each_manifest_identity() {
        let held = held_work(&upsert());
        assert_eq!(held.generation, 3);
        assert_eq!(held.manifests.len(), 2);
        assert_eq!(held.manifests[0].version, "v1");
        assert_eq!(held.manifests[0].group, "");
        assert_eq!(held.manifests[0].resource, "configmaps");
        assert_eq!(held.manifests[1].group, "apps");
        assert_eq!(held.manifests[1].ordinal, 1);
        assert_eq!(held.manifests[1].name, "d");
    }

    #[test]
    fn the_applied_report_is_at_the_held_generation_and_carries_the_tick() {
        let held = held_work(&upsert());
        let report = applied_status(&held, 100, Some(7));
        assert_eq!(report.generation, 3);
        assert!(
            report
                .conditions
                .iter()
                .all(|c| c.observed_generation == 3 && c.status == "True")
        );
        assert_eq!(report.manifests.len(), 2);
        assert_eq!(report.manifests[1].feedback[0].integer, 7);
        assert!(
            applied_status(&held, 100, None).manifests[0]
                .feedback
                .is_empty()
        );
    }
}
