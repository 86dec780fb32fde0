//! Where one manifest goes on the spoke, and what a look-up of its object
//! finds after a failed apply; the manifest's condition rules.

use ferry_proto::v1;
use kube::api::{Api, DynamicObject};
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;
use serde_json::Value;

use super::Reconciler;
use super::failure::ManifestFailure;
use crate::applied_works::AppliedResource;
use crate::applier::api_for;
use crate::conditions::Observed;
use crate::discovery::ResolveError;
use crate::executor::{ExecutorError, Target as ExecutorTarget};
use crate::write_identity::ExecutorAccount;
use ferry_semantics::ManifestIdentity;
use ferry_semantics::availability::{REASON_FETCH_FAILED, REASON_INCOMPLETE_META};
use ferry_semantics::config_match::{condition_rules_for, feedback_rules_for};

/// Where one manifest goes on the spoke: its resource, an Api handle, and
/// its slot in the record (with an empty UID, as an intent).
pub(super) struct Target {
    pub(super) resource: ApiResource,
    pub(super) api: Api<DynamicObject>,
    pub(super) namespace: String,
    pub(super) slot: AppliedResource,
}

/// What a look-up of a manifest's object after a failed apply found, for
/// its `Available` condition (OCM reports the object's existence whether or
/// not the apply worked).
pub(super) enum Lookup {
    /// The object exists.
    Found(Observed),
    /// The object does not exist.
    Absent,
    /// There is nothing to look up, or the look-up failed: the reason (OCM's)
    /// and what went wrong.
    Unknown(&'static str, String),
}

impl Reconciler {
    /// Adds the conditions of the manifest's condition rules (of a work of
    /// `owner`) to `conditions`; a rule's condition replaces one of the same
    /// type that ferry computed (as in OCM, where rules may set any
    /// condition).
    pub(super) async fn add_rule_conditions(
        &self,
        owner: &str,
        meta: &v1::ResourceMeta,
        observed: &Observed,
        generation: i64,
        conditions: &mut Vec<v1::Condition>,
    ) {
        let computed = self
            .rules
            .evaluate(
                owner,
                meta,
                &observed.object,
                &observed.condition_rules,
                generation,
            )
            .await;
        for c in computed {
            conditions.retain(|existing| existing.r#type != c.r#type);
            conditions.push(c);
        }
    }

    /// Looks up the object of a manifest whose apply failed, for its
    /// `Available` condition and feedback. The read is the executor's
    /// (`executor`, the work's): through the impersonating client when the
    /// agent writes as executors, after a SubjectAccessReview for `get`
    /// otherwise; a work without one is read as the agent only when the
    /// agent does not require executors. A failed or refused write never
    /// falls back to the agent's own read rights. Never fails: what went
    /// wrong, or why the object may not be read, is the `Unknown` answer.
    pub(super) async fn look_up(
        &self,
        identity: &ManifestIdentity,
        configs: &[v1::ManifestConfig],
        executor: Option<&v1::Executor>,
    ) -> Lookup {
        let target = match self.target(identity).await {
            Ok(target) => target,
            Err(error) => return Lookup::Unknown(REASON_INCOMPLETE_META, error.to_string()),
        };
        let none = Value::Null;
        let read_target = ExecutorTarget {
            group: &identity.group,
            version: &identity.version,
            resource: &target.resource.plural,
            namespace: &target.namespace,
            name: &identity.name,
            manifest: &none,
        };
        let reader = match self.executor.may_read(executor, read_target).await {
            Err(refused) => return Lookup::Unknown(refused.reason(), refused.to_string()),
            Ok(None) => None,
            Ok(Some(account)) => Some(account),
        };
        let api = match &reader {
            Some(_) if self.writers.is_executor() => {
                match self
                    .writers
                    .client_for(ExecutorAccount::of(executor).as_ref())
                    .await
                {
                    Ok(client) if target.namespace.is_empty() => {
                        Api::all_with(client, &target.resource)
                    }
                    Ok(client) => Api::namespaced_with(client, &target.namespace, &target.resource),
                    Err(error) => {
                        let failure = ManifestFailure::from(error);
                        return Lookup::Unknown(
                            failure.reason(),
                            format!("cannot read the object as the executor: {failure}"),
                        );
                    }
                }
            }
            _ => target.api.clone(),
        };
        let fetched = match api.get_opt(&identity.name).await {
            Err(kube::Error::Api(status)) if status.code == 403 => {
                let refused = match reader {
                    Some(account) => ExecutorError::cannot_read(account, &read_target),
                    None => {
                        return Lookup::Unknown(
                            REASON_FETCH_FAILED,
                            format!("Failed to fetch resource: {}", status.message),
                        );
                    }
                };
                return Lookup::Unknown(refused.reason(), refused.to_string());
            }
            other => other,
        };
        match fetched {
            Ok(Some(object)) => {
                let rules = feedback_rules_for(
                    configs,
                    &identity.group,
                    &target.resource.plural,
                    &target.namespace,
                    &identity.name,
                );
                let condition_rules = condition_rules_for(
                    configs,
                    &identity.group,
                    &target.resource.plural,
                    &target.namespace,
                    &identity.name,
                );
                match serde_json::to_value(&object) {
                    Ok(object) => Lookup::Found(Observed {
                        object,
                        rules: rules.to_vec(),
                        condition_rules: condition_rules.to_vec(),
                    }),
                    Err(error) => Lookup::Unknown(REASON_FETCH_FAILED, error.to_string()),
                }
            }
            Ok(None) => Lookup::Absent,
            Err(error) => Lookup::Unknown(
                REASON_FETCH_FAILED,
                format!("Failed to fetch resource: {error}"),
            ),
        }
    }

    /// Where `identity` goes on the spoke. Fails when its kind is not served.
    pub(super) async fn target(&self, identity: &ManifestIdentity) -> Result<Target, ResolveError> {
        let gvk = GroupVersionKind::gvk(&identity.group, &identity.version, &identity.kind);
        let (resource, caps) = self.resolver.resolve(&gvk).await?;
        let api = api_for(&self.client, &resource, &caps, identity);
        let namespace = api.namespace().unwrap_or_default().to_string();
        let slot = AppliedResource {
            group: identity.group.clone(),
            version: identity.version.clone(),
            kind: identity.kind.clone(),
            resource: resource.plural.clone(),
            namespace: namespace.clone(),
            name: identity.name.clone(),
            uid: String::new(),
        };
        Ok(Target {
            resource,
            api,
            namespace,
            slot,
        })
    }
}
