//! The ManifestWork checks the hub API server runs itself, as CEL
//! `x-kubernetes-validations` in the CRD: they hold whether or not a hub
//! process (and its webhook) is running.
//!
//! The API server estimates the cost of every rule from the schema's bounds
//! (`maxItems`, `maxLength`), multiplied by how many times the rule can run
//! in one object, and refuses a CRD whose rules could cost more than
//! 10,000,000 units each (100,000,000 in all); so every list and string a
//! rule reads is bounded here. Checks across manifests live in the admission
//! policy instead (the hub's `admission::duplicates_policy`), which has no static budget.

use schemars::{Schema, json_schema};

/// Most manifests (and manifest configs) one work may hold (`maxItems`):
/// the admission policy's duplicate check stays within the API server's
/// per-expression run-time budget (1,000,000) up to here.
pub const MAX_MANIFESTS: usize = 500;

/// Most feedback rules of one manifest config (`maxItems`).
pub const MAX_FEEDBACK_RULES: usize = 16;

/// Most named paths of one feedback rule (`maxItems`).
pub const MAX_FEEDBACK_PATHS: usize = 64;

/// Longest `apiVersion` of a manifest: a DNS subdomain group (253), `/` and
/// a DNS label version (63).
const MAX_API_VERSION: usize = 317;

/// Longest `kind`: the API server checks kinds as DNS-1035 labels.
const MAX_KIND: usize = 63;

/// Longest `metadata.name` (a DNS subdomain, the longest any kind allows).
const MAX_NAME: usize = 253;

/// Longest `metadata.namespace` (a DNS label).
const MAX_NAMESPACE: usize = 63;

/// Schema of one manifest: any object (unknown fields kept), checked by the
/// API server as an embedded resource, with the fields CEL rules read
/// declared and bounded.
pub fn manifest_schema() -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
        "x-kubernetes-embedded-resource": true,
        "properties": {
            "apiVersion": {"type": "string", "maxLength": MAX_API_VERSION},
            "kind": {"type": "string", "maxLength": MAX_KIND},
            // CEL sees metadata.namespace only when name and generateName are
            // declared too; the API server checks embedded metadata itself.
            "metadata": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "maxLength": MAX_NAME},
                    "generateName": {"type": "string", "maxLength": MAX_NAME},
                    "namespace": {"type": "string", "maxLength": MAX_NAMESPACE}
                }
            }
        },
        "x-kubernetes-validations": [
            {
                "rule": "has(self.metadata) && has(self.metadata.name) && self.metadata.name != ''",
                "messageExpression": "'manifest ' + self.kind + ' has no metadata.name'",
                "message": "manifest has no metadata.name",
                "fieldPath": ".metadata.name",
                "reason": "FieldValueRequired"
            },
            {
                "rule": "!has(self.apiVersion) || !(self.apiVersion.startsWith('/') || self.apiVersion.endsWith('/'))",
                "messageExpression": "'manifest apiVersion \"' + self.apiVersion + '\" is not of the form group/version or version'",
                "message": "manifest apiVersion is not of the form group/version or version",
                "fieldPath": ".apiVersion",
                "reason": "FieldValueInvalid"
            }
        ]
    })
}
