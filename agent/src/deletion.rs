//! Lets go of every object of a work that is going away (deleted on the hub,
//! or evicted because the hub no longer has it), then of the work's record.
//! Works from the durable record alone, so an agent that restarts in the
//! middle of a deletion finishes it.

use ferry_proto::v1;
use kube::Client;
use kube::ResourceExt;

use crate::applied_works::{AppliedResource, AppliedWorks, AppliedWorksError};
use crate::drift::ManagedObject;
use crate::ownership_marks::{Released, api_for_recorded, release};
use crate::semantics::release::DeletePolicy;

/// Where a work's deletion stands after one pass.
pub enum Progress {
    /// Every object is deleted or orphaned and the record is gone.
    Done,
    /// Some objects are still on the cluster.
    Waiting {
        /// One line per remaining object: which and why (finalizers, errors).
        blockers: Vec<String>,
        /// How many objects the work had at the start of this pass.
        total: usize,
        /// The remaining objects, to watch for their disappearance.
        remaining: Vec<ManagedObject>,
    },
}

/// Releases the objects recorded for work `uid` as `option` (or, when the hub
/// sent none, the recorded deleteOption) says, and removes the record once
/// nothing is left. Fails only when the record cannot be read or written;
/// objects that cannot be released yet are reported in `Progress::Waiting`.
pub async fn release_work(
    client: &Client,
    applied: &AppliedWorks,
    uid: &str,
    option: Option<&v1::DeleteOption>,
) -> Result<Progress, AppliedWorksError> {
    let Some(record) = applied.get(uid).await? else {
        return Ok(Progress::Done);
    };
    let name = record.name_any();
    let Some(owner) = record.owner() else {
        return Ok(Progress::Done);
    };
    let recorded_option = record.spec.delete_option.as_ref().map(|o| o.to_wire());
    let policy = DeletePolicy::from_wire(option.or(recorded_option.as_ref()));
    let resources = record.resources();
    let mut kept: Vec<AppliedResource> = Vec::new();
    let mut blockers = Vec::new();
    for resource in &resources {
        let disposition = policy.disposition(
            &resource.group,
            &resource.resource,
            &resource.namespace,
            &resource.name,
        );
        match release(client, resource, &owner, disposition).await {
            Ok(Released::Gone | Released::Orphaned | Released::Shared) => {}
            Ok(Released::Terminating { finalizers }) => {
                blockers.push(format!(
                    "{} is terminating, waiting for finalizers [{}]",
                    resource.describe(),
                    finalizers.join(", ")
                ));
                kept.push(resource.clone());
            }
            Err(error) => {
                blockers.push(error.to_string());
                kept.push(resource.clone());
            }
        }
    }
    if kept.is_empty() {
        applied.remove(&name).await?;
        return Ok(Progress::Done);
    }
    if kept.len() != resources.len() {
        applied.set_resources(&name, &kept).await?;
    }
    let remaining = kept
        .iter()
        .map(|r| {
            ManagedObject::new(
                api_for_recorded(client, r),
                &r.api_version(),
                &r.kind,
                &r.namespace,
                &r.name,
            )
        })
        .collect();
    Ok(Progress::Waiting {
        blockers,
        total: resources.len(),
        remaining,
    })
}
