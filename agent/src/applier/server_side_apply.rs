//! The ServerSideApply strategy: the planned body is applied under the
//! work's field manager unless the live object already holds all of it.

use kube::api::{Patch, PatchParams};
use serde_json::Value;

use ferry_semantics::apply_outcome::Applied;
use ferry_semantics::compare::is_subset;
use ferry_semantics::ignore::{IgnoreRule, SsaInput, plan_server_side_apply};
use ferry_semantics::release::{add_managed_label, add_references, apply_references};

use super::errors::{classify_apply, is_stale};
use super::{ApplyError, ApplyOutcome, ManifestWrite, marks, outcome, to_json};

/// Applies the manifest with server-side apply after the ignore rules have
/// shaped its body; fails as the apply request does.
pub(super) async fn server_side_apply(
    write: &ManifestWrite<'_>,
    live: Option<&Value>,
    force: bool,
    manager: &str,
    rules: &[IgnoreRule],
    what: &str,
) -> Result<ApplyOutcome, ApplyError> {
    let plan = plan_server_side_apply(&SsaInput {
        desired: write.desired,
        live,
        rules,
        manager,
    });
    let request = SsaRequest {
        manager,
        force,
        notes: plan.notes.iter().map(|note| note.to_string()).collect(),
    };
    ssa_unless_unchanged(write, live, &plan.body, request, what).await
}

/// How one server-side apply is sent, and what its outcome carries.
pub(super) struct SsaRequest<'a> {
    /// The field manager it applies as.
    pub(super) manager: &'a str,
    /// Whether it takes fields other managers own.
    pub(super) force: bool,
    /// Notes for the outcome (ignore paths that match nothing, a fallback).
    pub(super) notes: Vec<String>,
}

/// Applies `body` with server-side apply unless the live object already
/// holds all of it; a 409 on a pinned resourceVersion is a stale read, any
/// other 409 a field conflict.
pub(super) async fn ssa_unless_unchanged(
    write: &ManifestWrite<'_>,
    live: Option<&Value>,
    body: &Value,
    request: SsaRequest<'_>,
    what: &str,
) -> Result<ApplyOutcome, ApplyError> {
    let SsaRequest {
        manager,
        force,
        notes,
    } = request;
    // A create carries this work's mark; a later apply keeps every mark this
    // manager's earlier applies own, or the API server would remove them.
    let references = marks(write, apply_references(live, write.owner, manager));
    let mut body = body.clone();
    add_references(&mut body, &references);
    add_managed_label(&mut body);
    if let Some(live) = live
        && is_subset(&body, live, write.schema)
    {
        return Ok(outcome(Applied::Unchanged, Some(live.clone()), notes));
    }
    let mut params = PatchParams::apply(manager);
    params.force = force;
    let pinned = references.pin.is_some();
    let written = write
        .api
        .patch(&write.identity.name, &params, &Patch::Apply(&body))
        .await
        .map_err(|e| match e {
            kube::Error::Api(status) if pinned && status.code == 409 && is_stale(&status) => {
                ApplyError::Stale {
                    what: what.to_string(),
                }
            }
            other => classify_apply(what, write.identity, other),
        })?;
    let applied = if live.is_some() {
        Applied::Updated
    } else {
        Applied::Created
    };
    Ok(outcome(applied, Some(to_json(&written)), notes))
}
