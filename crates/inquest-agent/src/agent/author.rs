//! The author step: the one model call, with no tools, that writes a
//! burst's summary, and the compaction that makes room for it.

use inquest_core::{ExitReason, Message};

use super::Agent;
use crate::{
    ChainCursor, CompletionRequest, report,
    sink::TurnSink,
    state::{BurstState, SessionState},
    stop::Stop,
};

impl Agent {
    /// Compacts before the author step when its request (the transcript,
    /// the author prompt, no tools) would pass the threshold. A failure
    /// is only logged.
    pub(super) async fn compact_before_author(
        &self,
        sink: &dyn TurnSink,
        state: &mut SessionState,
        burst: &mut BurstState,
        exit: ExitReason,
        stop: &Stop,
    ) {
        let compactor = self.compactor();
        if report::worth_authoring(exit)
            && compactor.over_threshold(state, report::AUTHOR_SYSTEM, 0)
            && let Err(reason) = compactor
                .compact(sink, state, burst, report::AUTHOR_SYSTEM, 0, stop)
                .await
        {
            // The author step is tried anyway; its own failure decides.
            tracing::warn!(
                reason = reason.as_str(),
                "compaction before the report failed"
            );
        }
    }

    /// The author step: one model call, no tools, that writes the summary.
    /// Its failure becomes the exit reason only when nothing else went wrong.
    /// A stop while it runs wins, as it does over any model call: a
    /// shutdown hands the session over (the next replica, finding the
    /// final answer stored, only authors the report), a cancel ends it
    /// `cancelled`, a lost lease writes nothing.
    pub(super) async fn author(
        &self,
        state: &mut SessionState,
        exit: ExitReason,
        stop: &Stop,
    ) -> (ExitReason, String, Option<inquest_core::TokenUsage>) {
        let none = None;
        if !report::worth_authoring(exit) || state.transcript.is_empty() {
            return (exit, report::fallback_summary(exit, state), none);
        }
        // The transcript borrowed, not copied, plus the author prompt.
        let mut messages: Vec<Message<'_>> =
            state.transcript.iter().map(Message::reborrow).collect();
        messages.push(Message::User {
            text: report::AUTHOR_PROMPT.into(),
        });
        let request = CompletionRequest {
            system: report::AUTHOR_SYSTEM,
            messages: &messages,
            tools: &[],
            max_tokens: self.config.max_tokens,
        };
        let mut cursor: ChainCursor = state.provider;
        let answered = tokio::select! {
            biased;
            reason = stop.stopped() => {
                return (reason, report::fallback_summary(reason, state), none);
            }
            r = self.chain.complete(&mut cursor, &request) => r,
        };
        match answered {
            Ok(a) if !a.completion.text.trim().is_empty() => {
                (exit, a.completion.text, Some(a.completion.usage))
            }
            other => {
                if let Err(e) = &other {
                    tracing::warn!(error = %e, "report author failed");
                }
                let exit = match exit {
                    ExitReason::Completed | ExitReason::AwaitingUser => {
                        ExitReason::ReportAuthorFailed
                    }
                    other => other,
                };
                // A blank answer still cost its tokens.
                let spent = other.ok().map(|a| a.completion.usage);
                (exit, report::fallback_summary(exit, state), spent)
            }
        }
    }
}
