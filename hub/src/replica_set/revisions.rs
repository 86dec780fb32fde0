//! A replica set's revisions: each distinct template with its overrides
//! that rolls out is kept as an apps/v1 `ControllerRevision` in the replica
//! set's namespace, named `<replica set>-<revision hash>`, labelled with the
//! replica set, owned by it (Kubernetes' garbage collector deletes them with
//! it), `data` = `{manifestWorkTemplate, overrides}`. As a Deployment does,
//! a revision the spec returns to (an undo) gets the next number again, and
//! the oldest beyond `revisionHistoryLimit` are pruned.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use k8s_openapi::jiff::Timestamp;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};
use tracing::warn;

use super::work_writes::owner_label;
use ferry_api::contract::{REPLICA_SET_LABEL, REVISION_ANNOTATION, REVISION_DIGEST_ANNOTATION};
use ferry_api::manifest_work::ManifestWork;
use ferry_api::replica_set::{ManifestWorkReplicaSet, ManifestWorkReplicaSetSpec, RevisionRef};
use ferry_fleet_semantics::revision::{REVISION_HASH_LEN, revision_digest, revision_hash};

/// Old revisions kept when `revisionHistoryLimit` is not set (OCM's and
/// Deployments' default).
pub const DEFAULT_HISTORY_LIMIT: usize = 10;

/// Longest Kubernetes object name.
const MAX_OBJECT_NAME: usize = 253;

/// One stored revision.
#[derive(Debug, Clone, PartialEq)]
pub struct Revision {
    /// Its number and hash.
    pub reference: RevisionRef,
    /// The template and overrides it holds, as a replica set spec (the
    /// other fields are the replica set's own): rendered per cluster by
    /// the same path as the current spec.
    pub spec: ManifestWorkReplicaSetSpec,
    /// When its ControllerRevision was created.
    pub created: Option<Timestamp>,
}

/// The revision hash of `spec`'s template and overrides. Never fails: a
/// spec that does not serialise (it always does) hashes as `null`.
pub fn spec_revision_hash(spec: &ManifestWorkReplicaSetSpec) -> String {
    let (template, overrides) = revision_data(spec);
    revision_hash(&template, &overrides)
}

/// The revision digest (the whole sha256, which approvals name) of
/// `spec`'s template and overrides; [`spec_revision_hash`] is its prefix.
pub fn spec_revision_digest(spec: &ManifestWorkReplicaSetSpec) -> String {
    let (template, overrides) = revision_data(spec);
    revision_digest(&template, &overrides)
}

/// The template and the overrides (`[]` when none) of `spec`, as JSON.
fn revision_data(spec: &ManifestWorkReplicaSetSpec) -> (Value, Value) {
    (
        serde_json::to_value(&spec.manifest_work_template).unwrap_or(Value::Null),
        serde_json::to_value(&spec.overrides).unwrap_or_else(|_| json!([])),
    )
}

/// The ControllerRevision name of `rs`'s revision `hash`: the replica set's
/// name cut so the whole stays a valid object name.
pub fn revision_name(rs_name: &str, hash: &str) -> String {
    let room = MAX_OBJECT_NAME - hash.len() - 1;
    let prefix: String = rs_name.chars().take(room).collect();
    format!("{}-{hash}", prefix.trim_end_matches(['-', '.']))
}

/// `revision`'s template and overrides put in `base` (the replica set's
/// spec), or None when its data is not a template and overrides.
pub fn revision_spec(
    revision: &ControllerRevision,
    base: &ManifestWorkReplicaSetSpec,
) -> Option<ManifestWorkReplicaSetSpec> {
    let data = &revision.data.as_ref()?.0;
    let mut spec = base.clone();
    spec.manifest_work_template =
        serde_json::from_value(data.get("manifestWorkTemplate")?.clone()).ok()?;
    spec.overrides = match data.get("overrides") {
        None | Some(Value::Null) => Vec::new(),
        Some(o) => serde_json::from_value(o.clone()).ok()?,
    };
    Some(spec)
}

/// The revision hash of what `revision` stores: its template and
/// overrides exactly as stored (raw JSON, so what this build's types would
/// drop or add does not change it), or None when its data is not a
/// template and overrides.
pub fn stored_hash(revision: &ControllerRevision) -> Option<String> {
    let mut digest = stored_digest(revision)?;
    digest.truncate(REVISION_HASH_LEN);
    Some(digest)
}

/// The revision digest of what `revision` stores (see [`stored_hash`]), or
/// None when its data is not a template and overrides.
fn stored_digest(revision: &ControllerRevision) -> Option<String> {
    let data = &revision.data.as_ref()?.0;
    let template = data.get("manifestWorkTemplate")?;
    let overrides = match data.get("overrides") {
        None | Some(Value::Null) => json!([]),
        Some(o) => o.clone(),
    };
    Some(revision_digest(template, &overrides))
}

/// Why the stored `revision` named for `spec`'s revision is not that
/// revision, or None when it is: its data's digest is another (the two
/// templates' 40-bit hashes clash; whoever may create ControllerRevisions
/// can make one that way before the spec comes to it). Such a revision is
/// never renumbered, rendered or rolled back to.
pub fn clash(revision: &ControllerRevision, spec: &ManifestWorkReplicaSetSpec) -> Option<String> {
    let wanted = spec_revision_digest(spec);
    match stored_digest(revision) {
        Some(stored) if stored == wanted => None,
        _ => Some(format!(
            "ControllerRevision {} is refused: its name is the current revision's but its data is another template (a hash clash), so the current revision is not stored and cannot be rolled back to",
            revision.name_any()
        )),
    }
}

/// Why a stored ControllerRevision of `rs` is not used, or None when its
/// data hashes to the hash its name ends with. Its ownerReference alone
/// proves nothing: whoever may create ControllerRevisions in the namespace
/// can write one that names the replica set, and its data is what a
/// rollback would write to every cluster.
pub fn refusal(revision: &ControllerRevision) -> Option<String> {
    let named = reference(revision).hash;
    match stored_hash(revision) {
        Some(stored) if stored == named => None,
        Some(stored) => Some(format!(
            "ControllerRevision {} is refused: its data hashes to {stored}, not to {named} as its name says",
            revision.name_any()
        )),
        None => Some(format!(
            "ControllerRevision {} is refused: its data is not a manifestWorkTemplate and overrides",
            revision.name_any()
        )),
    }
}

/// Whether `work` holds the revision with hash `hash` and whole digest
/// `digest`: its revision annotation is the hash and, when it carries the
/// digest annotation (every work this hub writes does), that is the
/// digest. The hash alone is 40 bits, which a birthday search matches in
/// seconds; a work written before digests were annotated, or a revision a
/// status of an older hub names without its digest (`None`), is judged by
/// the hash.
pub fn holds_revision(work: &ManifestWork, hash: &str, digest: Option<&str>) -> bool {
    let annotations = work.annotations();
    annotations.get(REVISION_ANNOTATION).map(String::as_str) == Some(hash)
        && annotations
            .get(REVISION_DIGEST_ANNOTATION)
            .zip(digest)
            .is_none_or(|(held, wanted)| held == wanted)
}

/// The revision hashes of `rs` never pruned: those its `existing` works
/// hold, its stable revision and the one a rollback went back to (both
/// from its status).
pub fn protected_hashes(
    rs: &ManifestWorkReplicaSet,
    existing: &BTreeMap<String, Arc<ManifestWork>>,
) -> BTreeSet<String> {
    let mut protected: BTreeSet<String> = existing
        .values()
        .filter_map(|w| w.annotations().get(REVISION_ANNOTATION).cloned())
        .collect();
    let rollout = rs.status.as_ref().and_then(|s| s.rollout.as_ref());
    protected.extend(
        rollout
            .and_then(|r| r.stable_revision.as_ref())
            .map(|s| s.hash.clone()),
    );
    protected.extend(
        rollout
            .and_then(|r| r.rollback.as_ref())
            .map(|r| r.to.hash.clone()),
    );
    protected
}

/// The revision `spec` asks for, numbered from the stored `revisions` (0
/// when it is not stored yet).
pub fn current_revision(spec: &ManifestWorkReplicaSetSpec, revisions: &[Revision]) -> RevisionRef {
    let digest = spec_revision_digest(spec);
    let wanted = RevisionRef {
        number: 0,
        hash: digest[..REVISION_HASH_LEN].to_string(),
        digest: Some(digest),
    };
    revisions
        .iter()
        .find(|r| r.reference.is(&wanted))
        .map(|r| r.reference.clone())
        .unwrap_or(wanted)
}

/// Which old revisions to delete: with `old` sorted oldest first (every
/// revision but the current), the oldest beyond `limit`, skipping the
/// `protected` ones (the stable revision, those a work holds), which still
/// count against the limit, as a Deployment counts its old replica sets.
pub fn to_prune<'a>(
    old: &'a [RevisionRef],
    limit: usize,
    protected: &BTreeSet<String>,
) -> Vec<&'a RevisionRef> {
    let excess = old.len().saturating_sub(limit);
    old.iter()
        .take(excess)
        .filter(|r| !protected.contains(&r.hash))
        .collect()
}

/// The revisions of a replica set once its [`RevisionPlan`] is carried out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StoredRevisions {
    /// The revisions whose data hashes to their names, oldest (lowest
    /// number) first.
    pub kept: Vec<Revision>,
    /// Why each of the others is refused ([`refusal`]): never rendered,
    /// never rolled back to, kept for whoever investigates.
    pub refused: Vec<String>,
}

/// What storing the revisions of `rs` takes: the writes, and the
/// revisions as they will stand once made.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RevisionPlan {
    /// The current revision's ControllerRevision, renumbered to this
    /// number (the spec came back to it).
    pub renumber: Option<(String, i64)>,
    /// The current revision's ControllerRevision, to create.
    pub create: Option<ControllerRevision>,
    /// Old revisions to delete, by name.
    pub prune: Vec<String>,
    /// The revisions once the writes are made.
    pub stored: StoredRevisions,
}

/// Plans bringing the revisions of `rs` (among the `cached`
/// ControllerRevisions) up to date with its spec; see
/// `act::revisions::store_revisions`, which carries the plan out. The
/// current template and overrides get a ControllerRevision numbered one
/// past the highest (created, or renumbered when the spec came back to
/// it); old revisions beyond `revisionHistoryLimit` are deleted, never one
/// whose hash is `protected`. A revision whose data does not hash to its
/// name is refused (see [`refusal`]), not kept. Pure.
pub fn plan_revisions(
    rs: &ManifestWorkReplicaSet,
    cached: &[Arc<ControllerRevision>],
    protected: &BTreeSet<String>,
) -> RevisionPlan {
    let namespace = rs.namespace().unwrap_or_default();
    let uid = rs.uid().unwrap_or_default();
    // A revision of an earlier replica set of the same name (being
    // garbage-collected) is not this one's.
    let mut own: Vec<ControllerRevision> = cached
        .iter()
        .filter(|r| r.namespace().as_deref() == Some(namespace.as_str()))
        .filter(|r| r.owner_references().iter().any(|o| o.uid == uid))
        .map(|r| (**r).clone())
        .collect();
    let current = spec_revision_hash(&rs.spec);
    let name = revision_name(&rs.name_any(), &current);
    let highest = own.iter().map(|r| r.revision).max().unwrap_or(0);
    let mut plan = RevisionPlan::default();
    let refused = &mut plan.stored.refused;
    // A revision of that name holding another template is refused before
    // anything is made of it (renumbered, kept, rendered).
    if let Some(at) = own.iter().position(|r| r.name_any() == name)
        && let Some(why) = clash(&own[at], &rs.spec)
    {
        warn!(replica_set = %rs.name_any(), namespace = %namespace, %why, "a stored revision is refused");
        refused.push(why);
        own.remove(at);
    }
    match own.iter_mut().find(|r| r.name_any() == name) {
        Some(existing) if existing.revision < highest => {
            // Back to an older revision: it becomes the newest (its data
            // is immutable, its number is not).
            existing.revision = highest + 1;
            plan.renumber = Some((name, highest + 1));
        }
        Some(_) => {}
        None if !refused.is_empty() => {}
        None => {
            let revision = new_revision(rs, &name, highest + 1);
            own.push(revision.clone());
            plan.create = Some(revision);
        }
    }
    own.sort_by_key(|r| r.revision);
    let limit = rs
        .spec
        .revision_history_limit
        .map_or(DEFAULT_HISTORY_LIMIT, |l| usize::try_from(l).unwrap_or(0));
    let refs: Vec<RevisionRef> = own.iter().map(reference).collect();
    let old: Vec<RevisionRef> = refs.iter().filter(|r| r.hash != current).cloned().collect();
    let doomed: BTreeSet<String> = to_prune(&old, limit, protected)
        .into_iter()
        .map(|r| r.hash.clone())
        .collect();
    for revision in own {
        let hash = reference(&revision).hash;
        if doomed.contains(&hash) {
            plan.prune.push(revision.name_any());
            continue;
        }
        if let Some(why) = refusal(&revision) {
            warn!(replica_set = %rs.name_any(), namespace = %namespace, %why, "a stored revision is refused");
            plan.stored.refused.push(why);
            continue;
        }
        let Some(spec) = revision_spec(&revision, &rs.spec) else {
            continue;
        };
        plan.stored.kept.push(Revision {
            reference: reference(&revision),
            spec,
            created: revision.creation_timestamp().map(|t| t.0),
        });
    }
    plan
}

/// The number and hash of a stored revision; the hash is the end of its
/// name (`<replica set>-<hash>`).
fn reference(revision: &ControllerRevision) -> RevisionRef {
    let name = revision.name_any();
    RevisionRef {
        number: revision.revision,
        hash: name.rsplit('-').next().unwrap_or_default().to_string(),
        digest: stored_digest(revision),
    }
}

/// The ControllerRevision `name` numbered `number` holding `rs`'s current
/// template and overrides.
fn new_revision(rs: &ManifestWorkReplicaSet, name: &str, number: i64) -> ControllerRevision {
    let (template, overrides) = revision_data(&rs.spec);
    ControllerRevision {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: rs.namespace(),
            labels: Some([(REPLICA_SET_LABEL.to_string(), owner_label(rs))].into()),
            owner_references: Some(vec![OwnerReference {
                api_version: ManifestWorkReplicaSet::api_version(&()).into_owned(),
                kind: ManifestWorkReplicaSet::kind(&()).into_owned(),
                name: rs.name_any(),
                uid: rs.uid().unwrap_or_default(),
                controller: Some(true),
                // Blocking would need update on the replica set's
                // finalizers where OwnerReferencesPermissionEnforcement
                // runs; background deletion needs no block.
                block_owner_deletion: None,
            }]),
            ..ObjectMeta::default()
        },
        data: Some(RawExtension(
            json!({"manifestWorkTemplate": template, "overrides": overrides}),
        )),
        revision: number,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(number: i64, hash: &str) -> RevisionRef {
        RevisionRef {
            number,
            hash: hash.into(),
            digest: None,
        }
    }

    fn replica_set(value: &str) -> ManifestWorkReplicaSet {
        serde_json::from_value(json!({
            "apiVersion": "work.ferry.dev/v1alpha1",
            "kind": "ManifestWorkReplicaSet",
            "metadata": {"name": "app", "namespace": "ns", "uid": "u"},
            "spec": {"manifestWorkTemplate": {"workload": {"manifests": [
                {"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"name": "c", "namespace": "d"}, "data": {"v": value}}]}},
                "placementRefs": [{"name": "p"}]},
        }))
        .expect("replica set")
    }

    /// The ControllerRevision `rs` stores for its spec, numbered `number`.
    fn stored(rs: &ManifestWorkReplicaSet, number: i64) -> Arc<ControllerRevision> {
        let hash = spec_revision_hash(&rs.spec);
        Arc::new(new_revision(rs, &revision_name("app", &hash), number))
    }

    #[test]
    fn a_new_spec_plans_its_revision_one_past_the_highest_and_nothing_else() {
        let (one, two) = (replica_set("1"), replica_set("2"));
        let plan = plan_revisions(&two, &[stored(&one, 1)], &BTreeSet::new());
        let created = plan
            .create
            .as_ref()
            .expect("the current revision is created");
        assert_eq!(created.revision, 2);
        assert_eq!(
            created.name_any(),
            revision_name("app", &spec_revision_hash(&two.spec))
        );
        assert_eq!((plan.renumber.clone(), plan.prune.clone()), (None, vec![]));
        let numbers: Vec<i64> = plan
            .stored
            .kept
            .iter()
            .map(|r| r.reference.number)
            .collect();
        assert_eq!(numbers, [1, 2], "kept oldest first, the current last");
        // Once stored, the same spec plans nothing.
        let again = plan_revisions(&two, &[stored(&one, 1), stored(&two, 2)], &BTreeSet::new());
        assert_eq!(
            (again.create, again.renumber, again.prune),
            (None, None, vec![])
        );
    }

    #[test]
    fn a_spec_back_to_an_older_revision_renumbers_it_and_the_oldest_are_pruned() {
        let specs: Vec<ManifestWorkReplicaSet> =
            (1..=12).map(|i| replica_set(&i.to_string())).collect();
        let cached: Vec<_> = specs
            .iter()
            .enumerate()
            .map(|(i, rs)| stored(rs, i as i64 + 1))
            .collect();
        // Back to revision 1 (its name is kept, its number is the newest).
        let back = &specs[0];
        let protected: BTreeSet<String> = [spec_revision_hash(&specs[1].spec)].into();
        let plan = plan_revisions(back, &cached, &protected);
        assert_eq!(
            plan.renumber,
            Some((revision_name("app", &spec_revision_hash(&back.spec)), 13))
        );
        assert!(plan.create.is_none());
        // Eleven old ones against a limit of ten: the oldest (2) is
        // protected, so none goes; the current is never pruned.
        assert_eq!(plan.prune, Vec::<String>::new());
        let unprotected = plan_revisions(back, &cached, &BTreeSet::new());
        assert_eq!(
            unprotected.prune,
            [revision_name("app", &spec_revision_hash(&specs[1].spec))]
        );
        assert_eq!(
            unprotected.stored.kept.last().map(|r| r.reference.number),
            Some(13)
        );
    }

    #[test]
    fn a_revision_the_hub_stored_hashes_to_its_name_and_a_tampered_one_is_refused() {
        let rs = replica_set("1");
        let hash = spec_revision_hash(&rs.spec);
        let stored = new_revision(&rs, &revision_name("app", &hash), 1);
        assert_eq!(stored_hash(&stored).as_deref(), Some(hash.as_str()));
        assert_eq!(refusal(&stored), None);
        // Written by someone else under the same name (and owner): the
        // data of another template.
        let mut forged = new_revision(&replica_set("2"), &revision_name("app", &hash), 1);
        forged.metadata.owner_references = stored.metadata.owner_references.clone();
        let why = refusal(&forged).expect("refused");
        assert!(
            why.contains(&format!("not to {hash} as its name says")),
            "{why}"
        );
        forged.data = Some(RawExtension(json!({"something": "else"})));
        assert!(
            refusal(&forged)
                .expect("refused")
                .contains("is not a manifestWorkTemplate")
        );
        forged.data = None;
        assert!(refusal(&forged).is_some());
    }

    #[test]
    fn a_stored_revision_named_for_the_current_one_but_holding_another_template_clashes() {
        let rs = replica_set("one");
        let hash = spec_revision_hash(&rs.spec);
        let mut revision = new_revision(&rs, &revision_name("app", &hash), 1);
        assert_eq!(clash(&revision, &rs.spec), None);
        assert_eq!(
            reference(&revision).digest,
            Some(spec_revision_digest(&rs.spec))
        );
        // Another template under the current revision's name (what a
        // 40-bit clash makes possible): refused, whatever its hash says.
        revision.data = Some(RawExtension(
            json!({"manifestWorkTemplate": replica_set("two").spec.manifest_work_template, "overrides": []}),
        ));
        let why = clash(&revision, &rs.spec).expect("a clash");
        assert!(why.contains("hash clash"), "{why}");
    }

    #[test]
    fn a_work_holds_a_revision_by_its_whole_digest_when_it_carries_one() {
        let digest = "a".repeat(64);
        let hash = &digest[..10];
        let mut work = ManifestWork::new("app", Default::default());
        work.metadata.annotations = Some(BTreeMap::from([(
            REVISION_ANNOTATION.to_string(),
            hash.to_string(),
        )]));
        // Written before digests were annotated: the hash decides.
        assert!(holds_revision(&work, hash, Some(&digest)));
        let annotations = work.metadata.annotations.get_or_insert_default();
        annotations.insert(REVISION_DIGEST_ANNOTATION.into(), digest.clone());
        assert!(holds_revision(&work, hash, Some(&digest)));
        // Another template sharing the short hash is another revision.
        let colliding = format!("{hash}{}", "b".repeat(54));
        assert!(!holds_revision(&work, hash, Some(&colliding)));
        assert!(!holds_revision(&work, "bbbbbbbbbb", Some(&digest)));
    }

    #[test]
    fn the_oldest_beyond_the_limit_go_except_protected_ones() {
        let old = [r(1, "a"), r(2, "b"), r(3, "c"), r(4, "d")];
        let none = BTreeSet::new();
        let pruned: Vec<i64> = to_prune(&old, 2, &none).iter().map(|r| r.number).collect();
        assert_eq!(pruned, vec![1, 2]);
        let stable = BTreeSet::from(["a".to_string()]);
        let pruned: Vec<i64> = to_prune(&old, 2, &stable)
            .iter()
            .map(|r| r.number)
            .collect();
        assert_eq!(pruned, vec![2]);
        assert!(to_prune(&old, 10, &none).is_empty());
        assert_eq!(to_prune(&old, 0, &none).len(), 4);
    }

    #[test]
    fn a_revision_name_stays_a_valid_object_name() {
        assert_eq!(revision_name("app", "0123456789"), "app-0123456789");
        let long = "x".repeat(300);
        let name = revision_name(&long, "0123456789");
        assert_eq!(name.len(), MAX_OBJECT_NAME);
        assert!(name.ends_with("-0123456789"));
    }

    #[test]
    fn a_revision_gives_back_its_template_and_overrides() {
        let rs: ManifestWorkReplicaSet = serde_json::from_value(json!({
            "apiVersion": "work.ferry.dev/v1alpha1",
            "kind": "ManifestWorkReplicaSet",
            "metadata": {"name": "app", "namespace": "ns", "uid": "u1"},
            "spec": {
                "manifestWorkTemplate": {"workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "cfg", "namespace": "default"}, "data": {"v": "1"}}]}},
                "placementRefs": [{"name": "p"}],
                "overrides": [{"name": "eu", "resourceIdentifier": {"kind": "ConfigMap", "name": "cfg"},
                    "jsonPatch": [{"op": "add", "path": "/data/r", "value": "eu"}]}],
            },
        }))
        .expect("replica set");
        let hash = spec_revision_hash(&rs.spec);
        let stored = new_revision(&rs, &revision_name("app", &hash), 3);
        assert_eq!(stored.revision, 3);
        assert_eq!(
            reference(&stored),
            RevisionRef {
                digest: Some(spec_revision_digest(&rs.spec)),
                ..r(3, &hash)
            }
        );
        let owner = &stored.metadata.owner_references.as_ref().expect("owner")[0];
        assert_eq!((owner.uid.as_str(), owner.controller), ("u1", Some(true)));
        let mut changed = rs.spec.clone();
        changed.manifest_work_template = Default::default();
        changed.overrides.clear();
        let back = revision_spec(&stored, &changed).expect("data");
        assert_eq!(back, rs.spec);
        assert_eq!(spec_revision_hash(&back), hash);
    }
}
