//! `inquest-bench loop`: the agent loop's own overhead per turn.
//!
//! The real [`Agent::run_burst`] persists and publishes every turn through
//! the server's [`TurnLog`] (as the runner's sink does), with a provider
//! that answers at once (in process: a tool call until the burst's last
//! call, then text) and a no-op tool that returns at once. So what is
//! measured is the loop itself: the transcript restore at burst start,
//! persist + publish of each turn, tool-start announcements, rails and
//! counters, and the report. One watcher subscription per session drains
//! the broadcast, so publishing is not free-riding on an empty channel
//! list. Turns per second are set against the bare single-row INSERT
//! ceiling (`bench append`'s) measured in the same run with as many
//! writers as there are concurrent sessions.
//!
//! Beside the rates, CPU per turn on both sides (a
//! figure the shared machine's load does not move much): this process's
//! (`/proc/self/stat`) and that of the PostgreSQL backends serving this
//! bench's database (`/proc/<pid>/stat` of the `pg_stat_activity` rows of
//! `current_database()`, so other databases' work on a shared cluster is
//! not counted; `-` when PostgreSQL is not on this machine). Background
//! processes (WAL writer, checkpointer) are in neither.

use std::{
    collections::BTreeMap,
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::Context;
use inquest_agent::{
    Agent, AgentConfig, BoxFuture, Completion, CompletionRequest, Provider, ProviderChain,
    ProviderFuture, RetryPolicy, Stop, StopReason, ToolOutcome, ToolRunner, ToolSpec,
};
use inquest_broadcast::TurnBroadcaster;
use inquest_core::{
    ExitReason, IncidentText, Limits, Message, SessionId, TokenUsage, ToolArguments, ToolCall,
    UserMessage, approval::Gate,
};
use inquest_engine::agent_runtime::AgentRuntime;
use inquest_server::TurnLog;
use inquest_store::{Store, StoreConfig};

pub struct LoopBench {
    pub url: String,
    /// Concurrent sessions (each running bursts back to back).
    pub sessions: Vec<usize>,
    pub span: Duration,
    /// Model calls per burst (the last one answers without tools).
    pub calls_per_burst: u32,
    /// Size of each turn's text in bytes.
    pub payload: usize,
    /// `StoreConfig::append_statements`.
    pub append_statements: usize,
    /// `[runtime] agent_threads`: the bursts, their burst-lane connections
    /// and the ceiling's writers run on an [`AgentRuntime`] of this many
    /// workers, as a server's bursts do (0: this process's runtime).
    pub agent_threads: usize,
}

/// Answers at once: a tool call while the transcript holds fewer than
/// `calls - 1` assistant messages since the last user message, then text.
/// A request without tools (the report's author) gets text.
struct InstantProvider {
    calls: u32,
    text: String,
}

impl Provider for InstantProvider {
    fn complete<'a>(&'a self, request: &'a CompletionRequest<'a>) -> ProviderFuture<'a> {
        let in_burst = request
            .messages
            .iter()
            .rev()
            .take_while(|m| !matches!(m, Message::User { .. }))
            .filter(|m| matches!(m, Message::Assistant { .. }))
            .count();
        let call = !request.tools.is_empty() && (in_burst as u32) + 1 < self.calls;
        let completion = Completion {
            text: self.text.clone(),
            tool_calls: if call {
                vec![ToolCall {
                    id: format!("call-{in_burst}"),
                    name: "noop".into(),
                    arguments: ToolArguments::from_model("{}"),
                }]
            } else {
                Vec::new()
            },
            usage: TokenUsage::new(100, 10),
            stop_reason: if call {
                StopReason::ToolUse
            } else {
                StopReason::EndTurn
            },
        };
        Box::pin(async move { Ok(completion) })
    }
}

/// One tool, `noop`, that returns `content` at once.
struct NoopTool {
    content: String,
}

impl ToolRunner for NoopTool {
    fn specs(&self) -> Vec<ToolSpec> {
        vec![ToolSpec {
            name: "noop".into(),
            description: "Does nothing.".into(),
            input_schema: serde_json::json!({"type": "object", "properties": {}}),
        }]
    }

    fn server_map(&self) -> BTreeMap<String, String> {
        BTreeMap::from([("noop".to_owned(), "bench".to_owned())])
    }

    fn available(&self) -> bool {
        true
    }

    /// Read-only: under the approval policy's default mode the screened
    /// phase runs every call at once, as an investigation's reads do.
    fn side_effect(&self, _tool: &str) -> inquest_core::SideEffect {
        inquest_core::SideEffect::ReadOnly
    }

    fn call<'a>(&'a self, _session: SessionId, _call: &'a ToolCall) -> BoxFuture<'a, ToolOutcome> {
        let content = self.content.clone();
        Box::pin(async move {
            ToolOutcome {
                content,
                is_error: false,
                server: Some("bench".into()),
                reached_server: true,
            }
        })
    }
}

/// Phases of each side per measurement, alternated.
const ROUNDS: u32 = 5;

struct Rate {
    turns: u64,
    elapsed: Duration,
}

#[derive(Default)]
struct Totals {
    turns: u64,
    elapsed: Duration,
    /// CPU ticks of this process and of the database's backends.
    ours: u64,
    database: Option<u64>,
}

impl Totals {
    fn add(&mut self, rate: Rate, cpu: (u64, Option<u64>)) {
        self.turns += rate.turns;
        self.elapsed += rate.elapsed;
        self.ours += cpu.0;
        self.database = match (self.database, cpu.1) {
            (Some(a), Some(b)) => Some(a + b),
            (None, b) if self.turns == rate.turns => b,
            _ => None,
        };
    }

    fn per_sec(&self) -> f64 {
        self.turns as f64 / self.elapsed.as_secs_f64().max(f64::MIN_POSITIVE)
    }

    /// Microseconds of CPU per turn, from `ticks`.
    fn micros_per_turn(&self, ticks: u64) -> f64 {
        ticks as f64 * 1e6 / CLOCK_TICKS_PER_SEC / self.turns.max(1) as f64
    }

    fn cpu_columns(&self) -> String {
        let database = self.database.map_or_else(
            || "-".to_owned(),
            |t| format!("{:.0}", self.micros_per_turn(t)),
        );
        format!("{:>5.0} {:>5}", self.micros_per_turn(self.ours), database)
    }
}

/// `sysconf(_SC_CLK_TCK)` on Linux (fixed at 100 by its ABI on every
/// architecture this runs on): the unit of `/proc/<pid>/stat` times.
pub(crate) const CLOCK_TICKS_PER_SEC: f64 = 100.0;

/// utime + stime of a process, in clock ticks.
pub(crate) fn cpu_ticks(pid: &str) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces; fields after its `)`.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15, i.e. 12 and 13 after `)`.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// Reads the CPU this process and the bench database's backends used.
struct CpuMeter {
    client: tokio_postgres::Client,
}

impl CpuMeter {
    async fn connect(url: &str) -> anyhow::Result<Self> {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                eprintln!("cpu meter connection: {e}");
            }
        });
        Ok(Self { client })
    }

    /// (this process, the backends of this database but the meter's own).
    async fn read(&self) -> anyhow::Result<(u64, Option<u64>)> {
        let rows = self
            .client
            .query(
                "SELECT pid FROM pg_stat_activity \
                 WHERE datname = current_database() AND pid <> pg_backend_pid()",
                &[],
            )
            .await?;
        let mut database = Some(0u64);
        for row in rows {
            let pid: i32 = row.try_get(0)?;
            database = database
                .zip(cpu_ticks(&pid.to_string()))
                .map(|(a, b)| a + b);
        }
        Ok((cpu_ticks("self").unwrap_or(0), database))
    }

    /// Runs `phase`, returning its rate and the CPU used meanwhile (a
    /// backend that ended during the phase takes its ticks with it: the
    /// pool keeps its connections, so none should).
    async fn measure(
        &self,
        phase: impl std::future::Future<Output = anyhow::Result<Rate>>,
    ) -> anyhow::Result<(Rate, (u64, Option<u64>))> {
        let before = self.read().await?;
        let rate = phase.await?;
        let after = self.read().await?;
        let database = match (before.1, after.1) {
            (Some(b), Some(a)) if a >= b => Some(a - b),
            _ => None,
        };
        Ok((rate, (after.0.saturating_sub(before.0), database)))
    }
}

pub async fn run(bench: LoopBench) -> anyhow::Result<()> {
    let runtime = AgentRuntime::new(bench.agent_threads)?;
    println!(
        "agent_threads = {} (both sides run {})",
        bench.agent_threads,
        if runtime.handle().is_some() {
            "on the runtime a server's bursts run on"
        } else {
            "on the bench's own runtime"
        }
    );
    match runtime.handle() {
        // Both sides alike: the ceiling's client gets the same threads.
        Some(handle) => handle
            .spawn(measure(bench, runtime.clone()))
            .await
            .context("loop bench panicked")?,
        None => measure(bench, runtime).await,
    }
}

async fn measure(bench: LoopBench, runtime: AgentRuntime) -> anyhow::Result<()> {
    anyhow::ensure!(
        bench.calls_per_burst > 0,
        "--calls-per-burst must be at least 1"
    );
    let max = bench.sessions.iter().copied().max().unwrap_or(1);
    let mut config = StoreConfig::new(&bench.url);
    config.max_connections = max;
    config.append_statements = bench.append_statements;
    // The burst lane's connections are opened where the bursts run.
    config.burst_runtime = runtime.handle().cloned();
    let store = Store::connect(&config)?;
    store.migrate().await?;
    store.create_ceiling_table().await?;
    let log = TurnLog::new(store.clone(), TurnBroadcaster::new(1024));
    let text = "x".repeat(bench.payload);
    let mut chain = ProviderChain::new();
    chain.push(
        "instant",
        Box::new(InstantProvider {
            calls: bench.calls_per_burst,
            text: text.clone(),
        }),
        RetryPolicy {
            max_retries: 0,
            backoff: Duration::ZERO,
        },
    );
    let agent = Arc::new(Agent::new(
        Arc::new(chain),
        Arc::new(NoopTool {
            content: text.clone(),
        }),
        AgentConfig {
            iteration_budget: u32::MAX,
            max_model_calls_per_burst: bench.calls_per_burst,
            ..AgentConfig::default()
        },
        Vec::new(),
    ));
    let limits = Limits::default();
    let incident = store
        .create_incident(
            &inquest_core::Tenant::default_tenant(),
            &IncidentText::parse("bench loop".into(), String::new(), &limits)?,
        )
        .await?;

    println!(
        "agent loop turns vs bare INSERT ceiling ({}-byte turns, {} model calls per burst = {} turns, {}s per side in {} alternated phases)",
        bench.payload,
        bench.calls_per_burst,
        2 * bench.calls_per_burst - 1,
        bench.span.as_secs(),
        ROUNDS
    );
    let meter = CpuMeter::connect(&bench.url).await?;
    println!(
        "CPU µs per turn (per INSERT for the ceiling): ours = this process, pg = the database's backends"
    );
    println!(
        "{:>8} | {:>10} {:>9} {:>5} {:>5} | {:>10} {:>5} {:>5} | {:>6}",
        "sessions", "loop turns", "turns/s", "ours", "pg", "ceiling/s", "ours", "pg", "ratio"
    );
    let gate = Arc::new(Gate::default());
    let mut screening = Vec::new();
    for &sessions in &bench.sessions {
        // Warm-up: one burst per session.
        loop_phase(
            &agent,
            &log,
            &store,
            incident.id,
            sessions,
            Duration::ZERO,
            bench.calls_per_burst,
            None,
        )
        .await?;
        // Short phases, alternated: on a shared machine the database's
        // speed drifts, and alternating puts both sides under the same drift.
        let slice = bench.span / ROUNDS;
        let (mut ceiling, mut looped) = (Totals::default(), Totals::default());
        let mut screened = Totals::default();
        for _ in 0..ROUNDS {
            let (rate, cpu) = meter
                .measure(ceiling_phase(&store, sessions, slice, &text))
                .await?;
            ceiling.add(rate, cpu);
            let (rate, cpu) = meter
                .measure(loop_phase(
                    &agent,
                    &log,
                    &store,
                    incident.id,
                    sessions,
                    slice,
                    bench.calls_per_burst,
                    None,
                ))
                .await?;
            looped.add(rate, cpu);
            // The same loop with every call screened by the default
            // approval policy (all of them read-only, so none is held).
            let (rate, cpu) = meter
                .measure(loop_phase(
                    &agent,
                    &log,
                    &store,
                    incident.id,
                    sessions,
                    slice,
                    bench.calls_per_burst,
                    Some(Arc::clone(&gate)),
                ))
                .await?;
            screened.add(rate, cpu);
        }
        println!(
            "{:>8} | {:>10} {:>9.0} {} | {:>10.0} {} | {:>6.2}",
            sessions,
            looped.turns,
            looped.per_sec(),
            looped.cpu_columns(),
            ceiling.per_sec(),
            ceiling.cpu_columns(),
            looped.per_sec() / ceiling.per_sec().max(f64::MIN_POSITIVE)
        );
        screening.push((sessions, screened, looped));
    }
    println!(
        "approval screening (default policy, read-only calls, none held) vs the same loop unscreened, same run:"
    );
    for (sessions, screened, looped) in &screening {
        println!(
            "{:>8} | {:>9.0} turns/s {} | unscreened {:>9.0} turns/s {} | ratio {:.2}",
            sessions,
            screened.per_sec(),
            screened.cpu_columns(),
            looped.per_sec(),
            looped.cpu_columns(),
            screened.per_sec() / looped.per_sec().max(f64::MIN_POSITIVE)
        );
    }
    store.drop_ceiling_table().await?;
    Ok(())
}

/// `sessions` tasks, each running whole bursts on fresh sessions until
/// `span` is over (at least one burst each). Only the turns the loop
/// appended count, over the phase's wall-clock time, which also covers
/// creating each burst's session (one write per `2 × calls − 1` turns: the
/// figure is slightly pessimistic).
#[allow(clippy::too_many_arguments)] // one phase's knobs, read once each
async fn loop_phase(
    agent: &Arc<Agent>,
    log: &TurnLog,
    store: &Store,
    incident: inquest_core::IncidentId,
    sessions: usize,
    span: Duration,
    calls: u32,
    gate: Option<Arc<Gate>>,
) -> anyhow::Result<Rate> {
    let per_burst = u64::from(2 * calls - 1);
    let started = Instant::now();
    let deadline = started + span;
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..sessions {
        let agent = Arc::clone(agent);
        let log = log.clone();
        let store = store.clone();
        let gate = gate.clone();
        tasks.spawn(async move {
            let mut turns = 0u64;
            loop {
                let session = store
                    .start_session(
                        &inquest_core::Tenant::default_tenant(),
                        inquest_core::TenantQuota::UNLIMITED,
                        incident,
                        UserMessage::parse("bench".into(), &Limits::default())?,
                        None,
                    )
                    .await?
                    .session
                    .id;
                let mut watcher = log.live().broadcaster().subscribe(session);
                let drain = tokio::spawn(async move {
                    let mut events = 0u64;
                    while watcher.recv().await.is_some() {
                        events += 1;
                    }
                    events
                });
                // Claimed under a lease like the runner does: every write
                // of the burst is fenced.
                let (burst, _cancel) = log
                    .claim_burst(session)
                    .await?
                    .context("a fresh session is pending")?;
                burst.set_approval(gate.clone(), Default::default());
                let stored = store.all_turns(session).await?;
                let report = agent
                    .run_burst(&burst, session, stored, &Stop::default())
                    .await;
                log.live().broadcaster().close(session);
                let events = drain.await.context("drain task")?;
                anyhow::ensure!(
                    report.exit_reason == ExitReason::Completed,
                    "a bench burst ended with {}",
                    report.exit_reason
                );
                // Every turn and every tool start reached the watcher.
                anyhow::ensure!(
                    events == per_burst + u64::from(calls - 1),
                    "the watcher got {events} events"
                );
                turns += per_burst;
                if Instant::now() >= deadline {
                    return anyhow::Ok(turns);
                }
            }
        });
    }
    let mut total = 0u64;
    while let Some(done) = tasks.join_next().await {
        total += done.context("bench session panicked")??;
    }
    Ok(Rate {
        turns: total,
        elapsed: started.elapsed(),
    })
}

/// `writers` tasks of bare single-row INSERTs for `span`.
async fn ceiling_phase(
    store: &Store,
    writers: usize,
    span: Duration,
    content: &str,
) -> anyhow::Result<Rate> {
    let started = Instant::now();
    let deadline = started + span;
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..writers {
        let store = store.clone();
        let content = content.to_owned();
        let id = uuid::Uuid::now_v7();
        tasks.spawn(async move {
            let mut i = 0i64;
            while Instant::now() < deadline {
                i += 1;
                store.insert_ceiling_row(id, i, &content).await?;
            }
            anyhow::Ok(i as u64)
        });
    }
    let mut total = 0u64;
    while let Some(done) = tasks.join_next().await {
        total += done.context("ceiling writer panicked")??;
    }
    Ok(Rate {
        turns: total,
        elapsed: started.elapsed(),
    })
}
