//! Who is calling, and the audit trail of what they changed.
//!
//! [`Caller`] is the principal the auth layer put in the request (the
//! `default` tenant's anonymous admin when authentication is off) with its
//! tenant parsed; every handler takes it first and scopes everything by
//! its tenant. [`Audit::record`] appends one row per mutating call to
//! `audit_events` (migration V17) after the call, whatever its outcome, and
//! logs it once as a structured event (target `inquest::audit`).

use inquest_auth::Principal;
use inquest_core::{IncidentId, SessionId, Tenant, error_chain};
use inquest_store::{AuditEntry, Store};
use tonic::{Request, Response, Status};

use crate::reason::Reason;

/// The caller of one request.
#[derive(Debug, Clone)]
pub struct Caller {
    pub principal: Principal,
    pub tenant: Tenant,
}

impl Caller {
    /// The caller the auth layer admitted. A request without one did not
    /// pass the layer: refused, never served as someone.
    pub fn of<T>(request: &Request<T>) -> Result<Self, Status> {
        let principal = request
            .extensions()
            .get::<Principal>()
            .cloned()
            .ok_or_else(|| {
                tracing::error!("a request reached the service without a principal");
                crate::status::internal()
            })?;
        let tenant = Tenant::parse(&principal.tenant).map_err(|e| {
            crate::reason::status(
                tonic::Code::Unauthenticated,
                Reason::Unauthenticated,
                format!("authentication required: the credential's tenant is invalid: {e}"),
                vec![],
            )
        })?;
        Ok(Self { principal, tenant })
    }
}

/// The ids a mutating call named or made.
#[derive(Debug, Clone, Default)]
pub struct AuditIds {
    pub incident: Option<IncidentId>,
    pub session: Option<SessionId>,
    pub token: Option<uuid::Uuid>,
    /// What a successful call did, in a few words (the audit message).
    pub detail: Option<String>,
}

/// Appends audit events.
#[derive(Clone)]
pub struct Audit {
    store: Store,
}

impl Audit {
    pub fn new(store: Store) -> Self {
        Self { store }
    }

    /// Records `method` by `caller` on `ids` with `outcome`; the ids a
    /// successful call made are added by `made`. A failed write is logged:
    /// the call itself already happened and its answer stands.
    pub async fn record<T>(
        &self,
        caller: &Caller,
        method: &'static str,
        mut ids: AuditIds,
        outcome: &Result<Response<T>, Status>,
        made: impl FnOnce(&T, &mut AuditIds),
    ) {
        let (code, message) = match outcome {
            Ok(response) => {
                made(response.get_ref(), &mut ids);
                (tonic::Code::Ok, ids.detail.take().unwrap_or_default())
            }
            Err(status) => (status.code(), status.message().to_owned()),
        };
        let code = crate::ops::admin::code_label(code);
        tracing::info!(
            target: "inquest::audit",
            method,
            tenant = %caller.tenant,
            subject = %caller.principal.subject,
            actor = %caller.principal.name,
            role = %caller.principal.role,
            incident_id = ids.incident.map(|i| i.to_string()),
            session_id = ids.session.map(|s| s.to_string()),
            token_id = ids.token.map(|t| t.to_string()),
            code,
            "audit"
        );
        let entry = Self::entry(caller, method, &ids, code, message);
        if let Err(e) = self.store.record_audit(entry).await {
            tracing::error!(method, error = %error_chain(&e), "cannot record an audit event");
        }
    }

    /// The record of `method` by `caller` on `ids`, for a call whose
    /// record commits with its change (an erasure: the record is what is
    /// left of what it erased).
    pub fn entry(
        caller: &Caller,
        method: &str,
        ids: &AuditIds,
        code: &str,
        message: String,
    ) -> AuditEntry {
        AuditEntry {
            tenant: caller.tenant.clone(),
            subject: caller.principal.subject.clone(),
            actor_name: caller.principal.name.clone(),
            role: caller.principal.role.to_string(),
            method: method.to_owned(),
            incident_id: ids.incident,
            session_id: ids.session,
            token_id: ids.token,
            code: code.to_owned(),
            message,
        }
    }
}
