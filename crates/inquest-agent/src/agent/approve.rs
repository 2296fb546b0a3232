//! The approval policy in the loop: which calls of a reply run, which are
//! refused by a rule, and which wait for a human; and, when a human
//! approved held calls, running them before the model is asked again.
//!
//! Calls of a reply run in order. A held call is skipped, not waited for:
//! the other calls of the same reply (read-only ones, or ones a rule
//! allows) run and their results are stored, because holding them would
//! only delay what the policy says is safe, and the model sees every
//! result together once the held calls are decided. The held calls are
//! then stored as approval requests and the burst ends
//! `awaiting_approval`, holding no lease and no burst slot.

use std::sync::Arc;

use inquest_core::{
    ExitReason, Seq, ToolCall,
    approval::{Action, Call, Gate, denied_by_rule},
};

use super::{Agent, LoopInputs};
use crate::{
    persist::ending_for,
    sink::{HeldCall, TurnSink},
    state::{BurstState, SessionState},
};

/// What the policy does with one call.
pub(super) enum Screened {
    Run,
    /// Not run: its error result says why (the rule).
    Refuse(String),
    /// Not run now: a human decides.
    Hold(HeldCall),
}

impl Agent {
    /// Decides `call` under `gate`: by the first matching rule, else by
    /// the mode and the tool's side-effect class.
    pub(super) fn screen(
        &self,
        gate: &Arc<Gate>,
        state: &SessionState,
        call: &ToolCall,
    ) -> Screened {
        let server = state
            .tool_servers
            .get(&call.name)
            .cloned()
            .unwrap_or_default();
        let side_effect = self.tools.side_effect(&call.name);
        let arguments = serde_json::from_str::<serde_json::Value>(&call.arguments.as_sent())
            .unwrap_or(serde_json::Value::Null);
        let (verdict, reason) = gate.decide(&Call {
            server: &server,
            tool: &call.name,
            arguments: &arguments,
            side_effect,
        });
        match verdict.action {
            Action::Allow => Screened::Run,
            Action::Deny => {
                tracing::info!(call_id = %call.id, tool = %call.name, %reason, "tool call denied by the approval policy");
                metrics::counter!("inquest_approvals_denied_by_rule_total").increment(1);
                Screened::Refuse(denied_by_rule(&reason))
            }
            Action::Require => Screened::Hold(HeldCall {
                call: call.clone(),
                server,
                side_effect,
                rule: reason,
            }),
        }
    }

    /// Stores `held` (calls of the assistant turn `assistant_seq`) as
    /// approval requests: the reason the burst ends with.
    pub(super) async fn hold(
        &self,
        sink: &dyn TurnSink,
        state: &SessionState,
        assistant_seq: Seq,
        held: Vec<HeldCall>,
    ) -> ExitReason {
        let count = held.len();
        match sink
            .request_approvals(state.session_id, assistant_seq, held)
            .await
        {
            Ok(()) => {
                tracing::info!(calls = count, %assistant_seq, "tool calls wait for approval");
                metrics::counter!("inquest_approvals_requested_total").increment(count as u64);
                ExitReason::AwaitingApproval
            }
            Err(e) => ending_for(e),
        }
    }

    /// Runs the approved calls (never started, no result) before the model
    /// is asked again, then rebuilds the transcript so each real result
    /// takes the place of the placeholder the restore gave it. A stop
    /// before a call starts leaves it approved and unstarted, so the next
    /// claimer runs it: a human's approval is not spent by a shutdown. An
    /// interrupt is the user's redirection: the calls it kept from
    /// starting are answered "not run", so the transcript stays valid.
    pub(super) async fn run_approved(
        &self,
        inputs: &LoopInputs<'_>,
        state: &mut SessionState,
        burst: &mut BurstState,
        approved: Vec<(Seq, ToolCall)>,
    ) -> Result<(), ExitReason> {
        if approved.is_empty() {
            return Ok(());
        }
        let interrupted = |from: usize| -> Vec<ToolCall> {
            approved[from..].iter().map(|(_, c)| c.clone()).collect()
        };
        for (index, (assistant_seq, call)) in approved.iter().enumerate() {
            if let Some(reason) = inputs.stop.reason() {
                if reason == ExitReason::InterruptedByUser {
                    let not_run = interrupted(index);
                    return Err(self
                        .record_not_run(inputs.sink, state, burst, &not_run, reason)
                        .await);
                }
                return Err(reason);
            }
            if let Err(reason) = self
                .run_call(inputs, state, burst, *assistant_seq, call, None)
                .await
            {
                if reason == ExitReason::InterruptedByUser {
                    let not_run = interrupted(index + 1);
                    return Err(self
                        .record_not_run(inputs.sink, state, burst, &not_run, reason)
                        .await);
                }
                return Err(reason);
            }
        }
        let compactor = self.compactor();
        let (window, _) = compactor.budget(state);
        let rebuilt = inquest_core::rebuild_messages(&state.turns).into_owned_messages();
        state.replace_transcript(compactor.fit_transcript(rebuilt, window));
        Ok(())
    }
}
