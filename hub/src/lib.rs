//! The ferry hub: watches ManifestWorks on the management cluster, streams each
//! cluster's works to that cluster's agent over gRPC, and writes the status the
//! agents report back to the ManifestWork status subresource.
#![forbid(unsafe_code)]

pub mod admission;
pub mod agent_identity;
pub mod cert_reload;
pub mod cluster_labels;
pub mod cluster_liveness;
pub mod cluster_taints;
pub mod connection_limit;
pub mod crds;
pub mod events;
pub mod grpc_tls;
pub mod join;
pub mod join_accept;
pub mod join_both;
pub mod join_bundle;
pub mod join_spoke;
pub mod metrics;
pub mod peer_budget;
pub mod placement;
pub mod probes;
pub mod replica_set;
pub mod server;
pub mod session;
pub mod status_delivery;
pub mod status_from_wire;
pub mod status_writer;
pub mod tls;
pub mod to_wire;
pub mod work_deletion;
pub mod work_index;
pub mod work_ttl;

pub use server::{GrpcTls, HubError, HubListeners, TransportLimits, run_hub};
