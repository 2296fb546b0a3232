//! `inquest-bench append`: turn appends per second and latency at several
//! writer counts, each writer on its own session (as in production), against
//! the ceiling of a bare single-row INSERT of the same size over the same
//! pool, measured in the same run. Prints the ratio.

use std::time::{Duration, Instant};

use anyhow::Context;
use inquest_core::{IncidentText, Limits, NewTurn, SessionId, TokenUsage, UserMessage};
use inquest_store::{
    Store, StoreConfig,
    embedded::{EmbeddedOptions, EmbeddedPostgres},
};

pub use crate::commands::BenchCommand;

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
