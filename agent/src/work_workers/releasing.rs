//! Releasing a work's objects (deleted by the hub, or evicted once the
//! hub has not had it for the grace period), one pass at a time.

use std::time::Duration;

use ferry_proto::v1;
use k8s_openapi::jiff::Timestamp;

use super::Shared;
use crate::conditions::condition;
use crate::deletion::{Progress, release_work};
use crate::drift::DriftWatch;
use ferry_semantics::contract::DELETING;

/// Where one pass of releasing a work's objects left them.
pub(super) enum Step {
    /// Every object is deleted or orphaned.
    Finished,
    /// Objects are still on the cluster (or the record could not be
    /// read); the message says which.
    Pending(String),
    /// The deletion brake keeps the objects; the message says why.
    Held(String),
}

/// One pass of releasing a work's objects.
pub(super) async fn release(
    uid: &str,
    option: Option<&v1::DeleteOption>,
    shared: &Shared,
    drift: &mut DriftWatch,
) -> Step {
    let reconciler = &shared.reconciler;
    match release_work(
        reconciler.writers(),
        reconciler.client(),
        reconciler.applied(),
        uid,
        option,
        shared.brake.as_deref(),
    )
    .await
    {
        Ok(Progress::Done) => {
            drift.track(&[]).await;
            Step::Finished
        }
        Ok(Progress::Held(message)) => Step::Held(message),
        Ok(Progress::Waiting {
            blockers,
            total,
            remaining,
        }) => {
            drift.track(&remaining).await;
            Step::Pending(format!(
                "{} of {total} objects are still on the cluster: {}",
                remaining.len(),
                blockers.join("; ")
            ))
        }
        Err(error) => Step::Pending(format!("cannot read or update the work's record: {error}")),
    }
}

/// A grace period this long or longer turns eviction off (OCM's bound): the
/// objects of works the hub does not have are kept for good, and any
/// eviction already started is called off.
pub const EVICTION_OFF_AT: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// None when the eviction grace period is over, else how long is left
/// (forever, with any start time cleared, when eviction is off).
pub(super) async fn eviction_due(
    uid: &str,
    shared: &Shared,
) -> Result<Option<Duration>, crate::applied_works::AppliedWorksError> {
    let applied = shared.reconciler.applied();
    let Some(record) = applied.get(uid).await? else {
        return Ok(None);
    };
    if shared.eviction_grace >= EVICTION_OFF_AT {
        applied.call_off_eviction(record).await?;
        return Ok(Some(shared.eviction_grace));
    }
    let started = applied.start_eviction(&record).await?;
    let elapsed = Timestamp::now().duration_since(started);
    let elapsed = Duration::try_from(elapsed).unwrap_or(Duration::ZERO);
    Ok(shared
        .eviction_grace
        .checked_sub(elapsed)
        .filter(|d| !d.is_zero()))
}

/// A report on a work being deleted: its `Deleting` condition, and `gone`
/// once nothing of it is left on the cluster.
pub(super) fn deletion_report(
    work: v1::WorkRef,
    generation: i64,
    gone: bool,
    reason: &str,
    message: String,
) -> v1::WorkStatus {
    v1::WorkStatus {
        work: Some(work),
        generation,
        conditions: vec![condition(DELETING, true, reason, message, generation)],
        manifests: vec![],
        gone,
        trace_context: Default::default(),
    }
}
