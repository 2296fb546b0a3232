//! DecideToolCalls: a human approves or denies tool calls the approval
//! policy held.

use inquest_core::approval::{ApprovalState, Decision, MAX_COMMENT_BYTES};
use inquest_store::DecideOutcome;

use super::*;

impl InvestigationsService {
    pub(super) async fn do_decide_tool_calls(
        &self,
        caller: &Caller,
        req: pb::DecideToolCallsRequest,
    ) -> Result<Response<pb::Session>, Status> {
        let id = SessionId::parse(&req.session_id).map_err(ApiError::from)?;
        let key = IdempotencyKey::parse_optional(req.idempotency_key).map_err(ApiError::from)?;
        let decisions = parse_decisions(req.decisions, &caller.principal.name)?;
        let named: Vec<String> = decisions.iter().map(|(id, _)| id.clone()).collect();
        let request = inquest_core::RequestFingerprint::decide_tool_calls(decisions.iter().map(
            |(call_id, d)| {
                (
                    call_id.as_str(),
                    matches!(d, Decision::Approve { .. }),
                    d.comment(),
                )
            },
        ));
        // Commit → publish → start as one unit, as SendMessage does: a
        // client that leaves right after the commit cannot strand the
        // burst (the reaper would start it later anyway).
        let (log, runner) = (self.log.clone(), self.runner.clone());
        let tenant = caller.tenant.clone();
        let outcome = self
            .runner
            .unit::<_, ApiError, _>(async move {
                let outcome = log
                    .decide_tool_calls(&tenant, id, decisions, key, request)
                    .await
                    .map_err(ApiError::from)?;
                if let DecideOutcome::Decided { session, .. } = &outcome
                    && session.status == SessionStatus::Pending
                {
                    runner.start(id);
                }
                Ok(outcome)
            })
            .await?;
        match outcome {
            DecideOutcome::Decided {
                session,
                turns,
                reopened,
                created,
            } => {
                tracing::info!(
                    denied = turns.len(),
                    reopened,
                    created,
                    "tool calls decided"
                );
                let rows = self.store.approvals(id).await.map_err(ApiError::from)?;
                if created {
                    record_decisions(&rows, &named);
                }
                let mut wire = convert::session(*session);
                wire.approvals = rows.into_iter().map(convert::approval).collect();
                Ok(Response::new(wire))
            }
            DecideOutcome::NotPending { call_id, status } => {
                let why = if status == SessionStatus::AwaitingApproval {
                    format!("tool call {call_id:?} is not pending approval in session {id}")
                } else {
                    format!(
                        "session {id} is {status}, not awaiting approval: tool call {call_id:?} \
                         cannot be decided"
                    )
                };
                Err(ApiError::precondition(
                    Reason::ApprovalNotPending,
                    format!("{why}; nothing was written (see GetSession's approvals)"),
                    vec![(key::CALL_ID, call_id), (key::STATUS, status.to_string())],
                )
                .into())
            }
        }
    }

    /// The session's latest approval hold, on the wire.
    pub(super) async fn approvals_of(&self, id: SessionId) -> Result<Vec<pb::Approval>, ApiError> {
        Ok(self
            .store
            .approvals(id)
            .await?
            .into_iter()
            .map(convert::approval)
            .collect())
    }
}

/// Counts the decisions this call made (`named`), and how long each
/// call waited for its human.
fn record_decisions(rows: &[inquest_store::ApprovalRow], named: &[String]) {
    for row in rows.iter().filter(|r| named.contains(&r.call_id)) {
        let outcome = match row.state {
            ApprovalState::Approved => "approved",
            ApprovalState::Denied => "denied",
            _ => continue,
        };
        metrics::counter!("inquest_approvals_decided_total", "outcome" => outcome).increment(1);
        if let Some(decided) = row.decided_at {
            let waited = (decided - row.requested_at).as_seconds_f64().max(0.0);
            metrics::histogram!("inquest_approval_decision_seconds").record(waited);
        }
    }
}

/// Checks every decision before anything is written: at least one, each
/// call id once, a verdict, a comment within bounds and without NUL.
fn parse_decisions(
    decisions: Vec<pb::ToolCallDecision>,
    by: &str,
) -> Result<Vec<(String, Decision)>, ApiError> {
    if decisions.is_empty() {
        return Err(ApiError::InvalidArgument(
            "decisions is empty: name at least one pending call (GetSession's approvals)".into(),
        ));
    }
    let mut seen = std::collections::HashSet::new();
    decisions
        .into_iter()
        .enumerate()
        .map(|(i, d)| {
            if d.call_id.is_empty() || d.call_id.len() > 256 || d.call_id.contains('\0') {
                return Err(ApiError::InvalidArgument(format!(
                    "decisions[{i}].call_id must be 1 to 256 bytes without NUL"
                )));
            }
            if !seen.insert(d.call_id.clone()) {
                return Err(ApiError::InvalidArgument(format!(
                    "decisions[{i}].call_id {:?} is named twice",
                    d.call_id
                )));
            }
            if d.comment.len() > MAX_COMMENT_BYTES || d.comment.contains('\0') {
                return Err(ApiError::InvalidArgument(format!(
                    "decisions[{i}].comment must be at most {MAX_COMMENT_BYTES} bytes, without NUL"
                )));
            }
            let by = by.to_owned();
            let comment = d.comment.trim().to_owned();
            let decision = match pb::ToolCallVerdict::try_from(d.verdict) {
                Ok(pb::ToolCallVerdict::Approve) => Decision::Approve { by, comment },
                Ok(pb::ToolCallVerdict::Deny) => Decision::Deny { by, comment },
                _ => {
                    return Err(ApiError::InvalidArgument(format!(
                        "decisions[{i}].verdict must be APPROVE or DENY"
                    )));
                }
            };
            Ok((d.call_id, decision))
        })
        .collect()
}
