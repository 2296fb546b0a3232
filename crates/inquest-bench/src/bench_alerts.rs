//! `inquest-bench alerts`: Alertmanager notifications against a real
//! server process (this binary's `serve`, `[auth] mode = "none"` on
//! loopback), a trigger on `severity = "critical"` and the fake OpenAI
//! provider of the testkit as its model.
//!
//! - First notification → first model request: a new group at a time,
//!   paced, from the POST leaving this process to the fake provider having
//!   recorded the session's first request (polled every 100 µs).
//! - Deduplication: one group's notification repeated by several
//!   keep-alive connections at once for some seconds (what Alertmanager's
//!   retries and `repeat_interval` send): answered notifications/s, and
//!   the turns, incidents and alert events written meanwhile (none may be).
//! - A storm: 1,000 distinct groups as fast as 8 connections send them, on
//!   a second replica with the default `max_started_per_hour` (60): how
//!   many sessions start, and a person's ListIncidents latency on the
//!   first replica during the storm against before it.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::Context;
use inquest_testkit::fake::{FakeProvider, FakeReply, Flavor};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

use crate::bench_replicas::{Replica, ms, pick};

pub struct AlertsBench {
    pub url: String,
    /// New groups timed to their first model request.
    pub samples: usize,
    /// Seconds of repeated notifications.
    pub seconds: u64,
    /// Connections sending them at once.
    pub senders: usize,
}

pub async fn run(bench: AlertsBench) -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join(format!("inquest-bench-alerts-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let fake = FakeProvider::start(Flavor::OpenAi).await?;
    let config = dir.join("inquest.toml");
    std::fs::write(
        &config,
        format!(
            "[admin]\nenabled = false\n\n[approval]\nmode = \"off\"\n\n\
             [alerts]\nmax_started_per_hour = 100000\n\n\
             [[alerts.triggers]]\nmatch = {{ severity = \"critical\" }}\n\
             prompt = \"Investigate {{{{label.alertname}}}}.\"\n\n\
             [[providers]]\nkind = \"openai\"\nname = \"fake\"\nmodel = \"fake-model\"\n\
             base_url = \"{}\"\n",
            fake.base_url()
        ),
    )?;
    let replica = Replica::start(&bench.url, &config, "bench-alerts", None).await?;
    // The same setup with the storm cap at its default, for the storm,
    // which runs first: the cap counts the last hour's starts, and the
    // timed groups below start many.
    let capped = dir.join("capped.toml");
    let text = std::fs::read_to_string(&config)?
        .replace("max_started_per_hour = 100000", "max_started_per_hour = 60");
    std::fs::write(&capped, text)?;
    let second = Replica::start(&bench.url, &capped, "bench-alerts-storm", None).await?;
    let result = storm(&bench.url, &replica, &second, &fake).await;
    second.stop()?;
    let result = match result {
        Ok(()) => measure(&bench, &replica, &fake).await,
        Err(e) => Err(e),
    };
    replica.stop()?;
    result
}

/// ListIncidents from a person's client, timed, `n` times 10 ms apart.
async fn person(endpoint: &str, n: usize) -> anyhow::Result<Vec<Duration>> {
    let mut client = inquest_proto::v1::investigations_client::InvestigationsClient::connect(
        endpoint.to_owned(),
    )
    .await?;
    let mut took = Vec::with_capacity(n);
    for _ in 0..n {
        let started = Instant::now();
        client
            .list_incidents(inquest_proto::v1::ListIncidentsRequest {
                page_size: 20,
                ..Default::default()
            })
            .await?;
        took.push(started.elapsed());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    took.sort();
    Ok(took)
}

async fn storm(
    url: &str,
    person_side: &Replica,
    storm_side: &Replica,
    fake: &FakeProvider,
) -> anyhow::Result<()> {
    const GROUPS: usize = 1000;
    const SENDERS: usize = 8;
    let (db, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    let connection = tokio::spawn(connection);
    for _ in 0..200 {
        fake.reply(FakeReply::text("Checked."));
    }
    let quiet = person(&person_side.endpoint, 200).await?;
    let sessions_before = count(&db, "sessions").await?;
    let incidents_before = count(&db, "incidents").await?;
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut senders = Vec::new();
    for _ in 0..SENDERS {
        let (next, endpoint) = (next.clone(), storm_side.endpoint.clone());
        senders.push(tokio::spawn(async move {
            let mut conn = Conn::open(&endpoint).await?;
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= GROUPS as u64 {
                    return anyhow::Ok(());
                }
                let status = conn.post(&payload(&format!("storm-{i}"))).await?;
                anyhow::ensure!(status == 200, "storm notification {i} answered {status}");
            }
        }));
    }
    let during = person(&person_side.endpoint, 200);
    let (during, sent) = tokio::join!(during, async {
        for s in senders {
            s.await??;
        }
        anyhow::Ok(started.elapsed())
    });
    let (during, sent) = (during?, sent?);
    let sessions = count(&db, "sessions").await? - sessions_before;
    let incidents = count(&db, "incidents").await? - incidents_before;
    println!(
        "storm: {GROUPS} new groups from {SENDERS} connections in {:.1} s ({:.0}/s): {incidents} incidents, \
         {sessions} sessions started (cap 60 per hour); a person's ListIncidents p50 {:.1} ms, p99 {:.1} ms \
         during it against {:.1} ms, {:.1} ms before (p99 ratio {:.2})",
        sent.as_secs_f64(),
        GROUPS as f64 / sent.as_secs_f64(),
        ms(pick(&during, 0.5)),
        ms(pick(&during, 0.99)),
        ms(pick(&quiet, 0.5)),
        ms(pick(&quiet, 0.99)),
        ms(pick(&during, 0.99)) / ms(pick(&quiet, 0.99)).max(0.001),
    );
    // The started sessions' bursts end before the timed phase counts
    // model requests.
    tokio::time::sleep(Duration::from_secs(3)).await;
    drop(db);
    connection.abort();
    Ok(())
}

fn payload(group: &str) -> String {
    json!({
        "version": "4", "groupKey": group, "status": "firing", "receiver": "inquest",
        "externalURL": "http://am.bench", "groupLabels": {"alertname": "CheckoutDown"},
        "commonLabels": {"alertname": "CheckoutDown", "severity": "critical"},
        "commonAnnotations": {"summary": "checkout is down"},
        "alerts": [{
            "status": "firing", "fingerprint": format!("fp-{group}"),
            "labels": {"alertname": "CheckoutDown", "severity": "critical"},
            "annotations": {"summary": "checkout is down"},
            "startsAt": "2026-12-05T00:00:00Z", "endsAt": "0001-01-01T00:00:00Z",
            "generatorURL": "http://prometheus.bench/graph",
        }],
    })
    .to_string()
}

/// One keep-alive HTTP/1.1 connection to the server.
struct Conn {
    read: BufReader<tokio::net::tcp::OwnedReadHalf>,
    write: tokio::net::tcp::OwnedWriteHalf,
}

impl Conn {
    async fn open(endpoint: &str) -> anyhow::Result<Conn> {
        let addr = endpoint.trim_start_matches("http://");
        let stream = tokio::net::TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (read, write) = stream.into_split();
        Ok(Conn {
            read: BufReader::new(read),
            write,
        })
    }

    /// POSTs `body`; the answer's status.
    async fn post(&mut self, body: &str) -> anyhow::Result<u16> {
        let head = format!(
            "POST /v1/alerts/alertmanager HTTP/1.1\r\nhost: 127.0.0.1\r\n\
             content-type: application/json\r\ncontent-length: {}\r\n\r\n",
            body.len()
        );
        self.write.write_all(head.as_bytes()).await?;
        self.write.write_all(body.as_bytes()).await?;
        let mut line = String::new();
        self.read.read_line(&mut line).await?;
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .context("no status line")?
            .parse()?;
        let mut length = 0usize;
        loop {
            line.clear();
            self.read.read_line(&mut line).await?;
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse()?;
            }
        }
        let mut rest = vec![0u8; length];
        self.read.read_exact(&mut rest).await?;
        Ok(status)
    }
}

async fn count(db: &tokio_postgres::Client, table: &str) -> anyhow::Result<i64> {
    Ok(db
        .query_one(&format!("SELECT count(*) FROM {table}"), &[])
        .await?
        .get(0))
}

async fn measure(
    bench: &AlertsBench,
    replica: &Replica,
    fake: &FakeProvider,
) -> anyhow::Result<()> {
    let (db, connection) = tokio_postgres::connect(&bench.url, tokio_postgres::NoTls).await?;
    let connection = tokio::spawn(connection);
    let mut conn = Conn::open(&replica.endpoint).await?;
    // Warm-up: the first group also opens the pools.
    fake.reply(FakeReply::text("Checked."))
        .reply(FakeReply::text("Checked."));
    anyhow::ensure!(
        conn.post(&payload("warm-up")).await? == 200,
        "warm-up refused"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;

    let mut firsts = Vec::with_capacity(bench.samples);
    for i in 0..bench.samples {
        // The loop's request, then the report's.
        fake.reply(FakeReply::text("Checked."))
            .reply(FakeReply::text("Checked."));
        let before = fake.request_count();
        let sent = Instant::now();
        let status = conn.post(&payload(&format!("group-{i}"))).await?;
        anyhow::ensure!(status == 200, "notification {i} answered {status}");
        let deadline = sent + Duration::from_secs(10);
        while fake.request_count() == before {
            anyhow::ensure!(Instant::now() < deadline, "no model request for group {i}");
            tokio::time::sleep(Duration::from_micros(100)).await;
        }
        firsts.push(sent.elapsed());
        // Its report's request too, before the next group is sent.
        while fake.request_count() < before + 2 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    firsts.sort();
    println!(
        "first notification → first model request, {} new groups: p50 {:.1} ms, p90 {:.1} ms, max {:.1} ms",
        bench.samples,
        ms(pick(&firsts, 0.5)),
        ms(pick(&firsts, 0.9)),
        ms(*firsts.last().unwrap_or(&Duration::ZERO)),
    );

    // Repeats of one group, already stored.
    let repeated = payload("repeated");
    fake.reply(FakeReply::text("Checked."))
        .reply(FakeReply::text("Checked."));
    anyhow::ensure!(
        conn.post(&repeated).await? == 200,
        "first of the repeated group refused"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    let tables = ["turns", "incidents", "alert_events", "sessions"];
    let mut before = Vec::new();
    for t in tables {
        before.push(count(&db, t).await?);
    }
    let answered = Arc::new(AtomicU64::new(0));
    let refused = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut senders = Vec::new();
    for _ in 0..bench.senders {
        let (answered, refused, stop) = (answered.clone(), refused.clone(), stop.clone());
        let (endpoint, body) = (replica.endpoint.clone(), repeated.clone());
        senders.push(tokio::spawn(async move {
            let mut conn = Conn::open(&endpoint).await?;
            while !stop.load(Ordering::Relaxed) {
                if conn.post(&body).await? == 200 {
                    answered.fetch_add(1, Ordering::Relaxed);
                } else {
                    refused.fetch_add(1, Ordering::Relaxed);
                }
            }
            anyhow::Ok(())
        }));
    }
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(bench.seconds)).await;
    stop.store(true, Ordering::Relaxed);
    for s in senders {
        s.await??;
    }
    let elapsed = started.elapsed();
    let mut after = Vec::new();
    for t in tables {
        after.push(count(&db, t).await?);
    }
    #[allow(clippy::cast_precision_loss)]
    let rate = answered.load(Ordering::Relaxed) as f64 / elapsed.as_secs_f64();
    println!(
        "one group repeated by {} connections for {:.1} s: {rate:.0} notifications/s answered 200, \
         {} refused; written meanwhile: turns {}, incidents {}, alert events {}, sessions {}",
        bench.senders,
        elapsed.as_secs_f64(),
        refused.load(Ordering::Relaxed),
        after[0] - before[0],
        after[1] - before[1],
        after[2] - before[2],
        after[3] - before[3],
    );
    drop(db);
    connection.abort();
    Ok(())
}
