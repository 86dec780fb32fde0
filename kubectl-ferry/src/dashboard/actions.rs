//! What the page's buttons do, with the user's own credentials and the same
//! writes as `kubectl ferry rollout`: approve a gate (create the
//! RolloutApproval named for the gate and revision, signed with the
//! caller's user name from a SelfSubjectReview; approving twice finds the
//! first), pause and resume a rollout (merge-patch `spec.paused`). A
//! refusal says which verb on which resource was refused.

use ferry_api::replica_set::ManifestWorkReplicaSet;
use ferry_api::rollout_approval::RolloutApproval;
use kube::api::ApiResource;
use kube::{Client, Resource};
use serde_json::Value;

use crate::hub_api::identity::whoami;
use crate::hub_api::replica_sets::{create_approval, patch_paused};
use crate::rollout::{GateChoice, ReplicaSetRef};

use super::rollouts_page::{AWAITING_APPROVAL, approvable_revision};

/// Longest comment or name accepted from a form.
const MAX_FIELD: usize = 253;

/// One action a person asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Approve the gate after `after_group` of `placement` for `revision`.
    Approve {
        /// The replica set's namespace.
        namespace: String,
        /// The replica set.
        replica_set: String,
        /// The placement whose gate it is.
        placement: String,
        /// The decision group the gate follows.
        after_group: String,
        /// The whole revision digest approved.
        revision: String,
    },
    /// Set `spec.paused` of the replica set to `paused`.
    SetPaused {
        /// The replica set's namespace.
        namespace: String,
        /// The replica set.
        name: String,
        /// true to pause, false to resume.
        paused: bool,
    },
}

/// Why an action was not done; each reads as one sentence for the page.
#[derive(Debug, thiserror::Error)]
pub enum ActionError {
    /// A form field is missing or too long.
    #[error("the request lacks a valid {0}")]
    BadField(&'static str),
    /// The user's RBAC refuses the request.
    #[error("forbidden: you may not {verb} {resource} in namespace {namespace} ({message})")]
    Forbidden {
        /// The verb refused, e.g. `create`.
        verb: &'static str,
        /// The resource, e.g. `rolloutapprovals.work.ferry.dev`.
        resource: String,
        /// The namespace.
        namespace: String,
        /// The API server's message.
        message: String,
    },
    /// The API server refused for another reason (conflict, invalid ...).
    #[error(
        "the hub refused to {verb} {resource} in namespace {namespace}: {message} (HTTP {code})"
    )]
    Refused {
        /// The verb.
        verb: &'static str,
        /// The resource.
        resource: String,
        /// The namespace.
        namespace: String,
        /// The API server's message.
        message: String,
        /// The HTTP status.
        code: u16,
    },
    /// The hub could not be reached.
    #[error("hub unreachable: cannot {verb} {resource} in namespace {namespace}: {detail}")]
    Unreachable {
        /// The verb.
        verb: &'static str,
        /// The resource.
        resource: String,
        /// The namespace.
        namespace: String,
        /// The transport error.
        detail: String,
    },
    /// The gate is not (or no longer) awaiting approval for that revision:
    /// the page was stale.
    #[error(
        "the gate after group {after_group} of {namespace}/{replica_set} is not awaiting approval of that revision any more; the page shows its current state"
    )]
    NotAwaiting {
        /// The namespace.
        namespace: String,
        /// The replica set.
        replica_set: String,
        /// The group.
        after_group: String,
    },
    /// The API server did not say who the caller is.
    #[error("cannot tell who you are (SelfSubjectReview): {0}")]
    WhoAmI(String),
}

impl ActionError {
    /// Whether the refusal is the user's RBAC (HTTP 403 for the page).
    pub fn is_forbidden(&self) -> bool {
        matches!(self, ActionError::Forbidden { .. })
    }

    fn from_kube(
        verb: &'static str,
        resource: String,
        namespace: &str,
        error: kube::Error,
    ) -> Self {
        let namespace = namespace.to_string();
        match error {
            kube::Error::Api(status) if status.code == 403 => ActionError::Forbidden {
                verb,
                resource,
                namespace,
                message: status.message.clone(),
            },
            kube::Error::Api(status) => ActionError::Refused {
                verb,
                resource,
                namespace,
                message: status.message.clone(),
                code: status.code,
            },
            other => ActionError::Unreachable {
                verb,
                resource,
                namespace,
                detail: other.to_string(),
            },
        }
    }
}

/// The action from a posted form's fields (`field` reads one); fails with
/// [`ActionError::BadField`] for a missing, empty or overlong field or an
/// unknown verb.
pub fn action_from_form<'a>(
    verb: &str,
    field: impl Fn(&'static str) -> Option<&'a str>,
) -> Result<Action, ActionError> {
    let get = |name: &'static str| {
        field(name)
            .filter(|v| !v.is_empty() && v.len() <= MAX_FIELD)
            .map(str::to_string)
            .ok_or(ActionError::BadField(name))
    };
    match verb {
        "approve" => Ok(Action::Approve {
            namespace: get("namespace")?,
            replica_set: get("replicaSet")?,
            placement: get("placement")?,
            after_group: get("afterGroup")?,
            revision: get("revision")?,
        }),
        "pause" | "resume" => Ok(Action::SetPaused {
            namespace: get("namespace")?,
            name: get("name")?,
            paused: verb == "pause",
        }),
        _ => Err(ActionError::BadField("action")),
    }
}

/// Whether the stored replica set `raw` shows the gate after `after_group`
/// of `placement` awaiting approval, and `revision` is the whole revision
/// digest an approval names now ([`approvable_revision`]).
pub fn gate_awaits(raw: &Value, placement: &str, after_group: &str, revision: &str) -> bool {
    let Ok(rs) = serde_json::from_value::<ManifestWorkReplicaSet>(raw.clone()) else {
        return false;
    };
    let Some(rollout) = rs.status.as_ref().and_then(|s| s.rollout.as_ref()) else {
        return false;
    };
    !revision.is_empty()
        && approvable_revision(&rs, placement) == revision
        && rollout
            .placements
            .iter()
            .filter(|p| p.name == placement)
            .flat_map(|p| &p.gates)
            .any(|g| g.after_group == after_group && g.state == AWAITING_APPROVAL)
}

fn resource_name<K: Resource<DynamicType = ()>>() -> String {
    let resource = ApiResource::erase::<K>(&());
    format!("{}.{}", resource.plural, resource.group)
}

/// The caller's user name as the API server authenticated it (the same
/// SelfSubjectReview as `kubectl ferry rollout approve`).
pub async fn who_am_i(client: &Client) -> Result<String, ActionError> {
    whoami(client)
        .await
        .map_err(|e| ActionError::WhoAmI(e.to_string()))
}

/// Does `action` with `client` (the user's credentials) and returns what was
/// done, as a sentence. Fails with [`ActionError`].
pub async fn perform(client: &Client, action: &Action) -> Result<String, ActionError> {
    match action {
        Action::Approve {
            namespace,
            replica_set,
            placement,
            after_group,
            revision,
        } => {
            let user = who_am_i(client).await?;
            let rs = ReplicaSetRef {
                namespace: namespace.clone(),
                name: replica_set.clone(),
            };
            let choice = GateChoice {
                placement: placement.clone(),
                after_group: after_group.clone(),
                revision: revision.clone(),
            };
            let comment = "approved in kubectl ferry dashboard";
            let (name, existed) = create_approval(client, &rs, &choice, &user, comment)
                .await
                .map_err(|e| {
                    ActionError::from_kube(
                        "create",
                        resource_name::<RolloutApproval>(),
                        namespace,
                        e,
                    )
                })?;
            Ok(if existed {
                format!(
                    "the gate after group {after_group} of {namespace}/{replica_set} was approved already (RolloutApproval {name})"
                )
            } else {
                format!(
                    "approved the gate after group {after_group} of {namespace}/{replica_set} as {user} (RolloutApproval {name})"
                )
            })
        }
        Action::SetPaused {
            namespace,
            name,
            paused,
        } => {
            let rs = ReplicaSetRef {
                namespace: namespace.clone(),
                name: name.clone(),
            };
            patch_paused(client, &rs, *paused).await.map_err(|e| {
                ActionError::from_kube(
                    "patch",
                    resource_name::<ManifestWorkReplicaSet>(),
                    namespace,
                    e,
                )
            })?;
            Ok(format!(
                "{} the rollout of {namespace}/{name}",
                if *paused { "paused" } else { "resumed" }
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::HashMap;

    #[test]
    fn forms_become_actions_and_bad_fields_are_named() {
        let fields: HashMap<&str, &str> = [
            ("namespace", "apps"),
            ("replicaSet", "web"),
            ("placement", "all"),
            ("afterGroup", "canary"),
            ("revision", "abc"),
        ]
        .into();
        let action = action_from_form("approve", |k| fields.get(k).copied()).expect("approve");
        assert!(
            matches!(action, Action::Approve { ref after_group, .. } if after_group == "canary")
        );
        let error = action_from_form("pause", |k| fields.get(k).copied()).expect_err("no name");
        assert_eq!(error.to_string(), "the request lacks a valid name");
        assert!(action_from_form("delete", |k| fields.get(k).copied()).is_err());
    }

    #[test]
    fn a_forbidden_answer_names_verb_resource_and_namespace() {
        let error = ActionError::Forbidden {
            verb: "create",
            resource: resource_name::<RolloutApproval>(),
            namespace: "apps".into(),
            message: "no".into(),
        };
        assert!(error.to_string().starts_with(
            "forbidden: you may not create rolloutapprovals.work.ferry.dev in namespace apps"
        ));
        assert!(error.is_forbidden());
    }

    #[test]
    fn only_an_awaiting_gate_of_the_current_revision_can_be_approved() {
        let raw = json!({"metadata": {"name": "web", "namespace": "apps"},
            "spec": {"manifestWorkTemplate": {"workload": {"manifests": []}}, "placementRefs": []},
            "status": {"conditions": [], "summary": {"total": 0, "applied": 0, "available": 0, "degraded": 0, "progressing": 0, "updated": 0}, "rollout": {
            "revision": {"number": 2, "hash": "h2"},
            "placements": [{"name": "p", "revision": "h2", "revisionDigest": "d2",
                            "gates": [{"afterGroup": "g", "state": "AwaitingApproval"},
                                      {"afterGroup": "done", "state": "Passed"}]}]}}});
        assert!(gate_awaits(&raw, "p", "g", "d2"));
        assert!(
            !gate_awaits(&raw, "p", "g", "h2"),
            "the short hash is not the revision"
        );
        assert!(!gate_awaits(&raw, "p", "g", "d1"));
        assert!(!gate_awaits(&raw, "p", "done", "d2"));
        assert!(!gate_awaits(&raw, "q", "g", "d2"));
        assert!(!gate_awaits(&json!({}), "p", "g", "h2"));
    }
}
