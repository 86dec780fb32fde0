//! The executor check (OCM's `spec.executor`): a work that names a
//! ServiceAccount applies a manifest only if that ServiceAccount may do on
//! the spoke what the apply does. The spoke's own authorizer answers, through
//! a SubjectAccessReview per verb (OCM's verbs: get, create, update and
//! patch, plus delete when the work will delete the object, i.e. does not
//! orphan it). Answers are cached for [`ANSWER_TTL`], so a work re-applied
//! often costs no more reviews, and a grant or revocation is seen within
//! that time.
//!
//! A Role, ClusterRole or binding can grant rights: the agent writes with
//! its own identity, so the API server's escalation and bind checks would
//! judge the agent, not the executor. For those kinds the agent also makes a
//! dry-run create impersonating the executor (OCM's check), so the spoke's
//! API server runs RBAC's `escalate` and `bind` rules against the executor:
//! forbidden means the executor may not grant what the object grants.
//!
//! Reads are bounded the same way: what the agent reports about a manifest's
//! object (feedback, condition-rule messages, `Available`, the look-up after
//! a failed apply) is read only if the executor may `get` it
//! ([`ExecutorCheck::may_read`], one cached review), so a tenant cannot use
//! the agent's own read rights to copy a Secret into the hub.
//!
//! Which executors a work may name at all is the agent's own `impersonate`
//! grant on ServiceAccounts (the agent chart's `rbac.executors`): before any
//! other check the agent asks the spoke, with a SelfSubjectAccessReview,
//! whether it may impersonate the executor ([`ExecutorError::NotListed`]
//! when not), so an account the cluster's admins did not list, say one of
//! `kube-system`, bounds nothing even when its own rights would pass every
//! review. With `--write-as-executor` the API server refuses the
//! impersonation itself.

use std::time::Duration;

use ferry_proto::v1;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec, SubjectAccessReview,
    SubjectAccessReviewSpec,
};
use kube::Client;
use kube::api::{Api, PostParams};
use moka::future::Cache;

/// How long an answer of the spoke's authorizer is reused.
pub const ANSWER_TTL: Duration = Duration::from_secs(10);
/// At most this many answers are kept (one per subject, object and verb).
const MAX_ANSWERS: u64 = 100_000;
/// The only executor subject type, as OCM names it.
pub const SERVICE_ACCOUNT: &str = "ServiceAccount";

/// The verbs an apply needs: OCM checks these for every manifest.
const APPLY_VERBS: [&str; 4] = ["get", "create", "update", "patch"];
/// Checked as well when the work will delete the object.
const DELETE_VERB: &str = "delete";
/// The verb a read for a work's status needs.
pub const READ_VERB: &str = "get";

/// Why a manifest may not be applied under the work's executor.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ExecutorError {
    /// The agent requires an executor and the work names none.
    #[error(
        "this agent applies only works that name an executor (--require-executor): set spec.executor.subject to a ServiceAccount on the cluster"
    )]
    Required,
    /// The agent runs restricted (`--restricted`) and the manifest is a CRD
    /// or one of ferry's own kinds, which the agent holds rights on for its
    /// own use only.
    #[error(
        "this agent runs restricted (--restricted): it does not apply {resource}, which it holds rights on only for its own records"
    )]
    Restricted {
        /// `resource.group`, e.g. `customresourcedefinitions.apiextensions.k8s.io`.
        resource: String,
    },
    /// The subject type is not `ServiceAccount`.
    #[error("executor subject type {0:?} is not supported; use ServiceAccount")]
    UnsupportedSubject(String),
    /// Type `ServiceAccount` without a namespace and name.
    #[error(
        "executor subject ServiceAccount needs serviceAccount.namespace and serviceAccount.name"
    )]
    MissingServiceAccount,
    /// The authorizer said no to at least one verb.
    #[error(
        "not allowed to apply the resource {resource} {object}: ServiceAccount {account} may not {verbs} it; grant it these verbs on the cluster"
    )]
    NotAllowed {
        /// `resource.group`, e.g. `deployments.apps`.
        resource: String,
        /// `namespace/name`, or `name` for cluster-scoped objects.
        object: String,
        /// `namespace/name` of the ServiceAccount.
        account: String,
        /// The verbs refused, comma-separated.
        verbs: String,
    },
    /// The object is RBAC and the executor may not grant what it grants
    /// (it holds neither the rights nor `escalate` / `bind`).
    #[error(
        "not allowed to apply the resource {resource} {object}: ServiceAccount {account} may not grant what it grants (permission escalation; it needs the rights itself, or escalate on roles / bind on bindings): {message}"
    )]
    Escalation {
        /// `resource.group`, e.g. `roles.rbac.authorization.k8s.io`.
        resource: String,
        /// `namespace/name`, or `name` for cluster-scoped objects.
        object: String,
        /// `namespace/name` of the ServiceAccount.
        account: String,
        /// What the API server said.
        message: String,
    },
    /// The executor may not read the object, so nothing of it is reported.
    #[error(
        "executor {account} may not {verb} {resource} in {scope}: nothing of {object} is read or reported; grant it {verb} on the cluster"
    )]
    CannotRead {
        /// `namespace/name` of the ServiceAccount.
        account: String,
        /// The verb refused (`get`).
        verb: &'static str,
        /// `resource.group`, e.g. `secrets` or `deployments.apps`.
        resource: String,
        /// `namespace x`, or `the cluster scope`.
        scope: String,
        /// `namespace/name`, or `name` for cluster-scoped objects.
        object: String,
    },
    /// A work without an executor on an agent that requires one: the agent
    /// reads nothing for it (its own read rights are not the tenant's).
    #[error(
        "this agent reads objects only as a work's executor (--require-executor): nothing is read or reported for a work that names none"
    )]
    ReadRequiresExecutor,
    /// The agent may not impersonate the executor: the cluster's admins did
    /// not list it among the accounts the agent may act as.
    #[error(
        "this agent may not act as ServiceAccount {account}: the cluster does not let it impersonate that account (the agent chart's rbac.executors does not list it), so no work may name it here"
    )]
    NotListed {
        /// `namespace/name` of the ServiceAccount.
        account: String,
    },
    /// The SubjectAccessReview itself failed (the spoke is unreachable, or
    /// the agent may not create reviews).
    #[error("cannot ask the cluster whether the executor may apply {object}: {message}")]
    Review {
        /// What the review was about.
        object: String,
        /// The API error.
        message: String,
    },
}

impl ExecutorError {
    /// The manifest's `Applied` condition reason: OCM's reason for a
    /// manifest it did not apply (`AppliedManifestFailed`) when the executor
    /// may not apply it; ferry's own for the others.
    pub fn reason(&self) -> &'static str {
        match self {
            ExecutorError::NotAllowed { .. } | ExecutorError::Escalation { .. } => {
                "AppliedManifestFailed"
            }
            ExecutorError::Required => "ExecutorRequired",
            ExecutorError::Restricted { .. } => ferry_semantics::restricted::RESTRICTED_KIND_REASON,
            ExecutorError::UnsupportedSubject(_) | ExecutorError::MissingServiceAccount => {
                "InvalidExecutor"
            }
            ExecutorError::Review { .. } => "ExecutorCheckFailed",
            ExecutorError::NotListed { .. } => "ExecutorNotAllowed",
            ExecutorError::CannotRead { .. } => "ExecutorCannotRead",
            ExecutorError::ReadRequiresExecutor => "ExecutorRequired",
        }
    }

    /// Whether trying again later can change the answer: rights can be
    /// granted, and the review can succeed on a later try.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            ExecutorError::NotAllowed { .. }
                | ExecutorError::Escalation { .. }
                | ExecutorError::Review { .. }
                | ExecutorError::CannotRead { .. }
                | ExecutorError::NotListed { .. }
        )
    }

    /// The refusal of a read of `target` by `account` (`namespace/name`):
    /// what a look-up reports when the executor may not `get` the object.
    pub fn cannot_read(account: String, target: &Target<'_>) -> Self {
        ExecutorError::CannotRead {
            account,
            verb: READ_VERB,
            resource: describe_resource(target),
            scope: if target.namespace.is_empty() {
                "the cluster scope".to_string()
            } else {
                format!("namespace {}", target.namespace)
            },
            object: describe_object(target),
        }
    }
}

/// The object a manifest writes, as the authorizer names it.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    /// API group, empty for the core group.
    pub group: &'a str,
    /// API version.
    pub version: &'a str,
    /// Resource (plural).
    pub resource: &'a str,
    /// Namespace, empty for cluster-scoped objects.
    pub namespace: &'a str,
    /// Object name.
    pub name: &'a str,
    /// The manifest as the work gives it, for the escalation check of RBAC
    /// objects.
    pub manifest: &'a serde_json::Value,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Account {
    namespace: String,
    name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Question {
    account_namespace: String,
    account_name: String,
    group: String,
    version: String,
    resource: String,
    namespace: String,
    name: String,
    verb: &'static str,
}

/// Checks manifests against their work's executor; cheap to clone.
#[derive(Clone)]
pub struct ExecutorCheck {
    client: Client,
    answers: Cache<Question, bool>,
    /// Whether the agent may impersonate each executor.
    impersonable: Cache<Account, bool>,
    require: bool,
    /// Refuse CRDs and ferry's own kinds (`--restricted`).
    restricted: bool,
    /// The agent writes as the executor (`--write-as-executor`): the API
    /// server judges every write, so no SubjectAccessReview or escalation
    /// dry-run is asked first.
    judged_by_api_server: bool,
}

impl ExecutorCheck {
    /// A check asking the spoke behind `client`; with `require`, works
    /// without an executor are refused; with `restricted`, CRDs and ferry's
    /// own kinds are refused.
    pub fn new(client: Client, require: bool, restricted: bool) -> Self {
        Self {
            client,
            answers: Cache::builder()
                .max_capacity(MAX_ANSWERS)
                .time_to_live(ANSWER_TTL)
                .build(),
            impersonable: Cache::builder()
                .max_capacity(MAX_ANSWERS)
                .time_to_live(ANSWER_TTL)
                .build(),
            require,
            restricted,
            judged_by_api_server: false,
        }
    }

    /// The same check for an agent that writes as each work's executor:
    /// the executor is still required and validated, and restricted kinds
    /// refused, but its rights are left to the API server, which judges
    /// each write it makes as the executor.
    #[must_use]
    pub fn judged_by_api_server(mut self) -> Self {
        self.require = true;
        self.judged_by_api_server = true;
        self
    }

    /// Ok when `executor` (the work's, None when it names none) may apply
    /// `target`; `deletes` says whether the work will delete the object.
    /// Fails with the reason to show on the manifest.
    pub async fn check(
        &self,
        executor: Option<&v1::Executor>,
        target: Target<'_>,
        deletes: bool,
    ) -> Result<(), ExecutorError> {
        if self.restricted
            && ferry_semantics::restricted::refused_when_restricted(target.group, target.resource)
        {
            return Err(ExecutorError::Restricted {
                resource: format!("{}.{}", target.resource, target.group),
            });
        }
        let Some(executor) = executor else {
            return if self.require {
                Err(ExecutorError::Required)
            } else {
                Ok(())
            };
        };
        if executor.subject_type != SERVICE_ACCOUNT {
            return Err(ExecutorError::UnsupportedSubject(
                executor.subject_type.clone(),
            ));
        }
        if executor.service_account_namespace.is_empty() || executor.service_account_name.is_empty()
        {
            return Err(ExecutorError::MissingServiceAccount);
        }
        if self.judged_by_api_server {
            return Ok(());
        }
        self.may_act_as(executor, &target).await?;
        let verbs = APPLY_VERBS
            .iter()
            .copied()
            .chain(deletes.then_some(DELETE_VERB));
        let mut refused = Vec::new();
        for verb in verbs {
            let question = Question {
                account_namespace: executor.service_account_namespace.clone(),
                account_name: executor.service_account_name.clone(),
                group: target.group.to_string(),
                version: target.version.to_string(),
                resource: target.resource.to_string(),
                namespace: target.namespace.to_string(),
                name: target.name.to_string(),
                verb,
            };
            let allowed = match self.answers.get(&question).await {
                Some(allowed) => allowed,
                None => {
                    let allowed = self
                        .ask(&question)
                        .await
                        .map_err(|e| ExecutorError::Review {
                            object: describe_object(&target),
                            message: e.to_string(),
                        })?;
                    self.answers.insert(question, allowed).await;
                    allowed
                }
            };
            if !allowed {
                refused.push(verb);
            }
        }
        let account = format!(
            "{}/{}",
            executor.service_account_namespace, executor.service_account_name
        );
        if !refused.is_empty() {
            return Err(ExecutorError::NotAllowed {
                resource: describe_resource(&target),
                object: describe_object(&target),
                account,
                verbs: refused.join(", "),
            });
        }
        if grants_rights(&target) {
            self.check_escalation(executor, &target, account).await?;
        }
        Ok(())
    }

    /// Whether the agent may read `target` for the status of a work whose
    /// executor is `executor` (None when it names none), and as whom.
    /// `Ok(None)`: read as the agent (no executor, and the agent does not
    /// require one). `Ok(Some(account))`: the executor is `account`; when the
    /// agent writes as executors the caller reads through the impersonating
    /// client (the API server judges the read), otherwise the executor's
    /// `get` was allowed by a (cached) SubjectAccessReview. Fails with
    /// [`ExecutorError::CannotRead`] when the review says no,
    /// [`ExecutorError::ReadRequiresExecutor`] for a work without an
    /// executor on an agent that requires one, and the executor's or the
    /// review's own errors otherwise: the caller then reads nothing.
    pub async fn may_read(
        &self,
        executor: Option<&v1::Executor>,
        target: Target<'_>,
    ) -> Result<Option<String>, ExecutorError> {
        if self.restricted
            && ferry_semantics::restricted::refused_when_restricted(target.group, target.resource)
        {
            return Err(ExecutorError::Restricted {
                resource: format!("{}.{}", target.resource, target.group),
            });
        }
        let Some(executor) = executor else {
            return if self.require {
                Err(ExecutorError::ReadRequiresExecutor)
            } else {
                Ok(None)
            };
        };
        if executor.subject_type != SERVICE_ACCOUNT {
            return Err(ExecutorError::UnsupportedSubject(
                executor.subject_type.clone(),
            ));
        }
        if executor.service_account_namespace.is_empty() || executor.service_account_name.is_empty()
        {
            return Err(ExecutorError::MissingServiceAccount);
        }
        let account = format!(
            "{}/{}",
            executor.service_account_namespace, executor.service_account_name
        );
        if self.judged_by_api_server {
            return Ok(Some(account));
        }
        self.may_act_as(executor, &target).await?;
        let question = Question {
            account_namespace: executor.service_account_namespace.clone(),
            account_name: executor.service_account_name.clone(),
            group: target.group.to_string(),
            version: target.version.to_string(),
            resource: target.resource.to_string(),
            namespace: target.namespace.to_string(),
            name: target.name.to_string(),
            verb: READ_VERB,
        };
        let allowed = match self.answers.get(&question).await {
            Some(allowed) => allowed,
            None => {
                let allowed = self
                    .ask(&question)
                    .await
                    .map_err(|e| ExecutorError::Review {
                        object: describe_object(&target),
                        message: e.to_string(),
                    })?;
                self.answers.insert(question, allowed).await;
                allowed
            }
        };
        if allowed {
            Ok(Some(account))
        } else {
            Err(ExecutorError::cannot_read(account, &target))
        }
    }

    /// A dry-run create of the RBAC object impersonating the executor: the
    /// API server refuses it when the executor may not grant what it
    /// grants. AlreadyExists means the escalation check passed (it runs
    /// before the existence check), as OCM reads it.
    async fn check_escalation(
        &self,
        executor: &v1::Executor,
        target: &Target<'_>,
        account: String,
    ) -> Result<(), ExecutorError> {
        let review_failed = |message: String| ExecutorError::Review {
            object: describe_object(target),
            message,
        };
        let mut object = target.manifest.clone();
        if !target.namespace.is_empty() {
            object["metadata"]["namespace"] = serde_json::Value::from(target.namespace);
        }
        let path = if target.namespace.is_empty() {
            format!(
                "/apis/{}/{}/{}",
                target.group, target.version, target.resource
            )
        } else {
            format!(
                "/apis/{}/{}/namespaces/{}/{}",
                target.group, target.version, target.namespace, target.resource
            )
        };
        let body = serde_json::to_vec(&object).map_err(|e| review_failed(e.to_string()))?;
        let params = PostParams {
            dry_run: true,
            ..Default::default()
        };
        let mut request = kube::core::Request::new(path)
            .create(&params, body)
            .map_err(|e| review_failed(e.to_string()))?;
        let user = format!(
            "system:serviceaccount:{}:{}",
            executor.service_account_namespace, executor.service_account_name
        );
        let user = http::HeaderValue::from_str(&user).map_err(|e| review_failed(e.to_string()))?;
        request.headers_mut().insert("Impersonate-User", user);
        match self.client.request::<serde_json::Value>(request).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 403 => Err(ExecutorError::Escalation {
                resource: describe_resource(target),
                object: describe_object(target),
                account,
                message: status.message,
            }),
            Err(other) => Err(review_failed(other.to_string())),
        }
    }

    /// Ok when the agent may impersonate `executor` (a cached
    /// SelfSubjectAccessReview): the list of accounts the cluster lets works
    /// name. `target` names the object in a failed review's message.
    async fn may_act_as(
        &self,
        executor: &v1::Executor,
        target: &Target<'_>,
    ) -> Result<(), ExecutorError> {
        let account = Account {
            namespace: executor.service_account_namespace.clone(),
            name: executor.service_account_name.clone(),
        };
        let allowed = match self.impersonable.get(&account).await {
            Some(allowed) => allowed,
            None => {
                let reviews: Api<SelfSubjectAccessReview> = Api::all(self.client.clone());
                let review = reviews
                    .create(&PostParams::default(), &impersonation_review(&account))
                    .await
                    .map_err(|e| ExecutorError::Review {
                        object: describe_object(target),
                        message: e.to_string(),
                    })?;
                let allowed = review.status.is_some_and(|s| s.allowed);
                self.impersonable.insert(account.clone(), allowed).await;
                allowed
            }
        };
        if allowed {
            Ok(())
        } else {
            Err(ExecutorError::NotListed {
                account: format!("{}/{}", account.namespace, account.name),
            })
        }
    }

    async fn ask(&self, question: &Question) -> Result<bool, kube::Error> {
        let reviews: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let review = reviews
            .create(&PostParams::default(), &review_of(question))
            .await?;
        Ok(review.status.is_some_and(|s| s.allowed))
    }
}

/// The review asking whether the ServiceAccount may do `question.verb`,
/// with the groups Kubernetes gives every ServiceAccount.
fn review_of(question: &Question) -> SubjectAccessReview {
    let ns = &question.account_namespace;
    SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(format!(
                "system:serviceaccount:{ns}:{}",
                question.account_name
            )),
            groups: Some(vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{ns}"),
                "system:authenticated".into(),
            ]),
            resource_attributes: Some(ResourceAttributes {
                group: Some(question.group.clone()),
                version: Some(question.version.clone()),
                resource: Some(question.resource.clone()),
                namespace: Some(question.namespace.clone()),
                name: Some(question.name.clone()),
                verb: Some(question.verb.into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// The review asking whether the agent itself may impersonate `account`.
fn impersonation_review(account: &Account) -> SelfSubjectAccessReview {
    SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                group: Some(String::new()),
                resource: Some("serviceaccounts".into()),
                namespace: Some(account.namespace.clone()),
                name: Some(account.name.clone()),
                verb: Some("impersonate".into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Whether the object can grant rights: Roles, ClusterRoles and their
/// bindings.
fn grants_rights(target: &Target<'_>) -> bool {
    target.group == "rbac.authorization.k8s.io"
        && matches!(
            target.resource,
            "roles" | "rolebindings" | "clusterroles" | "clusterrolebindings"
        )
}

fn describe_resource(target: &Target<'_>) -> String {
    if target.group.is_empty() {
        target.resource.to_string()
    } else {
        format!("{}.{}", target.resource, target.group)
    }
}

fn describe_object(target: &Target<'_>) -> String {
    if target.namespace.is_empty() {
        target.name.to_string()
    } else {
        format!("{}/{}", target.namespace, target.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_review_names_the_service_account_its_groups_and_the_object() {
        let review = review_of(&Question {
            account_namespace: "team".into(),
            account_name: "deployer".into(),
            group: "apps".into(),
            version: "v1".into(),
            resource: "deployments".into(),
            namespace: "default".into(),
            name: "web".into(),
            verb: "patch",
        });
        assert_eq!(
            review.spec.user.as_deref(),
            Some("system:serviceaccount:team:deployer")
        );
        assert_eq!(
            review.spec.groups,
            Some(vec![
                "system:serviceaccounts".to_string(),
                "system:serviceaccounts:team".to_string(),
                "system:authenticated".to_string(),
            ])
        );
        let attributes = review.spec.resource_attributes.expect("attributes");
        assert_eq!(attributes.verb.as_deref(), Some("patch"));
        assert_eq!(attributes.resource.as_deref(), Some("deployments"));
        assert_eq!(attributes.name.as_deref(), Some("web"));
    }

    #[test]
    fn the_agent_asks_whether_it_may_impersonate_the_executor_in_its_namespace() {
        let review = impersonation_review(&Account {
            namespace: "kube-system".into(),
            name: "deployer".into(),
        });
        let attributes = review.spec.resource_attributes.expect("attributes");
        assert_eq!(attributes.verb.as_deref(), Some("impersonate"));
        assert_eq!(attributes.resource.as_deref(), Some("serviceaccounts"));
        assert_eq!(attributes.group.as_deref(), Some(""));
        assert_eq!(attributes.namespace.as_deref(), Some("kube-system"));
        assert_eq!(attributes.name.as_deref(), Some("deployer"));
        let not_listed = ExecutorError::NotListed {
            account: "kube-system/deployer".into(),
        };
        assert_eq!(not_listed.reason(), "ExecutorNotAllowed");
        assert!(not_listed.is_transient(), "an admin may list it later");
        assert!(
            not_listed.to_string().contains("kube-system/deployer"),
            "{not_listed}"
        );
    }

    #[test]
    fn refusals_are_retried_and_bad_executors_are_not() {
        let not_allowed = ExecutorError::NotAllowed {
            resource: "configmaps".into(),
            object: "default/a".into(),
            account: "team/deployer".into(),
            verbs: "create, delete".into(),
        };
        assert!(not_allowed.is_transient());
        assert_eq!(not_allowed.reason(), "AppliedManifestFailed");
        assert!(
            not_allowed
                .to_string()
                .contains("ServiceAccount team/deployer may not create, delete"),
            "{not_allowed}"
        );
        let target = Target {
            group: "",
            version: "v1",
            resource: "secrets",
            namespace: "vault",
            name: "token",
            manifest: &serde_json::Value::Null,
        };
        let cannot_read = ExecutorError::cannot_read("team/deployer".into(), &target);
        assert_eq!(cannot_read.reason(), "ExecutorCannotRead");
        assert!(cannot_read.is_transient());
        assert!(
            cannot_read
                .to_string()
                .starts_with("executor team/deployer may not get secrets in namespace vault:"),
            "{cannot_read}"
        );
        assert!(!ExecutorError::ReadRequiresExecutor.is_transient());
        assert!(!ExecutorError::Required.is_transient());
        assert!(!ExecutorError::MissingServiceAccount.is_transient());
        assert_eq!(
            ExecutorError::UnsupportedSubject("User".into()).reason(),
            "InvalidExecutor"
        );
    }
}
