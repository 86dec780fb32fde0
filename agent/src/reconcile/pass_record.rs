//! One pass's view of a work's record on the spoke.

use crate::applied_works::AppliedResource;
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
}
