//! `inquest-bench webhooks`: from an event's commit to its delivery at a
//! healthy local receiver, and the rate one webhook is delivered at.
//!
//! A replica as a real child process (this binary's `serve`) delivers an
//! API webhook (Standard Webhooks, signed, its attempts recorded) to a
//! receiver in this process: a minimal HTTP/1.1 server on loopback that
//! answers 204 at once and notes when each `webhook-id` arrived. Events
//! are written by this process with `record_event` (what every lifecycle
//! trigger calls), so the commit's instant is known here.
//!
//! - Latency: one event at a time, paced, each from the commit returning
//!   to its arrival (both this process's monotonic clock).
//! - Rate: a backlog of events committed at once, from the commit to the
//!   last arrival; against the ceiling of the same receiver, this process
//!   POSTing the same number of requests one after another on one
//!   keep-alive connection (what a stream, in order, does at best).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use anyhow::Context;
use inquest_proto::v1::{self as pb, investigations_client::InvestigationsClient};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

use crate::bench_replicas::{Replica, ms, pick};

pub struct WebhooksBench {
    pub url: String,
    /// Events timed one at a time.
    pub samples: usize,
    /// Events of the backlog the rate is measured on.
    pub backlog: usize,
}

/// When each event id arrived.
type Arrivals = Arc<Mutex<HashMap<i64, Instant>>>;

pub async fn run(bench: WebhooksBench) -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join(format!("inquest-bench-webhooks-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let config = crate::bench_replicas::replica_config(&dir, Duration::from_secs(5))?;
    let mut text = std::fs::read_to_string(&config)?;
    text.push_str(
        "\n[admin]\nenabled = false\n\n[webhooks]\nallow_private_targets = true\nallow_http = true\n",
    );
    std::fs::write(&config, text)?;
    let (port, arrivals) = receiver().await?;
    let replica = Replica::start(&bench.url, &config, "bench-webhooks", None).await?;
    let result = measure(&bench, &replica, port, &arrivals).await;
    replica.stop()?;
    result
}

async fn measure(
    bench: &WebhooksBench,
    replica: &Replica,
    port: u16,
    arrivals: &Arrivals,
) -> anyhow::Result<()> {
    let mut client = InvestigationsClient::connect(replica.endpoint.clone()).await?;
    client
        .create_webhook(pb::CreateWebhookRequest {
            url: format!("http://127.0.0.1:{port}/events"),
            ..Default::default()
        })
        .await?;
    let (db, connection) = tokio_postgres::connect(&bench.url, tokio_postgres::NoTls).await?;
    let connection = tokio::spawn(connection);
    // The stream is claimed within a scan of the webhooks table; the
    // first event waits for it and is not timed.
    let warm = commit_events(&db, 1).await?;
    wait_for(arrivals, warm.1, Duration::from_secs(30)).await?;

    let mut latencies = Vec::with_capacity(bench.samples);
    let mut late = 0usize;
    for _ in 0..bench.samples {
        let (_, id, committed) = commit_events(&db, 1).await?;
        let arrived = wait_for(arrivals, id, Duration::from_secs(10)).await?;
        match arrived.checked_duration_since(committed) {
            Some(d) => latencies.push(d),
            // Delivered before the commit's answer reached this process.
            None => {
                late += 1;
                latencies.push(Duration::ZERO);
            }
        }
        // Paced: each event finds the stream idle, as most do.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    latencies.sort();
    println!(
        "commit → delivery at a local receiver, {} events one at a time:",
        bench.samples
    );
    println!(
        "  p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms ({late} arrived before the commit's answer)",
        ms(pick(&latencies, 0.5)),
        ms(pick(&latencies, 0.9)),
        ms(pick(&latencies, 0.99)),
        ms(*latencies.last().unwrap_or(&Duration::ZERO)),
    );

    let (first, last, committed) = commit_events(&db, bench.backlog).await?;
    wait_for(arrivals, last, Duration::from_secs(600)).await?;
    let done = {
        let seen = arrivals.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
        (first..=last)
            .map(|id| seen.get(&id).copied())
            .collect::<Option<Vec<_>>>()
            .context("an event of the backlog never arrived")?
            .into_iter()
            .max()
            .context("an empty backlog")?
    };
    let elapsed = done.saturating_duration_since(committed);
    #[allow(clippy::cast_precision_loss)]
    let rate = bench.backlog as f64 / elapsed.as_secs_f64();
    let ceiling = ceiling(port, bench.backlog).await?;
    println!(
        "{} events committed at once: delivered in {:.2} s, {rate:.0} events/s; the receiver's \
         ceiling (sequential POSTs on one connection) {ceiling:.0} requests/s; ratio {:.2}",
        bench.backlog,
        elapsed.as_secs_f64(),
        rate / ceiling
    );
    drop(db);
    connection.abort();
    Ok(())
}

/// Commits `n` events in one transaction; their first and last ids and
/// the instant the commit returned.
async fn commit_events(
    db: &tokio_postgres::Client,
    n: usize,
) -> anyhow::Result<(i64, i64, Instant)> {
    let n = i64::try_from(n)?;
    db.batch_execute("BEGIN").await?;
    let row = db
        .query_one(
            "SELECT min(id), max(id) FROM (SELECT record_event('incident.created', 'default', \
             NULL, gen_random_uuid(), '{\"title\": \"bench\"}'::jsonb) AS id \
             FROM generate_series(1, $1::bigint)) e",
            &[&n],
        )
        .await?;
    db.batch_execute("COMMIT").await?;
    let committed = Instant::now();
    Ok((row.get(0), row.get(1), committed))
}

async fn wait_for(arrivals: &Arrivals, id: i64, limit: Duration) -> anyhow::Result<Instant> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(at) = arrivals
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?
            .get(&id)
        {
            return Ok(*at);
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "event {id} not delivered in {limit:?}"
        );
        tokio::time::sleep(Duration::from_micros(200)).await;
    }
}

/// A loopback HTTP/1.1 server answering every request 204, keeping the
/// connection; notes each `webhook-id`'s first arrival.
async fn receiver() -> anyhow::Result<(u16, Arrivals)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    let arrivals = Arrivals::default();
    let seen = Arc::clone(&arrivals);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let seen = Arc::clone(&seen);
            tokio::spawn(async move {
                let _ = serve(stream, seen).await;
            });
        }
    });
    Ok((port, arrivals))
}

async fn serve(stream: tokio::net::TcpStream, seen: Arrivals) -> anyhow::Result<()> {
    stream.set_nodelay(true)?;
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);
    loop {
        let Some((length, id)) = head(&mut read).await? else {
            return Ok(());
        };
        let mut body = vec![0u8; length];
        read.read_exact(&mut body).await?;
        if let Some(id) = id.as_deref().and_then(|i| i.strip_prefix("evt_")) {
            let id: i64 = id.parse()?;
            seen.lock()
                .map_err(|_| anyhow::anyhow!("poisoned"))?
                .entry(id)
                .or_insert_with(Instant::now);
        }
        write.write_all(b"HTTP/1.1 204 No Content\r\n\r\n").await?;
    }
}

/// A request's head: its content length and `webhook-id`; `None` at the
/// end of the connection.
async fn head<R: tokio::io::AsyncBufRead + Unpin>(
    read: &mut R,
) -> anyhow::Result<Option<(usize, Option<String>)>> {
    let (mut length, mut id, mut any) = (0usize, None, false);
    loop {
        let mut line = String::new();
        if read.read_line(&mut line).await? == 0 {
            return Ok(None);
        }
        let line = line.trim_end();
        if line.is_empty() {
            if any {
                return Ok(Some((length, id)));
            }
            continue;
        }
        any = true;
        if let Some((name, value)) = line.split_once(':') {
            match name.trim().to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse()?,
                "webhook-id" => id = Some(value.trim().to_owned()),
                _ => {}
            }
        }
    }
}

/// Requests/s of `n` POSTs of a typical event's size, one after another on
/// one keep-alive connection, to the same receiver.
async fn ceiling(port: u16, n: usize) -> anyhow::Result<f64> {
    let stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    stream.set_nodelay(true)?;
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);
    let body = br#"{"type":"incident.created","timestamp":"2026-12-05T00:00:00Z","data":{"event_id":1,"tenant":"default","incident_id":"00000000-0000-0000-0000-000000000000","session_id":null,"title":"bench"}}"#;
    let request = format!(
        "POST /ceiling HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n\
         webhook-timestamp: 0\r\nwebhook-signature: v1,x\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    let started = Instant::now();
    for _ in 0..n {
        write.write_all(request.as_bytes()).await?;
        write.write_all(body).await?;
        let mut line = String::new();
        read.read_line(&mut line).await?;
        anyhow::ensure!(
            line.starts_with("HTTP/1.1 204"),
            "unexpected answer {line:?}"
        );
        // The empty line ending the answer's head.
        line.clear();
        read.read_line(&mut line).await?;
    }
    #[allow(clippy::cast_precision_loss)]
    Ok(n as f64 / started.elapsed().as_secs_f64())
}
