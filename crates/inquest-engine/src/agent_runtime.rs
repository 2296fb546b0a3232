//! The runtime bursts run on, apart from the one serving gRPC.
//!
//! A burst's turn writes, lease renewals, model calls and tools run on
//! their own tokio runtime (`[runtime] agent_threads` worker threads). The
//! serving runtime carries every RPC and every watch stream: with 1,000
//! watchers it holds ~1,000 runnable tasks per published turn, and a
//! burst's database reply queued behind them would wait for all of them.
//! On its own runtime the burst's tasks (and the burst-lane connections
//! they open, whose I/O tasks are spawned where they are opened) are
//! scheduled by the OS next to the serving threads instead, so a waking
//! writer gets a core within a time slice. `agent_threads = 0` runs bursts
//! on the serving runtime (the behaviour before this split; the watch
//! benchmark compares the two).

use std::sync::Arc;

use anyhow::Context;
use tokio::runtime::{Handle, Runtime};

/// The most `[runtime] agent_threads` accepts.
pub const MAX_AGENT_THREADS: usize = 256;

/// Owns the burst runtime (if split off). Cheap to clone; the runtime
/// shuts down when the last clone goes, without waiting for its tasks
/// (the server waits for every burst before it lets go).
#[derive(Clone)]
pub struct AgentRuntime {
    handle: Option<Handle>,
    _owner: Option<Arc<Owner>>,
}

struct Owner(Option<Runtime>);

impl Drop for Owner {
    fn drop(&mut self) {
        // Dropping a runtime blocks, which is not allowed inside another
        // runtime; every burst has ended by the time this runs.
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

impl AgentRuntime {
    /// A runtime of `threads` workers, or none (bursts share the caller's
    /// runtime) when `threads` is 0.
    pub fn new(threads: usize) -> anyhow::Result<Self> {
        if threads == 0 {
            return Ok(Self::shared());
        }
        // Its threads log where the thread that built it logs: the global
        // subscriber in production, a test's own (thread-local) one in
        // tests. The guard lives as long as the thread.
        let dispatch = tracing::dispatcher::get_default(Clone::clone);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("inquest-agent")
            .on_thread_start(move || {
                std::mem::forget(tracing::dispatcher::set_default(&dispatch));
            })
            .enable_all()
            .build()
            .context("starting the agent runtime")?;
        Ok(Self {
            handle: Some(runtime.handle().clone()),
            _owner: Some(Arc::new(Owner(Some(runtime)))),
        })
    }

    /// No runtime of its own: bursts run on the caller's.
    pub fn shared() -> Self {
        Self {
            handle: None,
            _owner: None,
        }
    }

    /// Where bursts are spawned: `None` means the current runtime.
    pub fn handle(&self) -> Option<&Handle> {
        self.handle.as_ref()
    }
}

impl std::fmt::Debug for AgentRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentRuntime")
            .field("separate", &self.handle.is_some())
            .finish()
    }
}

/// `[runtime]`.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RuntimeSection {
    /// Worker threads of the runtime bursts run on, apart from the one
    /// serving gRPC and watch streams. Default: [`default_agent_threads`],
    /// half the CPUs and at least one. 0 runs bursts on the serving runtime.
    pub agent_threads: usize,
    /// How many nice levels below the process the serving runtime's worker
    /// threads run (`crate::priority`), so that when the cores are full
    /// the OS runs bursts first. 0 keeps them level; ignored when
    /// `agent_threads` is 0 (nothing to put first). At most
    /// [`crate::priority::MAX_SERVING_NICE`].
    pub serving_nice: u8,
}

impl RuntimeSection {
    /// The checks the server's config runs on `[runtime]`.
    pub fn validate(&self) -> Result<(), String> {
        if self.agent_threads > MAX_AGENT_THREADS {
            return Err(format!(
                "runtime.agent_threads must be at most {MAX_AGENT_THREADS}"
            ));
        }
        if self.serving_nice > crate::priority::MAX_SERVING_NICE {
            return Err(format!(
                "runtime.serving_nice must be at most {} (the lowest priority there is)",
                crate::priority::MAX_SERVING_NICE
            ));
        }
        Ok(())
    }
}

/// `[runtime] serving_nice` by default (measured with the `watch` bench;
/// docs/benchmarks.md, "Live watch").
pub const DEFAULT_SERVING_NICE: u8 = 5;

/// `[runtime] agent_threads` by default: half the CPUs, at least one.
///
/// A burst spends its time waiting (on the database, a model, a tool); its
/// CPU is a few tens of microseconds per turn, so a few threads carry
/// thousands of bursts. What more threads add is hand-offs: a reply read
/// on one worker wakes a task that another runs, a thread parked in a
/// futex is woken for it, and on a small machine that shares its cores
/// with the serving runtime and often a local PostgreSQL those wake-ups
/// cost more than the parallelism gives. On 2 CPUs, 8 concurrent bursts
/// on one agent thread instead of two used less of our CPU per turn and
/// ran closer to the bare INSERT ceiling in each of 6 alternated pairs
/// (0.56–0.89 of it against 0.49–0.59); one burst alone showed no
/// difference (the `loop` bench: docs/benchmarks.md, "Agent loop
/// overhead").
pub fn default_agent_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1))
}

impl Default for RuntimeSection {
    fn default() -> Self {
        Self {
            agent_threads: default_agent_threads(),
            serving_nice: DEFAULT_SERVING_NICE,
        }
    }
}
