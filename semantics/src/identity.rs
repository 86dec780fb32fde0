//! What a manifest is and in which order the manifests of a work are applied
//! (which manifest config governs each is `config_match`'s job).

use serde_json::Value;

/// What identifies a manifest on the spoke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestIdentity {
    /// API group; empty for the core group.
    pub group: String,
    /// API version within the group.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace`, if the manifest sets one.
    pub namespace: Option<String>,
}

/// `apiVersion` as written in manifests: `version` for the core group,
/// else `group/version`.
pub fn api_version_of(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    }
}

impl ManifestIdentity {
    /// `apiVersion` as written in manifests.
    pub fn api_version(&self) -> String {
        api_version_of(&self.group, &self.version)
    }

    /// Short human form, e.g. `apps/v1 Deployment web/web`.
    pub fn describe(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {} {ns}/{}", self.api_version(), self.kind, self.name),
            None => format!("{} {} {}", self.api_version(), self.kind, self.name),
        }
    }
}

/// Why a manifest cannot be applied as written. Each message tells the user
/// what to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    /// The bytes are not JSON.
    #[error("manifest is not valid JSON: {0}")]
    NotJson(String),
    /// The JSON is not an object.
    #[error("manifest must be a JSON object, got {0}")]
    NotAnObject(&'static str),
    /// `apiVersion` is missing or empty.
    #[error("manifest has no apiVersion")]
    MissingApiVersion,
    /// `apiVersion` has more than one `/`.
    #[error("manifest apiVersion {0:?} is not of the form group/version or version")]
    BadApiVersion(String),
    /// `kind` is missing or empty.
    #[error("manifest has no kind")]
    MissingKind,
    /// `metadata.name` is missing or empty (generateName is not supported:
    /// the agent could never find the object again).
    #[error("manifest {kind} has no metadata.name")]
    MissingName {
        /// The manifest's kind.
        kind: String,
    },
    /// A sealed Secret entry is malformed (what is wrong, how to fix it).
    #[error("{0}")]
    Sealed(String),
}

impl ManifestError {
    /// The condition reason for this error.
    pub fn reason(&self) -> &'static str {
        "InvalidManifest"
    }
}

/// Parses a manifest received from the hub and reads its identity.
pub fn identify(raw: &[u8]) -> Result<(Value, ManifestIdentity), ManifestError> {
    let value: Value =
        serde_json::from_slice(raw).map_err(|e| ManifestError::NotJson(e.to_string()))?;
    let identity = identity_of(&value)?;
    Ok((value, identity))
}

fn identity_of(value: &Value) -> Result<ManifestIdentity, ManifestError> {
    let object = value
        .as_object()
        .ok_or(ManifestError::NotAnObject(json_type(value)))?;
    let text = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let api_version = text(object.get("apiVersion")).ok_or(ManifestError::MissingApiVersion)?;
    let (group, version) = match api_version.split('/').collect::<Vec<_>>().as_slice() {
        [version] => (String::new(), version.to_string()),
        [group, version] if !group.is_empty() && !version.is_empty() => {
            (group.to_string(), version.to_string())
        }
        _ => return Err(ManifestError::BadApiVersion(api_version)),
    };
    let kind = text(object.get("kind")).ok_or(ManifestError::MissingKind)?;
    // A sealed entry is the Secret it carries, everywhere but where it is
    // opened: that is what is written, configured and deleted.
    if crate::sealing::is_sealed(value) {
        let envelope = crate::sealing::SealedEnvelope::parse(value)
            .map_err(|e| ManifestError::Sealed(e.to_string()))?;
        return Ok(ManifestIdentity {
            group: String::new(),
            version: "v1".into(),
            kind: "Secret".into(),
            name: envelope.name,
            namespace: Some(envelope.namespace),
        });
    }
    let metadata = object.get("metadata");
    let name = text(metadata.and_then(|m| m.get("name")))
        .ok_or_else(|| ManifestError::MissingName { kind: kind.clone() })?;
    let namespace = text(metadata.and_then(|m| m.get("namespace")));
    Ok(ManifestIdentity {
        group,
        version,
        kind,
        name,
        namespace,
    })
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Apply rank of a kind: things others live in or are defined by go first,
/// admission webhooks last so they cannot block the rest of their own work.
pub fn apply_rank(group: &str, kind: &str) -> u8 {
    match (group, kind) {
        ("", "Namespace") => 0,
        ("apiextensions.k8s.io", "CustomResourceDefinition") => 1,
        ("", "ServiceAccount" | "ConfigMap" | "Secret")
        | (
            "rbac.authorization.k8s.io",
            "ClusterRole" | "ClusterRoleBinding" | "Role" | "RoleBinding",
        )
        | ("scheduling.k8s.io", "PriorityClass")
        | ("storage.k8s.io", "StorageClass") => 2,
        (
            "admissionregistration.k8s.io",
            "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration",
        ) => 4,
        _ => 3,
    }
}

/// Indices of `identities` in apply order; manifests of equal rank keep the
/// order the user wrote them in. Manifests that failed to parse (None) go last:
/// they only produce a condition.
pub fn apply_order(identities: &[Option<&ManifestIdentity>]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..identities.len()).collect();
    order.sort_by_key(|&i| match identities[i] {
        Some(id) => apply_rank(&id.group, &id.kind),
        None => u8::MAX,
    });
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(raw: &str) -> Result<ManifestIdentity, ManifestError> {
        identify(raw.as_bytes()).map(|(_, id)| id)
    }

    #[test]
    fn a_core_manifest_has_an_empty_group() {
        let m =
            id(r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"n"}}"#)
                .expect("valid");
        assert_eq!((m.group.as_str(), m.version.as_str()), ("", "v1"));
        assert_eq!(m.namespace.as_deref(), Some("n"));
        assert_eq!(m.describe(), "v1 ConfigMap n/c");
    }

    #[test]
    fn a_grouped_manifest_splits_group_and_version() {
        let m = id(r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"}}"#)
            .expect("valid");
        assert_eq!((m.group.as_str(), m.version.as_str()), ("apps", "v1"));
        assert_eq!(m.namespace, None);
    }

    #[test]
    fn invalid_manifests_say_what_is_wrong() {
        assert!(matches!(id("{"), Err(ManifestError::NotJson(_))));
        assert_eq!(id("[1]"), Err(ManifestError::NotAnObject("an array")));
        assert_eq!(
            id(r#"{"kind":"X","metadata":{"name":"a"}}"#),
            Err(ManifestError::MissingApiVersion)
        );
        assert_eq!(
            id(r#"{"apiVersion":"a/b/c","kind":"X","metadata":{"name":"a"}}"#),
            Err(ManifestError::BadApiVersion("a/b/c".into()))
        );
        assert_eq!(
            id(r#"{"apiVersion":"v1","metadata":{"name":"a"}}"#),
            Err(ManifestError::MissingKind)
        );
        let err =
            id(r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{}}"#).expect_err("no name");
        assert_eq!(err.to_string(), "manifest ConfigMap has no metadata.name");
    }

    #[test]
    fn namespaces_and_crds_apply_first_and_webhooks_last() {
        let mk = |group: &str, kind: &str| ManifestIdentity {
            group: group.into(),
            version: "v1".into(),
            kind: kind.into(),
            name: "x".into(),
            namespace: None,
        };
        let ids = [
            mk(
                "admissionregistration.k8s.io",
                "ValidatingWebhookConfiguration",
            ),
            mk("example.com", "Widget"),
            mk("apps", "Deployment"),
            mk("apiextensions.k8s.io", "CustomResourceDefinition"),
            mk("", "ConfigMap"),
            mk("", "Namespace"),
        ];
        let refs: Vec<Option<&ManifestIdentity>> = ids.iter().map(Some).chain([None]).collect();
        assert_eq!(apply_order(&refs), vec![5, 3, 4, 1, 2, 0, 6]);
    }
}
