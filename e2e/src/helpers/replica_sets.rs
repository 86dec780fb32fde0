//! What tests read from a ManifestWorkReplicaSet's status.

use ferry_api::manifest_work::Condition;
use ferry_api::replica_set::ManifestWorkReplicaSet;
use ferry_semantics::contract::PLACEMENT_ROLLED_OUT;

/// The replica set's `PlacementRolledOut` condition, if it has one.
pub fn rolled_out(rs: &ManifestWorkReplicaSet) -> Option<&Condition> {
    rs.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == PLACEMENT_ROLLED_OUT)
}
