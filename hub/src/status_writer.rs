//! Writes agent reports to the ManifestWork status subresource, only when they
//! change something and only when they are not older than what is there.

use std::sync::Arc;

use ferry_proto::v1;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, ResourceExt};

use crate::manifest_work::{
    Condition, FeedbackValue, FieldValue, ManifestCondition, ManifestResourceMeta,
    ManifestResourceStatus, ManifestWork, ManifestWorkStatus, StatusFeedbackResult,
};
use crate::work_deletion::{DELETING, DeletionError, WorkDeletion};
use crate::work_index::WorkIndex;

/// Field manager the hub writes status with.
pub const HUB_FIELD_MANAGER: &str = "ferry-hub";

/// What became of one agent report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusOutcome {
    /// The status subresource was patched.
    Written,
    /// The report matched the stored status: no write.
    Unchanged,
    /// The report was for a work or generation the hub no longer has.
    Stale,
    /// The agent released every object of a deleted work; the hub let the
    /// work go.
    Released,
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
    /// Updating a deleted work failed.
    #[error(transparent)]
    Deletion(#[from] DeletionError),
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
}

/// Patches ManifestWork status from agent reports.
pub struct StatusWriter {
    client: Client,
    index: Arc<WorkIndex>,
    deletion: WorkDeletion,
}

impl StatusWriter {
    /// A writer using `client` and reading current works from `index`.
    pub fn new(client: Client, index: Arc<WorkIndex>) -> Self {
        Self {
            deletion: WorkDeletion::new(client.clone()),
            client,
            index,
        }
    }

    /// Writes `report` from the agent of `cluster`. Reports for another cluster's
    /// namespace, for a deleted or recreated work, or older than the stored
    /// status are dropped as stale.
    pub async fn write(
        &self,
        cluster: &str,
        report: &v1::WorkStatus,
    ) -> Result<StatusOutcome, StatusWriteError> {
        let work_ref = report
            .work
            .as_ref()
            .ok_or_else(|| StatusWriteError::MissingWorkRef {
                cluster: cluster.to_string(),
            })?;
        if work_ref.namespace != cluster {
            return Ok(StatusOutcome::Stale);
        }
        let Some(work) = self.index.get(cluster, &work_ref.name).await else {
            return Ok(StatusOutcome::Stale);
        };
        if work.uid().as_deref() != Some(work_ref.uid.as_str()) {
            return Ok(StatusOutcome::Stale);
        }
        if work.metadata.deletion_timestamp.is_some() {
            return self.write_deletion(&work, report).await;
        }
        if report.gone || is_older(&work, report) {
            return Ok(StatusOutcome::Stale);
        }
        let status = work_status(report);
        if work.status.as_ref() == Some(&status) {
            return Ok(StatusOutcome::Unchanged);
        }
        let api: Api<ManifestWork> = Api::namespaced(self.client.clone(), cluster);
        let patch = serde_json::json!({ "status": status });
        api.patch_status(
            &work_ref.name,
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .map_err(|source| StatusWriteError::Patch {
            namespace: cluster.to_string(),
            name: work_ref.name.clone(),
            source,
        })?;
        Ok(StatusOutcome::Written)
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
            self.deletion.release(work).await?;
            return Ok(StatusOutcome::Released);
        }
        let Some(deleting) = report.conditions.iter().find(|c| c.r#type == DELETING) else {
            return Ok(StatusOutcome::Stale);
        };
        let written = self
            .deletion
            .set_deleting(work, &deleting.reason, &deleting.message)
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
        .filter(|c| c.type_ == "Applied")
        .map(|c| c.observed_generation)
        .max()
        .unwrap_or(0);
    report.generation < recorded
}

/// The ManifestWork status an agent report describes.
pub fn work_status(report: &v1::WorkStatus) -> ManifestWorkStatus {
    let manifests: Vec<ManifestCondition> = report
        .manifests
        .iter()
        .map(|m| {
            let meta = m.resource_meta.clone().unwrap_or_default();
            ManifestCondition {
                resource_meta: ManifestResourceMeta {
                    ordinal: meta.ordinal,
                    group: meta.group,
                    version: meta.version,
                    kind: meta.kind,
                    resource: meta.resource,
                    name: meta.name,
                    namespace: meta.namespace,
                },
                status_feedback: (!m.feedback.is_empty()).then(|| StatusFeedbackResult {
                    values: m.feedback.iter().map(feedback_value).collect(),
                }),
                conditions: m.conditions.iter().map(condition).collect(),
            }
        })
        .collect();
    ManifestWorkStatus {
        conditions: report.conditions.iter().map(condition).collect(),
        resource_status: Some(ManifestResourceStatus { manifests }),
    }
}

fn condition(c: &v1::Condition) -> Condition {
    let time =
        Timestamp::from_second(c.last_transition_unix_seconds).unwrap_or(Timestamp::UNIX_EPOCH);
    Condition {
        type_: c.r#type.clone(),
        status: c.status.clone(),
        reason: c.reason.clone(),
        message: c.message.clone(),
        observed_generation: c.observed_generation,
        last_transition_time: time.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
    }
}

fn feedback_value(v: &v1::FeedbackValue) -> FeedbackValue {
    let mut field_value = FieldValue {
        type_: v.r#type.clone(),
        ..Default::default()
    };
    match v.r#type.as_str() {
        "Integer" => field_value.integer = Some(v.integer),
        "Boolean" => field_value.boolean = Some(v.boolean),
        "JsonRaw" => field_value.json_raw = Some(v.json_raw.clone()),
        _ => field_value.string = Some(v.string.clone()),
    }
    FeedbackValue {
        name: v.name.clone(),
        field_value,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_keep_reason_message_generation_and_time() {
        let report = v1::WorkStatus {
            work: None,
            generation: 4,
            conditions: vec![v1::Condition {
                r#type: "Applied".into(),
                status: "False".into(),
                reason: "UnknownKind".into(),
                message: "no kind Gadget".into(),
                observed_generation: 4,
                last_transition_unix_seconds: 1_700_000_000,
            }],
            manifests: vec![],
            gone: false,
        };
        let status = work_status(&report);
        let c = &status.conditions[0];
        assert_eq!(c.reason, "UnknownKind");
        assert_eq!(c.observed_generation, 4);
        assert_eq!(c.last_transition_time, "2023-11-14T22:13:20Z");
    }
}
