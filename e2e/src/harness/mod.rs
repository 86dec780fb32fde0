//! The machinery: the Go control plane built and run, ferry's hub and agents
//! as tasks and as processes, the links between them, the spokes' audit logs,
//! Helm, promtool, krew, and the container image as tests read it.

pub mod agent_client;
pub mod agent_process;
pub mod audit;
pub mod browser;
pub mod controlplane;
pub mod controlplane_build;
pub mod etcd;
pub mod fleet;
pub mod go_tool;
pub mod helm;
pub mod hub_metrics;
pub mod hub_process;
pub mod image;
pub mod joined_agent;
pub mod krew;
pub mod leader_process;
pub mod link;
pub mod local_pod;
pub mod oci_registry;
pub mod promtool;
pub mod reserved_port;
pub mod scratch;
pub mod sockets;
pub mod test_log;
