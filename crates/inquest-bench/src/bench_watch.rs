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
use inquest_proto::v1::{
    self as pb, investigations_client::InvestigationsClient, watch_event::Event,
};
use inquest_server::{Application, Config, TurnLog, burst_log::BurstLog};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;

const STREAMS_PER_CONNECTION: usize = 100;

pub struct WatchBench {
    pub url: String,
    pub watchers: Vec<usize>,
    pub turns: usize,
    pub payload: usize,
    pub idle_watchers: usize,
}

pub async fn run(bench: WatchBench) -> anyhow::Result<()> {
    let mut config = Config {
        listen: "127.0.0.1:0".parse()?,
        database_url: Some(bench.url.clone()),
        ..Config::default()
    };
    config.store.max_connections = 8;
    let app = Application::build(&config, &bench.url).await?;
    let addr = app.local_addr()?;
    let log = app.turn_log().clone();
    let shutdown = CancellationToken::new();
    let server = tokio::spawn(app.run(shutdown.clone()));
    let result = fanout(&bench, &log, &format!("http://{addr}")).await;
    shutdown.cancel();
    server.await.context("server task panicked")??;
    result?;
    idle_memory(&bench).await
}

/// A session whose burst is claimed (running), so watchers stay live.
pub(crate) async fn running_session(log: &TurnLog) -> anyhow::Result<(SessionId, BurstLog)> {
    let limits = Limits::default();
    let incident = log
        .store()
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

async fn fanout(bench: &WatchBench, log: &TurnLog, endpoint: &str) -> anyhow::Result<()> {
    let (session, burst) = running_session(log).await?;
    let content = "x".repeat(bench.payload);
    println!(
        "live watch fan-out ({} turns of {} bytes per phase, one session, real gRPC)",
        bench.turns, bench.payload
    );
    println!(
        "{:>8} | {:>10} {:>6} | {:>14} | {:>18} {:>9} | {:>18} {:>9} | {:>6}",
        "watchers",
        "writes/s",
        "ratio",
        "delivered/s",
        "commit->recv p50",
        "p99",
        "append->recv p50",
        "p99",
        "lagged"
    );
    // Warm the pool, the prepared statements and the table's pages so the
    // 0-watcher baseline is not measured cold.
    for _ in 0..bench.turns / 4 {
        burst
            .append(NewTurn::Assistant {
                text: content.clone(),
                tool_calls: Vec::new(),
                usage: TokenUsage::default(),
            })
            .await?;
    }
    let mut baseline = None;
    for &n in std::iter::once(&0).chain(bench.watchers.iter()) {
        let head = log
            .session(session)
            .await?
            .head_seq
            .map_or(0, |s| s.as_i64());
        let target = head + bench.turns as i64;
        let channels = connections(endpoint, n).await?;
        let mut watchers: JoinSet<anyhow::Result<Seen>> = JoinSet::new();
        for w in 0..n {
            let mut client =
                InvestigationsClient::new(channels[w / STREAMS_PER_CONNECTION].clone());
            let mut stream = client
                .watch_session(pb::WatchSessionRequest {
                    session_id: session.to_string(),
                    after_seq: head,
                })
                .await?
                .into_inner();
            let capacity = bench.turns;
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
        while log.broadcaster().subscriber_count(session) < n {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // Writer: as fast as the store allows, through persist-then-publish.
        let mut started_at = Vec::with_capacity(bench.turns);
        let mut committed_at = Vec::with_capacity(bench.turns);
        let began = Instant::now();
        for _ in 0..bench.turns {
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
        let write_secs = began.elapsed().as_secs_f64();
        let writes_per_sec = bench.turns as f64 / write_secs;
        let base = *baseline.get_or_insert(writes_per_sec);

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
        commit_lat.sort();
        start_lat.sort();
        let span = last_receive.saturating_duration_since(began).as_secs_f64();
        let per_sec = if span > 0.0 {
            delivered as f64 / span
        } else {
            0.0
        };
        println!(
            "{:>8} | {:>10.0} {:>6.2} | {:>14.0} | {:>18.2} {:>9.2} | {:>18.2} {:>9.2} | {:>6}",
            n,
            writes_per_sec,
            writes_per_sec / base,
            per_sec,
            ms(pick(&commit_lat, 0.5)),
            ms(pick(&commit_lat, 0.99)),
            ms(pick(&start_lat, 0.5)),
            ms(pick(&start_lat, 0.99)),
            lagged
        );
        drop(channels);
        while log.broadcaster().subscriber_count(session) > 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    burst.close(inquest_core::ExitReason::AwaitingUser).await?;
    Ok(())
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
        let log = TurnLog::new(store, inquest_broadcast::TurnBroadcaster::default());
        let (session, burst) = running_session(&log).await?;
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
                    session_id: session.to_string(),
                    after_seq: 0,
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
        burst.close(inquest_core::ExitReason::AwaitingUser)
            .await?;
        Ok(())
    }
    .await;
    child.kill().await.ok();
    result
}
