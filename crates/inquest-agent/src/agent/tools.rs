//! Running one tool call: to its end or cut off by a stop, timed and
//! counted, and the honest results of calls a shutdown or an interrupt
//! kept from starting.

use inquest_core::{ExitReason, Message, NewTurn, SessionId, ToolCall};
use tracing::Instrument;

use super::Agent;
use crate::{
    persist::persist,
    sink::{ToolOutcome, TurnSink},
    state::{BurstState, SessionState},
    stop::Stop,
};

impl Agent {
    /// Runs one tool call to its end. A shutdown lets it finish (its real
    /// result is stored), and so does an interrupt when the tool is not
    /// read-only and ends within the grace. A cancel, or an interrupt of
    /// a read-only tool (at once) or of any other past the grace, cuts it
    /// off with an error result that says so (the next burst's model
    /// sees why, and the transcript stays valid as a rebuild would make
    /// it). A lost lease or the end of the shutdown grace cuts it off
    /// with no outcome at all: no result is written, and the call stays
    /// dangling for the next claimer's recovery plan.
    pub(super) async fn run_tool(
        &self,
        session: SessionId,
        call: &ToolCall,
        stop: &Stop,
    ) -> (Option<ToolOutcome>, Option<ExitReason>) {
        let read_only = self.tools.side_effect(&call.name) == inquest_core::SideEffect::ReadOnly;
        tokio::select! {
            biased;
            reason = stop.tool_cut(read_only) => {
                let content = match reason {
                    ExitReason::Cancelled => {
                        "the session was cancelled while this tool was running; it may have \
                         partly run"
                    }
                    ExitReason::InterruptedByUser if read_only => {
                        "interrupted by the user: this read-only tool was stopped before it \
                         finished"
                    }
                    ExitReason::InterruptedByUser => {
                        "interrupted by the user: this tool was still running at the end of the \
                         grace and was stopped; it may have partly run"
                    }
                    _ => return (None, Some(reason)),
                };
                let outcome = ToolOutcome {
                    content: content.to_owned(),
                    is_error: true,
                    server: None,
                    reached_server: true,
                };
                (Some(outcome), Some(reason))
            }
            outcome = timed(self.tools.call(session, call), call) => (Some(outcome), None),
        }
    }

    /// Stores an error result for each call in `calls` that was never
    /// started because the burst stops with `reason` (a shutdown, an
    /// interrupt). These calls provably did not run, so the result says so
    /// and nothing is left dangling. Returns the reason the burst ends with.
    pub(super) async fn record_not_run(
        &self,
        sink: &dyn TurnSink,
        state: &mut SessionState,
        burst: &mut BurstState,
        calls: &[ToolCall],
        reason: ExitReason,
    ) -> ExitReason {
        let why = if reason == ExitReason::InterruptedByUser {
            "not run: the user interrupted the burst before this tool call started"
        } else {
            "not run: the server was shutting down before this tool call started"
        };
        for call in calls {
            let content = why.to_owned();
            let result = NewTurn::Tool {
                call_id: call.id.clone(),
                tool_name: call.name.clone(),
                content: content.clone(),
                is_error: true,
            };
            if let Err(reason) = persist(sink, state, burst, result).await {
                return reason;
            }
            state.transcript.push(Message::ToolResult {
                call_id: call.id.clone().into(),
                name: call.name.clone().into(),
                content: content.into(),
                is_error: true,
            });
        }
        reason
    }
}

/// Runs a tool call and records its metrics: by server and tool (only
/// tools a server listed, so the labels stay bounded; a name the model
/// made up counts as `unknown`) and outcome, with its latency.
async fn timed(
    call_tool: impl std::future::Future<Output = ToolOutcome>,
    call: &ToolCall,
) -> ToolOutcome {
    // A `tool.call` span per call; the server is known once it answered.
    let span = tracing::info_span!(
        "tool.call",
        tool = %call.name,
        call_id = %call.id,
        server = tracing::field::Empty,
        outcome = tracing::field::Empty,
    );
    let started = std::time::Instant::now();
    let outcome = call_tool.instrument(span.clone()).await;
    let (server, tool) = match &outcome.server {
        Some(server) => (server.clone(), call.name.clone()),
        None => ("unknown".to_owned(), "unknown".to_owned()),
    };
    let result = match (outcome.is_error, outcome.reached_server) {
        (false, _) => "ok",
        (true, true) => "error",
        (true, false) => "not_reached",
    };
    span.record("server", server.as_str());
    span.record("outcome", result);
    drop(span);
    metrics::counter!("inquest_tool_calls_total", "server" => server.clone(), "tool" => tool.clone(), "outcome" => result)
        .increment(1);
    metrics::histogram!("inquest_tool_call_duration_seconds", "server" => server, "tool" => tool)
        .record(started.elapsed().as_secs_f64());
    outcome
}
