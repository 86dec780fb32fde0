//! Who an agent certificate is for: the cluster, the ManagedCluster it was
//! issued under (its UID, so a cluster deleted and joined again does not
//! inherit the old agent's certificates) and the agent's ServiceAccount (its
//! UID, so deleting the account revokes them as it revokes its tokens). All
//! three travel in one URI subject alternative name.

use ferry_api::cluster_name::validate_cluster_name;

/// The prefix of the URI name an agent certificate carries.
pub const URI_PREFIX: &str = "urn:ferry:agent:";

/// The identity an agent certificate is bound to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentSubject {
    /// The cluster whose agent holds the certificate.
    pub cluster: String,
    /// The UID of the cluster's ManagedCluster when it was issued.
    pub cluster_uid: String,
    /// The UID of the agent's ServiceAccount when it was issued.
    pub account_uid: String,
}

impl AgentSubject {
    /// The URI name written into the certificate.
    pub fn to_uri(&self) -> String {
        format!(
            "{URI_PREFIX}{}:{}:{}",
            self.cluster, self.cluster_uid, self.account_uid
        )
    }

    /// The subject a URI name of [`AgentSubject::to_uri`] names; None for
    /// any other URI (another prefix, a part missing or empty, a cluster
    /// name that is not one).
    pub fn from_uri(uri: &str) -> Option<Self> {
        let rest = uri.strip_prefix(URI_PREFIX)?;
        let mut parts = rest.split(':');
        let (cluster, cluster_uid, account_uid) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() || cluster_uid.is_empty() || account_uid.is_empty() {
            return None;
        }
        validate_cluster_name(cluster).ok()?;
        Some(Self {
            cluster: cluster.to_string(),
            cluster_uid: cluster_uid.to_string(),
            account_uid: account_uid.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn other_uris_name_no_agent() {
        for uri in [
            "urn:ferry:agent:east:u1",
            "urn:ferry:agent:east:u1:a1:extra",
            "urn:ferry:agent:East:u1:a1",
            "urn:ferry:agent::u1:a1",
            "urn:ferry:agent:east::a1",
            "spiffe://east/u1/a1",
        ] {
            assert_eq!(AgentSubject::from_uri(uri), None, "{uri}");
        }
    }

    proptest! {
        #[test]
        fn a_subject_survives_its_uri(
            cluster in "[a-z]([a-z0-9-]{0,20}[a-z0-9])?",
            cluster_uid in "[0-9a-f-]{1,36}",
            account_uid in "[0-9a-f-]{1,36}",
        ) {
            let subject = AgentSubject { cluster, cluster_uid, account_uid };
            prop_assert_eq!(AgentSubject::from_uri(&subject.to_uri()), Some(subject));
        }
    }
}
