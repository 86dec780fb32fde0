//! Logging and OpenTelemetry traces for the ferry hub and agent: one
//! subscriber setup, the OTLP exporter when asked for, and the W3C trace
//! context carried inside protocol messages (the agent stream is one
//! long-lived gRPC call carrying many works, so per-call metadata cannot
//! join a work's spans).
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use opentelemetry::propagation::TextMapPropagator as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry::{Context, KeyValue};
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, Sampler, SdkTracerProvider,
};
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// Spans waiting for export at most; further spans are dropped while the
/// collector is slow or away, so memory stays bounded.
pub const MAX_QUEUED_SPANS: usize = 2048;
/// Spans per OTLP export request at most.
pub const MAX_EXPORT_BATCH: usize = 512;
/// How long one export request may take before it is abandoned.
pub const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long shutdown waits for the last spans to be exported.
pub const SHUTDOWN_FLUSH_TIMEOUT: Duration = Duration::from_secs(5);
/// Entries of a received trace-context map that are looked at; a peer
/// sending more is ignored past this (the W3C context has two keys).
pub const MAX_CONTEXT_ENTRIES: usize = 8;
/// Longest value of a received trace-context entry (`tracestate` is at
/// most 512 characters by the W3C recommendation).
pub const MAX_CONTEXT_VALUE_LEN: usize = 512;

// Set once the exporter is installed: while off, no context is ever written
// into a message and nothing is parsed, so tracing costs one atomic load.
static ENABLED: AtomicBool = AtomicBool::new(false);

/// Trace export flags shared by `ferry-hub serve` and `ferry-agent`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct TraceArgs {
    /// OTLP gRPC endpoint (e.g. http://otel-collector:4317) to export
    /// traces to; unset (the default) exports nothing.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT")]
    pub otlp_endpoint: Option<String>,
    /// Fraction (0 to 1) of new traces to record; a trace begun by a peer
    /// follows the peer's decision. Unset: OTEL_TRACES_SAMPLER and
    /// OTEL_TRACES_SAMPLER_ARG decide (default: every trace).
    #[arg(long, env = "FERRY_TRACE_SAMPLING_RATIO", value_parser = parse_ratio)]
    pub trace_sampling_ratio: Option<f64>,
}

/// Setting up logging or trace export failed.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The OTLP exporter could not be built from the endpoint.
    #[error("building the OTLP trace exporter for {endpoint}: {source}")]
    Exporter {
        /// The configured endpoint.
        endpoint: String,
        /// The SDK's error.
        #[source]
        source: opentelemetry_otlp::ExporterBuildError,
    },
    /// A global subscriber was already installed.
    #[error("installing the log and trace subscriber: {0}")]
    Subscriber(#[from] tracing_subscriber::util::TryInitError),
}

/// What a process names itself in traces.
#[derive(Debug, Clone)]
pub struct ServiceIdentity {
    /// `service.name` unless `OTEL_SERVICE_NAME` says otherwise.
    pub service_name: &'static str,
    /// Further resource attributes (e.g. the agent's cluster name).
    pub attributes: Vec<(&'static str, String)>,
}

/// Flushes and stops trace export when the process ends; without export it
/// does nothing.
#[must_use = "dropping the guard without `shutdown` loses the last spans"]
#[derive(Debug)]
pub struct TelemetryGuard {
    provider: Option<SdkTracerProvider>,
}

impl TelemetryGuard {
    /// Exports what is queued, waiting at most [`SHUTDOWN_FLUSH_TIMEOUT`]
    /// (on a blocking thread, so the runtime keeps running); spans the
    /// collector did not take by then are lost, which is logged.
    pub async fn shutdown(self) {
        let Some(provider) = self.provider else {
            return;
        };
        let flushed = tokio::task::spawn_blocking(move || {
            provider.shutdown_with_timeout(SHUTDOWN_FLUSH_TIMEOUT)
        });
        match tokio::time::timeout(SHUTDOWN_FLUSH_TIMEOUT, flushed).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(error))) => tracing::warn!(%error, "flushing traces at shutdown"),
            Ok(Err(error)) => tracing::warn!(%error, "flushing traces at shutdown"),
            Err(_) => tracing::warn!("flushing traces at shutdown timed out"),
        }
    }
}

/// Installs the global subscriber: logs (JSON when `json`) filtered by
/// `RUST_LOG` (default `info`), plus OTLP trace export when `args` names an
/// endpoint. Must run inside a tokio runtime (the gRPC exporter's channel
/// lives on it). Fails when the exporter cannot be built or a subscriber is
/// already installed.
pub fn init(
    json: bool,
    args: &TraceArgs,
    identity: ServiceIdentity,
) -> Result<TelemetryGuard, TelemetryError> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // One of the two formatters; an absent layer is a no-op.
    // RUST_LOG filters the logs only: a hub logging at `warn` still
    // exports its info-level spans.
    let logs = if json {
        tracing_subscriber::fmt::layer()
            .json()
            .with_filter(filter)
            .boxed()
    } else {
        tracing_subscriber::fmt::layer().with_filter(filter).boxed()
    };
    let (otel, provider) = match args.otlp_endpoint.as_deref().filter(|e| !e.is_empty()) {
        Some(endpoint) => {
            let provider = tracer_provider(endpoint, args.trace_sampling_ratio, identity)?;
            let tracer = provider.tracer("ferry");
            let layer = tracing_opentelemetry::layer()
                .with_tracer(tracer)
                .with_filter(traced_spans());
            (Some(layer), Some(provider))
        }
        None => (None, None),
    };
    tracing_subscriber::registry()
        .with(logs)
        .with(otel)
        .try_init()?;
    if provider.is_some() {
        ENABLED.store(true, Ordering::Release);
    }
    Ok(TelemetryGuard { provider })
}

/// What is exported: ferry's own spans at `info` and above (the work's
/// journey), not the debug spans of the libraries under it.
fn traced_spans() -> tracing_subscriber::filter::Targets {
    tracing_subscriber::filter::Targets::new()
        .with_target("ferry_hub", tracing::Level::INFO)
        .with_target("ferry_agent", tracing::Level::INFO)
}

fn tracer_provider(
    endpoint: &str,
    ratio: Option<f64>,
    identity: ServiceIdentity,
) -> Result<SdkTracerProvider, TelemetryError> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_endpoint(endpoint)
        .with_timeout(EXPORT_TIMEOUT)
        .build()
        .map_err(|source| TelemetryError::Exporter {
            endpoint: endpoint.to_owned(),
            source,
        })?;
    // The SDK's batch processor exports from a thread of its own, never
    // from a runtime worker; its queue is fixed and drops when full.
    let batch = BatchConfigBuilder::default()
        .with_max_queue_size(MAX_QUEUED_SPANS)
        .with_max_export_batch_size(MAX_EXPORT_BATCH)
        .build();
    let processor = BatchSpanProcessor::builder(exporter)
        .with_batch_config(batch)
        .build();
    let mut resource = opentelemetry_sdk::Resource::builder();
    // OTEL_SERVICE_NAME wins over the built-in name (the SDK's environment
    // detector reads it; setting the name here would override it).
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name(identity.service_name);
    }
    let resource = resource
        .with_attributes(
            identity
                .attributes
                .into_iter()
                .map(|(key, value)| KeyValue::new(key, value)),
        )
        .build();
    let mut builder = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_resource(resource);
    // Without the flag the SDK's default reads OTEL_TRACES_SAMPLER(_ARG).
    if let Some(ratio) = ratio {
        builder = builder.with_sampler(sampler(ratio));
    }
    Ok(builder.build())
}

/// Parent-based ratio sampling: a trace begun here is kept with probability
/// `ratio`; a trace continued from a peer's context keeps the peer's choice,
/// so an agent records exactly the traces the hub records.
pub fn sampler(ratio: f64) -> Sampler {
    Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(ratio)))
}

/// Parses a sampling ratio: a number from 0 to 1. Fails with a message for
/// anything else.
pub fn parse_ratio(text: &str) -> Result<f64, String> {
    let ratio: f64 = text
        .trim()
        .parse()
        .map_err(|e| format!("{text:?} is not a number: {e}"))?;
    if (0.0..=1.0).contains(&ratio) {
        Ok(ratio)
    } else {
        Err(format!("{text} is outside 0..=1"))
    }
}

/// Whether spans are exported (set by [`init`] with an endpoint).
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Acquire)
}

/// The span `make` builds while export is on, else a disabled span, so a
/// process without an exporter does not even build the span's fields.
pub fn span(make: impl FnOnce() -> tracing::Span) -> tracing::Span {
    if enabled() {
        make()
    } else {
        tracing::Span::none()
    }
}

/// The W3C trace context (`traceparent`, `tracestate`) of `span`, to put
/// into an outgoing message. Empty while export is off or the span is not
/// sampled-in, so nothing is written to the wire then.
pub fn inject(span: &tracing::Span) -> HashMap<String, String> {
    if !enabled() {
        return HashMap::new();
    }
    inject_context(&span.context())
}

/// The W3C fields of `context`; empty when it carries no valid span.
pub fn inject_context(context: &Context) -> HashMap<String, String> {
    let mut carrier = HashMap::new();
    TraceContextPropagator::new().inject_context(context, &mut carrier);
    carrier
}

/// Makes the context a peer sent (see [`inject`]) the parent of `span`.
/// Does nothing while export is off or the map holds no valid context; a
/// map beyond [`MAX_CONTEXT_ENTRIES`] entries or with overlong values is
/// ignored whole.
pub fn set_parent(span: &tracing::Span, carrier: &HashMap<String, String>) {
    if !enabled() || carrier.is_empty() {
        return;
    }
    if let Some(context) = extract(carrier) {
        // An error means the span is disabled or already started: nothing
        // to join then.
        let _ = span.set_parent(context);
    }
}

/// The remote context in `carrier`, or `None` when it is oversized or holds
/// no valid `traceparent`.
pub fn extract(carrier: &HashMap<String, String>) -> Option<Context> {
    if carrier.len() > MAX_CONTEXT_ENTRIES
        || carrier.values().any(|v| v.len() > MAX_CONTEXT_VALUE_LEN)
    {
        return None;
    }
    use opentelemetry::trace::TraceContextExt as _;
    let context = TraceContextPropagator::new().extract(carrier);
    context.span().span_context().is_valid().then_some(context)
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::{
        SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState,
    };

    fn remote(sampled: bool) -> Context {
        let flags = if sampled {
            TraceFlags::SAMPLED
        } else {
            TraceFlags::default()
        };
        Context::new().with_remote_span_context(SpanContext::new(
            TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").expect("hex"),
            SpanId::from_hex("00f067aa0ba902b7").expect("hex"),
            flags,
            true,
            TraceState::default(),
        ))
    }

    #[test]
    fn context_round_trips_through_the_w3c_fields() {
        let carrier = inject_context(&remote(true));
        assert_eq!(
            carrier.get("traceparent").map(String::as_str),
            Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
        );
        let back = extract(&carrier).expect("valid context");
        assert_eq!(
            back.span().span_context().trace_id(),
            remote(true).span().span_context().trace_id()
        );
        assert!(back.span().span_context().is_sampled());
    }

    #[test]
    fn an_empty_context_writes_nothing() {
        assert!(inject_context(&Context::new()).is_empty());
    }

    #[test]
    fn garbage_and_oversized_maps_are_ignored() {
        let garbage = HashMap::from([("traceparent".to_owned(), "not-a-context".to_owned())]);
        assert!(extract(&garbage).is_none());
        let mut huge = inject_context(&remote(true));
        huge.insert("tracestate".into(), "a".repeat(MAX_CONTEXT_VALUE_LEN + 1));
        assert!(extract(&huge).is_none());
        let many: HashMap<_, _> = (0..=MAX_CONTEXT_ENTRIES)
            .map(|i| (format!("k{i}"), String::new()))
            .collect();
        assert!(extract(&many).is_none());
    }

    #[test]
    fn unsampled_peers_stay_unsampled() {
        let carrier = inject_context(&remote(false));
        let back = extract(&carrier).expect("valid context");
        assert!(!back.span().span_context().is_sampled());
    }

    #[test]
    fn ratio_is_checked() {
        assert_eq!(parse_ratio("0.25"), Ok(0.25));
        assert_eq!(parse_ratio("1"), Ok(1.0));
        assert!(parse_ratio("1.5").is_err());
        assert!(parse_ratio("-0.1").is_err());
        assert!(parse_ratio("half").is_err());
        assert!(parse_ratio("NaN").is_err());
    }

    #[test]
    fn off_by_default_writes_and_reads_nothing() {
        // No `init` in unit tests: export is off.
        assert!(inject(&tracing::Span::current()).is_empty());
    }
}
