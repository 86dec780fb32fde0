//! The CreateOnly strategy, and the create request every strategy that
//! creates shares: the object is created when absent and never written
//! again.

use kube::api::{DynamicObject, PostParams};
use serde_json::Value;

use ferry_semantics::apply_outcome::Applied;
use ferry_semantics::contract::AGENT_FIELD_MANAGER;
use ferry_semantics::hash::{OBJECT_HASH_ANNOTATION, object_hash};
use ferry_semantics::release::{add_managed_label, add_references, apply_references};

use super::errors::classify;
use super::{ApplyError, ApplyOutcome, ManifestWrite, marks, outcome, to_json, with_annotations};

/// Leaves a live object as it is, or creates the manifest (with its hash)
/// when there is none; fails as the create does.
pub(super) async fn create_only(
    write: &ManifestWrite<'_>,
    live: Option<Value>,
    what: &str,
) -> Result<ApplyOutcome, ApplyError> {
    match live {
        Some(live) => Ok(outcome(Applied::LeftAsIs, Some(live), vec![])),
        None => {
            let body = with_annotations(
                write.desired,
                &[(OBJECT_HASH_ANNOTATION, object_hash(write.desired, &[]))],
            );
            let created = create(write, &body, what).await?;
            Ok(outcome(Applied::Created, Some(to_json(&created)), vec![]))
        }
    }
}

/// Creates the object with this work's owner reference in the body; a 409
/// (it exists after all) is a stale read.
pub(super) async fn create(
    write: &ManifestWrite<'_>,
    body: &Value,
    what: &str,
) -> Result<DynamicObject, ApplyError> {
    let mut body = body.clone();
    add_references(
        &mut body,
        &marks(write, apply_references(None, write.owner, "")),
    );
    add_managed_label(&mut body);
    let object: DynamicObject = serde_json::from_value(body).map_err(|e| ApplyError::Rejected {
        what: what.to_string(),
        message: format!("not a Kubernetes object: {e}"),
    })?;
    // Named, so managedFields attribute the create to ferry rather than to
    // whatever the API server derives from the user agent.
    let params = PostParams {
        field_manager: Some(AGENT_FIELD_MANAGER.into()),
        ..Default::default()
    };
    write
        .api
        .create(&params, &object)
        .await
        .map_err(|e| match e {
            kube::Error::Api(status) if status.code == 409 => ApplyError::Stale {
                what: what.to_string(),
            },
            other => classify(what, write.identity, other),
        })
}
