//! Applies every manifest of one work in order and describes the result as a
//! `WorkStatus` for the hub.

use std::sync::Arc;

use ferry_proto::v1;
use kube::Client;
use kube::core::GroupVersionKind;
use serde_json::Value;

use crate::applier::{ApplyError, api_for, server_side_apply};
use crate::conditions::{APPLIED, condition};
use crate::discovery::{KindResolver, ResolveError};
use crate::semantics::{ManifestError, ManifestIdentity, apply_order, config_for, identify};

/// The outcome of one pass over a work.
pub struct Reconciled {
    /// What to report to the hub.
    pub status: v1::WorkStatus,
    /// Whether some manifest failed in a way that may pass on a later try.
    pub retry: bool,
}

/// Why one manifest is not applied.
#[derive(Debug, thiserror::Error)]
enum ManifestFailure {
    #[error(transparent)]
    Invalid(#[from] ManifestError),
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    #[error(transparent)]
    Apply(#[from] ApplyError),
}

impl ManifestFailure {
    fn reason(&self) -> &'static str {
        match self {
            ManifestFailure::Invalid(e) => e.reason(),
            ManifestFailure::Resolve(ResolveError::UnknownKind { .. }) => "UnknownKind",
            ManifestFailure::Resolve(ResolveError::Discovery { .. }) => "DiscoveryFailed",
            ManifestFailure::Apply(e) => e.reason(),
        }
    }

    fn is_transient(&self) -> bool {
        match self {
            ManifestFailure::Invalid(_) => false,
            // A CRD may be installed on the spoke later.
            ManifestFailure::Resolve(_) => true,
            ManifestFailure::Apply(e) => e.is_transient(),
        }
    }
}

/// Applies works to one spoke.
pub struct Reconciler {
    client: Client,
    resolver: Arc<KindResolver>,
}

impl Reconciler {
    /// A reconciler writing with `client`.
    pub fn new(client: Client, resolver: Arc<KindResolver>) -> Self {
        Self { client, resolver }
    }

    /// Applies `upsert` and reports the result. Never fails as a whole: each
    /// manifest's problem becomes that manifest's condition, and the other
    /// manifests are still applied.
    pub async fn reconcile(&self, upsert: &v1::WorkUpsert) -> Reconciled {
        let generation = upsert.generation;
        let spec = upsert.spec.clone().unwrap_or_default();
        let parsed: Vec<Result<(Value, ManifestIdentity), ManifestError>> = spec
            .manifests_json
            .iter()
            .map(|raw| identify(raw))
            .collect();
        let identities: Vec<Option<&ManifestIdentity>> = parsed
            .iter()
            .map(|p| p.as_ref().ok().map(|(_, id)| id))
            .collect();
        let order = apply_order(&identities);

        let mut manifests: Vec<Option<v1::ManifestStatus>> = vec![None; parsed.len()];
        let mut retry = false;
        for index in order {
            let ordinal = i32::try_from(index).unwrap_or(i32::MAX);
            let mut meta = v1::ResourceMeta {
                ordinal,
                ..Default::default()
            };
            let result = match &parsed[index] {
                Err(e) => Err(ManifestFailure::from(e.clone())),
                Ok((value, identity)) => {
                    meta.group = identity.group.clone();
                    meta.version = identity.version.clone();
                    meta.kind = identity.kind.clone();
                    meta.name = identity.name.clone();
                    meta.namespace = identity.namespace.clone().unwrap_or_default();
                    self.apply_one(value, identity, &spec.manifest_configs, &mut meta)
                        .await
                }
            };
            let applied = match result {
                Ok(()) => condition(
                    APPLIED,
                    true,
                    "AppliedManifestComplete",
                    "Apply manifest complete",
                    generation,
                ),
                Err(failure) => {
                    retry |= failure.is_transient();
                    condition(
                        APPLIED,
                        false,
                        failure.reason(),
                        failure.to_string(),
                        generation,
                    )
                }
            };
            manifests[index] = Some(v1::ManifestStatus {
                resource_meta: Some(meta),
                conditions: vec![applied],
                feedback: vec![],
            });
        }
        let manifests: Vec<v1::ManifestStatus> = manifests.into_iter().flatten().collect();
        let work_applied = work_applied_condition(&manifests, generation);
        Reconciled {
            status: v1::WorkStatus {
                work: upsert.work.clone(),
                generation,
                conditions: vec![work_applied],
                manifests,
            },
            retry,
        }
    }

    async fn apply_one(
        &self,
        value: &Value,
        identity: &ManifestIdentity,
        configs: &[v1::ManifestConfig],
        meta: &mut v1::ResourceMeta,
    ) -> Result<(), ManifestFailure> {
        let gvk = GroupVersionKind::gvk(&identity.group, &identity.version, &identity.kind);
        let (resource, caps) = self.resolver.resolve(&gvk).await?;
        meta.resource = resource.plural.clone();
        let api = api_for(&self.client, &resource, &caps, identity);
        let namespace = identity.namespace.as_deref().unwrap_or_default();
        let config = config_for(
            configs,
            &identity.group,
            &resource.plural,
            namespace,
            &identity.name,
        );
        let ssa = config
            .and_then(|c| c.update_strategy.as_ref())
            .and_then(|s| s.server_side_apply.as_ref());
        match server_side_apply(&self.client, &api, identity, value, ssa).await {
            Err(ApplyError::Rejected { message, .. })
                if message.contains("the server could not find the requested resource") =>
            {
                // The kind vanished since it was cached (CRD deleted); look again next time.
                self.resolver.forget(&gvk).await;
                Err(ResolveError::UnknownKind {
                    api_version: identity.api_version(),
                    kind: identity.kind.clone(),
                }
                .into())
            }
            other => other.map_err(ManifestFailure::from),
        }
    }
}

fn work_applied_condition(manifests: &[v1::ManifestStatus], generation: i64) -> v1::Condition {
    let failed: Vec<String> = manifests
        .iter()
        .filter_map(|m| {
            let c = m.conditions.iter().find(|c| c.r#type == APPLIED)?;
            (c.status != "True").then(|| {
                let meta = m.resource_meta.clone().unwrap_or_default();
                format!(
                    "#{} {} {}: {}",
                    meta.ordinal, meta.kind, meta.name, c.reason
                )
            })
        })
        .collect();
    if failed.is_empty() {
        condition(
            APPLIED,
            true,
            "AppliedManifestWorkComplete",
            format!("All {} manifests are applied", manifests.len()),
            generation,
        )
    } else {
        condition(
            APPLIED,
            false,
            "AppliedManifestWorkFailed",
            format!(
                "{} of {} manifests are not applied: {}",
                failed.len(),
                manifests.len(),
                failed.join("; ")
            ),
            generation,
        )
    }
}
