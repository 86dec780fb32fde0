//! The Update strategy: a three-way merge against the last-applied
//! annotation, sent as a merge patch pinned to the version it was computed
//! from. A manifest too large for that annotation falls back to server-side
//! apply.

use kube::api::{DynamicObject, Patch, PatchParams};
use serde_json::Value;

use ferry_semantics::apply_outcome::Applied;
use ferry_semantics::contract::AGENT_FIELD_MANAGER;
use ferry_semantics::hash::{
    LAST_APPLIED_ANNOTATION, OBJECT_HASH_ANNOTATION, canonical_json, object_hash,
    strip_ferry_annotations,
};
use ferry_semantics::merge::{merge_patch, three_way_merge};
use ferry_semantics::release::add_managed_label;

use super::create_only::create;
use super::errors::classify;
use super::server_side_apply::{SsaRequest, ssa_unless_unchanged};
use super::{
    ApplyError, ApplyOutcome, MAX_LAST_APPLIED_BYTES, ManifestWrite, outcome, to_json,
    with_annotations,
};

/// The object as Update writes it (the hash and last-applied annotations,
/// ferry's label), or the manifest's size in bytes when it is too large for
/// the last-applied annotation and Update falls back to server-side apply.
pub(super) fn update_body(write: &ManifestWrite<'_>) -> Result<Value, usize> {
    let last_applied = canonical_json(&without_ferry_annotations(write.desired));
    if last_applied.len() > MAX_LAST_APPLIED_BYTES {
        return Err(last_applied.len());
    }
    let mut desired = with_annotations(
        write.desired,
        &[
            (OBJECT_HASH_ANNOTATION, object_hash(write.desired, &[])),
            (LAST_APPLIED_ANNOTATION, last_applied),
        ],
    );
    // Not in the last-applied record: the label is ferry's bookkeeping, and
    // the three-way merge keeps setting it because `desired` has it.
    add_managed_label(&mut desired);
    Ok(desired)
}

/// Creates the object when it is absent, else merge-patches what changed
/// since the last apply; a 409 means the object moved since it was read.
pub(super) async fn update(
    write: &ManifestWrite<'_>,
    live: Option<&DynamicObject>,
    live_json: Option<&Value>,
    what: &str,
) -> Result<ApplyOutcome, ApplyError> {
    let desired = match update_body(write) {
        Ok(desired) => desired,
        Err(size) => {
            let note = format!(
                "the manifest is {} KiB, too large for the last-applied annotation; applied with server-side apply instead",
                size / 1024
            );
            let body = with_annotations(
                write.desired,
                &[(OBJECT_HASH_ANNOTATION, object_hash(write.desired, &[]))],
            );
            let request = SsaRequest {
                manager: AGENT_FIELD_MANAGER,
                force: false,
                notes: vec![note],
            };
            return ssa_unless_unchanged(write, live_json, &body, request, what).await;
        }
    };
    let (Some(live), Some(live_json)) = (live, live_json) else {
        let created = create(write, &desired, what).await?;
        return Ok(outcome(Applied::Created, Some(to_json(&created)), vec![]));
    };
    let previous: Option<Value> = live
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(LAST_APPLIED_ANNOTATION))
        .and_then(|text| serde_json::from_str(text).ok());
    let merged = three_way_merge(previous.as_ref(), &desired, live_json, write.schema);
    let Some(mut patch) = merge_patch(live_json, &merged) else {
        return Ok(outcome(Applied::Unchanged, Some(live_json.clone()), vec![]));
    };
    // Optimistic concurrency: the patch was computed from this version.
    if let Some(version) = &live.metadata.resource_version
        && let Some(object) = patch.as_object_mut()
    {
        let metadata = object
            .entry("metadata")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Some(metadata) = metadata.as_object_mut() {
            metadata.insert("resourceVersion".into(), Value::String(version.clone()));
        }
    }
    let params = PatchParams {
        field_manager: Some(AGENT_FIELD_MANAGER.into()),
        ..Default::default()
    };
    let written = write
        .api
        .patch(&write.identity.name, &params, &Patch::Merge(&patch))
        .await
        .map_err(|e| match e {
            kube::Error::Api(status) if status.code == 409 => ApplyError::Stale {
                what: what.to_string(),
            },
            other => classify(what, write.identity, other),
        })?;
    Ok(outcome(Applied::Updated, Some(to_json(&written)), vec![]))
}

// The user's manifest as last-applied records it: without ferry's bookkeeping.
fn without_ferry_annotations(manifest: &Value) -> Value {
    let mut out = manifest.clone();
    strip_ferry_annotations(&mut out);
    out
}
