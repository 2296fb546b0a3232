//! `inquest.v1.Investigations`: parse and validate the request, call the
//! store (turns always through the [`TurnLog`]), convert the answer.
//! Validation happens before anything is written, so bad input never
//! touches stored state.
//!
//! This file holds the service's state and the trait impl, which only
//! dispatches (and records the audit event of each mutating call); each
//! RPC group's work is in its own file: [`incidents`], [`sessions`],
//! [`messages`], [`turns`], [`admin`] (tokens and the audit log). The
//! watch stream is `crate::watch`.

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
mod approvals;
pub mod audit;
mod erase;
mod events;
mod forks;
mod incidents;
mod messages;
pub mod pages;
mod schedules;
mod sessions;
mod turns;
pub mod webhooks;

use pages::{PageList, PageTokens};

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
/// ListTurnsResponse's fields besides its turns (three int64s, tagged).
const LIST_TURNS_FIXED_BYTES: usize = 33;

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
    /// Signs and checks the list calls' page tokens.
    pages: PageTokens,
    /// No model provider on a server that needs one: calls that would
    /// open a burst are refused rather than left waiting for nobody.
    refuse_bursts: bool,
    /// `[webhooks]` and the sender RedeliverEvent posts with.
    webhooks: webhooks::WebhookApi,
    /// `[[schedules]]`, for ListSchedules.
    schedules: std::sync::Arc<Vec<crate::schedules::Schedule>>,
}

impl InvestigationsService {
    /// A reconnecting watcher whose turn at its cursor is no longer the
    /// one it received (a failover replaced it): DATA_LOSS with where to
    /// read again from.
    async fn check_cursor(
        &self,
        session: SessionId,
        after: inquest_core::Seq,
        at: &prost_types::Timestamp,
    ) -> Result<(), Status> {
        let Ok(at) = time::OffsetDateTime::from_unix_timestamp_nanos(
            i128::from(at.seconds) * 1_000_000_000 + i128::from(at.nanos),
        ) else {
            return Err(
                ApiError::InvalidArgument("after_committed_at is not a valid time".into()).into(),
            );
        };
        let Some(first) = self
            .store
            .replaced_before(session, after, at)
            .await
            .map_err(ApiError::from)?
        else {
            return Ok(());
        };
        let again = first.as_i64() - 1;
        tracing::warn!(session_id = %session, after_seq = after.as_i64(), again, "a watcher's cursor points at a turn a database failover replaced; told to read again");
        Err(crate::reason::status(
            tonic::Code::DataLoss,
            crate::reason::Reason::TurnsLost,
            format!(
                "the turn at seq {} is not the one this client received: a database failover \
                 replaced turns from seq {}; reconnect with after_seq={again} to read them",
                after.as_i64(),
                first.as_i64()
            ),
            vec![(crate::reason::key::AFTER_SEQ, again.to_string())],
        ))
    }

    pub fn new(
        store: Store,
        watches: Watches,
        limits: Limits,
        api: ApiLimits,
        runner: Runner,
        pages: PageTokens,
        webhooks: webhooks::WebhookApi,
    ) -> Self {
        Self {
            pages,
            webhooks,
            audit: Audit::new(store.clone()),
            store,
            log: watches.log.clone(),
            watches,
            limits,
            api,
            runner,
            tenants: Default::default(),
            refuse_bursts: false,
            schedules: Default::default(),
        }
    }

    /// The same service listing `schedules` (ListSchedules).
    pub fn with_schedules(
        mut self,
        schedules: std::sync::Arc<Vec<crate::schedules::Schedule>>,
    ) -> Self {
        self.schedules = schedules;
        self
    }

    /// The same service refusing burst-opening calls (`NO_MODEL_PROVIDER`)
    /// when `refuse` (a `serve` without `[[providers]]`).
    pub fn refusing_bursts(mut self, refuse: bool) -> Self {
        self.refuse_bursts = refuse;
        self
    }

    /// Refuses a call that would open a burst when no agent runs here.
    fn burst_possible(&self) -> Result<(), ApiError> {
        if !self.refuse_bursts {
            return Ok(());
        }
        Err(ApiError::precondition(
            Reason::NoModelProvider,
            "this server has no model provider configured, so no burst would ever run: \
             add a [[providers]] table (kind = \"anthropic\", \"openai\" or \"script\") to the \
             file given to `inquest serve --config`, and restart it",
            vec![],
        ))
    }

    /// The same service with `[tenants]` limits.
    pub fn with_tenants(mut self, tenants: crate::config::tenants::TenantsSection) -> Self {
        self.tenants = tenants;
        self
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

impl InvestigationsService {
    /// The cursor of a page token this deployment issued for `list` and the
    /// caller's tenant (the last item's id), parsed; anything else is
    /// refused.
    fn page_cursor<T, E>(
        &self,
        list: PageList,
        caller: &Caller,
        token: &str,
        parse: impl FnOnce(&str) -> Result<T, E>,
    ) -> Result<Option<T>, ApiError> {
        self.pages
            .read(list, &caller.tenant, token)?
            .map(|cursor| parse(cursor).map_err(|_| ApiError::InvalidPageToken))
            .transpose()
    }

    /// The token of the page after `last` (none: this was the last page).
    fn next_page(&self, list: PageList, caller: &Caller, last: Option<impl ToString>) -> String {
        last.map(|id| self.pages.issue(list, &caller.tenant, &id.to_string()))
            .unwrap_or_default()
    }
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
        self.do_get_session(request).await
    }
    #[tracing::instrument(skip_all, fields(incident_id = %request.get_ref().incident_id))]
    async fn get_incident(
        &self,
        request: Request<pb::GetIncidentRequest>,
    ) -> Result<Response<pb::Incident>, Status> {
        self.do_get_incident(request).await
    }

    #[tracing::instrument(skip_all)]
    async fn list_incidents(
        &self,
        request: Request<pb::ListIncidentsRequest>,
    ) -> Result<Response<pb::ListIncidentsResponse>, Status> {
        self.do_list_incidents(request).await
    }

    #[tracing::instrument(skip_all, fields(incident_id = %request.get_ref().incident_id))]
    async fn list_sessions(
        &self,
        request: Request<pb::ListSessionsRequest>,
    ) -> Result<Response<pb::ListSessionsResponse>, Status> {
        self.do_list_sessions(request).await
    }

    #[tracing::instrument(skip_all, fields(session_id = %request.get_ref().session_id))]
    async fn list_turns(
        &self,
        request: Request<pb::ListTurnsRequest>,
    ) -> Result<Response<pb::ListTurnsResponse>, Status> {
        self.do_list_turns(request).await
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

    #[tracing::instrument(skip_all, fields(session_id = %request.get_ref().session_id, at_seq = request.get_ref().at_seq))]
    async fn fork_session(
        &self,
        request: Request<pb::ForkSessionRequest>,
    ) -> Result<Response<pb::Session>, Status> {
        let caller = Caller::of(&request)?;
        let req = request.into_inner();
        let ids = AuditIds {
            session: SessionId::parse(&req.session_id).ok(),
            ..AuditIds::default()
        };
        let outcome = self.do_fork_session(&caller, req).await;
        self.audit
            .record(&caller, "ForkSession", ids, &outcome, |r, ids| {
                ids.incident = IncidentId::parse(&r.incident_id).ok();
                ids.detail = Some(format!("forked into {} at seq {}", r.id, r.forked_at_seq));
            })
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
        if let (Some(at), Some(seq)) = (
            req.after_committed_at.as_ref(),
            inquest_core::Seq::from_stored(req.after_seq),
        ) {
            self.check_cursor(id, seq, at).await?;
        }
        let share = crate::watch::TenantShare {
            tenant: &caller.tenant,
            share: self.tenants.watch_share(&caller.tenant),
        };
        let (stream, row) = self.watches.start(id, after, share).await?;
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

    #[tracing::instrument(skip_all, fields(session_id = %request.get_ref().session_id, force = request.get_ref().force))]
    async fn delete_session(
        &self,
        request: Request<pb::DeleteSessionRequest>,
    ) -> Result<Response<pb::DeleteResponse>, Status> {
        let caller = Caller::of(&request)?;
        let req = request.into_inner();
        let id = SessionId::parse(&req.session_id).map_err(|e| Status::from(ApiError::from(e)));
        let ids = AuditIds {
            session: id.as_ref().ok().copied(),
            ..AuditIds::default()
        };
        let target = id.map(inquest_store::EraseTarget::Session);
        self.delete_audited(&caller, "DeleteSession", target, ids, req.force)
            .await
    }

    #[tracing::instrument(skip_all, fields(incident_id = %request.get_ref().incident_id, force = request.get_ref().force))]
    async fn delete_incident(
        &self,
        request: Request<pb::DeleteIncidentRequest>,
    ) -> Result<Response<pb::DeleteResponse>, Status> {
        let caller = Caller::of(&request)?;
        let req = request.into_inner();
        let id = IncidentId::parse(&req.incident_id).map_err(|e| Status::from(ApiError::from(e)));
        let ids = AuditIds {
            incident: id.as_ref().ok().copied(),
            ..AuditIds::default()
        };
        let target = id.map(inquest_store::EraseTarget::Incident);
        self.delete_audited(&caller, "DeleteIncident", target, ids, req.force)
            .await
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
    async fn decide_tool_calls(
        &self,
        request: Request<pb::DecideToolCallsRequest>,
    ) -> Result<Response<pb::Session>, Status> {
        let caller = Caller::of(&request)?;
        let req = request.into_inner();
        let mut ids = AuditIds {
            session: SessionId::parse(&req.session_id).ok(),
            ..AuditIds::default()
        };
        // What was decided, for the audit trail (call ids and verdicts;
        // comments stay in the approvals, where they belong).
        ids.detail = Some(
            req.decisions
                .iter()
                .take(32)
                .map(|d| {
                    let verdict = match pb::ToolCallVerdict::try_from(d.verdict) {
                        Ok(pb::ToolCallVerdict::Approve) => "approve",
                        Ok(pb::ToolCallVerdict::Deny) => "deny",
                        _ => "invalid",
                    };
                    format!("{verdict} {:.64}", d.call_id.escape_debug())
                })
                .collect::<Vec<_>>()
                .join(", "),
        );
        let outcome = self.do_decide_tool_calls(&caller, req).await;
        self.audit
            .record(&caller, "DecideToolCalls", ids, &outcome, |_, _| {})
            .await;
        outcome
    }

    #[tracing::instrument(skip_all, fields(session_id = %request.get_ref().session_id))]
    async fn get_recovery_plan(
        &self,
        request: Request<pb::GetRecoveryPlanRequest>,
    ) -> Result<Response<pb::RecoveryPlan>, Status> {
        self.do_get_recovery_plan(request).await
    }

    #[tracing::instrument(skip_all, fields(session_id = %request.get_ref().session_id))]
    async fn get_report(
        &self,
        request: Request<pb::GetReportRequest>,
    ) -> Result<Response<pb::Report>, Status> {
        self.do_get_report(request).await
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

    #[tracing::instrument(skip_all)]
    async fn list_schedules(
        &self,
        request: Request<pb::ListSchedulesRequest>,
    ) -> Result<Response<pb::ListSchedulesResponse>, Status> {
        self.do_list_schedules(request).await
    }

    #[tracing::instrument(skip_all, fields(session_id = %request.get_ref().session_id))]
    async fn list_events(
        &self,
        request: Request<pb::ListEventsRequest>,
    ) -> Result<Response<pb::ListEventsResponse>, Status> {
        self.do_list_events(request).await
    }

    #[tracing::instrument(skip_all)]
    async fn create_webhook(
        &self,
        request: Request<pb::CreateWebhookRequest>,
    ) -> Result<Response<pb::CreateWebhookResponse>, Status> {
        self.webhooks_create(request).await
    }

    #[tracing::instrument(skip_all)]
    async fn list_webhooks(
        &self,
        request: Request<pb::ListWebhooksRequest>,
    ) -> Result<Response<pb::ListWebhooksResponse>, Status> {
        self.webhooks_list(request).await
    }

    #[tracing::instrument(skip_all, fields(webhook_id = %request.get_ref().webhook_id))]
    async fn delete_webhook(
        &self,
        request: Request<pb::DeleteWebhookRequest>,
    ) -> Result<Response<pb::DeleteWebhookResponse>, Status> {
        self.webhooks_delete(request).await
    }

    #[tracing::instrument(skip_all, fields(webhook_id = %request.get_ref().webhook_id))]
    async fn rotate_webhook_secret(
        &self,
        request: Request<pb::RotateWebhookSecretRequest>,
    ) -> Result<Response<pb::CreateWebhookResponse>, Status> {
        self.webhooks_rotate(request).await
    }

    #[tracing::instrument(skip_all, fields(webhook_id = %request.get_ref().webhook_id))]
    async fn list_webhook_deliveries(
        &self,
        request: Request<pb::ListWebhookDeliveriesRequest>,
    ) -> Result<Response<pb::ListWebhookDeliveriesResponse>, Status> {
        self.webhooks_deliveries(request).await
    }

    #[tracing::instrument(skip_all, fields(webhook_id = %request.get_ref().webhook_id))]
    async fn redeliver_event(
        &self,
        request: Request<pb::RedeliverEventRequest>,
    ) -> Result<Response<pb::WebhookDelivery>, Status> {
        self.webhooks_redeliver(request).await
    }
}
