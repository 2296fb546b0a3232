//! `inquest-bench replicas`: what running several replicas costs and buys.
//!
//! 1. Cross-replica watch latency: two replicas (in this process, each with
//!    its own pool, replica id and LISTEN connection) on one database; a
//!    burst on A appends turns at a steady pace; one gRPC watcher on A and
//!    one on B. Commit → receive p50/p99 on B against A, same run.
//! 2. Crash recovery time: replicas as real child processes (this binary's
//!    `serve`), the session's replica is armed to hang before its first
//!    tool call and is `kill -9`ed there; a watcher on the survivor times
//!    the kill → recovery notice, against the configured lease TTL.
//! 3. Throughput: sessions completed per second by three replica processes
//!    against one, driven with the same concurrency (scripted model,
//!    built-in file tools over the example evidence).

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use anyhow::Context;
use inquest_core::{NewTurn, SessionId, TokenUsage};
use inquest_proto::v1::{self as pb, investigations_client::InvestigationsClient, watch_event};
use inquest_server::{Application, Config};
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;

type Client = InvestigationsClient<Channel>;

pub struct ReplicasBench {
    pub url: String,
    pub turns: usize,
    pub kills: usize,
    pub ttl: Duration,
    pub seconds: u64,
    pub concurrency: usize,
}

pub async fn run(bench: ReplicasBench) -> anyhow::Result<()> {
    anyhow::ensure!(
        inquest_agent::failpoints::COMPILED,
        "`replicas` kills a replica at a crash point, which this build lacks: run it as \
         `cargo run --release -p inquest-bench --features failpoints -- replicas ...`"
    );
    latency(&bench).await?;
    recovery(&bench).await?;
    throughput(&bench).await
}

pub(crate) fn pick(sorted: &[Duration], q: f64) -> Duration {
    sorted
        .get(((sorted.len() as f64 * q) as usize).min(sorted.len().saturating_sub(1)))
        .copied()
        .unwrap_or_default()
}

pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// What an in-process replica hands the bench: its endpoint, its store
/// and turn log (to play a burst through), and how to stop it.
type InProcess = (
    String,
    inquest_store::Store,
    inquest_server::TurnLog,
    CancellationToken,
    tokio::task::JoinHandle<anyhow::Result<()>>,
);

async fn in_process_replica(url: &str, name: &str) -> anyhow::Result<InProcess> {
    let mut config = Config {
        listen: "127.0.0.1:0".parse()?,
        database_url: Some(url.to_owned()),
        replica_id: Some(name.to_owned()),
        ..Config::default()
    };
    config.store.max_connections = 8;
    let app = Application::build(&config, url).await?;
    let endpoint = format!("http://{}", app.local_addr()?);
    let log = app.turn_log().clone();
    let store = app.store().clone();
    let stop = CancellationToken::new();
    let server = tokio::spawn(app.run(stop.clone()));
    Ok((endpoint, store, log, stop, server))
}

/// Watches `session` on `endpoint` from the start; returns the receive
/// instant of every turn seq (index = seq - 1) until `expected` arrived.
async fn receive(
    endpoint: String,
    session: SessionId,
    expected: usize,
    ready: tokio::sync::oneshot::Sender<()>,
) -> anyhow::Result<Vec<Instant>> {
    let mut client = Client::connect(endpoint).await?;
    let mut stream = client
        .watch_session(pb::WatchSessionRequest {
            session_id: session.to_string(),
            after_seq: 0,
            after_committed_at: None,
        })
        .await?
        .into_inner();
    let mut seen = vec![None; expected];
    let mut ready = Some(ready);
    let mut count = 0;
    while count < expected {
        let Some(event) = stream.message().await? else {
            anyhow::bail!("watch ended after {count} of {expected} turns");
        };
        if let Some(watch_event::Event::Turn(t)) = event.event {
            let at = Instant::now();
            if let Some(slot) = usize::try_from(t.seq - 1)
                .ok()
                .and_then(|i| seen.get_mut(i))
                && slot.is_none()
            {
                *slot = Some(at);
                count += 1;
            }
            if let Some(tx) = ready.take() {
                let _ = tx.send(());
            }
        }
    }
    Ok(seen
        .into_iter()
        .map(|t| t.unwrap_or_else(Instant::now))
        .collect())
}

async fn latency(bench: &ReplicasBench) -> anyhow::Result<()> {
    let (a_endpoint, a_store, a_log, a_stop, a_server) =
        in_process_replica(&bench.url, "bench-a").await?;
    let (b_endpoint, _, _, b_stop, b_server) = in_process_replica(&bench.url, "bench-b").await?;
    let (session, burst) = crate::bench_watch::running_session(&a_store, &a_log).await?;
    let total = bench.turns + 1;
    let (same_ready, same_ready_rx) = tokio::sync::oneshot::channel();
    let (cross_ready, cross_ready_rx) = tokio::sync::oneshot::channel();
    let same = tokio::spawn(receive(a_endpoint, session, total, same_ready));
    let cross = tokio::spawn(receive(b_endpoint, session, total, cross_ready));
    same_ready_rx.await.context("same-replica watcher")?;
    cross_ready_rx.await.context("cross-replica watcher")?;
    let mut committed = vec![Instant::now()];
    let content = "x".repeat(256);
    for _ in 0..bench.turns {
        let turn = burst
            .append(NewTurn::Assistant {
                text: content.clone(),
                tool_calls: Vec::new(),
                usage: TokenUsage::default(),
            })
            .await?;
        committed.push(Instant::now());
        debug_assert_eq!(turn.seq.as_i64() as usize, committed.len());
        // A steady pace, as an investigation writes: latency, not a queue.
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let same = same.await??;
    let cross = cross.await??;
    let lat = |seen: &[Instant]| {
        let mut l: Vec<Duration> = seen
            .iter()
            .zip(&committed)
            .skip(1)
            .map(|(r, c)| r.saturating_duration_since(*c))
            .collect();
        l.sort();
        l
    };
    let (same, cross) = (lat(&same), lat(&cross));
    println!(
        "cross-replica watch latency ({} turns of 256 bytes, 2 ms apart; commit -> gRPC receive)",
        bench.turns
    );
    println!("{:>16} | {:>9} {:>9}", "watcher on", "p50 ms", "p99 ms");
    println!(
        "{:>16} | {:>9.2} {:>9.2}",
        "same replica (A)",
        ms(pick(&same, 0.5)),
        ms(pick(&same, 0.99))
    );
    println!(
        "{:>16} | {:>9.2} {:>9.2}",
        "other replica (B)",
        ms(pick(&cross, 0.5)),
        ms(pick(&cross, 0.99))
    );
    println!(
        "cross / same: p50 x{:.2}, p99 x{:.2}\n",
        pick(&cross, 0.5).as_secs_f64() / pick(&same, 0.5).as_secs_f64().max(1e-9),
        pick(&cross, 0.99).as_secs_f64() / pick(&same, 0.99).as_secs_f64().max(1e-9)
    );
    burst.close(inquest_core::ExitReason::AwaitingUser).await?;
    a_stop.cancel();
    b_stop.cancel();
    a_server.await??;
    b_server.await??;
    Ok(())
}

/// A child `inquest-bench serve` (the same server as `inquest serve`),
/// its stderr scanned for lines.
pub(crate) struct Replica {
    child: Child,
    pub(crate) endpoint: String,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Replica {
    pub(crate) async fn start(
        url: &str,
        config: &Path,
        name: &str,
        failpoints: Option<&str>,
    ) -> anyhow::Result<Replica> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let mut command = Command::new(std::env::current_exe()?);
        command
            .args([
                "serve",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--database-url",
                url,
            ])
            .arg("--config")
            .arg(config)
            .env("INQUEST_REPLICA_ID", name)
            .env("RUST_LOG", "warn")
            .env_remove("INQUEST_FAILPOINTS")
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(f) = failpoints {
            command.env("INQUEST_FAILPOINTS", f);
        }
        let mut child = command.spawn().context("starting a replica")?;
        let lines = Arc::new(Mutex::new(Vec::new()));
        if let Some(stderr) = child.stderr.take() {
            let sink = Arc::clone(&lines);
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    if let Ok(mut l) = sink.lock() {
                        l.push(line);
                    }
                }
            });
        }
        let endpoint = format!("http://127.0.0.1:{port}");
        for _ in 0..600 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Ok(Replica {
                    child,
                    endpoint,
                    lines,
                });
            }
            if let Some(status) = child.try_wait()? {
                anyhow::bail!("replica {name} exited: {status}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        anyhow::bail!("replica {name} never listened")
    }

    fn logged(&self, needle: &str) -> bool {
        self.lines
            .lock()
            .map(|l| l.iter().any(|line| line.contains(needle)))
            .unwrap_or(false)
    }

    fn kill9(mut self) -> anyhow::Result<()> {
        Command::new("kill")
            .args(["-KILL", &self.child.id().to_string()])
            .status()?;
        self.child.wait()?;
        Ok(())
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A `/proc/<pid>/status` figure in KiB (`VmRSS`, `VmHWM`).
    pub(crate) fn memory(&self, field: &str) -> anyhow::Result<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))?;
        status
            .lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .with_context(|| format!("{field} in /proc/{}/status", self.child.id()))
    }

    pub(crate) fn stop(mut self) -> anyhow::Result<()> {
        Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()?;
        self.child.wait()?;
        Ok(())
    }
}

impl Drop for Replica {
    /// A bench that fails halfway leaves no server behind. (After `stop`
    /// or `kill9` the child is reaped, and killing it again does nothing.)
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A fresh directory for a config file (left in the temp dir; it is tiny).
fn scratch_dir(what: &str) -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!(
        "inquest-bench-replicas-{what}-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// The example investigation's config with absolute paths and `ttl`.
pub(crate) fn replica_config(dir: &Path, ttl: Duration) -> anyhow::Result<PathBuf> {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/checkout-latency");
    let example = example
        .canonicalize()
        .context("examples/checkout-latency")?;
    let text = format!(
        "[lease]\nttl = \"{}ms\"\nreap_interval = \"200ms\"\n\n[store]\nmax_connections = 4\n\n\
         [[providers]]\nkind = \"script\"\nname = \"demo-script\"\nscript = \"{}\"\n\n\
         [tools]\nfiles_root = \"{}\"\nfiles_server = \"evidence\"\n",
        ttl.as_millis(),
        example.join("script.json").display(),
        example.join("evidence").display(),
    );
    let path = dir.join("inquest.toml");
    std::fs::write(&path, text)?;
    Ok(path)
}

pub(crate) async fn new_session(client: &mut Client) -> anyhow::Result<String> {
    let incident = client
        .create_incident(pb::CreateIncidentRequest {
            title: "bench".into(),
            description: String::new(),
        })
        .await?
        .into_inner();
    Ok(client
        .start_session(pb::StartSessionRequest {
            incident_id: incident.id,
            message: "why is checkout slow?".into(),
            idempotency_key: String::new(),
        })
        .await?
        .into_inner()
        .id)
}

async fn recovery(bench: &ReplicasBench) -> anyhow::Result<()> {
    let dir = scratch_dir("recovery")?;
    let config = replica_config(&dir, bench.ttl)?;
    let survivor = Replica::start(&bench.url, &config, "bench-survivor", None).await?;
    let mut times = Vec::new();
    for round in 0..bench.kills {
        let victim = Replica::start(
            &bench.url,
            &config,
            &format!("bench-victim-{round}"),
            Some("before-tool-run=1*return(hang)"),
        )
        .await?;
        let mut client = Client::connect(victim.endpoint.clone()).await?;
        let session = new_session(&mut client).await?;
        let mut watcher = Client::connect(survivor.endpoint.clone()).await?;
        let mut stream = watcher
            .watch_session(pb::WatchSessionRequest {
                session_id: session.clone(),
                after_seq: 0,
                after_committed_at: None,
            })
            .await?
            .into_inner();
        let deadline = Instant::now() + Duration::from_secs(60);
        while !victim.logged("failpoint before-tool-run reached") {
            anyhow::ensure!(
                Instant::now() < deadline,
                "the victim never reached its failpoint"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        victim.kill9()?;
        let killed = Instant::now();
        let recovered = loop {
            let Some(event) = tokio::time::timeout(bench.ttl * 4, stream.message())
                .await
                .context("no recovery notice within 4 x TTL")??
            else {
                anyhow::bail!("watch ended before the recovery notice");
            };
            if let Some(watch_event::Event::Turn(t)) = event.event
                && t.role() == pb::TurnRole::Notice
            {
                break Instant::now();
            }
        };
        times.push(recovered - killed);
    }
    survivor.stop()?;
    times.sort();
    println!(
        "crash recovery: kill -9 at a failpoint -> recovery notice on another replica's watcher ({} kills, lease TTL {:?}, reap interval 200 ms, renewal every TTL/3)",
        bench.kills, bench.ttl
    );
    println!(
        "min {:.0} ms, p50 {:.0} ms, max {:.0} ms; goal under TTL + 1 s = {:.0} ms: {}\n",
        ms(times[0]),
        ms(pick(&times, 0.5)),
        ms(times[times.len() - 1]),
        ms(bench.ttl + Duration::from_secs(1)),
        if times[times.len() - 1] < bench.ttl + Duration::from_secs(1) {
            "met"
        } else {
            "NOT met"
        }
    );
    Ok(())
}

async fn drive(endpoints: &[String], span: Duration, concurrency: usize) -> anyhow::Result<usize> {
    let deadline = Instant::now() + span;
    let mut tasks = tokio::task::JoinSet::new();
    for worker in 0..concurrency {
        let endpoint = endpoints[worker % endpoints.len()].clone();
        tasks.spawn(async move {
            let mut client = Client::connect(endpoint).await?;
            let mut done = 0usize;
            while Instant::now() < deadline {
                let session = new_session(&mut client).await?;
                loop {
                    let s = client
                        .get_session(pb::GetSessionRequest {
                            session_id: session.clone(),
                        })
                        .await?
                        .into_inner();
                    if s.status() == pb::SessionStatus::Completed {
                        break;
                    }
                    anyhow::ensure!(
                        matches!(
                            s.status(),
                            pb::SessionStatus::Pending | pb::SessionStatus::Running
                        ),
                        "a bench session ended {:?} ({})",
                        s.status(),
                        s.exit_reason
                    );
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                done += 1;
            }
            anyhow::Ok(done)
        });
    }
    let mut total = 0;
    while let Some(done) = tasks.join_next().await {
        total += done??;
    }
    Ok(total)
}

async fn throughput(bench: &ReplicasBench) -> anyhow::Result<()> {
    let dir = scratch_dir("throughput")?;
    let config = replica_config(&dir, Duration::from_secs(30))?;
    let span = Duration::from_secs(bench.seconds);
    let mut rates = Vec::new();
    for replicas in [1usize, 3, 1, 3] {
        let mut started = Vec::new();
        for i in 0..replicas {
            started
                .push(Replica::start(&bench.url, &config, &format!("bench-tp-{i}"), None).await?);
        }
        let endpoints: Vec<String> = started.iter().map(|r| r.endpoint.clone()).collect();
        let t0 = Instant::now();
        let done = drive(&endpoints, span, bench.concurrency).await?;
        let rate = done as f64 / t0.elapsed().as_secs_f64();
        rates.push((replicas, rate));
        for r in started {
            r.stop()?;
        }
    }
    println!(
        "sessions per second (scripted example investigation: 4 model calls, 4 file-tool calls, report; {} concurrent clients, {} s per slice, slices alternate)",
        bench.concurrency, bench.seconds
    );
    for (replicas, rate) in &rates {
        println!("{replicas} replica(s): {rate:.1} sessions/s");
    }
    let avg = |n: usize| {
        let v: Vec<f64> = rates
            .iter()
            .filter(|(r, _)| *r == n)
            .map(|(_, x)| *x)
            .collect();
        v.iter().sum::<f64>() / v.len().max(1) as f64
    };
    println!("three / one: {:.2}", avg(3) / avg(1).max(1e-9));
    Ok(())
}
