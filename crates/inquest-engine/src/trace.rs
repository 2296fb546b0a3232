//! Linking a burst's span to the trace of the request that started it.

use opentelemetry::trace::TraceContextExt as _;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// Makes `parent`'s span the OpenTelemetry parent of `span` (not yet
/// entered), without making it its tracing parent: `span` may outlive it
/// (a burst its request started) without keeping it open.
pub fn follow(span: &tracing::Span, parent: &tracing::Span) {
    let cx = parent.context();
    if cx.span().span_context().is_valid() {
        let _ = span.set_parent(cx);
    }
}

/// `span`'s trace id (32 lowercase hex digits), `None` when no
/// OpenTelemetry layer traces it.
pub fn trace_id(span: &tracing::Span) -> Option<String> {
    let cx = span.context();
    let context = cx.span().span_context().clone();
    context.is_valid().then(|| context.trace_id().to_string())
}
