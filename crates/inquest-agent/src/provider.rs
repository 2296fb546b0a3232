//! The provider boundary: one model call, provider-neutral.
//!
//! A [`Provider`] takes the rebuilt transcript ([`Message`]s from
//! `inquest_core::rebuild_messages`), the tool list and a system prompt, and
//! returns the model's reply as a [`Completion`]. Adapters map to and from
//! each wire format; nothing above this module knows one.

use std::{future::Future, pin::Pin, time::Duration};

use inquest_core::{Message, TokenUsage, ToolCall};
use serde_json::Value;

/// What [`Provider::complete`] returns: a boxed, `Send` future.
///
/// Why boxed rather than `async fn` in the trait: the failover chain holds
/// providers of different kinds in one list (`Box<dyn Provider>`), and a
/// trait with `async fn` (or `-> impl Future`) is not dyn-compatible. One
/// allocation per model call is nothing next to an HTTP round trip, and the
/// `Send` bound is spelled out here once instead of at every caller.
pub type ProviderFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Completion, ProviderError>> + Send + 'a>>;

/// A model provider. Implementations are cheap to share (`&self`) and
/// hold no per-session state: everything a call needs is in the request.
pub trait Provider: Send + Sync {
    /// One model call. Retries, timeouts of the chain and failover are the
    /// caller's business ([`crate::ProviderChain`]); an adapter makes
    /// exactly one attempt.
    fn complete<'a>(&'a self, request: &'a CompletionRequest<'a>) -> ProviderFuture<'a>;

    /// [`Provider::complete`], handing the answer's text to `on_text` piece
    /// by piece as the provider streams it. The pieces of a call that
    /// succeeds join to exactly its [`Completion::text`]; a call that fails
    /// may have handed out part of an answer that is then void. The default
    /// streams nothing (a provider that answers all at once).
    fn complete_streaming<'a>(
        &'a self,
        request: &'a CompletionRequest<'a>,
        on_text: OnText<'a>,
    ) -> ProviderFuture<'a> {
        let _ = on_text;
        self.complete(request)
    }
}

/// Where a streamed answer's text goes, piece by piece (see
/// [`Provider::complete_streaming`]). Called on the provider's task: it
/// must return at once.
pub type OnText<'a> = &'a (dyn Fn(&str) + Send + Sync);

/// An [`OnText`] that drops the text.
pub fn ignore_text(_: &str) {}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object (`{"type": "object", ...}`).
    pub input_schema: Value,
}

/// One model call's input. Borrowed: the transcript is the session's and
/// is not copied per call.
#[derive(Debug, Clone, Copy)]
pub struct CompletionRequest<'a> {
    /// Empty means no system prompt.
    pub system: &'a str,
    /// A provider-valid transcript (see `inquest_core::rebuild_messages`);
    /// same-role neighbours are allowed and folded by adapters that need it.
    pub messages: &'a [Message<'a>],
    pub tools: &'a [ToolSpec],
    pub max_tokens: u32,
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    /// A natural end of the reply.
    EndTurn,
    /// The model wants its tool calls run.
    ToolUse,
    /// The reply was cut at `max_tokens`.
    MaxTokens,
    /// Anything else the provider reported (kept verbatim), or nothing.
    Other(String),
}

/// The model's reply.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// The reply's text; text blocks are joined with a blank line.
    pub text: String,
    /// Tool calls in the order the model made them. Arguments that are not
    /// a JSON object are kept verbatim (`ToolArguments::Raw`).
    /// Ids are the provider's, or empty when it sent none; they need not
    /// be unique in the session: the loop replaces missing, invalid and
    /// repeated ones (`inquest_core::session_unique_call_ids`) before the
    /// turn is stored.
    pub tool_calls: Vec<ToolCall>,
    pub usage: TokenUsage,
    pub stop_reason: StopReason,
}

/// Why a model call failed. [`ProviderError::is_retryable`] decides
/// whether trying the same provider again can help.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProviderError {
    /// The provider answered with a non-success status.
    #[error("HTTP {status}{}: {message}", kind.as_deref().map(|k| format!(" ({k})")).unwrap_or_default())]
    Status {
        status: u16,
        /// The provider's error type (`invalid_request_error`, …), if given.
        kind: Option<String>,
        message: String,
        /// What a `retry-after` header asked for, if anything.
        retry_after: Option<Duration>,
    },
    /// No complete answer within the request timeout.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// The request did not reach the provider, or its answer was cut off.
    #[error("connection failed: {0}")]
    Connection(String),
    /// A success status with a body this adapter cannot read.
    #[error("unreadable response: {0}")]
    BadResponse(String),
    /// The answer's body was longer than `limits.max_provider_response_bytes`
    /// (it was not read further). Not retried: the same request would most
    /// likely get as long an answer; the chain fails over.
    #[error("response body is over limits.max_provider_response_bytes = {limit} bytes")]
    TooLarge { limit: usize },
    /// The request could not be built (for example a transcript the
    /// adapter cannot express).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// The provider's standard "too long" answer (OpenAI-compatible: HTTP
    /// 400 with `error.code == "context_length_exceeded"`; Anthropic: HTTP
    /// 400 `invalid_request_error` "prompt is too long: N tokens > M
    /// maximum"), with the limit and the request's size when the message
    /// names them. Not retried and never failed over: the loop learns the
    /// limit, compacts and asks again (`compact.rs`).
    #[error(
        "request is over the model's context window (limit {limit:?}, requested {requested:?} tokens)"
    )]
    ContextTooLong {
        limit: Option<u64>,
        requested: Option<u64>,
    },
}

impl ProviderError {
    /// A bounded name of this error's kind, for metrics labels.
    pub fn class(&self) -> &'static str {
        match self {
            ProviderError::Status { .. } => "http_status",
            ProviderError::Timeout(_) => "timeout",
            ProviderError::Connection(_) => "connection",
            ProviderError::BadResponse(_) => "bad_response",
            ProviderError::TooLarge { .. } => "too_large",
            ProviderError::InvalidRequest(_) => "invalid_request",
            ProviderError::ContextTooLong { .. } => "context_too_long",
        }
    }

    /// Whether the same request may succeed if sent again: rate limits
    /// (429), request timeouts (408), conflicts/locks (409), server errors
    /// (5xx, including Anthropic's 529 "overloaded"), our own timeout and
    /// connection failures. Everything else (400, 401, 403, 404, 413, 422,
    /// an unreadable or too long body, a request we cannot build) is fatal for this
    /// provider.
    pub fn is_retryable(&self) -> bool {
        match self {
            ProviderError::Status { status, .. } => {
                matches!(status, 408 | 409 | 429) || (500..=599).contains(status)
            }
            ProviderError::Timeout(_) | ProviderError::Connection(_) => true,
            ProviderError::BadResponse(_)
            | ProviderError::TooLarge { .. }
            | ProviderError::InvalidRequest(_)
            | ProviderError::ContextTooLong { .. } => false,
        }
    }

    /// The HTTP status, if the provider answered with one.
    pub fn status(&self) -> Option<u16> {
        match self {
            ProviderError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(status: u16) -> ProviderError {
        ProviderError::Status {
            status,
            kind: None,
            message: "m".into(),
            retry_after: None,
        }
    }

    #[test]
    fn retryable_statuses() {
        for s in [408, 409, 429, 500, 502, 503, 529] {
            assert!(status(s).is_retryable(), "{s}");
        }
        for s in [400, 401, 403, 404, 413, 422] {
            assert!(!status(s).is_retryable(), "{s}");
        }
        assert!(ProviderError::Timeout(Duration::from_secs(1)).is_retryable());
        assert!(ProviderError::Connection("reset".into()).is_retryable());
        assert!(!ProviderError::BadResponse("x".into()).is_retryable());
        assert!(!ProviderError::TooLarge { limit: 1 }.is_retryable());
        let shown = ProviderError::Status {
            status: 400,
            kind: Some("invalid_request_error".into()),
            message: "bad".into(),
            retry_after: None,
        }
        .to_string();
        assert_eq!(shown, "HTTP 400 (invalid_request_error): bad");
    }
}
