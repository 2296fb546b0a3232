//! `McpTools` against a real MCP server this project did not write the
//! protocol side of: `crates/inquest-testkit/mcp_servers/incident_tools.py`, built on the
//! official Python SDK (PyPI `mcp`), over stdio and streamable HTTP.
//!
//! Needs `python3 -m pip install 'mcp==2.3.0'` (or `INQUEST_TEST_PYTHON`
//! pointing at an interpreter that has it). Without it these tests skip
//! loudly, unless `INQUEST_REQUIRE_MCP` is set: then they fail.

mod support;

use std::time::Duration;

use inquest_agent::mcp::{
    McpError, McpOptions, McpSection, McpServer, McpServers, McpTools, McpTransport, ToolLimits,
    content::MAX_RESULT_BYTES,
};
use inquest_core::{SessionId, SideEffect, ToolServers, tool_idempotency_key};
use inquest_testkit::mcp::incident_tools_server;
use serde_json::{Value, json};

use support::{TempDir, alive, call, options, python_or_skip, raw_call, wait_gone};

#[tokio::test]
async fn catalog_comes_from_annotations_and_overrides_from_a_config_file() {
    let python = python_or_skip!();
    let dir = TempDir::new();
    let script = inquest_testkit::mcp::incident_tools_script();
    let servers = json!({"mcpServers": {"incidents": {"command": python, "args": [script]}}});
    std::fs::write(dir.path("mcp.json"), servers.to_string()).unwrap();
    let section: McpSection = serde_json::from_value(json!({
        "config": dir.path("mcp.json"),
        "side_effects": {"tools": {"page_oncall": "idempotent", "read_log": "mutating"}},
    }))
    .unwrap();
    let tools = McpTools::start(&section).await.unwrap();

    assert!(tools.unavailable().is_empty() && tools.skipped().is_empty());
    let catalog = tools.snapshot();
    for (tool, annotated, effective) in [
        ("read_log", SideEffect::ReadOnly, SideEffect::Mutating),
        (
            "scale_service",
            SideEffect::Idempotent,
            SideEffect::Idempotent,
        ),
        (
            "restart_service",
            SideEffect::Mutating,
            SideEffect::Mutating,
        ),
        ("page_oncall", SideEffect::Mutating, SideEffect::Idempotent),
        ("echo_meta", SideEffect::ReadOnly, SideEffect::ReadOnly),
    ] {
        assert_eq!(catalog.get(tool).unwrap().annotated, annotated, "{tool}");
        assert_eq!(catalog.side_effect(tool), effective, "{tool}");
        assert_eq!(catalog.server_of(tool), Some("incidents"));
    }
    assert_eq!(catalog.side_effect("no_such_tool"), SideEffect::Mutating);
    assert_eq!(tools.server_map()["read_log"], "incidents");

    let specs = tools.specs();
    let read_log = specs.iter().find(|s| s.name == "read_log").unwrap();
    assert_eq!(
        read_log.description,
        "Returns the last log lines of a service."
    );
    assert_eq!(read_log.input_schema["type"], "object");
    assert_eq!(
        read_log.input_schema["properties"]["service"]["type"],
        "string"
    );
    assert_eq!(read_log.input_schema["required"], json!(["service"]));
    assert_eq!(specs.len(), tools.server_map().len());
    tools.close().await;
}

#[tokio::test]
async fn a_call_carries_its_idempotency_key_in_meta() {
    let python = python_or_skip!();
    let servers = McpServers(vec![incident_tools_server(&python, "incidents", None)]);
    let tools = McpTools::connect(servers, options()).await.unwrap();
    let session = SessionId::new();

    let outcome = tools
        .call(session, &call("call-7", "echo_meta", json!({})))
        .await;
    assert!(!outcome.is_error, "{}", outcome.content);
    assert!(outcome.reached_server);
    assert_eq!(outcome.server.as_deref(), Some("incidents"));
    let echoed: Value = serde_json::from_str(&outcome.content).unwrap();
    assert_eq!(
        echoed["idempotency_key"],
        tool_idempotency_key(session, "call-7")
    );

    let read = tools
        .call(
            session,
            &call("c2", "read_log", json!({"service": "checkout"})),
        )
        .await;
    assert!(!read.is_error && read.content.starts_with("checkout: 12:00:01 ERROR"));
    tools.close().await;
}

/// A stdio server gets HOME, LOGNAME, PATH, SHELL, TERM, USER and its own
/// `env`, and none of the variables Inquest runs with.
#[tokio::test]
async fn a_stdio_server_sees_none_of_inquests_environment() {
    let python = python_or_skip!();
    // Variables cargo gives this test process: they must not reach the
    // server. Fail loudly if they are missing, or the test proves nothing.
    for name in ["CARGO_MANIFEST_DIR", "CARGO_PKG_NAME", "PATH"] {
        assert!(std::env::var_os(name).is_some(), "{name} is not set here");
    }
    let script = inquest_testkit::mcp::script("env_tools.py");
    let servers = McpServers(vec![McpServer {
        name: "env".into(),
        transport: McpTransport::Stdio {
            command: python.clone(),
            args: vec![script.display().to_string()],
            env: [("ONLY_THIS".to_owned(), "given".to_owned())].into(),
            cwd: None,
        },
    }]);
    let tools = McpTools::connect(servers, options()).await.unwrap();
    let out = tools
        .call(SessionId::new(), &call("e1", "environment", json!({})))
        .await;
    assert!(!out.is_error, "{}", out.content);
    let env: serde_json::Map<String, Value> = serde_json::from_str(&out.content).unwrap();
    assert_eq!(env["ONLY_THIS"], "given");
    assert_eq!(
        env["PATH"].as_str(),
        std::env::var("PATH").ok().as_deref(),
        "PATH is inherited"
    );
    // Python itself may add a few (LC_CTYPE); none of ours is there.
    for (name, _) in std::env::vars() {
        let inherited = inquest_agent::mcp::config::INHERITED_ENV.contains(&name.as_str());
        assert!(
            inherited || !env.contains_key(&name),
            "{name} leaked into the MCP server's environment"
        );
    }
    tools.close().await;
}

#[tokio::test]
async fn unknown_tools_and_invalid_json_never_reach_a_server() {
    let python = python_or_skip!();
    let dir = TempDir::new();
    let count = dir.path("restarts.txt");
    let servers = McpServers(vec![incident_tools_server(&python, "ops", Some(&count))]);
    let tools = McpTools::connect(servers, options()).await.unwrap();
    let session = SessionId::new();

    let raw = tools
        .call(
            session,
            &raw_call("c1", "restart_service", "{\"service\": \"db\""),
        )
        .await;
    assert!(raw.is_error && !raw.reached_server && raw.server.is_none());
    assert!(
        raw.content.contains("not a valid JSON object"),
        "{}",
        raw.content
    );
    let unknown = tools
        .call(session, &call("c2", "restart_everything", json!({})))
        .await;
    assert!(unknown.is_error && !unknown.reached_server && unknown.server.is_none());
    assert!(
        unknown.content.contains("unknown tool"),
        "{}",
        unknown.content
    );
    assert!(!count.exists(), "nothing may have run");

    let restart = tools
        .call(
            session,
            &call("c3", "restart_service", json!({"service": "db"})),
        )
        .await;
    assert!(
        !restart.is_error && restart.reached_server,
        "{}",
        restart.content
    );
    assert_eq!(restart.content, "restarted db (execution 1)");
    assert_eq!(std::fs::read_to_string(&count).unwrap(), "db\n");
    tools.close().await;
}

#[tokio::test]
async fn tool_errors_and_content_blocks_become_result_text() {
    let python = python_or_skip!();
    let servers = McpServers(vec![incident_tools_server(&python, "incidents", None)]);
    let tools = McpTools::connect(servers, options()).await.unwrap();
    let session = SessionId::new();

    let failed = tools
        .call(session, &call("c1", "fail", json!({"reason": "disk full"})))
        .await;
    assert!(failed.is_error && failed.reached_server);
    assert!(
        failed.content.contains("query failed: disk full"),
        "{}",
        failed.content
    );

    let bad_args = tools
        .call(
            session,
            &call("c2", "scale_service", json!({"service": "db"})),
        )
        .await;
    assert!(bad_args.is_error && bad_args.reached_server);
    assert!(
        bad_args.content.contains("replicas"),
        "{}",
        bad_args.content
    );

    let dashboard = tools
        .call(session, &call("c3", "dashboard", json!({})))
        .await;
    assert!(!dashboard.is_error, "{}", dashboard.content);
    assert_eq!(dashboard.content, "CPU at 97%\n[image image/png 16 bytes]");

    let big = tools
        .call(session, &call("c4", "big_output", json!({"size": 100_000})))
        .await;
    assert!(!big.is_error);
    assert!(big.content.starts_with(&"x".repeat(MAX_RESULT_BYTES)));
    assert!(big.content.ends_with(
        "\n…[cut by inquest: 34464 more bytes of tool result over \
         limits.max_tool_result_bytes = 65536]"
    ));
    tools.close().await;
}

#[tokio::test]
async fn a_server_that_cannot_start_is_reported_and_the_others_work() {
    let python = python_or_skip!();
    let missing = McpServer {
        name: "broken".into(),
        transport: McpTransport::Stdio {
            command: "/nonexistent/inquest-mcp-server".into(),
            args: vec![],
            env: Default::default(),
            cwd: None,
        },
    };
    let servers = McpServers(vec![
        missing.clone(),
        incident_tools_server(&python, "incidents", None),
    ]);
    let tools = McpTools::connect(servers, options()).await.unwrap();
    assert_eq!(tools.servers(), ["incidents"]);
    let [unavailable] = tools.unavailable() else {
        panic!("one unavailable server expected: {:?}", tools.unavailable());
    };
    assert_eq!(unavailable.server, "broken");
    assert!(
        unavailable.reason.contains("cannot start"),
        "{}",
        unavailable.reason
    );
    let read = tools
        .call(
            SessionId::new(),
            &call("c1", "read_log", json!({"service": "api"})),
        )
        .await;
    assert!(!read.is_error);
    tools.close().await;

    let not_mcp = McpServer {
        name: "not-mcp".into(),
        transport: McpTransport::Stdio {
            command: python.clone(),
            args: vec!["-c".into(), "print('hello')".into()],
            env: Default::default(),
            cwd: None,
        },
    };
    match McpTools::connect(McpServers(vec![missing, not_mcp]), options()).await {
        Err(McpError::NoServersAvailable { unavailable }) => {
            let names: Vec<&str> = unavailable.iter().map(|u| u.server.as_str()).collect();
            assert_eq!(names, ["broken", "not-mcp"]);
        }
        Err(other) => panic!("NoServersAvailable expected, got {other}"),
        Ok(_) => panic!("NoServersAvailable expected"),
    }
}

#[tokio::test]
async fn colliding_tool_names_go_to_the_first_server_by_name() {
    let python = python_or_skip!();
    let mut options = options();
    options
        .overrides
        .servers
        .insert("alpha".into(), SideEffect::Idempotent);
    let servers = McpServers(vec![
        incident_tools_server(&python, "alpha", None),
        incident_tools_server(&python, "beta", None),
    ]);
    let tools = McpTools::connect(servers, options).await.unwrap();
    assert_eq!(tools.servers(), ["alpha", "beta"]);
    assert!(tools.server_map().values().all(|s| s == "alpha"));
    assert_eq!(tools.skipped().len(), tools.server_map().len());
    assert!(tools.skipped().iter().all(|s| s.server == "beta"));
    assert!(tools.skipped()[0].reason.contains("\"alpha\""));
    // The server override beats the annotations.
    assert_eq!(
        tools.catalog().side_effect("read_log"),
        SideEffect::Idempotent
    );
    assert_eq!(
        tools.catalog().side_effect("restart_service"),
        SideEffect::Idempotent
    );
    tools.close().await;
}

#[tokio::test]
async fn close_ends_the_child_and_later_calls_reach_nothing() {
    let python = python_or_skip!();
    let servers = McpServers(vec![incident_tools_server(&python, "incidents", None)]);
    let tools = McpTools::connect(servers, options()).await.unwrap();
    let pid = tools.pid("incidents").unwrap();
    let reported = tools
        .call(SessionId::new(), &call("c1", "server_pid", json!({})))
        .await;
    assert_eq!(
        reported.content,
        pid.to_string(),
        "the pid is the server itself"
    );
    assert!(alive(pid));

    assert!(tools.available());
    tools.close().await;
    assert!(!alive(pid), "close() returns after the child has exited");
    assert!(!tools.available());
    let after = tools
        .call(
            SessionId::new(),
            &call("c2", "read_log", json!({"service": "api"})),
        )
        .await;
    assert!(after.is_error && !after.reached_server, "{after:?}");
    tools.close().await;
}

#[tokio::test]
async fn dropping_without_close_still_ends_the_child() {
    let python = python_or_skip!();
    let servers = McpServers(vec![incident_tools_server(&python, "incidents", None)]);
    let tools = McpTools::connect(servers, options()).await.unwrap();
    let pid = tools.pid("incidents").unwrap();
    assert!(alive(pid));
    drop(tools);
    wait_gone(pid).await;
}

#[tokio::test]
async fn a_call_past_its_timeout_is_an_error_that_may_have_run() {
    let python = python_or_skip!();
    let servers = McpServers(vec![incident_tools_server(&python, "incidents", None)]);
    let options = McpOptions {
        call_timeout: Duration::from_millis(300),
        ..options()
    };
    let tools = McpTools::connect(servers, options).await.unwrap();
    let session = SessionId::new();
    let slow = tools
        .call(session, &call("c1", "sleep", json!({"seconds": 600})))
        .await;
    assert!(slow.is_error && slow.reached_server, "{slow:?}");
    assert!(
        slow.content.contains("may still be running"),
        "{}",
        slow.content
    );
    // The connection is still usable.
    let read = tools
        .call(session, &call("c2", "read_log", json!({"service": "api"})))
        .await;
    assert!(!read.is_error, "{}", read.content);
    tools.close().await;
}

#[tokio::test]
async fn streamable_http_results_are_cut_and_a_response_over_the_ceiling_fails_the_call() {
    let python = python_or_skip!();
    let server = support::HttpServer::start(&python).await;
    let servers = McpServers(vec![McpServer {
        name: "remote".into(),
        transport: McpTransport::StreamableHttp {
            url: server.url(),
            headers: Default::default(),
        },
    }]);
    let limits = ToolLimits {
        max_result_bytes: 1000,
        ..ToolLimits::default()
    };
    let tools = McpTools::connect(
        servers,
        McpOptions {
            limits,
            ..options()
        },
    )
    .await
    .unwrap();
    let session = SessionId::new();
    // Within the ceiling (4 x 1000 + 64 KiB): the whole answer is read and
    // the text cut to the cap.
    let cut = tools
        .call(session, &call("h1", "big_output", json!({"size": 5000})))
        .await;
    assert!(!cut.is_error, "{}", cut.content);
    assert_eq!(
        cut.content,
        format!(
            "{}\n…[cut by inquest: 4000 more bytes of tool result over \
             limits.max_tool_result_bytes = 1000]",
            "x".repeat(1000)
        )
    );
    // Over it: rmcp refuses the response body; the call fails at once
    // (no timeout) and the server still answers the next call.
    let over = tools
        .call(
            session,
            &call("h2", "big_output", json!({"size": 1_000_000})),
        )
        .await;
    assert!(over.is_error && over.reached_server, "{over:?}");
    assert!(over.content.len() < 2000, "{}", over.content);
    let next = tools
        .call(session, &call("h3", "read_log", json!({"service": "api"})))
        .await;
    assert!(!next.is_error, "{}", next.content);
    tools.close().await;
    server.stop().await;
}

#[tokio::test]
async fn a_stdio_answer_over_the_ceiling_is_cut_from_its_prefix() {
    let python = python_or_skip!();
    let servers = McpServers(vec![incident_tools_server(&python, "incidents", None)]);
    let limits = ToolLimits {
        max_result_bytes: 1000,
        ..ToolLimits::default()
    };
    let tools = McpTools::connect(
        servers,
        McpOptions {
            limits,
            ..options()
        },
    )
    .await
    .unwrap();
    let session = SessionId::new();
    let size = 3_000_000;
    let cut = tools
        .call(session, &call("s1", "big_output", json!({"size": size})))
        .await;
    assert!(!cut.is_error, "{}", cut.content);
    let (text, marker) = cut
        .content
        .split_once('\n')
        .unwrap_or_else(|| panic!("{:?}", &cut.content[..cut.content.len().min(500)]));
    assert_eq!(text, "x".repeat(1000));
    let dropped: u64 = marker
        .strip_prefix("…[cut by inquest: ")
        .and_then(|m| {
            m.strip_suffix(" more bytes of tool result over limits.max_tool_result_bytes = 1000]")
        })
        .unwrap_or_else(|| panic!("{marker}"))
        .parse()
        .unwrap();
    // The text past the cap, and the structuredContent copy the transport
    // never kept.
    assert!(dropped >= 2 * size - 1000, "{dropped}");
    let next = tools
        .call(session, &call("s2", "read_log", json!({"service": "api"})))
        .await;
    assert!(!next.is_error, "{}", next.content);
    tools.close().await;
}

#[tokio::test]
async fn streamable_http_server_with_headers() {
    let python = python_or_skip!();
    let server = support::HttpServer::start(&python).await;
    let servers = McpServers(vec![McpServer {
        name: "remote".into(),
        transport: McpTransport::StreamableHttp {
            url: server.url(),
            headers: [("X-Inquest-Test".to_owned(), "1".to_owned())].into(),
        },
    }]);
    let tools = McpTools::connect(servers, options()).await.unwrap();
    assert_eq!(
        tools.catalog().side_effect("scale_service"),
        SideEffect::Idempotent
    );
    let session = SessionId::new();
    let outcome = tools
        .call(session, &call("h1", "echo_meta", json!({})))
        .await;
    assert!(
        !outcome.is_error && outcome.reached_server,
        "{}",
        outcome.content
    );
    let echoed: Value = serde_json::from_str(&outcome.content).unwrap();
    assert_eq!(
        echoed["idempotency_key"],
        tool_idempotency_key(session, "h1")
    );

    // The server goes away: a call that cannot connect provably did not
    // reach it.
    server.stop().await;
    let gone = tools
        .call(session, &call("h2", "read_log", json!({"service": "api"})))
        .await;
    assert!(gone.is_error && !gone.reached_server, "{gone:?}");
    assert_eq!(gone.server.as_deref(), Some("remote"));
    tools.close().await;

    // A URL nobody listens on: unavailable, not a hang.
    let dead = McpServers(vec![McpServer {
        name: "dead".into(),
        transport: McpTransport::StreamableHttp {
            url: format!("http://127.0.0.1:{}/mcp", support::free_port()),
            headers: Default::default(),
        },
    }]);
    assert!(matches!(
        McpTools::connect(dead, options()).await,
        Err(McpError::NoServersAvailable { .. })
    ));
}
