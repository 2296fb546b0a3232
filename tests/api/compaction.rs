//! Investigations larger than the model's context window: the
//! fake provider is given a window and answers the provider's standard
//! "too long" error over it; the real loop budgets, cuts tool results in
//! the transcript and compacts, through the real API and store.

use std::path::PathBuf;

use inquest_proto::v1::{self as pb, watch_event::Event};
use inquest_server::Config;
use inquest_testkit::fake::{FakeProvider, FakeReply, Flavor, fake_tokens, is_compaction_request};
use inquest_tests::{
    spawn_app_with,
    watching::{collect, watch},
};

use crate::agent_support::{finished, provider, send, start, turns};

/// A fresh directory of evidence files: `file_{i}.log` of about `bytes`
/// bytes each, every line naming its file.
fn evidence(count: usize, bytes: usize) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("inquest-compaction-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    for i in 0..count {
        let line =
            format!("file {i:02}: 2026-12-01T10:00:00Z checkout p99=2500ms pool=exhausted\n");
        let text = line.repeat(bytes / line.len() + 1);
        std::fs::write(dir.join(format!("file_{i:02}.log")), &text[..bytes]).unwrap();
    }
    dir
}

fn read(i: usize) -> String {
    format!("{{\"path\": \"file_{i:02}.log\"}}")
}

/// Serves `dir` with the built-in file tools, as server `evidence`.
fn files(config: &mut Config, dir: PathBuf) {
    config.tools.files_root = Some(dir);
    config.tools.files_server = Some("evidence".into());
    config.agent.max_model_calls_per_burst = 100;
    config.agent.iteration_budget = 200;
}

/// Every request the fake accepted fits its window.
fn assert_all_fit(fake: &FakeProvider, window: u64, from: usize) {
    for (i, r) in fake.requests().iter().enumerate().skip(from) {
        let tokens = fake_tokens(r.body.to_string().len());
        assert!(
            tokens <= window || i < from,
            "request {i} holds {tokens} tokens, over the {window}-token window"
        );
    }
}

/// Stored tool results: (call id, content).
fn results(stored: &[pb::SessionTurn]) -> Vec<(String, String)> {
    stored
        .iter()
        .filter(|t| t.role() == pb::TurnRole::Tool)
        .map(|t| (t.tool_call_id.clone(), t.content.clone()))
        .collect()
}

/// 40 tool results of 8 KB each through a 32k-token window: the provider
/// entry claims a larger window, so the first request past 32k is refused
/// once; the loop learns the limit, compacts, and goes on. Every call runs
/// exactly once, the burst completes, a watcher sees the compaction turns
/// like any other, every stored turn stays listed, and a follow-up's
/// requests all fit.
#[tokio::test]
async fn forty_8kb_results_through_a_32k_window_complete_and_follow_up_fits() {
    const WINDOW: u64 = 32_768;
    let fake = FakeProvider::start(Flavor::OpenAi)
        .await
        .unwrap()
        .with_context_window(WINDOW);
    for i in 0..40 {
        fake.reply(FakeReply::default().call(&format!("c{i}"), "read_file", &read(i)));
    }
    fake.reply(FakeReply::text(
        "The pool was exhausted; every file says so.",
    ));
    let dir = evidence(41, 8 * 1024);
    let mut entry = provider(&fake, Flavor::OpenAi, "fake");
    // Claims more than the fake holds: the real limit is learned.
    entry.context_window = Some(131_072);
    let app = spawn_app_with(|c| {
        c.providers = vec![entry];
        files(c, dir.clone());
    })
    .await;
    let mut client = app.client().await;
    let id = start(&mut client, "checkout p99 is 2.5s; read every log").await;
    let stream = watch(&mut client, &id, 0).await.unwrap();
    let (report, s) = finished(&mut client, &id, 1).await;
    assert_eq!(report.exit_reason, "completed", "{s:?}");
    let (events, ending) = collect(stream).await;
    ending.expect("the watch ends cleanly with the burst");

    let stored = turns(&mut client, &id).await;
    // Every call ran exactly once: 40 results, one per call id, each the
    // content of its own file.
    let results = results(&stored);
    assert_eq!(results.len(), 40);
    for (i, (call_id, content)) in results.iter().enumerate() {
        assert_eq!(call_id, &format!("c{i}"));
        assert!(content.contains(&format!("file {i:02}:")), "result {i}");
    }
    let compactions: Vec<&pb::SessionTurn> = stored
        .iter()
        .filter(|t| t.role() == pb::TurnRole::Compaction)
        .collect();
    assert!(!compactions.is_empty(), "no compaction happened");
    for c in &compactions {
        let info = c.compaction.as_ref().expect("a compaction record");
        assert!(info.first_retained_seq <= c.seq && info.first_retained_seq > 1);
        assert!(info.tokens_after < info.tokens_before, "{info:?}");
        assert!(c.content.starts_with("Summary"), "{}", c.content);
        assert!(c.tool_calls.is_empty());
    }
    // Exactly one refusal: the first request past the real window; then
    // the learned limit keeps every request within it.
    assert_eq!(fake.too_long_count(), 1, "refused requests");
    assert_eq!(fake.summary_count(), compactions.len());
    // The watcher saw every stored turn, compactions included.
    let watched: Vec<&pb::SessionTurn> = events
        .iter()
        .filter_map(|e| match e {
            Event::Turn(t) => Some(t),
            _ => None,
        })
        .collect();
    assert_eq!(watched.len(), stored.len());
    assert!(watched.iter().any(|t| t.role() == pb::TurnRole::Compaction));

    // A follow-up starts from the latest compaction and every request fits.
    let refused = fake.too_long_count();
    let before = fake.request_count();
    fake.reply(FakeReply::default().call("f1", "read_file", &read(40)));
    fake.reply(FakeReply::text("Still the pool."));
    send(&mut client, &id, "and the last file?").await;
    let (report, _) = finished(&mut client, &id, 2).await;
    assert_eq!(report.exit_reason, "awaiting_user");
    // The follow-up read only from the latest compaction (item 6), yet its
    // counters span the whole session: 40 calls before, one now.
    assert_eq!(report.tool_calls, 41, "{report:?}");
    let after = turns(&mut client, &id).await;
    let new_call = after
        .iter()
        .rev()
        .find(|t| t.role() == pb::TurnRole::Tool)
        .unwrap();
    assert!(
        new_call.tool_call_id.starts_with("inq_"),
        "a partial read gives new calls generated ids: {}",
        new_call.tool_call_id
    );
    assert!(new_call.content.contains("file 40:"));
    assert_eq!(
        fake.too_long_count(),
        refused,
        "a follow-up request was refused"
    );
    assert_all_fit(&fake, WINDOW, before);
    let first = &fake.requests()[before];
    let messages = first.body["messages"].as_array().unwrap();
    let text = first.body.to_string();
    assert!(
        text.contains("Summary by inquest"),
        "the follow-up starts from the summary"
    );
    assert!(
        messages.len() < stored.len() / 2,
        "the follow-up sent {} messages for {} stored turns",
        messages.len(),
        stored.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A single 500 KB tool result through a 16k window: stored whole (the
/// cap is raised so it is), shown to the model cut at a line boundary with
/// a marker saying how to ask for less, and the burst completes with no
/// request refused.
#[tokio::test]
async fn a_500kb_result_through_a_16k_window_completes() {
    const WINDOW: u64 = 16_384;
    let fake = FakeProvider::start(Flavor::Anthropic)
        .await
        .unwrap()
        .with_context_window(WINDOW);
    fake.reply(FakeReply::default().call(
        "big",
        "read_file",
        r#"{"path": "file_00.log", "max_lines": 100000}"#,
    ));
    fake.reply(FakeReply::text("The big log says the pool was exhausted."));
    let dir = evidence(1, 500 * 1024);
    let mut entry = provider(&fake, Flavor::Anthropic, "fake");
    entry.context_window = Some(WINDOW);
    let app = spawn_app_with(|c| {
        c.providers = vec![entry];
        files(c, dir.clone());
        c.limits.max_tool_result_bytes = 600 * 1024;
    })
    .await;
    let mut client = app.client().await;
    let id = start(&mut client, "read the big log").await;
    let (report, s) = finished(&mut client, &id, 1).await;
    assert_eq!(report.exit_reason, "completed", "{s:?}");
    let stored = turns(&mut client, &id).await;
    let results = results(&stored);
    assert_eq!(results.len(), 1);
    assert!(
        results[0].1.len() >= 500 * 1024,
        "the stored turn keeps the whole result"
    );
    assert_eq!(fake.too_long_count(), 0);
    assert_all_fit(&fake, WINDOW, 0);
    let second = fake.requests()[1].body.to_string();
    assert!(
        second.contains("limits.tool_result_window_share") && second.contains("asking for less"),
        "the transcript's cut says how to ask for less"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The no-progress rail counts bad tool calls across a compaction: one
/// strike before it, two after, and the burst ends `no_progress`.
#[tokio::test]
async fn the_no_progress_rail_trips_across_a_compaction() {
    const WINDOW: u64 = 16_384;
    let fake = FakeProvider::start(Flavor::OpenAi)
        .await
        .unwrap()
        .with_context_window(WINDOW);
    fake.reply(FakeReply::default().call("bad1", "no_such_tool", "{}"));
    for i in 0..8 {
        fake.reply(FakeReply::default().call(&format!("r{i}"), "read_file", &read(i)));
    }
    fake.reply(FakeReply::default().call("bad2", "no_such_tool", "{}"));
    fake.reply(FakeReply::default().call("bad3", "no_such_tool", "{}"));
    fake.reply(FakeReply::text("never reached"));
    let dir = evidence(8, 8 * 1024);
    let mut entry = provider(&fake, Flavor::OpenAi, "fake");
    entry.context_window = Some(WINDOW);
    let app = spawn_app_with(|c| {
        c.providers = vec![entry];
        files(c, dir.clone());
    })
    .await;
    let mut client = app.client().await;
    let id = start(&mut client, "look around").await;
    let (report, _) = finished(&mut client, &id, 1).await;
    assert_eq!(report.exit_reason, "no_progress");
    let stored = turns(&mut client, &id).await;
    let seq_of = |call: &str| {
        stored
            .iter()
            .find(|t| t.tool_call_id == call)
            .map(|t| t.seq)
            .unwrap()
    };
    let compaction = stored
        .iter()
        .find(|t| t.role() == pb::TurnRole::Compaction)
        .expect("a compaction between the strikes");
    assert!(seq_of("bad1") < compaction.seq && compaction.seq < seq_of("bad2"));
    assert!(stored.iter().any(|t| t.tool_call_id == "bad3"));
    assert!(
        fake.requests()
            .iter()
            .any(|r| is_compaction_request(&r.body))
    );
    let _ = std::fs::remove_dir_all(&dir);
}
