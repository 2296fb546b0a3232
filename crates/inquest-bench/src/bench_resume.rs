//! `inquest-bench resume`: what resuming a session costs.
//!
//! 1. `rebuild_messages` over 1k, 10k and 100k stored turns, in process
//!    (pure; per-turn time shows whether it is linear), with
//!    `plan_resume_rebuilt` alongside (what the runner computes per
//!    follow-up: two classifications and one rebuild, shared with the
//!    agent), each side by side with the code it replaced (the core's
//!    test reference, `inquest-core/tests/support/reference.rs`).
//! 2. A whole `SendMessage` resume of a long finished session on a real
//!    server (in process, real PostgreSQL, real gRPC): from the moment the
//!    client sends `SendMessage` to the moment the model provider (a local
//!    fake speaking the OpenAI wire format) has the whole request. Covers
//!    the user-turn write, claim, loading every turn, validation, the
//!    recovery plan and its storage, restore, rebuild, and building and
//!    sending the request. The provider's window is set far beyond the
//!    session (`context_window`), so no follow-up compacts and the
//!    uncompacted session stays a whole-history read.
//! 3. The same resume of sessions of 10k and 100k stored turns whose
//!    latest turn is a compaction keeping the last 40 turns: the read, the
//!    plan and the rebuild start from it.

use std::time::{Duration, Instant};

use anyhow::Context;
use inquest_core::{
    IncidentText, Limits, Role, Seq, SessionId, TokenUsage, ToolArguments, ToolCall, Turn,
    plan_resume_rebuilt, rebuild_messages,
};
use inquest_proto::v1::{self as pb, investigations_client::InvestigationsClient};
use inquest_server::{Application, Config, Overrides};
use inquest_store::Store;
use time::OffsetDateTime;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpListener,
    sync::mpsc,
};
use tokio_util::sync::CancellationToken;

pub struct ResumeBench {
    pub url: String,
    pub sizes: Vec<usize>,
    pub session_turns: usize,
    /// Sizes of sessions with a compaction at the head.
    pub compacted_turns: Vec<usize>,
    pub iterations: usize,
}

/// Turns a compacted bench session keeps verbatim after its summary.
const COMPACTED_KEEP: i64 = 40;

pub async fn run(bench: ResumeBench) -> anyhow::Result<()> {
    println!(
        "rebuild_messages (pure, in process; median of runs), side by side with the \
         reference (the owned rebuild and two-plan resume it replaced)"
    );
    println!(
        "{:>8} {:>11} {:>9} {:>11} {:>7} {:>12} {:>12} {:>7}",
        "turns", "rebuild", "per turn", "reference", "ratio", "plan_resume", "reference", "ratio"
    );
    for &n in &bench.sizes {
        let turns = synthetic(n);
        let runs = if n >= 100_000 { 11 } else { 31 };
        let rebuild = median(runs, || {
            std::hint::black_box(rebuild_messages(std::hint::black_box(&turns)));
        });
        let old_rebuild = median(runs, || {
            std::hint::black_box(reference::rebuild_messages(std::hint::black_box(&turns)));
        });
        let session = turns.first().map(|t| t.session_id).unwrap_or_default();
        let classes = |_: &str| inquest_core::SideEffect::ReadOnly;
        // What a resume computes: the plan and the transcript it runs from.
        let plan = median(runs, || {
            std::hint::black_box(plan_resume_rebuilt(session, &turns, &classes));
        });
        let old_plan = median(runs, || {
            std::hint::black_box(reference::plan_resume(session, &turns, &classes));
        });
        let ratio = |new: Duration, old: Duration| old.as_secs_f64() / new.as_secs_f64().max(1e-9);
        println!(
            "{n:>8} {:>11} {:>6.0} ns {:>11} {:>6.1}x {:>12} {:>12} {:>6.1}x",
            ms(rebuild),
            rebuild.as_nanos() as f64 / n as f64,
            ms(old_rebuild),
            ratio(rebuild, old_rebuild),
            ms(plan),
            ms(old_plan),
            ratio(plan, old_plan)
        );
    }
    send_message_resume(&bench).await
}

/// The code the borrowed rebuild replaced, kept as the core's test
/// reference; measured side by side here.
#[allow(clippy::all)]
#[path = "../../inquest-core/tests/support/reference.rs"]
mod reference;

/// A finished session of `n` turns: user, then assistant + tool pairs,
/// a final answer; ~200-byte contents.
fn synthetic(n: usize) -> Vec<Turn> {
    let session = SessionId::new();
    let now = OffsetDateTime::now_utc();
    (1..=n)
        .map(|i| {
            let seq = Seq::from_stored(i as i64).unwrap_or(Seq::FIRST);
            let mut t = Turn {
                session_id: session,
                seq,
                role: Role::User,
                content: "x".repeat(200),
                tool_calls_raw: serde_json::json!([]),
                recovery_plan_raw: None,
                tool_call_id: None,
                tool_name: None,
                is_error: false,
                usage: TokenUsage::default(),
                created_at: now,
            };
            if i > 1 && i % 2 == 0 {
                t.role = Role::Assistant;
                if i < n {
                    t.tool_calls_raw = ToolCall::encode_all(&[ToolCall {
                        id: format!("c{i}"),
                        name: "read_file".into(),
                        arguments: ToolArguments::from_model(r#"{"path":"app.log"}"#),
                    }]);
                }
            } else if i > 1 {
                t.role = Role::Tool;
                t.tool_call_id = Some(format!("c{}", i - 1));
                t.tool_name = Some("read_file".into());
            }
            t
        })
        .collect()
}

fn median(runs: usize, mut f: impl FnMut()) -> Duration {
    f(); // warm up
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    times.sort();
    times.get(times.len() / 2).copied().unwrap_or_default()
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

/// A local OpenAI-speaking fake: answers every request with a short text
/// and sends the instant each request was fully received.
async fn fake_provider() -> anyhow::Result<(String, mpsc::UnboundedReceiver<Instant>)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let tx = tx.clone();
            tokio::spawn(async move {
                if read_request(&mut socket).await.is_some() {
                    let _ = tx.send(Instant::now());
                    let body = r#"{"id":"b","object":"chat.completion","model":"fake","choices":[{"index":0,"message":{"role":"assistant","content":"Nothing new."},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}"#;
                    let reply = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = socket.write_all(reply.as_bytes()).await;
                    let _ = socket.shutdown().await;
                }
            });
        }
    });
    Ok((format!("http://{addr}/v1"), rx))
}

/// Reads one HTTP/1.1 request (head and `content-length` body).
async fn read_request(socket: &mut tokio::net::TcpStream) -> Option<()> {
    let mut buf = Vec::with_capacity(1 << 16);
    let mut chunk = vec![0u8; 1 << 16];
    loop {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(chunk.get(..n)?);
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(buf.get(..end)?).to_ascii_lowercase();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        while buf.len() < end + 4 + length {
            let n = socket.read(&mut chunk).await.ok()?;
            if n == 0 {
                return None;
            }
            buf.extend_from_slice(chunk.get(..n)?);
        }
        return Some(());
    }
}

async fn send_message_resume(bench: &ResumeBench) -> anyhow::Result<()> {
    let (base_url, mut arrivals) = fake_provider().await?;
    let dir = std::env::temp_dir().join(format!("inquest-bench-resume-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let config_path = dir.join("inquest.toml");
    std::fs::write(
        &config_path,
        format!(
            "[[providers]]\nkind = \"openai\"\nmodel = \"fake\"\nbase_url = \"{base_url}\"\n\
             max_retries = 0\ncontext_window = 100000000\n"
        ),
    )?;
    let config = Config::load(
        Some(&config_path),
        Overrides {
            listen: Some("127.0.0.1:0".parse()?),
            database_url: Some(bench.url.clone()),
            data_dir: None,
            ..Overrides::default()
        },
    )?;
    let app = Application::build(&config, &bench.url).await?;
    let addr = app.local_addr()?;
    let shutdown = CancellationToken::new();
    let server = tokio::spawn(app.run(shutdown.clone()));
    let store = Store::connect(&config.store_config(&bench.url))?;
    let incident = store
        .create_incident(
            &inquest_core::Tenant::default_tenant(),
            &IncidentText::parse("bench resume".into(), String::new(), &Limits::default())?,
        )
        .await?;
    let n = (bench.session_turns / 2 * 2).max(2);
    let mut runs = vec![(format!("session of {n} stored turns"), n, false)];
    for &m in &bench.compacted_turns {
        let m = (m / 2 * 2).max(COMPACTED_KEEP as usize + 4);
        runs.push((
            format!(
                "session of {m} stored turns, compacted at the head (last {COMPACTED_KEEP} kept)"
            ),
            m,
            true,
        ));
    }
    let mut client = InvestigationsClient::connect(format!("http://{addr}")).await?;
    for (label, n, compacted) in runs {
        let session = SessionId::new();
        if compacted {
            store
                .insert_bench_compacted_session(incident.id, session, n as i64, COMPACTED_KEEP)
                .await
                .context("writing the long compacted session")?;
        } else {
            store
                .insert_bench_session(incident.id, session, n as i64)
                .await
                .context("writing the long session")?;
        }
        // Fresh statistics, as autovacuum would have after a long session.
        store.analyze_bench_tables().await?;
        let mut times = Vec::new();
        for i in 0..=bench.iterations {
            while arrivals.try_recv().is_ok() {}
            let start = Instant::now();
            client
                .send_message(pb::SendMessageRequest {
                    session_id: session.to_string(),
                    message: format!("follow-up {i}"),
                    idempotency_key: String::new(),
                    if_running: 0,
                })
                .await?;
            let arrived = tokio::time::timeout(Duration::from_secs(30), arrivals.recv())
                .await?
                .context("the fake provider stopped")?;
            if i > 0 {
                times.push(arrived - start); // the first run warms caches
            }
            settle(&mut client, session).await?;
        }
        times.sort();
        let pick = |q: f64| times.get(((times.len() as f64 * q) as usize).min(times.len() - 1));
        println!(
            "\nSendMessage -> first provider request, {label}, {} runs",
            times.len()
        );
        if let (Some(p50), Some(p90), Some(max)) = (pick(0.5), pick(0.9), times.last()) {
            println!("  p50 {}  p90 {}  max {}", ms(*p50), ms(*p90), ms(*max));
        }
    }
    shutdown.cancel();
    server.await??;
    let _ = std::fs::remove_dir_all(dir);
    Ok(())
}

async fn settle(
    client: &mut InvestigationsClient<tonic::transport::Channel>,
    session: SessionId,
) -> anyhow::Result<()> {
    for _ in 0..3000 {
        let s = client
            .get_session(pb::GetSessionRequest {
                session_id: session.to_string(),
            })
            .await?
            .into_inner();
        if !matches!(
            s.status(),
            pb::SessionStatus::Pending | pb::SessionStatus::Running
        ) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    anyhow::bail!("session {session} never settled")
}
