//! Admission of ManifestWorks, so an invalid work is refused when it is
//! written, before any agent sees it.
//!
//! Everything CEL can express runs in the hub API server itself and holds
//! with no hub process running: the CRD's `x-kubernetes-validations`
//! (`ferry_api::cel_rules`, `ferry_api::manifest_work`) and a
//! `ValidatingAdmissionPolicy` ([`duplicates_policy`]) installed with the CRDs. The
//! hub's validating webhook, served over HTTPS and registered with the API
//! server, adds what CEL cannot: the JSONPath grammar of ignore and feedback
//! paths, feedback names, and the size in bytes. It fails open by default
//! (`--webhook-failure-policy`), so writes do not wait for the hub; the
//! agent reports `InvalidIgnorePath` for a path that got through meanwhile.
//!
//! - [`validate`]: the pure checks (the webhook re-runs every check, so its
//!   message lists all problems at once when it is up).
//! - [`review`]: the decision for one `AdmissionReview` and its route.
//! - [`policy_builder`]: one shape every policy below is data for.
//! - [`policies`]: the list of them, and installing it.
//! - [`duplicates_policy`]: two manifests of a work naming one object.
//! - [`executor_policy`]: who may name an executor (`execute-as`, asked of
//!   the API server's authorizer).
//! - [`executor_required_policy`]: in namespaces labelled for it, every
//!   work and replica set names an executor.
//! - [`sealed_secrets_policy`]: in namespaces labelled for it, no work or
//!   replica set template carries a plain Secret, only sealed ones.
//! - [`cluster_set_policy`]: who may bind a cluster set into a namespace
//!   (`create` on `managedclustersets/bind`, asked of the authorizer).
//! - [`approval_policy`]: a RolloutApproval's `approvedBy` is its creator.
//! - [`hub_writes_policy`]: decisions and hub-owned status are written by
//!   the hub (and cluster administrators) only.
//! - [`crd_deletion_policy`]: deleting one of ferry's CRDs needs a
//!   confirming annotation; [`cluster_namespace_policy`]: so does deleting
//!   a cluster's namespace.
//! - [`release_policy`]: releasing a replica set's held deletions is the
//!   platform role's, and the release names who made it.
//! - [`watchdog`]: the leader checks the policies stay installed and
//!   enforced, says so when not, and re-applies them.
//! - [`webhook`]: the webhook's registration and server.
//! - [`spec_written`]: the match condition webhook and policies share;
//!   [`enforced`]: whether the API server enforces a check yet.

/// Who an approval names as approver: a policy checking it is the creator.
pub mod approval_policy;
/// CEL terms the policies share.
pub mod cel_terms;
/// Deleting a cluster's namespace needs a confirming annotation.
pub mod cluster_namespace_policy;
/// Who may bind a cluster set: a policy asking the API server's authorizer.
pub mod cluster_set_policy;
/// Deleting one of ferry's CRDs needs a confirming annotation.
pub mod crd_deletion_policy;
/// The admission policy against duplicate manifests in a work.
pub mod duplicates_policy;
/// Whether the API server enforces a check yet (a dry-run probe).
pub mod enforced;
/// Who may name an executor: a policy asking the API server's authorizer.
pub mod executor_policy;
/// Tenant works name an executor: a policy for labelled namespaces.
pub mod executor_required_policy;
/// Only the hub writes decisions and hub-owned status: a policy naming it.
pub mod hub_writes_policy;
/// Every policy the hub installs, and installing them.
pub mod policies;
/// The one shape of a ferry admission policy and its binding.
pub mod policy_builder;
/// Releasing held deletions: the platform role's, naming its author.
pub mod release_policy;
/// The decision for one `AdmissionReview`, and its route.
pub mod review;
/// No plain Secrets in labelled namespaces: a policy, sealed ones only.
pub mod sealed_secrets_policy;
/// The match condition of spec writes, shared by webhook and policy.
pub mod spec_written;
/// Where the API server reaches the webhook: a URL or a Service.
pub mod target;
/// The pure checks of a work.
pub mod validate;
/// Whether the policies are installed as the hub installs them, and their
/// repair: the leader's fail-closed check.
pub mod watchdog;
/// The webhook: registration, serving, and the wait until it is enforced.
pub mod webhook;
