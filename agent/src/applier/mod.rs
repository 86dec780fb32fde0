//! Writes one manifest to the spoke with the strategy its config asks for.
//! Every decision about *what* to write comes from the pure `semantics`
//! module; this folder only reads the live object, sends the request the plan
//! calls for, and turns API errors into reasons a user can act on. When the
//! live object already matches, nothing is sent: steady state costs no writes.
//! An object most likely absent (a new work's) is created without the read.
//!
//! This file is the map: what a write needs, what it returns, and which
//! strategy's file handles it. One file per update strategy
//! (`server_side_apply`, `update`, `create_only`, `read_only`), the error
//! classification in `errors`, and the wait for a written CRD in
//! `crd_establishment`.

mod crd_establishment;
mod create_only;
mod errors;
mod read_only;
mod server_side_apply;
mod update;

use kube::Client;
use kube::api::{Api, DynamicObject};
use kube::discovery::{ApiCapabilities, ApiResource, Scope};
use serde_json::Value;
use tracing::debug;

use ferry_semantics::ManifestIdentity;
use ferry_semantics::apply_outcome::Applied;
use ferry_semantics::hash::set_annotations;
use ferry_semantics::list_items::ListSchema;
use ferry_semantics::release::{ApplyReferences, Owner, without_owner};
use ferry_semantics::strategy::{Strategy, WhenDeleted};

pub use errors::ApplyError;

use crd_establishment::wait_if_crd;
use create_only::{create, create_only};
use errors::classify;
use read_only::observe;
use server_side_apply::server_side_apply;
use update::{update, update_body};

/// Kubernetes caps all annotations of an object at 256 KiB together; past
/// this size the last-applied annotation cannot be stored and the Update
/// strategy falls back to server-side apply.
pub const MAX_LAST_APPLIED_BYTES: usize = 200 * 1024;

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
        Strategy::ReadOnly | Strategy::ReportOnly { .. } => observe(live_json.clone()),
        Strategy::CreateOnly => create_only(write, live_json.clone(), &what).await?,
        Strategy::ServerSideApply {
            force,
            manager,
            rules,
        } => server_side_apply(write, live_json.as_ref(), *force, manager, rules, &what).await?,
        Strategy::Update => update(write, live.as_ref(), live_json.as_ref(), &what).await?,
    };
    wait_if_crd(write, &result).await?;
    let mut result = result;
    result.before = live_json;
    Ok(result)
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

fn with_annotations(manifest: &Value, annotations: &[(&str, String)]) -> Value {
    let mut out = manifest.clone();
    set_annotations(&mut out, annotations);
    out
}
