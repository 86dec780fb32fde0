//! The tests' vocabulary: building works and placements, waiting for objects
//! by watching them, ferry's ownership marks on spoke objects, other actors
//! on a spoke, and set-ups several tests share.

pub mod admission;
pub mod brake_ledger;
pub mod cluster_inventory;
pub mod kubectl_ferry;
pub mod namespaces;
pub mod ownership;
pub mod passes;
pub mod placement_helpers;
pub mod replica_sets;
pub mod sessions;
pub mod spoke_actor;
pub mod stand_in_hub;
pub mod tenant_rbac;
pub mod two_config_maps;
pub mod wait;
pub mod work_helpers;
