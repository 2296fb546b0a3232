//! Sizes of tool output: a tool result far over
//! `limits.max_tool_result_bytes` is cut while it streams in and stored
//! with a marker; NUL in a result is kept; a megabyte stderr line of an MCP
//! server is cut, and the server goes on; the built-in file tools describe
//! binary files and cut long ones with a marker.
//!
//! The MCP server is the real Python one (`inquest_testkit::mcp`);
//! its absence fails these tests when `INQUEST_REQUIRE_MCP` is set.

use std::path::PathBuf;

use inquest_agent::McpSection;
use inquest_proto::v1 as pb;
use inquest_testkit::{
    fake::{FakeProvider, FakeReply, Flavor},
    mcp,
};
use inquest_tests::TestApp;
use serde_json::Value;

use crate::agent_support::{app_with_fake, assert_ended, finished, start, tool_result_of, turns};

/// A temporary directory: an `mcpServers` file starting the incident-tools
/// server as `incident`, and an `evidence/` directory for the file tools.
struct Dir(PathBuf);

impl Dir {
    fn new(python: Option<&str>) -> Dir {
        let dir =
            std::env::temp_dir().join(format!("inquest-caps-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(dir.join("evidence")).unwrap();
        if let Some(python) = python {
            let servers = serde_json::json!({"mcpServers": {"incident": {
                "command": python,
                "args": [mcp::incident_tools_script().display().to_string()],
            }}});
            std::fs::write(dir.join("mcp.json"), servers.to_string()).unwrap();
        }
        Dir(dir)
    }

    fn evidence(&self) -> PathBuf {
        self.0.join("evidence")
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The server with the MCP server and `dir`'s evidence, default limits.
async fn app(fake: &FakeProvider, dir: &Dir) -> TestApp {
    let mcp = dir.0.join("mcp.json");
    let evidence = dir.evidence();
    app_with_fake(fake, |c| {
        if mcp.exists() {
            c.mcp = Some(McpSection::new(&mcp));
        }
        c.tools.files_root = Some(evidence);
        c.tools.files_server = Some("evidence".into());
        // A window whose tool-result share (limits.tool_result_window_share)
        // holds a whole capped result: these tests check the stored cut is
        // what the model gets; the window's own cut is tests/api/compaction.rs.
        for p in &mut c.providers {
            p.context_window = Some(1_000_000);
        }
    })
    .await
}

/// The number in a `…[cut by inquest: N more bytes of {what}]` marker at
/// the end of `text`.
fn cut_bytes(text: &str, what: &str) -> u64 {
    let tail = format!(" more bytes of {what}]");
    assert!(
        text.ends_with(&tail),
        "no marker in …{:?}",
        &text[text.len().saturating_sub(300)..]
    );
    let head = &text[..text.len() - tail.len()];
    let start =
        head.rfind("…[cut by inquest: ").expect("marker start") + "…[cut by inquest: ".len();
    head[start..].parse().unwrap()
}

/// The content of the `tool` message a model request carried for `call`.
fn sent_result(body: &Value, call: &str) -> String {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == call)
        .and_then(|m| m["content"].as_str())
        .unwrap_or_else(|| panic!("no result of {call} sent"))
        .to_owned()
}

const RESULT_WHAT: &str = "tool result over limits.max_tool_result_bytes = 65536";

#[tokio::test]
async fn a_five_megabyte_mcp_result_is_cut_to_the_cap_with_a_marker_and_the_server_goes_on() {
    let Some(python) = mcp::python() else {
        return;
    };
    let dir = Dir::new(Some(&python));
    let size = 5 * 1024 * 1024;
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(FakeReply::text("Dumping the log.").call(
        "big",
        "big_output",
        &format!(r#"{{"size": {size}}}"#),
    ))
    .reply(FakeReply::text("Now the service log.").call(
        "after",
        "read_log",
        r#"{"service":"checkout"}"#,
    ))
    .reply(FakeReply::text("Done."))
    .reply(FakeReply::text("S: big log"));
    let app = app(&fake, &dir).await;
    // A default client: its 4 MiB message limit must fit every turn.
    let mut client = app.client().await;
    let id = start(&mut client, "dump everything").await;
    let (report, s) = finished(&mut client, &id, 1).await;
    assert_eq!(report.exit_reason, "completed");
    assert_ended(&s, pb::SessionStatus::Completed, "completed");

    let stored = turns(&mut client, &id).await;
    assert_eq!(
        tool_result_of(&stored[2]),
        ("big".into(), "big_output".into(), false)
    );
    let big = &stored[2].content;
    assert!(
        big.starts_with(&"x".repeat(65536)),
        "the first 64 KiB are kept"
    );
    assert_eq!(
        &big[65536..65537],
        "\n",
        "then the marker, nothing more of the text"
    );
    let cut = cut_bytes(big, RESULT_WHAT);
    // Everything past the cap is counted: the text, and the bytes of the
    // message the transport read past its ceiling and dropped (the Python
    // SDK also sends the text again as structuredContent).
    assert!(cut >= (size - 65536) as u64, "{cut}");
    assert!(big.len() < 65536 + 200);
    // The server answered the next call on the same connection.
    assert_eq!(
        tool_result_of(&stored[4]),
        ("after".into(), "read_log".into(), false)
    );
    assert!(
        stored[4].content.contains("checkout: 12:00:01 ERROR"),
        "{}",
        stored[4].content
    );
    // The model was sent exactly the stored, cut text.
    assert_eq!(&sent_result(&fake.requests()[1].body, "big"), big);
    app.stop().await.unwrap();
}

#[tokio::test]
async fn a_result_just_over_the_cap_is_cut_after_it_arrived() {
    let Some(python) = mcp::python() else {
        return;
    };
    let dir = Dir::new(Some(&python));
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(FakeReply::text("A bit too much.").call("c", "big_output", r#"{"size": 70000}"#))
        .reply(FakeReply::text("Done."))
        .reply(FakeReply::text("S"));
    let app = app(&fake, &dir).await;
    let mut client = app.client().await;
    let id = start(&mut client, "dump").await;
    let (report, _) = finished(&mut client, &id, 1).await;
    assert_eq!(report.exit_reason, "completed");
    let stored = turns(&mut client, &id).await;
    // Under the transport's ceiling: only the text over the cap is cut.
    assert_eq!(cut_bytes(&stored[2].content, RESULT_WHAT), 70000 - 65536);
    app.stop().await.unwrap();
}

#[tokio::test]
async fn an_mcp_result_with_nul_completes_and_reads_back() {
    let Some(python) = mcp::python() else {
        return;
    };
    let dir = Dir::new(Some(&python));
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(FakeReply::text("Reading the padded log.").call("n", "nul_output", "{}"))
        .reply(FakeReply::text("Done."))
        .reply(FakeReply::text("S"));
    let app = app(&fake, &dir).await;
    let mut client = app.client().await;
    let id = start(&mut client, "read it").await;
    let (report, s) = finished(&mut client, &id, 1).await;
    assert_eq!(report.exit_reason, "completed");
    assert_ended(&s, pb::SessionStatus::Completed, "completed");
    let stored = turns(&mut client, &id).await;
    assert_eq!(
        tool_result_of(&stored[2]),
        ("n".into(), "nul_output".into(), false)
    );
    assert!(
        stored[2].content.contains("before\0\0\0after"),
        "{:?}",
        stored[2].content
    );
    assert_eq!(
        sent_result(&fake.requests()[1].body, "n"),
        stored[2].content
    );
    app.stop().await.unwrap();
}

#[tokio::test]
async fn a_megabyte_stderr_line_is_cut_and_the_server_goes_on() {
    let Some(python) = mcp::python() else {
        return;
    };
    let dir = Dir::new(Some(&python));
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(FakeReply::text("Noisy.").call("e", "stderr_flood", r#"{"size": 1048576}"#))
        .reply(FakeReply::text("Again.").call("e2", "stderr_flood", r#"{"size": 1048576}"#))
        .reply(FakeReply::text("Logs.").call("l", "read_log", r#"{"service":"db"}"#))
        .reply(FakeReply::text("Done."))
        .reply(FakeReply::text("S"));
    let app = app(&fake, &dir).await;
    let mut client = app.client().await;
    let id = start(&mut client, "make noise").await;
    let (report, s) = finished(&mut client, &id, 1).await;
    assert_eq!(report.exit_reason, "completed");
    assert_ended(&s, pb::SessionStatus::Completed, "completed");
    let stored = turns(&mut client, &id).await;
    assert_eq!(stored[2].content, "wrote 1048576 bytes to stderr");
    assert_eq!(stored[4].content, "wrote 1048576 bytes to stderr");
    assert_eq!(
        tool_result_of(&stored[6]),
        ("l".into(), "read_log".into(), false)
    );
    assert!(
        stored[6].content.starts_with("db: "),
        "{}",
        stored[6].content
    );
    app.stop().await.unwrap();
}

#[tokio::test]
async fn the_file_tools_describe_a_binary_file_and_cut_a_long_one() {
    let dir = Dir::new(None);
    let mut padded = b"12:00:01 FATAL out of memory\n".to_vec();
    padded.extend(std::iter::repeat_n(0u8, 200_000));
    std::fs::write(dir.evidence().join("crash.log"), &padded).unwrap();
    let line = |i: usize| format!("12:00:{:05} INFO request served {}\n", i, "y".repeat(64));
    let long: String = (0..20_000).map(line).collect();
    std::fs::write(dir.evidence().join("access.log"), &long).unwrap();
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(
        FakeReply::text("Reading both.")
            .call("bin", "read_file", r#"{"path": "crash.log"}"#)
            .call(
                "long",
                "read_file",
                r#"{"path": "access.log", "max_lines": 100000}"#,
            ),
    )
    .reply(FakeReply::text("Done."))
    .reply(FakeReply::text("S"));
    let app = app(&fake, &dir).await;
    let mut client = app.client().await;
    let id = start(&mut client, "read the logs").await;
    let (report, s) = finished(&mut client, &id, 1).await;
    assert_eq!(report.exit_reason, "completed");
    assert_ended(&s, pb::SessionStatus::Completed, "completed");
    let stored = turns(&mut client, &id).await;

    assert_eq!(
        tool_result_of(&stored[2]),
        ("bin".into(), "read_file".into(), false)
    );
    let bin = &stored[2].content;
    assert!(
        bin.starts_with(&format!(
            "binary file, {} bytes; first 256 bytes escaped: 12:00:01 FATAL out of memory\\n\\x00\\x00",
            padded.len()
        )),
        "{bin}"
    );
    assert!(!bin.contains('\0') && bin.len() < 2000);

    assert_eq!(
        tool_result_of(&stored[3]),
        ("long".into(), "read_file".into(), false)
    );
    let cut = &stored[3].content;
    assert!(
        cut.starts_with("    1  12:00:00000 INFO"),
        "{}",
        &cut[..100]
    );
    let shown_lines = cut.lines().count() - 1;
    let what = format!(
        "access.log ({} bytes) over limits.max_tool_result_bytes = 65536; read on with \
         start_line = {}",
        long.len(),
        shown_lines + 1
    );
    let rest = cut_bytes(cut, &what);
    assert_eq!(rest as usize, long.len() - shown_lines * line(0).len());
    assert!(cut.len() <= 65536 + 300);
    app.stop().await.unwrap();
}
