//! Why a manifest was not applied, and how the API server's answers are
//! turned into reasons a user can act on.

use ferry_semantics::ManifestIdentity;

/// Why a manifest was not applied; `reason()` is the condition reason.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// Another field manager owns a field this apply sets.
    #[error("{0}")]
    Conflict(String),
    /// The API server rejected the object (validation, admission, immutability).
    #[error("the API server rejected {what}: {message}")]
    Rejected {
        /// The manifest.
        what: String,
        /// The API server's message.
        message: String,
    },
    /// The request failed on the way (connection, timeout).
    #[error("applying {what}: {source}")]
    Request {
        /// The manifest.
        what: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// A CRD was applied but did not become Established in time.
    #[error("CRD {name} was applied but is not established yet")]
    CrdNotEstablished {
        /// CRD name.
        name: String,
    },
    /// The API server does not serve this kind (any more): its CRD was
    /// deleted after the kind was resolved.
    #[error("the cluster no longer serves the kind of {what}")]
    KindNotServed {
        /// The manifest.
        what: String,
    },
    /// The kind's CRD is being deleted: the API server refuses writes
    /// (405) until it is gone, after which the kind is unknown.
    #[error("the CRD that serves the kind of {what} is being deleted on the spoke: {message}")]
    KindTerminating {
        /// The manifest.
        what: String,
        /// The API server's message.
        message: String,
    },
    /// The write named an object that does not exist on the spoke other
    /// than the manifest's own (its namespace, most often): the API
    /// server's message says which. Transient: it may be created later.
    #[error("{what}: {message}")]
    Missing {
        /// The manifest.
        what: String,
        /// The API server's message, e.g. `namespaces "x" not found`.
        message: String,
    },
    /// The object changed between read and write; try again.
    #[error("{what} changed while it was being updated; retrying")]
    Stale {
        /// The manifest.
        what: String,
    },
}

impl ApplyError {
    /// The condition reason for this failure.
    pub fn reason(&self) -> &'static str {
        match self {
            ApplyError::Conflict(_) => "ApplyConflict",
            ApplyError::Rejected { .. } => "ApplyRejected",
            ApplyError::Request { .. } => "ApplyFailed",
            ApplyError::CrdNotEstablished { .. } => "CRDNotEstablished",
            ApplyError::KindNotServed { .. } => "UnknownKind",
            ApplyError::KindTerminating { .. } => "CRDTerminating",
            ApplyError::Missing { .. } => "NotFound",
            ApplyError::Stale { .. } => "ObjectChanged",
        }
    }

    /// Whether trying again later may succeed without the user changing the work.
    pub fn is_transient(&self) -> bool {
        !matches!(self, ApplyError::Rejected { .. })
    }
}

/// Whether a 409 says the object moved past a pinned resourceVersion (rather
/// than a field conflict with another manager).
pub(super) fn is_stale(status: &kube::core::Status) -> bool {
    status.message.contains("the object has been modified")
}

/// Classifies a failed server-side apply: a 409 is a field conflict with
/// another manager; anything else as [`classify`] does.
pub(super) fn classify_apply(
    what: &str,
    identity: &ManifestIdentity,
    error: kube::Error,
) -> ApplyError {
    match error {
        kube::Error::Api(status) if status.code == 409 => ApplyError::Conflict(format!(
            "{what}: {} (set serverSideApply.force: true to take ownership)",
            status.message
        )),
        other => classify(what, identity, other),
    }
}

/// Whether a 404's details name the manifest's own object rather than
/// another one (its namespace, most often): a missing namespace answers
/// `namespaces "x" not found`, which is not the object vanishing.
fn names_the_object(
    details: &kube::core::response::StatusDetails,
    identity: &ManifestIdentity,
) -> bool {
    let is_namespace = identity.group.is_empty() && identity.kind == "Namespace";
    details.name == identity.name && (details.kind == "namespaces") == is_namespace
}

/// Classifies a failed read or write of the manifest's object into the
/// reason the user sees and whether it is worth retrying.
pub(super) fn classify(what: &str, identity: &ManifestIdentity, error: kube::Error) -> ApplyError {
    match error {
        // A 404 naming no object is about the URL: the resource type is gone.
        // One naming this object means it vanished between read and write;
        // one naming another object (its namespace) is reported in the API
        // server's own words.
        kube::Error::Api(status) if status.code == 404 => match status.details.as_ref() {
            Some(details) if !details.name.is_empty() => {
                if names_the_object(details, identity) {
                    ApplyError::Stale {
                        what: what.to_string(),
                    }
                } else {
                    ApplyError::Missing {
                        what: what.to_string(),
                        message: status.message.clone(),
                    }
                }
            }
            _ => ApplyError::KindNotServed {
                what: what.to_string(),
            },
        },
        // A CRD being deleted answers writes with 405 until it is gone;
        // retrying turns this into UnknownKind rather than a permanent refusal.
        kube::Error::Api(status) if status.code == 405 || creates_on_terminating_crd(&status) => {
            ApplyError::KindTerminating {
                what: what.to_string(),
                message: status.message.clone(),
            }
        }
        kube::Error::Api(status) if (400..500).contains(&status.code) && status.code != 429 => {
            ApplyError::Rejected {
                what: what.to_string(),
                message: status.message.clone(),
            }
        }
        source => ApplyError::Request {
            what: what.to_string(),
            source,
        },
    }
}

/// The API server's words when a server-side apply would create a custom
/// resource whose CRD is being deleted: a POST gets 405, but a PATCH that
/// creates passes the CRD handler and is refused by its admission wrapper with
/// 403 Forbidden (apiextensions-apiserver `forbidCreateAdmission`). The reason
/// alone cannot tell this from RBAC, so the message is matched.
const CREATE_ON_TERMINATING_CRD: &str =
    "create not allowed while custom resource definition is terminating";

fn creates_on_terminating_crd(status: &kube::core::Status) -> bool {
    status.code == 403 && status.message.ends_with(CREATE_ON_TERMINATING_CRD)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    fn hammer() -> ManifestIdentity {
        ManifestIdentity {
            group: "spoke.example".into(),
            version: "v1".into(),
            kind: "Tool".into(),
            name: "hammer".into(),
            namespace: Some("shed".into()),
        }
    }

    fn not_found(kind: &str, name: &str) -> kube::Error {
        kube::Error::Api(Box::new(
            Status::failure(&format!("{kind} \"{name}\" not found"), "NotFound")
                .with_code(404)
                .with_details(kube::core::response::StatusDetails {
                    name: name.into(),
                    group: String::new(),
                    kind: kind.into(),
                    uid: String::new(),
                    causes: Vec::new(),
                    retry_after_seconds: 0,
                }),
        ))
    }

    fn api_error(code: u16, reason: &str, message: &str) -> kube::Error {
        kube::Error::Api(Box::new(Status::failure(message, reason).with_code(code)))
    }

    #[test]
    fn an_apply_that_would_create_under_a_terminating_crd_is_retried_not_refused() {
        let error = api_error(
            403,
            "Forbidden",
            "tools.spoke.example \"hammer\" is forbidden: create not allowed while custom resource definition is terminating",
        );
        let classified = classify_apply("Tool hammer", &hammer(), error);
        assert_eq!(classified.reason(), "CRDTerminating");
        assert!(classified.is_transient());
    }

    #[test]
    fn a_post_under_a_terminating_crd_is_retried_not_refused() {
        let classified = classify(
            "Tool hammer",
            &hammer(),
            api_error(
                405,
                "MethodNotAllowed",
                "create not allowed while custom resource definition is terminating",
            ),
        );
        assert_eq!(classified.reason(), "CRDTerminating");
        assert!(classified.is_transient());
    }

    #[test]
    fn an_rbac_refusal_stays_a_permanent_rejection() {
        let classified = classify(
            "Secret db",
            &hammer(),
            api_error(
                403,
                "Forbidden",
                "secrets \"db\" is forbidden: User \"x\" cannot patch resource",
            ),
        );
        assert_eq!(classified.reason(), "ApplyRejected");
        assert!(!classified.is_transient());
    }

    #[test]
    fn a_missing_resource_type_is_an_unknown_kind_and_a_vanished_object_is_stale() {
        let no_type = classify(
            "Tool hammer",
            &hammer(),
            api_error(
                404,
                "NotFound",
                "the server could not find the requested resource",
            ),
        );
        assert_eq!(no_type.reason(), "UnknownKind");
        let vanished = kube::Error::Api(Box::new(
            Status::failure("tools \"hammer\" not found", "NotFound")
                .with_code(404)
                .with_details(kube::core::response::StatusDetails {
                    name: "hammer".into(),
                    group: "spoke.example".into(),
                    kind: "tools".into(),
                    uid: String::new(),
                    causes: Vec::new(),
                    retry_after_seconds: 0,
                }),
        ));
        assert_eq!(
            classify("Tool hammer", &hammer(), vanished).reason(),
            "ObjectChanged"
        );
    }

    #[test]
    fn a_missing_namespace_is_reported_in_the_api_servers_words_not_as_a_change() {
        let classified = classify(
            "Tool shed/hammer",
            &hammer(),
            not_found("namespaces", "shed"),
        );
        assert_eq!(classified.reason(), "NotFound");
        assert!(classified.is_transient());
        assert_eq!(
            classified.to_string(),
            "Tool shed/hammer: namespaces \"shed\" not found"
        );
        // Named like the object, but a namespace: still not the object.
        let same_name = classify(
            "Tool shed/hammer",
            &hammer(),
            not_found("namespaces", "hammer"),
        );
        assert_eq!(same_name.reason(), "NotFound");
        // A Namespace manifest whose own object vanished is a change.
        let namespace = ManifestIdentity {
            group: String::new(),
            version: "v1".into(),
            kind: "Namespace".into(),
            name: "shed".into(),
            namespace: None,
        };
        let gone = classify(
            "Namespace shed",
            &namespace,
            not_found("namespaces", "shed"),
        );
        assert_eq!(gone.reason(), "ObjectChanged");
    }
}
