//! Tools from MCP servers, through the official Rust SDK (rmcp).
//!
//! [`McpTools`] starts every server of an `mcpServers` file ([`config`]),
//! lists their tools and calls them:
//!
//! - **Catalog.** Each tool's side-effect class comes from its MCP
//!   annotations ([`SideEffect::from_annotations`]; nothing known means
//!   mutating) and the operator's overrides; [`McpTools::snapshot`] is the
//!   tool-name → server map (with classes) a session takes once at start.
//!   The catalog is fixed once connected: `tools/list_changed` is not
//!   followed.
//! - **Name collisions.** Servers are taken in name order; when two offer
//!   the same tool name the first keeps it and the later server's tool is
//!   left out with a warning ([`McpTools::skipped`]). Names are never
//!   rewritten, so a tool keeps the name its server documents. Tools whose
//!   names providers reject (anything but `[A-Za-z0-9_-]{1,64}`) are left
//!   out the same way: one such name would fail every model call.
//! - **Unavailable servers.** A server that cannot be started, refuses the
//!   handshake or cannot list its tools is reported in
//!   [`McpTools::unavailable`] and the others are used. When servers are
//!   configured and none comes up, [`McpTools::connect`] fails with
//!   [`McpError::NoServersAvailable`] (the loop's "tool servers
//!   unavailable" exit).
//! - **Calls** ([`McpTools::call`]) never fail: every problem is an
//!   `is_error` [`ToolOutcome`] the model reads. Unknown tools and
//!   arguments that are not a JSON object are answered without contacting
//!   any server. Every sent call carries its idempotency key
//!   ([`tool_idempotency_key`]) in the request's `_meta` under
//!   [`IDEMPOTENCY_META_KEY`] (`"inquest/idempotency_key"`).
//!   `reached_server` is `false` only when the request provably was not
//!   delivered (see [`ToolOutcome::reached_server`]).
//! - **Sizes** ([`ToolLimits`], the server's `[limits]`): a result's text
//!   is cut at `max_tool_result_bytes` with a marker saying how much was
//!   cut. Over stdio one message is held only up to
//!   [`ToolLimits::message_ceiling`] bytes: the rest of a longer one is
//!   read and discarded as it arrives, and the call is answered with what
//!   was kept (`stdio.rs`). Over streamable HTTP, rmcp's body and SSE event
//!   limits are set to the same ceiling, and a longer response fails that
//!   call (rmcp cannot hand over a prefix). A stdio server's stderr lines
//!   are kept up to `max_mcp_stderr_line_bytes`.
//! - **Shutdown.** [`McpTools::close`] ends every session and child
//!   process. Stdio servers run in their own process group with
//!   kill-on-drop, so dropping [`McpTools`] without `close` still ends
//!   them (rmcp shuts the transport down in the background, and the child
//!   is killed when the transport is dropped).

mod catalog;
mod client;
pub mod config;
pub mod content;
mod section;
mod stdio;

use std::{collections::BTreeMap, time::Duration};

use inquest_core::{
    SessionId, ToolArguments, ToolCall, ToolCatalog, ToolClassOverrides, tool_idempotency_key,
};

pub use client::IDEMPOTENCY_META_KEY;
use client::{CallResult, Connection};
pub use config::{
    McpConfigError, McpServer, McpServerEntry, McpServers, McpServersFile, McpTransport,
};
pub use section::{DEFAULT_CALL_TIMEOUT, DEFAULT_CONNECT_TIMEOUT, McpSection};

use crate::ToolSpec;
pub use crate::limit::ToolLimits;
pub use crate::sink::ToolOutcome;

/// A server that could not be used, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerUnavailable {
    pub server: String,
    pub reason: String,
}

/// A tool left out of the catalog, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedTool {
    pub tool: String,
    pub server: String,
    pub reason: String,
}

/// Why [`McpTools`] could not be built.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    #[error(transparent)]
    Config(#[from] McpConfigError),
    /// Servers are configured, and not one of them could be used.
    #[error("no MCP tool server is available: {}", describe(unavailable))]
    NoServersAvailable { unavailable: Vec<ServerUnavailable> },
}

fn describe(unavailable: &[ServerUnavailable]) -> String {
    let parts: Vec<String> = unavailable
        .iter()
        .map(|u| format!("{}: {}", u.server, u.reason))
        .collect();
    parts.join("; ")
}

/// How [`McpTools::connect`] treats the servers.
#[derive(Debug, Clone, PartialEq)]
pub struct McpOptions {
    pub overrides: ToolClassOverrides,
    pub call_timeout: Duration,
    pub connect_timeout: Duration,
    /// Result and stderr line caps.
    pub limits: ToolLimits,
}

impl Default for McpOptions {
    fn default() -> Self {
        Self {
            overrides: ToolClassOverrides::default(),
            call_timeout: DEFAULT_CALL_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            limits: ToolLimits::default(),
        }
    }
}

impl ToolOutcome {
    pub(crate) fn not_sent(server: Option<String>, content: String) -> Self {
        Self {
            content,
            is_error: true,
            server,
            reached_server: false,
        }
    }
}

/// The connected MCP servers and their tools.
pub struct McpTools {
    connections: Vec<Connection>,
    /// Tool name → index into `connections`.
    routes: BTreeMap<String, usize>,
    catalog: ToolCatalog,
    specs: Vec<ToolSpec>,
    unavailable: Vec<ServerUnavailable>,
    skipped: Vec<SkippedTool>,
    call_timeout: Duration,
}

impl McpTools {
    /// No servers and no tools (no `[mcp]` section).
    pub fn empty() -> Self {
        Self::assemble(Vec::new(), Vec::new(), McpOptions::default())
    }

    /// Reads the section's `mcpServers` file and connects, with the
    /// default [`ToolLimits`].
    pub async fn start(section: &McpSection) -> Result<Self, McpError> {
        Self::start_with_limits(section, ToolLimits::default()).await
    }

    /// Reads the section's `mcpServers` file and connects under `limits`.
    pub async fn start_with_limits(
        section: &McpSection,
        limits: ToolLimits,
    ) -> Result<Self, McpError> {
        section.validate()?;
        let servers = McpServers::load(&section.config)?;
        let options = McpOptions {
            overrides: section.side_effects.clone(),
            call_timeout: section.call_timeout(),
            connect_timeout: section.connect_timeout(),
            limits,
        };
        Self::connect(servers, options).await
    }

    /// Starts every server at once and lists their tools. Servers that fail
    /// are in [`McpTools::unavailable`]; if all fail (and there was at least
    /// one), this is [`McpError::NoServersAvailable`].
    pub async fn connect(servers: McpServers, options: McpOptions) -> Result<Self, McpError> {
        let mut set = tokio::task::JoinSet::new();
        for (index, server) in servers.0.iter().cloned().enumerate() {
            let timeout = options.connect_timeout;
            let limits = options.limits;
            set.spawn(async move {
                let opened =
                    Connection::open(&server.name, &server.transport, timeout, limits).await;
                (index, opened)
            });
        }
        let mut opened: Vec<Option<Result<_, String>>> = servers.0.iter().map(|_| None).collect();
        while let Some(joined) = set.join_next().await {
            match joined {
                Ok((index, result)) => opened[index] = Some(result),
                Err(e) => tracing::error!(error = %e, "an MCP server start task failed"),
            }
        }
        let mut connected = Vec::new();
        let mut unavailable = Vec::new();
        for (server, result) in servers.0.iter().zip(opened) {
            match result.unwrap_or_else(|| Err("its start task failed".to_owned())) {
                Ok(pair) => connected.push(pair),
                Err(reason) => {
                    tracing::warn!(server = %server.name, %reason, "MCP server unavailable");
                    unavailable.push(ServerUnavailable {
                        server: server.name.clone(),
                        reason,
                    });
                }
            }
        }
        if connected.is_empty() && !unavailable.is_empty() {
            return Err(McpError::NoServersAvailable { unavailable });
        }
        Ok(Self::assemble(connected, unavailable, options))
    }

    fn assemble(
        connected: Vec<(Connection, Vec<rmcp::model::Tool>)>,
        unavailable: Vec<ServerUnavailable>,
        options: McpOptions,
    ) -> Self {
        let listings: Vec<(&str, &[rmcp::model::Tool])> = connected
            .iter()
            .map(|(c, tools)| (c.name.as_str(), tools.as_slice()))
            .collect();
        let built = catalog::build(&listings, options.overrides);
        Self {
            connections: connected.into_iter().map(|(c, _)| c).collect(),
            routes: built.routes,
            catalog: built.catalog,
            specs: built.specs,
            unavailable,
            skipped: built.skipped,
            call_timeout: options.call_timeout,
        }
    }

    /// The tools for the model, in server then listing order.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.specs.clone()
    }

    /// The tool-name → server map with classes and overrides.
    pub fn catalog(&self) -> &ToolCatalog {
        &self.catalog
    }

    /// The catalog a session takes at its start (a copy: it does not change
    /// under the session).
    pub fn snapshot(&self) -> ToolCatalog {
        self.catalog.clone()
    }

    /// Tool name → server name.
    pub fn server_map(&self) -> BTreeMap<String, String> {
        self.routes
            .iter()
            .map(|(tool, &i)| (tool.clone(), self.connections[i].name.clone()))
            .collect()
    }

    /// The servers in use, in name order.
    pub fn servers(&self) -> Vec<&str> {
        self.connections.iter().map(|c| c.name.as_str()).collect()
    }

    /// Whether tools can be called: no servers were configured (there is
    /// nothing to be unavailable), or at least one server's connection is
    /// still open. `false` is the loop's "tool servers unavailable".
    pub fn available(&self) -> bool {
        let configured = self.connections.len() + self.unavailable.len();
        configured == 0 || self.connections.iter().any(Connection::is_open)
    }

    pub fn unavailable(&self) -> &[ServerUnavailable] {
        &self.unavailable
    }

    pub fn skipped(&self) -> &[SkippedTool] {
        &self.skipped
    }

    /// The process id of a stdio server.
    pub fn pid(&self, server: &str) -> Option<u32> {
        self.connections.iter().find(|c| c.name == server)?.pid
    }

    /// Runs one tool call of `session`. Never fails: problems are
    /// `is_error` outcomes (see [`ToolOutcome`]).
    pub async fn call(&self, session: SessionId, call: &ToolCall) -> ToolOutcome {
        let Some(&index) = self.routes.get(&call.name) else {
            return ToolOutcome::not_sent(
                None,
                format!("unknown tool {:?}: no tool server offers it", call.name),
            );
        };
        let arguments = match &call.arguments {
            ToolArguments::Json(map) => map.clone(),
            ToolArguments::Raw(_) => {
                return ToolOutcome::not_sent(
                    None,
                    "the arguments of this call were not a valid JSON object, so the tool \
                     was not run; call it again with a JSON object that matches its input schema"
                        .to_owned(),
                );
            }
        };
        let connection = &self.connections[index];
        let key = tool_idempotency_key(session, &call.id);
        let result = connection
            .call(&call.name, arguments, &key, self.call_timeout)
            .await;
        let server = Some(connection.name.clone());
        match result {
            CallResult::Answered { content, is_error } => ToolOutcome {
                content,
                is_error,
                server,
                reached_server: true,
            },
            CallResult::Failed { message, reached } => ToolOutcome {
                content: message,
                is_error: true,
                server,
                reached_server: reached,
            },
        }
    }

    /// Ends every server session and child process; calls afterwards are
    /// `is_error` outcomes that reached no server. Idempotent.
    pub async fn close(&self) {
        let closing = self.connections.iter().map(Connection::close);
        for close in closing {
            close.await;
        }
    }
}

impl crate::sink::ToolRunner for McpTools {
    fn specs(&self) -> Vec<ToolSpec> {
        McpTools::specs(self)
    }

    fn server_map(&self) -> BTreeMap<String, String> {
        McpTools::server_map(self)
    }

    fn available(&self) -> bool {
        McpTools::available(self)
    }

    /// From the catalog: annotations, then config overrides.
    fn side_effect(&self, tool: &str) -> inquest_core::SideEffect {
        self.catalog.side_effect(tool)
    }

    fn call<'a>(
        &'a self,
        session: SessionId,
        call: &'a ToolCall,
    ) -> crate::sink::BoxFuture<'a, ToolOutcome> {
        Box::pin(McpTools::call(self, session, call))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn unknown_tools_and_raw_arguments_reach_no_server() {
        let tools = McpTools::empty();
        let call = ToolCall {
            id: "c1".into(),
            name: "read_log".into(),
            arguments: ToolArguments::Raw("{oops".into()),
        };
        let outcome = tools.call(SessionId::new(), &call).await;
        assert!(outcome.is_error && !outcome.reached_server && outcome.server.is_none());
        assert!(outcome.content.contains("unknown tool"));
        assert!(tools.specs().is_empty() && tools.servers().is_empty());
        assert!(tools.available(), "nothing configured, nothing unavailable");
        tools.close().await;
    }
}
