//! Whether a presented agent certificate still stands, decided from the
//! hub's watched state alone: the cluster must still be the one it was
//! issued under and accepted, its agent identity not rotated since, and its
//! agent ServiceAccount the one it was issued to. Pure, so every rule is
//! tested here; the callers read the state from their caches.

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use tonic::Status;

use crate::agent_certs::presented::ClientCertificate;
use ferry_api::managed_cluster::ManagedCluster;

/// The annotation of a ManagedCluster that revokes every agent certificate
/// issued at or before its time (RFC 3339); `ferry-hub join --rotate-token`
/// sets it when it rotates the agent's token.
pub const CERTIFICATES_NOT_BEFORE: &str = "cluster.ferry.dev/agent-certificates-not-before";

/// Why a certificate no longer stands.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Revoked {
    /// The cluster has no ManagedCluster any more.
    #[error("cluster {0} has no ManagedCluster on this hub")]
    ClusterGone(String),
    /// The ManagedCluster was deleted and created again since.
    #[error("ManagedCluster {0} was deleted and joined again after the certificate was issued")]
    Rejoined(String),
    /// The cluster is not accepted (`spec.hubAcceptsClient: false`).
    #[error(
        "cluster {0} is not accepted by this hub (ManagedCluster {0} has spec.hubAcceptsClient: false)"
    )]
    NotAccepted(String),
    /// The cluster's agent identity was rotated after the certificate was
    /// issued (or the rotation time cannot be read, which counts as now).
    #[error("the agent identity of cluster {0} was rotated after the certificate was issued")]
    Rotated(String),
    /// The agent ServiceAccount was deleted, or replaced by another of the
    /// same name, since.
    #[error(
        "the agent ServiceAccount of cluster {0} was deleted or replaced after the certificate was issued"
    )]
    AccountGone(String),
    /// The certificate's validity ended.
    #[error("the certificate expired")]
    Expired,
}

impl Revoked {
    /// The gRPC status a refused connect or an ended session gets. A
    /// cluster not accepted gets what its token would get; the rest are
    /// told to connect with their token, which also gets them a new
    /// certificate if their cluster still has an agent.
    pub fn to_status(&self) -> Status {
        match self {
            Revoked::NotAccepted(_) => {
                Status::permission_denied(format!("the hub no longer serves this cluster: {self}"))
            }
            _ => Status::unauthenticated(format!(
                "the client certificate is no longer accepted: {self}; connect with the ServiceAccount token"
            )),
        }
    }
}

/// When `cluster`'s agent identity was last rotated (Unix seconds), if it
/// was; a time that cannot be read counts as the end of time, revoking
/// every certificate until it is mended.
pub fn rotated_at(cluster: &ManagedCluster) -> Option<i64> {
    let rotated = cluster.annotations().get(CERTIFICATES_NOT_BEFORE)?;
    Some(
        rotated
            .parse::<Timestamp>()
            .map_or(i64::MAX, |t| t.as_second()),
    )
}

/// Whether `cert` stands at `now` (Unix seconds), given its cluster's
/// ManagedCluster as the hub sees it and the UID of its agent ServiceAccount
/// (None when the account does not exist).
pub fn standing(
    cert: &ClientCertificate,
    cluster: Option<&ManagedCluster>,
    account_uid: Option<&str>,
    now: i64,
) -> Result<(), Revoked> {
    let name = &cert.subject.cluster;
    let cluster = cluster.ok_or_else(|| Revoked::ClusterGone(name.clone()))?;
    if cluster.uid().as_deref() != Some(cert.subject.cluster_uid.as_str()) {
        return Err(Revoked::Rejoined(name.clone()));
    }
    if !cluster.spec.hub_accepts_client {
        return Err(Revoked::NotAccepted(name.clone()));
    }
    if let Some(rotated_at) = rotated_at(cluster)
        && cert.issued_at <= rotated_at
    {
        return Err(Revoked::Rotated(name.clone()));
    }
    if account_uid != Some(cert.subject.account_uid.as_str()) {
        return Err(Revoked::AccountGone(name.clone()));
    }
    if now >= cert.not_after {
        return Err(Revoked::Expired);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent_certs::subject::AgentSubject;
    use ferry_api::managed_cluster::ManagedClusterSpec;

    const NOW: i64 = 1_800_000_000;

    fn cert() -> ClientCertificate {
        ClientCertificate {
            subject: AgentSubject {
                cluster: "east".into(),
                cluster_uid: "c-1".into(),
                account_uid: "a-1".into(),
            },
            issued_at: NOW - 100,
            not_after: NOW + 100,
        }
    }

    fn cluster(uid: &str, accepted: bool, rotated: Option<&str>) -> ManagedCluster {
        let mut cluster = ManagedCluster::new(
            "east",
            ManagedClusterSpec {
                hub_accepts_client: accepted,
                ..Default::default()
            },
        );
        cluster.metadata.uid = Some(uid.into());
        if let Some(rotated) = rotated {
            cluster
                .annotations_mut()
                .insert(CERTIFICATES_NOT_BEFORE.into(), rotated.into());
        }
        cluster
    }

    #[test]
    fn a_certificate_of_the_cluster_as_it_is_stands() {
        let east = cluster("c-1", true, None);
        assert_eq!(standing(&cert(), Some(&east), Some("a-1"), NOW), Ok(()));
    }

    #[test]
    fn each_change_of_identity_revokes_it() {
        let cert = cert();
        let east = cluster("c-1", true, None);
        let cases = [
            (None, Some("a-1"), Revoked::ClusterGone("east".into())),
            (
                Some(cluster("c-2", true, None)),
                Some("a-1"),
                Revoked::Rejoined("east".into()),
            ),
            (
                Some(cluster("c-1", false, None)),
                Some("a-1"),
                Revoked::NotAccepted("east".into()),
            ),
            (
                Some(east.clone()),
                None,
                Revoked::AccountGone("east".into()),
            ),
            (
                Some(east.clone()),
                Some("a-2"),
                Revoked::AccountGone("east".into()),
            ),
        ];
        for (cluster, account, revoked) in cases {
            assert_eq!(
                standing(&cert, cluster.as_ref(), account, NOW),
                Err(revoked)
            );
        }
        assert_eq!(
            standing(&cert, Some(&east), Some("a-1"), NOW + 100),
            Err(Revoked::Expired)
        );
    }

    #[test]
    fn a_rotation_revokes_what_was_issued_before_or_at_it_and_garbage_revokes_all() {
        let issued = Timestamp::from_second(NOW - 100).expect("time");
        let before = Timestamp::from_second(NOW - 101).expect("time").to_string();
        let at = issued.to_string();
        let cert = cert();
        let rotated_before = cluster("c-1", true, Some(&before));
        assert_eq!(
            standing(&cert, Some(&rotated_before), Some("a-1"), NOW),
            Ok(())
        );
        for rotated in [at.as_str(), "yesterday"] {
            let east = cluster("c-1", true, Some(rotated));
            assert_eq!(
                standing(&cert, Some(&east), Some("a-1"), NOW),
                Err(Revoked::Rotated("east".into()))
            );
        }
    }
}
