//! `inquest-bench approval`: from a human's decision to the approved tool
//! call starting, on another replica than the one that held it.
//!
//! Two replicas as real child processes (this binary's `serve`) on one
//! database run the example investigation (scripted model, built-in file
//! tools) with `[approval] mode = "all"`, so every tool call is held. For
//! each hold the bench sends `DecideToolCalls` (approve) to the replica
//! that did not run the burst that held it; that replica claims the burst
//! and runs the approved call. The call's `approvals.started_at` is set in
//! the store right before it is sent to its tool (fenced, in the same
//! code path as the start), so "decision → start" is read from the store:
//! `started_at − decided_at` (both the database's clock: the decision's
//! transaction start and the start mark), and `started_at` against the
//! client's send time (same host, wall clocks).

use std::time::{Duration, Instant, SystemTime};

use anyhow::Context;
use inquest_proto::v1::{self as pb, investigations_client::InvestigationsClient};
use tonic::transport::Channel;

use crate::bench_replicas::{Replica, ms, new_session, pick};

type Client = InvestigationsClient<Channel>;

pub struct ApprovalBench {
    pub url: String,
    /// Decisions to time.
    pub samples: usize,
}

pub async fn run(bench: ApprovalBench) -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join(format!("inquest-bench-approval-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let config = crate::bench_replicas::replica_config(&dir, Duration::from_secs(2))?;
    let mut text = std::fs::read_to_string(&config)?;
    text.push_str("\n[approval]\nmode = \"all\"\n");
    std::fs::write(&config, text)?;
    let a = Replica::start(&bench.url, &config, "bench-a", None).await?;
    let b = Replica::start(&bench.url, &config, "bench-b", None).await?;
    let result = measure(&bench, [&a, &b]).await;
    a.stop()?;
    b.stop()?;
    result
}

async fn measure(bench: &ApprovalBench, replicas: [&Replica; 2]) -> anyhow::Result<()> {
    let mut clients: Vec<Client> = Vec::new();
    for r in replicas {
        clients.push(InvestigationsClient::connect(r.endpoint.clone()).await?);
    }
    let (db, connection) = tokio_postgres::connect(&bench.url, tokio_postgres::NoTls).await?;
    let connection = tokio::spawn(connection);
    let (mut in_db, mut from_client) = (Vec::new(), Vec::new());
    while in_db.len() < bench.samples {
        // Each session starts on replica 0, which runs its first burst.
        let id = new_session(&mut clients[0]).await?;
        let mut runner = 0usize;
        loop {
            let s = settled(&mut clients[0], &id).await?;
            if s.status() != pb::SessionStatus::AwaitingApproval {
                break;
            }
            let other = 1 - runner;
            let pending: Vec<String> = s
                .approvals
                .iter()
                .filter(|a| a.state() == pb::ApprovalState::Pending)
                .map(|a| a.call_id.clone())
                .collect();
            let sent = SystemTime::now();
            clients[other]
                .decide_tool_calls(pb::DecideToolCallsRequest {
                    session_id: id.clone(),
                    decisions: pending
                        .iter()
                        .map(|c| pb::ToolCallDecision {
                            call_id: c.clone(),
                            verdict: pb::ToolCallVerdict::Approve.into(),
                            comment: String::new(),
                        })
                        .collect(),
                    idempotency_key: String::new(),
                })
                .await
                .context("DecideToolCalls")?;
            // The first approved call's start mark: the decision's latency.
            let first = pending.first().context("a hold with nothing pending")?;
            let (decided, started) = start_mark(&db, &id, first).await?;
            let since_decided = started - decided;
            in_db.push(Duration::from_secs_f64(
                since_decided.as_seconds_f64().max(0.0),
            ));
            let sent_unix = sent.duration_since(SystemTime::UNIX_EPOCH)?.as_secs_f64();
            let started_unix = started.unix_timestamp_nanos() as f64 / 1e9;
            from_client.push(Duration::from_secs_f64((started_unix - sent_unix).max(0.0)));
            runner = other;
        }
    }
    connection.abort();
    in_db.sort();
    from_client.sort();
    println!(
        "decision → approved call started, on the other replica ({} decisions; lease ttl 2 s, \
         reap interval 200 ms)",
        in_db.len()
    );
    println!(
        "  decided_at → started_at (database clock): p50 {:.1} ms  p90 {:.1} ms  max {:.1} ms",
        ms(pick(&in_db, 0.5)),
        ms(pick(&in_db, 0.9)),
        ms(in_db.last().copied().unwrap_or_default())
    );
    println!(
        "  DecideToolCalls sent → started_at (wall clock): p50 {:.1} ms  p90 {:.1} ms  max {:.1} ms",
        ms(pick(&from_client, 0.5)),
        ms(pick(&from_client, 0.9)),
        ms(from_client.last().copied().unwrap_or_default())
    );
    Ok(())
}

/// Polls until the session is neither pending nor running.
async fn settled(client: &mut Client, id: &str) -> anyhow::Result<pb::Session> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let s = client
            .get_session(pb::GetSessionRequest {
                session_id: id.to_owned(),
            })
            .await?
            .into_inner();
        if !matches!(
            s.status(),
            pb::SessionStatus::Pending | pb::SessionStatus::Running
        ) {
            return Ok(s);
        }
        anyhow::ensure!(Instant::now() < deadline, "session {id} never settled");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Waits for the call's start mark; its decision time and start time.
async fn start_mark(
    db: &tokio_postgres::Client,
    session: &str,
    call: &str,
) -> anyhow::Result<(time::OffsetDateTime, time::OffsetDateTime)> {
    let id: uuid::Uuid = session.parse()?;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let row = db
            .query_one(
                "SELECT decided_at, started_at FROM approvals WHERE session_id = $1 AND call_id = $2",
                &[&id, &call],
            )
            .await?;
        let decided: Option<time::OffsetDateTime> = row.get(0);
        let started: Option<time::OffsetDateTime> = row.get(1);
        if let (Some(d), Some(s)) = (decided, started) {
            return Ok((d, s));
        }
        anyhow::ensure!(Instant::now() < deadline, "call {call} never started");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
