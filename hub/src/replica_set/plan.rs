//! Reconcile phase 3: the rollout. For each placement, in its strategy's
//! order and limits, which clusters get the current template now, whether
//! the rollout is complete or halted, and when to look again for a soak or
//! a deadline that ends by time alone.

use std::collections::BTreeMap;
use std::sync::Arc;

use ferry_semantics::rollout::{ClusterState, RolloutCluster, next_step};
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use super::decisions::Chosen;
use super::deploy::Refused;
use super::render::Rendered;
use super::rollout::{cluster_state, resolve};
use ferry_api::manifest_work::ManifestWork;
use ferry_api::replica_set::ManifestWorkReplicaSet;

/// What the rollout does now.
pub struct RolloutPlan {
    /// The clusters to write now, each with the placement choosing it.
    pub start: Vec<(String, String)>,
    /// The soonest a cluster's state changes by time alone.
    pub look_again: Option<SignedDuration>,
    /// Each placement whose rollout stopped at too many failures, and why.
    pub halted: Vec<String>,
    /// Each placement whose rollout a failed mandatory decision group
    /// holds, and which clusters failed there.
    pub held: Vec<String>,
    /// Whether every placement's rollout is complete.
    pub all_complete: bool,
    /// Each placement whose rollout strategy cannot be used, and why.
    pub problems: Vec<String>,
}

/// Plans the rollout of `rs` over the `chosen` clusters, from their
/// `rendered` works and the `existing` ones, as of `now`. A cluster whose
/// rendering the hub API server `refused` counts as failed.
pub fn plan_rollout(
    rs: &ManifestWorkReplicaSet,
    chosen: &Chosen,
    rendered: &Rendered,
    existing: &BTreeMap<String, Arc<ManifestWork>>,
    refused: &Refused,
    now: Timestamp,
) -> RolloutPlan {
    let (wanted, group_of) = (&chosen.wanted, &chosen.group_of);
    let mut problems = Vec::new();
    let mut start: Vec<(String, String)> = Vec::new();
    let mut look_again: Option<SignedDuration> = None;
    let mut halted = Vec::new();
    let mut held = Vec::new();
    let mut all_complete = true;
    for reference in &rs.spec.placement_refs {
        let mut clusters: Vec<(&(usize, String), &String)> = wanted
            .iter()
            .filter(|(_, p)| **p == reference.name)
            .filter_map(|(c, _)| Some((group_of.get(c)?, c)))
            .collect();
        clusters.sort_by(|a, b| (a.0.0, a.1).cmp(&(b.0.0, b.1)));
        let strategy = match resolve(&reference.rollout_strategy, clusters.len()) {
            Ok(strategy) => strategy,
            Err(error) => {
                problems.push(format!("placement {}: {error}", reference.name));
                all_complete = false;
                continue;
            }
        };
        let states: Vec<RolloutCluster> = clusters
            .iter()
            .map(|((index, group), cluster)| {
                let (state, again) = match rendered.get(*cluster) {
                    _ if refused.contains_key(*cluster) => (ClusterState::Failed, None),
                    Some(Ok(spec)) => {
                        cluster_state(existing.get(*cluster).map(|w| &**w), spec, &strategy, now)
                    }
                    _ => (ClusterState::Failed, None),
                };
                if let Some(again) = again {
                    look_again = Some(look_again.map_or(again, |l| l.min(again)));
                }
                RolloutCluster {
                    name: (*cluster).clone(),
                    group_index: *index,
                    group_name: group.clone(),
                    state,
                }
            })
            .collect();
        let step = next_step(&strategy.limits, &states);
        all_complete &= step.complete;
        if step.halted {
            let failed = states
                .iter()
                .filter(|c| c.state == ClusterState::Failed)
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>();
            halted.push(format!(
                "placement {}: {} clusters failed ({}), more than maxFailures {}",
                reference.name,
                failed.len(),
                failed.join(", "),
                strategy.limits.max_failures
            ));
        }
        if !step.held_by.is_empty() {
            let groups: std::collections::BTreeSet<&str> = states
                .iter()
                .filter(|c| step.held_by.contains(&c.name))
                .map(|c| c.group_name.as_str())
                .collect();
            held.push(format!(
                "placement {}: held by failed mandatory decision group {} (cluster {}): mandatory groups tolerate no failure",
                reference.name,
                groups.into_iter().collect::<Vec<_>>().join(", "),
                step.held_by.join(", ")
            ));
        }
        start.extend(step.start.into_iter().map(|c| (c, reference.name.clone())));
    }
    RolloutPlan {
        start,
        look_again,
        halted,
        held,
        all_complete,
        problems,
    }
}
