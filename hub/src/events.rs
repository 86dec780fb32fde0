//! The hub's one Event recorder: Kubernetes Events on ManifestWorks for the
//! transitions the hub writes (a generation applied, a manifest failing with
//! its reason, deletion started and finished, works the agent of a cluster
//! is told to evict), on Placements holding their decisions, and on
//! admission policies found missing or restored.
//!
//! Events are published through kube's `Recorder` by one background task fed
//! by a bounded queue: whoever writes status only enqueues, after its write
//! succeeded, so an Event can never block or fail a status write. A full
//! queue or a refused Event is logged and counted, nothing more.

use std::sync::Arc;

use ferry_semantics::contract::APPLIED;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::ObjectMeta;
use kube::core::PartialObjectMeta;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource, ResourceExt};
use tokio::sync::mpsc;
use tracing::{debug, warn};

use crate::metrics::{EventOutcomeLabel, HubMetrics};
use crate::wire::status_from_wire::bounded_message;
use ferry_api::managed_cluster::ManagedCluster;
use ferry_api::manifest_work::{Condition, ManifestWork, ManifestWorkStatus};

/// The `reportingController` of every Event the hub publishes.
pub const REPORTING_CONTROLLER: &str = "ferry-hub";

/// Event reason: every manifest of a work is applied (a new generation, or
/// again after a failure).
pub const REASON_APPLIED: &str = "Applied";
/// Event reason of a work whose `Applied` condition turned False without a
/// failing manifest to name (the manifests' own reasons are used otherwise).
pub const REASON_APPLY_FAILED: &str = "ApplyFailed";
/// Event reason: the work was deleted and waits for its agent.
pub const REASON_DELETING: &str = "Deleting";
/// Event reason: the agent released the work's objects; the work goes.
pub const REASON_RELEASED: &str = "Released";
/// Event reason on a ManagedCluster: its agent was told to evict a work the
/// hub no longer has.
pub const REASON_WORK_EVICTED: &str = "WorkEvicted";

/// Events waiting to be published; beyond this they are dropped (and
/// counted), so a slow API server never holds memory or a status write.
const QUEUE: usize = 256;
/// Longest Event reason the API server accepts.
const MAX_REASON: usize = 128;
/// Longest Event note the API server accepts.
const MAX_NOTE: usize = 1024;

/// One Event to publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubEvent {
    /// Warning for failures, Normal otherwise.
    pub warning: bool,
    /// Short PascalCase cause, at most 128 bytes.
    pub reason: String,
    /// What the hub (or the agent) was doing: `Apply`, `Delete`, `Evict`.
    pub action: &'static str,
    /// Human-readable detail, at most 1 KiB.
    pub note: String,
}

impl HubEvent {
    /// An Event with `reason` (cut to what the API server accepts) and
    /// `note` (cut to 1 KiB).
    pub fn new(warning: bool, reason: &str, action: &'static str, note: &str) -> Self {
        Self {
            warning,
            reason: event_reason(reason),
            action,
            note: bounded_message(note, MAX_NOTE),
        }
    }
}

/// Publishes the hub's Events. Cheap to clone; a disabled one (for tests
/// and tools that construct writers by hand) publishes nothing.
#[derive(Clone)]
pub struct HubEvents {
    queue: Option<mpsc::Sender<(HubEvent, ObjectReference)>>,
    metrics: Arc<HubMetrics>,
}

impl HubEvents {
    /// Publishes nothing.
    pub fn disabled() -> Self {
        Self {
            queue: None,
            metrics: Arc::default(),
        }
    }

    /// Starts the publishing task on the current tokio runtime; it ends when
    /// every clone is dropped. `instance` is the `reportingInstance` (the
    /// hub pod's name). Publishing failures are logged and counted in
    /// `metrics.events`, never returned.
    pub fn start(client: Client, instance: Option<String>, metrics: Arc<HubMetrics>) -> Self {
        let (queue, mut pending) = mpsc::channel::<(HubEvent, ObjectReference)>(QUEUE);
        let recorder = Recorder::new(
            client,
            Reporter {
                controller: REPORTING_CONTROLLER.into(),
                instance,
            },
        );
        let counted = metrics.clone();
        tokio::spawn(async move {
            while let Some((event, regarding)) = pending.recv().await {
                let published = recorder
                    .publish(
                        &Event {
                            type_: if event.warning {
                                EventType::Warning
                            } else {
                                EventType::Normal
                            },
                            reason: event.reason.clone(),
                            note: Some(event.note.clone()),
                            action: event.action.into(),
                            secondary: None,
                        },
                        &regarding,
                    )
                    .await;
                let outcome = match published {
                    Ok(()) => "published",
                    Err(error) => {
                        warn!(
                            namespace = ?regarding.namespace,
                            name = ?regarding.name,
                            reason = %event.reason,
                            %error,
                            "cannot publish an Event"
                        );
                        "failed"
                    }
                };
                count(&counted, outcome);
            }
        });
        Self {
            queue: Some(queue),
            metrics,
        }
    }

    fn enqueue(&self, events: Vec<HubEvent>, regarding: &ObjectReference) {
        let Some(queue) = &self.queue else {
            return;
        };
        for event in events {
            if let Err(error) = queue.try_send((event, regarding.clone())) {
                debug!(%error, "Event queue full; the Event is dropped");
                count(&self.metrics, "dropped");
            }
        }
    }

    /// Queues `event` regarding the object `regarding`; never waits: a
    /// full queue drops it (counted).
    pub fn publish(&self, event: HubEvent, regarding: &ObjectReference) {
        self.enqueue(vec![event], regarding);
    }

    /// After a status write of `work` (as it was before the write) that
    /// stored `after`: an Event for each condition that transitioned.
    pub fn status_written(&self, work: &ManifestWork, after: &ManifestWorkStatus) {
        let events = status_transitions(
            &work.namespace().unwrap_or_default(),
            work.status.as_ref(),
            after,
        );
        if !events.is_empty() {
            self.enqueue(events, &work.object_ref(&()));
        }
    }

    /// After the `Deleting` condition of the work with `metadata` was
    /// written: an Event when it is new or its reason changed.
    pub fn deleting_written(&self, metadata: &ObjectMeta, before: &[Condition], after: &Condition) {
        let Some(event) = deleting_transition(before, after) else {
            return;
        };
        let work = PartialObjectMeta::<ManifestWork> {
            types: None,
            metadata: metadata.clone(),
            _phantom: Default::default(),
        };
        self.enqueue(vec![event], &work.object_ref(&()));
    }

    /// After the hub let a deleted work go (removed its finalizer): its
    /// agent released the objects, or never held the work.
    pub fn released(&self, work: &ManifestWork) {
        let cluster = work.namespace().unwrap_or_default();
        let note = format!(
            "nothing of the work is left on cluster {cluster} (released by its agent, or never \
             applied); the work is removed"
        );
        self.enqueue(
            vec![HubEvent::new(false, REASON_RELEASED, "Delete", &note)],
            &work.object_ref(&()),
        );
    }

    /// After the agent of `cluster` was told to evict the work with `uid`,
    /// which the hub no longer has (deleted while no session of the cluster
    /// saw it go). The work is gone, so the Event is on the ManagedCluster.
    pub fn evicted(&self, cluster: &str, uid: &str) {
        let note = format!(
            "the agent was told to evict work uid {uid}, which the hub no longer has; \
             it removes the work's objects after its eviction grace period"
        );
        let regarding = ObjectReference {
            api_version: Some(ManagedCluster::api_version(&()).into_owned()),
            kind: Some(ManagedCluster::kind(&()).into_owned()),
            name: Some(cluster.to_string()),
            ..Default::default()
        };
        self.enqueue(
            vec![HubEvent::new(false, REASON_WORK_EVICTED, "Evict", &note)],
            &regarding,
        );
    }
}

fn count(metrics: &HubMetrics, outcome: &'static str) {
    metrics
        .events
        .get_or_create(&EventOutcomeLabel { outcome })
        .inc();
}

/// A condition reason made fit for an Event reason: at most 128 bytes
/// (condition reasons are already ASCII letters, digits, `_`, `,`, `:`).
fn event_reason(reason: &str) -> String {
    ferry_semantics::text::prefix_within(reason, MAX_REASON).to_string()
}

fn applied(conditions: &[Condition]) -> Option<&Condition> {
    conditions.iter().find(|c| c.type_ == APPLIED)
}

/// The Events a status change from `before` to `after` deserves: `Applied`
/// when the work's `Applied` turns True or a newer generation is applied; a
/// Warning per manifest whose `Applied` turned False (or failed anew for
/// another reason), with that reason; a work-level Warning when `Applied`
/// turned False and no manifest says why. Nothing when nothing transitioned
/// (a new feedback value, a new message, a later heartbeat of the same state).
pub fn status_transitions(
    cluster: &str,
    before: Option<&ManifestWorkStatus>,
    after: &ManifestWorkStatus,
) -> Vec<HubEvent> {
    let no_conditions: &[Condition] = &[];
    let before_work = before.map_or(no_conditions, |s| s.conditions.as_slice());
    let mut events = Vec::new();
    let Some(now) = applied(&after.conditions) else {
        return events;
    };
    let was = applied(before_work);
    if now.status == "True" {
        let newly = was.is_none_or(|w| w.status != "True");
        let newer = was.is_some_and(|w| w.observed_generation < now.observed_generation);
        if newly || newer {
            let count = after
                .resource_status
                .as_ref()
                .map_or(0, |r| r.manifests.len());
            let note = format!("{count} manifest(s) applied on cluster {cluster}");
            events.push(HubEvent::new(false, REASON_APPLIED, "Apply", &note));
        }
        return events;
    }
    let before_manifests = before
        .and_then(|s| s.resource_status.as_ref())
        .map(|r| r.manifests.as_slice())
        .unwrap_or_default();
    for manifest in after
        .resource_status
        .iter()
        .flat_map(|r| r.manifests.iter())
    {
        let Some(failed) = applied(&manifest.conditions).filter(|c| c.status == "False") else {
            continue;
        };
        let was = before_manifests
            .iter()
            .find(|m| m.resource_meta == manifest.resource_meta)
            .and_then(|m| applied(&m.conditions));
        if was.is_some_and(|w| w.status == "False" && w.reason == failed.reason) {
            continue;
        }
        let meta = &manifest.resource_meta;
        let object = if meta.namespace.is_empty() {
            meta.name.clone()
        } else {
            format!("{}/{}", meta.namespace, meta.name)
        };
        let note = format!(
            "manifest {} ({} {object}) on cluster {cluster}: {}",
            meta.ordinal, meta.kind, failed.message
        );
        events.push(HubEvent::new(true, &failed.reason, "Apply", &note));
    }
    let turned_false =
        now.status == "False" && was.is_none_or(|w| w.status != "False" || w.reason != now.reason);
    if events.is_empty() && turned_false {
        let note = format!("on cluster {cluster}: {}", now.message);
        let reason = if now.reason.is_empty() {
            REASON_APPLY_FAILED
        } else {
            &now.reason
        };
        events.push(HubEvent::new(true, reason, "Apply", &note));
    }
    events
}

/// The Event for a `Deleting` condition going from `before` to `after`: the
/// first one is `Deleting`; a later one with another reason (the agent
/// started releasing objects) is named by that reason. Nothing when only the
/// message changed.
pub fn deleting_transition(before: &[Condition], after: &Condition) -> Option<HubEvent> {
    match before.iter().find(|c| c.type_ == after.type_) {
        None => Some(HubEvent::new(
            false,
            REASON_DELETING,
            "Delete",
            &after.message,
        )),
        Some(was) if was.reason != after.reason => Some(HubEvent::new(
            false,
            &after.reason,
            "Delete",
            &after.message,
        )),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_api::manifest_work::{
        ManifestCondition, ManifestResourceMeta, ManifestResourceStatus,
    };

    fn condition(type_: &str, status: &str, reason: &str, generation: i64) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: format!("{reason} message"),
            observed_generation: generation,
            last_transition_time: "2026-11-23T00:00:00Z".into(),
        }
    }

    fn status(work: Condition, manifests: Vec<Condition>) -> ManifestWorkStatus {
        ManifestWorkStatus {
            conditions: vec![work],
            resource_status: Some(ManifestResourceStatus {
                manifests: manifests
                    .into_iter()
                    .enumerate()
                    .map(|(i, c)| ManifestCondition {
                        resource_meta: ManifestResourceMeta {
                            ordinal: i32::try_from(i).expect("small"),
                            kind: "ConfigMap".into(),
                            name: format!("cm-{i}"),
                            namespace: "default".into(),
                            ..Default::default()
                        },
                        status_feedback: None,
                        conditions: vec![c],
                        ..Default::default()
                    })
                    .collect(),
            }),
        }
    }

    fn reasons(events: &[HubEvent]) -> Vec<(&str, bool)> {
        events
            .iter()
            .map(|e| (e.reason.as_str(), e.warning))
            .collect()
    }

    #[test]
    fn a_first_applied_status_and_a_newer_generation_are_events() {
        let ok1 = status(
            condition(APPLIED, "True", "AppliedManifestWorkComplete", 1),
            vec![condition(APPLIED, "True", "Applied", 1)],
        );
        let events = status_transitions("c", None, &ok1);
        assert_eq!(reasons(&events), vec![(REASON_APPLIED, false)]);
        assert!(events[0].note.contains("1 manifest(s)"), "{events:?}");
        let ok2 = status(
            condition(APPLIED, "True", "AppliedManifestWorkComplete", 2),
            vec![condition(APPLIED, "True", "Applied", 2)],
        );
        assert_eq!(status_transitions("c", Some(&ok1), &ok2).len(), 1);
    }

    #[test]
    fn the_same_state_written_again_is_no_event() {
        let ok = status(
            condition(APPLIED, "True", "AppliedManifestWorkComplete", 1),
            vec![condition(APPLIED, "True", "Applied", 1)],
        );
        assert!(status_transitions("c", Some(&ok), &ok).is_empty());
        let failing = status(
            condition(APPLIED, "False", "AppliedManifestWorkFailed", 1),
            vec![condition(APPLIED, "False", "UnknownKind", 1)],
        );
        let mut other_message = failing.clone();
        other_message.conditions[0].message = "retrying".into();
        assert!(status_transitions("c", Some(&failing), &other_message).is_empty());
    }

    #[test]
    fn a_failing_manifest_is_a_warning_with_its_reason() {
        let ok = status(
            condition(APPLIED, "True", "AppliedManifestWorkComplete", 1),
            vec![
                condition(APPLIED, "True", "Applied", 1),
                condition(APPLIED, "True", "Applied", 1),
            ],
        );
        let failing = status(
            condition(APPLIED, "False", "AppliedManifestWorkFailed", 2),
            vec![
                condition(APPLIED, "True", "Applied", 2),
                condition(APPLIED, "False", "UnknownKind", 2),
            ],
        );
        let events = status_transitions("c", Some(&ok), &failing);
        assert_eq!(reasons(&events), vec![("UnknownKind", true)]);
        assert!(
            events[0].note.contains("ConfigMap default/cm-1"),
            "{events:?}"
        );
        // Failing for another reason is a new event.
        let mut conflict = failing.clone();
        conflict
            .resource_status
            .as_mut()
            .expect("manifests")
            .manifests[1]
            .conditions[0]
            .reason = "ApplyConflict".into();
        assert_eq!(
            reasons(&status_transitions("c", Some(&failing), &conflict)),
            vec![("ApplyConflict", true)]
        );
    }

    #[test]
    fn a_work_failing_without_a_failing_manifest_is_a_warning_with_its_reason() {
        let failing = status(condition(APPLIED, "False", "NoManifests", 1), vec![]);
        assert_eq!(
            reasons(&status_transitions("c", None, &failing)),
            vec![("NoManifests", true)]
        );
    }

    #[test]
    fn deleting_is_an_event_when_new_or_for_another_reason() {
        let waiting = condition("Deleting", "True", "WaitingForAgent", 1);
        let event = deleting_transition(&[], &waiting).expect("new");
        assert_eq!(event.reason, REASON_DELETING);
        let mut again = waiting.clone();
        again.message = "still waiting".into();
        assert_eq!(
            deleting_transition(std::slice::from_ref(&waiting), &again),
            None
        );
        let releasing = condition("Deleting", "True", "DeletingResources", 1);
        assert_eq!(
            deleting_transition(&[waiting], &releasing)
                .expect("new reason")
                .reason,
            "DeletingResources"
        );
    }

    #[test]
    fn reasons_and_notes_fit_the_events_api() {
        let event = HubEvent::new(true, &"R".repeat(1000), "Apply", &"n".repeat(5000));
        assert!(event.reason.len() <= MAX_REASON);
        assert!(event.note.len() <= MAX_NOTE);
    }
}
