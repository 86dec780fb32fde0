//! Why one manifest is not applied: the reason reported for each failure,
//! whether it may pass by itself (retried with backoff) and whether the
//! executor was refused the write.

use crate::applier::ApplyError;
use crate::discovery::ResolveError;
use crate::executor::ExecutorError;
use crate::release::ReleaseError;
use crate::write_breaker::WriteLoop;
use crate::write_identity::WriteIdentityError;
use ferry_semantics::ManifestError;
use ferry_semantics::apply_outcome::ObjectMissing;
use ferry_semantics::contract::{REASON_CONFLICTS_WITH_WORK, REASON_WRITE_LOOP};
use ferry_semantics::sealing::OpenError;
use ferry_semantics::strategy::StrategyError;

/// Why one manifest is not applied.
#[derive(Debug, thiserror::Error)]
pub(super) enum ManifestFailure {
    #[error(transparent)]
    Invalid(#[from] ManifestError),
    #[error(transparent)]
    Config(#[from] StrategyError),
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    #[error(transparent)]
    Apply(#[from] ApplyError),
    #[error(transparent)]
    Missing(#[from] ObjectMissing),
    #[error(transparent)]
    Mark(#[from] ReleaseError),
    #[error("cannot record what this work applies: {0}; retrying")]
    Record(String),
    #[error(transparent)]
    Executor(#[from] ExecutorError),
    #[error(
        "{what} is owned by work {owner}, which is older and sets other values for {fields}; this work writes none of them",
        fields = fields.join(", ")
    )]
    ConflictsWithWork {
        what: String,
        owner: String,
        fields: Vec<String>,
    },
    #[error(transparent)]
    WriteLoop(#[from] WriteLoop),
    #[error(transparent)]
    WriteAs(#[from] WriteIdentityError),
    #[error("sealed Secret not opened: {0}")]
    Sealed(OpenError),
}

impl ManifestFailure {
    pub(super) fn reason(&self) -> &'static str {
        match self {
            ManifestFailure::Invalid(e) => e.reason(),
            ManifestFailure::Config(e) => e.reason(),
            ManifestFailure::Resolve(ResolveError::UnknownKind { .. }) => "UnknownKind",
            ManifestFailure::Resolve(ResolveError::Discovery { .. }) => "DiscoveryFailed",
            ManifestFailure::Apply(e) => e.reason(),
            ManifestFailure::Missing(_) => ObjectMissing::REASON,
            ManifestFailure::Mark(_) => "ObjectChanged",
            ManifestFailure::Record(_) => "AppliedRecordFailed",
            ManifestFailure::Executor(e) => e.reason(),
            ManifestFailure::ConflictsWithWork { .. } => REASON_CONFLICTS_WITH_WORK,
            ManifestFailure::WriteLoop(_) => REASON_WRITE_LOOP,
            ManifestFailure::WriteAs(WriteIdentityError::NoExecutor) => "ExecutorRequired",
            ManifestFailure::WriteAs(WriteIdentityError::Client { .. }) => "ExecutorClientFailed",
            ManifestFailure::Sealed(e) => e.reason(),
        }
    }

    /// Whether the executor was refused the write (its rights, asked of
    /// the spoke's API server): nothing was written.
    pub(super) fn is_write_refusal(&self) -> bool {
        matches!(
            self,
            ManifestFailure::Executor(
                ExecutorError::NotAllowed { .. } | ExecutorError::Escalation { .. }
            )
        )
    }

    pub(super) fn is_transient(&self) -> bool {
        match self {
            ManifestFailure::Invalid(_) | ManifestFailure::Config(_) => false,
            // A CRD may be installed on the spoke later.
            ManifestFailure::Resolve(_) => true,
            ManifestFailure::Apply(e) => e.is_transient(),
            // The drift watch sees the object appear.
            ManifestFailure::Missing(_) => false,
            ManifestFailure::Mark(_) | ManifestFailure::Record(_) => true,
            ManifestFailure::Executor(e) => e.is_transient(),
            // The owner may go away; the hold runs out.
            ManifestFailure::ConflictsWithWork { .. } | ManifestFailure::WriteLoop(_) => true,
            ManifestFailure::WriteAs(WriteIdentityError::NoExecutor) => false,
            ManifestFailure::WriteAs(WriteIdentityError::Client { .. }) => true,
            // An agent that holds no key yet (its spoke did not answer at
            // the session's start) may hold one on the next try; otherwise
            // a new seal comes as a new generation of the work.
            ManifestFailure::Sealed(OpenError::NotARecipient { held, .. }) => held.is_empty(),
            ManifestFailure::Sealed(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_conflict_with_an_older_work_names_it_and_is_retried() {
        let failure = ManifestFailure::ConflictsWithWork {
            what: "ConfigMap default/a".into(),
            owner: "older".into(),
            fields: vec![".data.k".into(), ".data.v".into()],
        };
        assert_eq!(failure.reason(), REASON_CONFLICTS_WITH_WORK);
        assert!(failure.is_transient());
        assert!(!failure.is_write_refusal());
        assert_eq!(
            failure.to_string(),
            "ConfigMap default/a is owned by work older, which is older and sets other values for .data.k, .data.v; this work writes none of them"
        );
    }

    #[test]
    fn a_work_without_the_executor_it_needs_is_not_retried() {
        let failure = ManifestFailure::WriteAs(WriteIdentityError::NoExecutor);
        assert_eq!(failure.reason(), "ExecutorRequired");
        assert!(!failure.is_transient());
        let record = ManifestFailure::Record("the API server is away".into());
        assert_eq!(record.reason(), "AppliedRecordFailed");
        assert!(record.is_transient());
    }
}
