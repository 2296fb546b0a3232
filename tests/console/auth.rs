//! With `[auth] mode = "required"` the page loads without a token (its
//! assets are public), asks for one when a call answers UNAUTHENTICATED,
//! says so when the token is refused, and then works with it: the token
//! (sessionStorage) is sent as `authorization: Bearer` on every call.

use inquest_auth::Role;
use inquest_server::edge::auth::AuthMode;
use serde_json::json;

use crate::{
    support::{console_url, wait_for_status, wait_for_turns},
    webdriver::Browser,
};

#[tokio::test]
async fn with_auth_required_the_page_asks_for_a_token_and_works_with_it() {
    let app = inquest_tests::spawn_app_with(|c| c.auth.mode = AuthMode::Required).await;
    let token = app
        .store
        .create_token(
            "console",
            &inquest_core::Tenant::default_tenant(),
            Role::Operator,
            None,
        )
        .await
        .unwrap()
        .secret;
    let mut browser = Browser::start("auth").await;
    browser.goto(&console_url(&app)).await;
    browser
        .wait_until(
            "the token form shown",
            "return !document.getElementById('token-panel').hidden;",
            json!([]),
        )
        .await;
    assert_eq!(
        browser
            .js(
                "return document.getElementById('incident-list').dataset.state;",
                json!([])
            )
            .await,
        json!("loading"),
        "nothing listed without a token"
    );
    browser.step("asks").await;
    // The token prompt passes axe too (tests/console/a11y.rs has the rest).
    let serious: Vec<_> = crate::a11y::axe(&browser)
        .await
        .into_iter()
        .filter(|v| matches!(v["impact"].as_str(), Some("serious" | "critical")))
        .collect();
    assert!(serious.is_empty(), "the token prompt: {serious:#?}");

    // A wrong token is refused and asked for again.
    browser
        .type_into(
            "#token-input",
            &format!("inq_{}_{}", "0".repeat(32), "0".repeat(64)),
        )
        .await;
    browser.click("#token-submit").await;
    browser
        .wait_until(
            "the refusal said",
            "return !document.getElementById('token-panel').hidden && \
             document.getElementById('token-why').textContent.includes('refused');",
            json!([]),
        )
        .await;
    browser.step("refused").await;

    browser.type_into("#token-input", &token).await;
    browser.click("#token-submit").await;
    browser
        .wait_until(
            "the incident list loaded",
            "return document.getElementById('incident-list').dataset.state === 'loaded';",
            json!([]),
        )
        .await;
    let stored = browser
        .js("return sessionStorage.getItem('inquest.token');", json!([]))
        .await;
    assert_eq!(stored, json!(token));
    // A token is held now: it can be forgotten.
    assert_eq!(
        browser
            .js(
                "return document.getElementById('sign-out').hidden;",
                json!([])
            )
            .await,
        json!(false)
    );

    // Every call now carries it: start an investigation (no providers, so
    // it stays pending) and watch it.
    browser.type_into("#new-title", "Auth check").await;
    browser
        .type_into("#new-message", "Is the token used?")
        .await;
    browser.click("#new-submit").await;
    wait_for_status(&browser, "pending").await;
    wait_for_turns(&browser, 1).await;
    assert_eq!(app.count("incidents").await, 1);
    assert_eq!(app.count("sessions").await, 1);
    browser.step("works").await;

    // Cancel, with the same token (an operator may cancel).
    browser.click("#cancel-button").await;
    wait_for_status(&browser, "cancelled").await;
    let status: String = inquest_tests::connect(&app.db_url)
        .await
        .query_one("SELECT status FROM sessions", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(status, "cancelled");
    browser.step("cancelled").await;
}
