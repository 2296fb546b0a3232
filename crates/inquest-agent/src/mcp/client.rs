//! One connection to one MCP server: starting it (a child process over
//! stdio, or streamable HTTP), listing its tools, calling one, closing it.

use std::{
    collections::{BTreeMap, HashMap, VecDeque},
    error::Error as _,
    path::Path,
    sync::{Arc, Mutex},
    time::Duration,
};

use inquest_core::error_chain;

use process_wrap::tokio::{CommandWrap, KillOnDrop, ProcessGroup};
use rmcp::{
    RoleClient, ServiceError, ServiceExt,
    model::{
        CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation,
        JsonObject, MetaObject, RequestMetaObject, Tool,
    },
    service::{Peer, RunningService},
    transport::{
        StreamableHttpClientTransport,
        streamable_http_client::{StreamableHttpClientTransportConfig, StreamableHttpError},
    },
};
use tokio::io::BufReader;

use super::{McpTransport, content, stdio::BoundedChild};
use crate::limit::{self, ToolLimits};

/// The `_meta` key that carries the idempotency key of a tool call.
pub const IDEMPOTENCY_META_KEY: &str = "inquest/idempotency_key";
/// Stderr lines of a stdio server kept for the "could not start" report
/// (each at most `limits.max_mcp_stderr_line_bytes` plus its marker).
const STDERR_TAIL: usize = 10;
/// How long `close` waits for a server to finish before giving up on it
/// (rmcp's stdio shutdown itself escalates to SIGTERM and SIGKILL).
const CLOSE_TIMEOUT: Duration = Duration::from_secs(10);

type Service = RunningService<RoleClient, ClientConfig>;

/// A started, initialized server.
pub(crate) struct Connection {
    pub(crate) name: String,
    peer: Peer<RoleClient>,
    /// `None` once closed.
    service: tokio::sync::Mutex<Option<Service>>,
    /// The child's pid, for stdio servers.
    pub(crate) pid: Option<u32>,
    http: bool,
    limits: ToolLimits,
}

/// What a call produced before it is turned into a `ToolOutcome`.
pub(crate) enum CallResult {
    /// The server answered (`is_error` is the tool's own flag).
    Answered { content: String, is_error: bool },
    /// The call failed; `reached` says whether the request may have been
    /// delivered.
    Failed { message: String, reached: bool },
}

impl Connection {
    /// Starts (or connects to) the server, initializes the session and
    /// lists every page of its tools. `Err` is a human-readable reason.
    pub(crate) async fn open(
        name: &str,
        transport: &McpTransport,
        timeout: Duration,
        limits: ToolLimits,
    ) -> Result<(Connection, Vec<Tool>), String> {
        let stderr = Arc::new(Mutex::new(VecDeque::new()));
        let opening = Self::open_inner(name, transport, timeout, limits, stderr.clone());
        let result = match tokio::time::timeout(timeout, opening).await {
            Ok(result) => result,
            Err(_) => Err(format!(
                "did not start and list its tools within {timeout:?}"
            )),
        };
        result.map_err(|reason| {
            let tail = stderr.lock().map(|t| t.clone()).unwrap_or_default();
            match tail.is_empty() {
                true => reason,
                false => format!(
                    "{reason}; its stderr ended with: {}",
                    Vec::from(tail).join(" | ")
                ),
            }
        })
    }

    async fn open_inner(
        name: &str,
        transport: &McpTransport,
        timeout: Duration,
        limits: ToolLimits,
        stderr_tail: Arc<Mutex<VecDeque<String>>>,
    ) -> Result<(Connection, Vec<Tool>), String> {
        let info = client_info();
        let (service, pid, http) = match transport {
            McpTransport::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let wrapped = stdio_command(command, args, env, cwd.as_deref());
                // Its stdout is read through a pump that bounds one
                // message (`stdio.rs`).
                let (child, stderr) = BoundedChild::spawn(wrapped, name, limits)
                    .map_err(|e| format!("cannot start `{command}`: {e}"))?;
                let pid = child.id();
                if let Some(stderr) = stderr {
                    tokio::spawn(forward_stderr(
                        name.to_owned(),
                        stderr,
                        stderr_tail,
                        limits.max_stderr_line_bytes,
                    ));
                }
                let service = info
                    .serve(child)
                    .await
                    .map_err(|e| format!("MCP handshake failed: {}", error_chain(&e)))?;
                (service, pid, false)
            }
            McpTransport::StreamableHttp { url, headers } => {
                let transport = http_transport(url, headers, timeout, limits)?;
                let service = info
                    .serve(transport)
                    .await
                    .map_err(|e| format!("MCP handshake with {url} failed: {}", error_chain(&e)))?;
                (service, None, true)
            }
        };
        let peer = service.peer().clone();
        let connection = Connection {
            name: name.to_owned(),
            peer,
            service: tokio::sync::Mutex::new(Some(service)),
            pid,
            http,
            limits,
        };
        match connection.peer.list_all_tools().await {
            Ok(tools) => Ok((connection, tools)),
            Err(e) => {
                connection.close().await;
                Err(format!("listing its tools failed: {}", error_chain(&e)))
            }
        }
    }

    /// Whether the connection can still carry calls.
    pub(crate) fn is_open(&self) -> bool {
        !self.peer.is_transport_closed()
    }

    /// Calls one tool with a `_meta` carrying `idempotency_key`.
    pub(crate) async fn call(
        &self,
        tool: &str,
        arguments: JsonObject,
        idempotency_key: &str,
        timeout: Duration,
    ) -> CallResult {
        if self.peer.is_transport_closed() {
            return CallResult::Failed {
                message: format!("the connection to MCP server {:?} is closed", self.name),
                reached: false,
            };
        }
        let mut meta = MetaObject::new();
        meta.0.insert(
            IDEMPOTENCY_META_KEY.to_owned(),
            serde_json::Value::String(idempotency_key.to_owned()),
        );
        let mut params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        params.meta = Some(RequestMetaObject(meta));
        // Dropping the request future on timeout makes rmcp send a
        // `notifications/cancelled` for it.
        match tokio::time::timeout(timeout, self.peer.call_tool(params)).await {
            Ok(Ok(result)) => answered(result, &self.limits),
            Ok(Err(error)) => CallResult::Failed {
                reached: self.may_have_reached(&error),
                message: describe(&error),
            },
            Err(_) => CallResult::Failed {
                message: format!(
                    "the tool did not answer within {timeout:?}; it may still be running"
                ),
                reached: true,
            },
        }
    }

    /// Whether a failed request may have been delivered. Only failures that
    /// prove it was not are `false`: a write to the child's stdin that
    /// failed (the server cannot act on a message it never read in full),
    /// or an HTTP connection that was never established.
    fn may_have_reached(&self, error: &ServiceError) -> bool {
        let ServiceError::TransportSend(send) = error else {
            // A JSON-RPC error came from the server; a closed transport,
            // rmcp's own timeout or a cancelled request happened after the
            // request was handed over.
            return true;
        };
        if !self.http {
            return false;
        }
        let mut source: Option<&(dyn std::error::Error + 'static)> = send.source();
        while let Some(cause) = source {
            // rmcp's HTTP error does not expose its client error as a
            // `source`, so it is looked into by type.
            let client = match cause.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
                Some(StreamableHttpError::Client(e)) => Some(e),
                _ => cause.downcast_ref::<reqwest::Error>(),
            };
            if let Some(e) = client {
                return !e.is_connect();
            }
            source = cause.source();
        }
        true
    }

    /// Ends the session: stdio servers get the MCP shutdown sequence
    /// (stdin closed, then SIGTERM, then SIGKILL, as rmcp does it).
    pub(crate) async fn close(&self) {
        let Some(mut service) = self.service.lock().await.take() else {
            return;
        };
        match service.close_with_timeout(CLOSE_TIMEOUT).await {
            Ok(Some(_)) => {}
            Ok(None) => tracing::warn!(server = %self.name, "MCP server did not close in time"),
            Err(e) => tracing::warn!(server = %self.name, error = %e, "closing MCP server failed"),
        }
        // Dropping `service` now drops the transport: a child that is
        // still there is killed (kill-on-drop).
    }
}

/// The command that starts a stdio server: only the [`INHERITED_ENV`]
/// variables of this process, plus the configured ones.
///
/// [`INHERITED_ENV`]: super::config::INHERITED_ENV
fn stdio_command(
    command: &str,
    args: &[String],
    env: &BTreeMap<String, String>,
    cwd: Option<&Path>,
) -> CommandWrap {
    let mut cmd = tokio::process::Command::new(command);
    cmd.args(args).env_clear();
    for name in super::config::INHERITED_ENV {
        if let Some(value) = std::env::var_os(name) {
            cmd.env(name, value);
        }
    }
    cmd.envs(env);
    if let Some(cwd) = cwd {
        cmd.current_dir(cwd);
    }
    let mut wrapped = CommandWrap::from(cmd);
    // Own process group: close and drop end the server's own
    // children too. Kill-on-drop: the last resort when the
    // transport is dropped without rmcp's graceful shutdown.
    wrapped.wrap(ProcessGroup::leader()).wrap(KillOnDrop);
    wrapped
}

/// The transport to a streamable-HTTP server, with the configured
/// headers. `Err` is a human-readable reason.
fn http_transport(
    url: &str,
    headers: &BTreeMap<String, String>,
    timeout: Duration,
    limits: ToolLimits,
) -> Result<StreamableHttpClientTransport<reqwest::Client>, String> {
    crate::http::install_crypto_provider();
    let client = reqwest::Client::builder()
        .connect_timeout(timeout)
        // rmcp's own default: no idle pooling (avoids delayed-ACK
        // stalls) and no redirects that could replay headers.
        .pool_max_idle_per_host(0)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| format!("cannot build an HTTP client: {}", error_chain(&e)))?;
    let mut custom = HashMap::new();
    for (key, value) in headers {
        let key = reqwest::header::HeaderName::from_bytes(key.as_bytes());
        let value = reqwest::header::HeaderValue::from_str(value);
        match (key, value) {
            (Ok(key), Ok(value)) => custom.insert(key, value),
            _ => return Err("a configured header is not a valid HTTP header".into()),
        };
    }
    // rmcp reads one response (a JSON body or an SSE event) up
    // to this ceiling and fails the request past it: over HTTP a
    // result is cut only after it arrived, within the ceiling.
    let ceiling = limits.message_ceiling();
    let config = StreamableHttpClientTransportConfig::with_uri(url)
        .custom_headers(custom)
        .max_json_response_size(ceiling)
        .max_sse_event_size(ceiling);
    Ok(StreamableHttpClientTransport::with_client(client, config))
}

fn client_info() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("inquest", env!("CARGO_PKG_VERSION")),
    )
}

fn answered(result: CallToolResult, limits: &ToolLimits) -> CallResult {
    CallResult::Answered {
        content: content::render(&result.content, result.structured_content.as_ref(), limits),
        is_error: result.is_error == Some(true),
    }
}

fn describe(error: &ServiceError) -> String {
    match error {
        ServiceError::McpError(data) => format!("MCP error {}: {}", data.code.0, data.message),
        ServiceError::UnexpectedResponse => {
            "the server answered with a response Inquest does not support \
             (for example an input request or a task)"
                .to_owned()
        }
        ServiceError::TransportSend(send) => format!(
            "the request could not be sent to the MCP server: {}",
            error_chain(send.error.as_ref())
        ),
        other => format!("the call to the MCP server failed: {}", error_chain(other)),
    }
}

/// Logs a stdio server's stderr at debug level and keeps its last lines.
/// A line is kept up to `max_line` bytes (the rest is read and dropped, and
/// the line says how much), invalid UTF-8 is replaced with U+FFFD.
async fn forward_stderr(
    server: String,
    stderr: impl tokio::io::AsyncRead + Unpin,
    tail: Arc<Mutex<VecDeque<String>>>,
    max_line: usize,
) {
    let mut reader = BufReader::with_capacity(8 * 1024, stderr);
    let mut kept = Vec::new();
    loop {
        let read = match limit::read_line_capped(&mut reader, max_line, &mut kept).await {
            Ok(Some(read)) => read,
            Ok(None) => return,
            Err(e) => {
                tracing::debug!(server = %server, error = %e, "reading an MCP server's stderr failed");
                return;
            }
        };
        let line = stderr_line(&kept, read.dropped(&kept), max_line);
        tracing::debug!(server = %server, "mcp stderr: {line}");
        if let Ok(mut tail) = tail.lock() {
            if tail.len() == STDERR_TAIL {
                tail.pop_front();
            }
            tail.push_back(line);
        }
    }
}

/// One stderr line as logged: lossy UTF-8, and the cut marker when
/// `dropped` bytes of it were not kept.
fn stderr_line(kept: &[u8], dropped: u64, max_line: usize) -> String {
    let kept = kept.strip_suffix(b"\r").unwrap_or(kept);
    let mut line = String::from_utf8_lossy(kept).into_owned();
    if dropped > 0 {
        line.push_str(&limit::marker(
            dropped,
            &format!("this stderr line over limits.max_mcp_stderr_line_bytes = {max_line}"),
        ));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_ten_megabyte_stderr_line_is_kept_only_up_to_the_cap() {
        let mut data = vec![b'E'; 10 * 1024 * 1024];
        data.extend_from_slice(b"\nshort\n");
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        forward_stderr("s".into(), &data[..], tail.clone(), 4096).await;
        let tail: Vec<String> = tail.lock().unwrap().iter().cloned().collect();
        assert_eq!(tail.len(), 2);
        assert_eq!(&tail[0][..4096], "E".repeat(4096));
        assert_eq!(
            &tail[0][4096..],
            format!(
                "…[cut by inquest: {} more bytes of this stderr line over \
                 limits.max_mcp_stderr_line_bytes = 4096]",
                10 * 1024 * 1024 - 4096
            )
        );
        assert_eq!(tail[1], "short");
        // Only the last lines are kept.
        let many: Vec<u8> = (0..100)
            .flat_map(|i| format!("line {i}\n").into_bytes())
            .collect();
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        forward_stderr("s".into(), &many[..], tail.clone(), 4096).await;
        let tail = tail.lock().unwrap();
        assert_eq!(tail.len(), STDERR_TAIL);
        assert_eq!(tail.back().map(String::as_str), Some("line 99"));
    }

    #[test]
    fn a_stderr_line_is_lossy_and_marked_when_cut() {
        assert_eq!(stderr_line(b"warn \xff x\r", 0, 10), "warn \u{fffd} x");
        assert_eq!(
            stderr_line(b"abc", 1_000_000, 3),
            "abc…[cut by inquest: 1000000 more bytes of this stderr line over \
             limits.max_mcp_stderr_line_bytes = 3]"
        );
    }
}
