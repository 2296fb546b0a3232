//! `inquest-bench overload`: one replica under more than it should take.
//!
//! A real `inquest-bench serve` child process (so its memory is its own) on a
//! scratch database, with one OpenAI-compatible provider: the fake model
//! server in this process, behind a relay that holds every answer back by
//! `--model-delay-ms` (a slow provider). For `--seconds`, at once:
//! `--sessions` concurrent `StartSession`s, `--readers` clients looping
//! over GetSession (timed), ListTurns and health checks, and `--watchers`
//! WatchSession streams spread over the sessions. Then it reads the store:
//! sessions completed, `store_failed` and other failures, lease takeovers
//! (a session claimed more than once), and prints p50/p99 GetSession
//! latency against a baseline of the same call on the idle replica, taken
//! in the same run, and the server's peak resident memory (VmHWM).

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::Context;
use inquest_proto::v1::{self as pb, investigations_client::InvestigationsClient};
use inquest_testkit::fake::{FakeProvider, Flavor};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    task::JoinSet,
};
use tonic::transport::Channel;

use crate::bench_replicas::{Replica, ms, new_session, pick};
use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};

type Client = InvestigationsClient<Channel>;

/// gRPC streams multiplexed per client connection.
const STREAMS_PER_CONNECTION: usize = 100;

pub struct OverloadBench {
    pub url: String,
    pub sessions: usize,
    pub readers: usize,
    pub watchers: usize,
    pub seconds: u64,
    pub model_delay: Duration,
    pub max_running_bursts: Option<usize>,
}

pub async fn run(bench: OverloadBench) -> anyhow::Result<()> {
    let fake = FakeProvider::start(Flavor::OpenAi).await?;
    let relay = SlowRelay::start(&fake.base_url(), bench.model_delay).await?;
    let dir = std::env::temp_dir().join(format!("inquest-bench-overload-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let config = dir.join("inquest.toml");
    let mut text = format!(
        "[[providers]]\nkind = \"openai\"\nname = \"slow-fake\"\nmodel = \"fake-model\"\n\
         base_url = \"{}\"\nmax_retries = 0\ntimeout = \"300s\"\n",
        relay.base_url
    );
    if let Some(n) = bench.max_running_bursts {
        text = format!("[limits]\nmax_running_bursts = {n}\n\n{text}");
    }
    std::fs::write(&config, text)?;
    let server = Replica::start(&bench.url, &config, "bench-overload", None).await?;
    let result = measure(&bench, &server, &bench.url).await;
    server.stop()?;
    let _ = std::fs::remove_dir_all(dir);
    result
}

async fn measure(bench: &OverloadBench, server: &Replica, url: &str) -> anyhow::Result<()> {
    let channels = connect_many(
        &server.endpoint,
        (bench.readers + bench.watchers + bench.sessions).div_ceil(STREAMS_PER_CONNECTION) + 1,
    )
    .await?;
    let mut client = Client::new(channels[0].clone());

    // Baseline: the same GetSession on the idle replica.
    let probe = new_session(&mut client).await?;
    wait_settled(&mut client, &probe, Duration::from_secs(120)).await?;
    let mut baseline = Vec::new();
    for _ in 0..500 {
        let t = Instant::now();
        client
            .get_session(pb::GetSessionRequest {
                session_id: probe.clone(),
            })
            .await?;
        baseline.push(t.elapsed());
    }
    baseline.sort();
    let rss_idle = server.memory("VmRSS")?;

    let deadline = Instant::now() + Duration::from_secs(bench.seconds);
    let stop = Arc::new(AtomicBool::new(false));
    let errors = Arc::new(ErrorCounts::default());

    // The sessions, all started at once.
    let t0 = Instant::now();
    let mut starts = JoinSet::new();
    for i in 0..bench.sessions {
        let mut client = Client::new(channels[i % channels.len()].clone());
        starts.spawn(async move { new_session(&mut client).await });
    }
    let mut ids = Vec::new();
    let mut start_failures = 0usize;
    while let Some(started) = starts.join_next().await {
        match started? {
            Ok(id) => ids.push(id),
            Err(e) => {
                start_failures += 1;
                eprintln!("StartSession failed: {e:#}");
            }
        }
    }
    let started_in = t0.elapsed();
    anyhow::ensure!(!ids.is_empty(), "no session started");
    let ids = Arc::new(ids);

    // Watchers: each follows one session to its end.
    let mut watchers = JoinSet::new();
    for w in 0..bench.watchers {
        let mut client = Client::new(channels[(w + 1) % channels.len()].clone());
        let session = ids[w % ids.len()].clone();
        let errors = Arc::clone(&errors);
        watchers.spawn(async move {
            let mut events = 0u64;
            let mut after = 0;
            while Instant::now() < deadline {
                let opened = client
                    .watch_session(pb::WatchSessionRequest {
                        session_id: session.clone(),
                        after_seq: after,
                        after_committed_at: None,
                    })
                    .await;
                let mut stream = match opened {
                    Ok(s) => s.into_inner(),
                    Err(status) => {
                        errors.count(status.code());
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        continue;
                    }
                };
                let ended = loop {
                    let next = tokio::time::timeout_at(deadline.into(), stream.message()).await;
                    match next {
                        Err(_) => break true,
                        Ok(Ok(Some(event))) => {
                            events += 1;
                            if let Some(pb::watch_event::Event::Turn(t)) = event.event {
                                after = t.seq;
                            }
                        }
                        // Settled: the watch is done.
                        Ok(Ok(None)) => break true,
                        Ok(Err(status)) => {
                            errors.count(status.code());
                            break false;
                        }
                    }
                };
                if ended {
                    break;
                }
            }
            events
        });
    }

    // Readers: GetSession (timed), ListTurns, health, in turn.
    let mut readers = JoinSet::new();
    for r in 0..bench.readers {
        let channel = channels[(r + 2) % channels.len()].clone();
        let mut client = Client::new(channel.clone());
        let mut health = HealthClient::new(channel);
        let ids = Arc::clone(&ids);
        let stop = Arc::clone(&stop);
        let errors = Arc::clone(&errors);
        readers.spawn(async move {
            let mut latencies = Vec::new();
            let mut i = r;
            while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                let session = ids[i % ids.len()].clone();
                let outcome = match i % 3 {
                    0 => {
                        let t = Instant::now();
                        let got = client
                            .get_session(pb::GetSessionRequest {
                                session_id: session,
                            })
                            .await;
                        if got.is_ok() {
                            latencies.push(t.elapsed());
                        }
                        got.map(|_| ())
                    }
                    1 => client
                        .list_turns(pb::ListTurnsRequest {
                            session_id: session,
                            after_seq: 0,
                            before_seq: 0,
                            limit: 100,
                        })
                        .await
                        .map(|_| ()),
                    _ => health
                        .check(HealthCheckRequest {
                            service: String::new(),
                        })
                        .await
                        .map(|_| ()),
                };
                if let Err(status) = outcome {
                    errors.count(status.code());
                }
                i += 1;
            }
            latencies
        });
    }

    // Memory, sampled while the load runs; until every session settled or
    // the time is up.
    let mut rss_peak_sampled = rss_idle;
    let mut settled_at = None;
    while Instant::now() < deadline {
        rss_peak_sampled = rss_peak_sampled.max(server.memory("VmRSS")?);
        if settled_at.is_none() && active_sessions(url).await? == 0 {
            settled_at = Some(t0.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    stop.store(true, Ordering::SeqCst);
    let mut under_load = Vec::new();
    let mut reads = 0usize;
    while let Some(l) = readers.join_next().await {
        let l = l?;
        reads += l.len();
        under_load.extend(l);
    }
    let mut watch_events = 0;
    while let Some(n) = watchers.join_next().await {
        watch_events += n?;
    }
    under_load.sort();
    let peak = server.memory("VmHWM")?;
    let outcome = outcomes(url).await?;

    println!(
        "overload: 1 replica, {} StartSession at once, {} readers, {} watchers, model delay {:?}, {} s bound, max_running_bursts {}",
        bench.sessions,
        bench.readers,
        bench.watchers,
        bench.model_delay,
        bench.seconds,
        bench
            .max_running_bursts
            .map_or("default (256)".to_owned(), |n| n.to_string())
    );
    println!(
        "started {} sessions in {:.1} s ({} StartSession failures); {}",
        ids.len(),
        started_in.as_secs_f64(),
        start_failures,
        match settled_at {
            Some(t) => format!("all settled after {:.1} s", t.as_secs_f64()),
            None => "NOT all settled within the bound".to_owned(),
        }
    );
    println!(
        "sessions completed {} of {}; store_failed {} (goal 0); other endings {:?}; lease takeovers {} (goal 0)",
        outcome.completed,
        outcome.total - 1,
        outcome.store_failed,
        outcome.other,
        outcome.takeovers
    );
    println!(
        "GetSession p50 {:.2} ms, p99 {:.2} ms under load ({} timed calls) vs idle p50 {:.2} ms, p99 {:.2} ms: p99 ratio {:.1}",
        ms(pick(&under_load, 0.5)),
        ms(pick(&under_load, 0.99)),
        reads,
        ms(pick(&baseline, 0.5)),
        ms(pick(&baseline, 0.99)),
        ms(pick(&under_load, 0.99)) / ms(pick(&baseline, 0.99)).max(1e-6)
    );
    println!(
        "watch events delivered {watch_events}; client-visible errors by code {:?}",
        errors.snapshot()
    );
    println!(
        "server memory: idle {:.1} MiB, peak sampled RSS {:.1} MiB, peak (VmHWM) {:.1} MiB",
        mib(rss_idle),
        mib(rss_peak_sampled),
        mib(peak)
    );
    Ok(())
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// Client-visible failures, by gRPC code.
#[derive(Default)]
struct ErrorCounts {
    by_code: [AtomicU64; 17],
}

impl ErrorCounts {
    fn count(&self, code: tonic::Code) {
        if let Some(c) = self.by_code.get(code as usize) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn snapshot(&self) -> Vec<(String, u64)> {
        self.by_code
            .iter()
            .enumerate()
            .filter_map(|(i, c)| {
                let n = c.load(Ordering::Relaxed);
                (n > 0).then(|| (format!("{:?}", tonic::Code::from(i as i32)), n))
            })
            .collect()
    }
}

/// How the sessions ended, read from the store.
struct Outcome {
    total: i64,
    completed: i64,
    store_failed: i64,
    other: Vec<(String, i64)>,
    takeovers: i64,
}

async fn db(url: &str) -> anyhow::Result<tokio_postgres::Client> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            eprintln!("bench database connection: {e}");
        }
    });
    Ok(client)
}

async fn active_sessions(url: &str) -> anyhow::Result<i64> {
    Ok(db(url)
        .await?
        .query_one(
            "SELECT count(*) FROM sessions WHERE status IN ('pending', 'running')",
            &[],
        )
        .await?
        .get(0))
}

async fn outcomes(url: &str) -> anyhow::Result<Outcome> {
    let db = db(url).await?;
    let rows = db
        .query(
            "SELECT coalesce(exit_reason, status), count(*), \
                    count(*) FILTER (WHERE lease_epoch > 1) \
             FROM sessions GROUP BY 1 ORDER BY 1",
            &[],
        )
        .await?;
    let mut outcome = Outcome {
        total: 0,
        completed: 0,
        store_failed: 0,
        other: Vec::new(),
        takeovers: 0,
    };
    for row in rows {
        let reason: String = row.get(0);
        let n: i64 = row.get(1);
        outcome.total += n;
        outcome.takeovers += row.get::<_, i64>(2);
        match reason.as_str() {
            "completed" => outcome.completed += n,
            "store_failed" => outcome.store_failed += n,
            _ => outcome.other.push((reason, n)),
        }
    }
    // The baseline's probe session is not part of the load.
    outcome.completed -= 1;
    Ok(outcome)
}

async fn connect_many(endpoint: &str, n: usize) -> anyhow::Result<Vec<Channel>> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(
            tonic::transport::Endpoint::from_shared(endpoint.to_owned())?
                .connect()
                .await?,
        );
    }
    Ok(out)
}

async fn wait_settled(client: &mut Client, id: &str, guard: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + guard;
    loop {
        let s = client
            .get_session(pb::GetSessionRequest {
                session_id: id.to_owned(),
            })
            .await?
            .into_inner();
        if !matches!(
            s.status(),
            pb::SessionStatus::Pending | pb::SessionStatus::Running
        ) {
            anyhow::ensure!(
                s.status() == pb::SessionStatus::Completed,
                "the baseline session ended {:?} ({})",
                s.status(),
                s.exit_reason
            );
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the baseline session never settled"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A TCP relay in front of the fake model server that holds each chunk
/// of every answer back by `delay`: a provider that takes that long.
struct SlowRelay {
    base_url: String,
    task: tokio::task::JoinHandle<()>,
}

impl SlowRelay {
    async fn start(upstream_base: &str, delay: Duration) -> anyhow::Result<SlowRelay> {
        let authority = upstream_base
            .trim_start_matches("http://")
            .split('/')
            .next()
            .context("fake base url")?
            .to_owned();
        let upstream: std::net::SocketAddr = authority.parse()?;
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            let mut connections = JoinSet::new();
            while let Ok((client, _)) = listener.accept().await {
                connections.spawn(relay(client, upstream, delay));
                while connections.try_join_next().is_some() {}
            }
        });
        Ok(SlowRelay {
            base_url: upstream_base.replace(&authority, &addr.to_string()),
            task,
        })
    }
}

impl Drop for SlowRelay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn relay(client: TcpStream, upstream: std::net::SocketAddr, delay: Duration) {
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let requests = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut client_read, &mut server_write).await;
        let _ = server_write.shutdown().await;
    });
    let mut buf = vec![0u8; 64 * 1024];
    while let Ok(n) = server_read.read(&mut buf).await {
        if n == 0 {
            break;
        }
        tokio::time::sleep(delay).await;
        if client_write.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
    requests.abort();
}
