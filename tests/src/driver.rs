//! A test driver that plays the agent: it claims a pending session's burst
//! (under a lease, like the runner) and writes assistant turns, tool starts
//! and tool results through the server's own [`BurstLog`] (the fenced
//! persist-then-publish path the agent uses), then closes the burst. The
//! live-watch tests produce turns this way, at exactly the pace they need.

use std::sync::Arc;

use inquest_broadcast::ToolCallStart;
use inquest_core::{
    ExitReason, NewTurn, Seq, SessionId, TokenUsage, ToolArguments, ToolCall, Turn,
};
use inquest_engine::burst_log::BurstLog;
use inquest_proto::v1::{self as pb, investigations_client::InvestigationsClient};
use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;

use crate::TestApp;

/// One claimed burst of one session.
pub struct Driver {
    pub burst: BurstLog,
    pub session: SessionId,
    /// Fires when the session is cancelled.
    pub cancelled: CancellationToken,
}

impl Driver {
    /// Claims the pending session's burst (status becomes running).
    pub async fn claim(app: &TestApp, session: &str) -> Driver {
        let session = SessionId::parse(session).expect("session id");
        let (burst, cancelled) = app
            .turn_log
            .claim_burst(session)
            .await
            .expect("claiming the burst")
            .expect("the session is pending");
        Driver {
            burst,
            session,
            cancelled,
        }
    }

    /// An assistant text turn.
    pub async fn say(&self, text: &str) -> Arc<Turn> {
        self.burst
            .append(NewTurn::Assistant {
                text: text.into(),
                tool_calls: Vec::new(),
                usage: TokenUsage::new(10, 5),
            })
            .await
            .expect("appending an assistant turn")
    }

    /// An assistant turn requesting one call of `tool` with id `call_id`.
    pub async fn call(&self, call_id: &str, tool: &str) -> Arc<Turn> {
        self.burst
            .append(NewTurn::Assistant {
                text: String::new(),
                tool_calls: vec![ToolCall {
                    id: call_id.into(),
                    name: tool.into(),
                    arguments: ToolArguments::from_model("{}"),
                }],
                usage: TokenUsage::default(),
            })
            .await
            .expect("appending a tool-calling turn")
    }

    /// Announces the call as running.
    pub fn start(&self, assistant_seq: Seq, call_id: &str, tool: &str) {
        self.burst.live().publish_tool_call_start(ToolCallStart {
            session_id: self.session,
            assistant_seq,
            call_id: call_id.into(),
            tool_name: tool.into(),
            started_at: OffsetDateTime::now_utc(),
        });
    }

    /// The call's result.
    pub async fn result(&self, call_id: &str, tool: &str, content: &str) -> Arc<Turn> {
        self.burst
            .append(NewTurn::Tool {
                call_id: call_id.into(),
                tool_name: tool.into(),
                content: content.into(),
                is_error: false,
            })
            .await
            .expect("appending a tool result")
    }

    /// A whole tool round: call, start, result. Returns the result turn.
    pub async fn tool_round(&self, call_id: &str, tool: &str) -> Arc<Turn> {
        let call = self.call(call_id, tool).await;
        self.start(call.seq, call_id, tool);
        self.result(call_id, tool, "ok").await
    }

    /// Ends the burst as `idle` with exit reason `awaiting_user`.
    pub async fn finish(self) {
        self.finish_as(ExitReason::AwaitingUser).await;
    }

    /// Ends the burst with `reason` (the status its ending names).
    pub async fn finish_as(self, reason: ExitReason) {
        self.burst.close(reason).await.expect("closing the burst");
    }
}

/// Creates an incident and a session through the API; returns the session id.
pub async fn new_session(client: &mut InvestigationsClient<Channel>) -> String {
    let incident = client
        .create_incident(pb::CreateIncidentRequest {
            title: "watch test".into(),
            description: String::new(),
        })
        .await
        .expect("create incident")
        .into_inner();
    client
        .start_session(pb::StartSessionRequest {
            incident_id: incident.id,
            message: "what happened?".into(),
            idempotency_key: String::new(),
        })
        .await
        .expect("start session")
        .into_inner()
        .id
}
