//! Joining a cluster in one command: the hub half (`hub_side`), then either the
//! spoke half applied with the spoke's credentials (`spoke_side`) or a
//! bundle written for GitOps (`bundle`). Running it again changes
//! nothing: the spoke's token is kept while the hub still takes it, and
//! replaced (the old one revoked) only on request.

use std::path::{Path, PathBuf};

use kube::Client;

use crate::join::bundle::{BundleError, HubAccess, spoke_objects, write_bundle};
use crate::join::hub_side::{
    Applied, JoinError, is_accepted, mint_bound_token, prepare_hub, revoke_certificates,
    revoke_tokens_except, token_expiry, token_refusal,
};
use crate::join::spoke_side::{SpokeJoinError, apply_objects, read_hub_access};

/// Where the spoke half goes.
#[derive(Clone, Copy)]
pub enum SpokeTarget<'a> {
    /// Applied to the spoke through this client.
    Cluster(&'a Client),
    /// Written as files into this directory; the spoke is not touched.
    Bundle(&'a Path),
}

/// What to join, and how.
#[derive(Clone, Debug)]
pub struct JoinOptions {
    /// The cluster's name (its namespace on the hub).
    pub cluster: String,
    /// The ServiceAccount its agent authenticates as on the hub.
    pub service_account: String,
    /// The URL the agent dials.
    pub hub_url: String,
    /// The CA (PEM) of the hub's serving certificate; empty for plaintext.
    pub ca_pem: String,
    /// Replaces the image of the agent's containers.
    pub image: Option<String>,
    /// Lifetime of a newly minted token.
    pub token_seconds: i64,
    /// Mint a new token even if the spoke's is still good, and revoke every
    /// other token of the cluster's agent once the new one is in place.
    pub rotate_token: bool,
    /// Whether a newly created ManagedCluster accepts the agent at once.
    pub accept: bool,
}

/// What a join did.
#[derive(Debug, Default)]
pub struct JoinReport {
    /// Every object touched, hub side first, in order.
    pub applied: Vec<Applied>,
    /// Things worth telling whoever ran it.
    pub notes: Vec<String>,
    /// Files written, for a bundle.
    pub bundle: Vec<PathBuf>,
    /// Whether the hub accepts the cluster's agent now.
    pub accepted: bool,
}

/// Joining failed at one step; the steps before it stay done, and running
/// it again picks up from there.
#[derive(Debug, thiserror::Error)]
pub enum JoinBothError {
    /// A step on the hub failed.
    #[error(transparent)]
    Hub(#[from] JoinError),
    /// A step on the spoke failed.
    #[error(transparent)]
    Spoke(#[from] SpokeJoinError),
    /// The bundle could not be built or written.
    #[error(transparent)]
    Bundle(#[from] BundleError),
}

/// Joins `options.cluster`: prepares the hub through `hub`, settles the
/// agent's token, then installs the agent on `target` or writes its bundle.
/// Fails at the first step the hub or the spoke refuses (see
/// [`JoinBothError`]).
pub async fn join_both_sides(
    hub: &Client,
    target: SpokeTarget<'_>,
    options: &JoinOptions,
) -> Result<JoinReport, JoinBothError> {
    let cluster = options.cluster.as_str();
    let mut report = JoinReport {
        applied: prepare_hub(hub, cluster, &options.service_account, options.accept).await?,
        ..JoinReport::default()
    };
    let current = match target {
        SpokeTarget::Cluster(spoke) => read_hub_access(spoke, cluster).await?,
        // A bundle is a fresh artifact: it always carries a fresh token.
        SpokeTarget::Bundle(_) => None,
    };
    let kept = match current {
        Some(current) if current.cluster_name != cluster => {
            report.notes.push(format!(
                "the spoke was joined as cluster {}; it now joins as {cluster}",
                current.cluster_name
            ));
            None
        }
        Some(_) if options.rotate_token => None,
        Some(current) => {
            match token_refusal(hub, cluster, &options.service_account, &current.token).await? {
                Some(why) => {
                    report.notes.push(format!(
                        "the hub no longer takes the spoke's token ({why}): a new one is minted"
                    ));
                    None
                }
                None => match expires_soon(&current.token, options.token_seconds) {
                    Some(left) => {
                        report.notes.push(format!(
                            "the spoke's token expires in {left} s: a new one is minted"
                        ));
                        None
                    }
                    None => Some(current.token),
                },
            }
        }
        None => None,
    };
    let (token, minted) = match kept {
        Some(token) => (token, None),
        None => {
            let (minted, applied) = mint_bound_token(
                hub,
                cluster,
                &options.service_account,
                options.token_seconds,
            )
            .await?;
            report.applied.push(applied);
            (minted.token, Some(minted.binding))
        }
    };
    let access = HubAccess {
        token,
        ca_pem: options.ca_pem.clone(),
        hub_url: options.hub_url.clone(),
        cluster_name: cluster.to_string(),
    };
    match target {
        SpokeTarget::Cluster(spoke) => {
            let objects = spoke_objects(&access, options.image.as_deref())?;
            report
                .applied
                .extend(apply_objects(spoke, cluster, &objects).await?);
        }
        SpokeTarget::Bundle(dir) => {
            report.bundle = write_bundle(dir, &access, options.image.as_deref()).await?;
        }
    }
    // Old tokens go only once the new one is in place, so the agent has a
    // good token to reconnect with when the hub ends its session.
    if let (true, Some(binding)) = (options.rotate_token, minted) {
        report
            .applied
            .extend(revoke_tokens_except(hub, cluster, &options.service_account, &binding).await?);
        // A certificate is the token's successor: rotating one rotates both.
        report
            .applied
            .push(revoke_certificates(hub, cluster).await?);
    }
    report.accepted = is_accepted(hub, cluster).await?.unwrap_or(false);
    if !report.accepted {
        report.notes.push(format!(
            "the hub does not accept cluster {cluster} yet: its agent is refused until `ferry-hub accept --cluster {cluster}`"
        ));
    }
    Ok(report)
}

/// The seconds left to `token` when less than a third of the lifetime a new
/// one would get: running join again then renews it, so a fleet joined once
/// does not lose its agents a year later.
fn expires_soon(token: &str, token_seconds: i64) -> Option<i64> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or_default();
    let left = token_expiry(token)? - now;
    (left < token_seconds / 3).then_some(left.max(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;

    fn expiring_in(seconds: i64) -> String {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_secs();
        let claims = format!(r#"{{"exp":{}}}"#, now as i64 + seconds);
        let encode = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        format!("{}.{}.sig", encode("{}"), encode(&claims))
    }

    #[test]
    fn a_token_past_two_thirds_of_its_life_is_renewed() {
        let year = 365 * 24 * 3600;
        assert_eq!(expires_soon(&expiring_in(year), year), None);
        assert_eq!(expires_soon(&expiring_in(year / 2), year), None);
        assert!(expires_soon(&expiring_in(year / 4), year).is_some());
        assert_eq!(expires_soon(&expiring_in(-10), year), Some(0));
        assert_eq!(expires_soon("opaque", year), None, "no claim: kept");
    }
}
