//! An investigation started from the page runs live: turns arrive in
//! order as they are written, the running tool's spinner shows until its
//! result lands, and the report appears with tokens, cost and active time.
//! The real agent with the fake model provider; the tool is a real MCP
//! server (Python SDK) whose tool runs until the test opens its gate, so
//! the spinner is seen while the tool is provably still running.

use std::path::PathBuf;

use inquest_agent::McpSection;
use inquest_proto::v1 as pb;
use inquest_testkit::{
    fake::{FakeProvider, FakeReply, Flavor},
    mcp,
};
use serde_json::json;

use crate::{
    support::{
        console_url, dom_roles, dom_seqs, one_to, spinner_visible, stored_seqs, text_of,
        wait_for_call, wait_for_report, wait_for_status, wait_for_turns,
    },
    webdriver::Browser,
};

/// The fault tests' gated MCP server: `gated_restart(service)` returns once
/// `<GATED_RELEASE_DIR>/<service>` exists.
fn gated_tools_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../crates/inquest/tests/support/gated_tools.py")
}

/// A temporary directory with the `mcpServers` file and the gate directory.
pub struct GatedMcp {
    pub dir: PathBuf,
    pub file: PathBuf,
    pub gates: PathBuf,
}

impl GatedMcp {
    pub fn new() -> GatedMcp {
        let python = mcp::python().unwrap_or_else(|| {
            panic!(
                "the console's live test needs the MCP Python SDK: set INQUEST_TEST_PYTHON \
                 (cargo xtask test makes target/test-python)"
            )
        });
        let dir = std::env::temp_dir().join(format!(
            "inquest-console-mcp-{}",
            uuid::Uuid::new_v4().simple()
        ));
        let gates = dir.join("gates");
        std::fs::create_dir_all(&gates).unwrap();
        let file = dir.join("mcp.json");
        let servers = json!({"mcpServers": {"ops": {
            "command": python,
            "args": [gated_tools_script().display().to_string()],
            "env": {"GATED_RELEASE_DIR": gates.display().to_string()},
        }}});
        std::fs::write(&file, servers.to_string()).unwrap();
        GatedMcp { dir, file, gates }
    }

    /// Lets `gated_restart(service)` return.
    pub fn open(&self, service: &str) {
        std::fs::write(self.gates.join(service), b"go").unwrap();
    }
}

impl Drop for GatedMcp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[tokio::test]
async fn an_investigation_started_from_the_page_runs_live_to_its_report() {
    let mcp = GatedMcp::new();
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(
        FakeReply::text("Checkout is refusing connections; restarting it.")
            .call("r1", "gated_restart", r#"{"service":"checkout"}"#)
            .usage(120, 30),
    )
    .reply(FakeReply::text("Restarted; connections are accepted again.").usage(200, 25))
    .reply(FakeReply::text("Checkout was refusing connections; a restart fixed it.").usage(50, 10));
    let entry = inquest_tests::resume::fake_provider(&fake, "fake");
    let section = McpSection::new(&mcp.file);
    let app = inquest_tests::spawn_app_with(|c| {
        c.providers = vec![entry];
        c.mcp = Some(section);
    })
    .await;
    let mut client = app.client().await;
    let mut browser = Browser::start("live").await;

    browser.goto(&console_url(&app)).await;
    browser
        .wait_until(
            "the incident list loaded",
            "return document.getElementById('incident-list').dataset.state === 'loaded';",
            json!([]),
        )
        .await;
    browser.step("empty").await;

    browser.type_into("#new-title", "Checkout errors").await;
    browser
        .type_into("#new-description", "5xx on /checkout since 12:00")
        .await;
    browser
        .type_into("#new-message", "Why is checkout failing?")
        .await;
    browser.step("form").await;
    browser.click("#new-submit").await;

    // The tool is running (its gate is closed): the spinner shows, and the
    // page has the user turn and the assistant turn, in order.
    browser
        .wait_until(
            "a running tool call",
            "return !!document.querySelector('.tool-call[data-state=\"running\"]');",
            json!([]),
        )
        .await;
    let call_id = browser
        .js(
            "return document.querySelector('.tool-call[data-state=\"running\"]').dataset.callId;",
            json!([]),
        )
        .await
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        spinner_visible(&browser, &call_id).await,
        "the spinner shows"
    );
    let session = browser
        .js("return location.hash.split('/')[2];", json!([]))
        .await
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(dom_seqs(&browser).await, vec![1, 2]);
    assert_eq!(dom_roles(&browser).await, ["user", "assistant"]);
    let running = client
        .get_session(pb::GetSessionRequest {
            session_id: session.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        running.status(),
        pb::SessionStatus::Running,
        "still running"
    );
    // The page read the session when it opened (maybe still pending) and
    // reads it again as turns arrive.
    wait_for_status(&browser, "running").await;
    browser.step("tool-running").await;

    // Its result lands: the spinner settles, the rest arrives live.
    mcp.open("checkout");
    wait_for_call(&browser, &call_id, "done").await;
    assert!(
        !spinner_visible(&browser, &call_id).await,
        "spinner settled"
    );
    wait_for_report(&browser).await;
    browser.step("report").await;

    // Exactly the stored turns, each once, in order.
    let stored = stored_seqs(&mut client, &session).await;
    assert_eq!(stored, one_to(stored.len() as i64));
    wait_for_turns(&browser, stored.len()).await;
    assert_eq!(dom_seqs(&browser).await, stored);
    assert_eq!(
        dom_roles(&browser).await,
        ["user", "assistant", "tool", "assistant"]
    );
    let report = client
        .get_report(pb::GetReportRequest {
            session_id: session.clone(),
            burst: 0,
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        text_of(&browser, "report-summary").await,
        "Checkout was refusing connections; a restart fixed it."
    );
    assert_eq!(
        text_of(&browser, "report-tokens").await,
        format!(
            "session tokens {} in / {} out",
            report.input_tokens, report.output_tokens
        )
    );
    // This burst's figures, the report's writing shown apart.
    let burst = text_of(&browser, "report-burst-figures").await;
    assert!(
        burst.contains(&format!(
            "report writing {} in / {} out",
            report.author_input_tokens, report.author_output_tokens
        )),
        "{burst}"
    );
    // No token held (auth is off): nothing to forget.
    assert_eq!(
        browser
            .js(
                "return document.getElementById('sign-out').hidden;",
                json!([])
            )
            .await,
        json!(true)
    );
    assert!(report.input_tokens >= 320, "{report:?}");
    assert!(!text_of(&browser, "report-cost").await.is_empty());
    assert!(text_of(&browser, "report-active-time").await.ends_with('s'));
    assert_eq!(text_of(&browser, "report-exit").await, report.exit_reason);

    // Back on the list, the incident and its session with its status.
    browser.goto(&console_url(&app)).await;
    browser
        .wait_until(
            "the session listed under its incident",
            "const e = document.querySelector(`[data-session-id=\"${arguments[0]}\"]`); \
             return !!e && e.closest('.incident').querySelector('h3').textContent === 'Checkout errors';",
            json!([session]),
        )
        .await;
    let listed = browser
        .js(
            "return document.querySelector(`[data-session-id=\"${arguments[0]}\"]`).dataset.status;",
            json!([session]),
        )
        .await;
    let s = client
        .get_session(pb::GetSessionRequest {
            session_id: session.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        listed.as_str().unwrap(),
        s.status()
            .as_str_name()
            .trim_start_matches("SESSION_STATUS_")
            .to_lowercase()
    );
    browser.step("list").await;
}
