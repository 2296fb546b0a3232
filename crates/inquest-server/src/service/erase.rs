//! DeleteSession, DeleteIncident: erase a session, or an incident with all
//! its sessions (`inquest_store::Store::erase`).
//!
//! The audit record of a successful erasure is written by the erasing
//! transaction itself, so the trail can never miss one and a repeat can
//! tell "deleted before" from "never yours"; a refused or failed call is
//! recorded afterwards, as every call is.

use inquest_store::{EraseTarget, Erased};

use super::*;

impl InvestigationsService {
    pub(super) async fn do_delete(
        &self,
        caller: &Caller,
        method: &'static str,
        target: EraseTarget,
        ids: &AuditIds,
        force: bool,
    ) -> Result<(Response<pb::DeleteResponse>, bool), Status> {
        let what = match target {
            EraseTarget::Session(id) => format!("session {id}"),
            EraseTarget::Incident(id) => format!("incident {id}"),
        };
        let record = Audit::entry(
            caller,
            method,
            ids,
            crate::ops::admin::code_label(tonic::Code::Ok),
            format!("deleted {what}{}", if force { " (force)" } else { "" }),
        );
        let erased = self
            .log
            .erase(&caller.tenant, target, force, record)
            .await
            .map_err(ApiError::from)?;
        match erased {
            Erased::Deleted { sessions } => {
                tracing::info!(sessions = sessions.len(), force, "{what} erased");
                metrics::counter!("inquest_erased_sessions_total", "via" => "api")
                    .increment(sessions.len() as u64);
                Ok((
                    Response::new(pb::DeleteResponse {
                        deleted: true,
                        sessions_deleted: u32::try_from(sessions.len()).unwrap_or(u32::MAX),
                    }),
                    true,
                ))
            }
            Erased::AlreadyDeleted => Ok((
                Response::new(pb::DeleteResponse {
                    deleted: false,
                    sessions_deleted: 0,
                }),
                false,
            )),
            Erased::Running { session, status } => Err(ApiError::precondition(
                Reason::SessionRunning,
                format!(
                    "session {session} is {status}: cancel it first, or delete with force \
                     (which stops its burst); nothing was deleted"
                ),
                vec![(key::STATUS, status.to_string())],
            )
            .into()),
        }
    }

    /// Runs a delete and records it: the erasing transaction recorded a
    /// successful erasure already; everything else is recorded here.
    pub(super) async fn delete_audited(
        &self,
        caller: &Caller,
        method: &'static str,
        target: Result<EraseTarget, Status>,
        ids: AuditIds,
        force: bool,
    ) -> Result<Response<pb::DeleteResponse>, Status> {
        let outcome = match target {
            Ok(target) => self.do_delete(caller, method, target, &ids, force).await,
            Err(status) => Err(status),
        };
        match outcome {
            Ok((response, true)) => {
                // The record itself was written with the erasure; the log
                // line every audited call leaves is written here.
                tracing::info!(
                    target: "inquest::audit",
                    method,
                    tenant = %caller.tenant,
                    subject = %caller.principal.subject,
                    actor = %caller.principal.name,
                    role = %caller.principal.role,
                    incident_id = ids.incident.map(|i| i.to_string()),
                    session_id = ids.session.map(|s| s.to_string()),
                    code = "OK",
                    "audit"
                );
                Ok(response)
            }
            Ok((response, false)) => {
                let outcome = Ok(response);
                let ids = AuditIds {
                    detail: Some("already deleted".into()),
                    ..ids
                };
                self.audit
                    .record(caller, method, ids, &outcome, |_, _| {})
                    .await;
                outcome
            }
            Err(status) => {
                let outcome = Err(status);
                self.audit
                    .record(
                        caller,
                        method,
                        ids,
                        &outcome,
                        |_: &pb::DeleteResponse, _| {},
                    )
                    .await;
                outcome
            }
        }
    }
}
