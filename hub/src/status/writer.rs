//! Writes one agent report to the ManifestWork status subresource, only when
//! it changes something and never over a newer generation. Every write is a
//! read-modify-write against the live object: the status patch carries the
//! resourceVersion it was computed from, so a concurrent writer (another
//! session of the same cluster, another hub replica) makes it fail with a
//! conflict, and the report is judged again against what is there now.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;
use tracing::Instrument as _;

use ferry_proto::v1;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use prometheus_client::metrics::histogram::Histogram;

use crate::events::HubEvents;
use crate::wire::status_from_wire::work_status;
use crate::works::deletion::{DeletionError, WorkDeletion, needs_finalizer};
use crate::works::index::WorkIndex;
use ferry_api::manifest_work::ManifestWork;
use ferry_semantics::contract::DELETING;

/// How long a first report waits for the index to show the finalizer the
/// deletion controller is adding. Long enough for a write under way (a few
/// milliseconds), short enough that a hub whose deletion controller is not
/// running (a leader change) delays each new work's first report only a
/// little: after it, the write goes ahead and a conflict is handled as
/// any other.
const FINALIZER_WAIT: std::time::Duration = std::time::Duration::from_millis(250);

/// What became of one agent report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusOutcome {
    /// The status subresource was patched.
    Written,
    /// The report matched the stored status: no write.
    Unchanged,
    /// The report was for a work or generation the hub no longer has, or
    /// older than the status already recorded.
    Stale,
    /// The agent released every object of a deleted work; the hub let the
    /// work go.
    Released,
}

impl StatusOutcome {
    /// The metric label of this outcome.
    pub fn label(self) -> &'static str {
        match self {
            Self::Written => "written",
            Self::Unchanged => "unchanged",
            Self::Stale => "stale",
            Self::Released => "released",
        }
    }
}

/// Where a write starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Basis {
    /// The hub's index: no read when the report changes nothing. A stale
    /// copy only costs a conflict and a fresh read.
    Index,
    /// A fresh read of the work: for retries, and when this session wrote
    /// the work recently enough that the index may not show it yet.
    Live,
}

/// A report could not be written.
#[derive(Debug, thiserror::Error)]
pub enum StatusWriteError {
    /// The report did not name a work.
    #[error("status report from cluster {cluster} names no work")]
    MissingWorkRef {
        /// Cluster of the reporting agent.
        cluster: String,
    },
    /// Updating a deleted work (its `Deleting` condition or its finalizer)
    /// failed.
    #[error(transparent)]
    Deletion(#[from] DeletionError),
    /// Reading the work failed.
    #[error("reading ManifestWork {namespace}/{name}: {source}")]
    Read {
        /// Work namespace.
        namespace: String,
        /// Work name.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The API server refused the status patch.
    #[error("writing status of {namespace}/{name}: {source}")]
    Patch {
        /// Work namespace.
        namespace: String,
        /// Work name.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The work changed under every attempt.
    #[error("ManifestWork {namespace}/{name} changed under the status write")]
    Conflict {
        /// Work namespace.
        namespace: String,
        /// Work name.
        name: String,
    },
}

impl StatusWriteError {
    /// Whether the same report may succeed later: the API server was away,
    /// overloaded, in conflict, or refused the hub's identity (RBAC can be
    /// fixed). A report the API server found invalid is not retried.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::MissingWorkRef { .. } => false,
            Self::Conflict { .. } => true,
            Self::Read { source, .. } | Self::Patch { source, .. } => is_transient_api(source),
            Self::Deletion(DeletionError::Contended { .. }) => true,
            Self::Deletion(DeletionError::Write { source, .. }) => is_transient_api(source),
        }
    }
}

/// Errors worth retrying: everything but a request the API server judged
/// malformed, invalid or too large.
pub fn is_transient_api(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => !matches!(status.code, 400 | 404 | 405 | 413 | 415 | 422),
        kube::Error::SerdeError(_) | kube::Error::BuildRequest(_) => false,
        _ => true,
    }
}

/// Patches ManifestWork status from agent reports.
pub struct StatusWriter {
    client: Client,
    index: Arc<WorkIndex>,
    deletion: WorkDeletion,
    events: HubEvents,
    /// Seconds each write request takes.
    write_seconds: Histogram,
}

/// What to do after judging a report against one copy of the work.
enum Step {
    Done(StatusOutcome),
    /// The copy may be out of date: read the work again.
    Reread,
}

impl StatusWriter {
    /// A writer using `client` and reading current works from `index`; it
    /// publishes an Event through `events` after each write that makes a
    /// condition transition, and times each write request in
    /// `write_seconds`.
    pub fn new(
        client: Client,
        index: Arc<WorkIndex>,
        events: HubEvents,
        write_seconds: Histogram,
    ) -> Self {
        Self {
            deletion: WorkDeletion::new(client.clone(), events.clone()),
            events,
            client,
            index,
            write_seconds,
        }
    }

    /// Runs one write request, timing it whatever its result.
    async fn timed<T>(&self, request: impl Future<Output = T>) -> T {
        let started = Instant::now();
        let result = request.await;
        self.write_seconds.observe(started.elapsed().as_secs_f64());
        result
    }

    /// Writes `report` from the agent of `cluster`, starting from `basis`.
    /// Reports for another cluster's namespace, for a work the hub does not
    /// have, for a deleted or recreated work, or older than the live status
    /// (or claiming a generation the work never had) are dropped as stale.
    /// Fails when the API server refuses a read or write; see
    /// [`StatusWriteError::is_transient`] for which failures may be retried.
    pub async fn write(
        &self,
        cluster: &str,
        report: &v1::WorkStatus,
        basis: Basis,
    ) -> Result<StatusOutcome, StatusWriteError> {
        if !ferry_telemetry::enabled() {
            return self.write_report(cluster, report, basis).await;
        }
        // The agent's apply span is the parent: the write joins the trace
        // the hub began when it sent this generation.
        let work = report.work.as_ref();
        let span = tracing::info_span!(
            "write_status",
            cluster = %cluster,
            work = %work.map(|w| w.name.as_str()).unwrap_or_default(),
            work.uid = %work.map(|w| w.uid.as_str()).unwrap_or_default(),
            generation = report.generation,
            outcome = tracing::field::Empty,
        );
        ferry_telemetry::set_parent(&span, &report.trace_context);
        let result = self
            .write_report(cluster, report, basis)
            .instrument(span.clone())
            .await;
        match &result {
            Ok(outcome) => span.record("outcome", outcome.label()),
            Err(error) => span.record("outcome", tracing::field::display(error)),
        };
        result
    }

    async fn write_report(
        &self,
        cluster: &str,
        report: &v1::WorkStatus,
        basis: Basis,
    ) -> Result<StatusOutcome, StatusWriteError> {
        let work_ref = report
            .work
            .as_ref()
            .ok_or_else(|| StatusWriteError::MissingWorkRef {
                cluster: cluster.to_string(),
            })?;
        if work_ref.namespace != cluster || report.generation < 0 {
            return Ok(StatusOutcome::Stale);
        }
        // Only names the hub knows for this cluster reach the API server.
        let Some(mut indexed) = self.index.get(cluster, &work_ref.name).await else {
            return Ok(StatusOutcome::Stale);
        };
        // The deletion controller adds the finalizer right after a work is
        // created; a first report judged against the copy from before that
        // write fails with a conflict, and a failed write plus a read is on
        // the way to Applied (12 of 100 new works in `ferry-bench
        // --api-requests`). When the write is under way, the index holds
        // the copy with the finalizer a moment later: wait for it, briefly.
        if basis == Basis::Index && needs_finalizer(&*indexed) {
            let name = &work_ref.name;
            match self
                .index
                .wait_for(cluster, name, |w| !needs_finalizer(w), FINALIZER_WAIT)
                .await
            {
                Some(current) => indexed = current,
                None => return Ok(StatusOutcome::Stale),
            }
        }
        let mut work = match basis {
            Basis::Index => indexed,
            Basis::Live => match self.read(cluster, &work_ref.name).await? {
                Some(live) => Arc::new(live),
                None => return Ok(StatusOutcome::Stale),
            },
        };
        let mut live = basis == Basis::Live;
        // A copy is judged at most twice: the index's, then a fresh read; a
        // second conflict means another writer is busy, and the caller
        // retries with backoff.
        loop {
            match self.write_on(&work, report, live).await? {
                Step::Done(outcome) => return Ok(outcome),
                Step::Reread if !live => {
                    live = true;
                    work = match self.read(cluster, &work_ref.name).await? {
                        Some(current) => Arc::new(current),
                        None => return Ok(StatusOutcome::Stale),
                    };
                }
                Step::Reread => {
                    return Err(StatusWriteError::Conflict {
                        namespace: cluster.to_string(),
                        name: work_ref.name.clone(),
                    });
                }
            }
        }
    }

    /// Whether the hub holds the work `report` names for `cluster` (same
    /// namespace, name and UID in the index). Reports for anything else are
    /// dropped before they can take memory: an agent cannot make the hub
    /// keep state for UIDs it invents. Never fails.
    pub async fn holds(&self, cluster: &str, report: &v1::WorkStatus) -> bool {
        let Some(work_ref) = report.work.as_ref() else {
            return false;
        };
        if work_ref.namespace != cluster {
            return false;
        }
        self.index
            .get(cluster, &work_ref.name)
            .await
            .is_some_and(|w| w.metadata.uid.as_deref() == Some(work_ref.uid.as_str()))
    }

    async fn read(
        &self,
        cluster: &str,
        name: &str,
    ) -> Result<Option<ManifestWork>, StatusWriteError> {
        let api: Api<ManifestWork> = Api::namespaced(self.client.clone(), cluster);
        api.get_opt(name)
            .await
            .map_err(|source| StatusWriteError::Read {
                namespace: cluster.to_string(),
                name: name.to_string(),
                source,
            })
    }

    /// Judges `report` against `work` (live when `live`) and writes it under
    /// `work`'s resourceVersion.
    async fn write_on(
        &self,
        work: &ManifestWork,
        report: &v1::WorkStatus,
        live: bool,
    ) -> Result<Step, StatusWriteError> {
        let work_ref = report.work.as_ref();
        if work.uid().as_deref() != work_ref.map(|w| w.uid.as_str()) {
            return Ok(if live {
                Step::Done(StatusOutcome::Stale)
            } else {
                Step::Reread
            });
        }
        if work.metadata.deletion_timestamp.is_some() {
            return self.write_deletion(work, report).await.map(Step::Done);
        }
        if report.gone || is_older(work, report) {
            return Ok(Step::Done(StatusOutcome::Stale));
        }
        // An agent cannot have applied a generation the work never had; the
        // index may just lag behind, the live object may not.
        if report.generation > work.metadata.generation.unwrap_or_default() {
            return Ok(if live {
                Step::Done(StatusOutcome::Stale)
            } else {
                Step::Reread
            });
        }
        let status = work_status(report);
        if work.status.as_ref() == Some(&status) {
            return Ok(Step::Done(StatusOutcome::Unchanged));
        }
        let name = work.name_any();
        let namespace = work.namespace().unwrap_or_default();
        let api: Api<ManifestWork> = Api::namespaced(self.client.clone(), &namespace);
        // Both fields always present, so a merge patch replaces them whole.
        let patch = serde_json::json!({
            "metadata": { "resourceVersion": work.resource_version() },
            "status": {
                "conditions": status.conditions,
                "resourceStatus": status.resource_status,
            },
        });
        match self
            .timed(api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch)))
            .await
        {
            Ok(_) => {
                // After the write, never instead of it: `work` is the copy
                // the write was made against, so each transition is seen by
                // exactly one successful write.
                self.events.status_written(work, &status);
                Ok(Step::Done(StatusOutcome::Written))
            }
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(Step::Reread),
            Err(kube::Error::Api(status)) if status.code == 404 => {
                Ok(Step::Done(StatusOutcome::Stale))
            }
            Err(source) => Err(StatusWriteError::Patch {
                namespace,
                name,
                source,
            }),
        }
    }
}

impl StatusWriter {
    /// A deleted work takes only deletion reports: its `Deleting` condition,
    /// and at the end `gone`, which lets the work go.
    async fn write_deletion(
        &self,
        work: &ManifestWork,
        report: &v1::WorkStatus,
    ) -> Result<StatusOutcome, StatusWriteError> {
        if report.gone {
            self.timed(self.deletion.release(work)).await?;
            return Ok(StatusOutcome::Released);
        }
        let Some(deleting) = report.conditions.iter().find(|c| c.r#type == DELETING) else {
            return Ok(StatusOutcome::Stale);
        };
        // The same bounds and repairs as any other condition.
        let bounded = work_status(&v1::WorkStatus {
            generation: report.generation,
            conditions: vec![deleting.clone()],
            ..Default::default()
        });
        let Some(deleting) = bounded.conditions.first() else {
            return Ok(StatusOutcome::Stale);
        };
        let written = self
            .timed(
                self.deletion
                    .set_deleting(work, &deleting.reason, &deleting.message),
            )
            .await?;
        Ok(if written {
            StatusOutcome::Written
        } else {
            StatusOutcome::Unchanged
        })
    }
}

// A report older than the generation already recorded would move status back.
fn is_older(work: &ManifestWork, report: &v1::WorkStatus) -> bool {
    let recorded = work
        .status
        .iter()
        .flat_map(|s| &s.conditions)
        .map(|c| c.observed_generation)
        .max()
        .unwrap_or(0);
    report.generation < recorded
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_api::manifest_work::{Condition, ManifestWorkStatus};
    use ferry_semantics::contract::APPLIED;

    fn work_at(observed: &[i64]) -> ManifestWork {
        let mut work = ManifestWork::new("w", Default::default());
        work.status = Some(ManifestWorkStatus {
            conditions: observed
                .iter()
                .map(|g| Condition {
                    type_: APPLIED.into(),
                    observed_generation: *g,
                    ..Default::default()
                })
                .collect(),
            resource_status: None,
        });
        work
    }

    fn report_at(generation: i64) -> v1::WorkStatus {
        v1::WorkStatus {
            generation,
            ..Default::default()
        }
    }

    #[test]
    fn a_report_older_than_any_recorded_condition_is_older() {
        let work = work_at(&[3, 5]);
        assert!(is_older(&work, &report_at(4)));
        assert!(!is_older(&work, &report_at(5)));
        assert!(!is_older(&work_at(&[]), &report_at(0)));
    }

    #[test]
    fn forbidden_and_unavailable_are_retried_invalid_is_not() {
        let api = |code: u16| {
            kube::Error::Api(Box::new(kube::core::Status {
                code,
                ..Default::default()
            }))
        };
        for code in [403, 409, 429, 500, 503] {
            assert!(is_transient_api(&api(code)), "{code}");
        }
        for code in [400, 404, 413, 422] {
            assert!(!is_transient_api(&api(code)), "{code}");
        }
    }
}
