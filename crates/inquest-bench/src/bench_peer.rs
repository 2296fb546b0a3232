//! `inquest-bench peer`: Inquest's half of the side-by-side with LangGraph's
//! PostgreSQL checkpointer. `benches/peers/langgraph/run.py`
//! runs it against the same cluster, with the same synthetic investigation,
//! and prints both; run alone, it prints its JSON.
//!
//! The investigation (identical in the script): turn 1 a user message of
//! `user_bytes`; then turns alternate an assistant turn (`assistant_bytes` of
//! text and one `read_file` call whose arguments are `args_bytes` of JSON)
//! and that call's result (`tool_bytes`). Text is pseudo-random letters from
//! one 64-bit LCG seeded by the turn number (the script has the same
//! generator), so PostgreSQL's compression sees the same data on both sides.
//!
//! Turn 1 is `StartSession`'s write (`TurnLog::start_session`); every other
//! turn goes through the burst's `BurstLog::append`, the agent's real
//! leased append (redaction, the fenced statement with its `pg_notify`,
//! publish). Measured per turn in windows ending at turn 10, 100 and 1,000:
//! the append's time (median over the window), the WAL it made
//! (`pg_current_wal_lsn()` before and after, read on a separate connection
//! outside the timed part; mean over the window: it is cluster-wide, so
//! other clients' writes would add to it) and the growth of the database's
//! tables (`pg_total_relation_size` of every table in `public`, with
//! indexes and TOAST, across the window). Then the load a resume does,
//! `Store::resume_turns` + `rebuild_messages` on the finished session.

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use anyhow::Context;
use inquest_broadcast::TurnBroadcaster;
use inquest_core::{
    IncidentText, Limits, NewTurn, TokenUsage, ToolArguments, ToolCall, UserMessage,
    rebuild_messages,
};
use inquest_server::TurnLog;
use inquest_store::{Store, StoreConfig};
use serde_json::json;

pub struct PeerBench {
    pub url: String,
    pub turns: usize,
    pub checkpoints: Vec<usize>,
    pub window: usize,
    pub user_bytes: usize,
    pub assistant_bytes: usize,
    pub args_bytes: usize,
    pub tool_bytes: usize,
    pub resume_runs: usize,
}

/// The generator the script shares: an LCG (Knuth's MMIX constants), one
/// letter or space per step from the high bits.
pub fn synthetic_text(seed: u64, len: usize) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz      ";
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x2545_F491_4F6C_DD1D;
    (0..len)
        .map(|_| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            ALPHABET[((x >> 33) % ALPHABET.len() as u64) as usize] as char
        })
        .collect()
}

/// The call id of the assistant turn `n` (its result is turn `n + 1`).
fn call_id(n: usize) -> String {
    format!("call_{n:06}")
}

/// The `read_file` arguments of assistant turn `n`: `{"path":…,"pad":…}`
/// padded to `args_bytes` of JSON text.
pub fn arguments(n: usize, args_bytes: usize) -> String {
    let path = format!("logs/app-{n}.log");
    let bare = json!({ "path": path, "pad": "" }).to_string().len();
    let pad = synthetic_text(n as u64 ^ 0xA5A5, args_bytes.saturating_sub(bare));
    json!({ "path": path, "pad": pad }).to_string()
}

fn turn(bench: &PeerBench, n: usize) -> NewTurn {
    if n.is_multiple_of(2) {
        NewTurn::Assistant {
            text: synthetic_text(n as u64, bench.assistant_bytes),
            tool_calls: vec![ToolCall {
                id: call_id(n),
                name: "read_file".into(),
                arguments: ToolArguments::from_model(&arguments(n, bench.args_bytes)),
            }],
            usage: TokenUsage::default(),
        }
    } else {
        NewTurn::Tool {
            call_id: call_id(n - 1),
            tool_name: "read_file".into(),
            content: synthetic_text(n as u64, bench.tool_bytes),
            is_error: false,
        }
    }
}

/// A side connection for the WAL position and table sizes, so reading
/// them never shares the store's pool.
struct Probe(tokio_postgres::Client);

impl Probe {
    async fn connect(url: &str) -> anyhow::Result<Probe> {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .context("probe connection")?;
        tokio::spawn(connection);
        Ok(Probe(client))
    }

    async fn wal(&self) -> anyhow::Result<i64> {
        let row = self
            .0
            .query_one("SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint", &[])
            .await?;
        Ok(row.get(0))
    }

    async fn table_bytes(&self) -> anyhow::Result<i64> {
        let row = self
            .0
            .query_one(
                "SELECT COALESCE(sum(pg_total_relation_size(c.oid)), 0)::bigint \
                 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
                 WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')",
                &[],
            )
            .await?;
        Ok(row.get(0))
    }
}

/// Where a mark's table growth is measured from: `window` turns back, or
/// before turn 1 when that would be turn 1 or earlier (the script does the
/// same; LangGraph's turn 1 is the graph's input, inside its first step).
fn window_start(mark: usize, window: usize) -> usize {
    if mark > window + 1 { mark - window } else { 0 }
}

fn mean(v: Vec<f64>) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

pub async fn run(bench: PeerBench) -> anyhow::Result<()> {
    anyhow::ensure!(bench.turns >= 2, "--turns must be at least 2");
    anyhow::ensure!(bench.window >= 1, "--window must be at least 1");
    let store = Store::connect(&StoreConfig::new(&bench.url))?;
    store.migrate().await?;
    let probe = Probe::connect(&bench.url).await?;
    let log = TurnLog::new(store.clone(), TurnBroadcaster::default());
    let limits = Limits::default();
    let incident = store
        .create_incident(
            &inquest_core::Tenant::default_tenant(),
            &IncidentText::parse("peer bench".into(), String::new(), &limits)?,
        )
        .await?;
    let in_window = |n: usize| {
        bench
            .checkpoints
            .iter()
            .any(|&k| n <= k && n + bench.window > k)
    };

    // Per turn inside a window: (ms, WAL bytes); table bytes at each
    // window's edges.
    let mut measured: BTreeMap<usize, (f64, i64)> = BTreeMap::new();
    let mut tables: BTreeMap<usize, i64> = BTreeMap::new();
    let edge = |n: usize| {
        bench
            .checkpoints
            .iter()
            .any(|&k| n == k || n == window_start(k, bench.window))
    };
    if edge(0) {
        tables.insert(0, probe.table_bytes().await?);
    }

    let user = UserMessage::parse(synthetic_text(1, bench.user_bytes), &limits)?;
    let wal_before = probe.wal().await?;
    let started = Instant::now();
    let session = log
        .start_session(
            &inquest_core::Tenant::default_tenant(),
            inquest_core::TenantQuota::UNLIMITED,
            incident.id,
            user,
            None,
        )
        .await?
        .session
        .id;
    let elapsed = started.elapsed();
    if in_window(1) {
        measured.insert(1, (ms(elapsed), probe.wal().await? - wal_before));
    }
    if edge(1) {
        tables.insert(1, probe.table_bytes().await?);
    }
    let (burst, _cancel) = log
        .claim_burst(session)
        .await?
        .context("the fresh session was not pending")?;
    for n in 2..=bench.turns {
        let next = turn(&bench, n);
        let window = in_window(n);
        let wal_before = if window { probe.wal().await? } else { 0 };
        let started = Instant::now();
        burst.append(next).await?;
        let elapsed = started.elapsed();
        if window {
            measured.insert(n, (ms(elapsed), probe.wal().await? - wal_before));
        }
        if edge(n) {
            tables.insert(n, probe.table_bytes().await?);
        }
    }

    let mut at = serde_json::Map::new();
    for &k in bench.checkpoints.iter().filter(|&&k| k <= bench.turns) {
        let rows: Vec<(f64, i64)> = (k + 1 - bench.window.min(k)..=k)
            .filter_map(|n| measured.get(&n).copied())
            .collect();
        let start = window_start(k, bench.window);
        let grown = match (tables.get(&k), tables.get(&start)) {
            (Some(end), Some(begin)) => Some((end - begin) as f64 / (k - start) as f64),
            _ => None,
        };
        at.insert(
            k.to_string(),
            json!({
                "ms_per_turn": median(rows.iter().map(|r| r.0).collect()),
                "wal_bytes_per_turn": mean(rows.iter().map(|r| r.1 as f64).collect()),
                "table_bytes_per_turn": grown,
                "table_bytes": tables.get(&k),
                "samples": rows.len(),
            }),
        );
    }

    // The load a resume does: the turns from the latest compaction on and
    // one rebuild (what `resume::prepare` and the agent need).
    let mut loads = Vec::new();
    let mut rebuilt_messages = 0;
    for run in 0..=bench.resume_runs {
        let started = Instant::now();
        let turns = store.resume_turns(session).await?;
        let rebuilt = rebuild_messages(&turns);
        let elapsed = started.elapsed();
        rebuilt_messages = rebuilt.messages.len();
        if run > 0 {
            loads.push(ms(elapsed));
        }
    }
    burst.abandon();
    let report = json!({
        "system": "inquest",
        "path": "TurnLog::start_session + BurstLog::append (Store::append_turn_leased)",
        "turns": bench.turns,
        "window": bench.window,
        "at": at,
        "resume_ms": median(loads),
        "resume_what": "Store::resume_turns + rebuild_messages",
        "resume_messages": rebuilt_messages,
        "resume_runs": bench.resume_runs,
    });
    println!("{report}");
    Ok(())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `benches/peers/langgraph/run.py` generates the same text: these
    /// values are what its `synthetic_text(7, 24)` and `arguments(2, 100)`
    /// print.
    #[test]
    fn the_generator_matches_the_scripts() {
        assert_eq!(synthetic_text(7, 24), "hgzgfs ikr  mrwe apnizxx");
        let args = arguments(2, 100);
        assert_eq!(args.len(), 100);
        assert!(
            args.starts_with(r#"{"pad":"nizvh  ef    tu crpxvqfgdzgstqpi sr qjbmys  ubzrpgtg"#),
            "{args}"
        );
        assert!(args.ends_with(r#"","path":"logs/app-2.log"}"#), "{args}");
    }
}
