//! Real local Kubernetes control planes for ferry's tests and local fleet: the
//! Go control plane build, process handles, a fleet of hub and spokes with
//! ferry running against them, and watch-based waiting helpers.
#![forbid(unsafe_code)]

pub mod agent_client;
pub mod agent_process;
pub mod audit;
pub mod bench;
pub mod controlplane;
pub mod controlplane_build;
pub mod fleet;
pub mod helm;
pub mod hub_metrics;
pub mod hub_process;
pub mod image;
pub mod joined_agent;
pub mod link;
pub mod loadgen;
pub mod local_pod;
pub mod ownership;
pub mod placement_helpers;
pub mod proc_stats;
pub mod spoke_actor;
pub mod two_config_maps;
pub mod wait;
pub mod work_helpers;
