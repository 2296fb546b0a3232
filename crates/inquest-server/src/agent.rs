//! Building the agent from its part of the configuration (`[[providers]]`,
//! `[agent]`, `[mcp]`, `[tools]`, `[[skills]]`: `crate::config::agent`).

use std::sync::Arc;

use anyhow::Context;
use inquest_agent::{
    Agent, AgentLimits, ContextLimits, FileTools, McpError, McpTools, ProviderChain, ToolRunner,
    ToolSet,
};

use crate::config::Config;

/// The agent and the MCP connections it owns (closed at shutdown).
pub struct BuiltAgent {
    pub agent: Option<Arc<Agent>>,
    pub mcp: Option<Arc<McpTools>>,
}

/// Builds the provider chain and connects the tool servers. No providers:
/// no agent (sessions are stored and watched, nobody answers them).
pub async fn build_agent(config: &Config) -> anyhow::Result<BuiltAgent> {
    if config.providers.is_empty() {
        if config.require_agent {
            tracing::warn!(
                "no [[providers]] configured: StartSession, SendMessage and ContinueSession are refused (NO_MODEL_PROVIDER) until one is"
            );
        } else {
            tracing::warn!(
                "no [[providers]] configured: sessions are stored, but no agent runs them"
            );
        }
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
