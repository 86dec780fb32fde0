//! Lets go of every object of a work that is going away (deleted on the hub,
//! or evicted because the hub no longer has it), then of the work's record.
//! Works from the durable record alone, so an agent that restarts in the
//! middle of a deletion finishes it.

use ferry_proto::v1;
use kube::Client;
use kube::ResourceExt;

use crate::applied_works::{AppliedWorks, AppliedWorksError};
use crate::deletion_brake::{Answer, DeletionBrake};
use crate::drift::ManagedObject;
use crate::release::{Remaining, recorded_resource, release_each};
use crate::write_identity::WriteIdentity;
use ferry_semantics::release::{DeletePolicy, Disposition};

/// Where a work's deletion stands after one pass.
pub enum Progress {
    /// Every object is deleted or orphaned and the record is gone.
    Done,
    /// The deletion brake keeps every object; the message says why and how
    /// to release.
    Held(String),
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
/// nothing is left; with a `brake`, only once the brake lets the deletion go
/// (`Progress::Held` otherwise). Fails only when the record cannot be read
/// or written; objects that cannot be released yet are reported in
/// `Progress::Waiting`.
pub async fn release_work(
    writers: &WriteIdentity,
    client: &Client,
    applied: &AppliedWorks,
    uid: &str,
    option: Option<&v1::DeleteOption>,
    brake: Option<&DeletionBrake>,
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
    let resources = record.resources()?;
    if let Some(brake) = brake {
        // Orphaned objects stay on the cluster: only deletions count.
        let deleted = resources
            .iter()
            .filter(|r| {
                policy.disposition(&r.group, &r.resource, &r.namespace, &r.name)
                    == Disposition::Delete
            })
            .count() as u64;
        let owner = record.spec.owner.as_deref().unwrap_or_default();
        if let Answer::Held(message) = brake.ask(uid, &record.spec.work_name, owner, deleted).await
        {
            return Ok(Progress::Held(message));
        }
    }
    // Released as the account that wrote them when the agent writes as
    // executors (`client` only reads, for the watch of what remains).
    let executor = record.spec.executor.as_ref().map(|e| e.account());
    let writer = match writers.client_for(executor.as_ref()).await {
        Ok(writer) => writer,
        Err(error) => {
            return Ok(Progress::Waiting {
                blockers: vec![format!("cannot release the objects: {error}")],
                total: resources.len(),
                remaining: resources
                    .iter()
                    .map(|r| {
                        ManagedObject::new(client, &recorded_resource(r), &r.namespace, &r.name)
                    })
                    .collect(),
            });
        }
    };
    let Remaining { kept, blockers } = release_each(&writer, &resources, &owner, &policy).await;
    if kept.is_empty() {
        applied.remove(&name).await?;
        return Ok(Progress::Done);
    }
    if kept.len() != resources.len() {
        applied.set_resources(&name, &kept).await?;
    }
    let remaining = kept
        .iter()
        .map(|r| ManagedObject::new(client, &recorded_resource(r), &r.namespace, &r.name))
        .collect();
    Ok(Progress::Waiting {
        blockers,
        total: resources.len(),
        remaining,
    })
}
