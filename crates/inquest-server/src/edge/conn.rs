//! What a plaintext connection on the gRPC port may cost before it proves
//! itself: at most `[limits] max_connections` are open at once (one past
//! it is closed as soon as it is accepted, so the process never reaches
//! its open-files limit and open connections keep working), and one that
//! has not sent its first [`PREFACE_BYTES`] within
//! `limits.connection_preface_timeout` is closed. Accept errors back off
//! instead of spinning. (Connections that sent the preface and then went
//! quiet are closed by HTTP/2 keepalive pings; see `startup.rs`.)

use std::{
    io,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::{TcpListener, TcpStream},
    sync::{OwnedSemaphorePermit, Semaphore},
    time::Sleep,
};
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::{sync::CancellationToken, task::TaskTracker};
use tonic::transport::server::{Connected, TcpConnectInfo};

/// The HTTP/2 client preface is 24 bytes; an HTTP/1.1 request line for
/// gRPC-Web is longer. A connection is past its deadline once this much
/// arrived.
pub const PREFACE_BYTES: usize = 24;

/// The first pause after a failed accept (out of descriptors, say); it
/// doubles up to a second.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(10);

/// How a plaintext listener limits its connections.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    pub max_connections: usize,
    pub preface_timeout: Duration,
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
            let guarded = Guarded::new(stream, permit, limits.preface_timeout);
            if tx.send(Ok(guarded)).await.is_err() {
                return;
            }
        }
    });
    ReceiverStream::new(rx)
}

/// An accepted connection: holds its place under the cap for as long as
/// it lives, and fails its reads once the preface deadline passes with
/// fewer than [`PREFACE_BYTES`] read.
pub struct Guarded {
    stream: TcpStream,
    /// Set until the preface arrived.
    deadline: Option<Pin<Box<Sleep>>>,
    read: usize,
    _open: OwnedSemaphorePermit,
}

impl Guarded {
    fn new(stream: TcpStream, open: OwnedSemaphorePermit, preface_timeout: Duration) -> Self {
        Self {
            stream,
            deadline: Some(Box::pin(tokio::time::sleep(preface_timeout))),
            read: 0,
            _open: open,
        }
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
        if polled.is_pending()
            && let Some(deadline) = self.deadline.as_mut()
            && deadline.as_mut().poll(cx).is_ready()
        {
            metrics::counter!("inquest_connections_refused_total", "why" => "preface_timeout")
                .increment(1);
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no protocol preface within limits.connection_preface_timeout",
            )));
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
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.stream.connect_info()
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
}
