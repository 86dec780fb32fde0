//! Each hub replica's own `coordination.k8s.io` Lease, which vouches for
//! every agent session the replica holds: a ManagedCluster is written when
//! its agent connects or disconnects and names the replica serving it
//! (`status.servedBy`); while that replica renews its Lease the cluster is
//! live, with no per-cluster write. When a replica's Lease lapses (the
//! replica crashed or lost its API server), the leader's sweep marks that
//! replica's clusters disconnected. So an idle fleet costs the hub API
//! server writes in proportion to replicas, not clusters (as Kubernetes
//! moved node heartbeats to Leases, KEP-589).
//!
//! The Lease is kept by `kube-lease-manager`: nobody else contends for it,
//! so holding it is just renewing it, and it is released when the replica
//! stops.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Client;
use kube_lease_manager::LeaseManagerBuilder;
use tokio::sync::watch;
use tracing::{info, warn};

/// Prefix of every replica Lease's name; the rest is the replica identity.
pub const REPLICA_LEASE_PREFIX: &str = "ferry-hub-replica-";

/// Which Lease this replica keeps.
#[derive(Debug, Clone)]
pub struct ReplicaLease {
    /// Namespace of the Lease (the hub's own).
    pub namespace: String,
    /// This replica's identity, unique per process: a restarted replica is
    /// a new one, so its predecessor's clusters are swept once the old Lease
    /// lapses.
    pub identity: String,
    /// How long the Lease vouches without renewal: the longest a dead
    /// replica's clusters still show connected.
    pub duration: Duration,
}

impl ReplicaLease {
    /// The Lease's name.
    pub fn lease_name(&self) -> String {
        lease_name(&self.identity)
    }
}

/// The name of the Lease of the replica `identity`.
pub fn lease_name(identity: &str) -> String {
    format!("{REPLICA_LEASE_PREFIX}{identity}")
}

/// Keeping the replica Lease failed at the start.
#[derive(Debug, thiserror::Error)]
pub enum ReplicaLeaseError {
    /// The Lease could not be read or created (RBAC: get, list, create,
    /// patch, delete on `leases` in the hub's namespace).
    #[error("replica Lease {namespace}/{name}: {source}")]
    Lease {
        /// Lease namespace.
        namespace: String,
        /// Lease name.
        name: String,
        /// What went wrong.
        #[source]
        source: kube_lease_manager::LeaseManagerError,
    },
}

/// Starts renewing the replica's Lease; the receiver says whether this
/// replica holds it (false while the API server cannot be reached long
/// enough for it to lapse). Renewed a third of the duration before it ends;
/// released once every receiver is dropped. Fails when the Lease cannot be
/// set up.
pub async fn keep(
    client: Client,
    lease: &ReplicaLease,
) -> Result<watch::Receiver<bool>, ReplicaLeaseError> {
    let duration = lease.duration.as_secs().max(3);
    let manager = LeaseManagerBuilder::new(client, lease.lease_name())
        .with_namespace(lease.namespace.clone())
        .with_identity(lease.identity.clone())
        .with_duration(duration)
        .with_grace((duration / 3).max(1))
        .build()
        .await
        .map_err(|source| ReplicaLeaseError::Lease {
            namespace: lease.namespace.clone(),
            name: lease.lease_name(),
            source,
        })?;
    let (held, task) = manager.watch().await;
    let identity = lease.identity.clone();
    tokio::spawn(async move {
        match task.await {
            Ok(Ok(_)) => info!(%identity, "released the replica Lease"),
            Ok(Err(error)) => warn!(%identity, %error, "keeping the replica Lease ended"),
            Err(error) => warn!(%identity, %error, "the replica Lease task failed"),
        }
    });
    Ok(held)
}

/// When the replica Lease `lease` stops vouching: its renew time plus its
/// duration. `None` for a released Lease (no holder) or one never renewed.
pub fn vouches_until(lease: &Lease) -> Option<Timestamp> {
    let spec = lease.spec.as_ref()?;
    spec.holder_identity.as_ref().filter(|h| !h.is_empty())?;
    let renewed = spec.renew_time.as_ref().or(spec.acquire_time.as_ref())?.0;
    let seconds = i64::from(spec.lease_duration_seconds?.max(0));
    renewed.checked_add(SignedDuration::from_secs(seconds)).ok()
}

/// Whether `lease` still vouches for its replica's sessions at `now`.
pub fn vouches_at(lease: &Lease, now: Timestamp) -> bool {
    vouches_until(lease).is_some_and(|until| until > now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::coordination::v1::LeaseSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

    fn lease(holder: Option<&str>, renewed: Option<&str>, seconds: Option<i32>) -> Lease {
        Lease {
            spec: Some(LeaseSpec {
                holder_identity: holder.map(str::to_string),
                renew_time: renewed.map(|t| MicroTime(t.parse().expect("time"))),
                lease_duration_seconds: seconds,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_lease_vouches_until_its_renewal_plus_its_duration() {
        let held = lease(Some("r1"), Some("2026-11-27T10:00:00Z"), Some(15));
        let at = |t: &str| t.parse::<Timestamp>().expect("time");
        assert!(vouches_at(&held, at("2026-11-27T10:00:14Z")));
        assert!(!vouches_at(&held, at("2026-11-27T10:00:15Z")));
    }

    #[test]
    fn a_released_or_never_renewed_lease_vouches_for_nothing() {
        let now = Timestamp::now();
        assert!(!vouches_at(
            &lease(None, Some("2099-01-01T00:00:00Z"), Some(15)),
            now
        ));
        assert!(!vouches_at(
            &lease(Some(""), Some("2099-01-01T00:00:00Z"), Some(15)),
            now
        ));
        assert!(!vouches_at(&lease(Some("r1"), None, Some(15)), now));
        assert!(!vouches_at(
            &lease(Some("r1"), Some("2099-01-01T00:00:00Z"), None),
            now
        ));
        assert!(!vouches_at(&Lease::default(), now));
    }

    #[test]
    fn lease_names_carry_the_identity() {
        assert_eq!(lease_name("hub-0-1a2b3c"), "ferry-hub-replica-hub-0-1a2b3c");
    }
}
