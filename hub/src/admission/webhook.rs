//! The hub's validating webhook for ManifestWorks: its registration with
//! the API server (a `ValidatingWebhookConfiguration`), the HTTPS server
//! answering reviews, and the wait until the API server enforces it.

use super::enforced::refused_by;
use super::review;
use super::spec_written::SPEC_WRITTEN;
use super::target::WebhookTarget;
use super::watchdog::PolicyHealth;
use std::future::Future;
use std::time::Duration;

use ferry_semantics::contract::HUB_FIELD_MANAGER;
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, RuleWithOperations, ServiceReference, ValidatingWebhook,
    ValidatingWebhookConfiguration, WebhookClientConfig,
};
use kube::api::{Api, ObjectMeta, Patch, PatchParams};
use prometheus_client::metrics::histogram::Histogram;
use tokio::net::TcpListener;
use tracing::info;

use crate::certs::reload::CertReloads;
use crate::certs::tls::{CertError, ServingCert, TlsListener};
use ferry_api::contract::WORK_GROUP;
use ferry_api::manifest_work::{
    FeedbackRule, FeedbackType, Manifest, ManifestConfigOption, ManifestWork, ManifestWorkSpec,
    ManifestsTemplate, NamedJsonPath, ResourceIdentifier,
};

/// Default of `--max-work-bytes`: the largest ManifestWork (as JSON) the hub
/// admits. The hub API server's etcd refuses writes over 1.5 MiB (its
/// default `--max-request-bytes`); this leaves room under that for the
/// status the hub writes into the same object and for managed fields.
pub const DEFAULT_MAX_WORK_BYTES: usize = 1_400_000;

/// Name of the `ValidatingWebhookConfiguration` the hub applies.
pub const WEBHOOK_CONFIGURATION_NAME: &str = "ferry-hub";

/// Name of the webhook inside it; the API server quotes it in denials.
pub const WEBHOOK_NAME: &str = "manifestworks.work.ferry.dev";

/// Name of the webhook reviewing ManifestWorkReplicaSets (their gates'
/// health expressions against the static cost limit).
pub const REPLICA_SET_WEBHOOK_NAME: &str = "manifestworkreplicasets.work.ferry.dev";

/// How long the API server waits for a review before failing the write.
const WEBHOOK_TIMEOUT_SECONDS: i32 = 10;

/// What the API server does when it cannot reach the webhook
/// (`--webhook-failure-policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum FailurePolicy {
    /// Refuse the write: nothing unchecked is stored, but every spec write
    /// waits for a running hub.
    #[value(name = "Fail")]
    Fail,
    /// Admit the write unchecked by the webhook: the API server's own rules
    /// still apply, and the agent reports what only the webhook checks
    /// (`InvalidIgnorePath`).
    #[default]
    #[value(name = "Ignore")]
    Ignore,
}

impl FailurePolicy {
    /// The value of the webhook's `failurePolicy` field.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fail => "Fail",
            Self::Ignore => "Ignore",
        }
    }
}

/// The admission webhook failed to start or serve.
#[derive(Debug, thiserror::Error)]
pub enum AdmissionError {
    /// The serving certificate is unusable.
    #[error(transparent)]
    Cert(#[from] CertError),
    /// The listener has no local address.
    #[error("webhook listener: {0}")]
    Listener(#[source] std::io::Error),
    /// The API server refused the webhook configuration.
    #[error("applying ValidatingWebhookConfiguration {WEBHOOK_CONFIGURATION_NAME}: {0}")]
    Install(#[source] kube::Error),
    /// The HTTPS server failed.
    #[error("webhook server: {0}")]
    Serve(#[source] std::io::Error),
}

/// Everything the hub needs to serve admission.
pub struct AdmissionOptions {
    /// Where the webhook listens (HTTPS).
    pub listener: TcpListener,
    /// Where the hub API server reaches this listener: a base URL, or the
    /// Service in front of it.
    pub target: WebhookTarget,
    /// Serving certificate; its CA goes into the webhook's `caBundle`.
    pub cert: ServingCert,
    /// Works larger than this many bytes of JSON are refused.
    pub max_work_bytes: usize,
    /// What the API server does while the webhook is unreachable.
    pub failure_policy: FailurePolicy,
}

/// The webhook configuration pointing the API server at `target`, trusting
/// `ca_pem`: CREATE and UPDATE of `manifestworks` (not their status) that
/// write a spec, with `failure_policy`, no side effects.
pub fn webhook_configuration(
    target: &WebhookTarget,
    ca_pem: &str,
    failure_policy: FailurePolicy,
) -> ValidatingWebhookConfiguration {
    ValidatingWebhookConfiguration {
        metadata: ObjectMeta {
            name: Some(WEBHOOK_CONFIGURATION_NAME.into()),
            ..Default::default()
        },
        webhooks: Some(vec![
            webhook(
                WEBHOOK_NAME,
                "manifestworks",
                target.client_config_fields(),
                ca_pem,
                failure_policy,
            ),
            webhook(
                REPLICA_SET_WEBHOOK_NAME,
                "manifestworkreplicasets",
                target.client_config_fields_for(review::REPLICA_SET_REVIEW_PATH),
                ca_pem,
                failure_policy,
            ),
        ]),
    }
}

/// One webhook of the configuration: CREATE and UPDATE of `resource` (not
/// its status) that write a spec, reviewed at `fields`.
fn webhook(
    name: &str,
    resource: &str,
    (url, service): (Option<String>, Option<ServiceReference>),
    ca_pem: &str,
    failure_policy: FailurePolicy,
) -> ValidatingWebhook {
    ValidatingWebhook {
        name: name.into(),
        admission_review_versions: vec!["v1".into()],
        client_config: WebhookClientConfig {
            url,
            ca_bundle: Some(ByteString(ca_pem.as_bytes().to_vec())),
            service,
        },
        rules: Some(vec![RuleWithOperations {
            api_groups: Some(vec![WORK_GROUP.into()]),
            api_versions: Some(vec!["v1alpha1".into()]),
            operations: Some(vec!["CREATE".into(), "UPDATE".into()]),
            // Without "/status": the hub's own status writes are not reviewed.
            resources: Some(vec![resource.into()]),
            scope: Some("Namespaced".into()),
        }]),
        // The API server skips the call when an UPDATE leaves the spec
        // alone (finalizers, labels, the hub's own metadata writes), so
        // those succeed even while no hub is running.
        match_conditions: Some(vec![MatchCondition {
            name: "spec-written".into(),
            expression: SPEC_WRITTEN.into(),
        }]),
        // Ignore (the default) keeps writes independent of the hub
        // process: the API server's own rules still hold, and the hub
        // checks a gate's expression again where it evaluates it.
        failure_policy: Some(failure_policy.as_str().into()),
        side_effects: "None".into(),
        timeout_seconds: Some(WEBHOOK_TIMEOUT_SECONDS),
        ..Default::default()
    }
}

/// Server-side applies [`webhook_configuration`]. Fails when the API server
/// refuses it (typically RBAC: the hub needs `patch` on
/// `validatingwebhookconfigurations`, and `create` too when the apply creates
/// the configuration, which the API server checks as a create).
pub async fn install_webhook(
    client: &kube::Client,
    target: &WebhookTarget,
    ca_pem: &str,
    failure_policy: FailurePolicy,
) -> Result<(), AdmissionError> {
    let api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let config = webhook_configuration(target, ca_pem, failure_policy);
    api.patch(
        WEBHOOK_CONFIGURATION_NAME,
        &PatchParams::apply(HUB_FIELD_MANAGER).force(),
        &Patch::Apply(&config),
    )
    .await
    .map_err(AdmissionError::Install)?;
    info!(%target, failure_policy = failure_policy.as_str(), "ManifestWork admission webhook installed");
    Ok(())
}

/// Serves reviews on `options.listener`, timing each in `review_seconds`,
/// and installs the webhook configuration pointing at it, until `shutdown`
/// completes; with `policies`, refuses the writes the executor policy checks while that
/// policy is not in force (see [`review::router`]). Fails when the
/// certificate is unusable, the configuration is refused, or serving fails.
pub async fn serve(
    client: kube::Client,
    options: AdmissionOptions,
    policies: Option<PolicyHealth>,
    reloads: CertReloads,
    review_seconds: Histogram,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), AdmissionError> {
    // Follows the certificate files, counting reloads in `reloads`.
    let tls = options.cert.server_config(reloads).await?;
    // Accepting starts here, so the webhook answers as soon as the API server
    // learns of it below.
    let listener = TlsListener::new(options.listener, tls).map_err(AdmissionError::Listener)?;
    info!(addr = ?listener_addr(&listener), "hub serving ManifestWork admission");
    install_webhook(
        &client,
        &options.target,
        &options.cert.ca_pem,
        options.failure_policy,
    )
    .await?;
    axum::serve(
        listener,
        review::router(options.max_work_bytes, review_seconds, policies),
    )
    .with_graceful_shutdown(shutdown)
    .await
    .map_err(AdmissionError::Serve)
}

fn listener_addr(listener: &TlsListener) -> Option<std::net::SocketAddr> {
    axum::serve::Listener::local_addr(listener).ok()
}

/// Waits until the API server enforces the webhook: it learns of a new
/// webhook configuration asynchronously, so a write right after
/// [`install_webhook`] may not be reviewed yet. Probes with a dry-run create
/// in `namespace` (nothing is stored) of a work only the webhook refuses: a
/// feedback path that is not JSONPath. Returns false when the webhook is not
/// enforced within `timeout`.
pub async fn wait_until_enforced(
    client: &kube::Client,
    namespace: &str,
    timeout: Duration,
) -> bool {
    let api: Api<ManifestWork> = Api::namespaced(client.clone(), namespace);
    let cm = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                                "metadata": {"name": "probe", "namespace": namespace}});
    let mut probe = ManifestWork::new(
        "ferry-admission-probe",
        ManifestWorkSpec {
            workload: ManifestsTemplate {
                manifests: vec![Manifest(cm)],
            },
            manifest_configs: vec![ManifestConfigOption {
                resource_identifier: ResourceIdentifier {
                    group: String::new(),
                    resource: "configmaps".into(),
                    name: "probe".into(),
                    namespace: namespace.into(),
                },
                feedback_rules: vec![FeedbackRule {
                    type_: FeedbackType::JsonPaths,
                    json_paths: vec![NamedJsonPath {
                        name: "probe".into(),
                        path: "$.data[".into(),
                        version: None,
                    }],
                }],
                ..Default::default()
            }],
            ..Default::default()
        },
    );
    probe.metadata.namespace = Some(namespace.into());
    refused_by(&api, &probe, WEBHOOK_NAME, timeout).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configuration_reviews_spec_writes_of_works_with_the_failure_policy_asked() {
        let config = webhook_configuration(
            &WebhookTarget::Url("https://127.0.0.1:9443/".into()),
            "CA",
            FailurePolicy::Fail,
        );
        let webhooks = config.webhooks.expect("one webhook");
        let webhook = &webhooks[0];
        assert_eq!(webhook.name, WEBHOOK_NAME);
        assert_eq!(
            webhook.client_config.url.as_deref(),
            Some("https://127.0.0.1:9443/validate/manifestworks")
        );
        assert_eq!(
            webhook.client_config.ca_bundle,
            Some(ByteString(b"CA".to_vec()))
        );
        let rules = webhook.rules.as_ref().expect("rules");
        assert_eq!(
            rules[0].resources.as_deref(),
            Some(&["manifestworks".to_string()][..]),
            "not the status subresource"
        );
        assert_eq!(webhook.failure_policy.as_deref(), Some("Fail"));
        let replica_sets = &webhooks[1];
        assert_eq!(replica_sets.name, REPLICA_SET_WEBHOOK_NAME);
        assert_eq!(
            replica_sets.client_config.url.as_deref(),
            Some("https://127.0.0.1:9443/validate/manifestworkreplicasets")
        );
        assert_eq!(
            replica_sets.rules.as_ref().expect("rules")[0]
                .resources
                .as_deref(),
            Some(&["manifestworkreplicasets".to_string()][..])
        );
        let open = webhook_configuration(
            &WebhookTarget::Service("ferry/hook".parse().expect("parses")),
            "CA",
            FailurePolicy::default(),
        );
        let webhooks = open.webhooks.expect("one webhook");
        assert_eq!(webhooks[0].failure_policy.as_deref(), Some("Ignore"));
        let service = webhooks[0]
            .client_config
            .service
            .as_ref()
            .expect("by service");
        assert_eq!(
            (
                service.namespace.as_str(),
                service.name.as_str(),
                service.port
            ),
            ("ferry", "hook", Some(443))
        );
        assert_eq!(webhooks[0].client_config.url, None);
        assert_eq!(webhook.side_effects, "None");
        let conditions = webhook.match_conditions.as_ref().expect("conditions");
        assert!(
            conditions[0]
                .expression
                .contains("object.spec != oldObject.spec")
        );
    }
}
