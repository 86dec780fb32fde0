//! The controllers that must run once in a fleet: each runs in the leading
//! replica only ([`while_leading`]), started again on the next win.

use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use tokio::sync::watch;

use crate::admission::watchdog::{PolicyHealth, run_watchdog};
use crate::cluster_profile::ClusterProfileOptions;
use crate::clusters::shared::ClusterCache;
use crate::events::HubEvents;
use crate::leader::{StopSignal, while_leading};
use crate::metrics::HubMetrics;
use crate::replica_set::health_pool::HealthPoolConfig;
use crate::works::deletion::{WorkDeletion, run_deletion_controller};
use crate::works::ttl::run_ttl_controller;

/// What the leader's controllers are built from.
pub struct LeaderControllers {
    /// The hub's API client.
    pub client: Client,
    /// The hub's metrics.
    pub metrics: Arc<HubMetrics>,
    /// The hub's Event recorder for works.
    pub events: HubEvents,
    /// The replica's ManagedCluster cache and its change feed.
    pub clusters: ClusterCache,
    /// How often placements and replica sets are reconciled with no change.
    pub controller_sweep: Duration,
    /// How long a disconnected cluster waits before it is tainted.
    pub unreachable_grace: Duration,
    /// The pool rollout gates' health expressions run on.
    pub health_pool: HealthPoolConfig,
    /// Where ClusterProfiles (and the inventory's placement decisions) are
    /// published, if anywhere.
    pub cluster_profiles: Option<ClusterProfileOptions>,
    /// Whether the admission policies are watched, and by whom the hub's
    /// own writes are made.
    pub watch_policies: Option<(PolicyHealth, Vec<String>)>,
}

/// Runs `run` with the stop signal when `enabled`; otherwise waits for the
/// stop: a controller that returned at once would be restarted at once,
/// for ever.
async fn when<T, Fut>(enabled: Option<T>, stop: StopSignal, run: impl FnOnce(T, StopSignal) -> Fut)
where
    Fut: Future<Output = ()>,
{
    match enabled {
        Some(value) => run(value, stop).await,
        None => stop.await,
    }
}

impl LeaderControllers {
    /// Runs every controller while this replica leads (always, without
    /// `leading`), until `stopping` turns true. Never fails: each
    /// controller retries its own errors.
    pub async fn run(
        self,
        leading: Option<watch::Receiver<bool>>,
        stopping: watch::Receiver<bool>,
    ) {
        let c = &self;
        let deletion = while_leading(leading.clone(), stopping.clone(), "deletion", |stop| {
            run_deletion_controller(
                c.client.clone(),
                WorkDeletion::new(c.client.clone(), c.events.clone()),
                c.metrics.clone(),
                stop,
            )
        });
        let ttl = while_leading(leading.clone(), stopping.clone(), "ttl", |stop| {
            run_ttl_controller(c.client.clone(), c.metrics.clone(), stop)
        });
        let placement = while_leading(leading.clone(), stopping.clone(), "placement", |stop| {
            crate::placement::run_placement_controller(
                c.client.clone(),
                c.events.clone(),
                c.clusters.clone(),
                c.controller_sweep,
                stop,
            )
        });
        let cluster_sets =
            while_leading(leading.clone(), stopping.clone(), "cluster sets", |stop| {
                crate::cluster_sets::run_cluster_set_controller(c.client.clone(), stop)
            });
        let taints = while_leading(leading.clone(), stopping.clone(), "taints", |stop| {
            crate::clusters::taints::run_taint_controller(
                c.client.clone(),
                c.clusters.clone(),
                c.unreachable_grace,
                stop,
            )
        });
        let replica_sets =
            while_leading(leading.clone(), stopping.clone(), "replica sets", |stop| {
                crate::replica_set::run_replica_set_controller(
                    c.client.clone(),
                    c.clusters.clone(),
                    c.health_pool,
                    c.metrics.rollouts.clone(),
                    c.controller_sweep,
                    stop,
                )
            });
        let profiles = while_leading(
            leading.clone(),
            stopping.clone(),
            "cluster profiles",
            |stop| {
                when(c.cluster_profiles.clone(), stop, |options, stop| {
                    crate::cluster_profile::run_cluster_profile_controller(
                        c.client.clone(),
                        options,
                        c.metrics.clone(),
                        stop,
                    )
                })
            },
        );
        // Placements in the inventory refer to the profiles' namespace, so
        // they are published only beside the profiles.
        let inventory = while_leading(
            leading.clone(),
            stopping.clone(),
            "inventory placement decisions",
            |stop| {
                let namespace = c.cluster_profiles.as_ref().map(|o| o.namespace.clone());
                when(namespace, stop, |namespace, stop| {
                    crate::inventory_decisions::run_inventory_decision_controller(
                        c.client.clone(),
                        namespace,
                        c.metrics.clone(),
                        stop,
                    )
                })
            },
        );
        let policies = while_leading(
            leading.clone(),
            stopping.clone(),
            "admission policies",
            |stop| {
                when(c.watch_policies.clone(), stop, |(health, writers), stop| {
                    run_watchdog(
                        c.client.clone(),
                        writers,
                        health,
                        c.metrics.clone(),
                        c.events.clone(),
                        stop,
                    )
                })
            },
        );
        tokio::join!(
            deletion,
            ttl,
            placement,
            cluster_sets,
            taints,
            replica_sets,
            profiles,
            inventory,
            policies
        );
    }
}
