//! Who owns a ManifestWork, as the agent is told: the tenant whose works may
//! see each other on a cluster (`dependsOn`, deletion holds). A work the
//! replica-set controller wrote belongs to its replica set's namespace (read
//! from [`REPLICA_SET_LABEL`], `<namespace>.<name>`, which only the hub may
//! set: policy `hub-owned-writes.cluster.ferry.dev`); any other work belongs
//! to the namespace it was written in, its cluster's. Pure; never fails.

use std::collections::BTreeMap;

use crate::cluster_name::validate_cluster_name;
use crate::contract::REPLICA_SET_LABEL;

/// The owner of a work in `namespace` labelled `labels`: the namespace part
/// of a well-formed replica-set label, else `namespace`. A label whose
/// namespace part is not a DNS-1123 label (no namespace can be named so) or
/// that names no replica set counts as absent. Never fails.
pub fn work_owner(namespace: &str, labels: &BTreeMap<String, String>) -> String {
    labels
        .get(REPLICA_SET_LABEL)
        .and_then(|value| value.split_once('.'))
        .filter(|(ns, name)| !name.is_empty() && validate_cluster_name(ns).is_ok())
        .map_or_else(|| namespace.to_string(), |(ns, _)| ns.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn labelled(value: &str) -> BTreeMap<String, String> {
        [(REPLICA_SET_LABEL.to_string(), value.to_string())].into()
    }

    #[test]
    fn a_replica_set_work_belongs_to_the_replica_sets_namespace() {
        assert_eq!(work_owner("spoke-a", &labelled("team-a.web")), "team-a");
        // A replica set's name may hold dots; a namespace's may not.
        assert_eq!(work_owner("spoke-a", &labelled("team-a.web.v2")), "team-a");
    }

    #[test]
    fn any_other_work_belongs_to_its_cluster_namespace() {
        assert_eq!(work_owner("spoke-a", &BTreeMap::new()), "spoke-a");
        for bad in ["", "team-a", "team-a.", ".web", "Team-A.web", "-a.web"] {
            assert_eq!(work_owner("spoke-a", &labelled(bad)), "spoke-a", "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn the_owner_is_the_namespace_or_a_dns_label(
            namespace in "[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?",
            value in ".{0,80}",
        ) {
            let owner = work_owner(&namespace, &labelled(&value));
            prop_assert!(owner == namespace || validate_cluster_name(&owner).is_ok());
            let prefix = format!("{owner}.");
            prop_assert!(owner == namespace || value.starts_with(&prefix));
        }
    }
}
