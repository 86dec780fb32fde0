//! One pass's view of a work's record on the spoke.

use ferry_proto::v1;

use crate::applied_works::{AppliedManifestWork, AppliedResource};
use crate::drift::ManagedObject;
use crate::ownership::ObjectKey;
use ferry_semantics::ManifestIdentity;
use ferry_semantics::ownership::WorkRank;
use ferry_semantics::release::Owner;

/// One pass's view of the work's record on the spoke: the objects recorded
/// before the pass (whose UIDs also let `whenDeleted: Leave` tell "deleted on
/// the spoke" from "never created"), what the record holds now (those plus
/// the intents this pass wrote before creating), and those the pass applied.
pub(super) struct PassRecord {
    pub(super) owner: Owner,
    /// Where the work stands against others listing the same objects.
    pub(super) rank: WorkRank,
    /// The generation this pass applies.
    pub(super) generation: i64,
    /// The pass created the record: no earlier pass wrote an object for
    /// this work (each creates the record first), so its objects are most
    /// likely not on the spoke.
    pub(super) fresh: bool,
    pub(super) previous: Vec<AppliedResource>,
    pub(super) stored: Vec<AppliedResource>,
    pub(super) recorded: Vec<AppliedResource>,
    pub(super) managed: Vec<ManagedObject>,
    pub(super) written: Vec<String>,
    /// The objects this pass claimed for the work (those it may write).
    pub(super) claimed: Vec<ObjectKey>,
}

impl PassRecord {
    /// The pass's view of `record` (`fresh`: this pass created it) for
    /// generation `generation` of `work`. Fails when the record's list of
    /// objects is unreadable or it has no UID to own objects by.
    pub(super) fn open(
        record: &AppliedManifestWork,
        fresh: bool,
        work: &v1::WorkRef,
        generation: i64,
    ) -> Result<Self, String> {
        let resources = record.resources().map_err(|e| e.to_string())?;
        let owner = record
            .owner()
            .ok_or_else(|| "the record has no UID".to_string())?;
        let created = record
            .metadata
            .creation_timestamp
            .as_ref()
            .map_or(i64::MAX, |t| t.0.as_second());
        Ok(PassRecord {
            owner,
            rank: WorkRank {
                created,
                name: format!("{}/{}", work.namespace, work.name),
                uid: work.uid.clone(),
            },
            generation,
            fresh,
            previous: resources.clone(),
            stored: resources,
            recorded: Vec::new(),
            managed: Vec::new(),
            written: Vec::new(),
            claimed: Vec::new(),
        })
    }

    pub(super) fn previous_uid(
        &self,
        group: &str,
        resource: &str,
        namespace: &str,
        name: &str,
    ) -> Option<&str> {
        self.previous
            .iter()
            .find(|r| {
                r.group == group
                    && r.resource == resource
                    && r.namespace == namespace
                    && r.name == name
            })
            .map(|r| r.uid.as_str())
            // An intent (empty UID) does not say the object was ever seen.
            .filter(|uid| !uid.is_empty())
    }

    /// Whether an earlier pass recorded creating (or holding) the object
    /// of `identity`, with its UID: an intent alone does not count.
    pub(super) fn created_before(&self, identity: &ManifestIdentity) -> bool {
        self.previous.iter().any(|r| {
            !r.uid.is_empty()
                && r.group == identity.group
                && r.kind == identity.kind
                && r.namespace == identity.namespace.as_deref().unwrap_or_default()
                && r.name == identity.name
        })
    }

    pub(super) fn holds(&self, slot: &AppliedResource) -> bool {
        self.stored.iter().any(|r| r.same_object(slot))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(kind: &str, name: &str, uid: &str) -> AppliedResource {
        AppliedResource {
            group: String::new(),
            version: "v1".into(),
            kind: kind.into(),
            resource: format!("{}s", kind.to_lowercase()),
            namespace: "default".into(),
            name: name.into(),
            uid: uid.into(),
        }
    }

    fn record(previous: Vec<AppliedResource>, stored: Vec<AppliedResource>) -> PassRecord {
        PassRecord {
            owner: Owner {
                name: "work".into(),
                uid: "uid-work".into(),
            },
            rank: WorkRank {
                created: 0,
                name: "cluster/work".into(),
                uid: "uid-work".into(),
            },
            generation: 1,
            fresh: false,
            previous,
            stored,
            recorded: Vec::new(),
            managed: Vec::new(),
            written: Vec::new(),
            claimed: Vec::new(),
        }
    }

    fn identity(kind: &str, name: &str) -> ManifestIdentity {
        ManifestIdentity {
            group: String::new(),
            version: "v1".into(),
            kind: kind.into(),
            namespace: Some("default".into()),
            name: name.into(),
        }
    }

    #[test]
    fn an_intent_without_a_uid_never_counts_as_created_or_seen() {
        let pass = record(
            vec![
                resource("ConfigMap", "seen", "uid-1"),
                resource("ConfigMap", "intended", ""),
            ],
            Vec::new(),
        );
        assert!(pass.created_before(&identity("ConfigMap", "seen")));
        assert!(!pass.created_before(&identity("ConfigMap", "intended")));
        assert!(!pass.created_before(&identity("Secret", "seen")));
        assert_eq!(
            pass.previous_uid("", "configmaps", "default", "seen"),
            Some("uid-1")
        );
        assert_eq!(
            pass.previous_uid("", "configmaps", "default", "intended"),
            None
        );
    }

    #[test]
    fn the_record_holds_what_it_stores() {
        let slot = resource("ConfigMap", "a", "");
        let pass = record(Vec::new(), vec![resource("ConfigMap", "a", "uid-1")]);
        assert!(pass.holds(&slot));
        assert!(!pass.holds(&resource("ConfigMap", "b", "")));
    }

    fn work_ref() -> v1::WorkRef {
        v1::WorkRef {
            uid: "uid-hub-work".into(),
            namespace: "cluster".into(),
            name: "work".into(),
        }
    }

    #[test]
    fn a_record_opens_with_its_listed_objects_as_both_previous_and_stored() {
        let mut stored = AppliedManifestWork::new("rec", Default::default());
        stored.metadata.uid = Some("uid-rec".into());
        stored.status = Some(crate::applied_works::AppliedManifestWorkStatus {
            applied_resources: Some(vec![resource("ConfigMap", "a", "u-a")]),
            ..Default::default()
        });
        let pass =
            PassRecord::open(&stored, true, &work_ref(), 7).expect("a record with a UID opens");
        assert_eq!(pass.owner.uid, "uid-rec");
        assert_eq!(pass.owner.name, "rec");
        assert_eq!(pass.rank.name, "cluster/work");
        assert_eq!(pass.rank.uid, "uid-hub-work");
        // No creation time (not read back yet): ranked last among works.
        assert_eq!(pass.rank.created, i64::MAX);
        assert_eq!((pass.generation, pass.fresh), (7, true));
        assert_eq!(pass.previous, vec![resource("ConfigMap", "a", "u-a")]);
        assert_eq!(pass.stored, pass.previous);
        assert!(pass.recorded.is_empty() && pass.claimed.is_empty());
    }

    #[test]
    fn a_record_without_a_uid_cannot_own_objects() {
        let stored = AppliedManifestWork::new("rec", Default::default());
        let opened = PassRecord::open(&stored, false, &work_ref(), 1);
        assert_eq!(opened.err().as_deref(), Some("the record has no UID"));
    }
}
