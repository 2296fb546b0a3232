//! `SendMessage` with `if_running = INTERRUPT` through the real server: the
//! message is stored at once (queued, like ENQUEUE), the running burst
//! stops at its next safe point and ends `interrupted_by_user`, and the
//! message's burst runs next. A model call in flight is abandoned and
//! none of its text stored; a running read-only tool is cut off; a running
//! mutating tool finishes within the grace and its real result is stored;
//! every call of the reply gets a result, so the strict fake accepts the
//! next request. On another replica the lease holder hears of it through
//! the store's notification, long before its next lease renewal.

use std::{path::PathBuf, time::Duration};

use inquest_agent::McpSection;
use inquest_core::SessionId;
use inquest_proto::v1::{self as pb, watch_event::Event};
use inquest_testkit::{
    fake::{Break, FakeProvider, FakeReply, Flavor},
    mcp,
};
use inquest_tests::{
    TestApp,
    watching::{next, watch},
};
use tokio::time::Instant;
use tonic::Code;

use crate::agent_support::{
    Client, app_with_fake, assistant, eventually, finished, report, session, shapes, start,
    tool_result_of, turns, user, without_notices,
};

const ASK: &str = "why is checkout slow?";
const PARTIAL: &str = "The database is clearly the culprit here, because its pool";
const PRICING: &str = "It's not the DB, look at pricing-svc.";
const SECOND: &str = "pricing-svc deployed at 14:05; its cache misses doubled.";

fn interrupt(session: &str, message: &str, key: &str) -> pb::SendMessageRequest {
    pb::SendMessageRequest {
        session_id: session.into(),
        message: message.into(),
        idempotency_key: key.into(),
        if_running: pb::IfRunning::Interrupt.into(),
    }
}

async fn send_interrupt(
    client: &mut Client,
    session: &str,
    message: &str,
    key: &str,
) -> pb::SendMessageResponse {
    client
        .send_message(interrupt(session, message, key))
        .await
        .expect("interrupt")
        .into_inner()
}

/// Waits until the report of `burst` exists; returns it.
async fn reported(client: &mut Client, session: &str, burst: u32) -> pb::Report {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(r) = report(client, session, burst).await {
            return r;
        }
        assert!(Instant::now() < deadline, "burst {burst} never reported");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The user messages of a recorded OpenAI-flavour request, in order.
fn user_messages(body: &serde_json::Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .filter(|m| m["role"] == "user")
                .filter_map(|m| m["content"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn an_interrupt_during_a_model_call_abandons_it_and_runs_the_message_at_once() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    // Two pieces of the first answer are streamed, then the stream stalls:
    // a model call in flight, its text partly shown.
    fake.broken(FakeReply::text(PARTIAL), 2, Break::Stall)
        .reply(FakeReply::text(SECOND))
        .reply(FakeReply::text("S2"));
    let app = app_with_fake(&fake, |_| {}).await;
    let mut client = app.client().await;
    let id = start(&mut client, ASK).await;
    let mut stream = watch(&mut client, &id, 0).await.unwrap();
    loop {
        match next(&mut stream).await.unwrap() {
            Some(Event::TextDelta(_)) => break,
            Some(_) => {}
            None => panic!("the stream ended before any text was streamed"),
        }
    }
    // The next burst's model call is held, so the session is seen running
    // it with the interrupted burst's exit reason.
    fake.hold_answers();

    let sent_at = Instant::now();
    let sent = send_interrupt(&mut client, &id, PRICING, "i-1").await;
    assert!(sent.queued && sent.queue_position == 1, "{sent:?}");
    let first = reported(&mut client, &id, 1).await;
    let stopped_in = sent_at.elapsed();
    assert_eq!(first.exit_reason, "interrupted_by_user", "{first:?}");
    assert!(first.exit_is_terminal);
    // On the replica that holds the lease the burst stops at once, not at
    // a lease renewal (every 10 s here).
    assert!(
        stopped_in < Duration::from_secs(3),
        "stopped after {stopped_in:?}"
    );

    // The message's burst started at once: its model call is in flight,
    // and GetSession shows why the previous burst ended.
    eventually("the interrupting burst's model call", || {
        fake.request_count() == 2
    })
    .await;
    let s = session(&mut client, &id).await;
    assert_eq!(s.status(), pb::SessionStatus::Running, "{s:?}");
    assert_eq!(s.exit_reason, "interrupted_by_user");
    // A retry with the key answers with the turn the message became, and
    // does not interrupt the burst it opened; the key with another
    // message is refused.
    let retry = send_interrupt(&mut client, &id, PRICING, "i-1").await;
    assert!(!retry.queued && retry.seq == 2, "{retry:?}");
    let reused = client
        .send_message(interrupt(&id, "something else", "i-1"))
        .await
        .expect_err("a key names one message");
    assert_eq!(reused.code(), Code::AlreadyExists, "{reused:?}");
    fake.release_answers();

    let (second, s) = finished(&mut client, &id, 2).await;
    assert_eq!(second.exit_reason, "awaiting_user", "{second:?}");
    assert_eq!(s.status(), pb::SessionStatus::Idle);
    let stored = turns(&mut client, &id).await;
    // Nothing of the abandoned answer was stored.
    assert!(
        !stored.iter().any(|t| t.content.contains("culprit")),
        "{stored:?}"
    );
    assert_eq!(
        shapes(&without_notices(stored)),
        [user(ASK), user(PRICING), assistant(SECOND, &[])]
    );
    // The strict fake took the next request (it answers an invalid one
    // with 400, which would have failed the burst): the unanswered first
    // message and the interrupting one, in order.
    let requests = fake.requests();
    assert_eq!(user_messages(&requests[1].body), [ASK, PRICING]);
    assert_eq!(
        fake.request_count(),
        3,
        "one abandoned, one answer, one report"
    );
    app.stop().await.unwrap();
}

#[tokio::test]
async fn an_interrupt_of_a_session_that_is_not_running_is_a_plain_send() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(FakeReply::text("First answer."))
        .reply(FakeReply::text("S1"))
        .reply(FakeReply::text(SECOND))
        .reply(FakeReply::text("S2"));
    let app = app_with_fake(&fake, |_| {}).await;
    let mut client = app.client().await;
    let id = start(&mut client, ASK).await;
    finished(&mut client, &id, 1).await;
    let sent = send_interrupt(&mut client, &id, PRICING, "k").await;
    assert!(!sent.queued && sent.seq == 3, "{sent:?}");
    let (report, _) = finished(&mut client, &id, 2).await;
    assert_eq!(report.exit_reason, "awaiting_user");
    assert_eq!(app.count("queued_messages").await, 0);
    app.stop().await.unwrap();
}

/// An `mcpServers` file that starts the incident-tools server as
/// `incident`, counting `slow_restart` executions in `count`.
struct Tools {
    dir: PathBuf,
    file: PathBuf,
    count: PathBuf,
}

impl Tools {
    fn new() -> Tools {
        let python = mcp::python().expect("the MCP SDK (INQUEST_TEST_PYTHON)");
        let dir = std::env::temp_dir().join(format!(
            "inquest-interrupt-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let (file, count) = (dir.join("mcp.json"), dir.join("count"));
        let servers = serde_json::json!({"mcpServers": {"incident": {
            "command": python,
            "args": [mcp::incident_tools_script().display().to_string()],
            "env": {"INQUEST_MCP_COUNT_FILE": count.display().to_string()},
        }}});
        std::fs::write(&file, servers.to_string()).unwrap();
        Tools { dir, file, count }
    }

    fn executions(&self) -> usize {
        std::fs::read_to_string(&self.count)
            .map(|s| s.lines().count())
            .unwrap_or(0)
    }
}

impl Drop for Tools {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A server with the incident tools, whose model asks for `first` (a slow
/// tool) and then `read_log` in one reply, then answers the interrupting
/// message.
async fn tools_app(
    fake: &FakeProvider,
    tools: &Tools,
    first: (&str, &str),
    grace: Duration,
) -> TestApp {
    fake.reply(
        FakeReply::text("Checking pricing-svc.")
            .call("t1", first.0, first.1)
            .call("t2", "read_log", r#"{"service":"pricing"}"#),
    )
    .reply(FakeReply::text(SECOND))
    .reply(FakeReply::text("S2"));
    let section = McpSection::new(&tools.file);
    app_with_fake(fake, |c| {
        c.mcp = Some(section);
        c.shutdown.grace = grace;
    })
    .await
}

/// Starts the session and waits until its first tool call runs.
async fn until_the_tool_runs(app: &TestApp, client: &mut Client) -> String {
    let id = start(client, ASK).await;
    let sid = SessionId::parse(&id).unwrap();
    eventually("the tool call runs", || {
        !app.turn_log.live().running_calls(sid).is_empty()
    })
    .await;
    id
}

/// The stored turns of a session whose first burst's two calls an
/// interrupt answered: checks everything but the first call's result,
/// which it returns.
fn check_interrupted_calls(
    stored: Vec<pb::SessionTurn>,
    first: (&str, &str, &str),
) -> pb::SessionTurn {
    let stored = without_notices(stored);
    assert_eq!(stored.len(), 6, "{stored:?}");
    assert_eq!(
        shapes(&stored[..2]),
        [
            user(ASK),
            assistant(
                "Checking pricing-svc.",
                &[first, ("t2", "read_log", r#"{"service":"pricing"}"#)]
            ),
        ]
    );
    // The call after it never started, and says so.
    assert_eq!(
        tool_result_of(&stored[3]),
        ("t2".into(), "read_log".into(), true)
    );
    assert_eq!(
        stored[3].content,
        "not run: the user interrupted the burst before this tool call started"
    );
    assert_eq!(
        shapes(&stored[4..]),
        [user(PRICING), assistant(SECOND, &[])]
    );
    stored[2].clone()
}

#[tokio::test]
async fn an_interrupt_cuts_a_running_read_only_tool_and_answers_every_call() {
    let tools = Tools::new();
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    let slow = ("t1", "slow_read", r#"{"seconds":60,"service":"pricing"}"#);
    let app = tools_app(&fake, &tools, (slow.1, slow.2), Duration::from_secs(30)).await;
    let mut client = app.client().await;
    let id = until_the_tool_runs(&app, &mut client).await;

    let sent_at = Instant::now();
    let sent = send_interrupt(&mut client, &id, PRICING, "").await;
    assert!(sent.queued, "{sent:?}");
    let first = reported(&mut client, &id, 1).await;
    assert_eq!(first.exit_reason, "interrupted_by_user");
    // Cut at once: neither the tool's 60 s nor the 30 s grace.
    assert!(sent_at.elapsed() < Duration::from_secs(10));
    let (second, _) = finished(&mut client, &id, 2).await;
    assert_eq!(second.exit_reason, "awaiting_user", "{second:?}");
    let cut = check_interrupted_calls(turns(&mut client, &id).await, slow);
    assert_eq!(
        tool_result_of(&cut),
        ("t1".into(), "slow_read".into(), true)
    );
    assert_eq!(
        cut.content,
        "interrupted by the user: this read-only tool was stopped before it finished"
    );
    // The strict fake took the next request: both calls answered.
    assert_eq!(fake.request_count(), 3);
    app.stop().await.unwrap();
}

#[tokio::test]
async fn an_interrupt_lets_a_running_mutating_tool_finish_and_stores_its_real_result() {
    let tools = Tools::new();
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    let slow = ("t1", "slow_restart", r#"{"seconds":2,"service":"pricing"}"#);
    let app = tools_app(&fake, &tools, (slow.1, slow.2), Duration::from_secs(30)).await;
    let mut client = app.client().await;
    let id = until_the_tool_runs(&app, &mut client).await;

    let sent = send_interrupt(&mut client, &id, PRICING, "m-1").await;
    assert!(sent.queued && sent.queue_position == 1, "{sent:?}");
    // The tool still runs (2 s): the message waits in the queue, and a
    // retry with its key answers the same and stores nothing more.
    let retry = send_interrupt(&mut client, &id, PRICING, "m-1").await;
    assert_eq!(retry, sent);
    assert_eq!(app.count("queued_messages").await, 1);

    let first = reported(&mut client, &id, 1).await;
    assert_eq!(first.exit_reason, "interrupted_by_user");
    let (second, _) = finished(&mut client, &id, 2).await;
    assert_eq!(second.exit_reason, "awaiting_user", "{second:?}");
    let result = check_interrupted_calls(turns(&mut client, &id).await, slow);
    assert_eq!(
        tool_result_of(&result),
        ("t1".into(), "slow_restart".into(), false)
    );
    assert_eq!(result.content, "restarted pricing slowly");
    assert_eq!(tools.executions(), 1, "run once");
    assert_eq!(fake.request_count(), 3);
    app.stop().await.unwrap();
}

#[tokio::test]
async fn a_mutating_tool_still_running_past_the_grace_is_stopped_and_says_so() {
    let tools = Tools::new();
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    let slow = (
        "t1",
        "slow_restart",
        r#"{"seconds":60,"service":"pricing"}"#,
    );
    let app = tools_app(&fake, &tools, (slow.1, slow.2), Duration::from_millis(500)).await;
    let mut client = app.client().await;
    let id = until_the_tool_runs(&app, &mut client).await;

    let sent_at = Instant::now();
    send_interrupt(&mut client, &id, PRICING, "").await;
    let first = reported(&mut client, &id, 1).await;
    assert_eq!(first.exit_reason, "interrupted_by_user");
    let stopped_in = sent_at.elapsed();
    assert!(
        stopped_in >= Duration::from_millis(500) && stopped_in < Duration::from_secs(10),
        "stopped after {stopped_in:?}"
    );
    let (second, _) = finished(&mut client, &id, 2).await;
    assert_eq!(second.exit_reason, "awaiting_user", "{second:?}");
    let cut = check_interrupted_calls(turns(&mut client, &id).await, slow);
    assert_eq!(
        tool_result_of(&cut),
        ("t1".into(), "slow_restart".into(), true)
    );
    assert!(
        cut.content.contains("may have partly run"),
        "{}",
        cut.content
    );
    assert_eq!(tools.executions(), 1);
    app.stop().await.unwrap();
}

#[tokio::test]
async fn an_interrupt_sent_to_a_replica_without_the_lease_reaches_the_holder() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.broken(FakeReply::text(PARTIAL), 1, Break::Stall)
        .reply(FakeReply::text(SECOND))
        .reply(FakeReply::text("S2"));
    // Renewals every 20 s: a stop within a few seconds came through the
    // notification, not a renewal.
    let lease = |c: &mut inquest_server::Config| c.lease.ttl = Duration::from_secs(60);
    let a = app_with_fake(&fake, lease).await;
    let entry = crate::agent_support::provider(&fake, Flavor::OpenAi, "fake");
    let b = inquest_tests::spawn_app_on(a.db_name.clone(), a.db_url.clone(), |c| {
        c.providers = vec![entry];
        crate::agent_support::evidence_tools(c);
        lease(c);
    })
    .await;
    let (mut on_a, mut on_b) = (a.client().await, b.client().await);
    // A stores the first message and claims its burst at once.
    let id = start(&mut on_a, ASK).await;
    eventually("the first model call", || fake.request_count() == 1).await;
    let sid = SessionId::parse(&id).unwrap();
    assert!(a.turn_log.live().has_burst(sid), "A holds the burst");
    assert!(!b.turn_log.live().has_burst(sid));

    let sent_at = Instant::now();
    let sent = send_interrupt(&mut on_b, &id, PRICING, "x-1").await;
    assert!(sent.queued, "{sent:?}");
    let first = reported(&mut on_b, &id, 1).await;
    let stopped_in = sent_at.elapsed();
    assert_eq!(first.exit_reason, "interrupted_by_user");
    assert!(
        stopped_in < Duration::from_secs(5),
        "stopped after {stopped_in:?}"
    );
    // A retry on B after the burst stopped answers with the turn.
    let (second, _) = finished(&mut on_b, &id, 2).await;
    assert_eq!(second.exit_reason, "awaiting_user", "{second:?}");
    let retry = send_interrupt(&mut on_b, &id, PRICING, "x-1").await;
    assert!(!retry.queued && retry.seq == 2, "{retry:?}");
    assert_eq!(
        shapes(&without_notices(turns(&mut on_b, &id).await)),
        [user(ASK), user(PRICING), assistant(SECOND, &[])]
    );
    assert_eq!(fake.request_count(), 3, "each burst ran once");
    b.stop().await.unwrap();
    a.stop().await.unwrap();
}

/// The paths besides the notification, through the store and the real
/// burst log (a driver plays the agent): an interrupt sent while the
/// session waits to be claimed fires at the claim; the holder's lease
/// renewal reads it (so a holder that missed the notification learns of
/// it within one renew interval); the close that drains the message takes
/// the flag with it, so the burst it opens is not interrupted; on the
/// holder's replica the burst's token fires before the call returns.
#[tokio::test]
async fn an_interrupt_reaches_the_holder_at_its_claim_and_its_renewal_and_never_outlives_its_message()
 {
    use inquest_store::Renewal;
    use inquest_tests::driver::{Driver, new_session};

    let app = inquest_tests::spawn_app().await;
    let mut client = app.client().await;
    let id = new_session(&mut client).await;
    // No agent here: the session waits, pending, to be claimed.
    let sent = send_interrupt(&mut client, &id, PRICING, "p-1").await;
    assert!(sent.queued, "{sent:?}");
    let first = Driver::claim(&app, &id).await;
    assert!(first.burst.lease().interrupt_requested());
    assert!(first.burst.interrupt().is_cancelled(), "fired at the claim");
    let renewed = app.store.renew_lease(first.burst.lease()).await.unwrap();
    assert_eq!(
        renewed,
        Renewal::Held {
            status: inquest_core::SessionStatus::Running,
            interrupt: true
        }
    );
    first.say("Stopping here.").await;
    first
        .finish_as(inquest_core::ExitReason::InterruptedByUser)
        .await;
    // The close drained the message into the next burst's turn.
    assert_eq!(app.count("queued_messages").await, 0);
    let s = session(&mut client, &id).await;
    assert_eq!(s.status(), pb::SessionStatus::Pending, "{s:?}");
    assert_eq!(s.exit_reason, "interrupted_by_user");

    let second = Driver::claim(&app, &id).await;
    assert!(!second.burst.interrupt().is_cancelled());
    let renewed = app.store.renew_lease(second.burst.lease()).await.unwrap();
    assert!(
        matches!(
            renewed,
            Renewal::Held {
                interrupt: false,
                ..
            }
        ),
        "{renewed:?}"
    );
    // A retry of the drained interrupt answers with its turn and stops
    // nothing.
    let retry = send_interrupt(&mut client, &id, PRICING, "p-1").await;
    assert!(!retry.queued, "{retry:?}");
    assert!(!second.burst.interrupt().is_cancelled());
    // A new interrupt stops the running burst here before the call returns.
    send_interrupt(&mut client, &id, "And the cache.", "").await;
    assert!(second.burst.interrupt().is_cancelled());
    second
        .finish_as(inquest_core::ExitReason::InterruptedByUser)
        .await;
    app.stop().await.unwrap();
}

/// A session held for approval is not running: an interrupting message is
/// a plain follow-up there, which supersedes the pending call (its result
/// says so) before the message, and the model is asked at once.
#[tokio::test]
async fn an_interrupt_of_a_session_held_for_approval_supersedes_the_hold() {
    let tools = Tools::new();
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(FakeReply::text("Restarting the database.").call(
        "h1",
        "restart_service",
        r#"{"service":"db"}"#,
    ))
    .reply(FakeReply::text(SECOND))
    .reply(FakeReply::text("S2"));
    let section = McpSection::new(&tools.file);
    let app = app_with_fake(&fake, |c| {
        c.mcp = Some(section);
        c.approval = inquest_server::config::approval::ApprovalSection::default();
    })
    .await;
    let mut client = app.client().await;
    let id = start(&mut client, ASK).await;
    let (held, s) = finished(&mut client, &id, 1).await;
    assert_eq!(held.exit_reason, "awaiting_approval");
    assert_eq!(s.status(), pb::SessionStatus::AwaitingApproval);

    let sent = send_interrupt(&mut client, &id, PRICING, "").await;
    assert!(!sent.queued && sent.seq > 0, "{sent:?}");
    let (second, s) = finished(&mut client, &id, 2).await;
    assert_eq!(second.exit_reason, "awaiting_user", "{second:?}");
    assert_eq!(s.approvals[0].state(), pb::ApprovalState::Superseded);
    let stored = without_notices(turns(&mut client, &id).await);
    assert_eq!(
        tool_result_of(&stored[2]),
        ("h1".into(), "restart_service".into(), true)
    );
    assert!(
        stored[2].content.contains("superseded by a new message"),
        "{}",
        stored[2].content
    );
    assert_eq!(
        shapes(&stored[3..]),
        [user(PRICING), assistant(SECOND, &[])]
    );
    assert_eq!(tools.executions(), 0, "the held call never ran");
    app.stop().await.unwrap();
}

/// An interrupt that arrives after the burst last looked (it is asking for
/// approvals) is still not left waiting for a human: the close into
/// `awaiting_approval` finds it queued, supersedes the hold (its result
/// first) and opens the message's burst.
#[tokio::test]
async fn an_interrupt_queued_as_the_burst_holds_calls_supersedes_the_hold_at_the_close() {
    use inquest_agent::{HeldCall, TurnSink};
    use inquest_core::{SideEffect, ToolArguments, ToolCall};
    use inquest_tests::driver::{Driver, new_session};

    let app = inquest_tests::spawn_app().await;
    let mut client = app.client().await;
    let id = new_session(&mut client).await;
    let driver = Driver::claim(&app, &id).await;
    let asked = driver.call("h1", "restart_service").await;
    let held = HeldCall {
        call: ToolCall {
            id: "h1".into(),
            name: "restart_service".into(),
            arguments: ToolArguments::from_model("{}"),
        },
        server: "incident".into(),
        side_effect: SideEffect::Mutating,
        rule: "mode mutating".into(),
    };
    driver
        .burst
        .request_approvals(driver.session, asked.seq, vec![held])
        .await
        .unwrap();
    let sent = send_interrupt(&mut client, &id, PRICING, "").await;
    assert!(sent.queued, "{sent:?}");
    driver
        .finish_as(inquest_core::ExitReason::AwaitingApproval)
        .await;

    let s = session(&mut client, &id).await;
    assert_eq!(s.status(), pb::SessionStatus::Pending, "{s:?}");
    assert_eq!(s.approvals[0].state(), pb::ApprovalState::Superseded);
    assert_eq!(app.count("queued_messages").await, 0);
    let stored = turns(&mut client, &id).await;
    let tail: Vec<_> = stored[stored.len() - 2..]
        .iter()
        .map(|t| (t.role(), t.tool_call_id.clone(), t.content.clone()))
        .collect();
    assert_eq!(tail[1], (pb::TurnRole::User, String::new(), PRICING.into()));
    assert_eq!((tail[0].0, tail[0].1.as_str()), (pb::TurnRole::Tool, "h1"));
    assert!(
        tail[0].2.contains("superseded by a new message"),
        "{tail:?}"
    );
    app.stop().await.unwrap();
}
