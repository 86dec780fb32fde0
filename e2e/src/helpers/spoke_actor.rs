//! Another actor on a spoke (an autoscaler, a controller, a person with
//! kubectl): writes objects under its own field manager, the way such actors
//! really do, and reads them back as plain JSON.

use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::Value;

/// Server-side applies `patch` as `manager`, taking ownership of what it sets.
pub async fn apply_as(
    api: &Api<DynamicObject>,
    name: &str,
    manager: &str,
    patch: &Value,
) -> Result<DynamicObject, kube::Error> {
    api.patch(
        name,
        &PatchParams::apply(manager).force(),
        &Patch::Apply(patch),
    )
    .await
}

/// JSON-merge-patches `patch` as `manager` (an imperative edit, like
/// `kubectl edit` or a controller's update).
pub async fn merge_as(
    api: &Api<DynamicObject>,
    name: &str,
    manager: &str,
    patch: &Value,
) -> Result<DynamicObject, kube::Error> {
    let params = PatchParams {
        field_manager: Some(manager.to_string()),
        ..Default::default()
    };
    api.patch(name, &params, &Patch::Merge(patch)).await
}

/// The object `name` as JSON.
///
/// Panics when it cannot be read: tests call it for objects they just saw
/// applied, so a failure is the test's finding.
pub async fn read_json(api: &Api<DynamicObject>, name: &str) -> Value {
    let object = api
        .get(name)
        .await
        .unwrap_or_else(|e| panic!("reading {name} on the spoke: {e}"));
    serde_json::to_value(object).unwrap_or_else(|e| panic!("{name} as JSON: {e}"))
}
