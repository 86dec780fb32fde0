//! Whose identity the agent writes spoke objects with. By default its own
//! (its ClusterRole decides what any work can do; a work's executor is
//! checked with SubjectAccessReviews first). With `--write-as-executor`
//! every write of a work's objects (apply, create, update, the hash patch,
//! garbage collection, deletion, the orphaning patch) goes through a client
//! impersonating the work's executor, so the spoke's API server runs RBAC,
//! the `escalate`/`bind` checks, admission and quota against the executor
//! itself, and the agent's own ClusterRole needs no workload rights at all:
//! reads, its records and `impersonate` on the ServiceAccounts it may act as.

use std::time::Duration;

use ferry_proto::v1;
use kube::Client;
use moka::future::Cache;

use crate::spoke_client::spoke_client;

/// Executors whose clients are kept at once; a cache over this drops the
/// least used (a client is cheap to make again).
const MAX_EXECUTOR_CLIENTS: u64 = 256;
/// A client unused this long is dropped with its connections.
const EXECUTOR_CLIENT_IDLE: Duration = Duration::from_secs(600);

/// A work could not be given a client to write with.
#[derive(Debug, Clone, thiserror::Error)]
pub enum WriteIdentityError {
    /// Writing as the executor, and the work names none.
    #[error(
        "this agent writes only as a work's executor (--write-as-executor): set spec.executor.subject to a ServiceAccount on the cluster"
    )]
    NoExecutor,
    /// The impersonating client could not be built from the agent's config.
    #[error("cannot act as {user}: {message}")]
    Client {
        /// The impersonated user.
        user: String,
        /// What went wrong.
        message: String,
    },
}

/// The ServiceAccount a work's objects are written as: namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ExecutorAccount {
    /// Namespace of the ServiceAccount.
    pub namespace: String,
    /// Name of the ServiceAccount.
    pub name: String,
}

impl ExecutorAccount {
    /// The account a work's executor names, if it names one.
    pub fn of(executor: Option<&v1::Executor>) -> Option<Self> {
        let executor = executor?;
        if executor.service_account_name.is_empty() {
            return None;
        }
        Some(Self {
            namespace: executor.service_account_namespace.clone(),
            name: executor.service_account_name.clone(),
        })
    }

    /// The Kubernetes user name of the account.
    pub fn user(&self) -> String {
        format!("system:serviceaccount:{}:{}", self.namespace, self.name)
    }
}

/// Who writes a work's objects.
#[derive(Clone)]
pub enum WriteIdentity {
    /// The agent itself.
    Agent(Client),
    /// The work's executor, impersonated through `config` (the agent's own
    /// connection settings); one client per executor, cached.
    Executor {
        /// The agent's spoke connection (boxed: it is large, and made once).
        config: Box<kube::Config>,
        /// Clients per executor.
        clients: Cache<ExecutorAccount, Client>,
    },
}

impl WriteIdentity {
    /// Writes as the executor of each work, impersonating it through
    /// `config`.
    pub fn as_executor(config: kube::Config) -> Self {
        Self::Executor {
            config: Box::new(config),
            clients: Cache::builder()
                .max_capacity(MAX_EXECUTOR_CLIENTS)
                .time_to_idle(EXECUTOR_CLIENT_IDLE)
                .build(),
        }
    }

    /// Whether writes go as the executor (the API server then judges them,
    /// and no SubjectAccessReview is asked first).
    pub fn is_executor(&self) -> bool {
        matches!(self, Self::Executor { .. })
    }

    /// The client to write the objects of a work whose executor is
    /// `executor` with. Fails when writing as the executor and the work
    /// names none, or the impersonating client cannot be built.
    pub async fn client_for(
        &self,
        executor: Option<&ExecutorAccount>,
    ) -> Result<Client, WriteIdentityError> {
        match self {
            Self::Agent(client) => Ok(client.clone()),
            Self::Executor { config, clients } => {
                let account = executor.ok_or(WriteIdentityError::NoExecutor)?;
                let user = account.user();
                clients
                    .try_get_with(account.clone(), async {
                        let mut config = (**config).clone();
                        config.auth_info.impersonate = Some(user.clone());
                        config.auth_info.impersonate_groups = None;
                        spoke_client(config).map_err(|e| WriteIdentityError::Client {
                            user: user.clone(),
                            message: e.to_string(),
                        })
                    })
                    .await
                    .map_err(|e| (*e).clone())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_executor_without_a_service_account_names_no_account() {
        assert_eq!(ExecutorAccount::of(None), None);
        let empty = v1::Executor::default();
        assert_eq!(ExecutorAccount::of(Some(&empty)), None);
        let named = v1::Executor {
            service_account_namespace: "apps".into(),
            service_account_name: "deployer".into(),
            ..Default::default()
        };
        let account = ExecutorAccount::of(Some(&named)).expect("account");
        assert_eq!(account.user(), "system:serviceaccount:apps:deployer");
    }

    #[tokio::test]
    async fn writing_as_the_executor_needs_one_and_the_agent_writes_as_itself_otherwise() {
        let config = kube::Config::new("https://127.0.0.1:1".parse().expect("url"));
        let identity = WriteIdentity::as_executor(config.clone());
        assert!(matches!(
            identity.client_for(None).await,
            Err(WriteIdentityError::NoExecutor)
        ));
        let account = ExecutorAccount {
            namespace: "apps".into(),
            name: "deployer".into(),
        };
        identity
            .client_for(Some(&account))
            .await
            .expect("an impersonating client");
        let agent = WriteIdentity::Agent(Client::try_from(config).expect("client"));
        assert!(!agent.is_executor());
        agent
            .client_for(None)
            .await
            .expect("the agent's own client");
    }
}
