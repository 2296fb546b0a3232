//! `inquest-bench capacity`: what one replica and one primary carry.
//!
//! One replica process (this binary's `serve`) runs `--sessions`
//! investigations at once, each a scripted model that answers in
//! `--model-delay` (2 s by default) and calls a built-in file tool every
//! step. Two phases, each measured over `--seconds` once every session is
//! running:
//!
//! 1. bursts only: the replica's CPU (utime + stime from `/proc`) and
//!    resident memory against the idle replica, per running burst; the
//!    primary's turn appends per second and its connections from this
//!    database;
//! 2. then one gRPC watcher per session: the same figures again (the
//!    difference, per watcher), and each turn's commit → receive latency
//!    at its watcher (the turn's `created_at`, the database's clock, to
//!    the receive, this host's: one host, one clock), p50/p99.
//!
//! The goal of the issue: 2,000 investigations with watcher p99 < 100 ms.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant, SystemTime},
};

use anyhow::Context;
use inquest_proto::v1::{self as pb, investigations_client::InvestigationsClient, watch_event};
use tonic::transport::Channel;

use crate::bench_replicas::{Replica, ms, pick};

pub struct CapacityBench {
    pub url: String,
    pub sessions: usize,
    pub model_delay: Duration,
    pub seconds: u64,
}

/// Streams per HTTP/2 connection the watchers open (the server allows 200).
const STREAMS_PER_CONNECTION: usize = 150;

pub async fn run(bench: CapacityBench) -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join(format!("inquest-bench-capacity-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    // Long enough to outlive the ramp and both phases.
    let ramp_allowance = bench.sessions as f64 / 50.0;
    let steps = ((ramp_allowance + 2.0 * bench.seconds as f64 + 60.0)
        / bench.model_delay.as_secs_f64().max(0.1)) as usize
        + 5;
    let config = config(&dir, bench.sessions, steps, bench.model_delay)?;
    let replica = Replica::start(&bench.url, &config, "bench-capacity", None).await?;
    let (db, connection) = tokio_postgres::connect(&bench.url, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let idle_rss = replica.memory("VmRSS")?;
    let idle_cpu = cpu_seconds(replica.pid())?;
    let idle_at = Instant::now();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let idle_cores = (cpu_seconds(replica.pid())? - idle_cpu) / idle_at.elapsed().as_secs_f64();

    // Start every session (a few connections, 32 calls at a time).
    let channel = Channel::from_shared(replica.endpoint.clone())?
        .connect()
        .await?;
    let started = Instant::now();
    let ids = start_sessions(channel.clone(), bench.sessions).await?;
    println!(
        "started {} sessions in {:.1} s",
        ids.len(),
        started.elapsed().as_secs_f64()
    );
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let running: i64 = db
            .query_one(
                "SELECT count(*) FROM sessions WHERE status = 'running'",
                &[],
            )
            .await?
            .get(0);
        if running as usize >= bench.sessions {
            break;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "only {running} of {} sessions running after 120 s",
            bench.sessions
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let bursts = measure(&replica, &db, bench.seconds).await?;

    // Phase 2: a watcher per session.
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let recording = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut watchers = Vec::new();
    let mut channel = None;
    for (i, id) in ids.iter().enumerate() {
        if i % STREAMS_PER_CONNECTION == 0 {
            channel = Some(
                Channel::from_shared(replica.endpoint.clone())?
                    .connect()
                    .await?,
            );
        }
        let channel = channel.clone().context("a channel")?;
        watchers.push(tokio::spawn(watch(
            channel,
            id.clone(),
            Arc::clone(&latencies),
            Arc::clone(&recording),
        )));
    }
    // Let every watcher catch up on what is stored, then record.
    tokio::time::sleep(Duration::from_secs(5)).await;
    recording.store(true, std::sync::atomic::Ordering::Relaxed);
    let watched = measure(&replica, &db, bench.seconds).await?;
    recording.store(false, std::sync::atomic::Ordering::Relaxed);
    let ended = watchers.iter().filter(|w| w.is_finished()).count();
    for w in &watchers {
        w.abort();
    }
    let mut latencies = latencies
        .lock()
        .map_err(|_| anyhow::anyhow!("latencies poisoned"))?
        .clone();
    latencies.sort();
    let failed: i64 = db
        .query_one("SELECT count(*) FROM sessions WHERE status = 'failed'", &[])
        .await?
        .get(0);
    replica.stop()?;
    let _ = std::fs::remove_dir_all(&dir);

    let n = bench.sessions as f64;
    println!(
        "\ncapacity: one replica, {} investigations, model answers in {:?}, a file tool each step; {} s per phase",
        bench.sessions, bench.model_delay, bench.seconds
    );
    println!(
        "idle replica: {:.1} MiB RSS, {:.3} cores",
        idle_rss as f64 / 1024.0,
        idle_cores
    );
    for (name, m) in [("bursts only", &bursts), ("with a watcher each", &watched)] {
        println!(
            "{name:>20}: replica {:.2} cores, {:.1} MiB RSS; primary {:.0} appends/s, {} connections from this database",
            m.cores,
            m.rss_kib as f64 / 1024.0,
            m.appends_per_second,
            m.connections
        );
    }
    println!(
        "per running burst: {:.2} ms CPU per second ({:.4} cores), {:.1} KiB",
        (bursts.cores - idle_cores) / n * 1000.0,
        (bursts.cores - idle_cores) / n,
        bursts.rss_kib.saturating_sub(idle_rss) as f64 / n
    );
    println!(
        "per watcher: {:.2} ms CPU per second, {:.1} KiB",
        (watched.cores - bursts.cores) / n * 1000.0,
        watched.rss_kib as f64 / n - bursts.rss_kib as f64 / n
    );
    println!(
        "watcher commit -> receive over {} turns: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; goal p99 < 100 ms: {}",
        latencies.len(),
        ms(pick(&latencies, 0.5)),
        ms(pick(&latencies, 0.99)),
        ms(latencies.last().copied().unwrap_or_default()),
        if ms(pick(&latencies, 0.99)) < 100.0 && !latencies.is_empty() {
            "met"
        } else {
            "NOT met"
        }
    );
    println!("watch streams that ended early: {ended}; sessions failed: {failed}");
    Ok(())
}

struct Measured {
    cores: f64,
    rss_kib: u64,
    appends_per_second: f64,
    connections: i64,
}

async fn measure(
    replica: &Replica,
    db: &tokio_postgres::Client,
    seconds: u64,
) -> anyhow::Result<Measured> {
    let turns = async || -> anyhow::Result<i64> {
        Ok(db
            .query_one(
                "SELECT coalesce(sum(head_seq), 0)::bigint FROM sessions",
                &[],
            )
            .await?
            .get(0))
    };
    let (cpu0, turns0, at) = (cpu_seconds(replica.pid())?, turns().await?, Instant::now());
    tokio::time::sleep(Duration::from_secs(seconds)).await;
    let elapsed = at.elapsed().as_secs_f64();
    let (cpu1, turns1) = (cpu_seconds(replica.pid())?, turns().await?);
    let connections: i64 = db
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()",
            &[],
        )
        .await?
        .get(0);
    Ok(Measured {
        cores: (cpu1 - cpu0) / elapsed,
        rss_kib: replica.memory("VmRSS")?,
        appends_per_second: (turns1 - turns0) as f64 / elapsed,
        // Less the bench's own.
        connections: connections - 1,
    })
}

/// utime + stime of `pid`, in seconds (clock ticks of 1/100 s).
fn cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name (which may hold spaces), from field 3.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .context("/proc/<pid>/stat")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| -> anyhow::Result<f64> {
        Ok(fields
            .get(i)
            .context("a /proc stat field")?
            .parse::<f64>()?)
    };
    // utime and stime are fields 14 and 15; `rest` starts at field 3.
    Ok((tick(11)? + tick(12)?) / 100.0)
}

async fn start_sessions(channel: Channel, count: usize) -> anyhow::Result<Vec<String>> {
    let mut c = InvestigationsClient::new(channel.clone());
    let incident = c
        .create_incident(pb::CreateIncidentRequest {
            title: "capacity".into(),
            description: String::new(),
        })
        .await?
        .into_inner()
        .id;
    let mut ids = Vec::with_capacity(count);
    let mut pending = tokio::task::JoinSet::new();
    for _ in 0..count {
        if pending.len() >= 32
            && let Some(done) = pending.join_next().await
        {
            ids.push(done??);
        }
        let mut c = InvestigationsClient::new(channel.clone());
        let incident = incident.clone();
        pending.spawn(async move {
            anyhow::Ok(
                c.start_session(pb::StartSessionRequest {
                    incident_id: incident,
                    message: "Why is checkout slow?".into(),
                    idempotency_key: String::new(),
                })
                .await?
                .into_inner()
                .id,
            )
        });
    }
    while let Some(done) = pending.join_next().await {
        ids.push(done??);
    }
    Ok(ids)
}

/// Follows one session, recording commit → receive of each turn while
/// `recording` is set.
async fn watch(
    channel: Channel,
    session: String,
    latencies: Arc<Mutex<Vec<Duration>>>,
    recording: Arc<std::sync::atomic::AtomicBool>,
) -> anyhow::Result<()> {
    let mut c = InvestigationsClient::new(channel);
    let mut stream = c
        .watch_session(pb::WatchSessionRequest {
            session_id: session,
            after_seq: 0,
            after_committed_at: None,
        })
        .await?
        .into_inner();
    while let Some(event) = stream.message().await? {
        let received = SystemTime::now();
        if let Some(watch_event::Event::Turn(t)) = event.event
            && recording.load(std::sync::atomic::Ordering::Relaxed)
            && let Some(at) = t.created_at
        {
            let committed = SystemTime::UNIX_EPOCH
                + Duration::new(
                    u64::try_from(at.seconds).unwrap_or(0),
                    u32::try_from(at.nanos).unwrap_or(0),
                );
            if let Ok(latency) = received.duration_since(committed)
                && let Ok(mut l) = latencies.lock()
            {
                l.push(latency);
            }
        }
    }
    Ok(())
}

fn config(
    dir: &std::path::Path,
    sessions: usize,
    steps: usize,
    delay: Duration,
) -> anyhow::Result<std::path::PathBuf> {
    let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/checkout-latency")
        .canonicalize()
        .context("examples/checkout-latency")?;
    let replies: Vec<serde_json::Value> = (1..=steps)
        .map(|i| {
            serde_json::json!({
                "text": format!("Step {i}: reading the deploy log again."),
                "tool_calls": [{"name": "search", "arguments": {"pattern": "checkout-api", "path": "deploys/deploys.log"}}],
            })
        })
        .collect();
    let script = dir.join("script.json");
    std::fs::write(
        &script,
        serde_json::json!({"replies": replies, "final": "Nothing changed."}).to_string(),
    )?;
    let text = format!(
        "[limits]\nmax_running_bursts = {}\n\n\
         [agent]\nmax_model_calls_per_burst = {calls}\niteration_budget = {calls}\n\n\
         [approval]\nmode = \"off\"\n\n\
         [[providers]]\nkind = \"script\"\nname = \"capacity-script\"\nscript = \"{}\"\ndelay = \"{}ms\"\n\n\
         [tools]\nfiles_root = \"{}\"\nfiles_server = \"evidence\"\n",
        sessions + 100,
        script.display(),
        delay.as_millis(),
        example.join("evidence").display(),
        calls = steps + 10,
    );
    let path = dir.join("inquest.toml");
    std::fs::write(&path, text)?;
    Ok(path)
}
