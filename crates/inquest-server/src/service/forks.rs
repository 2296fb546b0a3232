//! ForkSession: a new session of the same incident from a prefix of
//! another's history (`Store::fork_session`).

use inquest_store::{ForkOutcome, ForkRequest};

use super::*;

impl InvestigationsService {
    pub(super) async fn do_fork_session(
        &self,
        caller: &Caller,
        req: pb::ForkSessionRequest,
    ) -> Result<Response<pb::Session>, Status> {
        let source = SessionId::parse(&req.session_id).map_err(ApiError::from)?;
        let at_seq = inquest_core::Seq::from_stored(req.at_seq).ok_or_else(|| {
            ApiError::InvalidArgument(format!(
                "at_seq {} is not a turn: fork at a seq of 1 or more (the last turn to copy)",
                req.at_seq
            ))
        })?;
        let message = req
            .message
            .map(|m| UserMessage::parse(m, &self.limits))
            .transpose()
            .map_err(ApiError::from)?;
        let key = IdempotencyKey::parse_optional(req.idempotency_key).map_err(ApiError::from)?;
        let runs = message.is_some();
        if runs {
            self.burst_possible()?;
        }
        // Commit → publish → start as one unit a departing client cannot
        // cut short; a replay starts the burst too, in case the first
        // call's unit was cut off (starting a fork that is no longer
        // pending claims nothing).
        let (log, runner) = (self.log.clone(), self.runner.clone());
        let (tenant, quota) = (caller.tenant.clone(), self.tenants.quota(&caller.tenant));
        let request = ForkRequest {
            source,
            at_seq,
            message,
            key,
        };
        let outcome = self
            .runner
            .unit::<_, ApiError, _>(async move {
                let outcome = log
                    .fork_session(&tenant, quota, request)
                    .await
                    .map_err(ApiError::from)?;
                if let ForkOutcome::Forked(forked) = &outcome
                    && runs
                {
                    runner.start(forked.session.id);
                }
                Ok(outcome)
            })
            .await?;
        let forked = match outcome {
            ForkOutcome::Forked(forked) => *forked,
            ForkOutcome::BeyondHead { head } => {
                return Err(ApiError::ForkBeyondHead {
                    at: at_seq.get(),
                    head,
                }
                .into());
            }
        };
        if forked.created {
            tracing::info!(%source, at_seq = %at_seq, fork = %forked.session.id, "session forked");
        } else {
            tracing::info!(%source, fork = %forked.session.id, "fork replayed by idempotency key");
        }
        Ok(Response::new(convert::session(forked.session)))
    }
}
