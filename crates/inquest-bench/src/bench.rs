//! `inquest-bench append`: turn appends per second and latency at several
//! writer counts, each writer on its own session (as in production), against
//! the ceiling of a bare single-row INSERT of the same size over the same
//! pool, measured in the same run. Prints the ratio.

use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Subcommand;
use inquest_core::{IncidentText, Limits, NewTurn, SessionId, TokenUsage, UserMessage};
use inquest_store::{
    Store, StoreConfig,
    embedded::{EmbeddedOptions, EmbeddedPostgres},
};

#[derive(Subcommand)]
pub enum BenchCommand {
    /// Turn appends vs bare INSERT ceiling at 1, 8 and 64 writers.
    Append {
        /// PostgreSQL URL of a scratch database (it gets migrated and a
        /// scratch table). Without one, an embedded cluster in a temporary
        /// directory is used and removed afterwards.
        #[arg(long, env = "INQUEST_BENCH_DATABASE_URL")]
        database_url: Option<String>,
        /// Writer counts to measure.
        #[arg(long, value_delimiter = ',', default_value = "1,8,64")]
        writers: Vec<usize>,
        /// Measuring time per phase, in seconds.
        #[arg(long, default_value_t = 5)]
        seconds: u64,
        /// Turn content size in bytes.
        #[arg(long, default_value_t = 1024)]
        payload: usize,
        /// `[store] append_statements`: turn-append statements run at
        /// once before appends are grouped. Default: the server's default.
        #[arg(long, default_value_t = inquest_store::DEFAULT_APPEND_STATEMENTS)]
        append_statements: usize,
    },
    /// Live-watch fan-out: writer rate, delivered events/s and
    /// persist->receive latency with 1, 100 and 1,000 gRPC watchers, and
    /// server memory per idle watcher (see `bench_watch.rs`).
    Watch {
        /// PostgreSQL URL of a scratch database (it gets migrated). Without
        /// one, an embedded cluster in a temporary directory is used.
        #[arg(long, env = "INQUEST_BENCH_DATABASE_URL")]
        database_url: Option<String>,
        /// Watcher counts to measure (a 0-watcher baseline always runs).
        #[arg(long, value_delimiter = ',', default_value = "1,100,1000")]
        watchers: Vec<usize>,
        /// Turns written per phase.
        #[arg(long, default_value_t = 2000)]
        turns: usize,
        /// Turn content size in bytes.
        #[arg(long, default_value_t = 256)]
        payload: usize,
        /// Idle watchers for the memory measurement (0 skips it).
        #[arg(long, default_value_t = 10_000)]
        idle_watchers: usize,
        /// `[runtime] agent_threads` of the server: the writer runs where
        /// a burst would. 0 puts it on the serving runtime (no split).
        /// Default: the server's default (half the CPUs, at least one).
        #[arg(long)]
        agent_threads: Option<usize>,
        /// `[runtime] serving_nice` of the server (the serving runtime's
        /// threads, which here also carry the watchers' clients and the
        /// ceiling). Default: the server's default.
        #[arg(long)]
        serving_nice: Option<u8>,
        /// Skip the bare-tonic transport ceiling.
        #[arg(long)]
        no_ceiling: bool,
        /// Pace the writer at this many turns per second (commit ->
        /// receive latency under a given load, not at saturation).
        /// Default: as fast as the store allows.
        #[arg(long)]
        rate: Option<f64>,
        /// Run the ceiling's producer on a runtime of its own, as the
        /// writer runs on the agent runtime (the cost of waking the
        /// streams from another runtime's threads).
        #[arg(long)]
        ceiling_apart: bool,
        /// Also measure the ceiling with the writer's least database
        /// work: its producer, on a runtime of its own, commits a bare
        /// single-row INSERT of each turn (the append bench's ceiling
        /// statement) before sending it. Inquest's delivered rate against
        /// this says how much of the gap to the bare ceiling is the
        /// database sharing the cores.
        #[arg(long)]
        ceiling_writes: bool,
        /// Spread each phase's watchers evenly over this many sessions,
        /// each with its own writer running at the same time (the fan-out
        /// with several producers, as on a replica with many live
        /// sessions). Each writer writes `--turns` turns.
        #[arg(long, default_value_t = 1)]
        sessions: usize,
    },
    /// Agent loop overhead: turns/s of the real loop (persist + publish +
    /// bookkeeping) with an instant in-process provider and a no-op tool,
    /// vs the bare INSERT ceiling (see `bench_loop.rs`).
    Loop {
        /// PostgreSQL URL of a scratch database (it gets migrated and a
        /// scratch table). Without one, an embedded cluster in a temporary
        /// directory is used.
        #[arg(long, env = "INQUEST_BENCH_DATABASE_URL")]
        database_url: Option<String>,
        /// Concurrent sessions to measure (ceiling: as many writers).
        #[arg(long, value_delimiter = ',', default_value = "1,8")]
        sessions: Vec<usize>,
        /// Measuring time per phase, in seconds.
        #[arg(long, default_value_t = 5)]
        seconds: u64,
        /// Model calls per burst; a burst appends 2 x calls - 1 turns.
        #[arg(long, default_value_t = 50)]
        calls_per_burst: u32,
        /// Turn text size in bytes.
        #[arg(long, default_value_t = 256)]
        payload: usize,
        /// `[store] append_statements`: turn-append statements run at
        /// once before appends are grouped. Default: the server's default.
        #[arg(long, default_value_t = inquest_store::DEFAULT_APPEND_STATEMENTS)]
        append_statements: usize,
        /// `[runtime] agent_threads`: both sides run on a runtime of this
        /// many worker threads, as a server's bursts do (0: this process's
        /// own runtime). Default: the server's default.
        #[arg(long)]
        agent_threads: Option<usize>,
    },
    /// Replicas: cross-replica watch latency against same-replica, kill -9
    /// to recovery notice against the lease TTL, and sessions/s of three
    /// replica processes against one (see `bench_replicas.rs`).
    Replicas {
        /// PostgreSQL URL of a scratch database (it gets migrated). Without
        /// one, an embedded cluster in a temporary directory is used.
        #[arg(long, env = "INQUEST_BENCH_DATABASE_URL")]
        database_url: Option<String>,
        /// Turns written for the latency measurement.
        #[arg(long, default_value_t = 2000)]
        turns: usize,
        /// Replicas killed for the recovery measurement.
        #[arg(long, default_value_t = 5)]
        kills: usize,
        /// Lease TTL of the recovery measurement, in milliseconds.
        #[arg(long, default_value_t = 2000)]
        ttl_ms: u64,
        /// Seconds per throughput slice.
        #[arg(long, default_value_t = 10)]
        seconds: u64,
        /// Concurrent clients of the throughput measurement.
        #[arg(long, default_value_t = 6)]
        concurrency: usize,
    },
    /// Capacity of one replica and one primary: CPU and memory per running
    /// burst and per watcher, appends/s and connections, and watcher
    /// commit -> receive with every session watched (see
    /// `bench_capacity.rs`).
    Capacity {
        /// PostgreSQL URL of a scratch database (it gets migrated). Without
        /// one, an embedded cluster in a temporary directory is used.
        #[arg(long, env = "INQUEST_BENCH_DATABASE_URL")]
        database_url: Option<String>,
        /// Investigations running at once on the replica.
        #[arg(long, default_value_t = 2000)]
        sessions: usize,
        /// How long each model answer takes, in milliseconds.
        #[arg(long, default_value_t = 2000)]
        model_delay_ms: u64,
        /// Seconds measured per phase.
        #[arg(long, default_value_t = 20)]
        seconds: u64,
    },
    /// Database failover: kill -9 of the primary's postmaster to the next
    /// turn of a running burst committed, against the cluster's own
    /// failover time (kill to the promoted standby taking writes), each
    /// round on a fresh primary and standby (see `bench_failover.rs`).
    Failover {
        /// Failovers timed.
        #[arg(long, default_value_t = 5)]
        rounds: usize,
        /// Lease TTL of the replica, in milliseconds.
        #[arg(long, default_value_t = 10_000)]
        ttl_ms: u64,
        /// An asynchronous standby instead of a synchronous one.
        #[arg(long)]
        asynchronous: bool,
    },
    /// From DecideToolCalls to the approved call starting, on another
    /// replica than the one that held it (see `bench_approval.rs`).
    Approval {
        /// PostgreSQL URL of a scratch database (it gets migrated). Without
        /// one, an embedded cluster in a temporary directory is used.
        #[arg(long, env = "INQUEST_BENCH_DATABASE_URL")]
        database_url: Option<String>,
        /// Decisions to time.
        #[arg(long, default_value_t = 60)]
        samples: usize,
    },
    /// From the end of a burst with a message queued behind it to that
    /// message's first model request (see `bench_queue.rs`).
    Queue {
        /// PostgreSQL URL of a scratch database (it gets migrated). Without
        /// one, an embedded cluster in a temporary directory is used.
        #[arg(long, env = "INQUEST_BENCH_DATABASE_URL")]
        database_url: Option<String>,
        /// Sessions timed.
        #[arg(long, default_value_t = 50)]
        samples: usize,
    },
    /// Alertmanager notifications: a new group to its first model request,
    /// and one group's repeats deduplicated (see `bench_alerts.rs`).
    Alerts {
        /// PostgreSQL URL of a scratch database (it gets migrated). Without
        /// one, an embedded cluster in a temporary directory is used.
        #[arg(long, env = "INQUEST_BENCH_DATABASE_URL")]
        database_url: Option<String>,
        /// New groups timed.
        #[arg(long, default_value_t = 100)]
        samples: usize,
        /// Seconds of repeated notifications.
        #[arg(long, default_value_t = 10)]
        seconds: u64,
        /// Connections repeating them at once.
        #[arg(long, default_value_t = 8)]
        senders: usize,
    },
    /// From an event's commit to its delivery at a local receiver, and
    /// one webhook's delivery rate (see `bench_webhooks.rs`).
    Webhooks {
        /// PostgreSQL URL of a scratch database (it gets migrated). Without
        /// one, an embedded cluster in a temporary directory is used.
        #[arg(long, env = "INQUEST_BENCH_DATABASE_URL")]
        database_url: Option<String>,
        /// Events timed one at a time.
        #[arg(long, default_value_t = 300)]
        samples: usize,
        /// Events committed at once for the rate.
        #[arg(long, default_value_t = 20000)]
        backlog: usize,
    },
    /// ForkSession of a long session at its head, beside a plain
    /// INSERT…SELECT of the same rows (see `bench_fork.rs`).
    Fork {
        /// PostgreSQL URL of a scratch database (it gets migrated). Without
        /// one, an embedded cluster in a temporary directory is used.
        #[arg(long, env = "INQUEST_BENCH_DATABASE_URL")]
        database_url: Option<String>,
        /// Stored turns of the session forked.
        #[arg(long, default_value_t = 100_000)]
        turns: i64,
        /// Measured forks (after one warm-up).
        #[arg(long, default_value_t = 5)]
        runs: usize,
    },
    /// Erasing 1M turns (10,000 settled sessions) by retention while 8
    /// writers append: append rate and p99 with the deletion running
    /// against alternating slices without it, and the turns table's size
    /// before the sessions were written, with them, and after.
    Erase {
        /// PostgreSQL URL of a scratch database (it gets migrated). Without
        /// one, an embedded cluster in a temporary directory is used.
        #[arg(long, env = "INQUEST_BENCH_DATABASE_URL")]
        database_url: Option<String>,
        /// Settled sessions erased.
        #[arg(long, default_value_t = 10_000)]
        sessions: i64,
        /// Turns per erased session.
        #[arg(long, default_value_t = 100)]
        turns: i64,
        /// Bytes of each turn's text (erased and appended alike).
        #[arg(long, default_value_t = 200)]
        payload: usize,
        /// Concurrent appending writers, each on its own session.
        #[arg(long, default_value_t = 8)]
        writers: usize,
        /// Sessions per retention batch (one transaction each).
        #[arg(long, default_value_t = 100)]
        batch: u32,
        /// Rest between batches, in ms (`[retention] batch_pause`).
        #[arg(long, default_value_t = 1000)]
        pause_ms: u64,
    },
    /// The web console in headless Chromium: navigation to a session's
    /// newest turn on screen at 10, 1,000 and 20,000 turns, and the page's
    /// memory at the longest (see `bench_console.rs`).
    Console {
        /// PostgreSQL URL of a scratch database (it gets migrated). Without
        /// one, an embedded cluster in a temporary directory is used.
        #[arg(long, env = "INQUEST_BENCH_DATABASE_URL")]
        database_url: Option<String>,
        /// Session lengths in turns; the first is the baseline.
        #[arg(long, value_delimiter = ',', default_value = "10,1000,20000")]
        sizes: Vec<i64>,
        /// Measured loads of each (after one warm-up).
        #[arg(long, default_value_t = 7)]
        runs: usize,
    },
    /// From SendMessage with if_running = INTERRUPT to the running burst
    /// stopped, on the replica holding it and on another (see
    /// `bench_interrupt.rs`).
    Interrupt {
        /// PostgreSQL URL of a scratch database (it gets migrated). Without
        /// one, an embedded cluster in a temporary directory is used.
        #[arg(long, env = "INQUEST_BENCH_DATABASE_URL")]
        database_url: Option<String>,
        /// Interrupts to time on each replica.
        #[arg(long, default_value_t = 40)]
        samples: usize,
    },
    /// Attacks without credentials: a valid client's latency, the server's
    /// memory and CPU during idle connections, unknown-token calls and a
    /// stream flood, against idle (see `bench_attack.rs`).
    Attack {
        /// PostgreSQL URL of a scratch database (it gets migrated). Without
        /// one, an embedded cluster in a temporary directory is used.
        #[arg(long, env = "INQUEST_BENCH_DATABASE_URL")]
        database_url: Option<String>,
        /// Seconds each phase is measured.
        #[arg(long, default_value_t = 10)]
        seconds: u64,
        /// Idle connections held during the idle-connection attack.
        #[arg(long, default_value_t = 8000)]
        connections: usize,
        /// Unknown-token calls in flight at once.
        #[arg(long, default_value_t = 400)]
        concurrency: usize,
    },
    /// Overload: one replica (a child process) under many concurrent
    /// StartSessions, readers and watchers with a slow provider; reports
    /// completions, `store_failed`, lease takeovers, GetSession p99 against
    /// idle, and peak server memory (see `bench_overload.rs`).
    Overload {
        /// PostgreSQL URL of a scratch database (it gets migrated). Without
        /// one, an embedded cluster in a temporary directory is used.
        #[arg(long, env = "INQUEST_BENCH_DATABASE_URL")]
        database_url: Option<String>,
        /// Concurrent StartSession calls, all at once.
        #[arg(long, default_value_t = 200)]
        sessions: usize,
        /// Concurrent readers (GetSession, ListTurns, health in turn).
        #[arg(long, default_value_t = 500)]
        readers: usize,
        /// WatchSession streams, spread over the sessions.
        #[arg(long, default_value_t = 1000)]
        watchers: usize,
        /// Upper bound of the load phase, in seconds.
        #[arg(long, default_value_t = 120)]
        seconds: u64,
        /// How long the fake provider holds each answer back, in ms.
        #[arg(long, default_value_t = 2000)]
        model_delay_ms: u64,
        /// The server's `limits.max_running_bursts` (its default if absent).
        #[arg(long)]
        max_running_bursts: Option<usize>,
    },
    /// Resume: `rebuild_messages` at 1k/10k/100k turns (pure), and a whole
    /// SendMessage resume of a long session up to the first provider
    /// request (see `bench_resume.rs`).
    Resume {
        /// PostgreSQL URL of a scratch database (it gets migrated). Without
        /// one, an embedded cluster in a temporary directory is used.
        #[arg(long, env = "INQUEST_BENCH_DATABASE_URL")]
        database_url: Option<String>,
        /// Transcript sizes for the pure rebuild.
        #[arg(long, value_delimiter = ',', default_value = "1000,10000,100000")]
        sizes: Vec<usize>,
        /// Stored turns of the session the SendMessage resume measures.
        #[arg(long, default_value_t = 10_000)]
        session_turns: usize,
        /// Stored turns of compacted sessions measured the same way (their
        /// latest turn a compaction keeping the last 40).
        #[arg(long, value_delimiter = ',', default_value = "10000,100000")]
        compacted_turns: Vec<usize>,
        /// Measured SendMessage resumes (after one warm-up).
        #[arg(long, default_value_t = 20)]
        iterations: usize,
    },
    /// Streamed model text: provider chunk -> watcher delta latency at 1,
    /// 10 and 100 gRPC watchers (see `bench_stream.rs`).
    Stream {
        /// PostgreSQL URL of a scratch database (it gets migrated). Without
        /// one, an embedded cluster in a temporary directory is used.
        #[arg(long, env = "INQUEST_BENCH_DATABASE_URL")]
        database_url: Option<String>,
        /// Watcher counts to measure.
        #[arg(long, value_delimiter = ',', default_value = "1,10,100")]
        watchers: Vec<usize>,
        /// Chunks the fake streams per phase.
        #[arg(long, default_value_t = 500)]
        chunks: usize,
        /// Pause between chunks, in milliseconds.
        #[arg(long, default_value_t = 5)]
        delay_ms: u64,
    },
    /// Prompt caching: the share of each model request that repeats the
    /// previous one byte for byte, over a real investigation (real loop,
    /// real `read_file` tool, fake provider behind each real adapter) with a
    /// resume in the middle (see `bench_cache.rs`).
    Cache {
        /// PostgreSQL URL of a scratch database (it gets migrated). Without
        /// one, an embedded cluster in a temporary directory is used.
        #[arg(long, env = "INQUEST_BENCH_DATABASE_URL")]
        database_url: Option<String>,
        /// Tool calls over the whole investigation.
        #[arg(long, default_value_t = 60)]
        calls: u32,
        /// Of those, made after the follow-up's resume.
        #[arg(long, default_value_t = 20)]
        follow_up_calls: u32,
        /// Log lines each read_file call returns.
        #[arg(long, default_value_t = 30)]
        lines_per_call: u32,
    },
    /// Inquest's half of the LangGraph side-by-side: one synthetic
    /// investigation through the real leased append, per-turn time, WAL and
    /// table growth at turns 10, 100 and 1,000, then the resume load; prints
    /// JSON (run by `benches/peers/langgraph/run.py`; see `bench_peer.rs`).
    Peer {
        /// PostgreSQL URL of a scratch database (it gets migrated).
        #[arg(long, env = "INQUEST_BENCH_DATABASE_URL")]
        database_url: String,
        /// Turns in the investigation (turn 1 is the user message).
        #[arg(long, default_value_t = 1000)]
        turns: usize,
        /// Turns whose window is measured.
        #[arg(long, value_delimiter = ',', default_value = "10,100,1000")]
        checkpoints: Vec<usize>,
        /// Turns per window, ending at each checkpoint.
        #[arg(long, default_value_t = 9)]
        window: usize,
        #[arg(long, default_value_t = 200)]
        user_bytes: usize,
        #[arg(long, default_value_t = 300)]
        assistant_bytes: usize,
        #[arg(long, default_value_t = 100)]
        args_bytes: usize,
        #[arg(long, default_value_t = 2048)]
        tool_bytes: usize,
        /// Measured resume loads (after one warm-up).
        #[arg(long, default_value_t = 10)]
        resume_runs: usize,
    },
}

/// The database a benchmark runs against: `database_url`, or an embedded
/// cluster in a temporary directory (stopped and removed by [`release`]).
async fn scratch_database(
    database_url: Option<String>,
) -> anyhow::Result<(String, Option<(EmbeddedPostgres, std::path::PathBuf)>)> {
    Ok(match database_url {
        Some(url) => (url, None),
        None => {
            let dir = std::env::temp_dir().join(format!("inquest-bench-{}", std::process::id()));
            let mut options = EmbeddedOptions::new(&dir);
            options.max_connections = 200;
            let pg =
                tokio::task::spawn_blocking(move || EmbeddedPostgres::start(&options)).await??;
            eprintln!(
                "embedded PostgreSQL on port {} in {}",
                pg.port(),
                dir.display()
            );
            (pg.url(), Some((pg, dir)))
        }
    })
}

async fn release(embedded: Option<(EmbeddedPostgres, std::path::PathBuf)>) -> anyhow::Result<()> {
    if let Some((pg, dir)) = embedded {
        tokio::task::spawn_blocking(move || pg.stop()).await??;
        let _ = std::fs::remove_dir_all(dir);
    }
    Ok(())
}

pub async fn run(command: BenchCommand) -> anyhow::Result<()> {
    match command {
        BenchCommand::Append {
            database_url,
            writers,
            seconds,
            payload,
            append_statements,
        } => {
            let (url, embedded) = scratch_database(database_url).await?;
            let result = append(
                &url,
                &writers,
                Duration::from_secs(seconds),
                payload,
                append_statements,
            )
            .await;
            release(embedded).await?;
            result
        }
        BenchCommand::Watch {
            database_url,
            watchers,
            turns,
            payload,
            idle_watchers,
            agent_threads,
            serving_nice,
            no_ceiling,
            rate,
            ceiling_apart,
            ceiling_writes,
            sessions,
        } => {
            let (url, embedded) = scratch_database(database_url).await?;
            let result = crate::bench_watch::run(crate::bench_watch::WatchBench {
                url,
                watchers,
                turns,
                payload,
                idle_watchers,
                agent_threads,
                serving_nice,
                ceiling: !no_ceiling,
                rate,
                ceiling_apart,
                ceiling_writes,
                sessions,
            })
            .await;
            release(embedded).await?;
            result
        }
        BenchCommand::Approval {
            database_url,
            samples,
        } => {
            let (url, embedded) = scratch_database(database_url).await?;
            let result =
                crate::bench_approval::run(crate::bench_approval::ApprovalBench { url, samples })
                    .await;
            release(embedded).await?;
            result
        }
        BenchCommand::Capacity {
            database_url,
            sessions,
            model_delay_ms,
            seconds,
        } => {
            let (url, embedded) = scratch_database(database_url).await?;
            let result = crate::bench_capacity::run(crate::bench_capacity::CapacityBench {
                url,
                sessions,
                model_delay: Duration::from_millis(model_delay_ms),
                seconds,
            })
            .await;
            release(embedded).await?;
            result
        }
        BenchCommand::Failover {
            rounds,
            ttl_ms,
            asynchronous,
        } => {
            crate::bench_failover::run(crate::bench_failover::FailoverBench {
                rounds,
                ttl: Duration::from_millis(ttl_ms),
                synchronous: !asynchronous,
            })
            .await
        }
        BenchCommand::Queue {
            database_url,
            samples,
        } => {
            let (url, embedded) = scratch_database(database_url).await?;
            let result =
                crate::bench_queue::run(crate::bench_queue::QueueBench { url, samples }).await;
            release(embedded).await?;
            result
        }
        BenchCommand::Alerts {
            database_url,
            samples,
            seconds,
            senders,
        } => {
            let (url, embedded) = scratch_database(database_url).await?;
            let result = crate::bench_alerts::run(crate::bench_alerts::AlertsBench {
                url,
                samples,
                seconds,
                senders,
            })
            .await;
            release(embedded).await?;
            result
        }
        BenchCommand::Webhooks {
            database_url,
            samples,
            backlog,
        } => {
            let (url, embedded) = scratch_database(database_url).await?;
            let result = crate::bench_webhooks::run(crate::bench_webhooks::WebhooksBench {
                url,
                samples,
                backlog,
            })
            .await;
            release(embedded).await?;
            result
        }
        BenchCommand::Erase {
            database_url,
            sessions,
            turns,
            payload,
            writers,
            batch,
            pause_ms,
        } => {
            let (url, embedded) = scratch_database(database_url).await?;
            let result = crate::bench_erase::run(crate::bench_erase::EraseBench {
                pause: Duration::from_millis(pause_ms),
                url,
                sessions,
                turns,
                payload,
                writers,
                batch,
            })
            .await;
            release(embedded).await?;
            result
        }
        BenchCommand::Fork {
            database_url,
            turns,
            runs,
        } => {
            let (url, embedded) = scratch_database(database_url).await?;
            let result =
                crate::bench_fork::run(crate::bench_fork::ForkBench { url, turns, runs }).await;
            release(embedded).await?;
            result
        }
        BenchCommand::Console {
            database_url,
            sizes,
            runs,
        } => {
            let (url, embedded) = scratch_database(database_url).await?;
            let result =
                crate::bench_console::run(crate::bench_console::ConsoleBench { url, sizes, runs })
                    .await;
            release(embedded).await?;
            result
        }
        BenchCommand::Interrupt {
            database_url,
            samples,
        } => {
            let (url, embedded) = scratch_database(database_url).await?;
            let result = crate::bench_interrupt::run(crate::bench_interrupt::InterruptBench {
                url,
                samples,
            })
            .await;
            release(embedded).await?;
            result
        }
        BenchCommand::Loop {
            database_url,
            sessions,
            seconds,
            calls_per_burst,
            payload,
            append_statements,
            agent_threads,
        } => {
            let (url, embedded) = scratch_database(database_url).await?;
            let result = crate::bench_loop::run(crate::bench_loop::LoopBench {
                url,
                sessions,
                span: Duration::from_secs(seconds),
                calls_per_burst,
                payload,
                append_statements,
                agent_threads: agent_threads
                    .unwrap_or_else(inquest_engine::agent_runtime::default_agent_threads),
            })
            .await;
            release(embedded).await?;
            result
        }
        BenchCommand::Replicas {
            database_url,
            turns,
            kills,
            ttl_ms,
            seconds,
            concurrency,
        } => {
            let (url, embedded) = scratch_database(database_url).await?;
            let result = crate::bench_replicas::run(crate::bench_replicas::ReplicasBench {
                url,
                turns,
                kills,
                ttl: Duration::from_millis(ttl_ms),
                seconds,
                concurrency,
            })
            .await;
            release(embedded).await?;
            result
        }
        BenchCommand::Attack {
            database_url,
            seconds,
            connections,
            concurrency,
        } => {
            let (url, embedded) = scratch_database(database_url).await?;
            let result = crate::bench_attack::run(crate::bench_attack::AttackBench {
                url,
                seconds,
                connections,
                concurrency,
            })
            .await;
            release(embedded).await?;
            result
        }
        BenchCommand::Overload {
            database_url,
            sessions,
            readers,
            watchers,
            seconds,
            model_delay_ms,
            max_running_bursts,
        } => {
            let (url, embedded) = scratch_database(database_url).await?;
            let result = crate::bench_overload::run(crate::bench_overload::OverloadBench {
                url,
                sessions,
                readers,
                watchers,
                seconds,
                model_delay: Duration::from_millis(model_delay_ms),
                max_running_bursts,
            })
            .await;
            release(embedded).await?;
            result
        }
        BenchCommand::Stream {
            database_url,
            watchers,
            chunks,
            delay_ms,
        } => {
            let (url, embedded) = scratch_database(database_url).await?;
            let result = crate::bench_stream::run(crate::bench_stream::StreamBench {
                url,
                watchers,
                chunks,
                delay: Duration::from_millis(delay_ms),
            })
            .await;
            release(embedded).await?;
            result
        }
        BenchCommand::Cache {
            database_url,
            calls,
            follow_up_calls,
            lines_per_call,
        } => {
            let (url, embedded) = scratch_database(database_url).await?;
            let result = crate::bench_cache::run(crate::bench_cache::CacheBench {
                url,
                calls,
                follow_up_calls,
                lines_per_call,
            })
            .await;
            release(embedded).await?;
            result
        }
        BenchCommand::Resume {
            database_url,
            sizes,
            session_turns,
            compacted_turns,
            iterations,
        } => {
            let (url, embedded) = scratch_database(database_url).await?;
            let result = crate::bench_resume::run(crate::bench_resume::ResumeBench {
                url,
                sizes,
                session_turns,
                compacted_turns,
                iterations,
            })
            .await;
            release(embedded).await?;
            result
        }
        BenchCommand::Peer {
            database_url,
            turns,
            checkpoints,
            window,
            user_bytes,
            assistant_bytes,
            args_bytes,
            tool_bytes,
            resume_runs,
        } => {
            crate::bench_peer::run(crate::bench_peer::PeerBench {
                url: database_url,
                turns,
                checkpoints,
                window,
                user_bytes,
                assistant_bytes,
                args_bytes,
                tool_bytes,
                resume_runs,
            })
            .await
        }
    }
}

pub(crate) struct Figures {
    pub(crate) ops: usize,
    pub(crate) per_sec: f64,
    pub(crate) p50: Duration,
    pub(crate) p99: Duration,
}

fn figures(mut latencies: Vec<Duration>, elapsed: Duration) -> Figures {
    latencies.sort();
    let pick = |q: f64| {
        latencies
            .get(((latencies.len() as f64 * q) as usize).min(latencies.len().saturating_sub(1)))
            .copied()
            .unwrap_or_default()
    };
    Figures {
        ops: latencies.len(),
        per_sec: latencies.len() as f64 / elapsed.as_secs_f64(),
        p50: pick(0.50),
        p99: pick(0.99),
    }
}

/// Latencies and wall time collected over one or more slices of a phase.
#[derive(Default)]
pub(crate) struct Samples {
    latencies: Vec<Duration>,
    elapsed: Duration,
}

impl Samples {
    pub(crate) fn add(&mut self, other: Samples) {
        self.latencies.extend(other.latencies);
        self.elapsed += other.elapsed;
    }

    pub(crate) fn figures(self) -> Figures {
        figures(self.latencies, self.elapsed)
    }
}

/// How many alternating slices each measured phase is cut into. The
/// machine is noisy; alternating the ceiling and the append in short
/// slices exposes both to the same background load, so their ratio holds
/// even when absolute rates drift.
const SLICES: u32 = 5;

/// Runs `writers` tasks for `span`; each calls `op(writer, i)` in a loop,
/// `i` counting on from `first`.
pub(crate) async fn phase<F, Fut>(
    writers: usize,
    span: Duration,
    first: i64,
    op: F,
) -> anyhow::Result<Samples>
where
    F: Fn(usize, i64) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = anyhow::Result<()>> + Send,
{
    let started = Instant::now();
    let deadline = started + span;
    let mut tasks = tokio::task::JoinSet::new();
    for w in 0..writers {
        let op = op.clone();
        tasks.spawn(async move {
            let mut latencies = Vec::new();
            let mut i = first;
            while Instant::now() < deadline {
                i += 1;
                let t = Instant::now();
                op(w, i).await?;
                latencies.push(t.elapsed());
            }
            anyhow::Ok(latencies)
        });
    }
    let mut all = Vec::new();
    while let Some(done) = tasks.join_next().await {
        all.extend(done.context("bench writer panicked")??);
    }
    Ok(Samples {
        latencies: all,
        elapsed: started.elapsed(),
    })
}

async fn append(
    url: &str,
    writer_counts: &[usize],
    span: Duration,
    payload: usize,
    append_statements: usize,
) -> anyhow::Result<()> {
    let max_writers = writer_counts.iter().copied().max().unwrap_or(1);
    let mut config = StoreConfig::new(url);
    config.max_connections = max_writers;
    config.append_statements = append_statements;
    let store = Store::connect(&config)?;
    store.migrate().await?;
    store.create_ceiling_table().await?;
    let content = "x".repeat(payload);
    let limits = Limits::default();
    let incident = store
        .create_incident(
            &inquest_core::Tenant::default_tenant(),
            &IncidentText::parse("bench".into(), String::new(), &limits)?,
        )
        .await?;

    println!(
        "turn append vs bare INSERT ceiling ({payload}-byte turns, {}s per phase in {SLICES} alternating slices, pool of {max_writers})",
        span.as_secs()
    );
    println!(
        "{:>7} | {:>12} {:>9} {:>9} | {:>12} {:>9} {:>9} | {:>6}",
        "writers", "append/s", "p50 ms", "p99 ms", "ceiling/s", "p50 ms", "p99 ms", "ratio"
    );
    for &writers in writer_counts {
        let mut sessions: Vec<SessionId> = Vec::with_capacity(writers);
        for _ in 0..writers {
            let started = store
                .start_session(
                    &inquest_core::Tenant::default_tenant(),
                    inquest_core::TenantQuota::UNLIMITED,
                    incident.id,
                    UserMessage::parse("bench".into(), &limits)?,
                    None,
                )
                .await?;
            sessions.push(started.session.id);
        }
        let ceiling_ids: Vec<uuid::Uuid> = (0..writers).map(|_| uuid::Uuid::now_v7()).collect();
        // Warm the pool so connection set-up is not measured.
        phase(writers, Duration::from_millis(300), 0, {
            let store = store.clone();
            move |_, _| {
                let store = store.clone();
                async move { Ok(store.ping().await?) }
            }
        })
        .await?;
        let slice = span / SLICES;
        let mut ceiling = Samples::default();
        let mut appends = Samples::default();
        for round in 0..SLICES {
            // Ceiling rows need unique (writer, seq) keys across slices.
            let first = i64::from(round) * 10_000_000;
            ceiling.add(
                phase(writers, slice, first, {
                    let store = store.clone();
                    let content = content.clone();
                    let ids = ceiling_ids.clone();
                    move |w, i| {
                        let store = store.clone();
                        let content = content.clone();
                        let id = ids[w];
                        async move { Ok(store.insert_ceiling_row(id, i, &content).await?) }
                    }
                })
                .await?,
            );
            appends.add(
                phase(writers, slice, first, {
                    let store = store.clone();
                    let content = content.clone();
                    let sessions = sessions.clone();
                    move |w, _| {
                        let store = store.clone();
                        let turn = NewTurn::Assistant {
                            text: content.clone(),
                            tool_calls: Vec::new(),
                            usage: TokenUsage::default(),
                        };
                        let session = sessions[w];
                        async move {
                            store.append_turn(session, turn).await?;
                            Ok(())
                        }
                    }
                })
                .await?,
            );
        }
        let (ceiling, appends) = (ceiling.figures(), appends.figures());
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        println!(
            "{:>7} | {:>12.0} {:>9.2} {:>9.2} | {:>12.0} {:>9.2} {:>9.2} | {:>6.2}",
            writers,
            appends.per_sec,
            ms(appends.p50),
            ms(appends.p99),
            ceiling.per_sec,
            ms(ceiling.p50),
            ms(ceiling.p99),
            appends.per_sec / ceiling.per_sec.max(f64::MIN_POSITIVE),
        );
        if appends.ops == 0 || ceiling.ops == 0 {
            anyhow::bail!("a phase completed no operations");
        }
    }
    store.drop_ceiling_table().await?;
    Ok(())
}
