//! `inquest-bench attack`: what callers without credentials cost a
//! replica, measured from a valid client's side.
//!
//! A real `inquest-bench serve` child with `[auth] mode = "required"` on a
//! scratch database. First a valid client's ListIncidents latency on the
//! idle server (the baseline), then, for `--seconds` each, the same client
//! during one attack at a time:
//! - `idle`: `--connections` TCP connections that send nothing, reopened
//!   as the server closes them (past `limits.max_connections` they are
//!   closed at accept);
//! - `unknown-tokens`: ListIncidents with a fresh random `inq_` token id
//!   per call, `--concurrency` at once over a few connections;
//! - `stream-flood`: connections that each open streams past
//!   `max_concurrent_streams` and never send their bodies, reconnecting
//!   after each GOAWAY.
//!
//! Per attack: the valid client's p50/p99 and their ratio to the
//! baseline's p99, its errors, the server's peak sampled RSS, and its CPU
//! (user + system time over wall time, in cores). The attackers run at
//! nice 19 on their own runtime, the valid client on its own thread.
//! Goals: p99 within 5x
//! idle with 0 errors, RSS under 256 MiB, CPU under one core.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::Context;
use inquest_proto::v1::{self as pb, investigations_client::InvestigationsClient};
use tokio::{io::AsyncWriteExt, net::TcpStream, task::JoinSet};
use tonic::{Request, metadata::MetadataValue, transport::Channel};

use inquest_testkit::h2raw;

use crate::bench_replicas::{Replica, ms};

pub struct AttackBench {
    pub url: String,
    pub seconds: u64,
    pub connections: usize,
    pub concurrency: usize,
}

/// `/proc` reports CPU time in USER_HZ ticks, 100 a second on Linux.
const TICKS_PER_SECOND: f64 = 100.0;

pub async fn run(bench: AttackBench) -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join(format!("inquest-bench-attack-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let config = dir.join("inquest.toml");
    std::fs::write(
        &config,
        "[auth]\nmode = \"required\"\n\n[admin]\nenabled = false\n",
    )?;
    let server = Replica::start(&bench.url, &config, "bench-attack", None).await?;
    let result = measure(&bench, &server).await;
    server.stop()?;
    let _ = std::fs::remove_dir_all(dir);
    result
}

/// What the valid client saw during one phase, and what the server used.
struct Phase {
    waits: Vec<Duration>,
    errors: u64,
    peak_rss_kib: u64,
    cores: f64,
}

async fn measure(bench: &AttackBench, server: &Replica) -> anyhow::Result<()> {
    let store = inquest_store::Store::connect(&inquest_store::StoreConfig::new(&bench.url))?;
    let token = store
        .create_token(
            "bench-valid",
            &inquest_core::Tenant::default_tenant(),
            inquest_auth::Role::Viewer,
            None,
        )
        .await?;
    let bearer: MetadataValue<_> = format!("Bearer {}", token.secret).parse()?;
    let endpoint = server.endpoint.clone();
    let seconds = Duration::from_secs(bench.seconds);
    let phase = |attack: Option<Attack>| {
        let bearer = bearer.clone();
        let endpoint = endpoint.clone();
        async move {
            let stop = Arc::new(AtomicBool::new(false));
            let mut attackers = JoinSet::new();
            // The attackers run at the lowest CPU priority: on this small
            // machine they share the server's cores, where a real attacker
            // would bring its own; the server's and the valid client's work
            // comes first, and what the attack costs the server still shows.
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .on_thread_start(|| {
                    let _ = rustix::process::setpriority_process(None, 19);
                })
                .enable_all()
                .build()?;
            if let Some(a) = attack {
                a.spawn(&mut attackers, runtime.handle(), &endpoint, bench, &stop);
                // Let the attack build up before measuring.
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
            let phase = observe(server, endpoint.clone(), bearer, seconds).await;
            stop.store(true, Ordering::Relaxed);
            attackers.abort_all();
            while attackers.join_next().await.is_some() {}
            runtime.shutdown_background();
            // Closed connections and finished streams drain before the next.
            tokio::time::sleep(Duration::from_secs(2)).await;
            phase
        }
    };
    let idle = phase(None).await?;
    let idle_p99 = pct(&idle.waits, 99);
    println!(
        "attack bench: {} s per phase, {} idle connections, {} concurrent unknown-token calls",
        bench.seconds, bench.connections, bench.concurrency
    );
    report("idle (baseline)", &idle, idle_p99);
    for attack in [Attack::Idle, Attack::UnknownTokens, Attack::StreamFlood] {
        let name = attack.name();
        let seen = phase(Some(attack)).await?;
        report(name, &seen, idle_p99);
    }
    oracle(&endpoint, &token.token.id).await
}

/// The time to refuse a known token id with a wrong secret against an
/// unknown id, calls alternating, one at a time.
async fn oracle(endpoint: &str, known: &uuid::Uuid) -> anyhow::Result<()> {
    const CALLS: usize = 200;
    let mut client =
        InvestigationsClient::new(Channel::from_shared(endpoint.to_owned())?.connect().await?);
    let wrong = format!("Bearer inq_{}_{}", known.simple(), "0".repeat(64));
    let (mut known_waits, mut unknown_waits) = (Vec::new(), Vec::new());
    for i in 0..2 * CALLS {
        let unknown = format!(
            "Bearer inq_{}_{}",
            uuid::Uuid::new_v4().simple(),
            "0".repeat(64)
        );
        let bearer = if i % 2 == 0 { &wrong } else { &unknown };
        let mut request = Request::new(pb::ListIncidentsRequest::default());
        request
            .metadata_mut()
            .insert("authorization", bearer.parse()?);
        let at = Instant::now();
        let refused = client.list_incidents(request).await.is_err();
        anyhow::ensure!(refused, "a wrong token was accepted");
        if i % 2 == 0 {
            known_waits.push(at.elapsed());
        } else {
            unknown_waits.push(at.elapsed());
        }
    }
    known_waits.sort();
    unknown_waits.sort();
    println!(
        "timing: known id + wrong secret p10/p50/p90 {:.1}/{:.1}/{:.1} ms; unknown id {:.1}/{:.1}/{:.1} ms ({CALLS} each)",
        ms(pct(&known_waits, 10)),
        ms(pct(&known_waits, 50)),
        ms(pct(&known_waits, 90)),
        ms(pct(&unknown_waits, 10)),
        ms(pct(&unknown_waits, 50)),
        ms(pct(&unknown_waits, 90)),
    );
    Ok(())
}

fn pct(sorted: &[Duration], p: usize) -> Duration {
    sorted
        .get((sorted.len() * p / 100).min(sorted.len().saturating_sub(1)))
        .copied()
        .unwrap_or_default()
}

fn report(name: &str, phase: &Phase, idle_p99: Duration) {
    let p99 = pct(&phase.waits, 99);
    println!(
        "{name:>16}: valid client {} calls, p50 {:.2} ms, p99 {:.2} ms ({:.2}x idle p99), {} errors; \
         server peak RSS {:.1} MiB, CPU {:.2} cores",
        phase.waits.len(),
        ms(pct(&phase.waits, 50)),
        ms(p99),
        p99.as_secs_f64() / idle_p99.as_secs_f64().max(1e-9),
        phase.errors,
        phase.peak_rss_kib as f64 / 1024.0,
        phase.cores,
    );
}

/// The valid client's calls for `seconds`, with the server's RSS and CPU
/// sampled meanwhile. The client runs on its own thread and runtime, so
/// the attackers' tasks in this process do not delay its polling.
async fn observe(
    server: &Replica,
    endpoint: String,
    bearer: MetadataValue<tonic::metadata::Ascii>,
    seconds: Duration,
) -> anyhow::Result<Phase> {
    let cpu_before = server.cpu_ticks()?;
    let started = Instant::now();
    let client = std::thread::spawn(move || -> anyhow::Result<(Vec<Duration>, u64)> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        runtime.block_on(async move {
            let mut valid =
                InvestigationsClient::new(Channel::from_shared(endpoint)?.connect().await?);
            let (mut waits, mut errors) = (Vec::new(), 0);
            while started.elapsed() < seconds {
                let mut request = Request::new(pb::ListIncidentsRequest::default());
                request
                    .metadata_mut()
                    .insert("authorization", bearer.clone());
                let at = Instant::now();
                match tokio::time::timeout(Duration::from_secs(10), valid.list_incidents(request))
                    .await
                {
                    Ok(Ok(_)) => waits.push(at.elapsed()),
                    _ => errors += 1,
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Ok((waits, errors))
        })
    });
    let mut peak_rss_kib = 0;
    while !client.is_finished() {
        peak_rss_kib = peak_rss_kib.max(server.memory("VmRSS")?);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (mut waits, errors) = client
        .join()
        .map_err(|_| anyhow::anyhow!("the valid client's thread panicked"))??;
    let wall = started.elapsed().as_secs_f64();
    let cores = (server.cpu_ticks()? - cpu_before) as f64 / TICKS_PER_SECOND / wall;
    peak_rss_kib = peak_rss_kib.max(server.memory("VmRSS")?);
    waits.sort();
    Ok(Phase {
        waits,
        errors,
        peak_rss_kib,
        cores,
    })
}

#[derive(Clone, Copy)]
enum Attack {
    Idle,
    UnknownTokens,
    StreamFlood,
}

impl Attack {
    fn name(self) -> &'static str {
        match self {
            Attack::Idle => "idle connections",
            Attack::UnknownTokens => "unknown tokens",
            Attack::StreamFlood => "stream flood",
        }
    }

    fn spawn(
        self,
        set: &mut JoinSet<()>,
        on: &tokio::runtime::Handle,
        endpoint: &str,
        bench: &AttackBench,
        stop: &Arc<AtomicBool>,
    ) {
        let addr = endpoint.trim_start_matches("http://").to_owned();
        match self {
            Attack::Idle => {
                // A few holders, each keeping its share of connections open.
                let holders = 8;
                for _ in 0..holders {
                    let (addr, stop) = (addr.clone(), Arc::clone(stop));
                    let share = bench.connections / holders;
                    set.spawn_on(async move { hold_idle(&addr, share, &stop).await }, on);
                }
            }
            Attack::UnknownTokens => {
                let calls = Arc::new(AtomicU64::new(0));
                for i in 0..bench.concurrency {
                    let (endpoint, stop, calls) =
                        (endpoint.to_owned(), Arc::clone(stop), Arc::clone(&calls));
                    // One connection per 100 callers.
                    set.spawn_on(
                        async move {
                            tokio::time::sleep(Duration::from_millis((i % 100) as u64)).await;
                            guess_tokens(&endpoint, &stop, &calls).await;
                        },
                        on,
                    );
                }
            }
            Attack::StreamFlood => {
                for _ in 0..4 {
                    let (addr, stop) = (addr.clone(), Arc::clone(stop));
                    set.spawn_on(async move { flood_streams(&addr, &stop).await }, on);
                }
            }
        }
    }
}

/// Keeps `n` connections that send nothing open to `addr`.
async fn hold_idle(addr: &str, n: usize, stop: &AtomicBool) {
    let mut open: Vec<TcpStream> = Vec::with_capacity(n);
    while !stop.load(Ordering::Relaxed) {
        // Keep only the ones still open with nothing to read.
        let mut byte = [0u8; 1];
        open.retain(|s| {
            matches!(s.try_read(&mut byte), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
        });
        while open.len() < n {
            match TcpStream::connect(addr).await {
                Ok(s) => open.push(s),
                Err(_) => break,
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Calls ListIncidents with a new random token id each time.
async fn guess_tokens(endpoint: &str, stop: &AtomicBool, calls: &AtomicU64) {
    let Ok(channel) = Channel::from_shared(endpoint.to_owned()) else {
        return;
    };
    let mut client = InvestigationsClient::new(channel.connect_lazy());
    while !stop.load(Ordering::Relaxed) {
        let guess = format!(
            "Bearer inq_{}_{}",
            uuid::Uuid::new_v4().simple(),
            "0".repeat(64)
        );
        let mut request = Request::new(pb::ListIncidentsRequest::default());
        if let Ok(value) = guess.parse() {
            request.metadata_mut().insert("authorization", value);
        }
        let _ = client.list_incidents(request).await;
        calls.fetch_add(1, Ordering::Relaxed);
    }
}

/// Opens streams on one connection without ever sending their bodies,
/// as fast as the socket takes them; reconnects when the server closes it.
async fn flood_streams(addr: &str, stop: &AtomicBool) {
    let block = h2raw::watch_headers(addr);
    while !stop.load(Ordering::Relaxed) {
        let Ok(stream) = TcpStream::connect(addr).await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let (mut read, mut write) = stream.into_split();
        // Drain what the server sends so its writes never block on us.
        let drain = tokio::spawn(async move {
            let mut sink = [0u8; 16 * 1024];
            while let Ok(n) = tokio::io::AsyncReadExt::read(&mut read, &mut sink).await {
                if n == 0 {
                    break;
                }
            }
        });
        if write.write_all(&h2raw::opening()).await.is_ok() {
            for id in (1..200_000u32).step_by(2) {
                if stop.load(Ordering::Relaxed)
                    || drain.is_finished()
                    || write
                        .write_all(&h2raw::frame(
                            h2raw::HEADERS,
                            h2raw::END_HEADERS,
                            id,
                            &block,
                        ))
                        .await
                        .is_err()
                {
                    break;
                }
            }
        }
        drain.abort();
    }
}

impl Replica {
    /// The child's user plus system CPU time so far, in ticks.
    pub(crate) fn cpu_ticks(&self) -> anyhow::Result<u64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid()))?;
        // Fields after the command name (which may hold spaces), from 3.
        let rest = stat
            .rsplit_once(')')
            .map(|(_, r)| r)
            .context("a /proc/<pid>/stat line")?;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let utime: u64 = fields.get(11).context("utime")?.parse()?;
        let stime: u64 = fields.get(12).context("stime")?.parse()?;
        Ok(utime + stime)
    }
}
