//! The agent's deletion-brake ledger, as tests read it on a spoke.

use ferry_agent::deletion_brake::ledger::Ledger;
use ferry_agent::deletion_brake::store::LEDGER_KEY;
use k8s_openapi::api::core::v1::ConfigMap;

/// The ledger the agent keeps in `config_map` (empty when it holds none
/// yet). Panics (failing the test) when what it holds does not parse.
pub fn ledger_of(config_map: &ConfigMap) -> Ledger {
    config_map
        .data
        .as_ref()
        .and_then(|d| d.get(LEDGER_KEY))
        .map(|text| serde_json::from_str(text).expect("the agent's ledger parses"))
        .unwrap_or_default()
}
