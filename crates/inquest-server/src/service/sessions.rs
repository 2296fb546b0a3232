//! StartSession, GetSession, ListSessions, CancelSession, ContinueSession,
//! GetRecoveryPlan, GetReport: a session's life, and what it left.

use super::*;

impl InvestigationsService {
    /// The caller's session, or NOT_FOUND exactly as for an unknown id
    /// when it is another tenant's: every call about a session passes here
    /// first (a session's tenant never changes).
    pub(super) async fn session_of(
        &self,
        caller: &Caller,
        id: SessionId,
    ) -> Result<inquest_store::SessionRow, ApiError> {
        Ok(self.store.get_tenant_session(&caller.tenant, id).await?)
    }

    pub(super) async fn do_start_session(
        &self,
        caller: &Caller,
        req: pb::StartSessionRequest,
    ) -> Result<Response<pb::Session>, Status> {
        let incident = IncidentId::parse(&req.incident_id).map_err(ApiError::from)?;
        tracing::Span::current().record("incident_id", tracing::field::display(incident));
        let message = UserMessage::parse(req.message, &self.limits).map_err(ApiError::from)?;
        let key = IdempotencyKey::parse_optional(req.idempotency_key).map_err(ApiError::from)?;
        self.burst_possible()?;
        // Commit → publish → start runs as one unit a departing client
        // cannot cut short; a replay starts the burst too, in case the
        // first call's unit was cut off (a start of a session that is no
        // longer pending claims nothing).
        let (log, runner) = (self.log.clone(), self.runner.clone());
        let (tenant, quota) = (caller.tenant.clone(), self.tenants.quota(&caller.tenant));
        let started = self
            .runner
            .unit::<_, ApiError, _>(async move {
                let started = log
                    .start_session(&tenant, quota, incident, message, key)
                    .await
                    .map_err(ApiError::from)?;
                runner.start(started.session.id);
                Ok(started)
            })
            .await?;
        tracing::Span::current().record("session_id", tracing::field::display(started.session.id));
        if started.created {
            tracing::info!("session started");
        } else {
            tracing::info!("session start replayed by idempotency key");
        }
        Ok(Response::new(convert::session(started.session)))
    }

    pub(super) async fn do_cancel_session(
        &self,
        caller: &Caller,
        request: Request<pb::CancelSessionRequest>,
    ) -> Result<Response<pb::Session>, Status> {
        let id = SessionId::parse(&request.get_ref().session_id).map_err(ApiError::from)?;
        self.session_of(caller, id).await?;
        match self.log.cancel(id).await.map_err(ApiError::from)? {
            Transition::Changed(row) => {
                tracing::info!("session cancelled");
                Ok(Response::new(convert::session(row)))
            }
            Transition::Unchanged(row) if row.status == SessionStatus::Cancelled => {
                Ok(Response::new(convert::session(row)))
            }
            Transition::Unchanged(row) => Err(ApiError::precondition(
                Reason::NotCancellable,
                format!(
                    "session {id} is {}: its outcome stays, and it waits for a follow-up \
                     message (`inquest send`), if any; a `watch --follow` of it ends with Ctrl-C",
                    row.status
                ),
                vec![(key::STATUS, row.status.to_string())],
            )
            .into()),
        }
    }

    pub(super) async fn do_continue_session(
        &self,
        caller: &Caller,
        request: Request<pb::ContinueSessionRequest>,
    ) -> Result<Response<pb::Session>, Status> {
        let id = SessionId::parse(&request.get_ref().session_id).map_err(ApiError::from)?;
        self.session_of(caller, id).await?;
        self.burst_possible()?;
        let (row, turns) = resume::load(&self.store, id)
            .await
            .map_err(ApiError::from)?;
        if row.status == SessionStatus::AwaitingApproval {
            return Err(ApiError::precondition(
                Reason::AwaitingApproval,
                format!(
                    "session {id} waits for approval of tool calls, not for a confirmation; \
                     decide them with DecideToolCalls (inquest approve / inquest deny)"
                ),
                vec![(key::STATUS, row.status.to_string())],
            )
            .into());
        }
        if row.status != SessionStatus::AwaitingConfirmation {
            return Err(ApiError::precondition(
                Reason::NothingToConfirm,
                format!(
                    "session {id} is {} and has nothing to confirm; ContinueSession confirms a \
                     session awaiting confirmation of its recovery plan",
                    row.status
                ),
                vec![(key::STATUS, row.status.to_string())],
            )
            .into());
        }
        let plan = resume::stored_plan(&row);
        if !plan.as_ref().is_some_and(|p| p.requires_confirmation) {
            return Err(ApiError::precondition(
                Reason::NothingToConfirm,
                format!("session {id}'s last recovery plan does not require confirmation"),
                vec![(key::STATUS, row.status.to_string())],
            )
            .into());
        }
        resume::request(&row, turns)
            .validate_history()
            .map_err(|e| {
                ApiError::precondition(
                    Reason::HistoryNotResumable,
                    format!("session {id} cannot be resumed: {e}"),
                    Vec::new(),
                )
            })?;
        // Confirming starts a burst: the tenant's limits apply (checked, not
        // locked: a confirmation is rare and operator-driven).
        self.store
            .check_tenant_quota(&caller.tenant, self.tenants.quota(&caller.tenant))
            .await
            .map_err(ApiError::from)?;
        let (log, runner) = (self.log.clone(), self.runner.clone());
        let confirmed = self
            .runner
            .unit::<_, ApiError, _>(async move {
                let t = log.confirm(id).await.map_err(ApiError::from)?;
                if let Transition::Changed(_) = &t {
                    runner.start_confirmed(id);
                }
                Ok(t)
            })
            .await?;
        match confirmed {
            Transition::Changed(row) => {
                tracing::info!("recovery confirmed; burst starting");
                Ok(Response::new(convert::session(row)))
            }
            Transition::Unchanged(row) => Err(ApiError::precondition(
                Reason::SessionStateChanged,
                format!(
                    "session {id} is {} (confirmed or cancelled concurrently)",
                    row.status
                ),
                vec![(key::STATUS, row.status.to_string())],
            )
            .into()),
        }
    }

    pub(super) async fn do_list_sessions(
        &self,
        request: Request<pb::ListSessionsRequest>,
    ) -> Result<Response<pb::ListSessionsResponse>, Status> {
        let caller = Caller::of(&request)?;
        let req = request.into_inner();
        let incident = if req.incident_id.is_empty() {
            None
        } else {
            Some(IncidentId::parse(&req.incident_id).map_err(ApiError::from)?)
        };
        let statuses = req
            .statuses
            .iter()
            .map(|&v| {
                convert::status_from_wire(v).ok_or_else(|| {
                    ApiError::InvalidArgument(format!(
                        "statuses: {v} is not a session status to filter by \
                         (SESSION_STATUS_UNSPECIFIED or unknown)"
                    ))
                })
            })
            .collect::<Result<Vec<SessionStatus>, _>>()?;
        let before = self.page_cursor(
            PageList::Sessions,
            &caller,
            &req.page_token,
            SessionId::parse,
        )?;
        let limit = page_size(req.page_size, DEFAULT_SESSION_PAGE, MAX_SESSION_PAGE);
        let page = self
            .store
            .list_sessions(
                &caller.tenant,
                incident,
                &statuses,
                before,
                limit,
                req.queued_only,
            )
            .await
            .map_err(ApiError::from)?;
        let ids: Vec<SessionId> = page.sessions.iter().map(|s| s.id).collect();
        let mut queued: std::collections::HashMap<SessionId, Vec<pb::QueuedMessage>> =
            std::collections::HashMap::new();
        for q in self
            .store
            .queued_messages(&ids)
            .await
            .map_err(ApiError::from)?
        {
            queued
                .entry(q.session)
                .or_default()
                .push(convert::queued_message(q));
        }
        let sessions = page
            .sessions
            .into_iter()
            .map(|s| {
                let id = s.id;
                let mut wire = convert::session(s);
                wire.queued_messages = queued.remove(&id).unwrap_or_default();
                wire
            })
            .collect();
        Ok(Response::new(pb::ListSessionsResponse {
            sessions,
            next_page_token: self.next_page(PageList::Sessions, &caller, page.next),
        }))
    }

    pub(super) async fn do_get_session(
        &self,
        request: Request<pb::GetSessionRequest>,
    ) -> Result<Response<pb::Session>, Status> {
        let caller = Caller::of(&request)?;
        let id = SessionId::parse(&request.get_ref().session_id).map_err(ApiError::from)?;
        let mut session = self.session_of(&caller, id).await?;
        if self.runner.recover_if_orphaned(&session).await {
            // Show the claim just made (new owner and epoch).
            session = self.session_of(&caller, id).await?;
        }
        let mut wire = convert::session(session);
        wire.approvals = self.approvals_of(id).await?;
        wire.queued_messages = self
            .store
            .queued_messages(&[id])
            .await
            .map_err(ApiError::from)?
            .into_iter()
            .map(convert::queued_message)
            .collect();
        Ok(Response::new(wire))
    }

    pub(super) async fn do_get_recovery_plan(
        &self,
        request: Request<pb::GetRecoveryPlanRequest>,
    ) -> Result<Response<pb::RecoveryPlan>, Status> {
        let caller = Caller::of(&request)?;
        let id = SessionId::parse(&request.get_ref().session_id).map_err(ApiError::from)?;
        self.session_of(&caller, id).await?;
        let (_, turns) = resume::load(&self.store, id)
            .await
            .map_err(ApiError::from)?;
        let classes = |tool: &str| self.runner.side_effect(tool);
        let plan = inquest_core::plan_resume(id, &turns, &classes);
        Ok(Response::new(convert::recovery_plan(&plan)))
    }

    pub(super) async fn do_get_report(
        &self,
        request: Request<pb::GetReportRequest>,
    ) -> Result<Response<pb::Report>, Status> {
        let caller = Caller::of(&request)?;
        let req = request.into_inner();
        let id = SessionId::parse(&req.session_id).map_err(ApiError::from)?;
        let burst = (req.burst != 0).then_some(req.burst);
        // An unknown (or another tenant's) session is NOT_FOUND for the
        // session, not the report.
        self.session_of(&caller, id).await?;
        let report = self
            .store
            .get_report(id, burst)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(convert::report(report)))
    }
}
