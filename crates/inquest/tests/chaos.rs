//! The chaos test: three real `inquest serve` replicas
//! on one PostgreSQL cluster the test owns, the strict fake model, and a
//! real MCP server whose mutating tool logs every execution with its
//! idempotency key. Sessions with follow-ups run and watchers follow them
//! from random replicas while faults land at random moments: kill -9,
//! SIGTERM mid-tool, SIGSTOP past the lease TTL, killed LISTEN and pool
//! connections, a PostgreSQL restart, and a partition of one running
//! replica (in its own network namespace) from the database.
//!
//! Every replica also delivers the event log to a webhook receiver in the
//! test (`support/chaos/receiver.rs`) that refuses or delays some requests.
//!
//! Then the checker (`support/chaos/checker.rs`) asserts every promise
//! for every session, stream, execution and delivered event, one line of figures is
//! printed, and the test fails listing the violations if there are any.
//!
//! Knobs: `INQUEST_CHAOS_SEED` (printed at the start), `INQUEST_CHAOS_SECONDS`
//! (faults, default 90), `INQUEST_CHAOS_SESSIONS`, `INQUEST_CHAOS_FAILOVER=1`
//! (a primary with a synchronous standby, and failovers among the faults). Needs root (network
//! namespace, PostgreSQL as the `postgres` user) and the MCP Python SDK
//! (`INQUEST_TEST_PYTHON`); without them it fails, it never skips.
//! `cargo xtask chaos --seconds N [--seed S]` runs it.

#[path = "support/chaos/mod.rs"]
mod chaos;

use std::{
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use chaos::{
    Rng, Settings, announce,
    checker::{self, Evidence},
    cluster::Cluster,
    executions,
    faults::{self, Kind, Targets},
    model::Model,
    netns::{self, Netns},
    now, receiver,
    replicas::Fleet,
    sessions::{collect_finals, create_incident, details, spawn_workload},
    setup::{EndServers, LOCALHOST, PARTITIONED, Peers, Workdir, free_port, specs},
    watchers::Streams,
    workload::Tracked,
};
use tokio::time::Instant;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_promise_holds_under_faults() {
    let s = Settings::from_env();
    let rng = Rng::new(s.seed);
    announce(&format!(
        "chaos: seed={} (INQUEST_CHAOS_SEED={} replays this plan), faults for {} s, {} sessions",
        s.seed, s.seed, s.fault_seconds, s.sessions
    ));
    let work = Workdir::new();
    let dir = work.path().to_owned();
    let netns = Netns::create().unwrap_or_else(|e| {
        panic!(
            "the chaos test partitions a replica inside a network namespace and could not make \
             one ({e}); it needs root and iproute2 (`ip`)"
        )
    });
    let mut cluster = Cluster::start(&dir.join("pg"), free_port(), &["127.0.0.1", netns::HOST_IP])
        .unwrap_or_else(|e| panic!("starting the chaos test's PostgreSQL cluster: {e}"));
    if s.failover {
        cluster
            .add_standby(free_port())
            .unwrap_or_else(|e| panic!("starting the chaos test's standby: {e}"));
    }
    let model = Model::start(s.seed, &[LOCALHOST, netns::host_ip()]).await;
    let receiver = receiver::Receiver::start(s.seed, &[LOCALHOST, netns::host_ip()]).await;
    let exec_log = dir.join("executions.jsonl");
    let pid_log = dir.join("mcp-pids.txt");
    let _servers = EndServers(pid_log.clone());
    let logs = dir.join("logs");
    std::fs::create_dir_all(&logs).expect("creating the log directory");
    let mut fleet = Fleet::new(
        specs(
            &s,
            &dir,
            Peers {
                model: &model,
                receiver: &receiver,
            },
            &cluster,
            &netns,
            &exec_log,
            &pid_log,
        ),
        &logs,
    );
    fleet
        .start_all()
        .await
        .unwrap_or_else(|e| panic!("starting the replicas: {e}"));
    let started = Instant::now();

    let until = Instant::now() + Duration::from_secs(s.fault_seconds);
    let deadline = until + Duration::from_secs(75);
    let dir_handle = Arc::clone(&fleet.directory);
    let incident = create_incident(&dir_handle).await;
    let tracked: Vec<Arc<Tracked>> = (0..s.sessions).map(|i| Arc::new(Tracked::new(i))).collect();
    let streams: Streams = Arc::new(Mutex::new(Vec::new()));
    let (sessions, watchers) = spawn_workload(
        &s,
        &rng,
        &tracked,
        &dir_handle,
        &streams,
        &incident,
        deadline,
    );

    let mut targets = Targets {
        fleet: &mut fleet,
        cluster: &cluster,
        netns: &netns,
        partitioned: PARTITIONED,
        exec_log: &exec_log,
    };
    let counts = faults::run(&mut targets, &s, until, rng.fork(u64::MAX))
        .await
        .unwrap_or_else(|e| panic!("injecting faults (seed {}): {e}", s.seed));
    announce(&format!(
        "chaos: faults stopped after {:.0?}",
        started.elapsed()
    ));
    for h in sessions {
        h.await.expect("a workload task panicked");
    }
    // Orphans are claimed within one TTL and one reap interval.
    tokio::time::sleep(s.lease_ttl + s.reap_interval + Duration::from_secs(1)).await;
    for h in watchers {
        h.await.expect("a watcher task panicked");
    }
    let finals = collect_finals(&dir_handle, &tracked, &rng).await;
    let (logged, delivered) = await_deliveries(&cluster, &receiver).await;
    fleet.stop_all(s.shutdown_grace).await;

    let (execs, unreadable) = executions::read(&exec_log);
    let streams = streams
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let history = fleet
        .history
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let rejections = model.rejections();
    let mut violations = checker::check(&Evidence {
        finals: &finals,
        tracked: &tracked,
        streams: &streams,
        executions: &execs,
        history: &history,
        rejections: &rejections,
        ttl: s.lease_ttl.as_secs_f64(),
        now: now(),
    });
    violations.extend(unreadable);
    receiver::check(&logged, &delivered, &mut violations);
    details(&finals, &tracked, &streams, &execs, &model);
    let turns: usize = finals.iter().map(|f| f.turns.len()).sum();
    announce(&format!(
        "chaos: sessions={} turns={turns} faults kill9={} sigterm={} sigstop={} listen_kill={} \
         conn_kill={} pg_restart={} partition={} failover={} watch_streams={} events={} webhook_posts={} \
         webhook_refused={} violations={} seed={} elapsed={:.0?}",
        finals.len(),
        counts.of(Kind::Kill9),
        counts.of(Kind::Sigterm),
        counts.of(Kind::Sigstop),
        counts.of(Kind::ListenKill),
        counts.of(Kind::ConnKill),
        counts.of(Kind::PgRestart),
        counts.of(Kind::Partition),
        counts.of(Kind::Failover),
        streams.len(),
        logged.len(),
        delivered.len(),
        receiver.refused(),
        violations.len(),
        s.seed,
        started.elapsed(),
    ));
    if !violations.is_empty() {
        let kept = work.keep();
        let shown: Vec<&String> = violations.iter().take(60).collect();
        panic!(
            "{} violation(s) (seed {}; logs, execution log and PostgreSQL log kept in {}):\n  {}{}",
            violations.len(),
            s.seed,
            kept.display(),
            shown
                .iter()
                .map(|v| v.as_str())
                .collect::<Vec<_>>()
                .join("\n  "),
            if violations.len() > shown.len() {
                format!("\n  ... and {} more", violations.len() - shown.len())
            } else {
                String::new()
            }
        );
    }
}

/// Waits (60 s at most) until every event in the log reached the receiver
/// with a 2xx; the log and what arrived, for the checker. The replicas are
/// still running: delivery resumes after the last fault like everything
/// else.
async fn await_deliveries(
    cluster: &Cluster,
    receiver: &receiver::Receiver,
) -> (receiver::Logged, Vec<receiver::Delivered>) {
    let db = inquest_tests::connect(&cluster.url("127.0.0.1")).await;
    let logged: receiver::Logged = db
        .query("SELECT id, session_id::text FROM events ORDER BY id", &[])
        .await
        .unwrap_or_else(|e| panic!("reading the event log: {e}"))
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let delivered = receiver.delivered();
        let arrived: std::collections::HashSet<i64> = delivered.iter().map(|d| d.id).collect();
        if logged.iter().all(|(id, _)| arrived.contains(id)) || Instant::now() >= deadline {
            return (logged, delivered);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
