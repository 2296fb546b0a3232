//! The two doors the loop goes out through. The loop persists and publishes
//! only through [`TurnSink`] and runs tools only through [`ToolRunner`], so
//! it knows nothing of PostgreSQL, the broadcaster or MCP transports.

use std::{collections::BTreeMap, future::Future, pin::Pin, sync::Arc};

use inquest_core::{NewTurn, Seq, SessionId, SideEffect, ToolCall, Turn, approval::Gate};

use crate::ToolSpec;

/// A boxed `Send` future (the traits below are used as `dyn`).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A turn write failed: the transcript cannot go on.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    /// The store refused the turn for a cause a retry cannot fix.
    #[error("turn was not persisted")]
    NotPersisted(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The store stayed unreachable (or its answers did not come) for as
    /// long as the lease allows; the sink retried the same write until
    /// then. Whether the last attempt committed is for the next claimer to
    /// read from the store: the burst hands the session over.
    #[error("the store stayed unavailable")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The store refused the turn because this worker's lease epoch is no
    /// longer the session's: another replica owns the session now.
    #[error("turn was refused: this worker no longer holds the session's lease")]
    LeaseLost(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// Where the loop's turns go: persisted, then published.
pub trait TurnSink: Send + Sync {
    /// Appends a turn durably (its own timeout, independent of the
    /// burst's cancellation) and publishes it once committed.
    fn append(&self, session: SessionId, turn: NewTurn) -> BoxFuture<'_, Result<Turn, SinkError>>;

    /// Asks to run `call`, requested by the assistant turn
    /// `assistant_seq`, and announces it. Not persisted. Resolves once the
    /// announcement went out (to other replicas too), so it is ordered
    /// before the call's result; a failure to announce is the sink's to log.
    ///
    /// `Err(SinkError::LeaseLost)` means the call must not run: this
    /// worker's lease may expire before the call could finish (its renewal
    /// deadline passed), so another replica may already run the session.
    fn tool_call_started<'a>(
        &'a self,
        session: SessionId,
        assistant_seq: Seq,
        call: &'a ToolCall,
    ) -> BoxFuture<'a, Result<(), SinkError>>;

    /// The approval policy this burst's session is under; `None`: every
    /// call runs at once (an embedder, the benchmarks).
    fn approval(&self) -> Option<Arc<Gate>> {
        None
    }

    /// Stores the calls of the assistant turn `assistant_seq` that the
    /// policy holds for a human, as durable approval requests, before the
    /// burst ends `awaiting_approval`. Only called when
    /// [`TurnSink::approval`] gave a policy.
    fn request_approvals(
        &self,
        session: SessionId,
        assistant_seq: Seq,
        held: Vec<HeldCall>,
    ) -> BoxFuture<'_, Result<(), SinkError>> {
        let _ = (session, assistant_seq, held);
        Box::pin(async {
            Err(SinkError::NotPersisted(
                "this sink stores no approval requests".into(),
            ))
        })
    }

    /// A piece of the text of the assistant turn being written, as the
    /// model streams it, for live watchers. Not persisted; never fails;
    /// must return at once (it is called from the provider's read loop).
    /// `attempt` counts from 1 for each assistant turn: a higher one starts
    /// the text again (a retry, a failover or a call made again after a
    /// compaction), and the earlier attempt's text is void. The sink knows
    /// which seq the turn will take (it is the session's only writer).
    fn text_delta(&self, session: SessionId, attempt: u32, text: &str) {
        let _ = (session, attempt, text);
    }

    /// The answer of `attempt` is complete and its turn is about to be
    /// appended: text the sink held back may be shown now.
    fn text_complete(&self, session: SessionId, attempt: u32) {
        let _ = (session, attempt);
    }
}

/// A call the approval policy holds for a human.
#[derive(Debug, Clone)]
pub struct HeldCall {
    pub call: ToolCall,
    /// The MCP server serving it ("" when unknown).
    pub server: String,
    pub side_effect: SideEffect,
    /// Why it is held (`Verdict::reason`).
    pub rule: String,
}

/// What a tool call produced. Errors are results (`is_error`), not crashes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutcome {
    pub content: String,
    pub is_error: bool,
    /// The server the tool belongs to, when the name is known.
    pub server: Option<String>,
    /// Whether the request may have reached the server (and so the tool may
    /// have run). `false` only when it provably did not: an unknown tool
    /// name or arguments that were not a JSON object (such a call is
    /// attributed to no server and counts as a bad tool call), a request
    /// never sent, a closed connection. A timeout, a connection lost after
    /// sending, an MCP error and every answer count as reached.
    pub reached_server: bool,
}

impl ToolOutcome {
    /// A call refused before it was sent anywhere.
    pub fn refused(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: true,
            server: None,
            reached_server: false,
        }
    }
}

/// The tools a session may call.
pub trait ToolRunner: Send + Sync {
    /// Tool descriptions for the model.
    fn specs(&self) -> Vec<ToolSpec>;

    /// Tool name → server name. Taken once per session (burst) start and
    /// kept: attribution never looks at a live map that may have changed.
    fn server_map(&self) -> BTreeMap<String, String>;

    /// Whether at least one tool server is reachable. A session whose
    /// configured servers are all down ends with `tool_servers_unavailable`.
    fn available(&self) -> bool;

    /// Runs one call. `session` and `call.id` make its idempotency key.
    fn call<'a>(&'a self, session: SessionId, call: &'a ToolCall) -> BoxFuture<'a, ToolOutcome>;

    /// How `tool` affects the world, for the recovery plan: whether a call
    /// whose result was never recorded may be left to the model to retry.
    /// Unknown tools are [`SideEffect::Mutating`] (the default).
    fn side_effect(&self, tool: &str) -> SideEffect {
        let _ = tool;
        SideEffect::Mutating
    }
}

/// No tools at all: the model can only answer in text.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoTools;

impl ToolRunner for NoTools {
    fn specs(&self) -> Vec<ToolSpec> {
        Vec::new()
    }

    fn server_map(&self) -> BTreeMap<String, String> {
        BTreeMap::new()
    }

    fn available(&self) -> bool {
        true
    }

    fn call<'a>(&'a self, _session: SessionId, call: &'a ToolCall) -> BoxFuture<'a, ToolOutcome> {
        let name = call.name.clone();
        Box::pin(async move {
            ToolOutcome::refused(format!("unknown tool {name:?}: no tools are configured"))
        })
    }
}
