//! Writes one manifest to the spoke with the strategy its config asks for.
//! Every decision about *what* to write comes from the pure `semantics`
//! module; this file only reads the live object, sends the request the plan
//! calls for, and turns API errors into reasons a user can act on. When the
//! live object already matches, nothing is sent: steady state costs no writes.
//! An object most likely absent (a new work's) is created without the read.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::{ApiCapabilities, ApiResource, Scope};
use kube::runtime::wait::{await_condition, conditions};
use serde_json::Value;
use tracing::debug;

use ferry_semantics::ManifestIdentity;
use ferry_semantics::apply_outcome::Applied;
use ferry_semantics::compare::is_subset;
use ferry_semantics::contract::AGENT_FIELD_MANAGER;
use ferry_semantics::hash::{
    LAST_APPLIED_ANNOTATION, OBJECT_HASH_ANNOTATION, canonical_json, object_hash, set_annotations,
    strip_ferry_annotations,
};
use ferry_semantics::ignore::{SsaInput, plan_server_side_apply};
use ferry_semantics::list_items::ListSchema;
use ferry_semantics::merge::{merge_patch, three_way_merge};
use ferry_semantics::release::{
    ApplyReferences, Owner, add_managed_label, add_references, apply_references, without_owner,
};
use ferry_semantics::strategy::{Strategy, WhenDeleted};

/// How long to wait for a CRD from the same work to be served before the
/// resources that depend on it are tried.
const CRD_ESTABLISH_TIMEOUT: Duration = Duration::from_secs(20);

/// Kubernetes caps all annotations of an object at 256 KiB together; past
/// this size the last-applied annotation cannot be stored and the Update
/// strategy falls back to server-side apply.
pub const MAX_LAST_APPLIED_BYTES: usize = 200 * 1024;

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

/// The result of applying one manifest.
#[derive(Debug, Clone)]
pub struct ApplyOutcome {
    /// What happened.
    pub applied: Applied,
    /// The object on the spoke afterwards, if it exists: what status
    /// feedback and availability are read from.
    pub object: Option<Value>,
    /// Things the user should see although nothing failed (ignore paths that
    /// match nothing, a strategy fallback).
    pub notes: Vec<String>,
    /// The object as it was read before anything was written: what drift is
    /// found in.
    pub before: Option<Value>,
}

/// Everything needed to write one manifest.
pub struct ManifestWrite<'a> {
    /// Spoke client.
    pub client: &'a Client,
    /// Api handle for the object.
    pub api: &'a Api<DynamicObject>,
    /// Which object.
    pub identity: &'a ManifestIdentity,
    /// The hub manifest.
    pub desired: &'a Value,
    /// How to write it.
    pub strategy: &'a Strategy,
    /// What to do when it was deleted on the spoke.
    pub when_deleted: WhenDeleted,
    /// UID this work last saw the object with, if any.
    pub known_uid: Option<&'a str>,
    /// Which lists merge by key.
    pub schema: &'a dyn ListSchema,
    /// The work's record: a created object carries its owner reference from
    /// its first write, so it is never on the cluster unmarked.
    pub owner: &'a Owner,
    /// Whether the object carries the owner's mark: false for an object the
    /// work orphans (its deleteOption), which must not be garbage-collected
    /// with the work's AppliedManifestWork.
    pub marked: bool,
    /// Whether the object is most likely not on the spoke (its work's record
    /// was created by this pass). Under Update the create is then tried
    /// without a read first; an object there after all is read and written
    /// as usual, at the cost of the refused create.
    pub likely_absent: bool,
}

/// An Api handle for the object `identity` names. Namespaced kinds without a
/// namespace in the manifest go to `default`, as kubectl does.
pub fn api_for(
    client: &Client,
    resource: &ApiResource,
    caps: &ApiCapabilities,
    identity: &ManifestIdentity,
) -> Api<DynamicObject> {
    match caps.scope {
        Scope::Namespaced => Api::namespaced_with(
            client.clone(),
            identity.namespace.as_deref().unwrap_or("default"),
            resource,
        ),
        Scope::Cluster => Api::all_with(client.clone(), resource),
    }
}

/// Applies one manifest per its strategy. A CRD is waited for until it is
/// served, so custom resources later in the same work can be resolved.
pub async fn apply_manifest(write: &ManifestWrite<'_>) -> Result<ApplyOutcome, ApplyError> {
    let what = write.identity.describe();
    if write.likely_absent
        && *write.strategy == Strategy::Update
        && let Ok(body) = update_body(write)
    {
        match create(write, &body, &what).await {
            Ok(created) => {
                let result = outcome(Applied::Created, Some(to_json(&created)), vec![]);
                wait_if_crd(write, &result).await?;
                return Ok(result);
            }
            // There after all (409), or a create the writer may not make
            // while it may update what is there (403), or a refusal the
            // usual path would report in its own words: read, then apply
            // as usual, so a wrong guess changes nothing but the cost.
            Err(error) => debug!(object = %what, %error, "create without a read refused"),
        }
    }
    let live = write
        .api
        .get_opt(&write.identity.name)
        .await
        .map_err(|e| classify(&what, write.identity, e))?;
    let live_json = live.as_ref().map(to_json);

    if live.is_none() && write.when_deleted == WhenDeleted::Leave && write.known_uid.is_some() {
        return Ok(outcome(Applied::LeftDeleted, None, vec![]));
    }
    let result = match write.strategy {
        Strategy::ReadOnly | Strategy::ReportOnly { .. } => {
            let applied = if live.is_some() {
                Applied::Observed
            } else {
                Applied::Missing
            };
            outcome(applied, live_json.clone(), vec![])
        }
        Strategy::CreateOnly => match &live {
            Some(_) => outcome(Applied::LeftAsIs, live_json.clone(), vec![]),
            None => {
                let body = with_annotations(
                    write.desired,
                    &[(OBJECT_HASH_ANNOTATION, object_hash(write.desired, &[]))],
                );
                let created = create(write, &body, &what).await?;
                outcome(Applied::Created, Some(to_json(&created)), vec![])
            }
        },
        Strategy::ServerSideApply {
            force,
            manager,
            rules,
        } => {
            let plan = plan_server_side_apply(&SsaInput {
                desired: write.desired,
                live: live_json.as_ref(),
                rules,
                manager,
            });
            let notes = plan.notes.iter().map(|note| note.to_string()).collect();
            ssa_unless_unchanged(
                write,
                live_json.as_ref(),
                &plan.body,
                manager,
                *force,
                notes,
                &what,
            )
            .await?
        }
        Strategy::Update => update(write, live.as_ref(), live_json.as_ref(), &what).await?,
    };
    wait_if_crd(write, &result).await?;
    let mut result = result;
    result.before = live_json;
    Ok(result)
}

/// Waits until a CRD this write created or changed is served, so custom
/// resources later in the same work can be resolved.
async fn wait_if_crd(write: &ManifestWrite<'_>, result: &ApplyOutcome) -> Result<(), ApplyError> {
    if matches!(result.applied, Applied::Created | Applied::Updated)
        && write.identity.group == "apiextensions.k8s.io"
        && write.identity.kind == "CustomResourceDefinition"
    {
        wait_established(write.client, &write.identity.name).await?;
    }
    Ok(())
}

/// The object as Update writes it (the hash and last-applied annotations,
/// ferry's label), or the manifest's size in bytes when it is too large for
/// the last-applied annotation and Update falls back to server-side apply.
fn update_body(write: &ManifestWrite<'_>) -> Result<Value, usize> {
    let last_applied = canonical_json(&without_ferry_annotations(write.desired));
    if last_applied.len() > MAX_LAST_APPLIED_BYTES {
        return Err(last_applied.len());
    }
    let mut desired = with_annotations(
        write.desired,
        &[
            (OBJECT_HASH_ANNOTATION, object_hash(write.desired, &[])),
            (LAST_APPLIED_ANNOTATION, last_applied),
        ],
    );
    // Not in the last-applied record: the label is ferry's bookkeeping, and
    // the three-way merge keeps setting it because `desired` has it.
    add_managed_label(&mut desired);
    Ok(desired)
}

async fn ssa_unless_unchanged(
    write: &ManifestWrite<'_>,
    live: Option<&Value>,
    body: &Value,
    manager: &str,
    force: bool,
    notes: Vec<String>,
    what: &str,
) -> Result<ApplyOutcome, ApplyError> {
    // A create carries this work's mark; a later apply keeps every mark this
    // manager's earlier applies own, or the API server would remove them.
    let references = marks(write, apply_references(live, write.owner, manager));
    let mut body = body.clone();
    add_references(&mut body, &references);
    add_managed_label(&mut body);
    if let Some(live) = live
        && is_subset(&body, live, write.schema)
    {
        return Ok(outcome(Applied::Unchanged, Some(live.clone()), notes));
    }
    let mut params = PatchParams::apply(manager);
    params.force = force;
    let pinned = references.pin.is_some();
    let written = write
        .api
        .patch(&write.identity.name, &params, &Patch::Apply(&body))
        .await
        .map_err(|e| match e {
            kube::Error::Api(status) if pinned && status.code == 409 && is_stale(&status) => {
                ApplyError::Stale {
                    what: what.to_string(),
                }
            }
            other => classify_apply(what, write.identity, other),
        })?;
    let applied = if live.is_some() {
        Applied::Updated
    } else {
        Applied::Created
    };
    Ok(outcome(applied, Some(to_json(&written)), notes))
}

async fn update(
    write: &ManifestWrite<'_>,
    live: Option<&DynamicObject>,
    live_json: Option<&Value>,
    what: &str,
) -> Result<ApplyOutcome, ApplyError> {
    let desired = match update_body(write) {
        Ok(desired) => desired,
        Err(size) => {
            let note = format!(
                "the manifest is {} KiB, too large for the last-applied annotation; applied with server-side apply instead",
                size / 1024
            );
            let body = with_annotations(
                write.desired,
                &[(OBJECT_HASH_ANNOTATION, object_hash(write.desired, &[]))],
            );
            return ssa_unless_unchanged(
                write,
                live_json,
                &body,
                AGENT_FIELD_MANAGER,
                false,
                vec![note],
                what,
            )
            .await;
        }
    };
    let (Some(live), Some(live_json)) = (live, live_json) else {
        let created = create(write, &desired, what).await?;
        return Ok(outcome(Applied::Created, Some(to_json(&created)), vec![]));
    };
    let previous: Option<Value> = live
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(LAST_APPLIED_ANNOTATION))
        .and_then(|text| serde_json::from_str(text).ok());
    let merged = three_way_merge(previous.as_ref(), &desired, live_json, write.schema);
    let Some(mut patch) = merge_patch(live_json, &merged) else {
        return Ok(outcome(Applied::Unchanged, Some(live_json.clone()), vec![]));
    };
    // Optimistic concurrency: the patch was computed from this version.
    if let Some(version) = &live.metadata.resource_version
        && let Some(object) = patch.as_object_mut()
    {
        let metadata = object
            .entry("metadata")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Some(metadata) = metadata.as_object_mut() {
            metadata.insert("resourceVersion".into(), Value::String(version.clone()));
        }
    }
    let params = PatchParams {
        field_manager: Some(AGENT_FIELD_MANAGER.into()),
        ..Default::default()
    };
    let written = write
        .api
        .patch(&write.identity.name, &params, &Patch::Merge(&patch))
        .await
        .map_err(|e| match e {
            kube::Error::Api(status) if status.code == 409 => ApplyError::Stale {
                what: what.to_string(),
            },
            other => classify(what, write.identity, other),
        })?;
    Ok(outcome(Applied::Updated, Some(to_json(&written)), vec![]))
}

/// Creates the object with this work's owner reference in the body.
async fn create(
    write: &ManifestWrite<'_>,
    body: &Value,
    what: &str,
) -> Result<DynamicObject, ApplyError> {
    let mut body = body.clone();
    add_references(
        &mut body,
        &marks(write, apply_references(None, write.owner, "")),
    );
    add_managed_label(&mut body);
    let object: DynamicObject = serde_json::from_value(body).map_err(|e| ApplyError::Rejected {
        what: what.to_string(),
        message: format!("not a Kubernetes object: {e}"),
    })?;
    // Named, so managedFields attribute the create to ferry rather than to
    // whatever the API server derives from the user agent.
    let params = PostParams {
        field_manager: Some(AGENT_FIELD_MANAGER.into()),
        ..Default::default()
    };
    write
        .api
        .create(&params, &object)
        .await
        .map_err(|e| match e {
            kube::Error::Api(status) if status.code == 409 => ApplyError::Stale {
                what: what.to_string(),
            },
            other => classify(what, write.identity, other),
        })
}

/// The references a write carries: without this work's mark when the work
/// orphans the object.
fn marks(write: &ManifestWrite<'_>, references: ApplyReferences) -> ApplyReferences {
    if write.marked {
        references
    } else {
        without_owner(references, write.owner)
    }
}

/// Whether a 409 says the object moved past a pinned resourceVersion (rather
/// than a field conflict with another manager).
fn is_stale(status: &kube::core::Status) -> bool {
    status.message.contains("the object has been modified")
}

fn classify_apply(what: &str, identity: &ManifestIdentity, error: kube::Error) -> ApplyError {
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

fn classify(what: &str, identity: &ManifestIdentity, error: kube::Error) -> ApplyError {
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

fn outcome(applied: Applied, object: Option<Value>, notes: Vec<String>) -> ApplyOutcome {
    ApplyOutcome {
        applied,
        object,
        notes,
        before: None,
    }
}

impl ApplyOutcome {
    /// UID of the object on the spoke afterwards, if it exists.
    pub fn uid(&self) -> Option<&str> {
        self.object.as_ref()?["metadata"]["uid"].as_str()
    }
}

fn to_json(object: &DynamicObject) -> Value {
    serde_json::to_value(object).unwrap_or(Value::Null)
}

// The user's manifest as last-applied records it: without ferry's bookkeeping.
fn without_ferry_annotations(manifest: &Value) -> Value {
    let mut out = manifest.clone();
    strip_ferry_annotations(&mut out);
    out
}

fn with_annotations(manifest: &Value, annotations: &[(&str, String)]) -> Value {
    let mut out = manifest.clone();
    set_annotations(&mut out, annotations);
    out
}

async fn wait_established(client: &Client, name: &str) -> Result<(), ApplyError> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let established = await_condition(crds, name, conditions::is_crd_established());
    match tokio::time::timeout(CRD_ESTABLISH_TIMEOUT, established).await {
        Ok(Ok(_)) => Ok(()),
        _ => Err(ApplyError::CrdNotEstablished {
            name: name.to_string(),
        }),
    }
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
