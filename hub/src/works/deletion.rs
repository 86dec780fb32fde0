//! ManifestWork deletion on the hub. Every work carries ferry's finalizer, so
//! a deleted work stays, with a `Deleting` condition, until the agent of its
//! cluster reports that the work's objects are deleted or orphaned. A small
//! kube-runtime controller adds the finalizer and the first `Deleting`
//! condition; agent sessions and the status writer remove the finalizer.
//!
//! The controller watches metadata only (finalizers and deletion time are all
//! it decides on) and keeps just the few fields it reads, so the hub holds
//! one full copy of each work: the one in its index. Its watch errors are
//! logged, counted and retried like the index's.

use std::sync::Arc;
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ApiResource, DynamicObject, ObjectMeta, Patch, PatchParams};
use kube::core::PartialObjectMeta;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use tracing::warn;

use ferry_semantics::contract::DELETING;

use crate::conditions::condition_at;
use crate::events::HubEvents;
use crate::metrics::{HubMetrics, WatchLabel};
use crate::watch::SettledObjects;
use crate::watch::{WORKS_RESOURCE, WatchErrors, run_controller, watch};
use ferry_api::contract::CLEANUP_FINALIZER;
use ferry_api::manifest_work::{Condition, ManifestWork};

/// A finalizer or condition write failed.
#[derive(Debug, thiserror::Error)]
pub enum DeletionError {
    /// The API server refused the write or could not be reached.
    #[error("{action} ManifestWork {namespace}/{name}: {source}")]
    Write {
        /// What was being done.
        action: &'static str,
        /// Work namespace.
        namespace: String,
        /// Work name.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The work kept changing under the write (of its finalizer's removal
    /// or of its `Deleting` condition).
    #[error("ManifestWork {namespace}/{name} kept changing under the hub's write")]
    Contended {
        /// Work namespace.
        namespace: String,
        /// Work name.
        name: String,
    },
}

/// Whether `work` is alive and lacks ferry's finalizer.
pub fn needs_finalizer(work: &impl Resource) -> bool {
    work.meta().deletion_timestamp.is_none()
        && !work.finalizers().iter().any(|f| f == CLEANUP_FINALIZER)
}

/// Whether `work` is being deleted and still waits for ferry.
pub fn awaits_release(work: &impl Resource) -> bool {
    work.meta().deletion_timestamp.is_some()
        && work.finalizers().iter().any(|f| f == CLEANUP_FINALIZER)
}

/// `conditions` with the `Deleting` condition set to `deleting` (keeping its
/// transition time when only the message changes), or None when nothing
/// would change.
pub fn with_deleting(conditions: &[Condition], deleting: Condition) -> Option<Vec<Condition>> {
    let current = conditions.iter().find(|c| c.type_ == DELETING);
    let mut deleting = deleting;
    if let Some(current) = current {
        if current.status == deleting.status
            && current.reason == deleting.reason
            && current.message == deleting.message
        {
            return None;
        }
        if current.status == deleting.status {
            deleting.last_transition_time = current.last_transition_time.clone();
        }
    }
    let mut updated: Vec<Condition> = conditions
        .iter()
        .filter(|c| c.type_ != DELETING)
        .cloned()
        .collect();
    updated.push(deleting);
    Some(updated)
}

/// How many times the status writer's `Deleting` is judged again on a
/// fresh read after the work changed under it.
const SET_DELETING_ATTEMPTS: usize = 3;

/// Writes ferry's finalizer and `Deleting` condition on works.
#[derive(Clone)]
pub struct WorkDeletion {
    client: Client,
    events: HubEvents,
}

impl WorkDeletion {
    /// Writes through `client`; publishes an Event through `events` after
    /// each write that starts or ends a deletion.
    pub fn new(client: Client, events: HubEvents) -> Self {
        Self { client, events }
    }

    /// The Events this writer publishes through.
    pub fn events(&self) -> &HubEvents {
        &self.events
    }

    fn api(&self, work: &impl Resource) -> Api<ManifestWork> {
        Api::namespaced(self.client.clone(), &work.namespace().unwrap_or_default())
    }

    fn error(
        work: &impl Resource,
        action: &'static str,
    ) -> impl FnOnce(kube::Error) -> DeletionError {
        let namespace = work.namespace().unwrap_or_default();
        let name = work.name_any();
        move |source| DeletionError::Write {
            action,
            namespace,
            name,
            source,
        }
    }

    /// Adds the finalizer. The list is replaced as a whole under the
    /// resourceVersion it was read at, so a concurrent change fails the
    /// write (and the controller retries) instead of being lost.
    pub async fn add_finalizer(&self, work: &impl Resource) -> Result<(), DeletionError> {
        let mut finalizers = work.finalizers().to_vec();
        finalizers.push(CLEANUP_FINALIZER.to_string());
        let patch = json!({"metadata": {"finalizers": finalizers, "resourceVersion": work.resource_version()}});
        self.api(work)
            .patch(
                &work.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .map_err(Self::error(work, "adding the finalizer to"))?;
        Ok(())
    }

    /// Removes the finalizer, so the API server can let the work go. Reads
    /// the work's metadata afresh (so a work whose spec does not decode goes
    /// too) and tries again, after a short backoff, when it changed in
    /// between; a work already gone (or recreated) counts as released. Fails
    /// when the API server refuses the read or the write, or the work kept
    /// changing; the status writer retries those.
    pub async fn release(&self, work: &ManifestWork) -> Result<(), DeletionError> {
        let conflicts = ExponentialBuilder::default()
            .with_min_delay(Duration::from_millis(20))
            .with_max_delay(Duration::from_millis(500))
            .with_max_times(5)
            .with_jitter();
        (|| self.release_once(work))
            .retry(conflicts)
            .when(|error| matches!(error, DeletionError::Contended { .. }))
            .await
    }

    async fn release_once(&self, work: &ManifestWork) -> Result<(), DeletionError> {
        let api = self.api(work);
        let name = work.name_any();
        let Some(current) = api
            .get_metadata_opt(&name)
            .await
            .map_err(Self::error(work, "reading"))?
        else {
            return Ok(());
        };
        if current.uid() != work.uid()
            || !current.finalizers().iter().any(|f| f == CLEANUP_FINALIZER)
        {
            return Ok(());
        }
        let kept: Vec<&String> = current
            .finalizers()
            .iter()
            .filter(|f| *f != CLEANUP_FINALIZER)
            .collect();
        let patch = json!({"metadata": {"finalizers": kept, "resourceVersion": current.resource_version()}});
        match api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                self.events.released(work);
                Ok(())
            }
            Err(kube::Error::Api(status)) if status.code == 409 => Err(DeletionError::Contended {
                namespace: work.namespace().unwrap_or_default(),
                name,
            }),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(source) => Err(Self::error(work, "removing the finalizer from")(source)),
        }
    }

    /// Sets the `Deleting` condition, leaving the other conditions and the
    /// per-manifest status as they are. Writes nothing when it would not
    /// change. Judged first on `work` as given (the hub's index copy); when
    /// the work changed since, on a fresh read, a few times: the agent's
    /// report wins over a concurrent write. Fails on an API error, or with
    /// `Contended` when the work keeps changing.
    pub async fn set_deleting(
        &self,
        work: &ManifestWork,
        reason: &str,
        message: &str,
    ) -> Result<bool, DeletionError> {
        let mut metadata = work.metadata.clone();
        let mut conditions = work
            .status
            .as_ref()
            .map(|s| s.conditions.clone())
            .unwrap_or_default();
        for _ in 0..SET_DELETING_ATTEMPTS {
            match self
                .write_deleting(&metadata, &conditions, reason, message)
                .await
            {
                Err(DeletionError::Contended { .. }) => {
                    let Some((fresh, current)) = self.read_conditions(work).await? else {
                        return Ok(false);
                    };
                    if fresh.uid != work.metadata.uid {
                        return Ok(false);
                    }
                    (metadata, conditions) = (fresh, current);
                }
                other => return other,
            }
        }
        Err(DeletionError::Contended {
            namespace: work.namespace().unwrap_or_default(),
            name: work.name_any(),
        })
    }

    /// Sets `Deleting` on the work with `metadata`, whose current conditions
    /// are `conditions`, only if the work is still at `metadata`'s
    /// resourceVersion: the conditions list is written whole, so a write
    /// judged on an older copy would drop what was written since (one
    /// writer's `Deleting` replacing another's). Fails with `Contended` when
    /// the work changed.
    async fn write_deleting(
        &self,
        metadata: &ObjectMeta,
        conditions: &[Condition],
        reason: &str,
        message: &str,
    ) -> Result<bool, DeletionError> {
        let deleting = condition_at(
            DELETING,
            true,
            reason,
            message.into(),
            metadata.generation.unwrap_or_default(),
            Timestamp::now(),
        );
        let Some(updated) = with_deleting(conditions, deleting.clone()) else {
            return Ok(false);
        };
        let work = PartialObjectMeta::<ManifestWork> {
            types: None,
            metadata: metadata.clone(),
            _phantom: Default::default(),
        };
        let patch = json!({
            "metadata": {"resourceVersion": metadata.resource_version},
            "status": {"conditions": updated},
        });
        match self
            .api(&work)
            .patch_status(
                &work.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {
                return Err(DeletionError::Contended {
                    namespace: work.namespace().unwrap_or_default(),
                    name: work.name_any(),
                });
            }
            Err(source) => return Err(Self::error(&work, "setting Deleting on")(source)),
        }
        self.events
            .deleting_written(metadata, conditions, &deleting);
        Ok(true)
    }

    /// The current metadata and work conditions of `work`, read afresh
    /// (the controller keeps no status), or None when it is gone. Only the
    /// conditions are decoded, so a work whose spec the Rust types cannot
    /// decode still gets its `Deleting` condition.
    async fn read_conditions(
        &self,
        work: &impl Resource,
    ) -> Result<Option<(ObjectMeta, Vec<Condition>)>, DeletionError> {
        let resource = ApiResource::erase::<ManifestWork>(&());
        let api: Api<DynamicObject> = Api::namespaced_with(
            self.client.clone(),
            &work.namespace().unwrap_or_default(),
            &resource,
        );
        let Some(current) = api
            .get_opt(&work.name_any())
            .await
            .map_err(Self::error(work, "reading"))?
        else {
            return Ok(None);
        };
        let conditions = current
            .data
            .pointer("/status/conditions")
            .cloned()
            .and_then(|c| serde_json::from_value(c).ok())
            .unwrap_or_default();
        Ok(Some((current.metadata, conditions)))
    }
}

/// What the controller keeps of each work: the metadata it decides on.
type WorkMeta = PartialObjectMeta<ManifestWork>;

/// Drops everything the controller never reads (labels, annotations such as
/// kubectl's last-applied copy of the whole work, managed fields).
fn keep_what_deletion_reads(work: &mut WorkMeta) {
    let metadata = &mut work.metadata;
    metadata.annotations = None;
    metadata.labels = None;
    metadata.managed_fields = None;
    metadata.owner_references = None;
}

async fn reconcile(
    work: Arc<WorkMeta>,
    deletion: Arc<WorkDeletion>,
) -> Result<Action, DeletionError> {
    if needs_finalizer(&*work) {
        deletion.add_finalizer(&*work).await?;
    } else if awaits_release(&*work) {
        let Some((metadata, conditions)) = deletion.read_conditions(&*work).await? else {
            return Ok(Action::await_change());
        };
        if metadata.uid != work.metadata.uid || conditions.iter().any(|c| c.type_ == DELETING) {
            return Ok(Action::await_change());
        }
        let cluster = work.namespace().unwrap_or_default();
        let message =
            format!("waiting for the agent of cluster {cluster} to release the work's objects");
        deletion
            .write_deleting(&metadata, &conditions, "WaitingForAgent", &message)
            .await?;
    }
    Ok(Action::await_change())
}

fn error_policy(work: Arc<WorkMeta>, error: &DeletionError, _: Arc<WorkDeletion>) -> Action {
    warn!(work = %work.name_any(), %error, "work deletion bookkeeping failed; retrying");
    Action::requeue(Duration::from_secs(2))
}

/// Keeps the finalizer on every work and marks deleted works `Deleting`,
/// until `shutdown` completes. Watch errors never end it: each is logged,
/// counted in `metrics.watch_errors` and retried after [`crate::watch::watch_backoff`].
pub async fn run_deletion_controller(
    client: Client,
    deletion: WorkDeletion,
    metrics: Arc<HubMetrics>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let works: Api<WorkMeta> = Api::all(client.clone());
    let (reader, writer) = reflector::store();
    let trigger = watch(works, watcher::Config::default())
        .modify(keep_what_deletion_reads)
        .reflect(writer)
        .applied_settled();
    let deletion = Arc::new(deletion);
    let errors = WatchErrors {
        metrics,
        label: WatchLabel {
            resource: WORKS_RESOURCE,
            watch: "deletion",
        },
    };
    run_controller(
        "deletion",
        Controller::for_stream(trigger, reader),
        Some(errors),
        shutdown,
        reconcile,
        error_policy,
        deletion,
    )
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn condition(type_: &str, status: &str, message: &str, time: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: "R".into(),
            message: message.into(),
            observed_generation: 1,
            last_transition_time: time.into(),
        }
    }

    #[test]
    fn deleting_replaces_only_its_own_condition() {
        let applied = condition("Applied", "True", "ok", "t0");
        let updated = with_deleting(
            std::slice::from_ref(&applied),
            condition(DELETING, "True", "waiting", "t1"),
        )
        .expect("changed");
        assert_eq!(
            updated,
            vec![applied, condition(DELETING, "True", "waiting", "t1")]
        );
    }

    #[test]
    fn an_identical_deleting_condition_writes_nothing() {
        let current = [condition(DELETING, "True", "waiting", "t0")];
        assert_eq!(
            with_deleting(&current, condition(DELETING, "True", "waiting", "t1")),
            None
        );
    }

    #[test]
    fn a_new_message_keeps_the_transition_time() {
        let current = [condition(DELETING, "True", "waiting for 2", "t0")];
        let updated = with_deleting(&current, condition(DELETING, "True", "waiting for 1", "t1"))
            .expect("changed");
        assert_eq!(updated[0].last_transition_time, "t0");
    }

    #[test]
    fn a_deleted_work_gets_no_new_finalizer() {
        let mut work = ManifestWork::new("w", Default::default());
        assert!(needs_finalizer(&work));
        work.metadata.finalizers = Some(vec![CLEANUP_FINALIZER.into()]);
        assert!(!needs_finalizer(&work));
        assert!(!awaits_release(&work));
        work.metadata.deletion_timestamp = Some(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Timestamp::now()),
        );
        assert!(awaits_release(&work));
        work.metadata.finalizers = None;
        assert!(!needs_finalizer(&work));
    }
}
