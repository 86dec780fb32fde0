//! `AppliedManifestWork` (spoke, cluster-scoped): the agent's durable record
//! of what it applied for which hub work, with the UID of every object. It
//! outlives agent restarts, so a restarted agent still knows what to delete,
//! what to garbage-collect, and which objects `whenDeleted: Leave` saw. Its
//! UID is what ferry's owner references on applied objects point at.

use std::collections::HashMap;
use std::time::Duration;

use ferry_proto::v1;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, PropagationPolicy};
use kube::{Client, CustomResource, CustomResourceExt, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::write_identity::ExecutorAccount;

use ferry_semantics::contract::{AGENT_FIELD_MANAGER, KUBE_TIME_FORMAT};

use ferry_semantics::hash::{OBJECT_HASH_ANNOTATION, object_hash};
use ferry_semantics::release::Owner;

/// Annotation an AppliedManifestWork is created with: the objects its first
/// pass is about to write, as a JSON list of intents (empty UIDs). It stands
/// for `status.appliedResources` until the agent first writes that, so a
/// new record names every object its pass may create from the moment it
/// exists, without a status write of its own before the first object (the
/// API server drops `status` from a create).
pub const CREATION_INTENTS_ANNOTATION: &str = "work.ferry.dev/creation-intents";

/// The largest creation-intents annotation written. A work with more
/// intents records them with a status write, as an existing record does;
/// the API server allows 256 KiB of annotations in all.
const MAX_CREATION_INTENTS_BYTES: usize = 64 * 1024;

/// Which hub work an AppliedManifestWork records, and how its objects are to
/// be released.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "work.ferry.dev",
    version = "v1alpha1",
    kind = "AppliedManifestWork",
    doc = "What the ferry agent applied on this spoke cluster for one hub ManifestWork: the objects it created, with their UIDs, so that they are garbage-collected or orphaned when the work goes away.",
    status = "AppliedManifestWorkStatus",
    category = "ferry",
    printcolumn = r#"{"name":"Work","type":"string","jsonPath":".spec.workName"}"#,
    printcolumn = r#"{"name":"Cluster","type":"string","jsonPath":".spec.clusterName"}"#,
    printcolumn = r#"{"name":"Evicting since","type":"string","jsonPath":".status.evictionStartTime"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct AppliedManifestWorkSpec {
    /// The cluster name the agent serves (the work's namespace on the hub).
    pub cluster_name: String,
    /// Namespace of the ManifestWork on the hub.
    pub work_namespace: String,
    /// Name of the ManifestWork on the hub.
    pub work_name: String,
    /// UID of the ManifestWork on the hub; also this object's name.
    pub work_uid: String,
    /// The work's deleteOption when it was last applied, so a deletion after
    /// a restart, or an eviction, still honours it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_option: Option<RecordedDeleteOption>,
    /// The ServiceAccount the work's objects are written as, when the agent
    /// writes as executors: its deletion after the work is gone is done as
    /// the same account.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executor: Option<RecordedExecutor>,
    /// The work's owner as the hub stamped it (the team's namespace on the
    /// hub): its deletions spend that owner's share of the deletion brake.
    /// Absent in records of agents before owners were recorded, and for
    /// works the hub sent no owner for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

/// The executor a work names, as recorded on the spoke.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecordedExecutor {
    /// Namespace of the ServiceAccount.
    pub service_account_namespace: String,
    /// Name of the ServiceAccount.
    pub service_account_name: String,
}

impl RecordedExecutor {
    /// The record of `account`.
    pub fn from_account(account: &ExecutorAccount) -> Self {
        Self {
            service_account_namespace: account.namespace.clone(),
            service_account_name: account.name.clone(),
        }
    }

    /// The account recorded.
    pub fn account(&self) -> ExecutorAccount {
        ExecutorAccount {
            namespace: self.service_account_namespace.clone(),
            name: self.service_account_name.clone(),
        }
    }
}

/// A work's deleteOption as recorded on the spoke.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecordedDeleteOption {
    /// `Foreground`, `Orphan` or `SelectivelyOrphan`.
    #[serde(default)]
    pub propagation_policy: String,
    /// Objects left behind under `SelectivelyOrphan`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub orphaning_rules: Vec<RecordedResource>,
}

/// An object named by group, resource, namespace and name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct RecordedResource {
    /// API group; empty for the core group.
    #[serde(default)]
    pub group: String,
    /// Resource (plural).
    pub resource: String,
    /// Namespace; empty for cluster-scoped objects.
    #[serde(default)]
    pub namespace: String,
    /// Name.
    pub name: String,
}

/// What the agent applied and whether the work is being evicted.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppliedManifestWorkStatus {
    /// Every object the agent applied for this work and still holds.
    /// Absent until the agent first writes it; until then the record's
    /// annotation work.ferry.dev/creation-intents stands for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_resources: Option<Vec<AppliedResource>>,
    /// When the hub was first found not to have this work; the objects are
    /// released once the agent's eviction grace period has passed since then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_start_time: Option<String>,
}

/// One object applied for a work.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct AppliedResource {
    /// API group; empty for the core group.
    #[serde(default)]
    pub group: String,
    /// API version it was applied with.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Resource (plural).
    pub resource: String,
    /// Namespace; empty for cluster-scoped objects.
    #[serde(default)]
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID of the object ferry applied: an object recreated by someone else
    /// under the same name has another UID and is never deleted by ferry.
    /// Empty for an intent, recorded before the object is created: released
    /// only when the live object carries this record's owner reference.
    pub uid: String,
}

impl AppliedResource {
    /// Whether `other` names the same object slot (the version may differ:
    /// a manifest moved from v1beta1 to v1 is the same object).
    pub fn same_object(&self, other: &AppliedResource) -> bool {
        self.group == other.group
            && self.resource == other.resource
            && self.namespace == other.namespace
            && self.name == other.name
    }

    /// `apiVersion` the object was applied with.
    pub fn api_version(&self) -> String {
        ferry_semantics::identity::api_version_of(&self.group, &self.version)
    }

    /// Short human form, e.g. `ConfigMap default/a`.
    pub fn describe(&self) -> String {
        if self.namespace.is_empty() {
            format!("{} {}", self.kind, self.name)
        } else {
            format!("{} {}/{}", self.kind, self.namespace, self.name)
        }
    }
}

impl RecordedDeleteOption {
    /// The recorded form of a wire deleteOption.
    pub fn from_wire(option: &v1::DeleteOption) -> Self {
        Self {
            propagation_policy: option.propagation_policy.clone(),
            orphaning_rules: option
                .orphaning_rules
                .iter()
                .map(|r| RecordedResource {
                    group: r.group.clone(),
                    resource: r.resource.clone(),
                    namespace: r.namespace.clone(),
                    name: r.name.clone(),
                })
                .collect(),
        }
    }

    /// Back to the wire form the release rules read.
    pub fn to_wire(&self) -> v1::DeleteOption {
        v1::DeleteOption {
            propagation_policy: self.propagation_policy.clone(),
            orphaning_rules: self
                .orphaning_rules
                .iter()
                .map(|r| v1::OrphaningRule {
                    group: r.group.clone(),
                    resource: r.resource.clone(),
                    name: r.name.clone(),
                    namespace: r.namespace.clone(),
                })
                .collect(),
        }
    }
}

impl AppliedManifestWork {
    /// The owner ferry's marks on applied objects point at.
    pub fn owner(&self) -> Option<Owner> {
        Some(Owner {
            name: self.name_any(),
            uid: self.uid()?,
        })
    }

    /// The recorded objects: `status.appliedResources` once written, the
    /// intents the record was created with before that. Fails when those
    /// intents are unreadable (someone edited the annotation): the agent
    /// would otherwise lose track of objects it may have created.
    pub fn resources(&self) -> Result<Vec<AppliedResource>, AppliedWorksError> {
        if let Some(listed) = self
            .status
            .as_ref()
            .and_then(|s| s.applied_resources.as_ref())
        {
            return Ok(listed.clone());
        }
        match self.annotations().get(CREATION_INTENTS_ANNOTATION) {
            None => Ok(Vec::new()),
            Some(text) => serde_json::from_str(text).map_err(|e| AppliedWorksError::BadIntents {
                name: self.name_any(),
                detail: e.to_string(),
            }),
        }
    }

    /// The hub work this records.
    pub fn work_ref(&self) -> v1::WorkRef {
        v1::WorkRef {
            uid: self.spec.work_uid.clone(),
            namespace: self.spec.work_namespace.clone(),
            name: self.spec.work_name.clone(),
        }
    }
}

/// Reading or writing the record failed.
#[derive(Debug, thiserror::Error)]
pub enum AppliedWorksError {
    /// The patch bringing a record up to date could not be built (a bug:
    /// it is made from the agent's own types).
    #[error("building the patch of AppliedManifestWork {name}: {detail}")]
    Patch {
        /// The record.
        name: String,
        /// What went wrong.
        detail: String,
    },
    /// The API server refused a request on an AppliedManifestWork.
    #[error("{action} AppliedManifestWork {name}: {source}")]
    Request {
        /// What was being done.
        action: &'static str,
        /// Object name.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The CRD could not be installed on the spoke.
    #[error("installing the AppliedManifestWork CRD on the spoke: {0}")]
    InstallCrd(#[source] kube::Error),
    /// The CRD was installed but not served in time.
    #[error("the AppliedManifestWork CRD was not established within {0:?}")]
    NotEstablished(Duration),
    /// The intents a record was created with cannot be read.
    #[error(
        "AppliedManifestWork {name} has an unreadable annotation {annotation}: {detail}; it lists the objects the record's first pass may have created: restore it, or remove it once those objects are accounted for",
        annotation = CREATION_INTENTS_ANNOTATION
    )]
    BadIntents {
        /// Object name.
        name: String,
        /// The parse error.
        detail: String,
    },
    /// A stored eviction start time is not a timestamp.
    #[error("AppliedManifestWork {name} has an unreadable evictionStartTime {value:?}")]
    BadTime {
        /// Object name.
        name: String,
        /// The stored text.
        value: String,
    },
}

/// The AppliedManifestWorks of one cluster on its spoke.
#[derive(Clone)]
pub struct AppliedWorks {
    api: Api<AppliedManifestWork>,
    cluster: String,
}

impl AppliedWorks {
    /// The records of `cluster` through `client`.
    pub fn new(client: Client, cluster: &str) -> Self {
        Self {
            api: Api::all(client),
            cluster: cluster.to_string(),
        }
    }

    fn request(action: &'static str, name: &str) -> impl FnOnce(kube::Error) -> AppliedWorksError {
        let name = name.to_string();
        move |source| AppliedWorksError::Request {
            action,
            name,
            source,
        }
    }

    /// Server-side applies the CRD and waits until the spoke serves it.
    /// An agent restart sends nothing when the CRD is already the one this
    /// agent would write: its hash is kept in an annotation.
    pub async fn install_crd(client: &Client) -> Result<(), AppliedWorksError> {
        use kube::runtime::wait::{await_condition, conditions};
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        let mut crd = AppliedManifestWork::crd();
        let name = crd.metadata.name.clone().unwrap_or_default();
        let hash = object_hash(&serde_json::to_value(&crd).unwrap_or_default(), &[]);
        crd.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(OBJECT_HASH_ANNOTATION.into(), hash.clone());
        let live = crds
            .get_opt(&name)
            .await
            .map_err(AppliedWorksError::InstallCrd)?;
        let current = live
            .as_ref()
            .and_then(|l| l.annotations().get(OBJECT_HASH_ANNOTATION))
            .is_some_and(|h| *h == hash);
        if !current {
            let params = PatchParams::apply(AGENT_FIELD_MANAGER).force();
            crds.patch(&name, &params, &Patch::Apply(&crd))
                .await
                .map_err(AppliedWorksError::InstallCrd)?;
        }
        let limit = Duration::from_secs(30);
        // Established comes a moment before the API server routes requests
        // for the new resource; the first record write would get a 404.
        let records: Api<AppliedManifestWork> = Api::all(client.clone());
        let served = async {
            await_condition(crds, &name, conditions::is_crd_established()).await?;
            while records.list(&ListParams::default().limit(1)).await.is_err() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            // The API server's first write of a resource it just started
            // serving takes about two seconds; pay it here, with a dry run,
            // not on the first work. An unchanged CRD sends nothing at all.
            if !current {
                let probe =
                    AppliedManifestWork::new("ferry-warm-up", AppliedManifestWorkSpec::default());
                let dry_run = PostParams {
                    dry_run: true,
                    ..Default::default()
                };
                let _ = records.create(&dry_run, &probe).await;
            }
            Ok::<(), kube::runtime::wait::Error>(())
        };
        match tokio::time::timeout(limit, served).await {
            Ok(Ok(())) => Ok(()),
            _ => Err(AppliedWorksError::NotEstablished(limit)),
        }
    }

    /// Every record of this cluster.
    pub async fn list(&self) -> Result<Vec<AppliedManifestWork>, AppliedWorksError> {
        let all = self
            .api
            .list(&Default::default())
            .await
            .map_err(Self::request("listing", "*"))?;
        Ok(all
            .items
            .into_iter()
            .filter(|a| a.spec.cluster_name == self.cluster)
            .collect())
    }

    /// The record of the work with `uid`, if any.
    pub async fn get(&self, uid: &str) -> Result<Option<AppliedManifestWork>, AppliedWorksError> {
        self.api
            .get_opt(uid)
            .await
            .map_err(Self::request("reading", uid))
    }

    /// What the record of `work` (owned by `owner`, with `delete_option`,
    /// written as `executor`) holds: the spec [`AppliedWorks::ensure`]
    /// brings a record to.
    pub fn spec_for(
        &self,
        work: &v1::WorkRef,
        owner: &str,
        delete_option: Option<&v1::DeleteOption>,
        executor: Option<&ExecutorAccount>,
    ) -> AppliedManifestWorkSpec {
        AppliedManifestWorkSpec {
            cluster_name: self.cluster.clone(),
            work_namespace: work.namespace.clone(),
            work_name: work.name.clone(),
            work_uid: work.uid.clone(),
            delete_option: delete_option.map(RecordedDeleteOption::from_wire),
            executor: executor.map(RecordedExecutor::from_account),
            owner: (!owner.is_empty()).then(|| owner.to_string()),
        }
    }

    /// The record of the work `spec` describes (see
    /// [`AppliedWorks::spec_for`]), created if missing, with its spec
    /// (owner, deleteOption, executor) and the work's `labels` (as OCM
    /// copies them) brought up to date and any
    /// eviction called off (the hub has the work). A record it creates
    /// carries `intents` (the objects the pass is about to write) in its
    /// [`CREATION_INTENTS_ANNOTATION`] when they fit; the caller records
    /// whatever [`AppliedManifestWork::resources`] then lacks. With
    /// `likely_new` (no record was found for the work when the agent
    /// started, and this run has not created one) the create is tried
    /// without reading first; a record that exists after all is read then.
    /// Also says whether this call created the record. Fails when the API
    /// server refuses a read or write.
    pub async fn ensure(
        &self,
        spec: AppliedManifestWorkSpec,
        labels: &HashMap<String, String>,
        intents: &[AppliedResource],
        likely_new: bool,
    ) -> Result<(AppliedManifestWork, bool), AppliedWorksError> {
        let uid = spec.work_uid.clone();
        let existing = if likely_new {
            None
        } else {
            self.get(&uid).await?
        };
        let mut created = false;
        let mut record = match existing {
            Some(existing) => existing,
            None => {
                let mut fresh = AppliedManifestWork::new(&uid, spec.clone());
                fresh.metadata.labels =
                    Some(labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect());
                if let Some(text) = creation_intents(intents) {
                    fresh.metadata.annotations =
                        Some([(CREATION_INTENTS_ANNOTATION.to_string(), text)].into());
                }
                match self.api.create(&PostParams::default(), &fresh).await {
                    Ok(record) => {
                        created = true;
                        record
                    }
                    // Another pass created it first, or the hint was
                    // wrong; use the record there is.
                    Err(kube::Error::Api(status)) if status.code == 409 => self
                        .api
                        .get(&uid)
                        .await
                        .map_err(Self::request("reading", &uid))?,
                    Err(source) => return Err(Self::request("creating", &uid)(source)),
                }
            }
        };
        if let Some(ops) = record_patch(&record, &spec, labels) {
            let patch: json_patch::Patch =
                serde_json::from_value(ops).map_err(|e| AppliedWorksError::Patch {
                    name: uid.clone(),
                    detail: e.to_string(),
                })?;
            record = self
                .api
                .patch(&uid, &PatchParams::default(), &Patch::Json::<()>(patch))
                .await
                .map_err(Self::request("updating", &uid))?;
        }
        Ok((self.call_off_eviction(record).await?, created))
    }

    /// Clears `record`'s eviction start time, if it has one, and returns the
    /// record as it is afterwards: the hub has the work after all, or
    /// eviction is off. Fails when the API server refuses the write.
    pub async fn call_off_eviction(
        &self,
        record: AppliedManifestWork,
    ) -> Result<AppliedManifestWork, AppliedWorksError> {
        if record
            .status
            .as_ref()
            .is_none_or(|s| s.eviction_start_time.is_none())
        {
            return Ok(record);
        }
        let name = record.name_any();
        let patch = json!({ "status": { "evictionStartTime": null } });
        self.api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map_err(Self::request("calling off the eviction of", &name))
    }

    /// Replaces the list of applied objects.
    pub async fn set_resources(
        &self,
        name: &str,
        resources: &[AppliedResource],
    ) -> Result<(), AppliedWorksError> {
        let patch = json!({ "status": { "appliedResources": resources } });
        self.api
            .patch_status(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map_err(Self::request("recording objects in", name))?;
        Ok(())
    }

    /// When the eviction of `record` started, starting it now if it had not.
    pub async fn start_eviction(
        &self,
        record: &AppliedManifestWork,
    ) -> Result<Timestamp, AppliedWorksError> {
        let name = record.name_any();
        if let Some(text) = record
            .status
            .as_ref()
            .and_then(|s| s.eviction_start_time.clone())
        {
            return text
                .parse()
                .map_err(|_| AppliedWorksError::BadTime { name, value: text });
        }
        let now = Timestamp::now();
        let patch = json!({ "status": { "evictionStartTime": now.strftime(KUBE_TIME_FORMAT).to_string() } });
        self.api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map_err(Self::request("starting the eviction of", &name))?;
        Ok(now)
    }

    /// Deletes the record once its objects are released. Orphan propagation
    /// keeps the cluster's garbage collector from deleting anything that
    /// still points at it.
    pub async fn remove(&self, name: &str) -> Result<(), AppliedWorksError> {
        let params = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Orphan),
            ..Default::default()
        };
        match self.api.delete(name, &params).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(source) => Err(Self::request("deleting", name)(source)),
        }
    }
}

/// The spoke CRDs the agent installs, with the file each is checked in as
/// under `deploy/spoke-crds/`.
pub fn spoke_crds() -> Vec<(&'static str, CustomResourceDefinition)> {
    vec![("appliedmanifestworks.yaml", AppliedManifestWork::crd())]
}

/// Renders one spoke CRD as the YAML document that is checked in.
///
/// Fails only if serde_yaml cannot represent the CRD, which would be a bug.
pub fn render_spoke_crd(crd: &CustomResourceDefinition) -> Result<String, serde_yaml::Error> {
    Ok(format!(
        "# Generated from the Rust types by `ferry-agent crds --out deploy/spoke-crds`; do not edit.\n{}",
        serde_yaml::to_string(crd)?
    ))
}

/// The creation-intents annotation's value for `intents`: none when there
/// are none or they do not fit in [`MAX_CREATION_INTENTS_BYTES`].
fn creation_intents(intents: &[AppliedResource]) -> Option<String> {
    if intents.is_empty() {
        return None;
    }
    serde_json::to_string(intents)
        .ok()
        .filter(|text| text.len() <= MAX_CREATION_INTENTS_BYTES)
}

/// The JSON Patch that brings `record` to `spec` and to the work's
/// `labels`, replacing each wholesale (so a deleteOption or orphaning rule,
/// or a label, the work dropped goes too); None when both already match.
fn record_patch(
    record: &AppliedManifestWork,
    spec: &AppliedManifestWorkSpec,
    labels: &HashMap<String, String>,
) -> Option<serde_json::Value> {
    let mut ops = Vec::new();
    if record.spec != *spec {
        ops.push(json!({"op": "replace", "path": "/spec", "value": spec}));
    }
    let current = record.metadata.labels.clone().unwrap_or_default();
    let same =
        current.len() == labels.len() && current.iter().all(|(k, v)| labels.get(k) == Some(v));
    if !same {
        // `add` sets the member whether or not the record has labels yet.
        ops.push(json!({"op": "add", "path": "/metadata/labels", "value": labels}));
    }
    (!ops.is_empty()).then_some(serde_json::Value::Array(ops))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Fails when the Rust types change without regenerating deploy/spoke-crds.
    #[test]
    fn checked_in_spoke_crds_match_the_rust_types() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/spoke-crds");
        for (file, crd) in spoke_crds() {
            let expected = render_spoke_crd(&crd).expect("render");
            let actual = std::fs::read_to_string(dir.join(file))
                .unwrap_or_else(|e| panic!("read deploy/spoke-crds/{file}: {e}"));
            assert!(
                expected == actual,
                "deploy/spoke-crds/{file} is stale: run `cargo run -p ferry-agent -- crds --out deploy/spoke-crds`"
            );
        }
    }

    #[test]
    fn the_record_takes_the_works_spec_and_labels_wholesale_and_matching_ones_send_nothing() {
        let spec = |rules: usize| AppliedManifestWorkSpec {
            work_uid: "u".into(),
            delete_option: (rules > 0).then(|| RecordedDeleteOption {
                propagation_policy: "SelectivelyOrphan".into(),
                orphaning_rules: vec![RecordedResource::default(); rules],
            }),
            ..Default::default()
        };
        let mut record = AppliedManifestWork::new("u", spec(1));
        record.metadata.labels = Some([("old".to_string(), "x".to_string())].into());
        let labels: HashMap<String, String> = [("app".to_string(), "web".to_string())].into();
        // The orphaning rule and the old label go: both are replaced whole.
        assert_eq!(
            record_patch(&record, &spec(0), &labels),
            Some(json!([
                {"op": "replace", "path": "/spec", "value": spec(0)},
                {"op": "add", "path": "/metadata/labels", "value": {"app": "web"}},
            ]))
        );
        record.metadata.labels = Some([("app".to_string(), "web".to_string())].into());
        assert_eq!(record_patch(&record, &spec(1), &labels), None);
    }

    fn intent(name: &str) -> AppliedResource {
        AppliedResource {
            version: "v1".into(),
            kind: "ConfigMap".into(),
            resource: "configmaps".into(),
            namespace: "ns".into(),
            name: name.into(),
            ..Default::default()
        }
    }

    fn record_with(annotation: Option<String>, status: serde_json::Value) -> AppliedManifestWork {
        let mut record = AppliedManifestWork::new("u", AppliedManifestWorkSpec::default());
        record.metadata.annotations =
            annotation.map(|text| [(CREATION_INTENTS_ANNOTATION.to_string(), text)].into());
        record.status = serde_json::from_value(status).expect("status");
        record
    }

    #[test]
    fn the_creation_intents_stand_for_the_list_until_the_list_is_first_written() {
        let intents = vec![intent("a"), intent("b")];
        let text = creation_intents(&intents);
        // A new record: no status at all.
        let fresh = record_with(text.clone(), serde_json::Value::Null);
        assert_eq!(fresh.resources().expect("readable"), intents);
        // An eviction started before the first pass ended writes only its
        // time: the intents still count.
        let evicting = record_with(
            text.clone(),
            json!({"evictionStartTime": "2026-11-29T00:00:00Z"}),
        );
        assert_eq!(evicting.resources().expect("readable"), intents);
        // Once written, the list is the record, even when empty.
        let written = record_with(text.clone(), json!({"appliedResources": []}));
        assert_eq!(written.resources().expect("readable"), vec![]);
        let mut applied = intent("a");
        applied.uid = "1".into();
        let written = record_with(text, json!({"appliedResources": [applied.clone()]}));
        assert_eq!(written.resources().expect("readable"), vec![applied]);
        // A record of an older agent, or with nothing to write.
        assert_eq!(
            record_with(None, serde_json::Value::Null)
                .resources()
                .expect("readable"),
            vec![]
        );
    }

    #[test]
    fn unreadable_creation_intents_are_an_error_naming_the_record_not_an_empty_list() {
        let record = record_with(Some("[{\"name\":".into()), serde_json::Value::Null);
        let error = record.resources().expect_err("unreadable");
        assert!(matches!(error, AppliedWorksError::BadIntents { ref name, .. } if name == "u"));
        assert!(error.to_string().contains(CREATION_INTENTS_ANNOTATION));
    }

    #[test]
    fn intents_that_do_not_fit_the_annotation_are_left_to_a_status_write() {
        assert_eq!(creation_intents(&[]), None);
        let one = creation_intents(&[intent("a")]).expect("fits");
        assert!(one.len() < 200, "{one}");
        let many: Vec<AppliedResource> = (0..MAX_CREATION_INTENTS_BYTES / one.len() + 1)
            .map(|i| intent(&format!("c{i:05}")))
            .collect();
        assert_eq!(creation_intents(&many), None);
        let fitting = &many[..MAX_CREATION_INTENTS_BYTES / one.len() / 2];
        let text = creation_intents(fitting).expect("fits");
        let back: Vec<AppliedResource> = serde_json::from_str(&text).expect("json");
        assert_eq!(back, fitting);
    }

    #[test]
    fn the_record_is_cluster_scoped() {
        let crd = AppliedManifestWork::crd();
        assert_eq!(crd.spec.scope, "Cluster");
    }

    #[test]
    fn the_same_object_ignores_the_version_and_uid() {
        let a = AppliedResource {
            group: "apps".into(),
            version: "v1beta1".into(),
            kind: "Deployment".into(),
            resource: "deployments".into(),
            namespace: "ns".into(),
            name: "web".into(),
            uid: "1".into(),
        };
        let b = AppliedResource {
            version: "v1".into(),
            uid: "2".into(),
            ..a.clone()
        };
        assert!(a.same_object(&b));
        assert!(!a.same_object(&AppliedResource {
            name: "api".into(),
            ..b
        }));
    }
}
