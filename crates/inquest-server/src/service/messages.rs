//! SendMessage: a follow-up that reopens a finished session.

use super::*;

impl InvestigationsService {
    pub(super) async fn do_send_message(
        &self,
        caller: &Caller,
        request: Request<pb::SendMessageRequest>,
    ) -> Result<Response<pb::SendMessageResponse>, Status> {
        let req = request.into_inner();
        let id = SessionId::parse(&req.session_id).map_err(ApiError::from)?;
        let message = UserMessage::parse(req.message, &self.limits).map_err(ApiError::from)?;
        let key = IdempotencyKey::parse_optional(req.idempotency_key).map_err(ApiError::from)?;
        self.burst_possible()?;
        // Commit → reopen → publish → start as one unit a departing client
        // cannot cut short. A replay by idempotency key finishes what the
        // first call may have left undone (the latch, the start); starting
        // a session that is no longer pending claims nothing.
        let (log, runner) = (self.log.clone(), self.runner.clone());
        let (tenant, quota) = (caller.tenant.clone(), self.tenants.quota(&caller.tenant));
        let outcome = self
            .runner
            .unit::<_, ApiError, _>(async move {
                let outcome = log
                    .send_message(&tenant, quota, id, message, key)
                    .await
                    .map_err(ApiError::from)?;
                if let SendOutcome::Sent { .. } = &outcome {
                    runner.start(id);
                }
                Ok(outcome)
            })
            .await?;
        match outcome {
            SendOutcome::Sent { turn, created } => {
                tracing::info!(seq = %turn.seq, created, "follow-up message stored");
                Ok(Response::new(pb::SendMessageResponse {
                    seq: turn.seq.as_i64(),
                }))
            }
            SendOutcome::Busy {
                status: SessionStatus::AwaitingConfirmation,
            } => Err(ApiError::precondition(
                Reason::AwaitingConfirmation,
                format!(
                    "session {id} is awaiting confirmation of its recovery plan (see \
                     GetSession's last_recovery_plan); confirm with ContinueSession or cancel it"
                ),
                vec![(key::STATUS, SessionStatus::AwaitingConfirmation.to_string())],
            )
            .into()),
            SendOutcome::Busy { status } => {
                let recovering = match self.store.get_session(id).await {
                    Ok(row) => self.runner.recover_if_orphaned(&row).await,
                    Err(_) => false,
                };
                let detail = if recovering {
                    "; its worker was gone, so this replica claimed it and is recovering it"
                } else {
                    ""
                };
                Err(ApiError::precondition(
                    Reason::SessionRunning,
                    format!(
                        "session {id} is already running (status {status}){detail}; wait for \
                         its burst to end or cancel it"
                    ),
                    vec![(key::STATUS, status.to_string())],
                )
                .into())
            }
            SendOutcome::Ended {
                status,
                exit_reason,
            } => Err(ApiError::precondition(
                Reason::SessionCancelled,
                format!(
                    "session {id} is {status} (exit reason: {}) and takes no more messages; \
                     start a new session of the incident to go on",
                    exit_reason.map_or("none", inquest_core::ExitReason::as_str)
                ),
                vec![(key::STATUS, status.to_string())],
            )
            .into()),
        }
    }
}
