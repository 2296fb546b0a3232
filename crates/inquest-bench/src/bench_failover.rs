//! `inquest-bench failover`: how long a database failover stalls a running
//! burst, next to the cluster's own failover time in the same run.
//!
//! Each round: a fresh primary and standby (`inquest_testkit::ha`,
//! streaming replication, synchronous unless `--asynchronous`), one
//! replica process (this binary's `serve`) on the multi-host URL with
//! `target_session_attrs=read-write`, and an investigation appending a turn
//! every few milliseconds (scripted model, built-in file tools). Then the
//! primary's postmaster is killed (kill -9) and the standby promoted at
//! once, as an HA manager does once it has decided. Timed from the kill:
//!
//! - cluster: until the standby takes a write (`SELECT txid_current()`
//!   answers on it); the cluster's own failover time, this run.
//! - stall: until the session's next turn is committed there: the
//!   earliest commit timestamp (`track_commit_timestamp`) of its turns
//!   later than the kill. Turns replayed from the old primary carry its
//!   commit times, all before the kill; the host's clock is the one both
//!   read.
//!
//! The goal: stall under cluster + 2 s in every round. The session must
//! then complete (not fail).

use std::time::{Duration, Instant};

use anyhow::Context;
use inquest_proto::v1::{self as pb, investigations_client::InvestigationsClient};
use inquest_testkit::ha::Cluster;

use crate::bench_replicas::{Replica, ms, new_session};

pub struct FailoverBench {
    pub rounds: usize,
    pub ttl: Duration,
    pub synchronous: bool,
}

/// How many scripted steps the investigation has: more than a round uses.
const STEPS: usize = 200;

pub async fn run(bench: FailoverBench) -> anyhow::Result<()> {
    let bin = inquest_store::embedded::find_binaries()
        .context("PostgreSQL server binaries (initdb, pg_ctl, pg_basebackup, psql)")?;
    let dir = std::env::temp_dir().join(format!("inquest-bench-failover-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let config = config(&dir, bench.ttl)?;
    let mut results = Vec::new();
    for round in 0..bench.rounds {
        let r = one_round(&bin, &config, bench.synchronous)
            .await
            .with_context(|| format!("round {round}"))?;
        println!(
            "round {round}: cluster {:.0} ms, stall {:.0} ms (stall - cluster {:+.0} ms), session {}",
            ms(r.cluster),
            ms(r.stall),
            ms(r.stall) - ms(r.cluster),
            r.status
        );
        results.push(r);
    }
    let _ = std::fs::remove_dir_all(&dir);
    let worst = results
        .iter()
        .map(|r| r.stall.saturating_sub(r.cluster))
        .max()
        .unwrap_or_default();
    let failed = results.iter().filter(|r| r.status != "completed").count();
    let mut stalls: Vec<Duration> = results.iter().map(|r| r.stall).collect();
    stalls.sort();
    let mut clusters: Vec<Duration> = results.iter().map(|r| r.cluster).collect();
    clusters.sort();
    println!(
        "\nfailover ({} rounds, {} replication, lease TTL {:?}): kill -9 of the primary's postmaster, promotion at once",
        bench.rounds,
        if bench.synchronous {
            "synchronous"
        } else {
            "asynchronous"
        },
        bench.ttl
    );
    println!(
        "cluster (kill -> standby takes writes): p50 {:.0} ms, max {:.0} ms",
        ms(crate::bench_replicas::pick(&clusters, 0.5)),
        ms(clusters.last().copied().unwrap_or_default())
    );
    println!(
        "stall (kill -> next turn committed): p50 {:.0} ms, max {:.0} ms",
        ms(crate::bench_replicas::pick(&stalls, 0.5)),
        ms(stalls.last().copied().unwrap_or_default())
    );
    println!(
        "worst stall - cluster: {:.0} ms; goal under 2000 ms: {}; sessions not completed: {failed}",
        ms(worst),
        if worst < Duration::from_secs(2) && failed == 0 {
            "met"
        } else {
            "NOT met"
        }
    );
    Ok(())
}

struct Round {
    cluster: Duration,
    stall: Duration,
    status: String,
}

async fn one_round(
    bin: &std::path::Path,
    config: &std::path::Path,
    synchronous: bool,
) -> anyhow::Result<Round> {
    let bin = bin.to_owned();
    let mut cluster = tokio::task::spawn_blocking(move || Cluster::start(&bin, 1, synchronous))
        .await?
        .context("starting the cluster")?;
    let url = cluster.url();
    let replica = Replica::start(&url, config, "bench-failover", None).await?;
    let mut client = InvestigationsClient::connect(replica.endpoint.clone()).await?;
    let session = new_session(&mut client).await?;
    let (primary, standby) = (cluster.primary, cluster.standby());
    let on_primary = connect(&cluster.node_url(primary)).await?;
    let on_standby = connect(&cluster.node_url(standby)).await?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while head(&on_primary, &session).await? < 10 {
        anyhow::ensure!(Instant::now() < deadline, "the burst never reached seq 10");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    drop(on_primary);
    cluster.kill_postmaster(primary)?;
    let killed = Instant::now();
    let killed_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs_f64();
    let promoting = tokio::task::spawn_blocking(move || {
        let promoted = cluster.promote(standby);
        (cluster, promoted)
    });
    let (mut writable, mut next) = (None, None);
    let deadline = killed + Duration::from_secs(120);
    while writable.is_none() || next.is_none() {
        anyhow::ensure!(
            Instant::now() < deadline,
            "no write within 120 s of the kill (writable {writable:?}, next turn {next:?})"
        );
        if writable.is_none()
            && on_standby
                .query_one("SELECT txid_current()", &[])
                .await
                .is_ok()
        {
            writable = Some(killed.elapsed());
        }
        if next.is_none() {
            next = first_commit_after(&on_standby, &session, killed_at).await?;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (cluster, promoted) = promoting.await?;
    promoted.context("promoting the standby")?;
    let status = settle(&mut client, &session).await?;
    replica.stop()?;
    drop(cluster);
    Ok(Round {
        cluster: writable.unwrap_or_default(),
        stall: next.unwrap_or_default(),
        status,
    })
}

async fn connect(url: &str) -> anyhow::Result<tokio_postgres::Client> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    tokio::spawn(connection);
    Ok(client)
}

/// How long after `killed_at` (seconds since the epoch) the first turn of
/// `session` committed after it was committed, if one was.
async fn first_commit_after(
    db: &tokio_postgres::Client,
    session: &str,
    killed_at: f64,
) -> anyhow::Result<Option<Duration>> {
    let first: Option<f64> = db
        .query_one(
            "SELECT extract(epoch FROM min(pg_xact_commit_timestamp(xmin)))::float8 \
             FROM turns WHERE session_id = $1::text::uuid \
             AND pg_xact_commit_timestamp(xmin) > to_timestamp($2)",
            &[&session, &killed_at],
        )
        .await?
        .get(0);
    Ok(first.map(|at| Duration::from_secs_f64((at - killed_at).max(0.0))))
}

async fn head(db: &tokio_postgres::Client, session: &str) -> anyhow::Result<i64> {
    Ok(db
        .query_one(
            "SELECT head_seq FROM sessions WHERE id = $1::text::uuid",
            &[&session],
        )
        .await?
        .get(0))
}

/// The session's status once it is neither pending nor running (a
/// minute at most).
async fn settle(
    client: &mut InvestigationsClient<tonic::transport::Channel>,
    session: &str,
) -> anyhow::Result<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = client
            .get_session(pb::GetSessionRequest {
                session_id: session.to_owned(),
            })
            .await?
            .into_inner();
        if !matches!(
            s.status(),
            pb::SessionStatus::Pending | pb::SessionStatus::Running
        ) || Instant::now() > deadline
        {
            return Ok(s
                .status()
                .as_str_name()
                .to_lowercase()
                .replace("session_status_", ""));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A script of `STEPS` steps, each a short model answer (20 ms) calling
/// a file tool over the example evidence, and the replica's config.
fn config(dir: &std::path::Path, ttl: Duration) -> anyhow::Result<std::path::PathBuf> {
    let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/checkout-latency")
        .canonicalize()
        .context("examples/checkout-latency")?;
    let replies: Vec<serde_json::Value> = (1..=STEPS)
        .map(|i| {
            serde_json::json!({
                "text": format!("Step {i}: reading the deploy log again."),
                "tool_calls": [{"name": "search", "arguments": {"pattern": "checkout-api", "path": "deploys/deploys.log"}}],
                "delay": "20ms",
            })
        })
        .collect();
    let script = dir.join("script.json");
    std::fs::write(
        &script,
        serde_json::json!({"replies": replies, "final": "Nothing changed."}).to_string(),
    )?;
    let text = format!(
        "[lease]\nttl = \"{}ms\"\nreap_interval = \"200ms\"\n\n[store]\nmax_connections = 4\n\n\
         [agent]\nmax_model_calls_per_burst = {}\niteration_budget = {}\n\n\
         [approval]\nmode = \"off\"\n\n\
         [[providers]]\nkind = \"script\"\nname = \"failover-script\"\nscript = \"{}\"\n\n\
         [tools]\nfiles_root = \"{}\"\nfiles_server = \"evidence\"\n",
        ttl.as_millis(),
        STEPS + 5,
        STEPS + 5,
        script.display(),
        example.join("evidence").display(),
    );
    let path = dir.join("inquest.toml");
    std::fs::write(&path, text)?;
    Ok(path)
}
