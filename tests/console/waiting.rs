//! The landing page, "Waiting for you": a session held for confirmation
//! appears there by itself (polling), across incidents, with why it waits
//! and its count in the title and the header, and is confirmed from the
//! list, which it then leaves; another is cancelled from it. And the incident list: filtered by session
//! status, paged with the API's page tokens, updating by itself.

use std::collections::{BTreeMap, BTreeSet};

use inquest_core::{IncidentId, Role, Seq, SessionId, SideEffect, TokenUsage, Turn};
use inquest_proto::v1 as pb;
use inquest_testkit::fake::{FakeProvider, FakeReply, Flavor};
use inquest_tests::resume::{fake_provider, insert_session, insert_turn, tool_classes};
use serde_json::{Value, json};

use crate::{
    held::cut_off_session,
    support::{console_url, text_of},
    webdriver::Browser,
};

/// The console without a fragment: the landing page.
fn landing_url(app: &inquest_tests::TestApp) -> String {
    format!("{}/console/", app.endpoint())
}

#[tokio::test]
async fn a_held_session_waits_for_you_and_is_confirmed_from_the_list() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(FakeReply::text("The restart did not finish.").usage(80, 12))
        .reply(FakeReply::text("Restart state unknown."));
    let classes = BTreeMap::from([("restart_service".to_owned(), SideEffect::Mutating)]);
    let app = inquest_tests::spawn_app_with(|c| {
        c.providers = vec![fake_provider(&fake, "fake")];
        tool_classes(c, &classes);
    })
    .await;
    let mut client = app.client().await;
    let session = cut_off_session(&app, &mut client).await.to_string();

    let mut browser = Browser::start("waiting").await;
    browser.goto(&landing_url(&app)).await;
    browser
        .wait_until(
            "the waiting list loaded, empty",
            "return location.hash === '#/waiting' && \
             !document.getElementById('waiting-view').hidden && \
             document.getElementById('waiting-list').dataset.state === 'loaded' && \
             document.getElementById('waiting-count').textContent === '0';",
            json!([]),
        )
        .await;
    assert_eq!(
        browser.js("return document.title;", json!([])).await,
        json!("Inquest console")
    );
    browser.step("nothing-waits").await;

    // The follow-up finds the cut-off mutating call: the session is held.
    client
        .send_message(pb::SendMessageRequest {
            session_id: session.clone(),
            message: "did the restart happen?".into(),
            idempotency_key: String::new(),
            if_running: 0,
        })
        .await
        .unwrap();
    // Nothing is clicked: the list polls.
    browser
        .wait_until(
            "the held session listed",
            "return !!document.querySelector(`#waiting-list li.waiting[data-session-id=\"${arguments[0]}\"]`);",
            json!([session]),
        )
        .await;
    let entry = browser
        .js(
            "const e = document.querySelector(`#waiting-list li.waiting[data-session-id=\"${arguments[0]}\"]`); \
             return [e.dataset.kind, e.dataset.status, e.querySelector('h3').textContent, \
                     e.querySelector('.why').textContent, \
                     [...e.querySelectorAll('button')].map(b => b.dataset.action), \
                     e.querySelector('a').getAttribute('href')];",
            json!([session]),
        )
        .await;
    assert_eq!(entry[0], "confirmation");
    assert_eq!(entry[1], "awaiting_confirmation");
    assert_eq!(entry[2], "held", "the incident's title");
    assert!(
        entry[3]
            .as_str()
            .unwrap_or_default()
            .contains("restart_service (c1, mutating)"),
        "{entry:?}"
    );
    assert_eq!(entry[4], json!(["confirm", "cancel"]));
    assert_eq!(entry[5], json!(format!("#/session/{session}")));
    assert_eq!(text_of(&browser, "waiting-count").await, "1");
    assert_eq!(
        browser.js("return document.title;", json!([])).await,
        json!("(1) waiting · Inquest console")
    );
    assert_eq!(fake.request_count(), 0, "nothing runs before confirmation");
    browser.step("held").await;

    // A second held session, on another incident, joins the list; Cancel
    // from the list ends it (CancelSession) and it leaves.
    let other = cut_off_session(&app, &mut client).await.to_string();
    client
        .send_message(pb::SendMessageRequest {
            session_id: other.clone(),
            message: "and now?".into(),
            idempotency_key: String::new(),
            if_running: 0,
        })
        .await
        .unwrap();
    browser
        .wait_until(
            "two held sessions counted",
            "return document.querySelectorAll('#waiting-list li.waiting').length === 2 && \
             document.getElementById('waiting-count').textContent === '2' && \
             document.title === '(2) waiting · Inquest console';",
            json!([]),
        )
        .await;
    browser.step("two-held").await;
    browser
        .click(&format!(
            "#waiting-list li.waiting[data-session-id=\"{other}\"] button[data-action=\"cancel\"]"
        ))
        .await;
    browser
        .wait_until(
            "the cancelled session left the list",
            "return !document.querySelector(`#waiting-list li.waiting[data-session-id=\"${arguments[0]}\"]`) && \
             document.getElementById('waiting-count').textContent === '1';",
            json!([other]),
        )
        .await;
    let cancelled = client
        .get_session(pb::GetSessionRequest { session_id: other })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        cancelled.status(),
        pb::SessionStatus::Cancelled,
        "{cancelled:?}"
    );

    browser
        .click(&format!(
            "#waiting-list li.waiting[data-session-id=\"{session}\"] button[data-action=\"confirm\"]"
        ))
        .await;
    browser
        .wait_until(
            "the confirmed session left the list",
            "return !document.querySelector(`#waiting-list li.waiting[data-session-id=\"${arguments[0]}\"]`) && \
             document.getElementById('waiting-count').textContent === '0' && \
             document.title === 'Inquest console';",
            json!([session]),
        )
        .await;
    // ContinueSession ran: the session is no longer held and the model ran.
    let settled = client
        .get_session(pb::GetSessionRequest {
            session_id: session.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_ne!(
        settled.status(),
        pb::SessionStatus::AwaitingConfirmation,
        "{settled:?}"
    );
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    while fake.request_count() == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the model never ran after Confirm"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    browser.step("confirmed").await;
}

/// Stores a session with `status` on `incident` (one user turn).
async fn stored_session(
    db: &tokio_postgres::Client,
    incident: IncidentId,
    status: &str,
) -> SessionId {
    let session = SessionId::new();
    let turn = Turn {
        session_id: session,
        seq: Seq::FIRST,
        role: Role::User,
        content: "what happened?".into(),
        tool_calls_raw: json!([]),
        recovery_plan_raw: None,
        tool_call_id: None,
        tool_name: None,
        is_error: false,
        usage: TokenUsage::default(),
        created_at: time::OffsetDateTime::now_utc(),
    };
    insert_session(db, incident, session, status, std::slice::from_ref(&turn)).await;
    insert_turn(db, &turn).await.unwrap();
    session
}

async fn listed_incidents(browser: &Browser) -> Vec<String> {
    let v = browser
        .js(
            "return [...document.querySelectorAll('#incident-list > li.incident')].map(e => e.dataset.incidentId);",
            json!([]),
        )
        .await;
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn the_incident_list_filters_by_status_pages_and_updates_by_itself() {
    let app = inquest_tests::spawn_app().await;
    let mut client = app.client().await;
    let db = inquest_tests::connect(&app.db_url).await;
    // 25 incidents: more than the console's page of 20. Every fifth has a
    // failed session, the others a completed one.
    let mut all = BTreeSet::new();
    let mut failed = BTreeSet::new();
    for i in 0..25 {
        let incident = client
            .create_incident(pb::CreateIncidentRequest {
                title: format!("incident {i:02}"),
                description: String::new(),
            })
            .await
            .unwrap()
            .into_inner();
        let id = IncidentId::parse(&incident.id).unwrap();
        let status = if i % 5 == 0 { "failed" } else { "completed" };
        stored_session(&db, id, status).await;
        all.insert(incident.id.clone());
        if status == "failed" {
            failed.insert(incident.id);
        }
    }

    let mut browser = Browser::start("incidents").await;
    browser.goto(&console_url(&app)).await;
    browser
        .wait_until(
            "the first page",
            "return document.getElementById('incident-list').dataset.state === 'loaded' && \
             document.querySelectorAll('#incident-list > li.incident').length === 20 && \
             !document.getElementById('incidents-more').hidden;",
            json!([]),
        )
        .await;
    browser.step("first-page").await;
    browser.click("#incidents-more").await;
    browser
        .wait_until(
            "the second page",
            "return document.getElementById('incident-list').dataset.pages === '2' && \
             document.getElementById('incidents-more').hidden;",
            json!([]),
        )
        .await;
    let shown = listed_incidents(&browser).await;
    assert_eq!(shown.len(), 25, "each incident once: {shown:?}");
    assert_eq!(shown.iter().cloned().collect::<BTreeSet<_>>(), all);
    browser.step("more").await;

    // A new incident shows up without Refresh.
    let newer = client
        .create_incident(pb::CreateIncidentRequest {
            title: "the newest".into(),
            description: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    browser
        .wait_until(
            "the new incident listed by itself",
            "return document.querySelector('#incident-list > li.incident')?.dataset.incidentId === arguments[0];",
            json!([newer.id]),
        )
        .await;

    // Filtered to failed sessions: only their incidents, with a linkable URL.
    browser
        .js(
            "const s = document.getElementById('status-filter'); s.value = 'failed'; \
             s.dispatchEvent(new Event('change'));",
            json!([]),
        )
        .await;
    browser
        .wait_until(
            "the failed filter applied",
            "const l = document.getElementById('incident-list'); \
             return location.hash === '#/incidents?status=failed' && l.dataset.filter === 'failed' && \
             l.dataset.state === 'loaded';",
            json!([]),
        )
        .await;
    let shown = listed_incidents(&browser).await;
    assert_eq!(
        shown.iter().cloned().collect::<BTreeSet<_>>(),
        failed,
        "{shown:?}"
    );
    let statuses = browser
        .js(
            "return [...document.querySelectorAll('#incident-list li[data-status]')].map(e => e.dataset.status);",
            json!([]),
        )
        .await;
    assert_eq!(statuses, json!(vec!["failed"; 5]));
    browser.step("filtered").await;

    // The filtered URL opened directly keeps its filter.
    browser
        .goto(&format!(
            "{}/console/#/incidents?status=completed",
            app.endpoint()
        ))
        .await;
    browser
        .wait_until(
            "the completed filter from the URL",
            "const l = document.getElementById('incident-list'); \
             return l.dataset.filter === 'completed' && l.dataset.state === 'loaded' && \
             document.getElementById('status-filter').value === 'completed';",
            json!([]),
        )
        .await;
    assert_eq!(listed_incidents(&browser).await.len(), 20);
    browser.step("completed").await;
}
