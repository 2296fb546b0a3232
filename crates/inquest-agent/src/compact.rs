//! Keeping requests within the model's context window.
//!
//! - The budget: the provider at the chain cursor has a context window
//!   (`context_window` of its `[[providers]]` entry, a smaller limit it
//!   named in a "too long" answer overriding it for the burst:
//!   [`SessionState::learned_windows`]) less its output reserve.
//! - Tool results fit: in the transcript sent to the model (never in the
//!   stored turn) a tool result is cut to `limits.tool_result_window_share`
//!   of the window at a line boundary, with a marker saying how much was
//!   cut and how to ask for less ([`Compactor::fit_transcript`]).
//! - Compaction is a turn: before a model call whose estimate
//!   ([`inquest_core::compaction::estimate_tokens`]) passes
//!   `limits.compact_at` of the budget, or after the provider said the
//!   request is too long, [`Compactor::compact`] asks the chain for a summary
//!   of the older part (a dedicated prompt, no tools), then persists a
//!   `compaction` turn through the sink like any other turn (watchers see
//!   it) and rebuilds the transcript from it. The summary is only used
//!   once its turn committed: a crash before that loses nothing, and the
//!   next burst, still over budget, compacts again.

use std::borrow::Cow;

use inquest_core::{
    CompactionInfo, ExitReason, Message, NewTurn, Role, Seq, TokenUsage, Turn,
    compaction::{
        self, SUMMARY_PROMPT, SUMMARY_SYSTEM, bytes_for_tokens, choose_tail_start, estimate_tokens,
        estimate_turn, render_for_summary, view_start,
    },
    rebuild_messages,
};
use serde::Deserialize;

use crate::{
    chain::ProviderChain,
    failpoints,
    persist::persist,
    provider::{CompletionRequest, ToolSpec},
    sink::TurnSink,
    state::{BurstState, SessionState},
    stop::Stop,
};

/// The window shares the loop budgets with (`[limits]` in the server
/// config: `compact_at`, `tool_result_window_share`).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct ContextLimits {
    /// Compact before a request whose estimate passes this share of the
    /// budget (window − output reserve).
    pub compact_at: f64,
    /// A tool result is shown to the model cut to this share of the window.
    pub tool_result_window_share: f64,
}

/// Default of `limits.compact_at`.
pub const DEFAULT_COMPACT_AT: f64 = 0.8;
/// Default of `limits.tool_result_window_share`.
pub const DEFAULT_TOOL_RESULT_WINDOW_SHARE: f64 = 0.25;
/// Share of the budget the verbatim tail kept by a compaction may take.
pub const TAIL_SHARE: f64 = 0.3;
/// Share of the budget the rendered older part of a summary request takes.
const SUMMARY_INPUT_SHARE: f64 = 0.6;
/// Summary requests tried before the burst gives up on one compaction.
const SUMMARY_ATTEMPTS: u32 = 3;

impl Default for ContextLimits {
    fn default() -> Self {
        Self {
            compact_at: DEFAULT_COMPACT_AT,
            tool_result_window_share: DEFAULT_TOOL_RESULT_WINDOW_SHARE,
        }
    }
}

/// The serialized size of the tool list, for the estimate.
pub(crate) fn tools_bytes(specs: &[ToolSpec]) -> usize {
    specs
        .iter()
        .map(|t| t.name.len() + t.description.len() + t.input_schema.to_string().len() + 40)
        .sum()
}

fn share(tokens: u64, share: f64) -> u64 {
    (tokens as f64 * share.clamp(0.0, 1.0)) as u64
}

/// What keeping requests within the window needs: the chain (each
/// provider's window, the summary call), the window shares and the
/// `max_tokens` of a summary call. The agent lends it these per use, so
/// compaction reads the agent's settings without reaching into it.
pub(crate) struct Compactor<'a> {
    chain: &'a ProviderChain,
    limits: ContextLimits,
    max_tokens: u32,
}

impl<'a> Compactor<'a> {
    pub(crate) fn new(chain: &'a ProviderChain, limits: ContextLimits, max_tokens: u32) -> Self {
        Self {
            chain,
            limits,
            max_tokens,
        }
    }

    /// (window, usable input tokens) of the provider at the cursor.
    pub(crate) fn budget(&self, state: &SessionState) -> (u64, u64) {
        let index = state.provider.position();
        let budget = self.chain.budget(index);
        let window = state
            .learned_windows
            .get(&index)
            .copied()
            .map_or(budget.context_window, |w| w.min(budget.context_window));
        let reserve = budget.output_reserve.min(window / 2);
        (window, window.saturating_sub(reserve))
    }

    /// The most bytes of a tool result the transcript shows.
    pub(crate) fn tool_result_cap(&self, window: u64) -> usize {
        bytes_for_tokens(share(window, self.limits.tool_result_window_share)).max(256)
    }

    /// A tool result as the transcript shows it; see the module docs.
    pub(crate) fn fit_result<'m>(&self, content: Cow<'m, str>, window: u64) -> Cow<'m, str> {
        let cap = self.tool_result_cap(window);
        if content.len() <= cap {
            return content;
        }
        let what = format!(
            "tool result over limits.tool_result_window_share = {} of the model's {window}-token \
             context window (the full result is stored); to see the rest, call the tool again \
             asking for less: a narrower query, a shorter time range, fewer lines or a later \
             offset",
            self.limits.tool_result_window_share
        );
        Cow::Owned(compaction::cut_at_line(&content, cap, &what).into_owned())
    }

    /// Every tool result of `messages` fitted ([`Compactor::fit_result`]).
    pub(crate) fn fit_transcript<'m>(
        &self,
        messages: Vec<Message<'m>>,
        window: u64,
    ) -> Vec<Message<'m>> {
        messages
            .into_iter()
            .map(|m| match m {
                Message::ToolResult {
                    call_id,
                    name,
                    content,
                    is_error,
                } => Message::ToolResult {
                    call_id,
                    name,
                    content: self.fit_result(content, window),
                    is_error,
                },
                other => other,
            })
            .collect()
    }

    /// Whether the next request passes the compaction threshold.
    pub(crate) fn over_threshold(
        &self,
        state: &mut SessionState,
        system: &str,
        tools: usize,
    ) -> bool {
        let (_, usable) = self.budget(state);
        let estimate = state.transcript_tokens(system, tools);
        estimate > share(usable, self.limits.compact_at)
    }

    /// Compacts the transcript; see the module docs. `Err` is the reason
    /// the burst ends with (the summary call failed for another reason
    /// than length, a stop, or the turn could not be stored).
    pub(crate) async fn compact(
        &self,
        sink: &dyn TurnSink,
        state: &mut SessionState,
        burst: &mut BurstState,
        system: &str,
        tools: usize,
        stop: &Stop,
    ) -> Result<(), ExitReason> {
        let (window, usable) = self.budget(state);
        let cap = self.tool_result_cap(window);
        let before = state.transcript_tokens(system, tools);
        let start = view_start(&state.turns);
        let tail_budget = share(usable, TAIL_SHARE);
        let cut = choose_tail_start(&state.turns, start, tail_budget, |t| estimate_turn(t, cap));
        let next_seq = state.turns.last().map_or(Seq::FIRST, |t| t.seq.next());
        let first_retained_seq = state.turns.get(cut).map_or(next_seq, |t| t.seq).get();
        // The older part as the model sees it now: the opening, the
        // previous summary and the shown turns before the new tail. When
        // the new tail starts before the previous compaction, that
        // compaction is put back at the end so the rebuild still starts
        // from it.
        let mut older_turns = state.turns[..cut].to_vec();
        if let Some(previous) = state.turns[cut..]
            .iter()
            .rev()
            .find(|t| t.compaction().is_some())
        {
            older_turns.push(previous.clone());
        }
        let older = self.fit_transcript(rebuild_messages(&older_turns).messages, window);
        let (summary, usage) = self.summarize(state, &older, stop).await?;
        failpoints::hit(failpoints::COMPACTION_SUMMARY_RECEIVED).await;

        // The transcript from the new compaction on: the opening, the
        // summary, the tail (rebuild_messages picks them out).
        let mut view: Vec<Turn> = Vec::new();
        let opening = state.turns.iter().position(|t| t.role == Role::User);
        if let Some(o) = opening.filter(|&o| o < cut) {
            view.push(state.turns[o].clone());
        }
        view.extend(state.turns[cut..].iter().cloned());
        let mut info = CompactionInfo {
            first_retained_seq,
            tokens_before: before,
            tokens_after: 0,
            carried: None,
        };
        let mut synthetic = Turn {
            session_id: state.session_id,
            seq: next_seq,
            role: Role::Compaction,
            content: summary.clone(),
            tool_calls_raw: serde_json::to_value(&info).unwrap_or_default(),
            tool_call_id: None,
            recovery_plan_raw: None,
            tool_name: None,
            is_error: false,
            usage,
            created_at: time::OffsetDateTime::now_utc(),
        };
        // What a follow-up reading from this compaction will not see.
        info.carried = Some(compaction::carry_for(
            &state.turns,
            &synthetic,
            &state.tool_servers,
        ));
        synthetic.tool_calls_raw = serde_json::to_value(&info).unwrap_or_default();
        view.push(synthetic);
        let transcript = self.fit_transcript(rebuild_messages(&view).into_owned_messages(), window);
        info.tokens_after = estimate_tokens(system, &transcript, tools);
        let tokens_after = info.tokens_after;
        let turn = NewTurn::Compaction {
            summary,
            info,
            usage,
        };
        persist(sink, state, burst, turn).await?;
        state.audit.input_tokens = state.audit.input_tokens.saturating_add(usage.input_tokens);
        state.audit.output_tokens = state
            .audit
            .output_tokens
            .saturating_add(usage.output_tokens);
        state.replace_transcript(transcript);
        tracing::info!(
            tokens_before = before,
            tokens_after,
            first_retained_seq,
            window,
            "transcript compacted"
        );
        Ok(())
    }

    /// Asks the chain for a summary of `older`. A "too long" answer is
    /// learned and the request made smaller.
    async fn summarize(
        &self,
        state: &mut SessionState,
        older: &[Message<'_>],
        stop: &Stop,
    ) -> Result<(String, TokenUsage), ExitReason> {
        let mut last_error = None;
        let mut shrink = 1.0;
        for _ in 0..SUMMARY_ATTEMPTS {
            let (_, usable) = self.budget(state);
            let input_tokens = share(usable, SUMMARY_INPUT_SHARE * shrink);
            let rendered = render_for_summary(older, bytes_for_tokens(input_tokens));
            let messages = [Message::User {
                text: format!("{rendered}\n\n{SUMMARY_PROMPT}").into(),
            }];
            let request = CompletionRequest {
                system: SUMMARY_SYSTEM,
                messages: &messages,
                tools: &[],
                max_tokens: self.max_tokens,
            };
            let answered = tokio::select! {
                biased;
                reason = stop.stopped() => return Err(reason),
                answered = self.chain.complete(&mut state.provider, &request) => answered,
            };
            match answered {
                Ok(a) if !a.completion.text.trim().is_empty() => {
                    return Ok((a.completion.text, a.completion.usage));
                }
                Ok(_) => last_error = Some("the summary came back empty".to_owned()),
                Err(e) => {
                    if let Some((index, limit, requested)) = e.context_too_long() {
                        state.learn_window(index, limit, requested, input_tokens);
                        shrink /= 2.0;
                    } else {
                        tracing::warn!(error = %e, "compaction summary failed");
                        return Err(ExitReason::ProviderFailed);
                    }
                    last_error = Some(e.to_string());
                }
            }
        }
        tracing::warn!(error = ?last_error, "compaction summary failed");
        Err(ExitReason::ProviderFailed)
    }
}
