//! The table behind the `WellKnownStatus` feedback rule: which status
//! fields OCM reports for the common workload kinds, and how each is read.

use ferry_proto::v1::FeedbackValue;
use serde_json::Value;

use super::feedback::{boolean, integer, string};
use super::status_fields::condition_is;

/// How a well-known value is read from the live object.
enum Source {
    /// An integer member of `status`.
    Integer(&'static str),
    /// A string member of `status`.
    String(&'static str),
    /// Whether `status.conditions` holds this type with status "True".
    /// Reported (false when the condition is absent) whenever `status` is an
    /// object: Job `Complete` only appears on completion and Pod `Ready` only
    /// after scheduling, so absence means "not yet".
    Condition(&'static str),
}

/// One well-known feedback value of a kind.
pub(crate) struct WellKnown {
    pub(crate) name: &'static str,
    source: Source,
}

const fn int(name: &'static str, field: &'static str) -> WellKnown {
    WellKnown {
        name,
        source: Source::Integer(field),
    }
}

const DEPLOYMENT: &[WellKnown] = &[
    int("ReadyReplicas", "readyReplicas"),
    int("Replicas", "replicas"),
    int("AvailableReplicas", "availableReplicas"),
    int("UpdatedReplicas", "updatedReplicas"),
    int("ObservedGeneration", "observedGeneration"),
];

const STATEFUL_SET: &[WellKnown] = &[
    int("ReadyReplicas", "readyReplicas"),
    int("Replicas", "replicas"),
    int("AvailableReplicas", "availableReplicas"),
    int("CurrentReplicas", "currentReplicas"),
    int("UpdatedReplicas", "updatedReplicas"),
];

const DAEMON_SET: &[WellKnown] = &[
    int("NumberReady", "numberReady"),
    int("DesiredNumberScheduled", "desiredNumberScheduled"),
    int("CurrentNumberScheduled", "currentNumberScheduled"),
    int("NumberAvailable", "numberAvailable"),
    int("UpdatedNumberScheduled", "updatedNumberScheduled"),
];

const JOB: &[WellKnown] = &[
    int("Active", "active"),
    int("Succeeded", "succeeded"),
    int("Failed", "failed"),
    WellKnown {
        name: "JobComplete",
        source: Source::Condition("Complete"),
    },
];

const POD: &[WellKnown] = &[
    WellKnown {
        name: "PodPhase",
        source: Source::String("phase"),
    },
    WellKnown {
        name: "PodReady",
        source: Source::Condition("Ready"),
    },
];

/// The well-known values of a kind; empty for kinds without any.
pub(crate) fn well_known_fields(group: &str, kind: &str) -> &'static [WellKnown] {
    match (group, kind) {
        ("apps", "Deployment") => DEPLOYMENT,
        ("apps", "StatefulSet") => STATEFUL_SET,
        ("apps", "DaemonSet") => DAEMON_SET,
        ("batch", "Job") => JOB,
        ("", "Pod") => POD,
        _ => &[],
    }
}

/// One well-known value, if the live object has it. Fields of the wrong JSON
/// type are treated as absent rather than guessed at.
pub(crate) fn read_well_known(field: &WellKnown, live: &Value) -> Option<FeedbackValue> {
    let status = live.get("status")?.as_object()?;
    match field.source {
        Source::Integer(key) => Some(integer(field.name, status.get(key)?.as_i64()?)),
        Source::String(key) => Some(string(field.name, status.get(key)?.as_str()?.to_string())),
        Source::Condition(kind) => Some(boolean(field.name, condition_is(live, kind, "True"))),
    }
}
