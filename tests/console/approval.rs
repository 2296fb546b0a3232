//! Tool calls held for a human's approval (`[approval]`), decided in the
//! browser. The model (the fake provider) asks for three calls of a real
//! MCP server's mutating `restart_service` in one turn; the session waits
//! in `awaiting_approval` and nothing runs. "Waiting for you" lists the
//! three with their arguments (one hostile: shown as text, never run) and
//! counts them; one is approved there (a partial decision: still held,
//! nothing runs); one decided elsewhere meanwhile shows the server's
//! refusal in place; the last is denied with a comment from the session
//! page. Then the burst continues: the approved calls run once each, the
//! denied one never, its result says who denied it and why, and the session
//! completes with its report. And a call held while the session page
//! watches appears there live and is approved there, with a comment; a
//! comment being typed in the list keeps its text and focus when the list
//! is redrawn; a held session is cancelled from the list.

use std::path::PathBuf;

use inquest_agent::McpSection;
use inquest_proto::v1 as pb;
use inquest_server::config::approval::ApprovalSection;
use inquest_testkit::{
    fake::{FakeProvider, FakeReply, Flavor},
    mcp,
};
use serde_json::{Value, json};

use crate::{
    support::{
        Client, session_url, stored_seqs, text_of, wait_for_call, wait_for_report, wait_for_status,
        wait_for_turns,
    },
    webdriver::{Browser, HANG_GUARD},
};

/// A `restart_service` argument that would run script if it were ever
/// parsed as HTML.
const HOSTILE: &str = r#"<img src=x onerror="window.__pwned=1">"#;

/// The incident tools (Python SDK) as MCP server "ops", counting each
/// `restart_service` execution (one line, the service) in `count`.
struct CountedMcp {
    dir: PathBuf,
    file: PathBuf,
    count: PathBuf,
}

impl CountedMcp {
    fn new() -> CountedMcp {
        let python = mcp::python().unwrap_or_else(|| {
            panic!(
                "the console's approval test needs the MCP Python SDK: set INQUEST_TEST_PYTHON \
                 (cargo xtask test makes target/test-python)"
            )
        });
        let dir = std::env::temp_dir().join(format!(
            "inquest-console-approval-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("mcp.json");
        let count = dir.join("restarts");
        let servers = json!({"mcpServers": {"ops": {
            "command": python,
            "args": [mcp::incident_tools_script().display().to_string()],
            "env": {"INQUEST_MCP_COUNT_FILE": count.display().to_string()},
        }}});
        std::fs::write(&file, servers.to_string()).unwrap();
        CountedMcp { dir, file, count }
    }

    /// The services restarted so far, in order.
    fn restarts(&self) -> Vec<String> {
        std::fs::read_to_string(&self.count)
            .map(|s| s.lines().map(str::to_owned).collect())
            .unwrap_or_default()
    }
}

impl Drop for CountedMcp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

async fn get_session(client: &mut Client, session: &str) -> pb::Session {
    client
        .get_session(pb::GetSessionRequest {
            session_id: session.into(),
        })
        .await
        .unwrap()
        .into_inner()
}

/// Polls the API until the session has `status` (the hang guard fails it).
async fn until_status(
    client: &mut Client,
    session: &str,
    status: pb::SessionStatus,
) -> pb::Session {
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    loop {
        let s = get_session(client, session).await;
        if s.status() == status {
            return s;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the session never became {status:?}: {s:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

fn approval<'a>(s: &'a pb::Session, call_id: &str) -> &'a pb::Approval {
    s.approvals
        .iter()
        .find(|a| a.call_id == call_id)
        .unwrap_or_else(|| panic!("no approval {call_id}: {s:?}"))
}

/// The card of `call_id` within `scope` (a CSS selector): its state,
/// tool, server line, arguments, side effect, rule, expiry, decision, and
/// the names of its buttons.
async fn card(browser: &Browser, scope: &str, call_id: &str) -> Value {
    browser
        .js(
            "const e = document.querySelector(`${arguments[0]} .approval[data-call-id=\"${arguments[1]}\"]`); \
             if (!e) return null; \
             const t = (c) => e.querySelector(c)?.textContent ?? null; \
             return {state: e.dataset.state, tool: t('.approval-tool'), head: t('.approval-head'), \
                     args: t('.approval-args'), sideEffect: t('.approval-side-effect'), \
                     rule: t('.approval-rule'), expires: t('.approval-expires'), \
                     decision: t('.approval-decision'), error: t('.approval-error'), \
                     buttons: [...e.querySelectorAll('button')].map(b => b.dataset.action), \
                     comment: !!e.querySelector('textarea.approval-comment')};",
            json!([scope, call_id]),
        )
        .await
}

/// Whether stored content ran as script or became markup anywhere.
async fn assert_nothing_ran(browser: &Browser) {
    let v = browser
        .js(
            "return [window.__pwned === undefined, document.querySelectorAll('main img').length];",
            json!([]),
        )
        .await;
    assert_eq!(
        v,
        json!([true, 0]),
        "hostile arguments were rendered as HTML"
    );
}

#[tokio::test]
async fn held_calls_are_approved_and_denied_in_the_browser_and_the_session_completes() {
    let mcp = CountedMcp::new();
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    let hostile_args = json!({ "service": HOSTILE }).to_string();
    fake.reply(
        FakeReply::text("Checkout, payments and search are down; restarting them.")
            .call("c1", "restart_service", &hostile_args)
            .call("c2", "restart_service", r#"{"service":"payments"}"#)
            .call("c3", "restart_service", r#"{"service":"search"}"#)
            .usage(120, 30),
    )
    .reply(
        FakeReply::text("Checkout and payments restarted; search was left alone.").usage(200, 25),
    )
    .reply(FakeReply::text("Two restarts fixed checkout; search was not touched.").usage(50, 10));
    let entry = inquest_tests::resume::fake_provider(&fake, "fake");
    let section = McpSection::new(&mcp.file);
    let app = inquest_tests::spawn_app_with(|c| {
        c.providers = vec![entry];
        c.mcp = Some(section);
        // The default policy: every call not read-only waits for a human.
        c.approval = ApprovalSection::default();
    })
    .await;
    let mut client = app.client().await;

    let incident = client
        .create_incident(pb::CreateIncidentRequest {
            title: "Checkout down".into(),
            description: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let session = client
        .start_session(pb::StartSessionRequest {
            incident_id: incident.id.clone(),
            message: "Why is checkout down?".into(),
            idempotency_key: String::new(),
        })
        .await
        .unwrap()
        .into_inner()
        .id;
    let held = until_status(&mut client, &session, pb::SessionStatus::AwaitingApproval).await;
    assert_eq!(
        held.approvals
            .iter()
            .map(|a| a.call_id.as_str())
            .collect::<Vec<_>>(),
        ["c1", "c2", "c3"],
        "{held:?}"
    );
    assert!(mcp.restarts().is_empty(), "nothing runs before a decision");

    // The waiting list shows the three calls by themselves (it polls), with
    // the count in the header and the title.
    let mut browser = Browser::start("approval").await;
    browser.goto(&format!("{}/console/", app.endpoint())).await;
    browser
        .wait_until(
            "three held calls listed",
            "const e = document.querySelector(`#waiting-list li.waiting[data-session-id=\"${arguments[0]}\"]`); \
             return !!e && e.dataset.kind === 'approval' && e.dataset.status === 'awaiting_approval' && \
                    e.querySelectorAll('.approval[data-state=\"pending\"]').length === 3 && \
                    document.getElementById('waiting-count').textContent === '3' && \
                    document.title === '(3) waiting · Inquest console';",
            json!([session]),
        )
        .await;
    assert_nothing_ran(&browser).await;
    let list = "#waiting-list";
    let c1 = card(&browser, list, "c1").await;
    let wire = approval(&held, "c1");
    assert_eq!(c1["state"], "pending");
    assert_eq!(c1["tool"], "restart_service");
    assert!(
        c1["head"].as_str().unwrap_or_default().contains("on ops"),
        "{c1}"
    );
    // The arguments as text: the hostile value verbatim, not markup.
    let args: Value = serde_json::from_str(c1["args"].as_str().unwrap_or_default())
        .unwrap_or_else(|e| panic!("the arguments shown are not the JSON stored ({e}): {c1}"));
    assert_eq!(args, json!({ "service": HOSTILE }));
    assert_eq!(c1["sideEffect"], json!(wire.side_effect));
    assert_eq!(wire.side_effect, "mutating");
    assert_eq!(c1["rule"], json!(wire.rule));
    assert!(!wire.rule.is_empty(), "{wire:?}");
    assert!(
        c1["expires"].as_str().is_some_and(|e| e.ends_with('Z')),
        "{c1}"
    );
    assert_eq!(c1["buttons"], json!(["approve", "deny"]));
    assert_eq!(c1["comment"], json!(true));
    browser.step("three-held").await;
    // The approval cards, with their hostile arguments, pass axe too.
    crate::a11y::assert_accessible(&mut browser, "waiting-approvals").await;

    // Approve c1 from the list: a partial decision, so the session stays
    // held and nothing runs yet; the count drops to the two left.
    browser
        .click(".approval[data-call-id=\"c1\"] button[data-action=\"approve\"]")
        .await;
    browser
        .wait_until(
            "c1 approved, two left",
            "const e = document.querySelector('#waiting-list .approval[data-call-id=\"c1\"]'); \
             return !!e && e.dataset.state === 'approved' && !e.querySelector('button') && \
                    document.getElementById('waiting-count').textContent === '2';",
            json!([]),
        )
        .await;
    let partial = get_session(&mut client, &session).await;
    assert_eq!(partial.status(), pb::SessionStatus::AwaitingApproval);
    assert_eq!(
        approval(&partial, "c1").state(),
        pb::ApprovalState::Approved
    );
    assert_eq!(approval(&partial, "c1").decided_by, "anonymous");
    assert_eq!(approval(&partial, "c2").state(), pb::ApprovalState::Pending);
    assert!(
        card(&browser, list, "c1").await["decision"]
            .as_str()
            .is_some_and(|d| d.starts_with("approved by anonymous")),
        "the decision shown"
    );
    assert!(mcp.restarts().is_empty(), "a partial decision runs nothing");
    browser.step("c1-approved").await;

    // c2 is decided elsewhere while the list still shows it pending (its
    // poll paused): Deny in the browser gets the server's refusal, shown on
    // the card, and the card then shows the decision that stood.
    browser
        .js("window.inquestConsole.holdWaiting(true);", json!([]))
        .await;
    // A read already under way could still see the decision below.
    browser
        .wait_until(
            "the waiting list's reads settled",
            "return !window.inquestConsole.waitingBusy();",
            json!([]),
        )
        .await;
    client
        .decide_tool_calls(pb::DecideToolCallsRequest {
            session_id: session.clone(),
            decisions: vec![pb::ToolCallDecision {
                call_id: "c2".into(),
                verdict: pb::ToolCallVerdict::Approve.into(),
                comment: String::new(),
            }],
            idempotency_key: "elsewhere".into(),
        })
        .await
        .unwrap();
    assert_eq!(card(&browser, list, "c2").await["state"], "pending");
    browser
        .click(".approval[data-call-id=\"c2\"] button[data-action=\"deny\"]")
        .await;
    browser
        .wait_until(
            "the refusal shown on c2's card",
            "const e = document.querySelector('#waiting-list .approval[data-call-id=\"c2\"]'); \
             return !!e && e.dataset.state === 'approved' && \
                    (e.querySelector('.approval-error')?.textContent ?? '').startsWith('Deny failed: FAILED_PRECONDITION');",
            json!([]),
        )
        .await;
    browser
        .js("window.inquestConsole.holdWaiting(false);", json!([]))
        .await;
    assert_eq!(
        approval(&get_session(&mut client, &session).await, "c2").state(),
        pb::ApprovalState::Approved,
        "the refused click changed nothing"
    );
    assert_eq!(text_of(&browser, "waiting-count").await, "1");
    browser.step("c2-refused").await;

    // c3 from the session page: denied with a comment. Nothing is left
    // pending, so the burst continues and the page follows it.
    browser.goto(&session_url(&app, &session)).await;
    browser
        .wait_until(
            "the session page's cards",
            "return !document.getElementById('approvals').hidden && \
                    document.querySelectorAll('#approval-list .approval').length === 3 && \
                    document.getElementById('session-status').dataset.status === 'awaiting_approval';",
            json!([]),
        )
        .await;
    let c3 = card(&browser, "#approval-list", "c3").await;
    assert_eq!(c3["state"], "pending");
    assert_eq!(c3["buttons"], json!(["approve", "deny"]));
    assert_eq!(
        card(&browser, "#approval-list", "c1").await["buttons"],
        json!([]),
        "a decided call has no buttons"
    );
    assert_nothing_ran(&browser).await;
    browser.step("session-held").await;
    browser
        .type_into(
            "#approval-list .approval[data-call-id=\"c3\"] textarea.approval-comment",
            "not during peak",
        )
        .await;
    browser
        .click("#approval-list .approval[data-call-id=\"c3\"] button[data-action=\"deny\"]")
        .await;

    wait_for_call(&browser, "c1", "done").await;
    wait_for_call(&browser, "c2", "done").await;
    wait_for_call(&browser, "c3", "error").await;
    wait_for_status(&browser, "completed").await;
    wait_for_report(&browser).await;
    let stored = stored_seqs(&mut client, &session).await;
    wait_for_turns(&browser, stored.len()).await;
    // The denied call's result turn says who denied it and why.
    let denied = browser
        .js(
            "const t = [...document.querySelectorAll('#turns > li.turn-tool')] \
               .find(e => e.querySelector('.turn-head').textContent.includes('(c3)')); \
             return t ? t.querySelector('.content').textContent : null;",
            json!([]),
        )
        .await;
    assert!(
        denied
            .as_str()
            .is_some_and(|d| d.contains("denied by anonymous: not during peak")),
        "{denied}"
    );
    let c3 = card(&browser, "#approval-list", "c3").await;
    assert_eq!(c3["state"], "denied");
    assert!(
        c3["decision"]
            .as_str()
            .is_some_and(|d| d.starts_with("denied by anonymous: not during peak")),
        "{c3}"
    );
    assert_eq!(
        text_of(&browser, "report-summary").await,
        "Two restarts fixed checkout; search was not touched."
    );
    // The approved calls ran once each, the denied one never; the hostile
    // value came back in a tool result, still as text.
    let mut restarts = mcp.restarts();
    restarts.sort();
    assert_eq!(restarts, [HOSTILE, "payments"]);
    assert_nothing_ran(&browser).await;
    let settled = get_session(&mut client, &session).await;
    assert_eq!(
        settled.status(),
        pb::SessionStatus::Completed,
        "{settled:?}"
    );
    assert_eq!(approval(&settled, "c3").state(), pb::ApprovalState::Denied);
    assert_eq!(approval(&settled, "c3").comment, "not during peak");
    browser
        .wait_until(
            "nothing waits any more",
            "return document.getElementById('waiting-count').textContent === '0' && \
                    document.title === 'Inquest console';",
            json!([]),
        )
        .await;
    browser.step("completed").await;
}

#[tokio::test]
async fn a_call_held_while_the_page_watches_appears_there_and_is_approved_there() {
    let mcp = CountedMcp::new();
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    // The model's first answer waits until the page is watching.
    fake.hold_answers();
    fake.reply(
        FakeReply::text("Restarting checkout.")
            .call("r1", "restart_service", r#"{"service":"checkout"}"#)
            .usage(100, 20),
    )
    .reply(FakeReply::text("Checkout restarted.").usage(150, 10))
    .reply(FakeReply::text("A restart fixed checkout.").usage(40, 8));
    let entry = inquest_tests::resume::fake_provider(&fake, "fake");
    let section = McpSection::new(&mcp.file);
    let app = inquest_tests::spawn_app_with(|c| {
        c.providers = vec![entry];
        c.mcp = Some(section);
        c.approval = ApprovalSection::default();
    })
    .await;
    let mut client = app.client().await;
    let incident = client
        .create_incident(pb::CreateIncidentRequest {
            title: "Checkout slow".into(),
            description: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let session = client
        .start_session(pb::StartSessionRequest {
            incident_id: incident.id,
            message: "Why is checkout slow?".into(),
            idempotency_key: String::new(),
        })
        .await
        .unwrap()
        .into_inner()
        .id;

    let mut browser = Browser::start("approval-live").await;
    browser.goto(&session_url(&app, &session)).await;
    wait_for_turns(&browser, 1).await;
    browser
        .wait_until(
            "the page watching the running session",
            "return document.getElementById('watch-state').dataset.state === 'live' && \
                    document.getElementById('approvals').hidden;",
            json!([]),
        )
        .await;
    browser.step("running").await;

    // The model asks for the call while the page watches: the hold arrives
    // live (ApprovalRequested, then the stream ends), without a reload.
    fake.release_answers();
    browser
        .wait_until(
            "the held call shown on the page",
            "const e = document.querySelector('#approval-list .approval[data-call-id=\"r1\"]'); \
             return !!e && e.dataset.state === 'pending' && !!e.querySelector('button[data-action=\"approve\"]') && \
                    document.getElementById('session-status').dataset.status === 'awaiting_approval' && \
                    document.getElementById('waiting-count').textContent === '1';",
            json!([]),
        )
        .await;
    assert_eq!(
        browser
            .js(
                "return document.getElementById('report').hidden;",
                json!([])
            )
            .await,
        json!(true),
        "a held round shows no report"
    );
    assert!(mcp.restarts().is_empty(), "nothing runs before a decision");
    // The call in the turn says what it waits for.
    assert_eq!(
        browser
            .js(
                "const e = document.querySelector('#turns .tool-call[data-call-id=\"r1\"]'); \
                 return [e.dataset.state, e.dataset.approval, e.querySelector('.call-state').textContent];",
                json!([]),
            )
            .await,
        json!(["requested", "pending", "awaiting approval"])
    );
    browser.step("held-live").await;

    browser
        .type_into(
            "#approval-list .approval[data-call-id=\"r1\"] textarea.approval-comment",
            "go ahead",
        )
        .await;
    browser
        .click("#approval-list .approval[data-call-id=\"r1\"] button[data-action=\"approve\"]")
        .await;
    wait_for_call(&browser, "r1", "done").await;
    wait_for_status(&browser, "completed").await;
    wait_for_report(&browser).await;
    let r1 = card(&browser, "#approval-list", "r1").await;
    assert_eq!(r1["state"], "approved");
    assert_eq!(r1["buttons"], json!([]));
    assert!(
        r1["decision"]
            .as_str()
            .is_some_and(|d| d.starts_with("approved by anonymous: go ahead")),
        "{r1}"
    );
    assert_eq!(
        text_of(&browser, "report-summary").await,
        "A restart fixed checkout."
    );
    assert_eq!(mcp.restarts(), ["checkout"], "the approved call ran once");
    let stored = stored_seqs(&mut client, &session).await;
    wait_for_turns(&browser, stored.len()).await;
    browser
        .wait_until(
            "nothing waits any more",
            "return document.getElementById('waiting-count').textContent === '0';",
            json!([]),
        )
        .await;
    browser.step("approved").await;
}

/// Starts a session on a new incident titled `title`.
async fn start(client: &mut Client, title: &str) -> String {
    let incident = client
        .create_incident(pb::CreateIncidentRequest {
            title: title.into(),
            description: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    client
        .start_session(pb::StartSessionRequest {
            incident_id: incident.id,
            message: format!("What is wrong with {title}?"),
            idempotency_key: String::new(),
        })
        .await
        .unwrap()
        .into_inner()
        .id
}

#[tokio::test]
async fn a_comment_being_typed_survives_the_list_redrawing_and_a_held_session_is_cancelled_from_it()
{
    let mcp = CountedMcp::new();
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(FakeReply::text("Restarting cart.").call(
        "a1",
        "restart_service",
        r#"{"service":"cart"}"#,
    ))
    .reply(FakeReply::text("Restarting queue.").call(
        "b1",
        "restart_service",
        r#"{"service":"queue"}"#,
    ));
    let entry = inquest_tests::resume::fake_provider(&fake, "fake");
    let section = McpSection::new(&mcp.file);
    let app = inquest_tests::spawn_app_with(|c| {
        c.providers = vec![entry];
        c.mcp = Some(section);
        c.approval = ApprovalSection::default();
    })
    .await;
    let mut client = app.client().await;
    let a = start(&mut client, "cart").await;
    until_status(&mut client, &a, pb::SessionStatus::AwaitingApproval).await;

    let mut browser = Browser::start("approval-cancel").await;
    browser.goto(&format!("{}/console/", app.endpoint())).await;
    browser
        .wait_until(
            "a1 listed",
            "return !!document.querySelector('#waiting-list .approval[data-call-id=\"a1\"] textarea') && \
                    document.getElementById('waiting-count').textContent === '1';",
            json!([]),
        )
        .await;
    let box_a1 = "#waiting-list .approval[data-call-id=\"a1\"] textarea.approval-comment";
    browser.type_into(box_a1, "half-typed").await;

    // Another session is held: the list is redrawn with both, and the box
    // being typed in keeps its text and the keyboard focus.
    let b = start(&mut client, "queue").await;
    until_status(&mut client, &b, pb::SessionStatus::AwaitingApproval).await;
    browser
        .wait_until(
            "two held sessions",
            "return document.querySelectorAll('#waiting-list li.waiting').length === 2 && \
                    document.getElementById('waiting-count').textContent === '2';",
            json!([]),
        )
        .await;
    assert_eq!(
        browser
            .js(
                "const e = document.querySelector(arguments[0]); \
                 return [e.value, document.activeElement === e];",
                json!([box_a1]),
            )
            .await,
        json!(["half-typed", true])
    );
    browser.step("typing-kept").await;

    // Cancel from the list ends the held session; its call never runs.
    browser
        .click(&format!(
            "#waiting-list li.waiting[data-session-id=\"{a}\"] > .actions button[data-action=\"cancel\"]"
        ))
        .await;
    browser
        .wait_until(
            "the cancelled session left the list",
            "return !document.querySelector(`#waiting-list li.waiting[data-session-id=\"${arguments[0]}\"]`) && \
                    document.getElementById('waiting-count').textContent === '1';",
            json!([a]),
        )
        .await;
    let cancelled = get_session(&mut client, &a).await;
    assert_eq!(cancelled.status(), pb::SessionStatus::Cancelled);
    assert_eq!(
        approval(&cancelled, "a1").state(),
        pb::ApprovalState::Cancelled
    );
    assert!(mcp.restarts().is_empty(), "a cancelled hold runs nothing");
    browser.step("cancelled").await;
}
