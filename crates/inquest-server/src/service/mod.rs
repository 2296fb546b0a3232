//! `inquest.v1.Investigations`: parse and validate the request, call the
//! store (turns always through the [`TurnLog`]), convert the answer.
//! Validation happens before anything is written, so bad input never
//! touches stored state.

use inquest_core::SessionStatus;
use inquest_core::{
    AfterSeq, IdempotencyKey, IncidentId, IncidentText, Limits, SessionId, UserMessage,
};
use inquest_proto::{
    encoded::investigations_server::{Investigations, InvestigationsServer},
    v1 as pb,
};
use inquest_store::{SendOutcome, Store, Transition};
use prost::Message;
use tonic::{Request, Response, Status};

mod admin;
pub mod audit;

use crate::limits::{ApiLimits, Limited};
use crate::service::audit::{Audit, AuditIds, Caller};
use crate::{
    convert,
    reason::{Reason, key},
    status::ApiError,
    watch::{WatchStream, Watches},
};
use inquest_engine::resume;
use inquest_engine::runner::Runner;
use inquest_engine::turn_log::TurnLog;

/// Default and largest page sizes of the list calls.
const DEFAULT_SESSION_PAGE: u32 = 50;
const MAX_SESSION_PAGE: u32 = 500;
const DEFAULT_INCIDENT_PAGE: u32 = 50;
const MAX_INCIDENT_PAGE: u32 = 500;
const DEFAULT_TURN_PAGE: u32 = 100;
const MAX_TURN_PAGE: u32 = 1000;
/// Turns ListTurns reads per database round trip. A page is cut by bytes
/// too (`limits.max_response_bytes`), so reading the whole count at once
/// could hold up to 1000 of the largest turns in memory to send a few:
/// reading in chunks bounds that to one chunk beside the response. Most
/// pages (the default is 100 turns) take one round trip.
const TURN_READ_CHUNK: u32 = 100;
/// ListTurnsResponse's fields besides its turns (two int64s, tagged).
const LIST_TURNS_FIXED_BYTES: usize = 22;

pub struct InvestigationsService {
    store: Store,
    log: TurnLog,
    watches: Watches,
    limits: Limits,
    api: ApiLimits,
    /// Starts the burst of a session a call left `pending`.
    runner: Runner,
    /// `[tenants]`: the limits of each tenant's new bursts.
    tenants: crate::config::tenants::TenantsSection,
    audit: Audit,
}

impl InvestigationsService {
    pub fn new(watches: Watches, limits: Limits, api: ApiLimits, runner: Runner) -> Self {
        Self {
            store: watches.log.store().clone(),
            audit: Audit::new(watches.log.store().clone()),
            log: watches.log.clone(),
            watches,
            limits,
            api,
            runner,
            tenants: Default::default(),
        }
    }

    /// The same service with `[tenants]` limits.
    pub fn with_tenants(mut self, tenants: crate::config::tenants::TenantsSection) -> Self {
        self.tenants = tenants;
        self
    }

    /// The caller's session, or NOT_FOUND exactly as for an unknown id
    /// when it is another tenant's: every call about a session passes here
    /// first (a session's tenant never changes).
    async fn session_of(
        &self,
        caller: &Caller,
        id: SessionId,
    ) -> Result<inquest_store::SessionRow, ApiError> {
        Ok(self.store.get_tenant_session(&caller.tenant, id).await?)
    }

    async fn do_create_incident(
        &self,
        caller: &Caller,
        req: pb::CreateIncidentRequest,
    ) -> Result<Response<pb::Incident>, Status> {
        let text = IncidentText::parse(req.title, req.description, &self.limits)
            .map_err(ApiError::from)?;
        let incident = self
            .store
            .create_incident(&caller.tenant, &text)
            .await
            .map_err(ApiError::from)?;
        tracing::info!(incident_id = %incident.id, "incident created");
        Ok(Response::new(convert::incident(incident)))
    }

    async fn do_start_session(
        &self,
        caller: &Caller,
        req: pb::StartSessionRequest,
    ) -> Result<Response<pb::Session>, Status> {
        let incident = IncidentId::parse(&req.incident_id).map_err(ApiError::from)?;
        tracing::Span::current().record("incident_id", tracing::field::display(incident));
        let message = UserMessage::parse(req.message, &self.limits).map_err(ApiError::from)?;
        let key = IdempotencyKey::parse_optional(req.idempotency_key).map_err(ApiError::from)?;
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

    async fn do_send_message(
        &self,
        caller: &Caller,
        request: Request<pb::SendMessageRequest>,
    ) -> Result<Response<pb::SendMessageResponse>, Status> {
        let req = request.into_inner();
        let id = SessionId::parse(&req.session_id).map_err(ApiError::from)?;
        let message = UserMessage::parse(req.message, &self.limits).map_err(ApiError::from)?;
        let key = IdempotencyKey::parse_optional(req.idempotency_key).map_err(ApiError::from)?;
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

    async fn do_cancel_session(
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
                    "session {id} is not running (status {}); nothing to cancel",
                    row.status
                ),
                vec![(key::STATUS, row.status.to_string())],
            )
            .into()),
        }
    }

    async fn do_continue_session(
        &self,
        caller: &Caller,
        request: Request<pb::ContinueSessionRequest>,
    ) -> Result<Response<pb::Session>, Status> {
        let id = SessionId::parse(&request.get_ref().session_id).map_err(ApiError::from)?;
        self.session_of(caller, id).await?;
        let (row, turns) = resume::load(&self.store, id)
            .await
            .map_err(ApiError::from)?;
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

    /// The gRPC service to serve: requests over `limits.max_request_bytes`
    /// and undecodable ones answer INVALID_ARGUMENT (see [`Limited`]).
    pub fn into_server(self) -> Limited<InvestigationsServer<Self>> {
        let max = self.api.max_request_bytes;
        Limited::new(
            InvestigationsServer::new(self).max_decoding_message_size(max),
            max,
        )
    }
}

/// A page token is the id of the last item of the previous page; anything
/// else is refused.
fn page_token<T>(
    token: &str,
    parse: impl FnOnce(&str) -> Result<T, inquest_core::IdError>,
) -> Result<Option<T>, ApiError> {
    if token.is_empty() {
        return Ok(None);
    }
    parse(token)
        .map(Some)
        .map_err(|_| ApiError::InvalidPageToken)
}

fn page_size(requested: u32, default: u32, max: u32) -> u32 {
    match requested {
        0 => default,
        n => n.min(max),
    }
}

#[tonic::async_trait]
impl Investigations for InvestigationsService {
    #[tracing::instrument(skip_all)]
    async fn create_incident(
        &self,
        request: Request<pb::CreateIncidentRequest>,
    ) -> Result<Response<pb::Incident>, Status> {
        let caller = Caller::of(&request)?;
        let outcome = self.do_create_incident(&caller, request.into_inner()).await;
        self.audit
            .record(
                &caller,
                "CreateIncident",
                AuditIds::default(),
                &outcome,
                |r, ids| {
                    ids.incident = IncidentId::parse(&r.id).ok();
                },
            )
            .await;
        outcome
    }

    #[tracing::instrument(skip_all, fields(incident_id, session_id))]
    async fn start_session(
        &self,
        request: Request<pb::StartSessionRequest>,
    ) -> Result<Response<pb::Session>, Status> {
        let caller = Caller::of(&request)?;
        let req = request.into_inner();
        let ids = AuditIds {
            incident: IncidentId::parse(&req.incident_id).ok(),
            ..AuditIds::default()
        };
        let outcome = self.do_start_session(&caller, req).await;
        self.audit
            .record(&caller, "StartSession", ids, &outcome, |r, ids| {
                ids.session = SessionId::parse(&r.id).ok();
            })
            .await;
        outcome
    }

    #[tracing::instrument(skip_all, fields(session_id = %request.get_ref().session_id))]
    async fn get_session(
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
        Ok(Response::new(convert::session(session)))
    }
    #[tracing::instrument(skip_all, fields(incident_id = %request.get_ref().incident_id))]
    async fn get_incident(
        &self,
        request: Request<pb::GetIncidentRequest>,
    ) -> Result<Response<pb::Incident>, Status> {
        let caller = Caller::of(&request)?;
        let id = IncidentId::parse(&request.get_ref().incident_id).map_err(ApiError::from)?;
        let incident = self
            .store
            .get_incident(&caller.tenant, id)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(convert::incident(incident)))
    }

    #[tracing::instrument(skip_all)]
    async fn list_incidents(
        &self,
        request: Request<pb::ListIncidentsRequest>,
    ) -> Result<Response<pb::ListIncidentsResponse>, Status> {
        let caller = Caller::of(&request)?;
        let req = request.into_inner();
        let before = page_token(&req.page_token, IncidentId::parse)?;
        let limit = page_size(req.page_size, DEFAULT_INCIDENT_PAGE, MAX_INCIDENT_PAGE);
        let page = self
            .store
            .list_incidents(&caller.tenant, before, limit)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(pb::ListIncidentsResponse {
            incidents: page.incidents.into_iter().map(convert::incident).collect(),
            next_page_token: page.next.map(|id| id.to_string()).unwrap_or_default(),
        }))
    }

    #[tracing::instrument(skip_all, fields(incident_id = %request.get_ref().incident_id))]
    async fn list_sessions(
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
        let before = page_token(&req.page_token, SessionId::parse)?;
        let limit = page_size(req.page_size, DEFAULT_SESSION_PAGE, MAX_SESSION_PAGE);
        let page = self
            .store
            .list_sessions(&caller.tenant, incident, &statuses, before, limit)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(pb::ListSessionsResponse {
            sessions: page.sessions.into_iter().map(convert::session).collect(),
            next_page_token: page.next.map(|id| id.to_string()).unwrap_or_default(),
        }))
    }

    #[tracing::instrument(skip_all, fields(session_id = %request.get_ref().session_id))]
    async fn list_turns(
        &self,
        request: Request<pb::ListTurnsRequest>,
    ) -> Result<Response<pb::ListTurnsResponse>, Status> {
        let caller = Caller::of(&request)?;
        let req = request.into_inner();
        let id = SessionId::parse(&req.session_id).map_err(ApiError::from)?;
        let after = AfterSeq::parse(req.after_seq).map_err(ApiError::from)?;
        self.session_of(&caller, id).await?;
        let limit = page_size(req.limit, DEFAULT_TURN_PAGE, MAX_TURN_PAGE) as usize;
        // Up to `limit` turns and `max_response_bytes` encoded, whichever
        // comes first, and always at least one turn when there is one:
        // `turn_within` shows a turn in less than a whole response.
        let max = self.api.max_response_bytes;
        let budget = max - LIST_TURNS_FIXED_BYTES;
        let (mut turns, mut used) = (Vec::new(), 0);
        let mut cursor = after;
        let (head, more) = loop {
            let want = (limit - turns.len()).min(TURN_READ_CHUNK as usize) as u32;
            let page = self
                .store
                .list_turns(id, cursor, want)
                .await
                .map_err(ApiError::from)?;
            let mut full = false;
            for turn in &page.turns {
                let wire = convert::turn_within(turn, max);
                let len = wire.encoded_len();
                let entry = 1 + prost::encoding::encoded_len_varint(len as u64) + len;
                if !turns.is_empty() && used + entry > budget {
                    full = true;
                    break;
                }
                used += entry;
                cursor = AfterSeq::after(turn.seq);
                turns.push(wire);
            }
            if full {
                break (page.head, true);
            }
            if !page.more || page.turns.is_empty() {
                break (page.head, false);
            }
            if turns.len() >= limit {
                break (page.head, true);
            }
        };
        let next_after_seq = match (more, turns.last()) {
            (true, Some(last)) => last.seq,
            _ => 0,
        };
        Ok(Response::new(pb::ListTurnsResponse {
            turns,
            next_after_seq,
            head_seq: head.map(|h| h.as_i64()).unwrap_or(0),
        }))
    }

    #[tracing::instrument(skip_all, fields(session_id = %request.get_ref().session_id))]
    async fn send_message(
        &self,
        request: Request<pb::SendMessageRequest>,
    ) -> Result<Response<pb::SendMessageResponse>, Status> {
        let caller = Caller::of(&request)?;
        let ids = AuditIds {
            session: SessionId::parse(&request.get_ref().session_id).ok(),
            ..AuditIds::default()
        };
        let outcome = self.do_send_message(&caller, request).await;
        self.audit
            .record(&caller, "SendMessage", ids, &outcome, |_, _| {})
            .await;
        outcome
    }

    type WatchSessionStream = WatchStream;

    #[tracing::instrument(skip_all, fields(session_id = %request.get_ref().session_id, after_seq = request.get_ref().after_seq))]
    async fn watch_session(
        &self,
        request: Request<pb::WatchSessionRequest>,
    ) -> Result<Response<Self::WatchSessionStream>, Status> {
        let caller = Caller::of(&request)?;
        let req = request.into_inner();
        let id = SessionId::parse(&req.session_id).map_err(ApiError::from)?;
        let after = AfterSeq::parse(req.after_seq).map_err(ApiError::from)?;
        self.session_of(&caller, id).await?;
        let (stream, row) = self.watches.start(id, after).await?;
        // Watching an orphan claims it, so the watcher sees it recovered.
        self.runner.recover_if_orphaned(&row).await;
        Ok(Response::new(stream))
    }

    #[tracing::instrument(skip_all, fields(session_id = %request.get_ref().session_id))]
    async fn cancel_session(
        &self,
        request: Request<pb::CancelSessionRequest>,
    ) -> Result<Response<pb::Session>, Status> {
        let caller = Caller::of(&request)?;
        let ids = AuditIds {
            session: SessionId::parse(&request.get_ref().session_id).ok(),
            ..AuditIds::default()
        };
        let outcome = self.do_cancel_session(&caller, request).await;
        self.audit
            .record(&caller, "CancelSession", ids, &outcome, |_, _| {})
            .await;
        outcome
    }

    #[tracing::instrument(skip_all, fields(session_id = %request.get_ref().session_id))]
    async fn continue_session(
        &self,
        request: Request<pb::ContinueSessionRequest>,
    ) -> Result<Response<pb::Session>, Status> {
        let caller = Caller::of(&request)?;
        let ids = AuditIds {
            session: SessionId::parse(&request.get_ref().session_id).ok(),
            ..AuditIds::default()
        };
        let outcome = self.do_continue_session(&caller, request).await;
        self.audit
            .record(&caller, "ContinueSession", ids, &outcome, |_, _| {})
            .await;
        outcome
    }

    #[tracing::instrument(skip_all, fields(session_id = %request.get_ref().session_id))]
    async fn get_recovery_plan(
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

    #[tracing::instrument(skip_all, fields(session_id = %request.get_ref().session_id))]
    async fn get_report(
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

    #[tracing::instrument(skip_all)]
    async fn create_token(
        &self,
        request: Request<pb::CreateTokenRequest>,
    ) -> Result<Response<pb::CreateTokenResponse>, Status> {
        self.admin_create_token(request).await
    }

    #[tracing::instrument(skip_all)]
    async fn list_tokens(
        &self,
        request: Request<pb::ListTokensRequest>,
    ) -> Result<Response<pb::ListTokensResponse>, Status> {
        self.admin_list_tokens(request).await
    }

    #[tracing::instrument(skip_all, fields(token_id = %request.get_ref().token_id))]
    async fn revoke_token(
        &self,
        request: Request<pb::RevokeTokenRequest>,
    ) -> Result<Response<pb::ApiToken>, Status> {
        self.admin_revoke_token(request).await
    }

    #[tracing::instrument(skip_all, fields(session_id = %request.get_ref().session_id))]
    async fn list_audit_events(
        &self,
        request: Request<pb::ListAuditEventsRequest>,
    ) -> Result<Response<pb::ListAuditEventsResponse>, Status> {
        self.admin_list_audit_events(request).await
    }
}
