//! Building ManifestWorks and reading their status in tests and examples.

use ferry_hub::manifest_work::{
    Condition, Manifest, ManifestWork, ManifestWorkSpec, ManifestsTemplate,
};
use std::time::Duration;

use kube::Api;
use serde_json::Value;

use crate::wait::{WaitError, wait_until};

/// How long end-to-end tests wait for a work to be applied.
pub const APPLY_TIMEOUT: Duration = Duration::from_secs(90);

/// A work named `name` for cluster `cluster` holding `manifests`.
pub fn manifest_work(cluster: &str, name: &str, manifests: Vec<Value>) -> ManifestWork {
    let mut work = ManifestWork::new(
        name,
        ManifestWorkSpec {
            workload: ManifestsTemplate {
                manifests: manifests.into_iter().map(Manifest).collect(),
            },
            ..Default::default()
        },
    );
    work.metadata.namespace = Some(cluster.to_string());
    work
}

/// The work-level condition of `type_`, if reported.
pub fn work_condition<'a>(work: &'a ManifestWork, type_: &str) -> Option<&'a Condition> {
    work.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
}

/// The condition of `type_` of the manifest at `ordinal`, if reported.
pub fn manifest_condition<'a>(
    work: &'a ManifestWork,
    ordinal: i32,
    type_: &str,
) -> Option<&'a Condition> {
    work.status
        .as_ref()?
        .resource_status
        .as_ref()?
        .manifests
        .iter()
        .find(|m| m.resource_meta.ordinal == ordinal)?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
}

/// Whether the work reports `Applied=True` for its current generation.
pub fn is_applied_at_current_generation(work: Option<&ManifestWork>) -> bool {
    work.is_some_and(|w| {
        work_condition(w, "Applied").is_some_and(|c| {
            c.status == "True" && Some(c.observed_generation) == w.metadata.generation
        })
    })
}

/// A ConfigMap manifest.
pub fn config_map(namespace: &str, name: &str, data: Value) -> Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": data,
    })
}

/// Waits until work `name` reports `Applied=True` for its current generation.
pub async fn wait_applied(api: &Api<ManifestWork>, name: &str) -> Result<ManifestWork, WaitError> {
    let what = format!("work {name} applied at its current generation");
    let work = wait_until(
        api,
        name,
        &what,
        APPLY_TIMEOUT,
        is_applied_at_current_generation,
    )
    .await?;
    // The condition only holds for a present object.
    work.ok_or(WaitError::Timeout {
        what,
        timeout: APPLY_TIMEOUT,
        last: "absent".into(),
    })
}
