//! `inquest-bench erase`: what erasing costs the live path, and whether the
//! turns table gives its space back.
//!
//! `writers` sessions append turns through `Store::append_turn` (the
//! production path, as `append` measures it) the whole time. Meanwhile
//! `sessions` settled sessions of `turns` turns each, written in bulk and
//! older than the retention, are erased by the retention pass
//! (`inquest_server::retention::pass`: `batch` sessions per transaction,
//! `pause` between batches, as `[retention]` configures it) in
//! alternating slices: a slice of appends alone, then a slice of appends
//! with the erasure running, until every session is gone, so both sides
//! see the same background load. Printed: appends/s and p50/p99 of each
//! side and their ratio (an append's latency bounds any lock wait it had),
//! and the turns table's total size (heap, TOAST, indexes, every
//! partition) before the sessions were written, with them, and after the
//! erasure and the VACUUM autovacuum would run; and that last size less
//! what the writers appended meanwhile (the growth of their partition),
//! which is the figure to hold against the size before. The erased
//! sessions are made with ids of their time, 120 days ago, so their turns
//! fill that month's partition, which the pass drops once it is empty.

use std::time::{Duration, Instant};

use inquest_core::{IncidentText, Limits, NewTurn, SessionId, Tenant, TokenUsage, UserMessage};
use inquest_store::{KeepFor, Store, StoreConfig};
use tokio_util::sync::CancellationToken;

use crate::bench::{Samples, phase};

pub struct EraseBench {
    pub url: String,
    pub sessions: i64,
    pub turns: i64,
    pub payload: usize,
    pub writers: usize,
    pub batch: u32,
    pub pause: Duration,
}

/// Length of each slice, with and without the erasure.
const SLICE: Duration = Duration::from_secs(2);

pub async fn run(bench: EraseBench) -> anyhow::Result<()> {
    let mut config = StoreConfig::new(&bench.url);
    config.max_connections = bench.writers + 2;
    config.op_timeout = Duration::from_secs(300);
    let store = Store::connect(&config)?;
    store.migrate().await?;
    let limits = Limits::default();
    let tenant = Tenant::default_tenant();
    let incident = store
        .create_incident(
            &tenant,
            &IncidentText::parse("bench erase".into(), String::new(), &limits)?,
        )
        .await?;
    let mut sessions: Vec<SessionId> = Vec::with_capacity(bench.writers);
    for _ in 0..bench.writers {
        let started = store
            .start_session(
                &tenant,
                inquest_core::TenantQuota::UNLIMITED,
                incident.id,
                UserMessage::parse("bench".into(), &limits)?,
                None,
            )
            .await?;
        sessions.push(started.session.id);
    }
    let content = "x".repeat(bench.payload);
    let append = {
        let (store, sessions, content) = (store.clone(), sessions.clone(), content.clone());
        move |w: usize, _| {
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
    };
    // Warm up: the pool, and the writers' first pages.
    phase(bench.writers, Duration::from_secs(1), 0, append.clone()).await?;
    store.bench_vacuum("turns").await?;
    let before = store.bench_relation_size("turns").await?;
    let live_before = store.bench_partition_size_of(sessions[0]).await?;

    let loading = Instant::now();
    store
        .insert_bench_settled(
            bench.sessions,
            bench.turns,
            i32::try_from(bench.payload)?,
            120,
        )
        .await?;
    store.bench_vacuum("turns").await?;
    let loaded = store.bench_relation_size("turns").await?;
    eprintln!(
        "wrote {} sessions of {} turns in {:.1} s",
        bench.sessions,
        bench.turns,
        loading.elapsed().as_secs_f64()
    );

    let keep = KeepFor {
        default: Some(Duration::from_secs(90 * 86_400)),
        overrides: Vec::new(),
    };
    let (mut alone, mut erasing) = (Samples::default(), Samples::default());
    let (mut erased, mut batches, mut erase_time) = (0u64, 0u32, Duration::ZERO);
    let mut partitions = 0u64;
    let mut slices = 0;
    while erased < bench.sessions as u64 {
        alone.add(phase(bench.writers, SLICE, 0, append.clone()).await?);
        // The erasure runs for one slice beside the appends.
        let stop = CancellationToken::new();
        let eraser = {
            let (store, keep, stop) = (store.clone(), keep.clone(), stop.clone());
            let (batch, pause) = (bench.batch, bench.pause);
            tokio::spawn(async move {
                let (mut n, mut b, mut p, started) = (0u64, 0u32, 0u64, Instant::now());
                let pace = inquest_server::retention::Pace { batch, pause };
                let none = KeepFor::default();
                while !stop.is_cancelled() {
                    let done =
                        inquest_server::retention::pass(&store, &keep, &none, pace, &stop).await?;
                    b += done.batches;
                    n += done.sessions;
                    p += done.partitions;
                    if done.sessions == 0 {
                        break;
                    }
                }
                anyhow::Ok((n, b, p, started.elapsed()))
            })
        };
        erasing.add(phase(bench.writers, SLICE, 0, append.clone()).await?);
        stop.cancel();
        let (n, b, p, t) = eraser.await??;
        erased += n;
        partitions += p;
        batches += b;
        erase_time += t;
        slices += 1;
        if n == 0 {
            anyhow::bail!("a slice erased nothing with {erased} sessions erased");
        }
    }
    // The next pass, as `[retention] interval` would run it: it finds
    // nothing left to erase, and drops the month the erasure emptied (the
    // last slice's pass may have been stopped before it got there).
    let last = inquest_server::retention::pass(
        &store,
        &keep,
        &KeepFor::default(),
        inquest_server::retention::Pace {
            batch: bench.batch,
            pause: bench.pause,
        },
        &CancellationToken::new(),
    )
    .await?;
    partitions += last.partitions;
    let erased_size = store.bench_relation_size("turns").await?;
    store.bench_vacuum("turns").await?;
    let vacuumed = store.bench_relation_size("turns").await?;
    let appended = store.bench_partition_size_of(sessions[0]).await? - live_before;

    let (alone, erasing) = (alone.figures(), erasing.figures());
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let mib = |b: i64| b as f64 / (1024.0 * 1024.0);
    println!(
        "erasing {} sessions x {} turns ({}-byte turns) by retention batches of {} ({} ms apart) while {} writers append, {} alternating slices of {} s",
        bench.sessions,
        bench.turns,
        bench.payload,
        bench.batch,
        bench.pause.as_millis(),
        bench.writers,
        slices,
        SLICE.as_secs()
    );
    println!(
        "{:>10} | {:>10} {:>8} {:>8} {:>8}",
        "appends", "appends/s", "p50 ms", "p99 ms", "n"
    );
    for (name, f) in [("alone", &alone), ("erasing", &erasing)] {
        println!(
            "{:>10} | {:>10.0} {:>8.2} {:>8.2} {:>8}",
            name,
            f.per_sec,
            ms(f.p50),
            ms(f.p99),
            f.ops
        );
    }
    println!(
        "ratio erasing/alone: {:.2}; erased {} sessions ({} turns) in {} batches, {:.1} s of erasure ({:.0} turns/s)",
        erasing.per_sec / alone.per_sec.max(f64::MIN_POSITIVE),
        erased,
        erased as i64 * bench.turns,
        batches,
        erase_time.as_secs_f64(),
        (erased as i64 * bench.turns) as f64 / erase_time.as_secs_f64().max(f64::MIN_POSITIVE)
    );
    println!(
        "turns table (heap+TOAST+indexes, all partitions): before {:.1} MiB, written {:.1} MiB, erased {:.1} MiB, after VACUUM {:.1} MiB; {} partitions dropped; the writers' partition grew {:.1} MiB ({} turns appended meanwhile)",
        mib(before),
        mib(loaded),
        mib(erased_size),
        mib(vacuumed),
        partitions,
        mib(appended),
        alone.ops + erasing.ops
    );
    println!(
        "size after, less the writers' growth: {:.1} MiB = {:.2}x the size before",
        mib(vacuumed - appended),
        (vacuumed - appended) as f64 / before.max(1) as f64
    );
    if alone.ops == 0 || erasing.ops == 0 {
        anyhow::bail!("a phase completed no appends");
    }
    Ok(())
}
