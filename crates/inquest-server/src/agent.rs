//! The agent's part of the configuration: `[[providers]]`, `[agent]`,
//! `[mcp]`, `[tools]` and `[[skills]]`, and building the agent from it.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use anyhow::Context;
use inquest_agent::{
    Agent, AgentLimits, ContextLimits, FileTools, McpError, McpTools, ProviderChain, ToolRunner,
    ToolSet,
};
use serde::Deserialize;

use crate::config::{Config, ConfigError};

/// Built-in tools.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolsSection {
    /// A directory of evidence (logs, metrics) served read-only by the
    /// built-in `list_files`, `read_file` and `search` tools.
    pub files_root: Option<PathBuf>,
    /// The server name those tools are attributed to (default `files`).
    pub files_server: Option<String>,
}

/// Resolves `path` against the config file's directory when relative.
fn under(base: &Path, path: &mut PathBuf) {
    if path.is_relative() {
        *path = base.join(&*path);
    }
}

impl Config {
    /// Relative paths in the file (scripts, the MCP config, the evidence
    /// root) are taken from the config file's directory.
    pub(crate) fn resolve_paths(&mut self, base: &Path) {
        for provider in &mut self.providers {
            if let Some(script) = &mut provider.script {
                under(base, script);
            }
        }
        if let Some(mcp) = &mut self.mcp {
            under(base, &mut mcp.config);
        }
        if let Some(root) = &mut self.tools.files_root {
            under(base, root);
        }
    }

    pub(crate) fn validate_agent(&self) -> Result<(), ConfigError> {
        self.agent.validate().map_err(ConfigError::Invalid)?;
        for (i, p) in self.providers.iter().enumerate() {
            p.validate()
                .map_err(|e| ConfigError::Invalid(format!("providers[{i}]: {e}")))?;
        }
        if let Some(mcp) = &self.mcp {
            mcp.validate()
                .map_err(|e| ConfigError::Invalid(format!("mcp: {e}")))?;
        }
        Ok(())
    }
}

/// The agent and the MCP connections it owns (closed at shutdown).
pub struct BuiltAgent {
    pub agent: Option<Arc<Agent>>,
    pub mcp: Option<Arc<McpTools>>,
}

/// Builds the provider chain and connects the tool servers. No providers:
/// no agent (sessions are stored and watched, nobody answers them).
pub async fn build_agent(config: &Config) -> anyhow::Result<BuiltAgent> {
    if config.providers.is_empty() {
        tracing::warn!("no [[providers]] configured: sessions are stored, but no agent runs them");
        return Ok(BuiltAgent {
            agent: None,
            mcp: None,
        });
    }
    let chain =
        ProviderChain::from_config(&config.providers, config.limits.max_provider_response_bytes)
            .context("building the provider chain")?;
    let mut runners: Vec<Arc<dyn ToolRunner>> = Vec::new();
    let mut mcp_tools = None;
    let mut servers_down = false;
    if let Some(section) = &config.mcp {
        match McpTools::start_with_limits(section, config.tool_limits()).await {
            Ok(tools) => {
                for down in tools.unavailable() {
                    tracing::warn!(server = %down.server, reason = %down.reason, "MCP server unavailable");
                }
                let tools = Arc::new(tools);
                runners.push(Arc::clone(&tools) as Arc<dyn ToolRunner>);
                mcp_tools = Some(tools);
            }
            Err(McpError::NoServersAvailable { unavailable }) => {
                for down in &unavailable {
                    tracing::warn!(server = %down.server, reason = %down.reason, "MCP server unavailable");
                }
                tracing::warn!(
                    "no MCP server is available: bursts will end with tool_servers_unavailable"
                );
                servers_down = true;
            }
            Err(e) => return Err(e).context("configuring MCP tool servers"),
        }
    }
    if let Some(root) = &config.tools.files_root {
        let server = config
            .tools
            .files_server
            .clone()
            .unwrap_or_else(|| "files".into());
        runners.push(Arc::new(
            FileTools::new(server, root).with_limits(config.tool_limits()),
        ));
    }
    let mut tools = ToolSet::new(runners);
    if servers_down {
        tools = tools.with_configured_servers_down();
    }
    tracing::info!(
        providers = ?chain.names().collect::<Vec<_>>(),
        tools = tools.specs().len(),
        "agent ready"
    );
    let agent = Agent::new(
        Arc::new(chain),
        Arc::new(tools),
        config.agent.clone(),
        config.skills.clone(),
    )
    .with_limits(AgentLimits {
        max_model_text_bytes: config.limits.max_model_text_bytes,
        max_tool_arguments_bytes: config.limits.max_tool_arguments_bytes,
    })
    .with_context_limits(ContextLimits {
        compact_at: config.limits.compact_at,
        tool_result_window_share: config.limits.tool_result_window_share,
    });
    Ok(BuiltAgent {
        agent: Some(Arc::new(agent)),
        mcp: mcp_tools,
    })
}
