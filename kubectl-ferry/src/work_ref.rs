//! `NS/NAME`: how a user names one work.

use ferry_api::cluster_name::{ClusterNameError, validate_cluster_name};

/// Longest object name Kubernetes accepts (a DNS-1123 subdomain).
const MAX_NAME_LEN: usize = 253;

/// A work named by the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkRef {
    /// Namespace on the hub, which is the cluster's name.
    pub namespace: String,
    /// The ManifestWork's name.
    pub name: String,
}

/// Why a work reference is not usable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkRefError {
    /// A bare name and no namespace to put it in.
    #[error("'{0}' names no namespace: write NAMESPACE/NAME or pass -n NAMESPACE")]
    NoNamespace(String),
    /// More than one `/`, or an empty side.
    #[error("'{0}' is not NAMESPACE/NAME")]
    Malformed(String),
    /// `NS/NAME` and a different `-n`.
    #[error("'{given}' is in namespace {inline}, but -n says {flag}")]
    NamespaceMismatch {
        /// The argument.
        given: String,
        /// Its namespace part.
        inline: String,
        /// The `-n` value.
        flag: String,
    },
    /// The namespace part is not a cluster name.
    #[error("namespace '{namespace}' is not a cluster name: {source}")]
    BadNamespace {
        /// The namespace part.
        namespace: String,
        /// Why.
        #[source]
        source: ClusterNameError,
    },
    /// The name part is not a Kubernetes object name.
    #[error(
        "'{0}' is not a ManifestWork name (lower-case letters, digits, '-' and '.', at most 253)"
    )]
    BadName(String),
}

/// Parses `arg` as `NS/NAME`, or as `NAME` in `namespace` (the `-n` flag).
/// Both parts are checked, so a typo is reported as such rather than as a
/// work that is not found.
pub fn parse_work_ref(arg: &str, namespace: Option<&str>) -> Result<WorkRef, WorkRefError> {
    let (inline, name) = match arg.split_once('/') {
        Some((ns, name)) => {
            if ns.is_empty() || name.is_empty() || name.contains('/') {
                return Err(WorkRefError::Malformed(arg.to_string()));
            }
            (Some(ns), name)
        }
        None if arg.is_empty() => return Err(WorkRefError::Malformed(arg.to_string())),
        None => (None, arg),
    };
    let namespace = match (inline, namespace) {
        (Some(inline), Some(flag)) if inline != flag => {
            return Err(WorkRefError::NamespaceMismatch {
                given: arg.to_string(),
                inline: inline.to_string(),
                flag: flag.to_string(),
            });
        }
        (Some(ns), _) | (None, Some(ns)) => ns,
        (None, None) => return Err(WorkRefError::NoNamespace(arg.to_string())),
    };
    validate_cluster_name(namespace).map_err(|source| WorkRefError::BadNamespace {
        namespace: namespace.to_string(),
        source,
    })?;
    if !is_object_name(name) {
        return Err(WorkRefError::BadName(name.to_string()));
    }
    Ok(WorkRef {
        namespace: namespace.to_string(),
        name: name.to_string(),
    })
}

/// A DNS-1123 subdomain: dot-separated labels of `a-z0-9-`, each starting and
/// ending with a letter or digit, 253 characters at most.
fn is_object_name(name: &str) -> bool {
    name.len() <= MAX_NAME_LEN
        && name.split('.').all(|label| {
            let bytes = label.as_bytes();
            !bytes.is_empty()
                && bytes
                    .iter()
                    .all(|&b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && bytes.first() != Some(&b'-')
                && bytes.last() != Some(&b'-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn work(namespace: &str, name: &str) -> WorkRef {
        WorkRef {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    #[test]
    fn ns_slash_name_and_name_with_a_namespace_flag_name_a_work() {
        assert_eq!(
            parse_work_ref("cluster-a/web.v2", None),
            Ok(work("cluster-a", "web.v2"))
        );
        assert_eq!(
            parse_work_ref("web", Some("cluster-a")),
            Ok(work("cluster-a", "web"))
        );
        assert_eq!(
            parse_work_ref("cluster-a/web", Some("cluster-a")),
            Ok(work("cluster-a", "web"))
        );
    }

    #[test]
    fn malformed_references_are_refused_with_what_is_wrong() {
        assert_eq!(
            parse_work_ref("web", None),
            Err(WorkRefError::NoNamespace("web".into()))
        );
        for bad in ["", "/web", "cluster-a/", "a/b/c", "/"] {
            assert_eq!(
                parse_work_ref(bad, None),
                Err(WorkRefError::Malformed(bad.into())),
                "{bad}"
            );
        }
        assert!(matches!(
            parse_work_ref("cluster-a/web", Some("cluster-b")),
            Err(WorkRefError::NamespaceMismatch { .. })
        ));
        assert!(matches!(
            parse_work_ref("Cluster_A/web", None),
            Err(WorkRefError::BadNamespace { .. })
        ));
        for bad in ["Web", "web..x", "-web", "web-", "w b", &"x".repeat(254)] {
            assert_eq!(
                parse_work_ref(&format!("cluster-a/{bad}"), None),
                Err(WorkRefError::BadName(bad.to_string())),
                "{bad}"
            );
        }
    }

    proptest! {
        #[test]
        fn any_argument_parses_or_is_refused_without_panicking(arg in ".{0,80}", ns in proptest::option::of("[a-z/-]{0,10}")) {
            let _ = parse_work_ref(&arg, ns.as_deref());
        }
    }
}
