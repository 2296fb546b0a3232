//! Logs and traces. Structured logs go to stderr (`RUST_LOG` filters them,
//! default `info`; `INQUEST_LOG_FORMAT=json` for JSON lines). Spans always
//! get OpenTelemetry trace ids (an SDK tracer provider runs even with no
//! exporter), so a burst's trace id is in its log lines and in GetSession;
//! when `OTEL_EXPORTER_OTLP_ENDPOINT` is set, spans are also exported over
//! OTLP (gRPC) with the standard `OTEL_*` variables honoured by the
//! exporter (`OTEL_BSP_SCHEDULE_DELAY` and friends for the batch).
//!
//! Span names (documented in docs/ARCHITECTURE.md, "Traces"): `rpc` (one
//! per request, the child of a W3C `traceparent` in its metadata), `burst`
//! (`inquest_engine::runner`), `lease.claim`, `provider.request` (`chain.rs`),
//! `tool.call` (`agent.rs`), `turn.append` (`inquest_engine::burst_log`).

use opentelemetry::{
    propagation::{Extractor, TextMapPropagator},
    trace::{TraceContextExt, TracerProvider as _},
};
use opentelemetry_sdk::{propagation::TraceContextPropagator, trace::SdkTracerProvider};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::{
    EnvFilter, Layer, filter::LevelFilter, filter::Targets, layer::SubscriberExt,
    util::SubscriberInitExt,
};

/// The spans that become OpenTelemetry spans: every inquest crate's (a
/// target prefix) at `info` and above, whatever `RUST_LOG` says of the
/// logs, so trace ids exist even when the logs are cut down to warnings.
const TRACED: &str = "inquest";

/// Log lines go to stderr through [`inquest_redact::redact`]: each
/// event is formatted into one buffer (tracing-subscriber writes an event
/// with one writer), and the buffer is redacted whole when the writer is
/// dropped, so a secret split across `write` calls is still caught.
struct Redacting;

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Redacting {
    type Writer = RedactedLine;

    fn make_writer(&'a self) -> RedactedLine {
        RedactedLine(Vec::new())
    }
}

/// One event's text, written to stderr redacted on drop.
struct RedactedLine(Vec<u8>);

impl std::io::Write for RedactedLine {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for RedactedLine {
    fn drop(&mut self) {
        use std::io::Write as _;
        let text = String::from_utf8_lossy(&self.0);
        let _ = std::io::stderr()
            .lock()
            .write_all(inquest_redact::redact(&text).as_bytes());
    }
}

/// Whether log lines are coloured: only on a terminal, and not when
/// `NO_COLOR` is set (<https://no-color.org>). A log redirected to a file
/// or a pipe would otherwise carry escape codes every reader must strip.
fn colour() -> bool {
    use std::io::IsTerminal as _;
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Keeps the tracer provider alive; [`Telemetry::shutdown`] flushes it.
pub struct Telemetry {
    provider: SdkTracerProvider,
}

impl Telemetry {
    /// Installs the global subscriber. Call once, from `main`.
    pub fn init() -> anyhow::Result<Self> {
        let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
        let json = std::env::var("INQUEST_LOG_FORMAT").is_ok_and(|v| v == "json");
        let fmt = if json {
            tracing_subscriber::fmt::layer()
                .json()
                .with_writer(Redacting)
                .boxed()
        } else {
            tracing_subscriber::fmt::layer()
                .with_ansi(colour())
                .with_writer(Redacting)
                .boxed()
        };
        let mut builder = SdkTracerProvider::builder().with_resource(
            opentelemetry_sdk::Resource::builder()
                .with_service_name("inquest")
                .build(),
        );
        if std::env::var_os("OTEL_EXPORTER_OTLP_ENDPOINT").is_some() {
            let exporter = opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .build()?;
            builder = builder.with_batch_exporter(exporter);
        }
        let provider = builder.build();
        let traced = Targets::new().with_target(TRACED, LevelFilter::INFO);
        let otel = tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("inquest"))
            .with_filter(traced);
        tracing_subscriber::registry()
            .with(fmt.with_filter(filter))
            .with(otel)
            .try_init()?;
        Ok(Self { provider })
    }

    /// Flushes pending spans.
    pub fn shutdown(self) {
        if let Err(e) = self.provider.shutdown() {
            eprintln!("telemetry shutdown: {e}");
        }
    }
}

/// The span of one gRPC request: `rpc`, with its method and trace id. A
/// W3C `traceparent` (and `tracestate`) in the request's metadata makes it
/// that remote span's child, so everything the request starts is in the
/// caller's trace; without one (or with one that does not parse) it starts
/// a new trace.
pub fn rpc_span<B>(req: &tonic::codegen::http::Request<B>) -> tracing::Span {
    let span = tracing::info_span!(
        "rpc",
        method = %req.uri().path(),
        trace_id = tracing::field::Empty,
    );
    let remote = TraceContextPropagator::new().extract(&Metadata(req.headers()));
    if remote.span().span_context().is_valid() {
        // Fails only when no OpenTelemetry layer sees the span (a test's
        // subscriber, or the span filtered out): it stays a plain span.
        let _ = span.set_parent(remote);
    }
    if let Some(id) = trace_id(&span) {
        span.record("trace_id", id.as_str());
    }
    span
}

pub use inquest_engine::trace::{follow, trace_id};

/// Reads W3C trace context from gRPC request metadata (HTTP/2 headers).
struct Metadata<'a>(&'a tonic::codegen::http::HeaderMap);

impl Extractor for Metadata<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(|k| k.as_str()).collect()
    }
}
