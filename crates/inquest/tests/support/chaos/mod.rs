//! The chaos test's parts (`tests/chaos.rs`): a PostgreSQL cluster the
//! test owns (`cluster`), a network namespace for the replica it
//! partitions (`netns`), the strict fake model behind a scripted front
//! (`model`, `script`), the replica processes (`replicas`), the workload
//! (`workload`), watchers (`watchers`), the faults (`faults`), the MCP
//! server's execution log (`executions`) and the checker (`checker`).
//!
//! Every fault and every choice comes from one seeded generator ([`Rng`]),
//! forked per task so a task's plan does not depend on scheduling. The
//! timing of a run still does: a seed replays the same plan, not the same
//! interleaving.

#![allow(dead_code)] // the module is shared as a whole, each part uses some

pub mod checker;
pub mod cluster;
pub mod directory;
pub mod executions;
pub mod faults;
pub mod model;
pub mod netns;
pub mod receiver;
pub mod replicas;
pub mod script;
mod selftest;
pub mod sessions;
pub mod setup;
pub mod watchers;
pub mod workload;

use std::{
    path::PathBuf,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

/// What one run does; every figure can be set from the environment.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `INQUEST_CHAOS_SEED`; random when unset.
    pub seed: u64,
    /// `INQUEST_CHAOS_SECONDS`: how long faults are injected.
    pub fault_seconds: u64,
    /// `INQUEST_CHAOS_SESSIONS`: at least 20; by default 24 per 90 s of
    /// faults.
    pub sessions: usize,
    pub lease_ttl: Duration,
    pub renew_interval: Duration,
    pub reap_interval: Duration,
    pub shutdown_grace: Duration,
    /// The Python that can import the MCP SDK.
    pub python: String,
    /// `INQUEST_CHAOS_FAILOVER=1`: PostgreSQL is a primary with a
    /// synchronous standby, and failovers are among the faults
    /// (`cluster::Cluster::failover`).
    pub failover: bool,
}

impl Settings {
    /// Reads the environment. A missing MCP SDK, a malformed number or a
    /// machine that cannot run the test panics: the test never skips.
    pub fn from_env() -> Settings {
        let number = |name: &str| -> Option<u64> {
            let text = std::env::var(name).ok().filter(|v| !v.trim().is_empty())?;
            Some(
                text.trim()
                    .parse()
                    .unwrap_or_else(|e| panic!("{name}={text:?} is not a number: {e}")),
            )
        };
        let seed = number("INQUEST_CHAOS_SEED").unwrap_or_else(fresh_seed);
        let fault_seconds = number("INQUEST_CHAOS_SECONDS").unwrap_or(90).max(10);
        let scaled = usize::try_from(fault_seconds.saturating_mul(24) / 90).unwrap_or(usize::MAX);
        let sessions = number("INQUEST_CHAOS_SESSIONS")
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
            .unwrap_or(scaled)
            .max(20);
        let python = inquest_testkit::mcp::python().unwrap_or_else(|| {
            panic!(
                "the chaos test needs the Python MCP SDK (mcp=={}): set INQUEST_TEST_PYTHON to an \
                 interpreter that has it (cargo xtask chaos does)",
                inquest_testkit::mcp::MCP_PYTHON_VERSION
            )
        });
        Settings {
            seed,
            fault_seconds,
            sessions,
            lease_ttl: Duration::from_secs(3),
            renew_interval: Duration::from_secs(1),
            reap_interval: Duration::from_millis(500),
            shutdown_grace: Duration::from_secs(5),
            python,
            failover: std::env::var("INQUEST_CHAOS_FAILOVER")
                .is_ok_and(|v| matches!(v.trim(), "1" | "true" | "yes")),
        }
    }
}

fn fresh_seed() -> u64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    // Truncation is the point: any 64 bits of the clock will do.
    (nanos as u64) ^ (u64::from(std::process::id()) << 32)
}

/// Seconds since the Unix epoch: the one clock the test, the replicas'
/// MCP servers (Python's `time.time()`) and the fault history share.
pub fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or_default()
}

/// A small seeded generator (SplitMix64). Enough for picking faults and
/// pauses; not for anything that needs real randomness.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// An independent generator for one task, named by `tag`.
    pub fn fork(&self, tag: u64) -> Rng {
        Rng(mix(self.0 ^ mix(tag.wrapping_add(0x5851_f42d_4c95_7f2d))))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.0)
    }

    /// Uniform in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        let n64 = u64::try_from(n).unwrap_or(u64::MAX).max(1);
        usize::try_from(self.next_u64() % n64).unwrap_or(0)
    }

    /// Uniform in `[low, high)`.
    pub fn between(&mut self, low: f64, high: f64) -> f64 {
        // 53 random bits make a uniform f64 in [0, 1).
        let unit = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        low + (high - low) * unit
    }

    pub fn chance(&mut self, p: f64) -> bool {
        self.between(0.0, 1.0) < p
    }

    /// A pause uniform in `[low, high)` seconds.
    pub fn pause(&mut self, low: f64, high: f64) -> Duration {
        Duration::from_secs_f64(self.between(low, high).max(0.0))
    }

    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i + 1));
        }
    }
}

/// SplitMix64's output function; also a stateless hash of a number.
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The Python MCP server of the chaos test (next to this file).
pub fn tools_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/support/chaos/chaos_tools.py")
}

/// Writes one line straight to the process's stderr: libtest captures
/// `eprintln!` of a passing test, and the seed and the figures must be
/// seen.
pub fn announce(line: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "{line}");
}
