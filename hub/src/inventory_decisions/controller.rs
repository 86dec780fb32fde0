//! The shell around [`super::render`]: watches Placements, ferry's
//! PlacementDecisions and ferry's `multicluster.x-k8s.io` slices, server-side
//! applies each placement's slices when ferry's part differs (additions and
//! changes first, then removals, as ferry's own decisions are written, so a
//! cluster moving between slices never drops out of the published decision),
//! and deletes ferry's slices that no decision object backs any more.
//! Slices carry the Placement as controller owner, so the garbage collector
//! removes them with it; a sweep deletes those of placements that are gone
//! all the same (a hub API server without the garbage collector running, or
//! a delete missed while not leading).
//!
//! The CRD is SIG Multicluster's: the hub does not install it. While the
//! API server does not serve it, the leader says so (a warning and
//! `ferry_hub_inventory_decisions_publishing` at 0) and checks again every
//! [`CRD_CHECK`]; everything else goes on.

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, Preconditions};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use tracing::{info, warn};

use ferry_api::contract::PLACEMENT_LABEL;
use ferry_api::placement::{Placement, PlacementDecision};

use super::render::{InventoryPlacementDecision, SCHEDULER_NAME, differs, is_ferrys, render};
use crate::metrics::HubMetrics;
use crate::served_gate::{CHECK_EVERY, Gate, run_while_ready};
use crate::store_ready::{StoresReady, store_ready};
use crate::watch::{SettledObjects, resync_every, run_controller, watch};

/// Field manager of the hub's vendor-neutral PlacementDecision writer.
pub const INVENTORY_DECISION_FIELD_MANAGER: &str = "ferry-inventory-decisions";

/// How often the leader checks whether the upstream PlacementDecision CRD
/// is served (while not, and while so, to notice it going away).
pub const CRD_CHECK: Duration = CHECK_EVERY;

/// How often every placement's slices are reconciled and orphans swept,
/// whatever the triggers (writes happen only on change).
const RESYNC: Duration = Duration::from_secs(30);

/// A placement's slices could not be brought up to date; retried.
#[derive(Debug, thiserror::Error)]
pub enum InventoryDecisionError {
    /// The API server refused a write or a delete.
    #[error("{action}: {source}")]
    Write {
        /// What was being done, naming the slice.
        action: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// The watches have not listed everything yet (or stopped).
    #[error("the placement, decision and slice caches are not ready")]
    NotReady,
}

struct Context {
    client: Client,
    profile_namespace: String,
    placements: Store<Placement>,
    decisions: Store<PlacementDecision>,
    slices: Store<InventoryPlacementDecision>,
    ready: StoresReady,
}

impl Context {
    /// Deletes ferry's slice `namespace/name` as seen (by UID): a slice
    /// written meanwhile under the same name stays.
    async fn delete(
        &self,
        slice: &InventoryPlacementDecision,
        why: &str,
    ) -> Result<(), InventoryDecisionError> {
        let namespace = slice.namespace().unwrap_or_default();
        let name = slice.name_any();
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: slice.uid(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        let api: Api<InventoryPlacementDecision> = Api::namespaced(self.client.clone(), &namespace);
        match api.delete(&name, &params).await {
            Ok(_) => {
                info!(%namespace, slice = %name, "deleted a multicluster.x-k8s.io PlacementDecision: {why}");
                Ok(())
            }
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => Ok(()),
            Err(source) => Err(InventoryDecisionError::Write {
                action: format!("deleting PlacementDecision {namespace}/{name} ({why})"),
                source,
            }),
        }
    }

    /// Deletes ferry's slices whose placement is gone.
    async fn sweep(&self) {
        let orphans: Vec<Arc<InventoryPlacementDecision>> = self
            .slices
            .state()
            .into_iter()
            .filter(|s| is_ferrys(s) && s.meta().deletion_timestamp.is_none())
            .filter(|s| {
                let placement = s.labels().get(PLACEMENT_LABEL).cloned().unwrap_or_default();
                let namespace = s.namespace().unwrap_or_default();
                self.placements
                    .get(&ObjectRef::new(&placement).within(&namespace))
                    .is_none()
            })
            .collect();
        for slice in orphans {
            if let Err(error) = self.delete(&slice, "its placement is gone").await {
                warn!(%error, "sweeping PlacementDecisions; retried at the next sweep");
            }
        }
    }
}

async fn reconcile(
    placement: Arc<Placement>,
    ctx: Arc<Context>,
) -> Result<Action, InventoryDecisionError> {
    ctx.ready
        .wait()
        .await
        .map_err(|_| InventoryDecisionError::NotReady)?;
    if placement.meta().deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let namespace = placement.namespace().unwrap_or_default();
    let name = placement.name_any();
    let desired = render(&placement, &ctx.decisions.state(), &ctx.profile_namespace);
    let api: Api<InventoryPlacementDecision> = Api::namespaced(ctx.client.clone(), &namespace);
    let params = PatchParams::apply(INVENTORY_DECISION_FIELD_MANAGER).force();
    let owner = placement.controller_owner_ref(&());
    for slice in &desired {
        let live = ctx
            .slices
            .get(&ObjectRef::new(&slice.name).within(&namespace));
        if let Some(live) = &live
            && !is_ferrys(live)
        {
            warn!(%namespace, slice = %slice.name, scheduler = %live.scheduler_name,
                "a multicluster.x-k8s.io PlacementDecision of this name is another scheduler's; ferry leaves it and publishes no slice under that name");
            continue;
        }
        if !differs(slice, live.as_deref()) {
            continue;
        }
        let body = json!({
            "apiVersion": InventoryPlacementDecision::api_version(&()),
            "kind": InventoryPlacementDecision::kind(&()),
            "metadata": {
                "name": slice.name,
                "namespace": namespace,
                "labels": slice.labels,
                "ownerReferences": owner.iter().collect::<Vec<_>>(),
            },
            "decisions": slice.decisions,
            "schedulerName": SCHEDULER_NAME,
        });
        api.patch(&slice.name, &params, &Patch::Apply(&body))
            .await
            .map_err(|source| InventoryDecisionError::Write {
                action: format!("applying PlacementDecision {namespace}/{}", slice.name),
                source,
            })?;
    }
    // Removals last.
    let wanted: BTreeSet<&str> = desired.iter().map(|s| s.name.as_str()).collect();
    let stale: Vec<Arc<InventoryPlacementDecision>> = ctx
        .slices
        .state()
        .into_iter()
        .filter(|s| {
            is_ferrys(s)
                && s.namespace().as_deref() == Some(namespace.as_str())
                && s.labels().get(PLACEMENT_LABEL) == Some(&name)
                && !wanted.contains(s.name_any().as_str())
        })
        .collect();
    for slice in stale {
        ctx.delete(&slice, "no decision object of its placement backs it")
            .await?;
    }
    Ok(Action::await_change())
}

fn error_policy(
    placement: Arc<Placement>,
    error: &InventoryDecisionError,
    _: Arc<Context>,
) -> Action {
    warn!(placement = %placement.name_any(), %error, "inventory decision controller retrying");
    Action::requeue(Duration::from_secs(2))
}

/// The placement a labelled object (ferry's decision or slice) belongs to.
fn placement_of<K: Resource>(object: &K) -> Option<ObjectRef<Placement>> {
    let name = object.meta().labels.as_ref()?.get(PLACEMENT_LABEL)?;
    let namespace = object.meta().namespace.as_deref()?;
    Some(ObjectRef::new(name).within(namespace))
}

/// Publishes slices until `stop` completes.
async fn publish(
    client: Client,
    profile_namespace: String,
    stop: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let stop = Box::pin(stop).shared();
    let (placements, placement_writer) = reflector::store::<Placement>();
    let (decisions, decision_writer) = reflector::store::<PlacementDecision>();
    let (slices, slice_writer) = reflector::store::<InventoryPlacementDecision>();
    let placement_stream = watch(
        Api::<Placement>::all(client.clone()),
        watcher::Config::default(),
    )
    .reflect(placement_writer)
    .applied_settled();
    let decision_stream = watch(
        Api::<PlacementDecision>::all(client.clone()),
        watcher::Config::default().labels(PLACEMENT_LABEL),
    )
    .reflect(decision_writer)
    .touched_settled();
    // Only slices labelled with a placement: others' are not read.
    let slice_stream = watch(
        Api::<InventoryPlacementDecision>::all(client.clone()),
        watcher::Config::default().labels(PLACEMENT_LABEL),
    )
    .reflect(slice_writer)
    .touched_settled();
    let context = Arc::new(Context {
        client,
        profile_namespace,
        ready: StoresReady::all(vec![
            store_ready(&placements),
            store_ready(&decisions),
            store_ready(&slices),
        ]),
        placements: placements.clone(),
        decisions,
        slices,
    });
    // A slice changed or deleted by someone else is put back.
    let controller = Controller::for_stream(placement_stream, placements)
        .watches_stream(decision_stream, |d: PlacementDecision| placement_of(&d))
        .watches_stream(slice_stream, |s: InventoryPlacementDecision| {
            placement_of(&s)
        })
        .reconcile_all_on(resync_every(RESYNC));
    let sweeping = {
        let ctx = context.clone();
        let stop = stop.clone();
        async move {
            if ctx.ready.wait().await.is_err() {
                return;
            }
            let mut sweeps = tokio::time::interval(RESYNC);
            loop {
                tokio::select! {
                    () = stop.clone() => return,
                    _ = sweeps.tick() => ctx.sweep().await,
                }
            }
        }
    };
    tokio::join!(
        run_controller(
            "inventory placement decisions",
            controller,
            None,
            stop.clone(),
            reconcile,
            error_policy,
            context,
        ),
        sweeping,
    );
}

/// Whether the API server serves the upstream PlacementDecision (a list
/// of at most one; 404 without the CRD). Fails on any other API error.
async fn served(slices: &Api<InventoryPlacementDecision>) -> Result<bool, kube::Error> {
    match slices.list_metadata(&ListParams::default().limit(1)).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(false),
        Err(e) => Err(e),
    }
}

/// Says whether slices are published, once per change.
fn report(serving: bool) {
    if serving {
        info!("publishing each Placement's decisions as multicluster.x-k8s.io PlacementDecisions");
    } else {
        warn!(
            crd = "placementdecisions.multicluster.x-k8s.io",
            "the API server does not serve multicluster.x-k8s.io PlacementDecisions: placements are not published to the cluster inventory until the CRD is installed (sigs.k8s.io/cluster-inventory-api); everything else goes on"
        );
    }
}

/// Runs the vendor-neutral PlacementDecision publisher until `shutdown`
/// completes: while the API server serves the upstream CRD, each
/// Placement's decision objects have their `multicluster.x-k8s.io` slices
/// in its namespace, referring to ClusterProfiles in `profile_namespace`;
/// while not, the hub logs why, sets
/// `metrics.inventory_decisions_publishing` to 0 and checks again every
/// [`CRD_CHECK`]. Never fails: API errors are logged and retried.
pub async fn run_inventory_decision_controller(
    client: Client,
    profile_namespace: String,
    metrics: Arc<HubMetrics>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    let slices: Api<InventoryPlacementDecision> = Api::all(client.clone());
    let gate = Gate {
        what: "PlacementDecisions",
        ready: |serving| serving,
        report: Box::new(report),
        gauge: metrics.inventory_decisions_publishing.clone(),
    };
    run_while_ready(
        gate,
        || served(&slices),
        |stop| publish(client.clone(), profile_namespace.clone(), stop).boxed(),
        shutdown,
    )
    .await;
}
