//! The agent loop: one burst, from the stored transcript to a report.
//!
//! call the provider → persist the assistant turn → for each tool call:
//! announce it, run it, persist its result → repeat until the model stops
//! calling tools or a rail trips → author the summary → return the
//! [`BurstReport`]. The caller (the server) records the report and the
//! session's final status.

use std::sync::Arc;

use inquest_core::{
    ExitReason, Message, NewTurn, Seq, SessionId, ToolArguments, ToolCall, Turn, cap::cut_text,
    session_unique_call_ids,
};
use serde::Deserialize;
use tracing::Instrument;

use crate::{
    ChainCursor, CompletionRequest, ProviderChain, ToolSpec,
    compact::{Compactor, ContextLimits, tools_bytes},
    failpoints,
    persist::persist,
    report::{self, BurstReport, Skill},
    sink::{ToolOutcome, ToolRunner, TurnSink},
    state::{BurstState, SessionState},
    stop::Stop,
};

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

/// The name of a burst's span. The engine opens it (`inquest_engine::runner`) with the
/// fields `session_id`, `mode`, `trace_id`, `burst` and `exit_reason`;
/// [`Agent::run_burst`] records the last two on it.
pub const BURST_SPAN: &str = "burst";

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

/// "Too long" answers in a row after which the burst gives up: each one
/// was followed by a compaction, so a further one means even the smallest
/// transcript (the opening, the summary, nothing else) does not fit.
const MAX_TOO_LONG_IN_A_ROW: u32 = 3;

/// A model reply made fit to store: session-unique call ids, capped text
/// and arguments.
struct Shaped {
    text: String,
    calls: Vec<ToolCall>,
    /// Per call: why it must not run (its arguments were cut), if so.
    refusals: Vec<Option<String>>,
}

/// The agent: providers, tools, rails. Shared by every burst of a replica.
pub struct Agent {
    chain: Arc<ProviderChain>,
    tools: Arc<dyn ToolRunner>,
    config: AgentConfig,
    skills: Vec<Skill>,
    limits: AgentLimits,
    context: ContextLimits,
}

impl Agent {
    pub fn new(
        chain: Arc<ProviderChain>,
        tools: Arc<dyn ToolRunner>,
        config: AgentConfig,
        skills: Vec<Skill>,
    ) -> Self {
        Self {
            chain,
            tools,
            config,
            skills,
            limits: AgentLimits::default(),
            context: ContextLimits::default(),
        }
    }

    /// Replaces the default size caps.
    pub fn with_limits(mut self, limits: AgentLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Replaces the default window shares (`compact.rs`).
    pub fn with_context_limits(mut self, context: ContextLimits) -> Self {
        self.context = context;
        self
    }

    /// Keeping requests within the window, with this agent's chain,
    /// window shares and `max_tokens` (`compact.rs`).
    fn compactor(&self) -> Compactor<'_> {
        Compactor::new(&self.chain, self.context, self.config.max_tokens)
    }

    /// How `tool` affects the world (from the tool runners' catalogs;
    /// unknown tools are mutating): what the recovery plan classes
    /// dangling calls with.
    pub fn side_effect(&self, tool: &str) -> inquest_core::SideEffect {
        self.tools.side_effect(tool)
    }

    /// Runs one burst of `session` whose stored turns (the burst's opening
    /// user turn last) are `turns`. Always returns a report, on every path.
    pub async fn run_burst(
        &self,
        sink: &dyn TurnSink,
        session: SessionId,
        turns: Vec<Turn>,
        stop: &Stop,
    ) -> BurstReport {
        self.run_burst_from(sink, session, turns, None, stop).await
    }

    /// [`Agent::run_burst`] with the transcript of `turns` already rebuilt
    /// (`transcript`: the resume plan's, `inquest_core::plan_resume_rebuilt`,
    /// so a resume rebuilds once); `None` rebuilds it here.
    pub async fn run_burst_from(
        &self,
        sink: &dyn TurnSink,
        session: SessionId,
        turns: Vec<Turn>,
        transcript: Option<Vec<Message<'static>>>,
        stop: &Stop,
    ) -> BurstReport {
        let mut state = SessionState::restore(session, turns, transcript, self.tools.as_ref());
        let (window, _) = self.compactor().budget(&state);
        let fitted = self
            .compactor()
            .fit_transcript(std::mem::take(&mut state.transcript), window);
        state.replace_transcript(fitted);
        // The server opens the `burst` span before the claim (so the claim
        // is in the burst's trace) and runs this inside it; the burst
        // number and exit reason are recorded on it. Run without one (an
        // embedder, the benchmarks), the burst opens its own.
        let current = tracing::Span::current();
        let span = if current.metadata().is_some_and(|m| m.name() == BURST_SPAN) {
            current.record("burst", state.burst);
            current
        } else {
            tracing::info_span!(
                "burst",
                session_id = %session,
                burst = state.burst,
                exit_reason = tracing::field::Empty
            )
        };
        // Attached to the future, not entered across awaits: an entered
        // guard would stay on the thread while the burst is suspended and
        // tag other tasks' log lines with this session.
        let run = async {
            let mut burst = state.begin_burst();
            let skills_loaded = report::loaded_skills(&self.skills, &state.tool_servers);
            let system =
                report::system_prompt(&self.config.system_prompt, &self.skills, &skills_loaded);
            let specs = self.tools.specs();
            let exit = self
                .work(sink, &mut state, &mut burst, &system, &specs, stop)
                .await;
            if report::worth_authoring(exit)
                && self
                    .compactor()
                    .over_threshold(&mut state, report::AUTHOR_SYSTEM, 0)
                && let Err(reason) = self
                    .compactor()
                    .compact(sink, &mut state, &mut burst, report::AUTHOR_SYSTEM, 0, stop)
                    .await
            {
                // The author step is tried anyway; its own failure decides.
                tracing::warn!(
                    reason = reason.as_str(),
                    "compaction before the report failed"
                );
            }
            let (exit, summary, author_usage) = self.author(&mut state, exit, stop).await;
            let report = report::build(
                &state,
                exit,
                summary,
                author_usage,
                &self.skills,
                skills_loaded,
            );
            tracing::Span::current().record("exit_reason", exit.as_str());
            tracing::info!(
                exit_reason = exit.as_str(),
                model_calls = burst.model_calls,
                turns = burst.turns,
                "burst finished"
            );
            report
        };
        run.instrument(span).await
    }

    async fn work(
        &self,
        sink: &dyn TurnSink,
        state: &mut SessionState,
        burst: &mut BurstState,
        system: &str,
        specs: &[ToolSpec],
        stop: &Stop,
    ) -> ExitReason {
        if let Some(Message::Assistant { tool_calls, .. }) = state.transcript.last()
            && tool_calls.is_empty()
        {
            // A recovered burst whose final answer was stored before its
            // worker died: the model owes nothing, only the report is left.
            return if state.is_follow_up() {
                ExitReason::AwaitingUser
            } else {
                ExitReason::Completed
            };
        }
        if !self.tools.available() {
            return ExitReason::ToolServersUnavailable;
        }
        let tools = tools_bytes(specs);
        // "Too long" answers in a row; each is followed by a compaction.
        let mut too_long = 0u32;
        // Model calls already made for the assistant turn being written:
        // streamed text of the next call counts its attempts after these.
        let mut attempts_before = 0u32;
        loop {
            if let Some(reason) = stop.reason() {
                return reason;
            }
            if state.iterations_used >= self.config.iteration_budget {
                return ExitReason::IterationBudgetExhausted;
            }
            if burst.model_calls >= self.config.max_model_calls_per_burst {
                return ExitReason::BurstLimitReached;
            }
            if self.compactor().over_threshold(state, system, tools)
                && let Err(reason) = self
                    .compactor()
                    .compact(sink, state, burst, system, tools, stop)
                    .await
            {
                return reason;
            }
            let request = CompletionRequest {
                system,
                messages: &state.transcript,
                tools: specs,
                max_tokens: self.config.max_tokens,
            };
            let session = state.session_id;
            // Text past the cap would be cut from the stored turn: it is
            // not streamed either.
            // (attempt, bytes streamed in it); a std mutex, never held
            // across an await.
            let streamed = std::sync::Mutex::new((0u32, 0usize));
            let text_cap = self.limits.max_model_text_bytes;
            let on_text = |attempt: u32, piece: &str| {
                let mut so_far = streamed
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if so_far.0 != attempt {
                    *so_far = (attempt, 0);
                }
                so_far.1 += piece.len();
                if so_far.1 <= text_cap {
                    sink.text_delta(session, attempts_before + attempt, piece);
                }
            };
            let answered = tokio::select! {
                biased;
                reason = stop.stopped() => return reason,
                answered = self.chain.complete_streaming(&mut state.provider, &request, &on_text) => answered,
            };
            let answered = match answered {
                Ok(a) => {
                    attempts_before += a.attempts;
                    a
                }
                Err(e) => {
                    attempts_before += e.failures.iter().map(|f| f.attempts).sum::<u32>();
                    if let Some((index, limit, requested)) = e.context_too_long()
                        && too_long < MAX_TOO_LONG_IN_A_ROW
                    {
                        // Not a model call that counts: nothing was answered.
                        too_long += 1;
                        let estimate = inquest_core::compaction::estimate_tokens(
                            system,
                            &state.transcript,
                            tools,
                        );
                        state.learn_window(index, limit, requested, estimate);
                        if let Err(reason) = self
                            .compactor()
                            .compact(sink, state, burst, system, tools, stop)
                            .await
                        {
                            return reason;
                        }
                        continue;
                    }
                    tracing::warn!(error = %e, "every provider failed");
                    return ExitReason::ProviderFailed;
                }
            };
            too_long = 0;
            burst.model_calls += 1;
            state.iterations_used += 1;
            let completion = answered.completion;
            if completion.text.trim().is_empty() && completion.tool_calls.is_empty() {
                burst.empty_replies += 1;
                tracing::warn!(retries = burst.empty_replies, "empty model reply");
                if burst.empty_replies > self.config.empty_reply_retries {
                    return ExitReason::NoProgress;
                }
                continue;
            }
            burst.empty_replies = 0;
            sink.text_complete(state.session_id, attempts_before);
            attempts_before = 0;
            let Shaped {
                text,
                calls,
                refusals,
            } = self.shape(state, completion.text, completion.tool_calls);
            let assistant = NewTurn::Assistant {
                text: text.clone(),
                tool_calls: calls.clone(),
                usage: completion.usage,
            };
            let assistant_seq = match persist(sink, state, burst, assistant).await {
                Ok(seq) => seq,
                Err(reason) => return reason,
            };
            failpoints::hit(failpoints::AFTER_ASSISTANT_PERSISTED).await;
            state.audit.tool_calls += calls.len() as u64;
            state.audit.input_tokens = state
                .audit
                .input_tokens
                .saturating_add(completion.usage.input_tokens);
            state.audit.output_tokens = state
                .audit
                .output_tokens
                .saturating_add(completion.usage.output_tokens);
            state.transcript.push(Message::Assistant {
                text: text.into(),
                tool_calls: calls.iter().cloned().map(Into::into).collect(),
            });
            if calls.is_empty() {
                return if state.is_follow_up() {
                    ExitReason::AwaitingUser
                } else {
                    ExitReason::Completed
                };
            }
            for (index, call) in calls.iter().enumerate() {
                if let Some(reason) = stop.reason() {
                    if reason != ExitReason::Interrupted {
                        // Cancelled (final) or no longer ours: nothing more
                        // to record.
                        return reason;
                    }
                    // Shutting down: these calls were not started and now
                    // never will be in this burst. Say so in their results,
                    // so the next replica's plan knows they did not run (an
                    // honest result, not a guess).
                    return self
                        .record_not_run(sink, state, burst, &calls[index..])
                        .await;
                }
                if let Err(e) = sink
                    .tool_call_started(state.session_id, assistant_seq, call)
                    .await
                {
                    tracing::warn!(error = %inquest_core::error_chain(&e), call_id = %call.id, "tool not started: the lease may expire before it could finish");
                    return ExitReason::LeaseLost;
                }
                failpoints::hit(failpoints::BEFORE_TOOL_RUN).await;
                let (outcome, stopped) = match &refusals[index] {
                    Some(why) => (Some(ToolOutcome::refused(why.clone())), None),
                    None => self.run_tool(state.session_id, call, stop).await,
                };
                failpoints::hit(failpoints::AFTER_TOOL_RUN).await;
                let Some(outcome) = outcome else {
                    // Cut off mid-run by a lost lease or the end of the
                    // shutdown grace: the call is left without a result.
                    // It may have run; the next claimer's recovery plan
                    // classifies it (a mutating one waits for a human).
                    return stopped.unwrap_or(ExitReason::Interrupted);
                };
                if !outcome.reached_server && outcome.is_error {
                    burst.bad_tool_strikes += 1;
                }
                if outcome.reached_server
                    && let Some(server) = state.tool_servers.get(&call.name)
                {
                    state.servers_used.insert(server.clone());
                }
                let result = NewTurn::Tool {
                    call_id: call.id.clone(),
                    tool_name: call.name.clone(),
                    content: outcome.content.clone(),
                    is_error: outcome.is_error,
                };
                failpoints::hit(failpoints::BEFORE_TOOL_RESULT_PERSIST).await;
                if let Err(reason) = persist(sink, state, burst, result).await {
                    return reason;
                }
                let (window, _) = self.compactor().budget(state);
                state.transcript.push(Message::ToolResult {
                    call_id: call.id.clone().into(),
                    name: call.name.clone().into(),
                    content: self.compactor().fit_result(outcome.content.into(), window),
                    is_error: outcome.is_error,
                });
                if let Some(reason) = stopped {
                    return reason;
                }
            }
            if burst.bad_tool_strikes >= self.config.bad_tool_strikes {
                return ExitReason::NoProgress;
            }
        }
    }

    /// Makes a model reply fit to store: each call gets a session-unique
    /// id (the provider's when it is valid and unused, else
    /// `inq_{seq}_{index}` for the seq the turn will be stored at: this
    /// burst is the session's only writer), the text is cut to
    /// `max_model_text_bytes`, and arguments over `max_tool_arguments_bytes`
    /// are cut, their call refused. The ids are recorded as used at once:
    /// a turn that then fails to store only wastes them.
    fn shape(&self, state: &mut SessionState, text: String, calls: Vec<ToolCall>) -> Shaped {
        let seq = state.turns.last().map_or(Seq::FIRST, |t| t.seq.next());
        let provided: Vec<Option<&str>> = calls
            .iter()
            .map(|c| (!state.partial_history).then_some(c.id.as_str()))
            .collect();
        let ids = session_unique_call_ids(&state.call_ids, seq.get(), &provided);
        let text_cap = self.limits.max_model_text_bytes;
        let text = cut_text(
            &text,
            text_cap,
            &format!("model text over limits.max_model_text_bytes = {text_cap}"),
        )
        .into_owned();
        let args_cap = self.limits.max_tool_arguments_bytes;
        let mut refusals = Vec::with_capacity(calls.len());
        let calls = calls
            .into_iter()
            .zip(ids)
            .map(|(mut call, id)| {
                if call.id != id {
                    tracing::debug!(provided = %call.id, stored = %id, "tool-call id replaced");
                }
                state.call_ids.insert(id.clone());
                call.id = id;
                let sent = call.arguments.as_sent();
                if sent.len() > args_cap {
                    let what = format!(
                        "tool-call arguments over limits.max_tool_arguments_bytes = {args_cap}"
                    );
                    call.arguments =
                        ToolArguments::Raw(cut_text(&sent, args_cap, &what).into_owned());
                    refusals.push(Some(format!(
                        "not run: the arguments of this call were {} bytes, over \
                         limits.max_tool_arguments_bytes = {args_cap}; send smaller arguments",
                        sent.len()
                    )));
                } else {
                    refusals.push(None);
                }
                call
            })
            .collect();
        Shaped {
            text,
            calls,
            refusals,
        }
    }

    /// Runs one tool call to its end. A shutdown lets it finish (its real
    /// result is stored). A cancel cuts it off with an error result that
    /// says it may have partly run (the session ends for good, so no plan
    /// will classify it). A lost lease or the end of the shutdown grace
    /// cuts it off with no outcome at all: no result is written, and the
    /// call stays dangling for the next claimer's recovery plan.
    async fn run_tool(
        &self,
        session: SessionId,
        call: &ToolCall,
        stop: &Stop,
    ) -> (Option<ToolOutcome>, Option<ExitReason>) {
        tokio::select! {
            biased;
            reason = stop.tool_cut() => {
                if reason != ExitReason::Cancelled {
                    return (None, Some(reason));
                }
                let outcome = ToolOutcome {
                    content: "the session was cancelled while this tool was running; it may have \
                              partly run"
                        .to_owned(),
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
    /// started because the server is shutting down. These calls provably did not
    /// run, so the result says so and nothing is left dangling.
    async fn record_not_run(
        &self,
        sink: &dyn TurnSink,
        state: &mut SessionState,
        burst: &mut BurstState,
        calls: &[ToolCall],
    ) -> ExitReason {
        for call in calls {
            let content =
                "not run: the server was shutting down before this tool call started".to_owned();
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
        ExitReason::Interrupted
    }

    /// The author step: one model call, no tools, that writes the summary.
    /// Its failure becomes the exit reason only when nothing else went wrong.
    /// A stop while it runs wins, as it does over any model call: a
    /// shutdown hands the session over (the next replica, finding the
    /// final answer stored, only authors the report), a cancel ends it
    /// `cancelled`, a lost lease writes nothing.
    async fn author(
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
