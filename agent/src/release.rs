//! Ferry's ownership of objects on the spoke, the IO half of
//! `semantics::release`: marks an applied object as held by a work, and lets
//! go of it again: deletes it with UID and resourceVersion preconditions, or
//! only drops this work's mark when another work still holds it, or orphans it.

use ferry_semantics::contract::AGENT_FIELD_MANAGER;
use kube::Client;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, Preconditions,
    PropagationPolicy,
};
use serde_json::Value;

use crate::applied_works::AppliedResource;
use ferry_semantics::release::{
    DeletePolicy, Disposition, Owner, adopt_patch, drop_ocm_marks_patch, is_owned_by,
    other_ferry_owners, release_patch, unmark_patch,
};

/// Where one object stands after a release attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Released {
    /// The object is gone, or the name now belongs to another object.
    Gone,
    /// An intent (recorded before the object was to be created) whose live
    /// object does not carry this work's mark: the work did not create it,
    /// so only its record entry goes.
    NotCreated,
    /// The object stays on the cluster without this work's mark.
    Orphaned,
    /// Another work still holds the object; only this work's mark was removed.
    Shared,
    /// Deletion was requested; the object waits for its finalizers.
    Terminating {
        /// The finalizers still on the object.
        finalizers: Vec<String>,
    },
}

/// Marking or releasing an object failed; it is tried again on the next pass.
#[derive(Debug, thiserror::Error)]
pub enum ReleaseError {
    /// The API server refused or could not be reached.
    #[error("releasing {what}: {source}")]
    Request {
        /// The object.
        what: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// The object changed between read and write.
    #[error("{what} changed while ferry updated its ownership; retrying")]
    Changed {
        /// The object.
        what: String,
    },
}

/// The API resource of a recorded object, without discovery.
pub fn recorded_resource(resource: &AppliedResource) -> ApiResource {
    ApiResource {
        group: resource.group.clone(),
        version: resource.version.clone(),
        api_version: resource.api_version(),
        kind: resource.kind.clone(),
        plural: resource.resource.clone(),
    }
}

/// An Api handle for a recorded object, without discovery: the record holds
/// everything the URL needs.
pub fn api_for_recorded(client: &Client, resource: &AppliedResource) -> Api<DynamicObject> {
    let api_resource = recorded_resource(resource);
    if resource.namespace.is_empty() {
        Api::all_with(client.clone(), &api_resource)
    } else {
        Api::namespaced_with(client.clone(), &resource.namespace, &api_resource)
    }
}

/// Marks `object` (as just read or written) as held by `owner`, and returns
/// the object as it is afterwards. Fails with `Changed` when the object moved
/// on since it was read; the next pass marks it.
pub async fn adopt(
    api: &Api<DynamicObject>,
    object: Value,
    owner: &Owner,
    what: &str,
) -> Result<Value, ReleaseError> {
    let Some(patch) = adopt_patch(&object, owner) else {
        return Ok(object);
    };
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let params = PatchParams {
        field_manager: Some(AGENT_FIELD_MANAGER.into()),
        ..Default::default()
    };
    let marked = api
        .patch(name, &params, &Patch::Merge(&patch))
        .await
        .map_err(|e| changed_or(e, what))?;
    Ok(serde_json::to_value(&marked).unwrap_or(object))
}

/// Removes `owner`'s mark from `object` (as just read or written), for an
/// object the work orphans, and returns the object as it is afterwards.
/// Fails with `Changed` when the object moved on since it was read; the
/// next pass removes it.
pub async fn unmark(
    api: &Api<DynamicObject>,
    object: Value,
    owner: &Owner,
    what: &str,
) -> Result<Value, ReleaseError> {
    let Some(patch) = unmark_patch(&object, owner) else {
        return Ok(object);
    };
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let params = PatchParams {
        field_manager: Some(AGENT_FIELD_MANAGER.into()),
        ..Default::default()
    };
    let unmarked = api
        .patch(name, &params, &Patch::Merge(&patch))
        .await
        .map_err(|e| changed_or(e, what))?;
    Ok(serde_json::to_value(&unmarked).unwrap_or(object))
}

/// Removes the owner references to OCM's AppliedManifestWorks from `object`
/// (as just read or written) and returns the object as it is afterwards:
/// the migration from OCM's work agent (`--adopt-ocm-objects`). Fails with
/// `Changed` when the object moved on since it was read; the next pass
/// removes them.
pub async fn drop_ocm_marks(
    api: &Api<DynamicObject>,
    object: Value,
    what: &str,
) -> Result<Value, ReleaseError> {
    let Some(patch) = drop_ocm_marks_patch(&object) else {
        return Ok(object);
    };
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let params = PatchParams {
        field_manager: Some(AGENT_FIELD_MANAGER.into()),
        ..Default::default()
    };
    let adopted = api
        .patch(name, &params, &Patch::Merge(&patch))
        .await
        .map_err(|e| changed_or(e, what))?;
    Ok(serde_json::to_value(&adopted).unwrap_or(object))
}

/// Releases `resource`, held by `owner`, as `disposition` says.
pub async fn release(
    client: &Client,
    resource: &AppliedResource,
    owner: &Owner,
    disposition: Disposition,
) -> Result<Released, ReleaseError> {
    let what = resource.describe();
    let api = api_for_recorded(client, resource);
    let request = |source| ReleaseError::Request {
        what: what.clone(),
        source,
    };
    let live = match api.get_opt(&resource.name).await {
        Ok(live) => live,
        // The kind itself is gone (its CRD was deleted): so is the object.
        Err(kube::Error::Api(status)) if status.code == 404 => None,
        Err(source) => return Err(request(source)),
    };
    let Some(live) = live else {
        return Ok(Released::Gone);
    };
    if !resource.uid.is_empty() && live.metadata.uid.as_deref() != Some(resource.uid.as_str()) {
        return Ok(Released::Gone);
    }
    let live_json = serde_json::to_value(&live).unwrap_or(Value::Null);
    // An intent names an object the work may have created before its agent
    // stopped; the owner reference every create carries says whether it did.
    if resource.uid.is_empty() && !is_owned_by(&live_json, owner) {
        return Ok(Released::NotCreated);
    }
    if live.metadata.deletion_timestamp.is_some() {
        return Ok(Released::Terminating {
            finalizers: live.metadata.finalizers.clone().unwrap_or_default(),
        });
    }
    let shared = other_ferry_owners(&live_json, owner) > 0;
    if disposition == Disposition::Orphan || shared {
        if let Some(patch) = release_patch(&live_json, owner) {
            let params = PatchParams {
                field_manager: Some(AGENT_FIELD_MANAGER.into()),
                ..Default::default()
            };
            api.patch(&resource.name, &params, &Patch::Merge(&patch))
                .await
                .map_err(|e| changed_or(e, &what))?;
        }
        return Ok(if shared {
            Released::Shared
        } else {
            Released::Orphaned
        });
    }
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        preconditions: Some(Preconditions {
            uid: live.metadata.uid.clone(),
            resource_version: live.metadata.resource_version.clone(),
        }),
        ..Default::default()
    };
    match api.delete(&resource.name, &params).await {
        Ok(either) => Ok(match either.left() {
            Some(terminating) => Released::Terminating {
                finalizers: terminating.metadata.finalizers.unwrap_or_default(),
            },
            None => Released::Gone,
        }),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(Released::Gone),
        Err(e) => Err(changed_or(e, &what)),
    }
}

/// What releasing several objects left on the cluster.
#[derive(Debug, Default)]
pub struct Remaining {
    /// The objects still there (terminating, or not releasable yet).
    pub kept: Vec<AppliedResource>,
    /// One line per kept object: which and why.
    pub blockers: Vec<String>,
}

/// Releases each of `resources`, held by `owner`, as `policy` says, and
/// returns what is left. Never fails as a whole: an object that cannot be
/// released now is kept, with the reason among the blockers.
pub async fn release_each(
    client: &Client,
    resources: &[AppliedResource],
    owner: &Owner,
    policy: &DeletePolicy,
) -> Remaining {
    let mut remaining = Remaining::default();
    for resource in resources {
        let disposition = policy.disposition(
            &resource.group,
            &resource.resource,
            &resource.namespace,
            &resource.name,
        );
        let blocker = match release(client, resource, owner, disposition).await {
            Ok(Released::Gone | Released::NotCreated | Released::Orphaned | Released::Shared) => {
                continue;
            }
            Ok(Released::Terminating { finalizers }) => format!(
                "{} is terminating, waiting for finalizers [{}]",
                resource.describe(),
                finalizers.join(", ")
            ),
            Err(error) => error.to_string(),
        };
        remaining.blockers.push(blocker);
        remaining.kept.push(resource.clone());
    }
    remaining
}

fn changed_or(error: kube::Error, what: &str) -> ReleaseError {
    match error {
        kube::Error::Api(status) if status.code == 409 => ReleaseError::Changed {
            what: what.to_string(),
        },
        source => ReleaseError::Request {
            what: what.to_string(),
            source,
        },
    }
}
