//! The admin HTTP listener (`[admin] listen`, default `127.0.0.1:9464`):
//! `/metrics` in the Prometheus text format, `/healthz` (the process
//! answers) and `/readyz` (serving, and the database probe of
//! `health.rs` is fresh and good) for plain HTTP probes.
//!
//! Metrics go through the `metrics` facade into one process-wide
//! Prometheus recorder ([`handle`]); every label has a bounded set of
//! values (method names, exit reasons, store operations, lanes), never a
//! session id. RPCs are counted by [`Measured`], a layer around the
//! generated service that reads each call's final `grpc-status`.

use std::{
    convert::Infallible,
    net::SocketAddr,
    pin::Pin,
    sync::{
        Arc, OnceLock,
        atomic::{AtomicBool, Ordering},
    },
    task::{Context, Poll},
    time::{Duration, Instant},
};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::Full;
use inquest_proto::rpc::Rpc;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tokio::net::TcpListener;
use tokio_util::{sync::CancellationToken, task::TaskTracker};
use tonic::{
    codegen::{Service, http},
    server::NamedService,
};

use crate::ops::health::Readiness;
use crate::watch::WatchMetrics;
use inquest_engine::runner::Runner;

/// Latency buckets, in seconds, of every histogram here.
const BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// What the admin listener lets connections cost: a probe or a scrape is
/// one short request, so few connections, short deadlines.
const ADMIN_LIMITS: crate::edge::conn::ConnectionLimits = crate::edge::conn::ConnectionLimits {
    max_connections: 256,
    preface_timeout: Duration::from_secs(5),
    idle_timeout: Duration::from_secs(60),
};
/// How long a request's headers may take to arrive.
const ADMIN_HEADER_TIMEOUT: Duration = Duration::from_secs(5);

/// How often histogram storage is compacted.
const UPKEEP_EVERY: Duration = Duration::from_secs(5);

/// The process-wide recorder. Installed on first use; a process where
/// something else installed a global recorder first still renders (an
/// empty page) rather than failing to start.
pub fn handle() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let builder = || {
            PrometheusBuilder::new()
                .set_buckets(BUCKETS)
                .unwrap_or_else(|_| PrometheusBuilder::new())
        };
        match builder().install_recorder() {
            Ok(handle) => {
                crate::ops::metrics::describe();
                handle
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot install the metrics recorder; /metrics will be empty");
                builder().build_recorder().handle()
            }
        }
    })
}

/// What `/metrics` and `/readyz` read besides the recorder.
#[derive(Clone)]
pub struct AdminState {
    pub readiness: Readiness,
    pub serving: Arc<AtomicBool>,
    pub watch: Arc<WatchMetrics>,
    pub runner: Runner,
    pub store: inquest_store::Store,
}

impl AdminState {
    /// Gauges that are read, not counted: set just before a scrape.
    fn refresh_gauges(&self) {
        metrics::gauge!("inquest_bursts_running").set(self.runner.running_bursts() as f64);
        metrics::gauge!("inquest_bursts_max").set(self.runner.max_running_bursts() as f64);
        metrics::gauge!("inquest_watch_streams").set(self.watch.slots.open() as f64);
        metrics::counter!("inquest_watch_streams_opened_total")
            .absolute(self.watch.streams_opened.load(Ordering::Relaxed));
        metrics::counter!("inquest_watch_lagged_total")
            .absolute(self.watch.streams_lagged.load(Ordering::Relaxed));
        metrics::counter!("inquest_watch_events_dropped_total")
            .absolute(self.watch.dropped_events.load(Ordering::Relaxed));
        for lane in self.store.pool_status() {
            metrics::gauge!("inquest_store_pool_connections", "lane" => lane.lane)
                .set(lane.size as f64);
            metrics::gauge!("inquest_store_pool_idle", "lane" => lane.lane)
                .set(lane.available as f64);
            metrics::gauge!("inquest_store_pool_waiting", "lane" => lane.lane)
                .set(lane.waiting as f64);
            metrics::gauge!("inquest_store_pool_max", "lane" => lane.lane)
                .set(lane.max_size as f64);
        }
    }
}

/// Serves the admin endpoints on `listener` until `shutdown`, in tasks
/// `tasks` owns. Returns the bound address.
pub fn serve(
    listener: TcpListener,
    state: AdminState,
    tasks: &TaskTracker,
    shutdown: CancellationToken,
) -> std::io::Result<SocketAddr> {
    let bound = listener.local_addr()?;
    let prometheus = handle();
    let upkeep_stop = shutdown.clone();
    tasks.spawn(async move {
        loop {
            tokio::select! {
                () = upkeep_stop.cancelled() => return,
                () = tokio::time::sleep(UPKEEP_EVERY) => prometheus.run_upkeep(),
            }
        }
    });
    // The same gate as the gRPC port (`edge/conn.rs`): a cap, a deadline
    // for the first bytes and for a request's headers, an idle timeout,
    // and an accept loop that backs off.
    let mut accepted = crate::edge::conn::incoming(listener, ADMIN_LIMITS, tasks, shutdown.clone());
    let connections = tasks.clone();
    tasks.spawn(async move {
        loop {
            let stream = tokio::select! {
                () = shutdown.cancelled() => return,
                next = tokio_stream::StreamExt::next(&mut accepted) => match next {
                    Some(Ok(stream)) => stream,
                    Some(Err(_)) => continue,
                    None => return,
                },
            };
            let state = state.clone();
            let stop = shutdown.clone();
            let peer = tonic::transport::server::Connected::connect_info(&stream);
            connections.spawn(async move {
                let service = hyper::service::service_fn(move |request| {
                    let state = state.clone();
                    let _busy = peer.begin_request();
                    std::future::ready(Ok::<_, Infallible>(answer(&state, &request)))
                });
                let connection = hyper::server::conn::http1::Builder::new()
                    .timer(hyper_util::rt::TokioTimer::new())
                    .header_read_timeout(ADMIN_HEADER_TIMEOUT)
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
                tokio::pin!(connection);
                tokio::select! {
                    _ = &mut connection => {}
                    () = stop.cancelled() => connection.as_mut().graceful_shutdown(),
                }
            });
        }
    });
    Ok(bound)
}

fn answer<B>(state: &AdminState, request: &http::Request<B>) -> http::Response<Full<Bytes>> {
    let reply = |status: u16, content_type: &str, body: String| {
        http::Response::builder()
            .status(status)
            .header("content-type", content_type)
            .body(Full::new(Bytes::from(body)))
            .unwrap_or_default()
    };
    if request.method() != http::Method::GET {
        return reply(405, "text/plain", "only GET\n".into());
    }
    match request.uri().path() {
        "/metrics" => {
            state.refresh_gauges();
            reply(200, "text/plain; version=0.0.4", handle().render())
        }
        "/healthz" => reply(200, "text/plain", "ok\n".into()),
        "/readyz" => {
            if !state.serving.load(Ordering::SeqCst) {
                reply(
                    503,
                    "text/plain",
                    "not serving yet (or shutting down)\n".into(),
                )
            } else if !state.readiness.ready() {
                reply(
                    503,
                    "text/plain",
                    "database probe failing or stale\n".into(),
                )
            } else {
                reply(200, "text/plain", "ready\n".into())
            }
        }
        _ => reply(
            404,
            "text/plain",
            "not found: /metrics, /healthz, /readyz\n".into(),
        ),
    }
}

/// Counts every call of the wrapped gRPC service by method and final
/// code (`inquest_rpc_requests_total`) and times it to its end
/// (`inquest_rpc_duration_seconds`; for a stream, its whole life). The
/// code is the response's `grpc-status`: in its headers for a
/// trailers-only answer, else in its trailers; a response dropped before
/// either (the client went away) counts as `CANCELLED`.
#[derive(Debug, Clone)]
pub struct Measured<S> {
    inner: S,
}

impl<S> Measured<S> {
    pub fn new(inner: S) -> Self {
        Self { inner }
    }
}

impl<S: NamedService> NamedService for Measured<S> {
    const NAME: &'static str = S::NAME;
}

impl<S, B> Service<http::Request<B>> for Measured<S>
where
    S: Service<http::Request<B>, Response = http::Response<tonic::body::Body>, Error = Infallible>
        + NamedService,
    S::Future: Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let method = method_label(S::NAME, request.uri().path());
        let started = Instant::now();
        let call = self.inner.call(request);
        Box::pin(async move {
            let response = call.await?;
            let mut tally = Tally {
                method,
                started,
                done: false,
            };
            if let Some(code) = grpc_status(response.headers()) {
                tally.record(code);
                return Ok(response);
            }
            Ok(response.map(|body| tonic::body::Body::new(MeasuredBody { inner: body, tally })))
        })
    }
}

/// The method `path` names when it belongs to `service`: its name from
/// the generated table, so every RPC has its own label and the label set
/// stays bounded (unknown paths share one).
fn method_label(service: &str, path: &str) -> &'static str {
    match Rpc::from_path(path) {
        Some(rpc) if service == Rpc::SERVICE => rpc.name(),
        _ => "unknown",
    }
}

fn grpc_status(headers: &http::HeaderMap) -> Option<tonic::Code> {
    headers
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<i32>().ok())
        .map(tonic::Code::from)
}

/// One call's count, recorded exactly once.
struct Tally {
    method: &'static str,
    started: Instant,
    done: bool,
}

impl Tally {
    fn record(&mut self, code: tonic::Code) {
        if self.done {
            return;
        }
        self.done = true;
        let code = code_label(code);
        metrics::counter!("inquest_rpc_requests_total", "method" => self.method, "code" => code)
            .increment(1);
        metrics::histogram!("inquest_rpc_duration_seconds", "method" => self.method)
            .record(self.started.elapsed().as_secs_f64());
    }
}

impl Drop for Tally {
    fn drop(&mut self) {
        self.record(tonic::Code::Cancelled);
    }
}

pub(crate) fn code_label(code: tonic::Code) -> &'static str {
    use tonic::Code::*;
    match code {
        Ok => "OK",
        Cancelled => "CANCELLED",
        Unknown => "UNKNOWN",
        InvalidArgument => "INVALID_ARGUMENT",
        DeadlineExceeded => "DEADLINE_EXCEEDED",
        NotFound => "NOT_FOUND",
        AlreadyExists => "ALREADY_EXISTS",
        PermissionDenied => "PERMISSION_DENIED",
        ResourceExhausted => "RESOURCE_EXHAUSTED",
        FailedPrecondition => "FAILED_PRECONDITION",
        Aborted => "ABORTED",
        OutOfRange => "OUT_OF_RANGE",
        Unimplemented => "UNIMPLEMENTED",
        Internal => "INTERNAL",
        Unavailable => "UNAVAILABLE",
        DataLoss => "DATA_LOSS",
        Unauthenticated => "UNAUTHENTICATED",
    }
}

/// A response body that records its call's code from its trailers.
struct MeasuredBody {
    inner: tonic::body::Body,
    tally: Tally,
}

impl Body for MeasuredBody {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, tonic::Status>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(code) = frame.trailers_ref().and_then(grpc_status) {
                    self.tally.record(code);
                }
            }
            Poll::Ready(Some(Err(status))) => {
                let code = status.code();
                self.tally.record(code);
            }
            Poll::Ready(None) => self.tally.record(tonic::Code::Unknown),
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn method_labels_are_bounded() {
        let service = "inquest.v1.Investigations";
        assert_eq!(
            method_label(service, "/inquest.v1.Investigations/GetSession"),
            "GetSession"
        );
        assert_eq!(
            method_label(service, "/inquest.v1.Investigations/Nope"),
            "unknown"
        );
        assert_eq!(method_label(service, "/other.Svc/GetSession"), "unknown");
        assert_eq!(method_label(service, ""), "unknown");
    }

    #[test]
    fn every_code_has_its_name() {
        for (n, name) in [(0, "OK"), (3, "INVALID_ARGUMENT"), (14, "UNAVAILABLE")] {
            assert_eq!(code_label(tonic::Code::from(n)), name);
        }
    }
}
