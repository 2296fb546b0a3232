//! Starts and finishes bursts: the glue between the agent loop and the
//! server's persist-then-publish path.
//!
//! `StartSession` and `SendMessage` leave a session `pending`; [`Runner::start`]
//! claims it (`pending` → `running`, atomically, so one burst per session),
//! validates and plans the resume ([`crate::resume`]: a notice for a plan
//! that is not clean, a hold when it needs confirmation), runs the agent
//! (which restores and rebuilds the transcript from the stored turns), saves the report
//! and closes the burst with the status its exit reason implies. Everything
//! the burst needs comes from the database, so the same path serves a first
//! message and a follow-up after a restart.

use std::sync::Arc;

use inquest_agent::{Agent, BoxFuture, BurstReport, SinkError, Stop, TurnSink};
use inquest_broadcast::ToolCallStart;
use inquest_core::{NewTurn, Seq, SessionId, SideEffect, ToolCall, Turn};
use time::OffsetDateTime;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use crate::{
    resume::{self, Prepared},
    status::chain,
    turn_log::TurnLog,
};

/// Runs bursts on this replica. Cheap to clone.
#[derive(Clone)]
pub struct Runner {
    /// `None` when no provider is configured: sessions are stored and
    /// watched, but no agent runs (a warning says so at startup).
    agent: Option<Arc<Agent>>,
    log: TurnLog,
    /// Owner of every burst task; shutdown waits for them.
    tasks: TaskTracker,
    /// Server shutdown: running bursts end with `interrupted`.
    shutdown: CancellationToken,
}

/// The agent's door to the turn log: the loop persists and publishes
/// through exactly the path every other writer uses.
impl TurnSink for TurnLog {
    fn append(&self, session: SessionId, turn: NewTurn) -> BoxFuture<'_, Result<Turn, SinkError>> {
        Box::pin(async move {
            TurnLog::append(self, session, turn)
                .await
                .map(|t| (*t).clone())
                .map_err(|e| SinkError(Box::new(e)))
        })
    }

    fn tool_call_started(&self, session: SessionId, assistant_seq: Seq, call: &ToolCall) {
        self.publish_tool_call_start(ToolCallStart {
            session_id: session,
            assistant_seq,
            call_id: call.id.clone(),
            tool_name: call.name.clone(),
            started_at: OffsetDateTime::now_utc(),
        });
    }
}

impl Runner {
    pub fn new(
        agent: Option<Arc<Agent>>,
        log: TurnLog,
        tasks: TaskTracker,
        shutdown: CancellationToken,
    ) -> Self {
        Self {
            agent,
            log,
            tasks,
            shutdown,
        }
    }

    /// Starts the burst of a `pending` session in the background. Does
    /// nothing when no agent is configured or the server is shutting down.
    pub fn start(&self, session: SessionId) {
        self.spawn(session, false);
    }

    /// Starts the bursts of sessions left `pending` (their message was stored
    /// but the process stopped before the burst was claimed). Called once at
    /// startup.
    pub async fn start_pending(&self) {
        if self.agent.is_none() {
            return;
        }
        match self.log.store().pending_sessions(10_000).await {
            Ok(sessions) => {
                if !sessions.is_empty() {
                    tracing::info!(count = sessions.len(), "starting bursts left pending");
                }
                for session in sessions {
                    self.start(session);
                }
            }
            Err(e) => tracing::warn!(error = %chain(&e), "cannot look for pending sessions"),
        }
    }

    /// Starts the burst `ContinueSession` confirmed: the recovery plan is
    /// re-stored but neither re-noticed nor held again.
    pub fn start_confirmed(&self, session: SessionId) {
        self.spawn(session, true);
    }

    /// How a tool affects the world, for recovery plans: from the agent's
    /// tool catalog; every tool is mutating when no agent is configured.
    pub fn side_effect(&self, tool: &str) -> SideEffect {
        self.agent
            .as_ref()
            .map_or(SideEffect::Mutating, |a| a.side_effect(tool))
    }

    fn spawn(&self, session: SessionId, confirmed: bool) {
        let Some(agent) = self.agent.clone() else {
            return;
        };
        if self.shutdown.is_cancelled() || self.tasks.is_closed() {
            return;
        }
        let this = self.clone();
        self.tasks
            .spawn(async move { this.run(agent, session, confirmed).await });
    }

    async fn run(self, agent: Arc<Agent>, session: SessionId, confirmed: bool) {
        let cancel = match self.log.claim_burst(session).await {
            Ok(Some(token)) => token,
            // Claimed elsewhere, or cancelled before it started.
            Ok(None) => return,
            Err(e) => {
                tracing::error!(%session, error = %chain(&e), "cannot claim the burst");
                return;
            }
        };
        let classes = |tool: &str| agent.side_effect(tool);
        let turns = match resume::prepare(&self.log, &classes, session, confirmed).await {
            Prepared::Run(turns) => turns,
            Prepared::Stopped => return,
            Prepared::StoreFailed => {
                let reason = inquest_core::ExitReason::StoreFailed;
                if let Err(e) = self
                    .log
                    .close(session, reason.session_status(), reason.as_str())
                    .await
                {
                    tracing::error!(%session, error = %chain(&e), "cannot record the burst's end");
                }
                return;
            }
        };
        let stop = Stop {
            cancel,
            shutdown: self.shutdown.clone(),
        };
        let report = agent.run_burst(&self.log, session, turns, &stop).await;
        self.finish(session, report).await;
    }

    /// Saves the report, then ends the burst (watchers end, status set).
    async fn finish(&self, session: SessionId, report: BurstReport) {
        let exit = report.exit_reason;
        let counters = serde_json::json!({
            "tool_calls": report.audit.tool_calls,
            "input_tokens": report.audit.input_tokens,
            "output_tokens": report.audit.output_tokens,
            "skills_loaded": report.skills_loaded,
            "skills_used": report.skills_used,
            "servers_used": report.servers_used,
        });
        if let Err(e) = self
            .log
            .store()
            .save_report(
                session,
                report.burst,
                exit,
                report.summary,
                counters,
                report.active_time_ms,
            )
            .await
        {
            tracing::error!(%session, error = %chain(&e), "cannot save the burst's report");
        }
        if let Err(e) = self
            .log
            .close(session, exit.session_status(), exit.as_str())
            .await
        {
            tracing::error!(%session, error = %chain(&e), "cannot record the burst's end");
        }
    }
}
