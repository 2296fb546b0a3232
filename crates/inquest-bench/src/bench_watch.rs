//! `inquest-bench watch`: live-watch fan-out over real gRPC.
//!
//! Throughput/latency: an in-process server (the same `Application` as
//! `serve`) on a loopback port; one session written as fast as the store
//! allows through the server's own `TurnLog` (persist, then publish), with
//! 0, 1, 100 and 1,000 watchers subscribed through `WatchSession` over real
//! HTTP/2 connections (100 streams per connection). Client and server share
//! the process and its cores.
//!
//! Memory: a separate `inquest-bench serve` child process, so only server memory
//! is counted. Its VmRSS (from `/proc/<pid>/status`) is read after the
//! client connections are open and again once 10,000 idle watch streams
//! are subscribed to a running session; the difference over 10,000 is the
//! memory per idle watcher.

use std::{
    process::Stdio,
    time::{Duration, Instant},
};

use anyhow::Context;
use inquest_core::{IncidentText, Limits, NewTurn, SessionId, TokenUsage, UserMessage};
use inquest_engine::burst_log::BurstLog;
use inquest_proto::v1::{
    self as pb, investigations_client::InvestigationsClient, watch_event::Event,
};
use inquest_server::{Application, Config, TurnLog};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;

mod ceiling;
use ceiling::ceiling;

const STREAMS_PER_CONNECTION: usize = 100;
/// Idle watchers per session in the memory measurement.
const PER_SESSION: usize = 1_000;

pub struct WatchBench {
    pub url: String,
    pub watchers: Vec<usize>,
    pub turns: usize,
    pub payload: usize,
    pub idle_watchers: usize,
    /// `[runtime] agent_threads` (`None`: the server's default).
    pub agent_threads: Option<usize>,
    /// `[runtime] serving_nice` (`None`: the server's default).
    pub serving_nice: Option<u8>,
    /// Also measure the bare-tonic transport ceiling.
    pub ceiling: bool,
    /// Writer pace in turns/s (`None`: as fast as the store allows).
    pub rate: Option<f64>,
    /// Run the ceiling's producer on a runtime of its own.
    pub ceiling_apart: bool,
    /// Also measure the ceiling with a producer that commits a bare
    /// INSERT of each turn before sending it.
    pub ceiling_writes: bool,
    /// Sessions the watchers are spread over, one writer each.
    pub sessions: usize,
}

pub async fn run(bench: WatchBench) -> anyhow::Result<()> {
    let mut config = Config {
        listen: "127.0.0.1:0".parse()?,
        database_url: Some(bench.url.clone()),
        ..Config::default()
    };
    config.store.max_connections = 8;
    if let Some(threads) = bench.agent_threads {
        config.runtime.agent_threads = threads;
    }
    if let Some(nice) = bench.serving_nice {
        config.runtime.serving_nice = nice;
    }
    let app = Application::build(&config, &bench.url).await?;
    let addr = app.local_addr()?;
    let log = app.turn_log().clone();
    let store = app.store().clone();
    let writer_runtime = app.agent_runtime().handle().cloned();
    println!(
        "agent_threads = {}, serving_nice = {} (the writer runs {})",
        config.runtime.agent_threads,
        config.runtime.serving_nice,
        if writer_runtime.is_some() {
            "on the agent runtime, apart from the serving one"
        } else {
            "on the serving runtime"
        }
    );
    let shutdown = CancellationToken::new();
    let server = tokio::spawn(app.run(shutdown.clone()));
    let result = fanout(
        &bench,
        &store,
        &log,
        writer_runtime,
        &format!("http://{addr}"),
    )
    .await;
    shutdown.cancel();
    server.await.context("server task panicked")??;
    let measured = result?;
    if bench.ceiling {
        ceiling(&bench, &measured).await?;
    }
    if bench.idle_watchers > 0 {
        idle_memory(&bench).await?;
    }
    Ok(())
}

/// A session whose burst is claimed (running), so watchers stay live.
pub(crate) async fn running_session(
    store: &inquest_store::Store,
    log: &TurnLog,
) -> anyhow::Result<(SessionId, BurstLog)> {
    let limits = Limits::default();
    let incident = store
        .create_incident(
            &inquest_core::Tenant::default_tenant(),
            &IncidentText::parse("bench".into(), String::new(), &limits)?,
        )
        .await?;
    let started = log
        .start_session(
            &inquest_core::Tenant::default_tenant(),
            inquest_core::TenantQuota::UNLIMITED,
            incident.id,
            UserMessage::parse("bench".into(), &limits)?,
            None,
        )
        .await?;
    let id = started.session.id;
    let (burst, _cancel) = log
        .claim_burst(id)
        .await?
        .context("fresh session was not pending")?;
    Ok((id, burst))
}

async fn connections(endpoint: &str, streams: usize) -> anyhow::Result<Vec<Channel>> {
    let mut channels = Vec::new();
    for _ in 0..streams.div_ceil(STREAMS_PER_CONNECTION).max(1) {
        channels.push(Channel::from_shared(endpoint.to_owned())?.connect().await?);
    }
    Ok(channels)
}

fn pick(sorted: &[Duration], q: f64) -> Duration {
    sorted
        .get(((sorted.len() as f64 * q) as usize).min(sorted.len().saturating_sub(1)))
        .copied()
        .unwrap_or_default()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// What one watcher saw: (seq, when) per turn, and whether it lagged.
type Seen = (Vec<(i64, Instant)>, bool);

/// Opens `n` `WatchSession` streams (100 per connection) after `head` and
/// spawns a reader per stream that records each turn's seq and arrival
/// until it has seen `target`.
async fn open_watchers(
    channels: &[Channel],
    first: usize,
    n: usize,
    session: &str,
    head: i64,
    target: i64,
    capacity: usize,
) -> anyhow::Result<JoinSet<anyhow::Result<Seen>>> {
    let mut watchers: JoinSet<anyhow::Result<Seen>> = JoinSet::new();
    for w in first..first + n {
        let channel = channels
            .get(w / STREAMS_PER_CONNECTION)
            .context("fewer connections than streams need")?;
        let mut client = InvestigationsClient::new(channel.clone());
        let mut stream = client
            .watch_session(pb::WatchSessionRequest {
                session_id: session.to_owned(),
                after_seq: head,
                after_committed_at: None,
            })
            .await?
            .into_inner();
        watchers.spawn(async move {
            let mut seen = Vec::with_capacity(capacity);
            loop {
                match stream.message().await {
                    Ok(Some(pb::WatchEvent {
                        event: Some(Event::Turn(t)),
                    })) => {
                        seen.push((t.seq, Instant::now()));
                        if t.seq >= target {
                            return Ok((seen, false));
                        }
                    }
                    Ok(Some(pb::WatchEvent {
                        event: Some(Event::Lagged(_)),
                    })) => return Ok((seen, true)),
                    Ok(Some(_)) => {}
                    Ok(None) => return Ok((seen, false)),
                    Err(s) if s.code() == tonic::Code::Aborted => return Ok((seen, true)),
                    Err(s) => anyhow::bail!("watch failed: {s}"),
                }
            }
        });
    }
    Ok(watchers)
}

/// What the watchers of one phase received.
struct Received {
    delivered: usize,
    lagged: usize,
    /// Receipt minus the moment the event's send (append) returned.
    commit_lat: Vec<Duration>,
    /// Receipt minus the moment its send (append) began.
    start_lat: Vec<Duration>,
    /// The last receipt.
    last_receive: Instant,
}

impl Received {
    /// Another session's watchers of the same phase.
    fn merge(&mut self, other: Received) {
        self.delivered += other.delivered;
        self.lagged += other.lagged;
        self.commit_lat.extend(other.commit_lat);
        self.start_lat.extend(other.start_lat);
        self.last_receive = self.last_receive.max(other.last_receive);
    }

    fn sort(&mut self) {
        self.commit_lat.sort();
        self.start_lat.sort();
    }

    /// Delivered events / (first send → last receipt).
    fn per_sec(&self, began: Instant) -> f64 {
        let span = self
            .last_receive
            .saturating_duration_since(began)
            .as_secs_f64();
        if span > 0.0 {
            self.delivered as f64 / span
        } else {
            0.0
        }
    }
}

async fn collect(
    mut watchers: JoinSet<anyhow::Result<Seen>>,
    head: i64,
    began: Instant,
    started_at: &[Instant],
    committed_at: &[Instant],
) -> anyhow::Result<Received> {
    let mut commit_lat = Vec::new();
    let mut start_lat = Vec::new();
    let mut delivered = 0usize;
    let mut lagged = 0usize;
    let mut last_receive = began;
    let deadline = Duration::from_secs(300);
    while let Some(done) = tokio::time::timeout(deadline, watchers.join_next())
        .await
        .context("watchers did not finish")?
    {
        let (seen, was_lagged) = done.context("watcher panicked")??;
        lagged += usize::from(was_lagged);
        delivered += seen.len();
        for (seq, at) in seen {
            let i = usize::try_from(seq - head - 1).unwrap_or(usize::MAX);
            if let (Some(s), Some(c)) = (started_at.get(i), committed_at.get(i)) {
                start_lat.push(at.saturating_duration_since(*s));
                commit_lat.push(at.saturating_duration_since(*c));
                last_receive = last_receive.max(at);
            }
        }
    }
    let mut got = Received {
        delivered,
        lagged,
        commit_lat,
        start_lat,
        last_receive,
    };
    got.sort();
    Ok(got)
}

/// Per watcher count: delivered events/s, commit -> receive p50 and p99,
/// and this process's CPU per delivered event, for the ceiling's
/// comparison.
type Measured = Vec<(usize, f64, Duration, Duration, Option<f64>)>;

/// This process's CPU time (server and clients), in clock ticks.
fn own_cpu() -> Option<u64> {
    crate::bench_loop::cpu_ticks("self")
}

/// Microseconds of this process's CPU per delivered event since `before`.
fn cpu_per_event(before: Option<u64>, delivered: usize) -> Option<f64> {
    let spent = own_cpu()?.checked_sub(before?)?;
    (delivered > 0)
        .then(|| spent as f64 * 1e6 / crate::bench_loop::CLOCK_TICKS_PER_SEC / delivered as f64)
}

fn micros(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{v:.2}"))
}

/// The time between two writes at `rate` turns/s.
fn pace(rate: Option<f64>) -> anyhow::Result<Option<Duration>> {
    match rate {
        Some(rate) if rate > 0.0 => Ok(Some(Duration::from_secs_f64(1.0 / rate))),
        Some(_) => anyhow::bail!("--rate must be above 0"),
        None => Ok(None),
    }
}

async fn fanout(
    bench: &WatchBench,
    store: &inquest_store::Store,
    log: &TurnLog,
    writer_runtime: Option<tokio::runtime::Handle>,
    endpoint: &str,
) -> anyhow::Result<Measured> {
    anyhow::ensure!(bench.sessions >= 1, "--sessions must be at least 1");
    let mut sessions = Vec::with_capacity(bench.sessions);
    for _ in 0..bench.sessions {
        let (session, burst) = running_session(store, log).await?;
        sessions.push((session, std::sync::Arc::new(burst)));
    }
    let content = "x".repeat(bench.payload);
    let pace = pace(bench.rate)?;
    println!(
        "live watch fan-out ({} turns of {} bytes per phase and session, {}, real gRPC, {} {})",
        bench.turns,
        bench.payload,
        if bench.sessions == 1 {
            "one session".to_owned()
        } else {
            format!(
                "{} sessions written at once, the watchers spread evenly",
                bench.sessions
            )
        },
        if bench.sessions == 1 {
            "writer"
        } else {
            "each writer"
        },
        match bench.rate {
            Some(rate) => format!("paced at {rate} turns/s"),
            None => "as fast as the store allows".to_owned(),
        }
    );
    println!(
        "{:>8} | {:>10} {:>6} | {:>14} | {:>18} {:>9} | {:>18} {:>9} | {:>6} | {:>9}",
        "watchers",
        "writes/s",
        "ratio",
        "delivered/s",
        "commit->recv p50",
        "p99",
        "append->recv p50",
        "p99",
        "lagged",
        "cpu us/ev"
    );
    // A writer: as fast as the store allows (or at `--rate`), through
    // persist-then-publish, where a burst would run (the agent runtime, if
    // split off).
    let write = |burst: &std::sync::Arc<BurstLog>, turns: usize, pace: Option<Duration>| {
        let burst = std::sync::Arc::clone(burst);
        let content = content.clone();
        let work = async move {
            let mut started_at = Vec::with_capacity(turns);
            let mut committed_at = Vec::with_capacity(turns);
            let first = tokio::time::Instant::now();
            for i in 0..turns {
                if let Some(pace) = pace {
                    // An absolute schedule: a slow append is caught up
                    // by the next ones, not carried forward.
                    tokio::time::sleep_until(first + pace * i as u32).await;
                }
                let t0 = Instant::now();
                burst
                    .append(NewTurn::Assistant {
                        text: content.clone(),
                        tool_calls: Vec::new(),
                        usage: TokenUsage::default(),
                    })
                    .await?;
                started_at.push(t0);
                committed_at.push(Instant::now());
            }
            anyhow::Ok((started_at, committed_at))
        };
        match &writer_runtime {
            Some(handle) => handle.spawn(work),
            None => tokio::spawn(work),
        }
    };
    // Warm the pool, the prepared statements and the table's pages so the
    // 0-watcher baseline is not measured cold.
    let warm: Vec<_> = sessions
        .iter()
        .map(|(_, burst)| write(burst, bench.turns / 4, None))
        .collect();
    for w in warm {
        w.await.context("writer panicked")??;
    }
    let mut baseline = None;
    let mut measured = Vec::new();
    for &n in std::iter::once(&0).chain(bench.watchers.iter()) {
        let channels = connections(endpoint, n).await?;
        // Per session: its watchers, its head before the phase, and how
        // many watch it.
        let mut phase = Vec::with_capacity(sessions.len());
        let mut first = 0;
        for (k, (session, _)) in sessions.iter().enumerate() {
            let head = log
                .session(*session)
                .await?
                .head_seq
                .map_or(0, |s| s.as_i64());
            let count = n / sessions.len() + usize::from(k < n % sessions.len());
            let watchers = open_watchers(
                &channels,
                first,
                count,
                &session.to_string(),
                head,
                head + bench.turns as i64,
                bench.turns,
            )
            .await?;
            first += count;
            phase.push((watchers, head, count));
        }
        for ((session, _), (_, _, count)) in sessions.iter().zip(&phase) {
            while log.live().broadcaster().subscriber_count(*session) < *count {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        let cpu_before = own_cpu();
        let began = Instant::now();
        let writers: Vec<_> = sessions
            .iter()
            .map(|(_, burst)| write(burst, bench.turns, pace))
            .collect();
        let mut written = Vec::with_capacity(writers.len());
        for w in writers {
            written.push(w.await.context("writer panicked")??);
        }
        let write_secs = written
            .iter()
            .filter_map(|(_, committed_at)| committed_at.last())
            .map(|end| end.duration_since(began).as_secs_f64())
            .fold(0.0, f64::max);
        let writes_per_sec = (bench.turns * sessions.len()) as f64 / write_secs;
        let base = *baseline.get_or_insert(writes_per_sec);
        let mut got: Option<Received> = None;
        for ((watchers, head, _), (started_at, committed_at)) in phase.into_iter().zip(&written) {
            let one = collect(watchers, head, began, started_at, committed_at).await?;
            match &mut got {
                Some(all) => all.merge(one),
                None => got = Some(one),
            }
        }
        let mut got = got.context("no session")?;
        got.sort();
        let per_sec = got.per_sec(began);
        let cpu = cpu_per_event(cpu_before, got.delivered);
        println!(
            "{:>8} | {:>10.0} {:>6.2} | {:>14.0} | {:>18.2} {:>9.2} | {:>18.2} {:>9.2} | {:>6} | {:>9}",
            n,
            writes_per_sec,
            writes_per_sec / base,
            per_sec,
            ms(pick(&got.commit_lat, 0.5)),
            ms(pick(&got.commit_lat, 0.99)),
            ms(pick(&got.start_lat, 0.5)),
            ms(pick(&got.start_lat, 0.99)),
            got.lagged,
            micros(cpu)
        );
        anyhow::ensure!(
            got.lagged > 0 || got.delivered == n * bench.turns,
            "{n} watchers received {} turns, not {}",
            got.delivered,
            n * bench.turns
        );
        if n > 0 {
            measured.push((
                n,
                per_sec,
                pick(&got.commit_lat, 0.5),
                pick(&got.commit_lat, 0.99),
                cpu,
            ));
        }
        drop(channels);
        for (session, _) in &sessions {
            while log.live().broadcaster().subscriber_count(*session) > 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    }
    for (_, burst) in &sessions {
        burst.close(inquest_core::ExitReason::AwaitingUser).await?;
    }
    Ok(measured)
}

fn rss_kib(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no VmRSS in /proc status")
}

async fn idle_memory(bench: &WatchBench) -> anyhow::Result<()> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let mut child = tokio::process::Command::new(std::env::current_exe()?)
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .env("INQUEST_DATABASE_URL", &bench.url)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .context("starting `inquest-bench serve`")?;
    let pid = child.id().context("child has no pid")?;
    let endpoint = format!("http://127.0.0.1:{port}");
    let result = async {
        let mut ready = false;
        for _ in 0..200 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
                ready = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        anyhow::ensure!(ready, "server child did not start listening");
        // A running session, made through the store (status lives there).
        let store = inquest_store::Store::connect(&inquest_store::StoreConfig::new(&bench.url))?;
        let log = TurnLog::new(store.clone(), inquest_broadcast::TurnBroadcaster::default());
        // Spread over sessions: `limits.max_watch_streams_per_session`
        // (default 1,000) caps one session's streams on a replica.
        let mut sessions = Vec::new();
        for _ in 0..bench.idle_watchers.div_ceil(PER_SESSION).max(1) {
            sessions.push(running_session(&store, &log).await?);
        }
        let session = sessions[0].0;
        let channels = connections(&endpoint, bench.idle_watchers).await?;
        for ch in &channels {
            // One round trip per connection so it is fully set up.
            InvestigationsClient::new(ch.clone())
                .get_session(pb::GetSessionRequest {
                    session_id: session.to_string(),
                })
                .await?;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let before = rss_kib(pid)?;
        let mut streams = Vec::with_capacity(bench.idle_watchers);
        for w in 0..bench.idle_watchers {
            let mut client = InvestigationsClient::new(channels[w / STREAMS_PER_CONNECTION].clone());
            let mut stream = client
                .watch_session(pb::WatchSessionRequest {
                    session_id: sessions[w / PER_SESSION].0.to_string(),
                    after_seq: 0,
                    after_committed_at: None,
                })
                .await?
                .into_inner();
            // The stored turn arrives once the server-side task is running.
            stream.message().await?;
            streams.push(stream);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let after = rss_kib(pid)?;
        let per = (after.saturating_sub(before)) as f64 / bench.idle_watchers as f64;
        println!(
            "idle watchers: {} on {} connections; server VmRSS {} KiB -> {} KiB; {:.1} KiB per idle watcher",
            bench.idle_watchers,
            channels.len(),
            before,
            after,
            per
        );
        drop(streams);
        for (_, burst) in sessions {
            burst.close(inquest_core::ExitReason::AwaitingUser).await?;
        }
        Ok(())
    }
    .await;
    child.kill().await.ok();
    result
}
