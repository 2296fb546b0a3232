//! SendMessage: a follow-up that reopens a finished session.

use inquest_store::Queueing;

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
        // An unknown value is refused like the others: guessing could run
        // a message twice or drop it.
        // An interrupting message takes the queue's path (stored at once,
        // drained by the close), and asks the burst that drains it to stop.
        let queueing = |interrupt| {
            Some(Queueing {
                bound: self.limits.max_queued_messages,
                interrupt,
            })
        };
        let enqueue = match pb::IfRunning::try_from(req.if_running) {
            Ok(pb::IfRunning::Unspecified | pb::IfRunning::Reject) => None,
            Ok(pb::IfRunning::Enqueue) => queueing(false),
            Ok(pb::IfRunning::Interrupt) => queueing(true),
            Err(_) => {
                return Err(Status::invalid_argument(format!(
                    "if_running {} is not an IfRunning value",
                    req.if_running
                )));
            }
        };
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
                    .send_message(&tenant, quota, id, message, key, enqueue)
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
                    queued: false,
                    queue_position: 0,
                }))
            }
            SendOutcome::Queued {
                position,
                created,
                interrupt,
                ..
            } => {
                tracing::info!(
                    position,
                    created,
                    interrupt = interrupt.is_some(),
                    "follow-up message queued"
                );
                Ok(Response::new(pb::SendMessageResponse {
                    seq: 0,
                    queued: true,
                    queue_position: position,
                }))
            }
            SendOutcome::QueueFull { limit } => Err(ApiError::ResourceExhausted {
                what: format!("session {id} already holds {limit} queued messages"),
                limit: "limits.max_queued_messages",
                value: limit,
                retry_after: std::time::Duration::from_secs(1),
            }
            .into()),
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
