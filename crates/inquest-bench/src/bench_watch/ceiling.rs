//! The transport ceiling of `inquest-bench watch`: a bare tonic server
//! streaming pre-encoded events to the same clients as the fan-out
//! phases, and the figures printed beside Inquest's.

use std::time::{Duration, Instant};

use anyhow::Context;
use inquest_core::{SessionId, TokenUsage};
use inquest_proto::{
    EncodedWatchEvent,
    v1::{self as pb, watch_event::Event},
};
use inquest_store::{Store, StoreConfig};
use tokio_util::sync::CancellationToken;

use super::{
    Measured, WatchBench, collect, connections, cpu_per_event, micros, ms, open_watchers, own_cpu,
    pace, pick,
};

/// The transport ceiling: a bare tonic server whose `WatchSession` only
/// streams pre-encoded events (the same bytes the server sends for a
/// turn of this payload) from one producer to every stream, as fast as the
/// streams take them, to the same clients over the same connections. No
/// database, no watch task, no broadcaster: what delivered events/s this
/// machine's gRPC stack manages with this many streams. With `--rate` the
/// producer keeps the writer's pace instead, and the figure to read is its
/// send -> receive latency beside Inquest's commit -> receive.
pub(super) async fn ceiling(bench: &WatchBench, measured: &Measured) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let bare = BareWatch::default();
    let stop = CancellationToken::new();
    let server = {
        let bare = bare.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            tonic::transport::Server::builder()
                .add_routes(tonic::service::Routes::new(bare))
                .serve_with_incoming_shutdown(
                    tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true)),
                    stop.cancelled(),
                )
                .await
        })
    };
    let endpoint = format!("http://{addr}");
    let content = "x".repeat(bench.payload);
    let pace = pace(bench.rate)?;
    println!(
        "transport ceiling (bare tonic stream of pre-encoded events, same clients, producer {})",
        if pace.is_some() {
            "at the writer's pace"
        } else {
            "as fast as the streams take them"
        }
    );
    println!(
        "{:>8} | {:>14} | {:>14} | {:>8} | {:>22} | {:>22} | {:>21}",
        "watchers",
        "ceiling ev/s",
        "inquest ev/s",
        "ratio",
        "ceiling send->recv p50/p99",
        "inquest commit->recv p50/p99",
        "cpu us/ev ceiling/inquest"
    );
    let producers: &[Producer] = if bench.ceiling_writes {
        &[Producer::Bare, Producer::Writing]
    } else {
        &[Producer::Bare]
    };
    for &producer in producers {
        if producer == Producer::Writing {
            println!(
                "ceiling with a durable writer: each turn first committed as a bare single-row INSERT by a writer on a runtime of its own, then fanned out from the serving runtime"
            );
        }
        for &(n, inquest, inquest_p50, inquest_p99, inquest_cpu) in measured {
            let channels = connections(&endpoint, n).await?;
            let target = bench.turns as i64;
            let watchers =
                open_watchers(&channels, 0, n, "ceiling", 0, target, bench.turns).await?;
            let senders = bare.wait_for(n).await;
            let cpu_before = own_cpu();
            let began = Instant::now();
            let sent_at = match producer {
                Producer::Writing => {
                    produce_writing(
                        senders,
                        bench.turns,
                        content.clone(),
                        pace,
                        bench.url.clone(),
                    )
                    .await?
                }
                Producer::Bare if bench.ceiling_apart => {
                    // The producer on a runtime of its own, as Inquest's
                    // writer is on the agent runtime: every wake-up of a
                    // stream comes from a thread that is not one of the
                    // serving runtime's.
                    let apart = tokio::runtime::Builder::new_multi_thread()
                        .worker_threads(2)
                        .enable_all()
                        .build()?;
                    let sent_at = apart
                        .spawn(produce(senders, bench.turns, content.clone(), pace))
                        .await
                        .context("ceiling producer panicked")??;
                    apart.shutdown_background();
                    sent_at
                }
                Producer::Bare => produce(senders, bench.turns, content.clone(), pace).await?,
            };
            let got = collect(watchers, 0, began, &sent_at, &sent_at).await?;
            let ceiling = got.per_sec(began);
            let cpu = cpu_per_event(cpu_before, got.delivered);
            anyhow::ensure!(
                got.delivered == n * bench.turns,
                "ceiling: {n} streams received {} events, not {}",
                got.delivered,
                n * bench.turns
            );
            println!(
                "{:>8} | {:>14.0} | {:>14.0} | {:>8.2} | {:>10.2} {:>11.2} | {:>10.2} {:>11.2} | {:>10} {:>10}",
                n,
                ceiling,
                inquest,
                inquest / ceiling,
                ms(pick(&got.commit_lat, 0.5)),
                ms(pick(&got.commit_lat, 0.99)),
                ms(inquest_p50),
                ms(inquest_p99),
                micros(cpu),
                micros(inquest_cpu),
            );
            drop(channels);
        }
    }
    stop.cancel();
    server.await.context("ceiling server panicked")??;
    Ok(())
}

/// What the ceiling's producer does besides sending.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Producer {
    /// Only sends: the transport alone.
    Bare,
    /// Commits a bare single-row INSERT of each turn (the append bench's
    /// ceiling statement, into the same database) before sending it: the
    /// transport plus the least database work a durable writer does, on
    /// the same cores. What the fan-out could reach if Inquest's own
    /// write path and fan-out cost nothing.
    Writing,
}

/// Sends `turns` pre-encoded turns to every stream, in order, waiting for
/// a full stream (backpressure: the ceiling is what the transport takes,
/// not what it drops), at `pace` if given. Returns when each turn went
/// out.
async fn produce(
    senders: Vec<BareSender>,
    turns: usize,
    content: String,
    pace: Option<Duration>,
) -> anyhow::Result<Vec<Instant>> {
    let mut sent_at = Vec::with_capacity(turns);
    let first = tokio::time::Instant::now();
    for seq in 1..=turns as i64 {
        if let Some(pace) = pace {
            tokio::time::sleep_until(first + pace * (seq - 1) as u32).await;
        }
        send_all(&senders, seq, &content).await?;
        sent_at.push(Instant::now());
    }
    Ok(sent_at)
}

/// As [`produce`], with each turn first committed as a bare single-row
/// INSERT into `url`'s database by a writer on a one-thread runtime of
/// its own (as Inquest's writer is on the agent runtime, its connection
/// driven there as the burst lane's is). The writer hands each committed
/// turn to this task (on the serving runtime, where Inquest's large
/// fan-outs are delivered) through a queue as deep as a watcher's
/// channel, and goes on to the next: it waits for the fan-out only when
/// the queue is full. Returns when each turn committed.
async fn produce_writing(
    senders: Vec<BareSender>,
    turns: usize,
    content: String,
    pace: Option<Duration>,
    url: String,
) -> anyhow::Result<Vec<Instant>> {
    let apart = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let (tx, mut rx) = tokio::sync::mpsc::channel(inquest_broadcast::DEFAULT_CAPACITY);
    let writer = {
        let content = content.clone();
        apart.spawn(async move {
            let mut config = StoreConfig::new(&url);
            config.max_connections = 1;
            let store = Store::connect(&config)?;
            store.create_ceiling_table().await?;
            let id = uuid::Uuid::now_v7();
            let first = tokio::time::Instant::now();
            for seq in 1..=turns as i64 {
                if let Some(pace) = pace {
                    tokio::time::sleep_until(first + pace * (seq - 1) as u32).await;
                }
                store.insert_ceiling_row(id, seq, &content).await?;
                tx.send((seq, Instant::now()))
                    .await
                    .context("ceiling fan-out gone")?;
            }
            drop(tx);
            store.drop_ceiling_table().await?;
            anyhow::Ok(())
        })
    };
    let mut committed_at = Vec::with_capacity(turns);
    while let Some((seq, at)) = rx.recv().await {
        send_all(&senders, seq, &content).await?;
        committed_at.push(at);
    }
    writer.await.context("ceiling writer panicked")??;
    apart.shutdown_background();
    Ok(committed_at)
}

/// One turn, encoded once, to every stream.
async fn send_all(senders: &[BareSender], seq: i64, content: &str) -> anyhow::Result<()> {
    let event = EncodedWatchEvent::new(&pb::WatchEvent {
        event: Some(Event::Turn(bare_turn(seq, content))),
    });
    for tx in senders {
        tx.send(Ok(event.clone()))
            .await
            .context("ceiling stream gone")?;
    }
    Ok(())
}

/// A turn as the server sends an assistant turn of this payload
/// (`convert::turn_within`, as the watch path does).
fn bare_turn(seq: i64, content: &str) -> pb::SessionTurn {
    let turn = inquest_core::Turn {
        session_id: SessionId::new(),
        seq: inquest_core::Seq::from_stored(seq).unwrap_or(inquest_core::Seq::FIRST),
        role: inquest_core::Role::Assistant,
        content: content.to_owned(),
        tool_calls_raw: inquest_core::ToolCall::encode_all(&[]),
        recovery_plan_raw: None,
        tool_call_id: None,
        tool_name: None,
        is_error: false,
        usage: TokenUsage::default(),
        created_at: time::OffsetDateTime::now_utc(),
    };
    inquest_server::convert::turn_within(&turn, inquest_server::limits::DEFAULT_MAX_RESPONSE_BYTES)
}

type BareSender = tokio::sync::mpsc::Sender<Result<EncodedWatchEvent, tonic::Status>>;

/// The ceiling's whole server: every `WatchSession` call gets a stream fed
/// by the producer; any other method is UNIMPLEMENTED.
#[derive(Clone, Default)]
struct BareWatch {
    streams: std::sync::Arc<std::sync::Mutex<Vec<BareSender>>>,
}

impl BareWatch {
    /// Waits until `n` streams are open, and takes them.
    async fn wait_for(&self, n: usize) -> Vec<BareSender> {
        loop {
            {
                let mut streams = self.streams.lock().unwrap_or_else(|e| e.into_inner());
                if streams.len() >= n {
                    return std::mem::take(&mut *streams);
                }
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

impl tonic::server::NamedService for BareWatch {
    const NAME: &'static str = "inquest.v1.Investigations";
}

struct BareWatchCall(BareWatch);

impl tonic::server::ServerStreamingService<pb::WatchSessionRequest> for BareWatchCall {
    type Response = EncodedWatchEvent;
    type ResponseStream =
        tokio_stream::wrappers::ReceiverStream<Result<EncodedWatchEvent, tonic::Status>>;
    type Future = std::future::Ready<Result<tonic::Response<Self::ResponseStream>, tonic::Status>>;

    fn call(&mut self, _request: tonic::Request<pb::WatchSessionRequest>) -> Self::Future {
        let (tx, rx) = tokio::sync::mpsc::channel(inquest_broadcast::DEFAULT_CAPACITY);
        self.0
            .streams
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(tx);
        std::future::ready(Ok(tonic::Response::new(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        )))
    }
}

impl tonic::codegen::Service<tonic::codegen::http::Request<tonic::body::Body>> for BareWatch {
    type Response = tonic::codegen::http::Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future = tonic::codegen::BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(
        &mut self,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: tonic::codegen::http::Request<tonic::body::Body>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            if req.uri().path() != "/inquest.v1.Investigations/WatchSession" {
                return Ok(
                    tonic::Status::unimplemented("ceiling server: WatchSession only").into_http(),
                );
            }
            let codec =
                tonic_prost::ProstCodec::<EncodedWatchEvent, pb::WatchSessionRequest>::default();
            let mut grpc = tonic::server::Grpc::new(codec);
            Ok(grpc.server_streaming(BareWatchCall(this), req).await)
        })
    }
}
