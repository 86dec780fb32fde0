//! One apply pass over a work, and publishing a work's status so that an
//! unchanged pass sends nothing.

use ferry_proto::v1;
use tracing::{Instrument as _, debug, info_span, warn};

use super::Shared;
use crate::conditions::{carry_work_transition_times, condition, condition_of, is_complete};
use crate::drift::DriftWatch;
use crate::metrics::KindLabel;
use ferry_semantics::contract::{
    APPLIED, AVAILABLE, DEPENDENCIES_READY, REASON_DEPENDENCIES_NOT_READY,
    REASON_DEPENDENCIES_READY,
};
use ferry_semantics::drift_report::{drop_corrections, settle_drift};

/// What one apply pass knows before it starts.
#[derive(Clone, Copy)]
pub(super) struct Pass {
    /// The work was fully applied before and the spoke woke this pass, so
    /// every object it writes is a drift correction.
    pub(super) correcting: bool,
    /// The work's dependencies were all ready.
    pub(super) dependencies_ready: bool,
    /// The work's record is probably not on the spoke yet.
    pub(super) record_likely_new: bool,
}

/// One apply pass; true when nothing needs a retry.
pub(super) async fn apply(
    uid: &str,
    upsert: &v1::WorkUpsert,
    shared: &Shared,
    drift: &mut DriftWatch,
    pass: Pass,
) -> bool {
    let Pass {
        correcting,
        dependencies_ready,
        record_likely_new,
    } = pass;
    // A completed work is no longer updated (OCM): its objects are neither
    // re-applied nor corrected, and its last report stands.
    if let Some(previous) = shared.board.latest(uid).await
        && is_complete(&previous)
    {
        debug!(%uid, "work is complete; not updating it");
        return true;
    }
    // The hub's send span is the parent, so this pass joins the trace of
    // the generation it applies.
    let span = ferry_telemetry::span(|| {
        let work = upsert.work.as_ref();
        info_span!(
            "apply_work",
            work = %work.map(|w| w.name.as_str()).unwrap_or_default(),
            work.uid = %uid,
            generation = upsert.generation,
            manifests = upsert.spec.as_ref().map_or(0, |s| s.manifests_json.len()),
            correcting,
        )
    });
    ferry_telemetry::set_parent(&span, &upsert.trace_context);
    let mut result = shared
        .reconciler
        .reconcile(upsert, record_likely_new)
        .instrument(span.clone())
        .await;
    result.status.trace_context = ferry_telemetry::inject(&span);
    if !correcting {
        drop_corrections(&mut result.status);
    }
    if correcting {
        for kind in &result.written {
            shared
                .metrics
                .drift_corrections
                .get_or_create(&KindLabel { kind: kind.clone() })
                .inc();
        }
    }
    drift.track(&result.managed).await;
    if dependencies_ready {
        result.status.conditions.push(condition(
            DEPENDENCIES_READY,
            true,
            REASON_DEPENDENCIES_READY,
            format!(
                "every work it depends on was ready when generation {} was applied; it stays applied if one turns not ready later",
                upsert.generation
            ),
            upsert.generation,
        ));
    }
    publish(uid, result.status, shared).await;
    // After the report, not before it: the record already names every
    // object the pass may have created, and this write only adds their
    // UIDs, so it need not stand between the spoke and the hub. A failed
    // write retries the pass.
    if let Some(update) = &result.record
        && let Err(error) = shared
            .reconciler
            .applied()
            .set_resources(&update.name, &update.resources)
            .await
    {
        warn!(%uid, %error, "could not record the applied objects");
        result.retry = true;
    }
    if result.retry {
        debug!(%uid, generation = upsert.generation, "work not fully applied; retrying");
    }
    !result.retry
}

/// Publishes `status`, keeping transition times of unchanged conditions so
/// that an unchanged pass sends nothing.
pub(super) async fn publish(uid: &str, mut status: v1::WorkStatus, shared: &Shared) {
    let previous = shared.board.latest(uid).await;
    if let Some(previous) = &previous {
        carry_work_transition_times(previous, &mut status);
    }
    settle_drift(previous.as_ref(), &mut status);
    if let Some(previous) = &previous {
        keep_reported_trace(previous, &mut status);
    }
    // Published first, so that a work woken by the change reads this status
    // from the board when its readiness rule looks.
    let observed = status
        .work
        .as_ref()
        .map(|work| (work.name.clone(), status.conditions.clone()));
    let changed = shared.board.publish(uid, status).await;
    if let Some((name, conditions)) = observed {
        shared
            .dependencies
            .observe(&name, uid, &conditions, changed);
    }
}

/// A pass that changed nothing but its trace context keeps the context
/// already reported, so the board sees no change and nothing is sent: with
/// traces on, an idle work costs the hub no more reports than with them off.
fn keep_reported_trace(previous: &v1::WorkStatus, status: &mut v1::WorkStatus) {
    if status.trace_context.is_empty() || status.trace_context == previous.trace_context {
        return;
    }
    let fresh = std::mem::replace(&mut status.trace_context, previous.trace_context.clone());
    if status != previous {
        status.trace_context = fresh;
    }
}

/// The report of a work whose current generation waits for its
/// dependencies: why (`DependenciesReady=False`), and that nothing of this
/// generation is applied yet. Objects of an earlier generation stay as they are.
pub(super) fn waiting_report(
    upsert: &v1::WorkUpsert,
    reason: &str,
    message: String,
) -> v1::WorkStatus {
    let generation = upsert.generation;
    v1::WorkStatus {
        work: upsert.work.clone(),
        generation,
        conditions: vec![
            condition(
                APPLIED,
                false,
                REASON_DEPENDENCIES_NOT_READY,
                format!(
                    "generation {generation} waits for its dependencies (see DependenciesReady)"
                ),
                generation,
            ),
            condition_of(
                AVAILABLE,
                "Unknown",
                REASON_DEPENDENCIES_NOT_READY,
                "not applied yet: waiting for its dependencies",
                generation,
            ),
            condition(DEPENDENCIES_READY, false, reason, message, generation),
        ],
        manifests: vec![],
        gone: false,
        trace_context: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn traced(status: &v1::WorkStatus, parent: &str) -> v1::WorkStatus {
        let mut status = status.clone();
        status.trace_context = [("traceparent".to_owned(), parent.to_owned())].into();
        status
    }

    #[test]
    fn an_unchanged_pass_keeps_the_reported_trace() {
        let base = v1::WorkStatus {
            generation: 3,
            ..Default::default()
        };
        let previous = traced(&base, "first");
        let mut again = traced(&base, "second");
        keep_reported_trace(&previous, &mut again);
        assert_eq!(again, previous, "nothing new to report");

        let mut changed = traced(&base, "second");
        changed.generation = 4;
        keep_reported_trace(&previous, &mut changed);
        assert_eq!(changed.trace_context["traceparent"], "second");

        let mut untraced = base.clone();
        keep_reported_trace(&previous, &mut untraced);
        assert!(untraced.trace_context.is_empty(), "tracing off writes none");
    }
}
