//! What bounds a burst: `[agent]` (the loop's rails and prompt,
//! [`AgentConfig`]) and the size caps it applies to what a model sends
//! (`[limits]`, [`AgentLimits`]).

use serde::Deserialize;

/// Rails and prompts of the loop (`[agent]` in the server config).
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentConfig {
    /// Prepended to every model call.
    pub system_prompt: String,
    /// `max_tokens` of each model call.
    pub max_tokens: u32,
    /// Model calls allowed over a session's whole life.
    pub iteration_budget: u32,
    /// Model calls allowed in one burst.
    pub max_model_calls_per_burst: u32,
    /// Replies with neither text nor tool calls tolerated in a row.
    pub empty_reply_retries: u32,
    /// Calls to unknown tools or with non-JSON arguments tolerated in a
    /// burst before it ends with `no_progress`.
    pub bad_tool_strikes: u32,
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            system_prompt: "You are Inquest, an SRE investigating a production incident. Use the \
                            tools to gather evidence, state what you found with the evidence that \
                            supports it, and stop calling tools once you can explain the cause."
                .into(),
            max_tokens: 4096,
            iteration_budget: 100,
            max_model_calls_per_burst: 30,
            empty_reply_retries: 2,
            bad_tool_strikes: 3,
        }
    }
}

impl AgentConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.max_tokens == 0 || self.iteration_budget == 0 || self.max_model_calls_per_burst == 0
        {
            return Err("agent.max_tokens, agent.iteration_budget and agent.max_model_calls_per_burst must be > 0".into());
        }
        if self.bad_tool_strikes == 0 {
            return Err("agent.bad_tool_strikes must be > 0".into());
        }
        Ok(())
    }
}

/// Size caps the loop applies to what a model sends (`[limits]` in the
/// server config). Every cut leaves a marker saying what was cut and how
/// much ([`inquest_core::cap::cut_text`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentLimits {
    /// An assistant turn's text is stored (and sent back to the model) cut
    /// to this many bytes, plus the marker.
    pub max_model_text_bytes: usize,
    /// A tool call whose arguments (as sent) are longer than this is not
    /// run: its arguments are stored cut, plus the marker, and its result
    /// tells the model why.
    pub max_tool_arguments_bytes: usize,
}

/// Default of `limits.max_model_text_bytes`: 256 KiB.
pub const DEFAULT_MAX_MODEL_TEXT_BYTES: usize = 256 * 1024;
/// Default of `limits.max_tool_arguments_bytes`: 64 KiB.
pub const DEFAULT_MAX_TOOL_ARGUMENTS_BYTES: usize = 64 * 1024;

impl Default for AgentLimits {
    fn default() -> Self {
        Self {
            max_model_text_bytes: DEFAULT_MAX_MODEL_TEXT_BYTES,
            max_tool_arguments_bytes: DEFAULT_MAX_TOOL_ARGUMENTS_BYTES,
        }
    }
}
