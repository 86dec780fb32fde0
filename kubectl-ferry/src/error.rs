//! Everything that stops a command, each with a message that says what to do.

use crate::work_ref::WorkRefError;

/// Why a command failed. Each variant prints one clear sentence; the binary
/// prints it on stderr and exits non-zero.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// No kubeconfig was found where kubectl looks for one.
    #[error(
        "no kubeconfig: {detail}; pass --kubeconfig FILE or set KUBECONFIG to the hub cluster's kubeconfig"
    )]
    NoKubeconfig {
        /// What kube reported.
        detail: String,
    },
    /// The kubeconfig exists but cannot be used (bad YAML, unknown context, ...).
    #[error("the kubeconfig cannot be used: {0}")]
    Kubeconfig(String),
    /// A client could not be built from a valid kubeconfig.
    #[error("cannot build a Kubernetes client: {0}")]
    Client(String),
    /// `NS/NAME` is malformed.
    #[error(transparent)]
    WorkRef(#[from] WorkRefError),
    /// The named work does not exist.
    #[error("manifestwork {namespace}/{name} not found on the hub")]
    WorkNotFound {
        /// Its namespace (cluster).
        namespace: String,
        /// Its name.
        name: String,
    },
    /// The named ManagedCluster does not exist.
    #[error("managedcluster {0} not found on the hub")]
    ClusterNotFound(String),
    /// The named replica set does not exist.
    #[error("manifestworkreplicaset {namespace}/{name} not found on the hub")]
    ReplicaSetNotFound {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// `rollout undo` cannot be done.
    #[error(transparent)]
    Undo(#[from] crate::rollout_history::UndoError),
    /// A write of the replica set was refused because it changed since it
    /// was read (HTTP 409), on every attempt.
    #[error(
        "manifestworkreplicaset {namespace}/{name} changed between every read and write (the hub writes its status as the rollout moves): nothing was changed; run the command again"
    )]
    ChangedSinceRead {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// The API server does not serve a ferry resource: this is not a hub, or
    /// its CRDs are not installed.
    #[error(
        "the API server does not serve {resource}: is this the hub cluster's kubeconfig, and are ferry's CRDs installed (ferry-hub crds | kubectl apply -f -)?"
    )]
    NotServed {
        /// The resource, e.g. `manifestworks.work.ferry.dev`.
        resource: String,
    },
    /// The API server answered with an error (forbidden, unauthorized, ...).
    #[error("the API server refused to {action}: {message} ({reason}, HTTP {code})")]
    Refused {
        /// What was asked, e.g. `list manifestworks in all namespaces`.
        action: String,
        /// The server's message.
        message: String,
        /// The server's machine-readable reason, e.g. `Forbidden`.
        reason: String,
        /// The HTTP status code.
        code: u16,
    },
    /// The API server could not be reached or answered nonsense.
    #[error("cannot {action}: {source}")]
    Unreachable {
        /// What was asked.
        action: String,
        /// The transport or decoding error.
        #[source]
        source: kube::Error,
    },
    /// The dashboard could not listen or stopped serving.
    #[error(transparent)]
    Dashboard(#[from] crate::dashboard::serve_error::ServeError),
    /// `NS/NAME` does not name a replica set.
    #[error(
        "'{0}' is not NAMESPACE/NAME of a ManifestWorkReplicaSet (lower-case letters, digits, '-' and '.'), or its namespace differs from -n"
    )]
    BadReplicaSet(String),
    /// No gate (or more than one) awaits approval.
    #[error("{0}")]
    NothingToApprove(String),
    /// RBAC refused creating the approval.
    #[error(
        "you may not create rolloutapprovals in namespace {namespace}: {message}; ask an administrator to bind the ClusterRole ferry-hub-rollout-approver to you there (a RoleBinding in {namespace})"
    )]
    ApproveForbidden {
        /// The replica set's namespace.
        namespace: String,
        /// The server's message.
        message: String,
    },
    /// `release-deletions` cannot release.
    #[error(transparent)]
    Release(#[from] crate::release_deletions::plan::ReleaseError),
    /// An object the hub holds is not what this build can read (a newer
    /// hub's, or one written around the API's checks).
    #[error("{what} cannot be read by this kubectl-ferry: {reason}")]
    Undecodable {
        /// The object, by kind and name.
        what: String,
        /// What did not fit.
        reason: String,
    },
    /// Printing the result failed (serialisation, or stdout went away).
    #[error("cannot print the result: {0}")]
    Print(String),
    /// `seal` cannot seal: the input, the clusters, or sealing itself.
    #[error(transparent)]
    Seal(#[from] crate::sealing::act::SealCommandError),
}

impl CliError {
    /// Classifies a kube error from doing `action` on `resource`: a 404 for
    /// the resource type itself (no object name in the answer) means it is not
    /// served; other API answers are refusals; the rest is transport.
    pub fn from_kube(action: &str, resource: &str, error: kube::Error) -> Self {
        match error {
            kube::Error::Api(status) => {
                if status.code == 404 && status.details.as_ref().is_none_or(|d| d.name.is_empty()) {
                    return CliError::NotServed {
                        resource: resource.to_string(),
                    };
                }
                CliError::Refused {
                    action: action.to_string(),
                    message: status.message.clone(),
                    reason: status.reason.clone(),
                    code: status.code,
                }
            }
            other => CliError::Unreachable {
                action: action.to_string(),
                source: other,
            },
        }
    }
}
