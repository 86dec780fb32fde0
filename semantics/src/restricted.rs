//! What the agent's restricted mode refuses whatever its RBAC allows: the
//! agent holds rights on CRDs and on its own records for its own use, so a
//! work carrying a CRD or a ferry record would be written with those rights.
//! A work could then install any API or forge the agent's bookkeeping
//! (AppliedManifestWork records decide what the agent deletes).

/// The API group of CustomResourceDefinitions.
pub const CRD_GROUP: &str = "apiextensions.k8s.io";
/// The resource (plural) of CustomResourceDefinitions.
pub const CRD_RESOURCE: &str = "customresourcedefinitions";
/// API groups of ferry's own kinds (works, records, clusters); the agent
/// keeps its records there. Repeated from `ferry_api::contract`, which the
/// agent does not depend on.
pub const FERRY_GROUPS: [&str; 2] = ["work.ferry.dev", "cluster.ferry.dev"];
/// The `Applied` condition reason of a manifest restricted mode refuses.
pub const RESTRICTED_KIND_REASON: &str = "RestrictedKind";

/// Whether an agent in restricted mode refuses a manifest of `resource`
/// (plural) in `group`: CRDs and every kind of ferry's own groups.
pub fn refused_when_restricted(group: &str, resource: &str) -> bool {
    (group == CRD_GROUP && resource == CRD_RESOURCE) || FERRY_GROUPS.contains(&group)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crds_and_ferry_records_are_refused() {
        assert!(refused_when_restricted(CRD_GROUP, CRD_RESOURCE));
        assert!(refused_when_restricted(
            "work.ferry.dev",
            "appliedmanifestworks"
        ));
        assert!(refused_when_restricted("work.ferry.dev", "manifestworks"));
        assert!(refused_when_restricted(
            "cluster.ferry.dev",
            "managedclusters"
        ));
    }

    #[test]
    fn ordinary_kinds_are_not() {
        assert!(!refused_when_restricted("", "configmaps"));
        assert!(!refused_when_restricted("apps", "deployments"));
        // Same group, another resource: not a CRD.
        assert!(!refused_when_restricted(CRD_GROUP, "other"));
        // A look-alike group is someone else's.
        assert!(!refused_when_restricted("ferry.dev.example", "things"));
    }
}
