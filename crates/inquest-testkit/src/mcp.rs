//! A real MCP server written with the
//! official Python SDK (PyPI `mcp` 2.x), shipped in
//! `crates/inquest-testkit/mcp_servers/incident_tools.py`.
//!
//! Its tools: `read_log` (readOnlyHint), `scale_service` (idempotentHint),
//! `restart_service` (destructiveHint; appends a line per execution to the
//! file in `INQUEST_MCP_COUNT_FILE`), `page_oncall` (no annotations),
//! `echo_meta` (returns the request `_meta` and its idempotency key),
//! `fail` (an `isError` result), `big_output`, `nul_output` (text with
//! U+0000), `stderr_flood` (one long stderr line), `dashboard` (text +
//! image), `server_pid` and `sleep`.
//!
//! The interpreter is `$INQUEST_TEST_PYTHON`, else `python3`. Install the
//! SDK with `python3 -m pip install 'mcp==2.3.0'` (or into a venv and point
//! `INQUEST_TEST_PYTHON` at its `bin/python`).

use std::{collections::BTreeMap, io::Write as _, path::PathBuf, process::Command, sync::OnceLock};

use inquest_agent::mcp::{McpServer, McpTransport};

/// The pinned SDK version the tests were written against.
pub const MCP_PYTHON_VERSION: &str = "2.3.0";

/// A test server script in `crates/inquest-testkit/mcp_servers/`.
pub fn script(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("mcp_servers")
        .join(file)
}

/// The incident-tools server script.
pub fn incident_tools_script() -> PathBuf {
    script("incident_tools.py")
}

/// The Python interpreter that can import `mcp`, or `None` when there is
/// none: then the caller skips its test (this prints why, loudly). When
/// `INQUEST_REQUIRE_MCP` is set, a missing SDK panics instead, so CI can
/// never pass by skipping.
pub fn python() -> Option<String> {
    // Probing imports the SDK (over a second): once per test binary.
    static FOUND: OnceLock<Option<String>> = OnceLock::new();
    FOUND.get_or_init(probe).clone()
}

fn probe() -> Option<String> {
    let python = std::env::var("INQUEST_TEST_PYTHON")
        .ok()
        .filter(|p| !p.trim().is_empty())
        .unwrap_or_else(|| "python3".to_owned());
    let probe = Command::new(&python)
        .args(["-c", "import mcp.server.mcpserver"])
        .output();
    let problem = match probe {
        Ok(out) if out.status.success() => return Some(python),
        Ok(out) => {
            let stderr = String::from_utf8_lossy(&out.stderr);
            stderr.trim().lines().last().unwrap_or_default().to_owned()
        }
        Err(e) => e.to_string(),
    };
    let message = format!(
        "the Python MCP SDK is not importable with {python:?} ({problem}); install it with \
         `{python} -m pip install 'mcp=={MCP_PYTHON_VERSION}'` or set INQUEST_TEST_PYTHON"
    );
    if std::env::var_os("INQUEST_REQUIRE_MCP").is_some() {
        panic!("INQUEST_REQUIRE_MCP is set and {message}");
    }
    // Straight to the process's stderr: libtest captures `eprintln!` of
    // passing tests, and a skip must be seen.
    let _ = writeln!(
        std::io::stderr(),
        "\n!!!!! SKIPPED (MCP tests): {message} !!!!!\n"
    );
    None
}

/// The incident-tools server over stdio, named `name`, counting
/// `restart_service` executions in `count_file` if given.
pub fn incident_tools_server(
    python: &str,
    name: &str,
    count_file: Option<&std::path::Path>,
) -> McpServer {
    let mut env = BTreeMap::new();
    if let Some(file) = count_file {
        env.insert(
            "INQUEST_MCP_COUNT_FILE".to_owned(),
            file.display().to_string(),
        );
    }
    McpServer {
        name: name.to_owned(),
        transport: McpTransport::Stdio {
            command: python.to_owned(),
            args: vec![incident_tools_script().display().to_string()],
            env,
            cwd: None,
        },
    }
}
