//! Every exit reason of a burst, reached through the real loop: the real
//! server over gRPC, a fresh PostgreSQL database, and model providers faked
//! over real HTTP (they reject an invalid transcript with a 400, as the
//! real APIs do). Each test checks the report (`GetReport`), the session
//! row (`GetSession`) and the stored transcript (`ListTurns`).

use std::time::Duration;

use inquest_agent::{McpSection, report::AUTHOR_PROMPT};
use inquest_broadcast::{Event, SubscriptionItem};
use inquest_core::SessionId;
use inquest_proto::v1 as pb;
use inquest_server::{Application, Config};
use inquest_testkit::fake::{Behaviour, FakeProvider, FakeReply, Flavor};
use inquest_tests::spawn_app_with;
use tokio_util::sync::CancellationToken;

use crate::agent_support::{
    CapturedLog, Gate, app_with_fake, assert_ended, assistant, eventually, evidence_tools,
    finished, provider, provider_at, report, send, session, shapes, start, tool_result_of, turns,
    user, without_notices,
};

const ASK: &str = "why is checkout slow?";

#[tokio::test]
async fn a_first_burst_whose_model_stops_calling_tools_completes() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(
        FakeReply::text("Listing the evidence.")
            .call("c1", "list_files", "{}")
            .usage(100, 10),
    )
    .reply(FakeReply::text("The DB pool is exhausted.").usage(200, 20))
    .reply(FakeReply::text("SUMMARY: pool exhausted").usage(50, 5));
    let app = app_with_fake(&fake, |_| {}).await;
    let mut client = app.client().await;
    let id = start(&mut client, ASK).await;

    let (report, s) = finished(&mut client, &id, 1).await;
    assert_eq!(report.burst, 1);
    assert_eq!(report.exit_reason, "completed");
    assert!(report.exit_is_terminal);
    assert_eq!(report.summary, "SUMMARY: pool exhausted");
    assert_eq!(report.tool_calls, 1);
    // The session's figures (its stored turns); the author call is this
    // burst's.
    assert_eq!((report.input_tokens, report.output_tokens), (300, 30));
    assert_eq!(
        (report.author_input_tokens, report.author_output_tokens),
        (50, 5)
    );
    assert_eq!(
        (report.burst_input_tokens, report.burst_output_tokens),
        (350, 35)
    );
    assert_eq!(report.burst_tool_calls, 1);
    assert_eq!(report.servers_used, ["evidence"]);
    assert_ended(&s, pb::SessionStatus::Completed, "completed");
    assert_eq!((s.turn_count, s.head_seq, s.tool_calls), (4, 4, 1));
    assert_eq!((s.input_tokens, s.output_tokens), (300, 30));

    let stored = turns(&mut client, &id).await;
    let got = shapes(&stored);
    assert_eq!(got[0], user(ASK));
    assert_eq!(
        got[1],
        assistant("Listing the evidence.", &[("c1", "list_files", "{}")])
    );
    assert_eq!(
        tool_result_of(&stored[2]),
        ("c1".into(), "list_files".into(), false)
    );
    assert!(
        stored[2].content.contains("deploys/deploys.log"),
        "{}",
        stored[2].content
    );
    assert_eq!(got[3], assistant("The DB pool is exhausted.", &[]));
    assert_eq!(stored.len(), 4);
    assert_eq!((stored[1].input_tokens, stored[1].output_tokens), (100, 10));

    // Two loop calls, then the author: no tools, the author prompt last.
    let requests = fake.requests();
    assert_eq!(requests.len(), 3);
    let author = &requests[2].body;
    assert!(author["tools"].as_array().is_none_or(Vec::is_empty));
    let last = author["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(last["content"], AUTHOR_PROMPT);
    app.stop().await.unwrap();
}

#[tokio::test]
async fn a_follow_up_whose_model_stops_awaits_the_user() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(FakeReply::text("Nothing found yet."))
        .reply(FakeReply::text("S1"))
        .reply(FakeReply::text("It was the deploy."))
        .reply(FakeReply::text("S2"));
    let app = app_with_fake(&fake, |_| {}).await;
    let mut client = app.client().await;
    let id = start(&mut client, ASK).await;
    let (first, _) = finished(&mut client, &id, 1).await;
    assert_eq!(first.exit_reason, "completed");

    assert_eq!(send(&mut client, &id, "and the deploy?").await, 3);
    let (second, s) = finished(&mut client, &id, 2).await;
    assert_eq!(second.burst, 2);
    assert_eq!(second.exit_reason, "awaiting_user");
    assert!(!second.exit_is_terminal);
    assert_eq!(second.summary, "S2");
    assert_ended(&s, pb::SessionStatus::Idle, "awaiting_user");
    // The first burst's report stays as it was.
    let kept = report(&mut client, &id, 1).await.unwrap();
    assert_eq!(
        (kept.exit_reason.as_str(), kept.summary.as_str()),
        ("completed", "S1")
    );

    assert_eq!(
        shapes(&turns(&mut client, &id).await),
        [
            user(ASK),
            assistant("Nothing found yet.", &[]),
            user("and the deploy?"),
            assistant("It was the deploy.", &[]),
        ]
    );
    app.stop().await.unwrap();
}

/// A model that never stops calling tools.
fn endless_tool_calls(fake: &FakeProvider, prefix: &str, n: usize) {
    for i in 1..=n {
        fake.reply(FakeReply::text(&format!("step {i}")).call(
            &format!("{prefix}{i}"),
            "list_files",
            "{}",
        ));
    }
}

#[tokio::test]
async fn the_session_iteration_budget_ends_a_burst_and_spans_bursts() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    endless_tool_calls(&fake, "c", 2);
    fake.reply(FakeReply::text("S1"));
    let app = app_with_fake(&fake, |c| c.agent.iteration_budget = 2).await;
    let mut client = app.client().await;
    let id = start(&mut client, ASK).await;

    let (report1, s) = finished(&mut client, &id, 1).await;
    assert_eq!(report1.exit_reason, "iteration_budget_exhausted");
    assert!(report1.exit_is_terminal);
    assert_eq!(report1.summary, "S1");
    assert_eq!(report1.tool_calls, 2);
    assert_ended(
        &s,
        pb::SessionStatus::Completed,
        "iteration_budget_exhausted",
    );
    let stored = turns(&mut client, &id).await;
    let got = shapes(&stored);
    assert_eq!(got.len(), 5);
    assert_eq!(got[1], assistant("step 1", &[("c1", "list_files", "{}")]));
    assert_eq!(got[3], assistant("step 2", &[("c2", "list_files", "{}")]));
    assert_eq!(
        tool_result_of(&stored[4]),
        ("c2".into(), "list_files".into(), false)
    );
    // Two loop calls and the author.
    assert_eq!(fake.request_count(), 3);

    // The budget is the session's: a follow-up burst has none left and
    // makes no loop call (only the author's).
    fake.reply(FakeReply::text("S2"));
    send(&mut client, &id, "keep going").await;
    let (report2, s) = finished(&mut client, &id, 2).await;
    assert_eq!(report2.exit_reason, "iteration_budget_exhausted");
    assert_eq!(report2.summary, "S2");
    assert_ended(
        &s,
        pb::SessionStatus::Completed,
        "iteration_budget_exhausted",
    );
    assert_eq!(fake.request_count(), 4);
    // One more turn, the follow-up (a resume notice aside: the model never
    // answered the last tool result).
    assert_eq!(without_notices(turns(&mut client, &id).await).len(), 6);
    app.stop().await.unwrap();
}

#[tokio::test]
async fn the_per_burst_cap_ends_a_burst_and_resets_at_the_next() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    endless_tool_calls(&fake, "c", 2);
    fake.reply(FakeReply::text("S1"));
    let app = app_with_fake(&fake, |c| c.agent.max_model_calls_per_burst = 2).await;
    let mut client = app.client().await;
    let id = start(&mut client, ASK).await;

    let (report1, s) = finished(&mut client, &id, 1).await;
    assert_eq!(report1.exit_reason, "burst_limit_reached");
    assert!(report1.exit_is_terminal);
    assert_eq!(report1.summary, "S1");
    assert_ended(&s, pb::SessionStatus::Completed, "burst_limit_reached");
    assert_eq!(turns(&mut client, &id).await.len(), 5);
    assert_eq!(fake.request_count(), 3);

    // A new burst gets a fresh cap: two more calls, the second final.
    fake.reply(FakeReply::text("one more").call("d1", "list_files", "{}"))
        .reply(FakeReply::text("Done."))
        .reply(FakeReply::text("S2"));
    send(&mut client, &id, "one more look").await;
    let (report2, s) = finished(&mut client, &id, 2).await;
    assert_eq!(report2.exit_reason, "awaiting_user");
    assert_ended(&s, pb::SessionStatus::Idle, "awaiting_user");
    let got = shapes(&without_notices(turns(&mut client, &id).await));
    assert_eq!(got.len(), 9);
    assert_eq!(got[8], assistant("Done.", &[]));
    app.stop().await.unwrap();
}

#[tokio::test]
async fn empty_replies_beyond_their_retries_end_with_no_progress() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(FakeReply::default())
        .reply(FakeReply::default())
        .reply(FakeReply::text("S: the model said nothing"));
    let app = app_with_fake(&fake, |c| c.agent.empty_reply_retries = 1).await;
    let mut client = app.client().await;
    let id = start(&mut client, ASK).await;

    let (report, s) = finished(&mut client, &id, 1).await;
    assert_eq!(report.exit_reason, "no_progress");
    assert!(report.exit_is_terminal);
    assert_eq!(report.summary, "S: the model said nothing");
    assert_ended(&s, pb::SessionStatus::Idle, "no_progress");
    // Empty replies are not turns.
    assert_eq!(shapes(&turns(&mut client, &id).await), [user(ASK)]);
    // One try, one retry, the author.
    assert_eq!(fake.request_count(), 3);
    app.stop().await.unwrap();
}

#[tokio::test]
async fn bad_tool_calls_beyond_their_strikes_end_with_no_progress() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(FakeReply::text("Trying a tool.").call("b1", "no_such_tool", "{}"))
        .reply(FakeReply::text("Reading.").call("b2", "read_file", "{\"path\": deploys"))
        .reply(FakeReply::text("S: tools misused"));
    let app = app_with_fake(&fake, |c| c.agent.bad_tool_strikes = 2).await;
    let mut client = app.client().await;
    let id = start(&mut client, ASK).await;

    let (report, s) = finished(&mut client, &id, 1).await;
    assert_eq!(report.exit_reason, "no_progress");
    assert_eq!(report.summary, "S: tools misused");
    assert_eq!(report.tool_calls, 2);
    // Neither call reached a server.
    assert!(report.servers_used.is_empty(), "{:?}", report.servers_used);
    assert!(report.skills_used.is_empty());
    assert_ended(&s, pb::SessionStatus::Idle, "no_progress");

    let stored = turns(&mut client, &id).await;
    let got = shapes(&stored);
    assert_eq!(got.len(), 5);
    assert_eq!(
        got[1],
        assistant("Trying a tool.", &[("b1", "no_such_tool", "{}")])
    );
    assert_eq!(
        tool_result_of(&stored[2]),
        ("b1".into(), "no_such_tool".into(), true)
    );
    assert!(
        stored[2].content.contains("unknown tool"),
        "{}",
        stored[2].content
    );
    // Arguments that are not JSON are kept exactly as the model sent them.
    assert_eq!(
        got[3],
        assistant("Reading.", &[("b2", "read_file", "{\"path\": deploys")])
    );
    assert_eq!(
        tool_result_of(&stored[4]),
        ("b2".into(), "read_file".into(), true)
    );
    // The call after the unknown tool went out with a valid transcript
    // (the fake answers an invalid one with 400, which would have ended
    // the burst with provider_failed).
    assert_eq!(fake.request_count(), 3);
    app.stop().await.unwrap();
}

#[tokio::test]
async fn a_provider_that_rejects_the_request_ends_with_provider_failed() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.fail(1, 400);
    let app = app_with_fake(&fake, |_| {}).await;
    let mut client = app.client().await;
    let id = start(&mut client, ASK).await;

    let (report, s) = finished(&mut client, &id, 1).await;
    assert_eq!(report.exit_reason, "provider_failed");
    assert!(report.exit_is_terminal);
    assert!(
        report.summary.contains("provider_failed"),
        "{}",
        report.summary
    );
    // Resumable: a later attempt may get through.
    assert_ended(&s, pb::SessionStatus::Idle, "provider_failed");
    assert_eq!(shapes(&turns(&mut client, &id).await), [user(ASK)]);
    // A 400 is not retried, and no author call follows a provider failure.
    assert_eq!(fake.request_count(), 1);
    app.stop().await.unwrap();
}

#[tokio::test]
async fn tool_servers_that_cannot_start_end_with_tool_servers_unavailable() {
    let dir = std::env::temp_dir().join(format!("inquest-mcp-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("mcp.json");
    std::fs::write(
        &file,
        r#"{"mcpServers": {"ghost": {"command": "/nonexistent/inquest-test-no-such-mcp-server"}}}"#,
    )
    .unwrap();
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    let app = app_with_fake(&fake, |c| {
        c.tools.files_root = None;
        c.mcp = Some(McpSection::new(&file));
    })
    .await;
    let mut client = app.client().await;
    let id = start(&mut client, ASK).await;

    let (report, s) = finished(&mut client, &id, 1).await;
    assert_eq!(report.exit_reason, "tool_servers_unavailable");
    assert!(report.servers_used.is_empty());
    assert_ended(&s, pb::SessionStatus::Idle, "tool_servers_unavailable");
    assert_eq!(shapes(&turns(&mut client, &id).await), [user(ASK)]);
    // No model call without tools to work with.
    assert_eq!(fake.request_count(), 0);
    app.stop().await.unwrap();
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn cancelling_while_the_provider_hangs_keeps_the_turns_made() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(FakeReply::text("Listing.").call("c1", "list_files", "{}"))
        .push(Behaviour::Hang);
    let app = app_with_fake(&fake, |_| {}).await;
    let mut client = app.client().await;
    let id = start(&mut client, ASK).await;
    // The second model call is in flight (and never answers).
    eventually("the second model call", || fake.request_count() == 2).await;

    let cancelled = client
        .cancel_session(pb::CancelSessionRequest {
            session_id: id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(cancelled.status(), pb::SessionStatus::Cancelled);

    let (report, s) = finished(&mut client, &id, 1).await;
    assert_eq!(report.exit_reason, "cancelled");
    assert!(report.exit_is_terminal);
    assert_eq!(report.tool_calls, 1);
    assert_ended(&s, pb::SessionStatus::Cancelled, "cancelled");
    // The turns produced before the cancel stay.
    let stored = turns(&mut client, &id).await;
    let got = shapes(&stored);
    assert_eq!(got.len(), 3);
    assert_eq!(got[1], assistant("Listing.", &[("c1", "list_files", "{}")]));
    assert_eq!(
        tool_result_of(&stored[2]),
        ("c1".into(), "list_files".into(), false)
    );
    // No author call after a cancel; the burst is gone from the replica.
    assert_eq!(fake.request_count(), 2);
    let sid = SessionId::parse(&id).unwrap();
    eventually("the burst is forgotten", || {
        !app.turn_log.live().has_burst(sid)
    })
    .await;
    app.stop().await.unwrap();
}

/// The database goes away while a model call is in flight; then the model
/// answers. The assistant turn cannot be written: the burst ends with
/// `store_failed`, and nothing that is not in the database was published.
///
/// Current-thread runtime: the log capture is per thread, and then every
/// task of the test (the server's included) logs into it.
#[tokio::test(flavor = "current_thread")]
async fn a_store_outage_mid_burst_hands_over_publishes_nothing_unstored_and_recovers() {
    let log = CapturedLog::default();
    let _guard = log.install();
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(FakeReply::text("An answer nobody will store.").call("c1", "list_files", "{}"));
    fake.reply(FakeReply::text("The answer after the outage."));
    fake.reply(FakeReply::text("Summary after the outage."));
    let gate = Gate::in_front_of(&fake).await;
    let entry = provider_at(Flavor::OpenAi, "gated", gate.base_url(&fake));
    let app = spawn_app_with(|c| {
        c.providers = vec![entry];
        crate::agent_support::evidence_tools(c);
        c.store.op_timeout = std::time::Duration::from_secs(1);
        c.store.turn_write_timeout = std::time::Duration::from_secs(1);
        c.store.connect_timeout = std::time::Duration::from_millis(500);
        c.lease.ttl = std::time::Duration::from_secs(3);
        c.lease.reap_interval = std::time::Duration::from_millis(200);
    })
    .await;
    let mut client = app.client().await;
    let id = start(&mut client, ASK).await;
    let sid = SessionId::parse(&id).unwrap();

    // Two observers of everything published from here on: the
    // broadcaster itself and a gRPC watcher.
    let mut raw = app.broadcaster().subscribe(sid);
    let mut watch_client = app.client().await;
    let mut stream = inquest_tests::watching::watch(&mut watch_client, &id, 0)
        .await
        .unwrap();
    // The stored user turn: the watcher is caught up and subscribed.
    let first = inquest_tests::watching::next(&mut stream).await.unwrap();
    assert!(matches!(first, Some(pb::watch_event::Event::Turn(t)) if t.seq == 1));
    let watcher = tokio::spawn(inquest_tests::watching::collect(stream));
    // The model call has reached the fake; its answer is held.
    eventually("the model call", || fake.request_count() == 1).await;

    // The database stays away past the lease deadline.
    app.take_database_down().await;
    gate.open();
    eventually("the burst gave up on the store", || {
        log.text().contains("burst finished")
    })
    .await;
    let text = log.text();
    let finished_line = text
        .lines()
        .find(|l| l.contains("burst finished"))
        .unwrap_or_else(|| panic!("no final log line in:\n{text}"));
    assert!(
        finished_line.contains("store_unavailable"),
        "{finished_line}"
    );
    assert!(!text.contains("store_failed"), "{text}");
    // Nothing was published while it was down: the assistant turn never
    // committed, so no turn (and no tool start for its call) went out.
    while let Ok(Some(item)) =
        tokio::time::timeout(std::time::Duration::from_millis(50), raw.recv()).await
    {
        assert!(
            !matches!(
                item,
                SubscriptionItem::Event(Event::Turn(_) | Event::ToolCallStart(_))
            ),
            "published while the store was down: {item:?}"
        );
    }
    drop(raw);
    app.bring_database_up().await;

    // The session was handed to recovery, never failed: once the store
    // answers, the reaper claims it and the burst runs again.
    let (rep, s) = finished(&mut client, &id, 1).await;
    assert_eq!(s.status(), pb::SessionStatus::Completed, "{s:?}");
    assert_eq!(rep.exit_reason, "completed");
    assert!(s.lease_epoch >= 2, "{s:?}");
    let stored = turns(&mut client, &id).await;
    assert_eq!(
        shapes(&without_notices(stored.clone())),
        [user(ASK), assistant("The answer after the outage.", &[])]
    );
    // The watcher saw only stored turns, in order, and ended OK only once
    // it had every turn of the settled session.
    let (events, ending) = watcher.await.unwrap();
    let seqs: Vec<i64> = events
        .iter()
        .filter_map(|e| match e {
            pb::watch_event::Event::Turn(t) => Some(t.seq),
            _ => None,
        })
        .collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
    if ending.is_ok() {
        assert_eq!(seqs.last(), stored.last().map(|t| &t.seq), "{seqs:?}");
    }
    for event in &events {
        match event {
            pb::watch_event::Event::Turn(t) => {
                let same = stored.iter().find(|s| s.seq == t.seq);
                assert_eq!(same, Some(t), "watcher got a turn that is not stored");
            }
            pb::watch_event::Event::ToolCallStart(s) => {
                panic!("watcher got a tool start of an unstored turn: {s:?}")
            }
            _ => {}
        }
    }
    app.stop().await.unwrap();
}

#[tokio::test]
async fn a_failed_author_call_after_a_good_burst_is_report_author_failed() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(FakeReply::text("The pool is exhausted."))
        .fail(1, 400);
    let app = app_with_fake(&fake, |_| {}).await;
    let mut client = app.client().await;
    let id = start(&mut client, ASK).await;

    let (report, s) = finished(&mut client, &id, 1).await;
    assert_eq!(report.exit_reason, "report_author_failed");
    assert!(report.exit_is_terminal);
    assert!(
        report.summary.contains("report_author_failed"),
        "{}",
        report.summary
    );
    assert_ended(&s, pb::SessionStatus::Idle, "report_author_failed");
    assert_eq!(
        shapes(&turns(&mut client, &id).await),
        [user(ASK), assistant("The pool is exhausted.", &[])]
    );
    assert_eq!(fake.request_count(), 2);
    app.stop().await.unwrap();
}

/// Another replica on `db_url`, reaping every 50 ms; with `fake` it has a
/// model and the evidence tools, without it runs nothing.
async fn replica(
    db_url: &str,
    fake: Option<&FakeProvider>,
) -> (
    crate::agent_support::Client,
    CancellationToken,
    tokio::task::JoinHandle<anyhow::Result<()>>,
) {
    let mut config = Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        database_url: Some(db_url.to_owned()),
        ..Config::default()
    };
    config.store.max_connections = 2;
    config.lease.reap_interval = Duration::from_millis(50);
    if let Some(fake) = fake {
        config.providers = vec![provider(fake, Flavor::OpenAi, "fake")];
        evidence_tools(&mut config);
    }
    let app = Application::build(&config, db_url).await.unwrap();
    let addr = app.local_addr().unwrap();
    let stop = CancellationToken::new();
    let server = tokio::spawn(app.run(stop.clone()));
    let client = pb::investigations_client::InvestigationsClient::connect(format!("http://{addr}"))
        .await
        .unwrap();
    (client, stop, server)
}

/// Seen from a replica without a model (it runs nothing): session `id`
/// was handed over, not ended. Still running, nobody's lease, no report.
async fn assert_handed_over(db_url: &str, id: &str) {
    let (mut client, stop, server) = replica(db_url, None).await;
    let s = session(&mut client, id).await;
    assert_eq!(s.status(), pb::SessionStatus::Running, "{s:?}");
    assert_eq!(s.lease_owner, "", "the lease was released: {s:?}");
    assert!(report(&mut client, id, 1).await.is_none());
    drop(client);
    stop.cancel();
    server.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_shutdown_mid_burst_hands_the_session_over_and_the_next_replica_finishes_it() {
    let _ = tracing_subscriber::fmt().with_env_filter("info").try_init();
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(FakeReply::text("Listing.").call("c1", "list_files", "{}"))
        .push(Behaviour::Hang);
    let mut app = app_with_fake(&fake, |_| {}).await;
    let mut client = app.client().await;
    let id = start(&mut client, ASK).await;
    eventually("the second model call", || fake.request_count() == 2).await;

    let db_url = app.db_url.clone();
    // The next replica serves the same data.
    let _database = app.take_database();
    drop(client);
    app.stop().await.unwrap();

    // The burst was handed over, not ended.
    assert_handed_over(&db_url, &id).await;

    // The next replica with a model claims it at once and finishes it:
    // the tail (a tool result the model never saw) continues on its own.
    fake.reply(FakeReply::text("The pool is exhausted."));
    fake.reply(FakeReply::text("Report: pool exhaustion."));
    let (mut client, stop, server) = replica(&db_url, Some(&fake)).await;
    let (report, s) = finished(&mut client, &id, 1).await;
    assert_eq!(report.exit_reason, "completed");
    assert_ended(&s, pb::SessionStatus::Completed, "completed");
    assert!(s.lease_epoch >= 2, "claimed twice: {s:?}");
    let stored = turns(&mut client, &id).await;
    assert_eq!(
        tool_result_of(&stored[2]),
        ("c1".into(), "list_files".into(), false)
    );
    assert_eq!(stored[3].role(), pb::TurnRole::Notice);
    assert!(
        stored[3]
            .content
            .starts_with("Recovery: interrupted_prompt."),
        "{}",
        stored[3].content
    );
    assert_eq!(
        shapes(&without_notices(stored))[3..],
        [assistant("The pool is exhausted.", &[])]
    );
    stop.cancel();
    server.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_shutdown_while_the_report_is_authored_hands_over_and_the_next_replica_writes_it() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(FakeReply::text("The pool is exhausted."))
        .push(Behaviour::Hang);
    let mut app = app_with_fake(&fake, |_| {}).await;
    let mut client = app.client().await;
    let id = start(&mut client, ASK).await;
    // The second request is the author's, and it hangs.
    eventually("the author call", || fake.request_count() == 2).await;

    let db_url = app.db_url.clone();
    // The next replica serves the same data.
    let _database = app.take_database();
    drop(client);
    app.stop().await.unwrap();

    // Handed over, not ended with a summary the model never wrote.
    assert_handed_over(&db_url, &id).await;

    // The next replica finds the final answer stored: it asks the model
    // for nothing but the report.
    fake.reply(FakeReply::text("Report: pool exhaustion."));
    let (mut client, stop, server) = replica(&db_url, Some(&fake)).await;
    let (report, s) = finished(&mut client, &id, 1).await;
    assert_eq!(report.exit_reason, "completed");
    assert_eq!(report.summary, "Report: pool exhaustion.");
    assert_ended(&s, pb::SessionStatus::Completed, "completed");
    assert_eq!(
        shapes(&without_notices(turns(&mut client, &id).await)),
        [user(ASK), assistant("The pool is exhausted.", &[])]
    );
    let requests = fake.requests();
    assert_eq!(
        requests.len(),
        3,
        "answer, the dropped author call, the author call"
    );
    let last = requests[2].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap();
    assert_eq!(last["content"], AUTHOR_PROMPT);
    stop.cancel();
    server.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_cancel_while_the_report_is_authored_ends_the_session_cancelled() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(FakeReply::text("The pool is exhausted."))
        .push(Behaviour::Hang);
    let app = app_with_fake(&fake, |_| {}).await;
    let mut client = app.client().await;
    let id = start(&mut client, ASK).await;
    eventually("the author call", || fake.request_count() == 2).await;

    client
        .cancel_session(pb::CancelSessionRequest {
            session_id: id.clone(),
        })
        .await
        .unwrap();
    let (report, s) = finished(&mut client, &id, 1).await;
    assert_eq!(report.exit_reason, "cancelled");
    assert_ended(&s, pb::SessionStatus::Cancelled, "cancelled");
    assert_eq!(
        shapes(&turns(&mut client, &id).await),
        [user(ASK), assistant("The pool is exhausted.", &[])]
    );
    assert_eq!(fake.request_count(), 2);
    app.stop().await.unwrap();
}

/// A burst cancelled while its only model call was in flight stored no
/// turn, yet it worked: its report's active time counts the call's time.
#[tokio::test]
async fn a_cancelled_model_call_counts_in_the_active_time() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(FakeReply::text("never answered")).hold_answers();
    let app = app_with_fake(&fake, |_| {}).await;
    let mut client = app.client().await;
    let id = start(&mut client, ASK).await;
    eventually("the model call", || fake.request_count() == 1).await;
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    client
        .cancel_session(pb::CancelSessionRequest {
            session_id: id.clone(),
        })
        .await
        .unwrap();
    let (report, _) = finished(&mut client, &id, 1).await;
    assert_eq!(report.exit_reason, "cancelled");
    assert_eq!(report.burst_model_calls, 0, "{report:?}");
    assert!(report.active_time_ms >= 1200, "{report:?}");
    fake.release_answers();
    app.stop().await.unwrap();
}
