//! `[runtime] serving_nice`: the serving runtime's worker threads run at a
//! lower OS priority than the agent runtime's.
//!
//! Splitting bursts onto their own runtime (`agent_runtime`) keeps their
//! tasks from queueing behind watch streams inside tokio, but the OS still
//! shares the cores evenly between every runnable thread. With 1,000
//! watchers the serving threads are always runnable, and a burst's writer
//! (and, on a shared box, the PostgreSQL backend it waits on) got a core
//! only after them: the writer ran at 0.12–0.17 of its solo rate. A few
//! nice levels above the agent threads make the OS run the burst first
//! whenever both want a core, and cost nothing while the cores are free
//! (docs/benchmarks.md, "Live watch"; the measurements are in its git history).
//!
//! Raising one's own nice value needs no privilege; lowering it again
//! does, so this is set once, at startup, for the process's life. On Linux
//! the nice value is per thread, and a thread inherits its creator's: the
//! agent runtime's threads, the embedded PostgreSQL and the MCP servers are
//! all started before, or from threads that are not, lowered.
//!
//! The serving runtime is built by the binary's `main` before the
//! configuration is read, so it cannot be told at build time: its
//! `on_thread_unpark` hook ([`on_serving_worker_unpark`]) brings each
//! worker to the wanted value the next time it wakes. A runtime built
//! without the hook (tests) is left as it is.

use std::cell::Cell;
use std::sync::OnceLock;

/// The highest `serving_nice` accepted (and the lowest OS priority).
pub const MAX_SERVING_NICE: u8 = 19;

/// The nice value serving workers are brought to, once asked for.
static WANTED: OnceLock<i32> = OnceLock::new();

thread_local! {
    /// Whether this thread has been brought to [`WANTED`] (or tried).
    static DONE: Cell<bool> = const { Cell::new(false) };
}

/// Asks for the serving runtime's workers to run `by` nice levels below
/// the calling thread's priority (the process's, at startup), capped at
/// [`MAX_SERVING_NICE`]. The first call decides; later ones (a second
/// server in the same process) change nothing. Returns the nice value the
/// workers get.
pub fn lower_serving_workers(by: u8) -> std::io::Result<i32> {
    let base = rustix::process::getpriority_process(None)?;
    let target = (base + i32::from(by)).min(i32::from(MAX_SERVING_NICE));
    Ok(*WANTED.get_or_init(|| target))
}

/// For `tokio::runtime::Builder::on_thread_unpark` of the serving runtime:
/// once [`lower_serving_workers`] was called, brings this worker to the
/// wanted nice value (one atomic load and one thread-local read per
/// wake-up otherwise).
pub fn on_serving_worker_unpark() {
    let Some(&wanted) = WANTED.get() else {
        return;
    };
    DONE.with(|done| {
        if done.get() {
            return;
        }
        // Tried once per thread: what failed once would fail again.
        done.set(true);
        if let Err(e) = rustix::process::setpriority_process(None, wanted) {
            tracing::warn!(error = %e, nice = wanted, "cannot lower a serving thread's priority; it keeps the process's");
        }
    });
}

/// The calling thread's nice value.
pub fn current_nice() -> std::io::Result<i32> {
    Ok(rustix::process::getpriority_process(None)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_is_brought_to_the_wanted_value_once_and_other_threads_are_not() {
        let base = current_nice().unwrap();
        let target = lower_serving_workers(3).unwrap();
        // Another test of this binary may have asked first: the first call
        // decides, and it asked for a value at or below this thread's.
        assert!(target >= base && target <= 19, "{base} -> {target}");
        assert_eq!(
            lower_serving_workers(7).unwrap(),
            target,
            "the first call decides"
        );
        assert_eq!(
            current_nice().unwrap(),
            base,
            "asking lowers no thread by itself"
        );

        let worker = std::thread::spawn(|| {
            on_serving_worker_unpark();
            on_serving_worker_unpark();
            current_nice().unwrap()
        })
        .join()
        .unwrap();
        assert_eq!(worker, target);
        let bystander = std::thread::spawn(|| current_nice().unwrap())
            .join()
            .unwrap();
        assert_eq!(
            bystander, base,
            "a thread that never ran the hook keeps its value"
        );
    }
}
