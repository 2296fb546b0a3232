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
use tracing::Instrument;

mod approve;
mod author;
mod tools;

use self::approve::Screened;
use crate::{
    AgentConfig, AgentLimits, Answered, ChainError, Completion, CompletionRequest, ProviderChain,
    ToolSpec,
    compact::{Compactor, ContextLimits, tools_bytes},
    failpoints,
    persist::persist,
    report::{self, BurstReport, Skill},
    sink::HeldCall,
    sink::{ToolOutcome, ToolRunner, TurnSink},
    state::{BurstState, SessionState},
    stop::Stop,
};

/// The name of a burst's span. The engine opens it (`inquest_engine::runner`) with the
/// fields `session_id`, `mode`, `trace_id`, `burst` and `exit_reason`;
/// [`Agent::run_burst`] records the last two on it.
pub const BURST_SPAN: &str = "burst";

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

/// A model reply as stored: the seq of its assistant turn, and its calls
/// with, per call, why it must not run, if so.
struct Reply {
    seq: Seq,
    calls: Vec<ToolCall>,
    refusals: Vec<Option<String>>,
}

/// What every step of a burst's loop reads, unchanged for the whole loop.
struct LoopInputs<'a> {
    sink: &'a dyn TurnSink,
    system: &'a str,
    specs: &'a [ToolSpec],
    /// The serialized size of `specs`, for the estimate.
    tools: usize,
    stop: &'a Stop,
}

/// Model calls made for the assistant turn being written.
#[derive(Default)]
struct TurnAttempts {
    /// "Too long" answers in a row; each is followed by a compaction.
    too_long: u32,
    /// Model calls already made for the assistant turn being written:
    /// streamed text of the next call counts its attempts after these.
    before: u32,
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
        self.run_burst_approved(sink, session, turns, transcript, Vec::new(), None, stop)
            .await
    }

    /// [`Agent::run_burst_from`] for a burst that first runs `approved`:
    /// calls a human approved (each with the seq of the assistant turn
    /// that asked for it), stored without a result and never started.
    /// `only_skills`: the session's own choice of `[[skills]]` by name
    /// (`None`: every configured one).
    #[allow(clippy::too_many_arguments)]
    pub async fn run_burst_approved(
        &self,
        sink: &dyn TurnSink,
        session: SessionId,
        turns: Vec<Turn>,
        transcript: Option<Vec<Message<'static>>>,
        approved: Vec<(Seq, ToolCall)>,
        only_skills: Option<&[String]>,
        stop: &Stop,
    ) -> BurstReport {
        // A name the configuration no longer has loads nothing: the
        // session keeps its choice, and the skill is simply gone.
        let skills: Vec<Skill> = match only_skills {
            None => self.skills.clone(),
            Some(names) => self
                .skills
                .iter()
                .filter(|s| names.contains(&s.name))
                .cloned()
                .collect(),
        };
        let mut state = SessionState::restore(session, turns, transcript, self.tools.as_ref());
        let compactor = self.compactor();
        let (window, _) = compactor.budget(&state);
        let fitted = compactor.fit_transcript(std::mem::take(&mut state.transcript), window);
        state.replace_transcript(fitted);
        let span = burst_span(session, state.burst);
        // Attached to the future, not entered across awaits: an entered
        // guard would stay on the thread while the burst is suspended and
        // tag other tasks' log lines with this session.
        let started = time::OffsetDateTime::now_utc();
        let run = async {
            let mut burst = state.begin_burst();
            let skills_loaded = report::loaded_skills(&skills, &state.tool_servers);
            let system = report::system_prompt(&self.config.system_prompt, &skills, &skills_loaded);
            let specs = self.tools.specs();
            let exit = self
                .work(
                    sink, &mut state, &mut burst, &system, &specs, approved, stop,
                )
                .await;
            self.compact_before_author(sink, &mut state, &mut burst, exit, stop)
                .await;
            let (exit, summary, author_usage) = self.author(&mut state, exit, stop).await;
            let report = report::build(
                &state,
                exit,
                summary,
                author_usage,
                &skills,
                skills_loaded,
                started,
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

    /// The loop of a burst: model rounds, each reply stored and its tool
    /// calls run, until the model stops calling tools or a rail trips.
    /// Returns the reason the burst ends with.
    #[allow(clippy::too_many_arguments)]
    async fn work(
        &self,
        sink: &dyn TurnSink,
        state: &mut SessionState,
        burst: &mut BurstState,
        system: &str,
        specs: &[ToolSpec],
        approved: Vec<(Seq, ToolCall)>,
        stop: &Stop,
    ) -> ExitReason {
        if let Some(exit) = self.nothing_to_ask(state) {
            return exit;
        }
        let inputs = LoopInputs {
            sink,
            system,
            specs,
            tools: tools_bytes(specs),
            stop,
        };
        if let Err(reason) = self.run_approved(&inputs, state, burst, approved).await {
            return reason;
        }
        let mut attempts = TurnAttempts::default();
        loop {
            if let Some(reason) = self.rail_tripped(state, burst, stop) {
                return reason;
            }
            if let Err(reason) = self.compact_if_due(&inputs, state, burst).await {
                return reason;
            }
            let completion = match self.model_round(&inputs, state, burst, &mut attempts).await {
                Ok(Some(completion)) => completion,
                // Nothing to store: the request was too long and the
                // transcript was compacted, or the reply was empty.
                Ok(None) => continue,
                Err(reason) => return reason,
            };
            let reply = match self.store_reply(sink, state, burst, completion).await {
                Ok(reply) => reply,
                Err(reason) => return reason,
            };
            if reply.calls.is_empty() {
                return final_answer(state);
            }
            if let Err(reason) = self.run_calls(&inputs, state, burst, &reply).await {
                return reason;
            }
            if burst.bad_tool_strikes >= self.config.bad_tool_strikes {
                return ExitReason::NoProgress;
            }
        }
    }

    /// Why a burst ends before any model call, if it does: a recovered
    /// burst whose final answer is already stored, or no tool server up.
    fn nothing_to_ask(&self, state: &SessionState) -> Option<ExitReason> {
        if let Some(Message::Assistant { tool_calls, .. }) = state.transcript.last()
            && tool_calls.is_empty()
        {
            // A recovered burst whose final answer was stored before its
            // worker died: the model owes nothing, only the report is left.
            return Some(final_answer(state));
        }
        if !self.tools.available() {
            return Some(ExitReason::ToolServersUnavailable);
        }
        None
    }

    /// The rail that ends the burst before its next model call, if one
    /// tripped: a stop, the session's iteration budget, the burst's
    /// model-call limit (checked in that order).
    fn rail_tripped(
        &self,
        state: &SessionState,
        burst: &BurstState,
        stop: &Stop,
    ) -> Option<ExitReason> {
        if let Some(reason) = stop.reason() {
            return Some(reason);
        }
        if state.iterations_used >= self.config.iteration_budget {
            return Some(ExitReason::IterationBudgetExhausted);
        }
        if burst.model_calls >= self.config.max_model_calls_per_burst {
            return Some(ExitReason::BurstLimitReached);
        }
        None
    }

    /// Compacts the transcript when the next request would pass the
    /// threshold (`compact.rs`). `Err`: the reason the burst ends with.
    async fn compact_if_due(
        &self,
        inputs: &LoopInputs<'_>,
        state: &mut SessionState,
        burst: &mut BurstState,
    ) -> Result<(), ExitReason> {
        let compactor = self.compactor();
        if compactor.over_threshold(state, inputs.system, inputs.tools) {
            compactor
                .compact(
                    inputs.sink,
                    state,
                    burst,
                    inputs.system,
                    inputs.tools,
                    inputs.stop,
                )
                .await?;
        }
        Ok(())
    }

    /// One model call and what its answer means for the loop. `Ok(Some)`:
    /// a reply to store. `Ok(None)`: nothing to store, the round is tried
    /// again. `Err`: the reason the burst ends with. A stop wins over the
    /// call in flight.
    async fn model_round(
        &self,
        inputs: &LoopInputs<'_>,
        state: &mut SessionState,
        burst: &mut BurstState,
        attempts: &mut TurnAttempts,
    ) -> Result<Option<Completion>, ExitReason> {
        let answered = tokio::select! {
            biased;
            reason = inputs.stop.stopped() => return Err(reason),
            answered = self.call_model(inputs, state, attempts.before) => answered,
        };
        let answered = match answered {
            Ok(a) => {
                attempts.before += a.attempts;
                a
            }
            Err(e) => {
                attempts.before += e.failures.iter().map(|f| f.attempts).sum::<u32>();
                self.after_failed_call(inputs, state, burst, attempts, &e)
                    .await?;
                return Ok(None);
            }
        };
        attempts.too_long = 0;
        burst.model_calls += 1;
        state.iterations_used += 1;
        let completion = answered.completion;
        if completion.text.trim().is_empty() && completion.tool_calls.is_empty() {
            burst.empty_replies += 1;
            tracing::warn!(retries = burst.empty_replies, "empty model reply");
            if burst.empty_replies > self.config.empty_reply_retries {
                return Err(ExitReason::NoProgress);
            }
            return Ok(None);
        }
        burst.empty_replies = 0;
        inputs.sink.text_complete(state.session_id, attempts.before);
        attempts.before = 0;
        Ok(Some(completion))
    }

    /// Calls the chain with the transcript, streaming the reply's text to
    /// the sink as it comes. `attempts_before`: see [`TurnAttempts`].
    async fn call_model(
        &self,
        inputs: &LoopInputs<'_>,
        state: &mut SessionState,
        attempts_before: u32,
    ) -> Result<Answered, ChainError> {
        let request = CompletionRequest {
            system: inputs.system,
            messages: &state.transcript,
            tools: inputs.specs,
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
                inputs
                    .sink
                    .text_delta(session, attempts_before + attempt, piece);
            }
        };
        self.chain
            .complete_streaming(&mut state.provider, &request, &on_text)
            .await
    }

    /// A model call every provider failed. After a "too long" answer
    /// (fewer than [`MAX_TOO_LONG_IN_A_ROW`] in a row) the burst learns the
    /// window and compacts, and the round can be tried again (`Ok`); any
    /// other failure ends it with `provider_failed`.
    async fn after_failed_call(
        &self,
        inputs: &LoopInputs<'_>,
        state: &mut SessionState,
        burst: &mut BurstState,
        attempts: &mut TurnAttempts,
        e: &ChainError,
    ) -> Result<(), ExitReason> {
        if let Some((index, limit, requested)) = e.context_too_long()
            && attempts.too_long < MAX_TOO_LONG_IN_A_ROW
        {
            // Not a model call that counts: nothing was answered.
            attempts.too_long += 1;
            let estimate = inquest_core::compaction::estimate_tokens(
                inputs.system,
                &state.transcript,
                inputs.tools,
            );
            state.learn_window(index, limit, requested, estimate);
            return self
                .compactor()
                .compact(
                    inputs.sink,
                    state,
                    burst,
                    inputs.system,
                    inputs.tools,
                    inputs.stop,
                )
                .await;
        }
        tracing::warn!(error = %e, "every provider failed");
        Err(ExitReason::ProviderFailed)
    }

    /// Stores a model reply as an assistant turn (made fit to store by
    /// [`Agent::shape`]), counts it in the audit and adds it to the
    /// transcript. `Err`: the reason the burst ends with.
    async fn store_reply(
        &self,
        sink: &dyn TurnSink,
        state: &mut SessionState,
        burst: &mut BurstState,
        completion: Completion,
    ) -> Result<Reply, ExitReason> {
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
        let seq = persist(sink, state, burst, assistant).await?;
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
        Ok(Reply {
            seq,
            calls,
            refusals,
        })
    }

    /// Runs a reply's tool calls in order, storing each one's result.
    /// `Err`: the reason the burst ends with.
    async fn run_calls(
        &self,
        inputs: &LoopInputs<'_>,
        state: &mut SessionState,
        burst: &mut BurstState,
        reply: &Reply,
    ) -> Result<(), ExitReason> {
        let gate = inputs.sink.approval();
        let mut held = Vec::new();
        for (index, call) in reply.calls.iter().enumerate() {
            if let Some(reason) = inputs.stop.reason() {
                if !matches!(
                    reason,
                    ExitReason::Interrupted | ExitReason::InterruptedByUser
                ) {
                    // Cancelled (final) or no longer ours: nothing more
                    // to record.
                    return Err(reason);
                }
                // Shutting down or interrupted: these calls were not
                // started and now never will be in this burst. Say so in
                // their results, so the next burst's plan (and model)
                // knows they did not run (an honest result, not a guess).
                // Held calls were not requested yet: they did not run
                // either.
                let not_run = not_started(&mut held, &reply.calls[index..]);
                return Err(self
                    .record_not_run(inputs.sink, state, burst, &not_run, reason)
                    .await);
            }
            let mut refusal = reply.refusals[index].clone();
            if refusal.is_none()
                && let Some(gate) = &gate
            {
                match self.screen(gate, state, call) {
                    Screened::Run => {}
                    Screened::Refuse(why) => refusal = Some(why),
                    Screened::Hold(h) => {
                        held.push(h);
                        continue;
                    }
                }
            }
            if let Err(reason) = self
                .run_call(inputs, state, burst, reply.seq, call, refusal.as_deref())
                .await
            {
                if reason == ExitReason::InterruptedByUser {
                    // The call's own (cut) result is stored; the calls
                    // after it never start.
                    let not_run = not_started(&mut held, &reply.calls[index + 1..]);
                    return Err(self
                        .record_not_run(inputs.sink, state, burst, &not_run, reason)
                        .await);
                }
                return Err(reason);
            }
        }
        if held.is_empty() {
            return Ok(());
        }
        if inputs.stop.reason() == Some(ExitReason::InterruptedByUser) {
            // The user redirected the burst before its calls were held: the
            // interrupting message runs now, not after a human's decision.
            let not_run = not_started(&mut held, &[]);
            return Err(self
                .record_not_run(
                    inputs.sink,
                    state,
                    burst,
                    &not_run,
                    ExitReason::InterruptedByUser,
                )
                .await);
        }
        Err(self.hold(inputs.sink, state, reply.seq, held).await)
    }

    /// Announces one tool call of the assistant turn `assistant_seq`, runs
    /// it (or refuses it: `refusal` says why) and stores its result.
    /// `Err`: the reason the burst ends with, also when a stop cut the
    /// call short after its result was stored.
    async fn run_call(
        &self,
        inputs: &LoopInputs<'_>,
        state: &mut SessionState,
        burst: &mut BurstState,
        assistant_seq: Seq,
        call: &ToolCall,
        refusal: Option<&str>,
    ) -> Result<(), ExitReason> {
        if let Err(e) = inputs
            .sink
            .tool_call_started(state.session_id, assistant_seq, call)
            .await
        {
            tracing::warn!(error = %inquest_core::error_chain(&e), call_id = %call.id, "tool not started: the lease may expire before it could finish");
            return Err(ExitReason::LeaseLost);
        }
        failpoints::hit(failpoints::BEFORE_TOOL_RUN).await;
        let (outcome, stopped) = match refusal {
            Some(why) => (Some(ToolOutcome::refused(why)), None),
            None => self.run_tool(state.session_id, call, inputs.stop).await,
        };
        failpoints::hit(failpoints::AFTER_TOOL_RUN).await;
        let Some(outcome) = outcome else {
            // Cut off mid-run by a lost lease or the end of the
            // shutdown grace: the call is left without a result.
            // It may have run; the next claimer's recovery plan
            // classifies it (a mutating one waits for a human).
            return Err(stopped.unwrap_or(ExitReason::Interrupted));
        };
        self.store_result(inputs.sink, state, burst, call, outcome)
            .await?;
        match stopped {
            Some(reason) => Err(reason),
            None => Ok(()),
        }
    }

    /// Stores a tool call's outcome as its result turn and adds it to the
    /// transcript, cut to fit the window there ([`Compactor::fit_result`]).
    /// A failed call that never reached a server is a bad tool call; one
    /// that reached its server marks the server used.
    async fn store_result(
        &self,
        sink: &dyn TurnSink,
        state: &mut SessionState,
        burst: &mut BurstState,
        call: &ToolCall,
        outcome: ToolOutcome,
    ) -> Result<(), ExitReason> {
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
        persist(sink, state, burst, result).await?;
        let compactor = self.compactor();
        let (window, _) = compactor.budget(state);
        state.transcript.push(Message::ToolResult {
            call_id: call.id.clone().into(),
            name: call.name.clone().into(),
            content: compactor.fit_result(outcome.content.into(), window),
            is_error: outcome.is_error,
        });
        Ok(())
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
}

/// The span a burst runs in. The server opens the `burst` span before
/// the claim (so the claim is in the burst's trace) and runs the burst
/// inside it; the burst number is recorded on it here, the exit reason
/// at the end. Run without one (an embedder, the benchmarks), the burst
/// opens its own.
fn burst_span(session: SessionId, burst: u32) -> tracing::Span {
    let current = tracing::Span::current();
    if current.metadata().is_some_and(|m| m.name() == BURST_SPAN) {
        current.record("burst", burst);
        current
    } else {
        tracing::info_span!(
            "burst",
            session_id = %session,
            burst = burst,
            exit_reason = tracing::field::Empty
        )
    }
}

/// The calls a stop kept from starting: the held ones (not requested yet),
/// then `rest` of the reply.
fn not_started(held: &mut Vec<HeldCall>, rest: &[ToolCall]) -> Vec<ToolCall> {
    held.drain(..)
        .map(|h| h.call)
        .chain(rest.iter().cloned())
        .collect()
}

/// How a burst whose model gave its final answer ends: a follow-up burst
/// leaves the session awaiting the user, a first burst completes it.
fn final_answer(state: &SessionState) -> ExitReason {
    if state.is_follow_up() {
        ExitReason::AwaitingUser
    } else {
        ExitReason::Completed
    }
}
