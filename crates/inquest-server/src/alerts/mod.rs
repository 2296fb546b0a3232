//! Alerts in: `POST /v1/alerts/alertmanager`, the Alertmanager webhook
//! (Grafana and vmalert send the same payload), on the gRPC port beside
//! the console.
//!
//! A request passes, in order: the host check (a loopback server without
//! authentication), the credential (`Authorization: Bearer <API token>`,
//! operator or higher, through the same [`Verifier`] as gRPC; without
//! authentication, loopback peers only), the size bound, the payload
//! checks, then one transaction (`Store::record_alerts`): nothing is
//! half-written. A group is one incident per tenant; an unchanged repeat
//! writes nothing. When the group matches a trigger, its session starts
//! through the very path `StartSession` takes, under an idempotency key
//! of the group's incident, so a retried notification never starts two.
//!
//! A later notification that fires new alerts in a group whose session
//! exists sends that session a follow-up saying what changed, through the
//! path `SendMessage` takes. The follow-up is written as the group's
//! pending one in the transaction that records the change, under a key
//! derived from its text: the notification sends it and clears it; a
//! retry (after a 503, or a crash before the send) finds it still pending
//! and sends it again under the same key, which stores nothing twice.
//! While a burst runs the session refuses it and it waits; the sweep
//! ([`Alerts::spawn_sweep`]) sends it once the burst ends, merged with
//! any later change. One that resolves the group's last alert stores a
//! notice on the session in its own transaction (see
//! `Store::record_alerts`) and starts no burst.
//!
//! Answers: 200 with the incident; 400 with `{"error", "field"}`; 401;
//! 403; 413 over `alerts.max_body_bytes` or `alerts.max_alerts`; 503 while
//! the database (or the token table) cannot be reached, which Alertmanager
//! retries.

pub mod config;
pub mod payload;
pub mod render;

use std::{net::IpAddr, sync::Arc, time::Duration};

use axum::{
    body::Body,
    http::{HeaderValue, Request, Response, StatusCode, header},
};
use http_body_util::BodyExt as _;
use inquest_auth::{Principal, Role};
use inquest_core::{IdempotencyKey, IncidentText, Limits, Tenant, UserMessage};
use inquest_engine::{runner::Runner, turn_log::TurnLog};
use inquest_store::{
    AlertNotification, AlertSeen, PendingFollowUp, SendOutcome, StartReservation, Store, StoreError,
};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use crate::config::tenants::TenantsSection;
use crate::edge::auth::{Refusal, Verifier};
use crate::edge::hosts::AllowedHosts;
use config::AlertsSection;
use payload::Notification;

/// Where the webhook answers.
pub const PATH: &str = "/v1/alerts/alertmanager";

/// The idempotency key of a group's trigger session. Keys are scoped by
/// incident (`start_session:<incident>`) and a group is one incident, so
/// one fixed key is one session per group.
const SESSION_KEY: &str = "alertmanager-trigger";

/// How often the sweep looks for follow-ups whose burst has ended, and
/// how many it sends per look.
const SWEEP_EVERY: Duration = Duration::from_secs(1);
const SWEEP_BATCH: i64 = 32;

/// What the webhook needs, shared by every request.
pub struct Alerts {
    pub store: Store,
    pub log: TurnLog,
    pub runner: Runner,
    /// `None`: `[auth] mode = "none"`, loopback peers only.
    pub verifier: Option<Verifier>,
    /// A loopback server without authentication: the names it answers.
    pub hosts: Option<Arc<AllowedHosts>>,
    pub section: AlertsSection,
    /// `section.triggers`, compiled once.
    pub triggers: Vec<config::Matcher>,
    pub limits: Limits,
    pub tenants: TenantsSection,
    /// No model provider (`serve` without `[[providers]]`): a trigger
    /// starts no session, which would stay pending for ever.
    pub refuse_bursts: bool,
}

/// Why a notification was not stored: the status and the JSON answer.
struct Answer {
    status: StatusCode,
    error: String,
    field: Option<String>,
}

impl Answer {
    fn new(status: StatusCode, error: impl Into<String>) -> Self {
        Self {
            status,
            error: error.into(),
            field: None,
        }
    }

    /// The label of `inquest_alert_notifications_total` it counts under.
    fn outcome(&self) -> &'static str {
        match self.status {
            StatusCode::SERVICE_UNAVAILABLE => "unavailable",
            StatusCode::INTERNAL_SERVER_ERROR => "failed",
            _ => "refused",
        }
    }
}

fn json(status: StatusCode, body: &serde_json::Value) -> Response<Body> {
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if status == StatusCode::UNAUTHORIZED {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    response
}

fn store_answer(e: &StoreError) -> Answer {
    if e.is_transient() {
        tracing::warn!(error = %inquest_core::error_chain(e), "cannot store an alert notification now; the sender retries");
        Answer::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "the database cannot be reached; retry",
        )
    } else {
        tracing::error!(error = %inquest_core::error_chain(e), "storing an alert notification failed");
        Answer::new(StatusCode::INTERNAL_SERVER_ERROR, "internal error")
    }
}

/// Whether `peer` is this machine: a server without authentication takes
/// alerts from it alone. An IPv4 peer of a dual-stack listener (`[::]`)
/// arrives as `::ffff:127.0.0.1`; an unknown peer is not loopback.
fn loopback_peer(peer: Option<IpAddr>) -> bool {
    peer.is_some_and(|ip| ip.to_canonical().is_loopback())
}

impl Alerts {
    /// The route's handler.
    pub async fn handle(self: Arc<Self>, request: Request<Body>) -> Response<Body> {
        match self.receive(request).await {
            Ok(body) => json(StatusCode::OK, &body),
            Err(answer) => {
                metrics::counter!("inquest_alert_notifications_total", "outcome" => answer.outcome())
                    .increment(1);
                let mut body = serde_json::json!({ "error": answer.error });
                if let Some(field) = answer.field {
                    body["field"] = field.into();
                }
                json(answer.status, &body)
            }
        }
    }

    async fn receive(&self, request: Request<Body>) -> Result<serde_json::Value, Answer> {
        // The head alone crosses the awaits below (a body is not Sync).
        let (parts, body) = request.into_parts();
        let head = Request::from_parts(parts, ());
        let principal = self.caller(&head).await?;
        let tenant = Tenant::parse(&principal.tenant).map_err(|e| {
            Answer::new(
                StatusCode::UNAUTHORIZED,
                format!("the credential's tenant is invalid: {e}"),
            )
        })?;
        let body = self.body(&head, body).await?;
        let n = Notification::parse(&body, self.section.max_alerts).map_err(|e| Answer {
            status: if e.too_large {
                StatusCode::PAYLOAD_TOO_LARGE
            } else {
                StatusCode::BAD_REQUEST
            },
            error: if e.field.is_empty() {
                e.message
            } else {
                format!("{}: {}", e.field, e.message)
            },
            field: Some(e.field).filter(|f| !f.is_empty()),
        })?;
        let record = self.notification(&n)?;
        let recorded = self
            .store
            .record_alerts(&tenant, &record)
            .await
            .map_err(|e| store_answer(&e))?;
        let outcome = match (recorded.created, recorded.changed) {
            (true, _) => "created",
            (false, 0) => "unchanged",
            (false, _) => "updated",
        };
        metrics::counter!("inquest_alert_notifications_total", "outcome" => outcome).increment(1);
        if recorded.created {
            tracing::info!(incident_id = %recorded.incident, alerts = n.alerts.len(), "incident created by an alert group");
            self.audit(&principal, &tenant, recorded.incident, None)
                .await;
        }
        let session = match recorded.to_start {
            Some(prompt) if !self.refuse_bursts => {
                // The trigger that gave the prompt gives the skills.
                let skills = render::matching(&self.triggers, &n).and_then(|t| t.skills.clone());
                let started = self
                    .start(&tenant, &n.group_key, recorded.incident, prompt, skills)
                    .await?;
                if let Some((session, true)) = started {
                    self.audit(&principal, &tenant, recorded.incident, Some(session))
                        .await;
                }
                started.map(|(session, _)| session)
            }
            Some(_) => {
                tracing::warn!(incident_id = %recorded.incident, "a trigger matched but no model provider is configured: no session started");
                None
            }
            None => recorded.session,
        };
        if let Some(pending) = &recorded.pending
            && !self.refuse_bursts
        {
            self.deliver(pending).await.map_err(|e| store_answer(&e))?;
        }
        if let (Some(session), Some(_)) = (recorded.session, &recorded.notice) {
            metrics::counter!("inquest_alert_notices_total", "why" => "resolved").increment(1);
            tracing::info!(incident_id = %recorded.incident, session_id = %session, "alert group resolved: notice stored on its session");
        }
        Ok(serde_json::json!({
            "incident_id": recorded.incident.to_string(),
            "created": recorded.created,
            "changed": recorded.changed,
            "session_id": session.map(|s| s.to_string()),
        }))
    }

    /// The caller, or the refusal: host, credential, role.
    async fn caller(&self, request: &Request<()>) -> Result<Principal, Answer> {
        if let Some(why) = self.hosts.as_ref().and_then(|h| h.refuse(request)) {
            metrics::counter!("inquest_requests_refused_total", "why" => "host").increment(1);
            return Err(Answer::new(StatusCode::FORBIDDEN, why));
        }
        // Put there by the server's connection layer.
        let peer: Option<IpAddr> = request
            .extensions()
            .get::<tonic::transport::server::TcpConnectInfo>()
            .and_then(tonic::transport::server::TcpConnectInfo::remote_addr)
            .map(|a| a.ip());
        let Some(verifier) = &self.verifier else {
            // Without authentication a loopback listener serves only its
            // own machine; `--insecure-no-auth` opens gRPC, not this: a
            // webhook is reached by other machines by design, so one
            // without a credential is refused rather than trusted.
            if !loopback_peer(peer) {
                return Err(Answer::new(
                    StatusCode::FORBIDDEN,
                    "alerts without authentication are taken from loopback only: set [auth] mode = \"required\" and send Authorization: Bearer <token>",
                ));
            }
            return Ok(Principal::anonymous());
        };
        let mut headers = request.headers().get_all(header::AUTHORIZATION).iter();
        let header = headers.next().map(HeaderValue::as_bytes);
        if headers.next().is_some() {
            return Err(Answer::new(
                StatusCode::UNAUTHORIZED,
                "more than one authorization header",
            ));
        }
        let principal = verifier
            .principal(header, peer)
            .await
            .map_err(|r| match r {
                Refusal::Unauthenticated(why) => Answer::new(
                    StatusCode::UNAUTHORIZED,
                    format!("authentication required: {why}"),
                ),
                Refusal::Denied { role, required } => Answer::new(
                    StatusCode::FORBIDDEN,
                    format!("a {role} token may not send alerts; it needs {required}"),
                ),
                Refusal::Unavailable => Answer::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "cannot verify the token now; retry",
                ),
            })?;
        if principal.role < Role::Operator {
            return Err(Answer::new(
                StatusCode::FORBIDDEN,
                format!(
                    "a {} token may not send alerts; it needs {}",
                    principal.role,
                    Role::Operator
                ),
            ));
        }
        Ok(principal)
    }

    /// The body, at most `alerts.max_body_bytes` of it.
    async fn body(&self, head: &Request<()>, body: Body) -> Result<bytes::Bytes, Answer> {
        let max = self.section.max_body_bytes;
        let too_large = || Answer {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            error: format!("the body is over alerts.max_body_bytes = {max}"),
            field: None,
        };
        let declared = head
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > max as u64) {
            return Err(too_large());
        }
        match http_body_util::Limited::new(body, max).collect().await {
            Ok(collected) => Ok(collected.to_bytes()),
            Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(too_large()),
            Err(e) => Err(Answer::new(
                StatusCode::BAD_REQUEST,
                format!("cannot read the body: {e}"),
            )),
        }
    }

    /// What the store records for `n`.
    fn notification(&self, n: &Notification) -> Result<AlertNotification, Answer> {
        let title = render::title(n, Limits::MAX_TITLE_BYTES);
        let description = render::description(n, self.limits.max_message_bytes);
        let incident = IncidentText::parse(title, description, &self.limits).map_err(|e| {
            Answer::new(StatusCode::BAD_REQUEST, format!("the incident's text: {e}"))
        })?;
        let prompt = render::matching(&self.triggers, n)
            .map(|t| render::prompt(t, n, self.limits.max_message_bytes));
        let follow_up_on_resolved = render::matching_any(&self.triggers, n)
            .is_some_and(|t| t.on_resolved == config::OnResolved::FollowUp);
        Ok(AlertNotification {
            group_key: n.group_key.clone(),
            source: "alertmanager",
            receiver: render::fit(&n.receiver, render::MAX_VALUE_BYTES, "receiver"),
            external_url: render::fit(&n.external_url, render::MAX_VALUE_BYTES, "external URL"),
            incident,
            prompt,
            follow_up_on_resolved,
            alerts: n
                .alerts
                .iter()
                .map(|a| AlertSeen {
                    fingerprint: a.fingerprint.clone(),
                    firing: a.firing,
                    starts_at: a.starts_at,
                    ends_at: a.ends_at,
                    labels_json: render::stored_labels(&a.labels),
                })
                .collect(),
            follow_up: {
                let (n, limit) = (n.clone(), self.limits.max_message_bytes);
                Arc::new(move |fired, resolved, waiting| {
                    let fresh = render::follow_up(&n, fired, resolved, limit);
                    // A change that arrived while an earlier one waited:
                    // both, oldest first, bounded together.
                    let message = match waiting {
                        Some(w) => {
                            render::fit(&format!("{w}\n\n{fresh}"), limit, "alert follow-ups")
                        }
                        None => fresh,
                    };
                    let key = message_key(&message);
                    (message, key)
                })
            },
        })
    }

    /// Starts the group's trigger session exactly as `StartSession` does
    /// (commit, publish and start as one unit), replayed by its key when a
    /// retry finds it started, and notes it on the group.
    async fn start(
        &self,
        tenant: &Tenant,
        group_key: &str,
        incident: inquest_core::IncidentId,
        prompt: String,
        skills: Option<Vec<String>>,
    ) -> Result<Option<(inquest_core::SessionId, bool)>, Answer> {
        let message = UserMessage::parse(prompt, &self.limits).map_err(|e| {
            Answer::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("the trigger's prompt: {e}"),
            )
        })?;
        // A storm's cap, counted per tenant over the last hour; the
        // incident stands without a session and says why.
        let cap = self
            .tenants
            .alert_starts_per_hour(tenant, self.section.max_started_per_hour);
        match self
            .store
            .reserve_alert_start(tenant, group_key, cap)
            .await
            .map_err(|e| store_answer(&e))?
        {
            StartReservation::Reserved => {}
            StartReservation::Capped { started } => {
                metrics::counter!("inquest_alert_sessions_capped_total").increment(1);
                tracing::warn!(incident_id = %incident, started, cap, "a trigger matched but the tenant's alerts reached alerts.max_started_per_hour: no session started");
                return Ok(None);
            }
        }
        let key = IdempotencyKey::parse_optional(SESSION_KEY.to_owned())
            .map_err(|e| Answer::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
        let (log, runner) = (self.log.clone(), self.runner.clone());
        let (owner, quota) = (tenant.clone(), self.tenants.quota(tenant));
        let started = self
            .runner
            .unit::<_, StoreError, _>(async move {
                let started = log
                    .start_session_with_skills(&owner, quota, incident, message, key, skills)
                    .await?;
                runner.start(started.session.id);
                Ok(started)
            })
            .await;
        let started = match started {
            Ok(s) => s,
            // The incident stands without a session; a later notification
            // of the group tries again.
            Err(e @ StoreError::QuotaExceeded(_)) => {
                tracing::warn!(incident_id = %incident, error = %e, "a trigger matched but the tenant is over its limits: no session started");
                return Ok(None);
            }
            Err(e) => return Err(store_answer(&e)),
        };
        let id = started.session.id;
        if started.created {
            metrics::counter!("inquest_alert_sessions_started_total").increment(1);
            tracing::info!(incident_id = %incident, session_id = %id, "session started by an alert trigger");
        }
        self.store
            .alert_session_started(tenant, group_key, id)
            .await
            .map_err(|e| store_answer(&e))?;
        Ok(Some((id, started.created)))
    }

    /// Sends the group's session its pending follow-up, as `SendMessage`
    /// does (commit, reopen, publish and start as one unit), and clears it
    /// once the session has it or will never take it. A running burst
    /// leaves it pending for the sweep; so does a tenant over its limits.
    async fn deliver(&self, p: &PendingFollowUp) -> Result<(), StoreError> {
        let session = p.session;
        let (Ok(tenant), Ok(message), Ok(key)) = (
            Tenant::parse(&p.tenant),
            UserMessage::parse(p.message.clone(), &self.limits),
            IdempotencyKey::parse_optional(p.key.clone()),
        ) else {
            // Written by this module within the limits; anything else is a
            // corrupt row, dropped rather than retried for ever.
            tracing::error!(session_id = %session, "an unusable alert follow-up was dropped");
            return self
                .store
                .alert_follow_up_sent(&p.tenant, &p.group_key, &p.key)
                .await;
        };
        let (log, runner) = (self.log.clone(), self.runner.clone());
        let quota = self.tenants.quota(&tenant);
        let outcome = self
            .runner
            .unit::<_, StoreError, _>(async move {
                let outcome = log
                    .send_message(&tenant, quota, session, message, key, None)
                    .await?;
                if let SendOutcome::Sent { .. } = &outcome {
                    runner.start(session);
                }
                Ok(outcome)
            })
            .await;
        let done = match outcome {
            Ok(SendOutcome::Sent { turn, created }) => {
                if created {
                    metrics::counter!("inquest_alert_follow_ups_total", "outcome" => "sent")
                        .increment(1);
                }
                tracing::info!(session_id = %session, seq = %turn.seq, created, "alert follow-up sent to the group's session");
                true
            }
            Ok(SendOutcome::Busy { status }) => {
                tracing::info!(session_id = %session, %status, "a burst runs: the alert follow-up waits for its end");
                false
            }
            // Alert follow-ups never queue (they are sent without a bound).
            Ok(SendOutcome::Queued { .. } | SendOutcome::QueueFull { .. }) => false,
            Ok(SendOutcome::Ended { status, .. }) => {
                metrics::counter!("inquest_alert_follow_ups_total", "outcome" => "ended")
                    .increment(1);
                tracing::info!(session_id = %session, %status, "the group's session takes no more messages: the alert follow-up is dropped");
                true
            }
            Err(e @ StoreError::QuotaExceeded(_)) => {
                tracing::warn!(session_id = %session, error = %e, "the tenant is over its limits: the alert follow-up waits");
                false
            }
            Err(e) => return Err(e),
        };
        if done {
            self.store
                .alert_follow_up_sent(&p.tenant, &p.group_key, &p.key)
                .await?;
        }
        Ok(())
    }

    /// Sends, every [`SWEEP_EVERY`], the follow-ups that waited for a
    /// burst to end, on every replica (two replicas sending one replay
    /// under its key: the session gets it once). Not started when no
    /// model provider is configured.
    pub fn spawn_sweep(self: Arc<Self>, tasks: &TaskTracker, shutdown: CancellationToken) {
        if self.refuse_bursts {
            return;
        }
        tasks.spawn(async move {
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = tokio::time::sleep(SWEEP_EVERY) => {}
                }
                let ready = match self.store.alert_follow_ups_ready(SWEEP_BATCH).await {
                    Ok(r) => r,
                    Err(e) => {
                        tracing::warn!(error = %inquest_core::error_chain(&e), "cannot read waiting alert follow-ups now");
                        continue;
                    }
                };
                for p in &ready {
                    if let Err(e) = self.deliver(p).await {
                        tracing::warn!(session_id = %p.session, error = %inquest_core::error_chain(&e), "cannot send a waiting alert follow-up now");
                    }
                }
            }
        });
    }

    /// Records in the audit trail what the sender's token made: the
    /// incident (`session` none) or the trigger's session, as CreateIncident
    /// and StartSession are recorded. Repeats and refusals write nothing,
    /// here as everywhere on this path. A failed write is logged: the
    /// notification is stored and its answer stands.
    async fn audit(
        &self,
        principal: &Principal,
        tenant: &Tenant,
        incident: inquest_core::IncidentId,
        session: Option<inquest_core::SessionId>,
    ) {
        let method = if session.is_some() {
            "Alertmanager/StartSession"
        } else {
            "Alertmanager/CreateIncident"
        };
        tracing::info!(
            target: "inquest::audit",
            method,
            tenant = %tenant,
            subject = %principal.subject,
            actor = %principal.name,
            role = %principal.role,
            incident_id = %incident,
            session_id = session.map(|s| s.to_string()),
            code = "OK",
            "audit"
        );
        let entry = inquest_store::AuditEntry {
            tenant: tenant.clone(),
            subject: principal.subject.clone(),
            actor_name: principal.name.clone(),
            role: principal.role.to_string(),
            method: method.to_owned(),
            incident_id: Some(incident),
            session_id: session,
            token_id: None,
            code: "OK".to_owned(),
            message: String::new(),
        };
        if let Err(e) = self.store.record_audit(entry).await {
            tracing::error!(method, error = %inquest_core::error_chain(&e), "cannot record an audit event");
        }
    }
}

/// A follow-up's idempotency key: a digest of its text, which names the
/// alerts that changed and their starts, so one change is one message
/// however often it is delivered, and an alert firing again is a new one.
fn message_key(message: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, message.as_bytes());
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("alert-change-{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_authentication_only_loopback_peers_are_taken() {
        for ok in ["127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1"] {
            assert!(loopback_peer(Some(ok.parse().unwrap())), "{ok}");
        }
        for refused in [
            "10.0.0.1",
            "192.168.1.5",
            "::ffff:10.0.0.1",
            "fe80::1",
            "0.0.0.0",
        ] {
            assert!(!loopback_peer(Some(refused.parse().unwrap())), "{refused}");
        }
        assert!(!loopback_peer(None), "an unknown peer");
    }
}
