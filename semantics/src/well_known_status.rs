//! The table behind the `WellKnownStatus` feedback rule: exactly the status
//! fields OCM reports for the common workload kinds (Deployment, DaemonSet,
//! Job, Pod; OCM has none for StatefulSet), and how each is read.

use ferry_proto::v1::FeedbackValue;
use serde_json::Value;

use super::feedback_values::{integer, string};
use super::status_fields::condition;

/// How a well-known value is read from the live object.
enum Source {
    /// An integer member of `status`.
    Integer(&'static str),
    /// A string member of `status`.
    String(&'static str),
    /// The `status` string ("True", "False", "Unknown") of the condition of
    /// this type in `status.conditions`, as OCM's JSONPath
    /// `.status.conditions[?(@.type=="X")].status` reads it: absent while the
    /// condition is.
    ConditionStatus(&'static str),
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
];

const DAEMON_SET: &[WellKnown] = &[
    int("NumberReady", "numberReady"),
    int("DesiredNumberScheduled", "desiredNumberScheduled"),
    int("NumberAvailable", "numberAvailable"),
];

const JOB: &[WellKnown] = &[
    WellKnown {
        name: "JobComplete",
        source: Source::ConditionStatus("Complete"),
    },
    int("JobSucceeded", "succeeded"),
];

const POD: &[WellKnown] = &[
    WellKnown {
        name: "PodReady",
        source: Source::ConditionStatus("Ready"),
    },
    WellKnown {
        name: "PodPhase",
        source: Source::String("phase"),
    },
];

/// The well-known values of a kind; empty for kinds without any.
pub(crate) fn well_known_fields(group: &str, kind: &str) -> &'static [WellKnown] {
    match (group, kind) {
        ("apps", "Deployment") => DEPLOYMENT,
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
        Source::ConditionStatus(kind) => {
            let status = condition(live, kind)?.get("status")?.as_str()?;
            Some(string(field.name, status.to_string()))
        }
    }
}
