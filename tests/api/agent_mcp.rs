//! MCP tools in the real loop: a real MCP server written with the official
//! Python SDK (`inquest_testkit::mcp`), started over stdio from an
//! `mcpServers` file, as `[mcp] config` names it.
//!
//! Skipped loudly when the SDK is not importable, unless
//! `INQUEST_REQUIRE_MCP` is set (then a missing SDK fails the test).

use std::path::PathBuf;

use inquest_agent::{McpSection, Skill};
use inquest_core::{SessionId, tool_idempotency_key};
use inquest_proto::v1 as pb;
use inquest_testkit::{
    fake::{FakeProvider, FakeReply, Flavor},
    mcp,
};
use inquest_tests::TestApp;

use crate::agent_support::{
    app_with_fake, assert_ended, assistant, eventually, finished, shapes, start, tool_result_of,
    turns,
};

const ASK: &str = "why is checkout slow?";

/// A temporary directory holding an `mcpServers` file that starts the
/// incident-tools server as `incident`.
pub(crate) struct McpFile {
    dir: PathBuf,
    pub(crate) file: PathBuf,
}

impl McpFile {
    pub(crate) fn new(python: &str) -> McpFile {
        let dir =
            std::env::temp_dir().join(format!("inquest-mcp-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("mcp.json");
        let servers = serde_json::json!({"mcpServers": {"incident": {
            "command": python,
            "args": [mcp::incident_tools_script().display().to_string()],
        }}});
        std::fs::write(&file, servers.to_string()).unwrap();
        McpFile { dir, file }
    }
}

impl Drop for McpFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The server with the MCP server and the evidence files as tools, and a
/// skill for each plus one for a server that is not configured.
async fn mcp_app(fake: &FakeProvider, mcp: &McpFile) -> TestApp {
    let section = McpSection::new(&mcp.file);
    app_with_fake(fake, |c| {
        c.mcp = Some(section);
        c.skills = vec![
            Skill {
                name: "incident-ops".into(),
                server: "incident".into(),
                prompt: "Read the service logs first.".into(),
            },
            Skill {
                name: "log-forensics".into(),
                server: "evidence".into(),
                prompt: "Start from the deploy log.".into(),
            },
            Skill {
                name: "k8s".into(),
                server: "kubernetes".into(),
                prompt: "Look at the pods.".into(),
            },
        ];
    })
    .await
}

#[tokio::test]
async fn mcp_tool_results_are_persisted_and_reported_with_their_server_and_skill() {
    let Some(python) = mcp::python() else {
        return;
    };
    let mcp = McpFile::new(&python);
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(FakeReply::text("Reading the logs.").call(
        "m1",
        "read_log",
        r#"{"service":"checkout"}"#,
    ))
    .reply(FakeReply::text("Checking the call metadata.").call("m2", "echo_meta", "{}"))
    .reply(FakeReply::text("Connections are refused."))
    .reply(FakeReply::text("S: connection refused"));
    let app = mcp_app(&fake, &mcp).await;
    let mut client = app.client().await;
    let id = start(&mut client, ASK).await;

    let (report, s) = finished(&mut client, &id, 1).await;
    assert_eq!(report.exit_reason, "completed");
    assert_eq!(report.tool_calls, 2);
    assert_eq!(report.servers_used, ["incident"]);
    assert_eq!(report.skills_loaded, ["incident-ops", "log-forensics"]);
    assert_eq!(report.skills_used, ["incident-ops"]);
    assert_ended(&s, pb::SessionStatus::Completed, "completed");

    let stored = turns(&mut client, &id).await;
    let got = shapes(&stored);
    assert_eq!(got.len(), 6);
    assert_eq!(
        got[1],
        assistant(
            "Reading the logs.",
            &[("m1", "read_log", r#"{"service":"checkout"}"#)]
        )
    );
    assert_eq!(
        tool_result_of(&stored[2]),
        ("m1".into(), "read_log".into(), false)
    );
    assert!(
        stored[2]
            .content
            .contains("checkout: 12:00:01 ERROR connection refused"),
        "{}",
        stored[2].content
    );
    // The server saw the call's idempotency key in `_meta`.
    assert_eq!(
        tool_result_of(&stored[4]),
        ("m2".into(), "echo_meta".into(), false)
    );
    let key = tool_idempotency_key(SessionId::parse(&id).unwrap(), "m2");
    assert!(
        stored[4]
            .content
            .contains(&format!("\"idempotency_key\": \"{key}\"")),
        "{} lacks {key}",
        stored[4].content
    );
    // The MCP tools were offered to the model next to the file tools.
    let offered = fake.requests()[0].body["tools"].to_string();
    for tool in ["read_log", "echo_meta", "restart_service", "list_files"] {
        assert!(offered.contains(tool), "{tool} not offered");
    }
    app.stop().await.unwrap();
}

#[tokio::test]
async fn cancelling_while_an_mcp_tool_runs_records_its_result_and_stops() {
    let Some(python) = mcp::python() else {
        return;
    };
    let mcp = McpFile::new(&python);
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(FakeReply::text("Waiting on the slow query.").call(
        "slow1",
        "sleep",
        r#"{"seconds": 600}"#,
    ));
    let app = mcp_app(&fake, &mcp).await;
    let mut client = app.client().await;
    let id = start(&mut client, ASK).await;
    let sid = SessionId::parse(&id).unwrap();
    eventually("the tool call runs", || {
        !app.turn_log.live().running_calls(sid).is_empty()
    })
    .await;

    client
        .cancel_session(pb::CancelSessionRequest {
            session_id: id.clone(),
        })
        .await
        .unwrap();
    let (report, s) = finished(&mut client, &id, 1).await;
    assert_eq!(report.exit_reason, "cancelled");
    assert_ended(&s, pb::SessionStatus::Cancelled, "cancelled");
    // The call's result records the cut-off, and it stays stored.
    let stored = turns(&mut client, &id).await;
    assert_eq!(stored.len(), 3);
    assert_eq!(
        tool_result_of(&stored[2]),
        ("slow1".into(), "sleep".into(), true)
    );
    assert!(
        stored[2].content.contains("cancelled"),
        "{}",
        stored[2].content
    );
    // A call cut off mid-run may have reached its server.
    assert_eq!(report.servers_used, ["incident"]);
    assert_eq!(fake.request_count(), 1);
    app.stop().await.unwrap();
}
