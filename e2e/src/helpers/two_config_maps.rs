//! The set-up several deletion and garbage-collection tests share: one spoke
//! (`cluster-a`) and one work of two ConfigMaps in `default`, applied.

use kube::Api;
use kube::api::DynamicObject;
use serde_json::json;

use crate::harness::fleet::{Fleet, FleetOptions};
use crate::helpers::work_helpers::{config_map, manifest_work, wait_applied};
use ferry_api::manifest_work::ManifestWork;

/// The spoke the set-up runs on.
pub const CLUSTER: &str = "cluster-a";

/// A running fleet with the work applied.
pub struct TwoConfigMaps {
    /// The fleet (one hub, one agent, spoke [`CLUSTER`]).
    pub fleet: Fleet,
    /// ManifestWorks in the cluster's namespace on the hub.
    pub works: Api<ManifestWork>,
    /// ConfigMaps in `default` on the spoke.
    pub config_maps: Api<DynamicObject>,
    /// The work as the hub showed it once Applied at its generation.
    pub applied: ManifestWork,
}

impl TwoConfigMaps {
    /// Starts the fleet and applies work `work` holding ConfigMaps `first`
    /// and `second` (data `k: v`). Panics when any step fails, as a test would.
    pub async fn start(work: &str, first: &str, second: &str) -> Self {
        let fleet = Fleet::start(FleetOptions::with_spokes(&[CLUSTER]))
            .await
            .expect("fleet starts");
        let config_maps = fleet.spoke(CLUSTER).api("v1", "ConfigMap", Some("default"));
        let manifests = vec![
            config_map("default", first, json!({"k": "v"})),
            config_map("default", second, json!({"k": "v"})),
        ];
        let works = fleet
            .create_work(&manifest_work(CLUSTER, work, manifests))
            .await
            .expect("create work");
        let applied = wait_applied(&works, work).await.expect("applied");
        Self {
            fleet,
            works,
            config_maps,
            applied,
        }
    }
}
