//! Model text is Markdown, rendered sanitized: an assistant answer and a
//! report written by the (fake) model through the real agent, each holding
//! a `<script>`, an `onerror=` handler, a `javascript:` link and an inline
//! event handler, show their headings, emphasis, lists and code as HTML,
//! and nothing in them runs or survives as an attribute. The user's words
//! stay preformatted text.

use inquest_proto::v1 as pb;
use inquest_testkit::fake::{FakeProvider, FakeReply, Flavor};
use serde_json::{Value, json};

use crate::{
    support::{session_url, wait_for_report, wait_for_turns},
    webdriver::Browser,
};

/// Markdown with every way a stored text could try to run script.
fn hostile(heading: &str, flag: u32) -> String {
    format!(
        "## {heading}\n\n\
         **Cause.** The pool is *exhausted*.\n\n\
         - one\n- two\n\n\
         `SELECT 1`\n\n\
         <script>window.__pwned = {flag};</script>\n\n\
         <img src=\"x\" onerror=\"window.__pwned = {flag} + 1\">\n\n\
         [the runbook](javascript:window.__pwned={flag}+2)\n\n\
         <a href=\"https://example.invalid/\" onclick=\"window.__pwned={flag}+3\">a link</a>\n\n\
         <svg><script>window.__pwned = {flag} + 4</script></svg>\n"
    )
}

#[tokio::test]
async fn model_markdown_is_rendered_and_nothing_in_it_runs() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(FakeReply::text(&hostile("Answer", 10)).usage(40, 20))
        .reply(FakeReply::text(&hostile("Report", 20)).usage(30, 15));
    let entry = inquest_tests::resume::fake_provider(&fake, "fake");
    let app = inquest_tests::spawn_app_with(|c| c.providers = vec![entry]).await;
    let mut client = app.client().await;
    let incident = client
        .create_incident(pb::CreateIncidentRequest {
            title: "markdown".into(),
            description: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let question = "<b>not bold</b> and **not bold either**";
    let session = client
        .start_session(pb::StartSessionRequest {
            incident_id: incident.id,
            message: question.into(),
            idempotency_key: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let mut browser = Browser::start("markdown").await;
    browser.goto(&session_url(&app, &session.id)).await;
    wait_for_turns(&browser, 2).await;
    wait_for_report(&browser).await;
    browser.step("rendered").await;

    let seen = browser
        .js(
            "const a = document.querySelector('#turns > li[data-role=\"assistant\"] .markdown'); \
             const r = document.getElementById('report-summary'); \
             const u = document.querySelector('#turns > li[data-role=\"user\"] .content'); \
             const inside = (el, css) => el ? el.querySelectorAll(css).length : -1; \
             const handlers = (el) => el ? [...el.querySelectorAll('*')].filter(e => \
               [...e.attributes].some(x => x.name.startsWith('on'))).length : -1; \
             const badLinks = (el) => el ? [...el.querySelectorAll('a')].filter(e => \
               /^\\s*javascript:/i.test(e.getAttribute('href') || '')).length : -1; \
             return { \
               pwned: window.__pwned === undefined ? null : window.__pwned, \
               answer: [inside(a, 'h2'), inside(a, 'strong'), inside(a, 'em'), inside(a, 'li'), inside(a, 'code')], \
               report: [inside(r, 'h2'), inside(r, 'strong'), inside(r, 'li')], \
               scripts: document.querySelectorAll('#turns script, #report script').length, \
               handlers: handlers(a) + handlers(r), \
               badLinks: badLinks(a) + badLinks(r), \
               links: [...a.querySelectorAll('a[href]')].map(e => [e.getAttribute('target'), e.getAttribute('rel')]), \
               user: [u.tagName, u.textContent, u.querySelectorAll('b, strong').length] \
             };",
            json!([]),
        )
        .await;
    assert_eq!(seen["pwned"], Value::Null, "stored content ran: {seen}");
    assert_eq!(seen["answer"], json!([1, 1, 1, 2, 1]), "{seen}");
    assert_eq!(seen["report"], json!([1, 1, 2]), "{seen}");
    assert_eq!(seen["scripts"], json!(0), "{seen}");
    assert_eq!(seen["handlers"], json!(0), "{seen}");
    assert_eq!(seen["badLinks"], json!(0), "{seen}");
    for link in seen["links"].as_array().unwrap() {
        assert_eq!(link, &json!(["_blank", "noopener noreferrer"]), "{seen}");
    }
    assert_eq!(seen["user"], json!(["PRE", question, 0]), "{seen}");
    app.stop().await.expect("stop");
}
