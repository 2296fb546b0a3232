//! Streamed text grows on the page before its turn commits, and the
//! committed turn replaces it. The fake streams the
//! answer in small pieces with a pause between them, so the page renders
//! it more than once before the turn commits.

use inquest_testkit::fake::{FakeProvider, FakeReply, Flavor};
use serde_json::json;

use crate::{
    support::{console_url, dom_roles, wait_for_report},
    webdriver::Browser,
};

#[tokio::test]
async fn streamed_text_grows_on_the_page_until_its_turn_commits() {
    let answer: String = (0..400)
        .map(|i| format!("word{i} "))
        .collect::<String>()
        .trim_end()
        .to_owned();
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.set_streaming(std::time::Duration::from_millis(10), 24);
    fake.reply(FakeReply::text(&answer).usage(10, 400))
        .reply(FakeReply::text("summary"));
    let entry = inquest_tests::resume::fake_provider(&fake, "fake");
    let app = inquest_tests::spawn_app_with(|c| c.providers = vec![entry]).await;
    let mut browser = Browser::start("streaming").await;
    browser.goto(&console_url(&app)).await;
    browser.type_into("#new-title", "Streaming").await;
    browser.type_into("#new-message", "Say a lot.").await;
    // Record every streamed text the page shows, from before the click.
    browser
        .js(
            "window.__seen = []; new MutationObserver(() => { \
               const s = document.getElementById('streaming'); \
               const t = document.getElementById('streaming-text').textContent; \
               if (!s.hidden && t && window.__seen[window.__seen.length - 1] !== t) window.__seen.push(t); \
             }).observe(document.getElementById('streaming'), {subtree: true, childList: true, characterData: true, attributes: true}); \
             return true;",
            json!([]),
        )
        .await;
    browser.click("#new-submit").await;
    browser
        .wait_until(
            "streamed text shown",
            "return window.__seen.length >= 1;",
            json!([]),
        )
        .await;
    browser.step("streaming").await;
    wait_for_report(&browser).await;
    browser.step("committed").await;
    let seen: Vec<String> =
        serde_json::from_value(browser.js("return window.__seen;", json!([])).await).unwrap();
    // It grew: at least two different texts, each a prefix of the answer,
    // each longer than the one before.
    assert!(seen.len() >= 2, "the text grew while streamed: {seen:?}");
    for pair in seen.windows(2) {
        assert!(pair[1].len() > pair[0].len(), "grows: {pair:?}");
    }
    for s in &seen {
        assert!(
            answer.starts_with(s.as_str()),
            "a prefix of the answer: {s}"
        );
    }
    // The committed turn superseded the stream.
    assert_eq!(
        browser
            .js(
                "return document.getElementById('streaming').hidden;",
                json!([])
            )
            .await,
        json!(true)
    );
    assert_eq!(dom_roles(&browser).await, ["user", "assistant"]);
    assert!(
        browser
            .js(
                "return document.querySelector('#turns > li[data-role=\"assistant\"] .content').textContent === arguments[0];",
                json!([answer]),
            )
            .await
            .as_bool()
            .unwrap()
    );
}
