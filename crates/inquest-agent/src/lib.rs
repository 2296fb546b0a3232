//! Inquest's agent: the loop of one burst ([`Agent::run_burst`]: ask the
//! model, run its tool calls, persist every turn through a [`TurnSink`],
//! compact when the context window fills, author the report), the model
//! providers and the tools. It persists and publishes only through the
//! [`TurnSink`] and [`ToolRunner`] traits, so it must not depend on the
//! store, the engine or the gRPC edge. Providers and tools stay modules of
//! this crate rather than crates of their own: the loop is their only
//! user, and each already sits behind its trait ([`Provider`],
//! [`ToolRunner`]), so a split would add build units and no boundary.
//! Start reading at `agent.rs`.
//!
//! - [`Provider`]: one model call over the provider-neutral transcript
//!   ([`inquest_core::Message`]), returning a [`Completion`] or a
//!   [`ProviderError`] that knows whether retrying can help.
//! - Adapters: [`AnthropicProvider`] (Messages API), [`OpenAiProvider`]
//!   (Chat Completions and compatible servers) and [`ScriptProvider`]
//!   (replays a file; the no-API-key demo).
//! - [`ProviderChain`]: the configured providers in failover order, with
//!   retries, backoff and a caller-held [`ChainCursor`] that makes failover
//!   sticky within a burst.
//! - [`mcp`]: tools from MCP servers ([`McpTools`]): the `mcpServers`
//!   config, a side-effect catalog, calls with idempotency keys.
//!
//! The provider fakes and the MCP test server live in `inquest-testkit`
//! (a dev-dependency only), so no test code ships in this crate.

mod agent;
pub mod anthropic;
mod beneath;
pub mod chain;
pub mod compact;
pub mod config;
pub mod failpoints;
pub mod files;
mod http;
pub mod limit;
pub mod mcp;
pub mod openai;
mod persist;
pub mod provider;
mod rails;
pub mod report;
pub mod script;
pub mod sink;
pub mod sse;
pub mod state;
mod stop;
pub mod toolset;

pub use agent::{Agent, BURST_SPAN};
pub use anthropic::AnthropicProvider;
pub use chain::{
    Answered, Budget, ChainCursor, ChainError, ProviderChain, ProviderFailure, RetryPolicy,
    retry_delay,
};
pub use compact::ContextLimits;
pub use config::{ApiKey, ConfigError, ProviderConfig, ProviderKind};
pub use files::FileTools;
pub use http::DEFAULT_MAX_RESPONSE_BYTES;
pub use limit::ToolLimits;
pub use mcp::{McpError, McpSection, McpTools};
pub use openai::OpenAiProvider;
pub use provider::{
    Completion, CompletionRequest, OnText, Provider, ProviderError, ProviderFuture, StopReason,
    ToolSpec,
};
pub use rails::{
    AgentConfig, AgentLimits, DEFAULT_MAX_MODEL_TEXT_BYTES, DEFAULT_MAX_TOOL_ARGUMENTS_BYTES,
};
pub use report::{BurstReport, Skill};
pub use script::{ScriptError, ScriptProvider};
pub use sink::{BoxFuture, HeldCall, NoTools, SinkError, ToolOutcome, ToolRunner, TurnSink};
pub use state::{BurstState, SessionState};
pub use stop::Stop;
pub use toolset::ToolSet;
