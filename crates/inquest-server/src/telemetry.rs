//! Logs and traces. Structured logs go to stderr (`RUST_LOG` filters them,
//! default `info`; `INQUEST_LOG_FORMAT=json` for JSON lines). When
//! `OTEL_EXPORTER_OTLP_ENDPOINT` is set, spans are also exported over OTLP
//! (gRPC) with the standard `OTEL_*` variables honoured by the exporter.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::{EnvFilter, Layer, layer::SubscriberExt, util::SubscriberInitExt};

/// Log lines go to stderr through [`inquest_core::redact::redact`]: each
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
            .write_all(inquest_core::redact::redact(&text).as_bytes());
    }
}

/// Keeps the exporter alive; [`Telemetry::shutdown`] flushes it.
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
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
                .with_writer(Redacting)
                .boxed()
        };
        let provider = if std::env::var_os("OTEL_EXPORTER_OTLP_ENDPOINT").is_some() {
            let exporter = opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .build()?;
            Some(
                SdkTracerProvider::builder()
                    .with_batch_exporter(exporter)
                    .with_resource(
                        opentelemetry_sdk::Resource::builder()
                            .with_service_name("inquest")
                            .build(),
                    )
                    .build(),
            )
        } else {
            None
        };
        let otel = provider
            .as_ref()
            .map(|p| tracing_opentelemetry::layer().with_tracer(p.tracer("inquest")));
        tracing_subscriber::registry()
            .with(filter)
            .with(fmt)
            .with(otel)
            .try_init()?;
        Ok(Self { provider })
    }

    /// Flushes pending spans.
    pub fn shutdown(self) {
        if let Some(p) = self.provider
            && let Err(e) = p.shutdown()
        {
            eprintln!("telemetry shutdown: {e}");
        }
    }
}
