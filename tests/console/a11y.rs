//! Accessibility: axe-core (vendored, `vendor/axe.min.js`) run in the real
//! page on every view: the waiting list with a held session in it, the
//! incident list, an incident page, a held session's page and a long
//! session's page with its compaction and its window's controls. No
//! serious or critical violation on any of them. Also what axe cannot
//! see: every control is reached by Tab, and status is said in words,
//! not by colour alone.

use inquest_core::SideEffect;
use inquest_proto::v1 as pb;
use inquest_testkit::fake::{FakeProvider, FakeReply, Flavor};
use inquest_tests::resume::{fake_provider, tool_classes};
use serde_json::{Value, json};
use std::collections::BTreeMap;

use crate::{held::cut_off_session, long::seed_long_session, webdriver::Browser};

/// axe-core 4.14.1 (MPL-2.0), injected into the page.
const AXE: &str = include_str!("vendor/axe.min.js");

/// Runs axe-core on the page as it is; the violations, each as
/// `{id, impact, help, nodes: [target…]}`.
pub async fn axe(browser: &Browser) -> Vec<Value> {
    browser
        .js(
            &format!(
                "if (!window.axe) {{ {AXE}\n }} \
                 window.__axe = null; \
                 window.axe.run(document, {{ resultTypes: ['violations'] }}) \
                   .then(r => {{ window.__axe = r.violations.map(v => ({{ id: v.id, impact: v.impact, \
                      help: v.help, nodes: v.nodes.map(n => n.target.join(' ')).slice(0, 5) }})); }}, \
                         e => {{ window.__axe = [{{ id: 'axe-failed', impact: 'critical', help: String(e), nodes: [] }}]; }}); \
                 return true;"
            ),
            json!([]),
        )
        .await;
    browser
        .wait_until("axe's results", "return window.__axe !== null;", json!([]))
        .await;
    browser
        .js("return window.__axe;", json!([]))
        .await
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Asserts no serious or critical violation on the page; prints the rest.
pub async fn assert_accessible(browser: &mut Browser, view: &str) {
    browser.step(&format!("axe-{view}")).await;
    let violations = axe(browser).await;
    let (bad, minor): (Vec<_>, Vec<_>) = violations
        .into_iter()
        .partition(|v| matches!(v["impact"].as_str(), Some("serious" | "critical")));
    if !minor.is_empty() {
        eprintln!("{view}: minor or moderate: {minor:#?}");
    }
    assert!(
        bad.is_empty(),
        "{view}: serious or critical violations: {bad:#?}"
    );
}

/// Tabs through the page from its first link (the header's): the ids (or
/// tag.class) of every element focused on the way, until focus leaves
/// the page or comes back to one already seen.
async fn tab_order(browser: &Browser) -> Vec<String> {
    browser
        .js(
            "for (const e of document.querySelectorAll('[data-tab-seen]')) delete e.dataset.tabSeen; \
             const first = document.querySelector('header h1 a'); \
             first.focus(); first.dataset.tabSeen = '1'; \
             return true;",
            json!([]),
        )
        .await;
    let mut seen = Vec::new();
    for _ in 0..400 {
        browser.key("\u{E004}").await;
        let name = browser
            .js(
                "const e = document.activeElement; \
                 if (!e || e === document.body || e.dataset.tabSeen) return null; \
                 e.dataset.tabSeen = '1'; \
                 return e.id || (e.tagName.toLowerCase() + '.' + (e.className || '') + \
                   (e.dataset.action ? ':' + e.dataset.action : ''));",
                json!([]),
            )
            .await;
        match name.as_str() {
            Some(name) => seen.push(name.to_owned()),
            None => break,
        }
    }
    seen
}

#[tokio::test]
async fn every_view_passes_axe_and_its_controls_are_reached_by_keyboard() {
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
    // A held session (awaiting confirmation) for the waiting list.
    let held = cut_off_session(&app, &mut client).await.to_string();
    client
        .send_message(pb::SendMessageRequest {
            session_id: held.clone(),
            message: "did the restart happen?".into(),
            idempotency_key: String::new(),
            if_running: 0,
        })
        .await
        .unwrap();
    let long = seed_long_session(&app, 2_000, 1_980).await;

    let mut browser = Browser::start("a11y").await;
    let base = format!("{}/console/", app.endpoint());

    // The waiting list, with the held session and its actions.
    browser.goto(&format!("{base}#/waiting")).await;
    browser
        .wait_until(
            "the held session listed",
            "return !!document.querySelector(`#waiting-list li.waiting[data-session-id=\"${arguments[0]}\"]`);",
            json!([held]),
        )
        .await;
    assert_accessible(&mut browser, "waiting").await;
    let order = tab_order(&browser).await;
    for control in ["nav-waiting", "nav-incidents"] {
        assert!(
            order.iter().any(|c| c == control),
            "{control} not reached by Tab: {order:?}"
        );
    }
    assert!(
        order.iter().any(|c| c.starts_with("button")),
        "the held session's actions are reached by Tab: {order:?}"
    );

    // The incident list.
    browser.goto(&format!("{base}#/incidents")).await;
    browser
        .wait_until(
            "incidents listed",
            "return document.getElementById('incident-list').dataset.state === 'loaded' && \
                    document.querySelectorAll('#incident-list > li').length >= 2;",
            json!([]),
        )
        .await;
    assert_accessible(&mut browser, "incidents").await;
    let order = tab_order(&browser).await;
    for control in [
        "new-title",
        "new-description",
        "new-message",
        "new-submit",
        "status-filter",
    ] {
        assert!(
            order.iter().any(|c| c == control),
            "{control} not reached by Tab: {order:?}"
        );
    }

    // An incident page.
    let incident = client
        .get_session(pb::GetSessionRequest {
            session_id: held.clone(),
        })
        .await
        .unwrap()
        .into_inner()
        .incident_id;
    browser.goto(&format!("{base}#/incident/{incident}")).await;
    browser
        .wait_until(
            "the incident's sessions",
            "return document.getElementById('incident-sessions').dataset.state === 'loaded';",
            json!([]),
        )
        .await;
    assert_accessible(&mut browser, "incident").await;

    // The held session's page: its confirm and cancel buttons.
    browser.goto(&format!("{base}#/session/{held}")).await;
    browser
        .wait_until(
            "the confirm button",
            "return !document.getElementById('confirm-button').hidden;",
            json!([]),
        )
        .await;
    assert_accessible(&mut browser, "held-session").await;
    // The status is a word, whatever its colour.
    let status = browser
        .js(
            "return document.getElementById('session-status').textContent;",
            json!([]),
        )
        .await;
    assert_eq!(status, "awaiting_confirmation");
    let order = tab_order(&browser).await;
    for control in [
        "confirm-button",
        "cancel-button",
        "follow-up-text",
        "follow-up-send",
    ] {
        assert!(
            order.iter().any(|c| c == control),
            "{control} not reached by Tab: {order:?}"
        );
    }

    // Confirmed: the burst's turns arrive live and each is announced in
    // the status region (the list itself is not live).
    browser.click("#confirm-button").await;
    browser
        .wait_until(
            "a new turn announced",
            "const a = document.getElementById('turn-announcer'); \
             return a.getAttribute('role') === 'status' && /^New turn #[0-9]+: /.test(a.textContent);",
            json!([]),
        )
        .await;
    assert_eq!(
        browser
            .js(
                "return document.getElementById('turns').getAttribute('aria-live');",
                json!([])
            )
            .await,
        Value::Null
    );

    // A long session: its compaction, its window's controls.
    browser.goto(&format!("{base}#/session/{long}")).await;
    browser
        .wait_until(
            "the newest turn",
            "return !!document.querySelector('#turns > li[data-seq=\"2000\"]');",
            json!([]),
        )
        .await;
    assert_accessible(&mut browser, "long-session").await;
    let order = tab_order(&browser).await;
    assert!(
        order.iter().any(|c| c == "turns-older"),
        "'Load older turns' is reached by Tab: {order:?}"
    );
    app.stop().await.expect("stop");
}
