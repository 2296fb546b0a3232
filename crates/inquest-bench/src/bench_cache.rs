//! `inquest-bench cache`: how much of each model request repeats the
//! previous one byte for byte, which is what a provider's prompt cache can
//! serve.
//!
//! A real investigation of `calls` tool calls runs through the real agent
//! loop, persisted in PostgreSQL through the server's `TurnLog` as the
//! runner does: the first burst makes `calls - follow_up_calls` calls, its
//! report is authored and it closes; a follow-up message resumes the
//! session from its stored turns (as `SendMessage` does) for the remaining
//! calls. The tool is real: the built-in `read_file` over a generated
//! application log, each call reading a different window of it. The model
//! is the fake provider (a real HTTP server) behind the real adapter of
//! each wire format, so the bytes measured are the bytes the adapter sends.
//!
//! For every request of the tool loop, the prompt is taken in the
//! provider's cache order (`inquest_testkit::fake::cache`: tools, system,
//! then messages; `cache_control` markers left out, since they mark where a
//! cached prefix ends and are not part of it), and compared with the
//! previous loop request's: the byte-identical prefix over the request's
//! size is its share. The first request of the follow-up is compared with
//! the last loop request of the first burst, so a resume that rebuilt
//! different bytes from the stored turns would show here. Author calls
//! (different system prompt, no tools) are reported apart. The fake also
//! reports usage the way a caching provider would (cache reads = the
//! repeated prefix up to the last breakpoint, about 4 bytes a token), which
//! goes through the adapters' usage parsing into the stored turns: the
//! session's cached share is printed from `GetSession`'s counters, with its
//! cost at a sample price.

use std::{sync::Arc, time::Duration};

use anyhow::Context;
use inquest_agent::{
    Agent, AgentConfig, FileTools, ProviderChain, ProviderConfig, ProviderKind, Stop,
    report::AUTHOR_SYSTEM,
};
use inquest_broadcast::TurnBroadcaster;
use inquest_core::{ExitReason, IncidentText, Limits, Price, UserMessage};
use inquest_server::TurnLog;
use inquest_store::{SendOutcome, Store, StoreConfig};
use inquest_testkit::fake::{Behaviour, FakeProvider, FakeReply, Flavor, Recorded};

pub struct CacheBench {
    pub url: String,
    /// Tool calls over the whole investigation.
    pub calls: u32,
    /// Of those, made by the follow-up burst (after a resume).
    pub follow_up_calls: u32,
    /// Lines each `read_file` call returns.
    pub lines_per_call: u32,
}

/// A sample price (USD per million tokens) to show what caching saves.
const SAMPLE_PRICE: Price = Price {
    input_per_mtok: 3.0,
    output_per_mtok: 15.0,
    cached_input_per_mtok: Some(0.3),
    cache_write_per_mtok: Some(3.75),
};

pub async fn run(bench: CacheBench) -> anyhow::Result<()> {
    anyhow::ensure!(
        bench.follow_up_calls < bench.calls,
        "--follow-up-calls must be below --calls"
    );
    let store = Store::connect(&StoreConfig::new(&bench.url))?;
    store.migrate().await?;
    let log = TurnLog::new(store.clone(), TurnBroadcaster::new(1024));
    let evidence = std::env::temp_dir().join(format!("inquest-bench-cache-{}", std::process::id()));
    std::fs::create_dir_all(&evidence)?;
    let lines = (bench.calls + 1) * bench.lines_per_call;
    let app_log: String = (1..=lines)
        .map(|i| {
            format!(
                "2026-11-30T10:{:02}:{:02}.{:03}Z INFO checkout request_id=req-{i:06} \
                 upstream=payments latency_ms={} pool_in_use={}/50\n",
                (i / 60) % 60,
                i % 60,
                i % 1000,
                40 + (i * 37) % 900,
                (i * 7) % 51
            )
        })
        .collect();
    std::fs::write(evidence.join("app.log"), app_log)?;
    println!(
        "prompt-cache prefix share: {} tool calls ({} in the first burst, {} after a resume), \
         read_file of {} lines each",
        bench.calls,
        bench.calls - bench.follow_up_calls,
        bench.follow_up_calls,
        bench.lines_per_call
    );
    let mut result = Ok(());
    for flavor in [Flavor::Anthropic, Flavor::OpenAi] {
        result = one_flavor(&bench, &store, &log, &evidence, flavor).await;
        if result.is_err() {
            break;
        }
    }
    let _ = std::fs::remove_dir_all(&evidence);
    result
}

async fn one_flavor(
    bench: &CacheBench,
    store: &Store,
    log: &TurnLog,
    evidence: &std::path::Path,
    flavor: Flavor,
) -> anyhow::Result<()> {
    let fake = FakeProvider::start(flavor).await?;
    fake.estimate_usage();
    let kind = match flavor {
        Flavor::Anthropic => ProviderKind::Anthropic,
        Flavor::OpenAi => ProviderKind::OpenAi,
    };
    let mut config = ProviderConfig::new(kind);
    config.model = Some("bench-model".into());
    config.base_url = Some(fake.base_url());
    config.api_key_env = Some("INQUEST_BENCH_KEY".into());
    config.max_retries = Some(0);
    config.price = Some(SAMPLE_PRICE);
    let chain = ProviderChain::from_config_with_env(&[config], |_| Some("bench-key".into()))?;
    let agent = Agent::new(
        Arc::new(chain),
        Arc::new(FileTools::new("files", evidence)),
        AgentConfig {
            max_model_calls_per_burst: bench.calls + 1,
            iteration_budget: 2 * bench.calls + 4,
            ..AgentConfig::default()
        },
        Vec::new(),
    );
    let first_calls = bench.calls - bench.follow_up_calls;
    let script = |from: u32, to: u32| {
        for i in from..to {
            let start = 1 + i * bench.lines_per_call;
            fake.reply(
                FakeReply::text(&format!("Reading window {i} of the checkout log.")).call(
                    &format!("toolu_{i}"),
                    "read_file",
                    &format!(
                        r#"{{"path": "app.log", "start_line": {start}, "max_lines": {}}}"#,
                        bench.lines_per_call
                    ),
                ),
            );
        }
        fake.reply(FakeReply::text(
            "The payments upstream saturates the pool; latency follows.",
        ));
        fake.push(Behaviour::Reply(FakeReply::text(
            "Report: pool exhaustion at the payments upstream.",
        )));
    };
    let limits = Limits::default();
    let incident = store
        .create_incident(
            &inquest_core::Tenant::default_tenant(),
            &IncidentText::parse("bench cache".into(), String::new(), &limits)?,
        )
        .await?;
    let session = log
        .start_session(
            &inquest_core::Tenant::default_tenant(),
            inquest_core::TenantQuota::UNLIMITED,
            incident.id,
            UserMessage::parse("Checkout is slow since 10:00. Why?".into(), &limits)?,
            None,
        )
        .await?
        .session
        .id;
    script(0, first_calls);
    burst(&agent, log, store, session).await?;
    let sent = log
        .send_message(
            &inquest_core::Tenant::default_tenant(),
            inquest_core::TenantQuota::UNLIMITED,
            session,
            UserMessage::parse("Look further into the log.".into(), &limits)?,
            None,
            None,
        )
        .await?;
    anyhow::ensure!(
        matches!(sent, SendOutcome::Sent { .. }),
        "the follow-up was refused: {sent:?}"
    );
    script(first_calls, bench.calls);
    burst(&agent, log, store, session).await?;

    let requests = fake.requests();
    let (authors, tool_loop): (Vec<&Recorded>, Vec<&Recorded>) =
        requests.iter().partition(|r| is_author(flavor, r));
    let mut shares = Vec::new();
    let (mut shared_total, mut bytes_total) = (0usize, 0usize);
    let mut resume_share = None;
    let resume_at = usize::try_from(first_calls)? + 1;
    for (i, pair) in tool_loop.windows(2).enumerate() {
        let (previous, current) = (&pair[0].prompt, &pair[1].prompt);
        let shared = current.shared_prefix(previous);
        let share = shared as f64 / current.text.len().max(1) as f64;
        if i + 1 == resume_at {
            // Of the previous request, how much the resumed one repeats:
            // 100% unless the rebuild from stored turns changed a byte.
            resume_share = Some(shared as f64 / previous.text.len().max(1) as f64);
        }
        shares.push(share);
        shared_total += shared;
        bytes_total += current.text.len();
    }
    let n = shares.len().max(1) as f64;
    let mean = shares.iter().sum::<f64>() / n;
    let min = shares.iter().copied().fold(f64::INFINITY, f64::min);
    let last = shares.last().copied().unwrap_or(0.0);
    let row = store.get_session(session).await?;
    let cached = row.cache_read_input_tokens as f64 / row.input_tokens.max(1) as f64;
    let uncached_cost = SAMPLE_PRICE.cost(&inquest_core::TokenUsage::new(
        row.input_tokens,
        row.output_tokens,
    ));
    println!(
        "\n{:?}: {} loop requests (+{} author calls), breakpoints on the last loop request: {:?}",
        flavor,
        tool_loop.len(),
        authors.len(),
        tool_loop
            .last()
            .map(|r| r.cache_breakpoints.clone())
            .unwrap_or_default()
    );
    println!(
        "  byte-identical prefix of the previous loop request: mean {:.1}% per request \
         (min {:.1}%, last {:.1}%), {:.1}% of all loop-request bytes",
        100.0 * mean,
        100.0 * min,
        100.0 * last,
        100.0 * shared_total as f64 / bytes_total.max(1) as f64
    );
    println!(
        "  first request after the resume (rebuilt from PostgreSQL): repeats {:.2}% of the first \
         burst's last loop request",
        100.0 * resume_share.unwrap_or(0.0)
    );
    println!(
        "  stored turns (fake's caching usage, through the adapter and V13 counters): {} input \
         tokens, {:.1}% cache reads, {} cache writes; cost {} at $3/$15/$0.30/$3.75 per Mtok \
         (without caching: ${:.4})",
        row.input_tokens,
        100.0 * cached,
        row.cache_creation_input_tokens,
        if row.cost.complete() {
            format!("${:.4}", row.cost.known.usd())
        } else {
            "unknown".to_owned()
        },
        uncached_cost.usd()
    );
    fake.stop().await;
    Ok(())
}

/// The report author's call: its own system prompt, no tools.
fn is_author(flavor: Flavor, request: &Recorded) -> bool {
    let system = match flavor {
        Flavor::Anthropic => request.body["system"][0]["text"].as_str(),
        Flavor::OpenAi => request.body["messages"][0]["content"].as_str(),
    };
    system == Some(AUTHOR_SYSTEM) || request.body.get("tools").is_none()
}

/// Claims the pending session, runs one burst from its stored turns and
/// closes it, as the runner does.
async fn burst(
    agent: &Agent,
    log: &TurnLog,
    store: &Store,
    session: inquest_core::SessionId,
) -> anyhow::Result<()> {
    let (burst, _cancel) = log
        .claim_burst(session)
        .await?
        .context("the session is pending")?;
    let stored = store.all_turns(session).await?;
    let report = tokio::time::timeout(
        Duration::from_secs(300),
        agent.run_burst(&burst, session, stored, &Stop::default()),
    )
    .await
    .context("the burst did not end within 300 s")?;
    anyhow::ensure!(
        matches!(
            report.exit_reason,
            ExitReason::Completed | ExitReason::AwaitingUser
        ),
        "a bench burst ended with {}",
        report.exit_reason
    );
    burst.close(report.exit_reason).await?;
    Ok(())
}
