//! `inquest-bench interrupt`: from `SendMessage` with `if_running =
//! INTERRUPT` to the running burst stopped, sent to the replica that holds
//! the burst's lease and to another one.
//!
//! Two replicas as real child processes (this binary's `serve`) on one
//! database, with a scripted model whose first answer takes ten minutes:
//! each session's first burst is a model call in flight on the replica
//! that started it. Samples alternate the replica the interrupt is sent
//! to. The burst is stopped when its report is stored (the agent returned
//! and `Runner::finish` wrote it, before the close that opens the
//! message's burst); its `reports.created_at` (the database's clock) is
//! compared with the client's send time (same host, wall clocks). The
//! lease renews every 10 s (ttl 30 s), so a stop on the other replica well
//! under that came through the notification.

use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;
use inquest_proto::v1::{self as pb, investigations_client::InvestigationsClient};
use tonic::transport::Channel;

use crate::bench_replicas::{Replica, ms, new_session, pick};

type Client = InvestigationsClient<Channel>;

pub struct InterruptBench {
    pub url: String,
    /// Interrupts to time, on each replica.
    pub samples: usize,
}

/// The scripted model: the first answer takes ten minutes (a model call in
/// flight for as long as the bench needs); the interrupting message's
/// burst answers at once.
const SCRIPT: &str = r#"{"replies": [{"text": "Reading every log, slowly.", "delay": "600s"}],
  "final": "Nothing more.",
  "follow_up": {"replies": [{"text": "Looking at pricing-svc."}], "final": "pricing-svc."}}"#;

pub async fn run(bench: InterruptBench) -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join(format!("inquest-bench-interrupt-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("script.json"), SCRIPT)?;
    let config = dir.join("inquest.toml");
    std::fs::write(
        &config,
        format!(
            "[lease]\nttl = \"30s\"\nreap_interval = \"200ms\"\n\n[store]\nmax_connections = 4\n\n\
             [[providers]]\nkind = \"script\"\nname = \"slow-script\"\nscript = \"{}\"\n",
            dir.join("script.json").display()
        ),
    )?;
    let a = Replica::start(&bench.url, &config, "bench-a", None).await?;
    let b = Replica::start(&bench.url, &config, "bench-b", None).await?;
    let result = measure(&bench, [&a, &b]).await;
    a.stop()?;
    b.stop()?;
    let _ = std::fs::remove_dir_all(&dir);
    result
}

async fn measure(bench: &InterruptBench, replicas: [&Replica; 2]) -> anyhow::Result<()> {
    let mut clients: Vec<Client> = Vec::new();
    for r in replicas {
        clients.push(InvestigationsClient::connect(r.endpoint.clone()).await?);
    }
    let (db, connection) = tokio_postgres::connect(&bench.url, tokio_postgres::NoTls).await?;
    let connection = tokio::spawn(connection);
    // [same replica, other replica]
    let mut stopped: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
    for i in 0..bench.samples * 2 {
        let target = i % 2;
        // Replica 0 stores the first message and claims its burst at once.
        let id = new_session(&mut clients[0]).await?;
        until(&mut clients[0], &id, |s| s == pb::SessionStatus::Running).await?;
        // The model call is in flight.
        tokio::time::sleep(Duration::from_millis(20)).await;
        let sent = SystemTime::now();
        let answer = clients[target]
            .send_message(pb::SendMessageRequest {
                session_id: id.clone(),
                message: "Not the DB: pricing-svc.".into(),
                idempotency_key: String::new(),
                if_running: pb::IfRunning::Interrupt.into(),
            })
            .await
            .context("SendMessage INTERRUPT")?
            .into_inner();
        anyhow::ensure!(answer.queued, "the interrupt was not queued: {answer:?}");
        let reported = report_time(&db, &id).await?;
        let sent_unix = sent.duration_since(SystemTime::UNIX_EPOCH)?.as_secs_f64();
        let reported_unix = reported.unix_timestamp_nanos() as f64 / 1e9;
        stopped[target].push(Duration::from_secs_f64(
            (reported_unix - sent_unix).max(0.0),
        ));
        // The message's burst runs to its end before the next sample.
        until(&mut clients[0], &id, |s| {
            !matches!(s, pb::SessionStatus::Pending | pb::SessionStatus::Running)
        })
        .await?;
    }
    connection.abort();
    println!(
        "SendMessage INTERRUPT sent → interrupted burst's report stored ({} interrupts per \
         replica; a model call in flight; lease ttl 30 s, renewals every 10 s)",
        bench.samples
    );
    for (name, times) in ["same replica ", "other replica"].iter().zip(&mut stopped) {
        times.sort();
        println!(
            "  {name}: p50 {:.1} ms  p90 {:.1} ms  max {:.1} ms",
            ms(pick(times, 0.5)),
            ms(pick(times, 0.9)),
            ms(times.last().copied().unwrap_or_default())
        );
    }
    Ok(())
}

/// Polls until the session's status satisfies `done`.
async fn until(
    client: &mut Client,
    id: &str,
    done: impl Fn(pb::SessionStatus) -> bool,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = client
            .get_session(pb::GetSessionRequest {
                session_id: id.to_owned(),
            })
            .await?
            .into_inner();
        if done(s.status()) {
            return Ok(());
        }
        anyhow::ensure!(Instant::now() < deadline, "session {id} never got there");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Waits for the report of the session's first burst; when it was stored.
async fn report_time(
    db: &tokio_postgres::Client,
    session: &str,
) -> anyhow::Result<time::OffsetDateTime> {
    let id: uuid::Uuid = session.parse()?;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let row = db
            .query_opt(
                "SELECT created_at, exit_reason FROM reports WHERE session_id = $1 AND burst = 1",
                &[&id],
            )
            .await?;
        if let Some(row) = row {
            let reason: String = row.get(1);
            anyhow::ensure!(
                reason == "interrupted_by_user",
                "burst 1 of {session} ended {reason}"
            );
            return Ok(row.get(0));
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "burst 1 of {session} never stopped"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}
