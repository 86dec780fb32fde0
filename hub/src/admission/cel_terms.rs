//! CEL terms several policies share, in one place so they cannot drift
//! apart: a metadata-only update, and a namespace switched on by a label.

/// CEL: an UPDATE that leaves the spec as it was. The generation moves with
/// every spec change before validating admission runs, and comparing it is
/// cheap whatever the size of the object.
pub const METADATA_ONLY_UPDATE: &str = "(request.operation == 'UPDATE' && \
     oldObject.metadata.generation == object.metadata.generation)";

/// CEL: the namespace of the request carries label `label` with value
/// `true` (the per-namespace switch of the tenant policies).
pub fn namespace_labelled_true(label: &str) -> String {
    format!(
        "namespaceObject != null && has(namespaceObject.metadata.labels) && \
         '{label}' in namespaceObject.metadata.labels && \
         namespaceObject.metadata.labels['{label}'] == 'true'"
    )
}
