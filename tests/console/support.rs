//! What the console tests share: the page's address, reading the DOM's
//! list of turns, and the API calls that check it against the store.

use inquest_proto::v1::{self as pb, investigations_client::InvestigationsClient};
use inquest_tests::TestApp;
use serde_json::{Value, json};
use tonic::transport::Channel;

use crate::webdriver::Browser;

pub type Client = InvestigationsClient<Channel>;

/// The console's URL on `app` (the gRPC port).
pub fn console_url(app: &TestApp) -> String {
    format!("{}/console/#/incidents", app.endpoint())
}

/// The session page's URL.
pub fn session_url(app: &TestApp, session: &str) -> String {
    format!("{}/console/#/session/{session}", app.endpoint())
}

/// The seqs of the turns the page shows, in DOM order (duplicates kept:
/// the point is to see none).
pub async fn dom_seqs(browser: &Browser) -> Vec<i64> {
    let v = browser
        .js(
            "return [...document.querySelectorAll('#turns > li.turn')].map(e => Number(e.dataset.seq));",
            json!([]),
        )
        .await;
    v.as_array()
        .expect("an array of seqs")
        .iter()
        .map(|s| s.as_i64().expect("a seq"))
        .collect()
}

/// The roles of the turns the page shows, in DOM order.
pub async fn dom_roles(browser: &Browser) -> Vec<String> {
    let v = browser
        .js(
            "return [...document.querySelectorAll('#turns > li.turn')].map(e => e.dataset.role);",
            json!([]),
        )
        .await;
    v.as_array()
        .expect("an array of roles")
        .iter()
        .map(|s| s.as_str().expect("a role").to_owned())
        .collect()
}

/// Waits until the page shows exactly `n` turns.
pub async fn wait_for_turns(browser: &Browser, n: usize) {
    browser
        .wait_until(
            &format!("{n} turns shown"),
            "return document.querySelectorAll('#turns > li.turn').length === arguments[0];",
            json!([n]),
        )
        .await;
}

/// Waits until the session's status badge says `status`.
pub async fn wait_for_status(browser: &Browser, status: &str) {
    browser
        .wait_until(
            &format!("status {status}"),
            "return document.getElementById('session-status').dataset.status === arguments[0];",
            json!([status]),
        )
        .await;
}

/// Waits until the tool call `call_id` is shown in `state`.
pub async fn wait_for_call(browser: &Browser, call_id: &str, state: &str) {
    browser
        .wait_until(
            &format!("call {call_id} {state}"),
            "const e = document.querySelector(`.tool-call[data-call-id=\"${arguments[0]}\"]`); \
             return !!e && e.dataset.state === arguments[1];",
            json!([call_id, state]),
        )
        .await;
}

/// Whether the spinner of `call_id` is visible (rendered, not display:none).
pub async fn spinner_visible(browser: &Browser, call_id: &str) -> bool {
    browser
        .js(
            "const e = document.querySelector(`.tool-call[data-call-id=\"${arguments[0]}\"] .spinner`); \
             return !!e && getComputedStyle(e).display !== 'none' && e.getBoundingClientRect().width > 0;",
            json!([call_id]),
        )
        .await
        == Value::Bool(true)
}

/// Waits until the report is shown.
pub async fn wait_for_report(browser: &Browser) {
    browser
        .wait_until(
            "the report shown",
            "return !document.getElementById('report').hidden;",
            json!([]),
        )
        .await;
}

/// The text of the element with `id`.
pub async fn text_of(browser: &Browser, id: &str) -> String {
    browser
        .js(
            "return document.getElementById(arguments[0]).textContent;",
            json!([id]),
        )
        .await
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Every stored turn's seq, through the API.
pub async fn stored_seqs(client: &mut Client, session: &str) -> Vec<i64> {
    client
        .list_turns(pb::ListTurnsRequest {
            session_id: session.into(),
            after_seq: 0,
            before_seq: 0,
            limit: 1000,
        })
        .await
        .expect("ListTurns")
        .into_inner()
        .turns
        .iter()
        .map(|t| t.seq)
        .collect()
}

/// 1..=n.
pub fn one_to(n: i64) -> Vec<i64> {
    (1..=n).collect()
}
