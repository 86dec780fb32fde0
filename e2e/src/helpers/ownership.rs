//! What tests read and change about ferry's hold on spoke objects: its owner
//! references, its annotations, its records, and finalizers that keep an
//! object from going away.

use kube::api::{Api, DynamicObject};
use serde_json::{Value, json};

use crate::helpers::spoke_actor::merge_as;

/// A finalizer tests put on spoke objects to keep them terminating.
pub const HOLD_FINALIZER: &str = "test.ferry.dev/hold";

/// API version of ferry's spoke records.
pub const APPLIED_WORK_API_VERSION: &str = "work.ferry.dev/v1alpha1";

/// How many ferry works hold `object` (owner references to AppliedManifestWorks).
pub fn ferry_owners(object: &Value) -> usize {
    object["metadata"]["ownerReferences"]
        .as_array()
        .map(|refs| {
            refs.iter()
                .filter(|r| r["kind"] == "AppliedManifestWork")
                .count()
        })
        .unwrap_or(0)
}

/// Whether `object` carries any `work.ferry.dev/` annotation or label (the
/// managed label goes with the annotations when ferry lets an object go).
pub fn has_ferry_annotations(object: &Value) -> bool {
    ["annotations", "labels"].iter().any(|field| {
        object["metadata"][field]
            .as_object()
            .is_some_and(|a| a.keys().any(|k| k.starts_with("work.ferry.dev/")))
    })
}

/// Puts `HOLD_FINALIZER` on object `name`, as a spoke controller would.
pub async fn hold(api: &Api<DynamicObject>, name: &str) -> Result<DynamicObject, kube::Error> {
    let patch = json!({"metadata": {"finalizers": [HOLD_FINALIZER]}});
    merge_as(api, name, "test-controller", &patch).await
}

/// Removes every finalizer of object `name`, letting it go if it is terminating.
pub async fn unhold(api: &Api<DynamicObject>, name: &str) -> Result<DynamicObject, kube::Error> {
    let patch = json!({"metadata": {"finalizers": null}});
    merge_as(api, name, "test-controller", &patch).await
}
