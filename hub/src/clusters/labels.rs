//! Labels and claims of a ManagedCluster, what placements select on:
//! `ferry-hub join --labels k=v,... --claims name=value,...` sets them.
//! Labels live in the ManagedCluster's metadata; claims in
//! `status.clusterClaims`, where OCM keeps them (OCM's agent reports them
//! from ClusterClaim objects on the spoke; ferry's hub records the ones
//! given at join, so the agent and the protocol stay as they are).

use std::collections::BTreeMap;

use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use ferry_api::managed_cluster::{ClusterClaim, ManagedCluster};

/// Labels or claims could not be set.
#[derive(Debug, thiserror::Error)]
pub enum ClusterLabelsError {
    /// A `key=value` pair is malformed.
    #[error("{flag}: {pair:?} is not key=value with a non-empty key")]
    Malformed {
        /// The flag it came from.
        flag: &'static str,
        /// What was given.
        pair: String,
    },
    /// The API server refused the write (an invalid label among others).
    #[error("setting the {what} of ManagedCluster {cluster}: {source}")]
    Write {
        /// Labels or claims.
        what: &'static str,
        /// The cluster.
        cluster: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}

/// Parses `key=value` pairs given to `flag`; a value may be empty.
pub fn parse_pairs(
    flag: &'static str,
    pairs: &[String],
) -> Result<BTreeMap<String, String>, ClusterLabelsError> {
    pairs
        .iter()
        .map(|pair| match pair.split_once('=') {
            Some((key, value)) if !key.trim().is_empty() => {
                Ok((key.trim().to_string(), value.trim().to_string()))
            }
            _ => Err(ClusterLabelsError::Malformed {
                flag,
                pair: pair.clone(),
            }),
        })
        .collect()
}

/// Adds `labels` to cluster `name`'s ManagedCluster (others stay) and sets
/// `claims` (replacing the recorded ones when any are given).
pub async fn set_labels_and_claims(
    client: &Client,
    name: &str,
    labels: &BTreeMap<String, String>,
    claims: &BTreeMap<String, String>,
) -> Result<(), ClusterLabelsError> {
    let api: Api<ManagedCluster> = Api::all(client.clone());
    let failed = |what| {
        move |source| ClusterLabelsError::Write {
            what,
            cluster: name.to_string(),
            source,
        }
    };
    if !labels.is_empty() {
        api.patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": labels}})),
        )
        .await
        .map_err(failed("labels"))?;
    }
    if !claims.is_empty() {
        let claims: Vec<ClusterClaim> = claims
            .iter()
            .map(|(name, value)| ClusterClaim {
                name: name.clone(),
                value: value.clone(),
            })
            .collect();
        api.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"clusterClaims": claims}})),
        )
        .await
        .map_err(failed("claims"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_need_a_key_and_may_have_an_empty_value() {
        let parsed =
            parse_pairs("--labels", &["env=prod".into(), "canary=".into()]).expect("parsed");
        assert_eq!(parsed.get("env").map(String::as_str), Some("prod"));
        assert_eq!(parsed.get("canary").map(String::as_str), Some(""));
        let error = parse_pairs("--labels", &["=x".into()]).expect_err("refused");
        assert_eq!(
            error.to_string(),
            "--labels: \"=x\" is not key=value with a non-empty key"
        );
        assert!(parse_pairs("--claims", &["region".into()]).is_err());
    }
}
