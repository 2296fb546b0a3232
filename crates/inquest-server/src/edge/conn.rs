//! What a connection on the gRPC port may cost before it proves itself,
//! and after: at most `[limits] max_connections` are open at once (one
//! past it is closed as soon as it is accepted, so the process never
//! reaches its open-files limit and open connections keep working); one
//! that has not sent its first [`PREFACE_BYTES`] within
//! `limits.connection_preface_timeout` is closed; and one with no request
//! open for `limits.idle_connection_timeout` is closed. Accept errors back
//! off instead of spinning. (Connections whose peer stops answering HTTP/2
//! keepalive pings are closed too; see `startup.rs`.) TLS connections go
//! through the same gate before their handshake (`edge/tls.rs`).
//!
//! A connection's open requests are counted by [`CountRequests`], a layer
//! that finds the connection's [`Activity`] in the request's connect info
//! ([`PeerInfo`]) and holds it until the response body is dropped: a
//! watch stream keeps its connection busy for as long as it runs.

use std::{
    future::Future,
    io,
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicU64, AtomicUsize, Ordering},
    },
    task::{Context, Poll},
    time::Duration,
};

use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::{TcpListener, TcpStream},
    sync::{OwnedSemaphorePermit, Semaphore},
    time::{Instant, Sleep},
};
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::{sync::CancellationToken, task::TaskTracker};
use tonic::{
    codegen::{Service, http},
    transport::server::{Connected, TcpConnectInfo, TlsConnectInfo},
};

/// The HTTP/2 client preface is 24 bytes; an HTTP/1.1 request line for
/// gRPC-Web is longer, and so is a TLS ClientHello. A connection is past
/// its deadline once this much arrived.
pub const PREFACE_BYTES: usize = 24;

/// The first pause after a failed accept (out of descriptors, say); it
/// doubles up to a second.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(10);

/// How a listener limits its connections.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    pub max_connections: usize,
    pub preface_timeout: Duration,
    /// A connection with no request open this long is closed.
    pub idle_timeout: Duration,
}

/// Accepts on `listener` until `shutdown`, in a task `tasks` owns, within
/// `limits`. The stream ends when the listener task does.
pub fn incoming(
    listener: TcpListener,
    limits: ConnectionLimits,
    tasks: &TaskTracker,
    shutdown: CancellationToken,
) -> ReceiverStream<io::Result<Guarded>> {
    // A short queue: the server takes connections as fast as they come;
    // the cap is the semaphore, not this.
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    let open = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    tasks.spawn(async move {
        let mut backoff = inquest_core::Backoff::new(ACCEPT_BACKOFF, Duration::from_secs(1));
        loop {
            let accepted = tokio::select! {
                () = shutdown.cancelled() => return,
                accepted = listener.accept() => accepted,
            };
            let (stream, peer) = match accepted {
                Ok(a) => {
                    backoff.reset();
                    a
                }
                Err(e) => {
                    metrics::counter!("inquest_connections_refused_total", "why" => "accept_error")
                        .increment(1);
                    tracing::debug!(error = %e, "accepting a connection failed");
                    tokio::select! {
                        () = shutdown.cancelled() => return,
                        () = tokio::time::sleep(backoff.next_delay()) => continue,
                    }
                }
            };
            let Ok(permit) = Arc::clone(&open).try_acquire_owned() else {
                // Closed at once: its descriptor is back before the next
                // accept, and the open connections are untouched.
                metrics::counter!("inquest_connections_refused_total", "why" => "max_connections")
                    .increment(1);
                drop(stream);
                continue;
            };
            // See `startup.rs`: small watch frames must not wait for an ACK.
            if let Err(e) = stream.set_nodelay(true) {
                tracing::debug!(error = %e, %peer, "cannot set TCP_NODELAY");
            }
            let guarded = Guarded::new(stream, permit, limits);
            if tx.send(Ok(guarded)).await.is_err() {
                return;
            }
        }
    });
    ReceiverStream::new(rx)
}

/// How busy one connection is: its open requests, and since when it has
/// had none.
#[derive(Debug)]
pub struct Activity {
    open: AtomicUsize,
    /// Milliseconds after `epoch` at which the last request ended.
    quiet_since_ms: AtomicU64,
    epoch: Instant,
}

impl Activity {
    fn new() -> Self {
        Self {
            open: AtomicUsize::new(0),
            quiet_since_ms: AtomicU64::new(0),
            epoch: Instant::now(),
        }
    }

    fn begin(self: &Arc<Self>) -> RequestOpen {
        self.open.fetch_add(1, Ordering::AcqRel);
        RequestOpen(Arc::clone(self))
    }

    /// When the connection went quiet, if it has no request open now.
    fn quiet_since(&self) -> Option<Instant> {
        (self.open.load(Ordering::Acquire) == 0).then(|| {
            self.epoch + Duration::from_millis(self.quiet_since_ms.load(Ordering::Acquire))
        })
    }
}

/// One open request on a connection; the connection is quiet again from
/// when the last of these is dropped.
struct RequestOpen(Arc<Activity>);

impl Drop for RequestOpen {
    fn drop(&mut self) {
        let now = u64::try_from(self.0.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.0.quiet_since_ms.store(now, Ordering::Release);
        self.0.open.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What the server knows about a connection's peer: its TCP addresses and
/// how busy it is.
#[derive(Debug, Clone)]
pub struct PeerInfo {
    pub tcp: TcpConnectInfo,
    activity: Arc<Activity>,
}

impl PeerInfo {
    /// Counts a request as open on this connection until the value is
    /// dropped (for a server that answers without [`CountRequests`]).
    pub fn begin_request(&self) -> impl Drop + use<> {
        self.activity.begin()
    }
}

/// An accepted connection: holds its place under the cap for as long as
/// it lives; fails its reads once the preface deadline passes with fewer
/// than [`PREFACE_BYTES`] read, or once it has had no request open for the
/// idle timeout.
pub struct Guarded {
    stream: TcpStream,
    /// Set until the preface arrived.
    deadline: Option<Pin<Box<Sleep>>>,
    read: usize,
    idle_timeout: Duration,
    /// Armed for the current quiet spell's end.
    idle: Pin<Box<Sleep>>,
    activity: Arc<Activity>,
    _open: OwnedSemaphorePermit,
}

impl Guarded {
    fn new(stream: TcpStream, open: OwnedSemaphorePermit, limits: ConnectionLimits) -> Self {
        let activity = Arc::new(Activity::new());
        Self {
            stream,
            deadline: Some(Box::pin(tokio::time::sleep(limits.preface_timeout))),
            read: 0,
            idle_timeout: limits.idle_timeout,
            idle: Box::pin(tokio::time::sleep(limits.idle_timeout)),
            activity,
            _open: open,
        }
    }

    /// Whether the connection has been quiet for the idle timeout (and
    /// arms the timer to be woken when it will have been).
    fn idle_expired(&mut self, cx: &mut Context<'_>) -> bool {
        let Some(since) = self.activity.quiet_since() else {
            return false;
        };
        let ends = since + self.idle_timeout;
        if self.idle.deadline() != ends {
            self.idle.as_mut().reset(ends);
        }
        self.idle.as_mut().poll(cx).is_ready()
    }
}

impl AsyncRead for Guarded {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            self.read += buf.filled().len() - before;
        }
        if self.read >= PREFACE_BYTES {
            self.deadline = None;
        }
        if polled.is_pending() {
            if let Some(deadline) = self.deadline.as_mut()
                && deadline.as_mut().poll(cx).is_ready()
            {
                metrics::counter!("inquest_connections_refused_total", "why" => "preface_timeout")
                    .increment(1);
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "no protocol preface within limits.connection_preface_timeout",
                )));
            }
            if self.idle_expired(cx) {
                metrics::counter!("inquest_connections_closed_total", "why" => "idle").increment(1);
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "no request within limits.idle_connection_timeout",
                )));
            }
        }
        polled
    }
}

impl AsyncWrite for Guarded {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

impl Connected for Guarded {
    type ConnectInfo = PeerInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        PeerInfo {
            tcp: self.stream.connect_info(),
            activity: Arc::clone(&self.activity),
        }
    }
}

/// Counts each request as open on its connection (see [`Activity`]) from
/// when it arrives until its response body is dropped, and puts the plain
/// [`TcpConnectInfo`] in its extensions too, where tonic's
/// `Request::remote_addr` looks.
#[derive(Debug, Clone, Copy, Default)]
pub struct CountRequestsLayer;

impl<S> tower_layer::Layer<S> for CountRequestsLayer {
    type Service = CountRequests<S>;

    fn layer(&self, inner: S) -> Self::Service {
        CountRequests { inner }
    }
}

#[derive(Debug, Clone)]
pub struct CountRequests<S> {
    inner: S,
}

/// The connection a request came on, plaintext or TLS.
fn peer_of<B>(request: &http::Request<B>) -> Option<&PeerInfo> {
    let extensions = request.extensions();
    extensions.get::<PeerInfo>().or_else(|| {
        extensions
            .get::<TlsConnectInfo<PeerInfo>>()
            .map(TlsConnectInfo::get_ref)
    })
}

impl<S, B, R> Service<http::Request<B>> for CountRequests<S>
where
    S: Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
{
    type Response = http::Response<Counted<R>>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        let (open, tcp) = peer_of(&request)
            .map(|p| (Some(p.activity.begin()), Some(p.tcp.clone())))
            .unwrap_or_default();
        if let Some(tcp) = tcp {
            request.extensions_mut().insert(tcp);
        }
        let answer = self.inner.call(request);
        Box::pin(async move {
            let response = answer.await?;
            Ok(response.map(|body| Counted { body, _open: open }))
        })
    }
}

/// A response body that keeps its request counted as open until dropped.
pub struct Counted<B> {
    body: B,
    _open: Option<RequestOpen>,
}

impl<B: http_body::Body + Unpin> http_body::Body for Counted<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio_stream::StreamExt;

    use super::*;

    async fn listener() -> (TcpListener, std::net::SocketAddr) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        (l, addr)
    }

    /// Whether the peer closed `client` (EOF or reset) within `wait`.
    async fn closed(client: &mut TcpStream, wait: Duration) -> bool {
        let mut byte = [0u8; 1];
        matches!(
            tokio::time::timeout(wait, client.read(&mut byte)).await,
            Ok(Ok(0) | Err(_))
        )
    }

    #[tokio::test]
    async fn a_connection_that_sends_no_preface_is_closed_at_the_deadline() {
        let (l, addr) = listener().await;
        let tasks = TaskTracker::new();
        let stop = CancellationToken::new();
        let limits = ConnectionLimits {
            max_connections: 10,
            preface_timeout: Duration::from_millis(200),
            idle_timeout: Duration::from_secs(60),
        };
        let mut accepted = incoming(l, limits, &tasks, stop.clone());
        let mut quiet = TcpStream::connect(addr).await.unwrap();
        quiet.write_all(b"PRI * HTTP/2.0").await.unwrap(); // half a preface
        let mut server_side = accepted.next().await.unwrap().unwrap();
        let mut buf = [0u8; 64];
        let started = tokio::time::Instant::now();
        let mut got = 0;
        let err = loop {
            match server_side.read(&mut buf).await {
                Ok(0) => panic!("the client did not close"),
                Ok(n) => got += n,
                Err(e) => break e,
            }
        };
        assert_eq!(got, 14);
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert!(started.elapsed() >= Duration::from_millis(150));
        stop.cancel();
    }

    #[tokio::test]
    async fn a_connection_past_the_cap_is_closed_and_the_open_ones_keep_working() {
        let (l, addr) = listener().await;
        let tasks = TaskTracker::new();
        let stop = CancellationToken::new();
        let limits = ConnectionLimits {
            max_connections: 2,
            preface_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
        };
        let mut accepted = incoming(l, limits, &tasks, stop.clone());
        let mut first = TcpStream::connect(addr).await.unwrap();
        let mut a = accepted.next().await.unwrap().unwrap();
        let _second = TcpStream::connect(addr).await.unwrap();
        let _b = accepted.next().await.unwrap().unwrap();
        let mut third = TcpStream::connect(addr).await.unwrap();
        assert!(
            closed(&mut third, Duration::from_secs(5)).await,
            "the third connection is closed at accept"
        );
        // The first still carries bytes both ways.
        first.write_all(&[7u8; PREFACE_BYTES]).await.unwrap();
        let mut buf = [0u8; PREFACE_BYTES];
        a.read_exact(&mut buf).await.unwrap();
        a.write_all(b"ok").await.unwrap();
        let mut two = [0u8; 2];
        first.read_exact(&mut two).await.unwrap();
        assert_eq!(&two, b"ok");
        // A place freed is a place taken again.
        drop(a);
        drop(first);
        let _fourth = TcpStream::connect(addr).await.unwrap();
        assert!(
            tokio::time::timeout(Duration::from_secs(5), accepted.next())
                .await
                .is_ok(),
            "a connection is accepted once one closed"
        );
        stop.cancel();
    }

    /// A connection that sent its preface is closed once it has had no
    /// request open for the idle timeout, counted from its last request's
    /// end; while a request is open (a watch stream) it is never idle.
    #[tokio::test]
    async fn a_connection_with_no_request_open_is_closed_after_the_idle_timeout() {
        let (l, addr) = listener().await;
        let tasks = TaskTracker::new();
        let stop = CancellationToken::new();
        let idle = Duration::from_millis(300);
        let limits = ConnectionLimits {
            max_connections: 10,
            preface_timeout: Duration::from_secs(30),
            idle_timeout: idle,
        };
        let mut accepted = incoming(l, limits, &tasks, stop.clone());
        let mut client = TcpStream::connect(addr).await.unwrap();
        client.write_all(&[1u8; PREFACE_BYTES]).await.unwrap();
        let mut server_side = accepted.next().await.unwrap().unwrap();
        let mut buf = [0u8; PREFACE_BYTES];
        server_side.read_exact(&mut buf).await.unwrap();
        // A request held open for three idle timeouts: no close.
        let open = server_side.connect_info().activity.begin();
        let mut byte = [0u8; 1];
        assert!(
            tokio::time::timeout(3 * idle, server_side.read(&mut byte))
                .await
                .is_err(),
            "closed while a request was open"
        );
        let ended = tokio::time::Instant::now();
        drop(open);
        let err = server_side.read(&mut byte).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        assert!(ended.elapsed() >= idle - Duration::from_millis(20));
        stop.cancel();
    }
}
