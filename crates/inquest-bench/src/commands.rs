//! The `bench` subcommands and what each takes, apart from how
//! [`crate::bench::run`] runs them: the flags of every benchmark in one
//! place.

use clap::Subcommand;

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
