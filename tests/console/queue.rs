//! The follow-up box while a burst runs: a message is queued behind the
//! burst (the default) or interrupts it. A queued message is shown as
//! such ("queued, position N") until its burst opens, then once as a user
//! turn; an interrupt stops the burst (exit `interrupted_by_user`) and
//! runs the message at once. The fake holds its answers, so the burst is
//! running for as long as the test needs.

use std::time::Duration;

use inquest_proto::v1 as pb;
use inquest_testkit::fake::{FakeProvider, FakeReply, Flavor};
use serde_json::json;

use crate::{
    support::{Client, dom_seqs, session_url, stored_seqs, wait_for_turns},
    webdriver::{Browser, HANG_GUARD},
};

const ASK: &str = "why is checkout slow?";
const PRICING: &str = "It's not the DB, look at pricing-svc.";
const SECOND: &str = "pricing-svc deployed at 14:05; its cache misses doubled.";

async fn started(client: &mut Client) -> String {
    let incident = client
        .create_incident(pb::CreateIncidentRequest {
            title: "queue".into(),
            description: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    client
        .start_session(pb::StartSessionRequest {
            incident_id: incident.id,
            message: ASK.into(),
            idempotency_key: String::new(),
        })
        .await
        .unwrap()
        .into_inner()
        .id
}

async fn session(client: &mut Client, id: &str) -> pb::Session {
    client
        .get_session(pb::GetSessionRequest {
            session_id: id.into(),
        })
        .await
        .unwrap()
        .into_inner()
}

async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    while !check() {
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until the session settles (neither pending nor running).
async fn settled(client: &mut Client, id: &str) -> pb::Session {
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    loop {
        let s = session(client, id).await;
        if !matches!(
            s.status(),
            pb::SessionStatus::Pending | pb::SessionStatus::Running
        ) {
            return s;
        }
        assert!(tokio::time::Instant::now() < deadline, "{id} never settled");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// How many user turns shown hold `text`.
async fn user_turns_with(browser: &Browser, text: &str) -> i64 {
    browser
        .js(
            "return [...document.querySelectorAll('#turns > li.turn[data-role=\"user\"] .content')]\
             .filter(e => e.textContent === arguments[0]).length;",
            json!([text]),
        )
        .await
        .as_i64()
        .unwrap()
}

/// The queued messages shown: their state line and text.
async fn queued_shown(browser: &Browser) -> serde_json::Value {
    browser
        .js(
            "return document.getElementById('queued').hidden ? [] : \
             [...document.querySelectorAll('#queued-list > li.queued')]\
             .map(e => [e.querySelector('.queued-state').textContent, e.querySelector('.content').textContent]);",
            json!([]),
        )
        .await
}

#[tokio::test]
async fn a_follow_up_sent_during_a_burst_is_queued_then_shown_once_as_a_turn() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(FakeReply::text("Checking the database first."))
        .reply(FakeReply::text("S1"))
        .reply(FakeReply::text(SECOND))
        .reply(FakeReply::text("S2"));
    fake.hold_answers();
    let entry = inquest_tests::resume::fake_provider(&fake, "fake");
    let app = inquest_tests::spawn_app_with(|c| c.providers = vec![entry]).await;
    let mut client = app.client().await;
    let id = started(&mut client).await;
    let mut browser = Browser::start("queue").await;
    browser.goto(&session_url(&app, &id)).await;
    wait_for_turns(&browser, 1).await;
    eventually("the first model call", || fake.request_count() == 1).await;
    assert_eq!(
        browser
            .js(
                "return document.getElementById('follow-up-mode').value;",
                json!([])
            )
            .await,
        json!("queue"),
        "Queue is the default"
    );

    browser.type_into("#follow-up-text", PRICING).await;
    browser.click("#follow-up-send").await;
    browser
        .wait_until(
            "the message shown as queued",
            "return !document.getElementById('queued').hidden;",
            json!([]),
        )
        .await;
    assert_eq!(
        queued_shown(&browser).await,
        json!([["queued, position 1", PRICING]])
    );
    // Stored as a queued input, not a turn; the burst still runs.
    assert_eq!(app.count("queued_messages").await, 1);
    assert_eq!(stored_seqs(&mut client, &id).await, [1]);
    assert_eq!(user_turns_with(&browser, PRICING).await, 0);
    assert_eq!(
        session(&mut client, &id).await.status(),
        pb::SessionStatus::Running
    );
    browser.step("queued").await;

    // A page opened now (another person's browser) shows the queue too:
    // GetSession names it. (Away first: the same URL again would keep the
    // page, and what it learnt.)
    browser.goto("about:blank").await;
    browser.goto(&session_url(&app, &id)).await;
    wait_for_turns(&browser, 1).await;
    browser
        .wait_until(
            "the queue shown on a page opened after it",
            "return !document.getElementById('queued').hidden;",
            json!([]),
        )
        .await;
    assert_eq!(
        queued_shown(&browser).await,
        json!([["queued, position 1", PRICING]])
    );

    fake.release_answers();
    let s = settled(&mut client, &id).await;
    assert_eq!(s.status(), pb::SessionStatus::Idle, "{s:?}");
    let stored = stored_seqs(&mut client, &id).await;
    wait_for_turns(&browser, stored.len()).await;
    assert_eq!(dom_seqs(&browser).await, stored);
    // Its burst opened: a user turn, shown once, and no longer queued.
    assert_eq!(user_turns_with(&browser, PRICING).await, 1);
    assert_eq!(queued_shown(&browser).await, json!([]));
    assert_eq!(app.count("queued_messages").await, 0);
    assert_eq!(fake.request_count(), 4, "two bursts, each with its report");
    browser.step("ran").await;
}

#[tokio::test]
async fn a_follow_up_sent_with_interrupt_stops_the_burst_and_runs_at_once() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    // The first answer is held, then abandoned by the interrupt: nothing
    // of it is stored or shown.
    fake.reply(FakeReply::text("The culprit is the database."))
        .reply(FakeReply::text(SECOND))
        .reply(FakeReply::text("S2"));
    fake.hold_answers();
    let entry = inquest_tests::resume::fake_provider(&fake, "fake");
    let app = inquest_tests::spawn_app_with(|c| c.providers = vec![entry]).await;
    let mut client = app.client().await;
    let id = started(&mut client).await;
    let mut browser = Browser::start("interrupt").await;
    browser.goto(&session_url(&app, &id)).await;
    wait_for_turns(&browser, 1).await;
    eventually("the first model call", || fake.request_count() == 1).await;

    browser
        .js(
            "document.getElementById('follow-up-mode').value = 'interrupt';",
            json!([]),
        )
        .await;
    browser.type_into("#follow-up-text", PRICING).await;
    browser.click("#follow-up-send").await;
    // The interrupted burst stopped and the message's burst started: its
    // model call is in flight (held), the session says why the last
    // burst ended, and the page shows the message as a turn, once.
    eventually("the interrupting burst's model call", || {
        fake.request_count() == 2
    })
    .await;
    let s = session(&mut client, &id).await;
    assert_eq!(s.exit_reason, "interrupted_by_user", "{s:?}");
    browser
        .wait_until(
            "the message shown as a turn",
            "return [...document.querySelectorAll('#turns > li.turn[data-role=\"user\"] .content')]\
             .some(e => e.textContent === arguments[0]);",
            json!([PRICING]),
        )
        .await;
    assert_eq!(user_turns_with(&browser, PRICING).await, 1);
    assert_eq!(queued_shown(&browser).await, json!([]));
    browser.step("interrupted").await;

    fake.release_answers();
    let s = settled(&mut client, &id).await;
    assert_eq!(s.status(), pb::SessionStatus::Idle, "{s:?}");
    let stored = stored_seqs(&mut client, &id).await;
    wait_for_turns(&browser, stored.len()).await;
    assert_eq!(dom_seqs(&browser).await, stored);
    assert_eq!(user_turns_with(&browser, PRICING).await, 1);
    assert_eq!(queued_shown(&browser).await, json!([]));
    let page = browser
        .js(
            "return document.getElementById('turns').textContent;",
            json!([]),
        )
        .await;
    let page = page.as_str().unwrap();
    assert!(page.contains(SECOND), "{page}");
    assert!(!page.contains("culprit"), "{page}");
    browser.step("ran").await;
}

#[tokio::test]
async fn a_cancel_drops_the_queue_and_the_page_stops_showing_it_queued() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(FakeReply::text("Checking the database first."));
    fake.hold_answers();
    let entry = inquest_tests::resume::fake_provider(&fake, "fake");
    let app = inquest_tests::spawn_app_with(|c| c.providers = vec![entry]).await;
    let mut client = app.client().await;
    let id = started(&mut client).await;
    let mut browser = Browser::start("queue-cancel").await;
    browser.goto(&session_url(&app, &id)).await;
    wait_for_turns(&browser, 1).await;
    eventually("the first model call", || fake.request_count() == 1).await;
    for text in [PRICING, "And the cache hit rate."] {
        browser.type_into("#follow-up-text", text).await;
        browser.click("#follow-up-send").await;
        browser
            .wait_until(
                "the message shown as queued",
                "return [...document.querySelectorAll('#queued-list .content')].some(e => e.textContent === arguments[0]);",
                json!([text]),
            )
            .await;
    }
    assert_eq!(
        queued_shown(&browser).await,
        json!([
            ["queued, position 1", PRICING],
            ["queued, position 2", "And the cache hit rate."]
        ])
    );
    assert_eq!(app.count("queued_messages").await, 2);

    browser.click("#cancel-button").await;
    let s = settled(&mut client, &id).await;
    assert_eq!(s.status(), pb::SessionStatus::Cancelled, "{s:?}");
    assert_eq!(app.count("queued_messages").await, 0);
    browser
        .wait_until(
            "the queue no longer shown",
            "return document.getElementById('queued').hidden && \
             document.getElementById('session-status').dataset.status === 'cancelled';",
            json!([]),
        )
        .await;
    // Neither message became a turn; the session's notice says what the
    // cancel dropped, and the page shows exactly the stored turns.
    let stored = stored_seqs(&mut client, &id).await;
    wait_for_turns(&browser, stored.len()).await;
    assert_eq!(dom_seqs(&browser).await, stored);
    assert_eq!(user_turns_with(&browser, PRICING).await, 0);
    let notices = browser
        .js(
            "return [...document.querySelectorAll('#turns > li.turn[data-role=\"notice\"] .content')].map(e => e.textContent);",
            json!([]),
        )
        .await;
    assert_eq!(notices.as_array().unwrap().len(), 1, "{notices}");
    browser.step("cancelled").await;
}

/// The waiting list shows a session with queued messages, with the
/// messages and a Cancel action, beside a session held for confirmation;
/// a cancel from the list drops the queue and the entry. The list's
/// screenshot is the README's (`docs/console-waiting.png`, rewritten when
/// INQUEST_UPDATE_SCREENSHOTS=1).
#[tokio::test]
async fn the_waiting_list_shows_queued_messages_and_cancels_from_there() {
    use std::collections::BTreeMap;

    use inquest_core::SideEffect;
    use inquest_tests::resume::tool_classes;

    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(FakeReply::text("Checking the database first."));
    fake.hold_answers();
    let classes = BTreeMap::from([("restart_service".to_owned(), SideEffect::Mutating)]);
    let entry = inquest_tests::resume::fake_provider(&fake, "fake");
    let app = inquest_tests::spawn_app_with(|c| {
        c.providers = vec![entry];
        tool_classes(c, &classes);
    })
    .await;
    let mut client = app.client().await;
    // Held for confirmation: a cut-off mutating call, then a follow-up.
    let held = crate::held::cut_off_session(&app, &mut client)
        .await
        .to_string();
    client
        .send_message(pb::SendMessageRequest {
            session_id: held.clone(),
            message: "did the restart happen?".into(),
            idempotency_key: String::new(),
            if_running: 0,
        })
        .await
        .unwrap();
    settled(&mut client, &held).await;
    // Running, with two messages queued behind its held model call.
    let id = started(&mut client).await;
    eventually("the model call", || fake.request_count() >= 1).await;
    for (text, key) in [(PRICING, "w-1"), ("And the cache hit rate.", "w-2")] {
        let sent = client
            .send_message(pb::SendMessageRequest {
                session_id: id.clone(),
                message: text.into(),
                idempotency_key: key.into(),
                if_running: pb::IfRunning::Enqueue.into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert!(sent.queued, "{sent:?}");
    }

    let mut browser = Browser::start("waiting-queued").await;
    browser
        .goto(&format!("{}/console/#/waiting", app.endpoint()))
        .await;
    let entry = "const e = document.querySelector(`#waiting-list li.waiting[data-session-id=\"${arguments[0]}\"]`); \
                 return e ? { kind: e.dataset.kind, why: e.querySelector('.why').textContent, \
                   queued: [...e.querySelectorAll('.queued-messages > li.queued')] \
                     .map(q => [q.querySelector('.queued-state').textContent, q.querySelector('.content').textContent]), \
                   actions: [...e.querySelectorAll('.actions button')].map(b => b.dataset.action) } : null;";
    browser
        .wait_until(
            "both entries listed",
            "return document.querySelectorAll('#waiting-list li.waiting').length === 2 && \
                    document.getElementById('waiting-count').textContent === '2';",
            json!([]),
        )
        .await;
    let shown = browser.js(entry, json!([id])).await;
    assert_eq!(shown["kind"], "queued", "{shown}");
    assert_eq!(
        shown["queued"],
        json!([
            ["queued, position 1", PRICING],
            ["queued, position 2", "And the cache hit rate."]
        ]),
        "{shown}"
    );
    assert!(
        shown["why"]
            .as_str()
            .unwrap_or_default()
            .contains("2 messages queued"),
        "{shown}"
    );
    assert_eq!(shown["actions"], json!(["cancel"]), "{shown}");
    let confirm = browser.js(entry, json!([held])).await;
    assert_eq!(confirm["kind"], "confirmation", "{confirm}");
    let png = browser.step("waiting-list").await;
    if std::env::var_os("INQUEST_UPDATE_SCREENSHOTS").is_some() {
        let docs =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/console-waiting.png");
        std::fs::copy(&png, &docs).expect("copying the screenshot to docs/");
    }

    // Cancel from the list: the session is cancelled, its queue dropped,
    // and the entry leaves the list.
    browser
        .click(&format!(
            "#waiting-list li.waiting[data-session-id=\"{id}\"] button[data-action=\"cancel\"]"
        ))
        .await;
    browser
        .wait_until(
            "the queued entry gone",
            "return !document.querySelector(`#waiting-list li.waiting[data-session-id=\"${arguments[0]}\"]`) && \
                    document.getElementById('waiting-count').textContent === '1';",
            json!([id]),
        )
        .await;
    let s = session(&mut client, &id).await;
    assert_eq!(s.status(), pb::SessionStatus::Cancelled, "{s:?}");
    assert!(s.queued_messages.is_empty(), "{s:?}");
    assert_eq!(app.count("queued_messages").await, 0);
    fake.release_answers();
    app.stop().await.expect("stop");
}
