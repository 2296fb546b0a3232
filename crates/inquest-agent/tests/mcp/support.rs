//! Helpers for the MCP tests.

use std::{path::PathBuf, process::Stdio, time::Duration};

use inquest_agent::mcp::McpOptions;
use inquest_core::{SessionId, ToolArguments, ToolCall};
use inquest_testkit::mcp::incident_tools_script;
use serde_json::Value;

/// The Python interpreter with the MCP SDK, or return from the test
/// (skipped loudly; a failure when `INQUEST_REQUIRE_MCP` is set).
macro_rules! python_or_skip {
    () => {
        match inquest_testkit::mcp::python() {
            Some(python) => python,
            None => return,
        }
    };
}
pub(crate) use python_or_skip;

/// Generous timeouts: a cold Python start on a loaded CI machine is slow.
pub fn options() -> McpOptions {
    McpOptions {
        call_timeout: Duration::from_secs(60),
        connect_timeout: Duration::from_secs(60),
        ..McpOptions::default()
    }
}

pub fn call(id: &str, name: &str, arguments: Value) -> ToolCall {
    let Value::Object(map) = arguments else {
        panic!("arguments must be an object");
    };
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: ToolArguments::Json(map),
    }
}

pub fn raw_call(id: &str, name: &str, text: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: ToolArguments::from_model(text),
    }
}

/// Whether a process exists and is not a zombie (Linux `/proc`).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesized command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => false,
    }
}

/// Waits (bounded by a count of polls, not by asserting on time) until
/// the process is gone.
pub async fn wait_gone(pid: u32) {
    for _ in 0..600 {
        if !alive(pid) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("process {pid} is still running");
}

/// A directory removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new() -> Self {
        let dir = std::env::temp_dir().join(format!("inquest-mcp-test-{}", SessionId::new()));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// The incident-tools server on streamable HTTP, killed on drop.
pub struct HttpServer {
    child: tokio::process::Child,
    port: u16,
}

impl HttpServer {
    pub async fn start(python: &str) -> Self {
        let port = free_port();
        let mut child = tokio::process::Command::new(python)
            .arg(incident_tools_script())
            .args(["--http", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        for _ in 0..600 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return Self { child, port };
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("the HTTP MCP server exited: {status}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the HTTP MCP server did not listen on port {port}");
    }

    /// Kills the server and waits until its port refuses connections.
    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
        for _ in 0..600 {
            if tokio::net::TcpStream::connect(("127.0.0.1", self.port))
                .await
                .is_err()
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("port {} still accepts connections", self.port);
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }
}
