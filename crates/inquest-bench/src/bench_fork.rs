//! `inquest-bench fork`: what ForkSession costs on a long session.
//!
//! A finished session of `turns` stored turns (`Store::insert_bench_session`:
//! ~200-byte turns, a call and its result per pair) is forked at its head,
//! no message, through `Store::fork_session` (the whole transaction: the
//! tenant and key checks, the fork's row, the one-statement copy with its
//! counters, the tail read, the notice, the commit). Each fork is timed
//! beside a plain `INSERT ... SELECT` of the same rows into a scratch table
//! of the same columns and primary key (`Store::copy_into_ceiling`), in
//! alternating runs of the same process and database, so the ratio says
//! what the fork adds to the copy itself.

use std::time::{Duration, Instant};

use inquest_core::{IncidentText, Limits, Seq, SessionId, Tenant, TenantQuota};
use inquest_store::{ForkOutcome, ForkRequest, Store, StoreConfig};

pub struct ForkBench {
    pub url: String,
    pub turns: i64,
    pub runs: usize,
}

pub async fn run(bench: ForkBench) -> anyhow::Result<()> {
    let mut config = StoreConfig::new(&bench.url);
    // A long fork is one statement; give it room on a slow machine.
    config.turn_write_timeout = Duration::from_secs(120);
    config.op_timeout = Duration::from_secs(120);
    let store = Store::connect(&config)?;
    store.migrate().await?;
    store.create_ceiling_table().await?;
    let tenant = Tenant::default_tenant();
    let incident = store
        .create_incident(
            &tenant,
            &IncidentText::parse("bench fork".into(), String::new(), &Limits::default())?,
        )
        .await?;
    let turns = (bench.turns / 2 * 2).max(2);
    let source = SessionId::new();
    let loading = Instant::now();
    store
        .insert_bench_session(incident.id, source, turns)
        .await?;
    store.analyze_bench_tables().await?;
    eprintln!(
        "loaded a session of {turns} turns in {:.1} s",
        loading.elapsed().as_secs_f64()
    );
    let at = Seq::from_stored(turns).ok_or_else(|| anyhow::anyhow!("no turns"))?;

    let mut forks = Vec::with_capacity(bench.runs);
    let mut copies = Vec::with_capacity(bench.runs);
    // One warm-up of each, then alternating measured runs.
    for i in 0..=bench.runs {
        let start = Instant::now();
        let outcome = store
            .fork_session(
                &tenant,
                TenantQuota::UNLIMITED,
                ForkRequest {
                    source,
                    at_seq: at,
                    message: None,
                    key: None,
                },
            )
            .await?;
        let fork = start.elapsed();
        let ForkOutcome::Forked(forked) = outcome else {
            anyhow::bail!("the fork at the head was refused");
        };
        anyhow::ensure!(
            forked.session.turn_count > turns as u64,
            "the fork copied {} turns",
            forked.session.turn_count
        );
        let start = Instant::now();
        let copied = store
            .copy_into_ceiling(source, uuid::Uuid::now_v7(), turns)
            .await?;
        let copy = start.elapsed();
        anyhow::ensure!(
            copied == turns as u64,
            "the plain copy copied {copied} rows"
        );
        if i > 0 {
            forks.push(fork);
            copies.push(copy);
        }
    }
    store.drop_ceiling_table().await?;
    forks.sort();
    copies.sort();
    let median = |v: &[Duration]| v.get(v.len() / 2).copied().unwrap_or_default();
    let (fork, copy) = (median(&forks), median(&copies));
    println!(
        "ForkSession of a {turns}-turn session at its head (median of {} runs)",
        bench.runs
    );
    println!(
        "{:>10} {:>12} {:>12} {:>12} {:>7}",
        "turns", "fork", "fork max", "INSERT…SELECT", "ratio"
    );
    println!(
        "{turns:>10} {:>9.1} ms {:>9.1} ms {:>10.1} ms {:>6.2}x",
        fork.as_secs_f64() * 1000.0,
        forks.last().copied().unwrap_or_default().as_secs_f64() * 1000.0,
        copy.as_secs_f64() * 1000.0,
        fork.as_secs_f64() / copy.as_secs_f64().max(1e-9)
    );
    Ok(())
}
