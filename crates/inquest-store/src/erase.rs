//! Erasure: DeleteSession, DeleteIncident and retention remove sessions
//! and everything that names them, in one transaction (migration V33).
//!
//! What goes with a session: its turns, reports (and the recovery plan on
//! its row), approvals, queued messages, token usage, idempotency keys
//! (its own, and the scopes named after it), its events and the webhook
//! attempts that delivered them. What stays, changed: a fork keeps its
//! copied history but loses its lineage (`forked_from`, and the id in its
//! fork notice); an alert group or a schedule tick that started it keeps
//! its row without the id. What stays whole: audit events, which name ids
//! and outcomes, never content; the erasing transaction adds one saying
//! who erased what, and that record is also what makes a repeated delete
//! answer "already deleted" rather than NOT_FOUND.
//!
//! Order: every session row is locked first (`FOR UPDATE`, which also
//! waits for a fork being copied from it: the fork holds `FOR KEY SHARE`),
//! so a follow-up, a claim or a close racing the erasure either committed
//! before (and is erased with it, or makes it refuse a running session) or
//! finds no row after. A burst still running elsewhere (`force`) is told
//! by the `deleted` notification sent at commit, and every write it still
//! tries is fenced by the missing row.

use deadpool_postgres::Transaction;
use inquest_core::{IncidentId, SessionId, SessionStatus, Tenant};
use uuid::Uuid;

use crate::{
    AuditEntry, Store, StoreError, audit::insert_audit, lease::ReplicaId, notify::CHANNEL,
    rows::get, sessions::not_found_session,
};

/// What a delete did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Erased {
    /// Gone now, with these sessions.
    Deleted { sessions: Vec<SessionId> },
    /// This tenant deleted it before.
    AlreadyDeleted,
    /// A session is pending or running and `force` was not given: nothing
    /// was deleted.
    Running {
        session: SessionId,
        status: SessionStatus,
    },
}

/// What to erase, as the service names it.
#[derive(Debug, Clone, Copy)]
pub enum Target {
    Session(SessionId),
    Incident(IncidentId),
}

impl Store {
    /// Erases `target` of `tenant`, recording `audit` in the same
    /// transaction. An unknown id, or another tenant's, is NOT_FOUND and
    /// deletes nothing; one this tenant deleted before is
    /// [`Erased::AlreadyDeleted`].
    pub async fn erase(
        &self,
        tenant: &Tenant,
        target: Target,
        force: bool,
        audit: AuditEntry,
    ) -> Result<Erased, StoreError> {
        let store = self.clone();
        let tenant = tenant.clone();
        self.run("erase", async move |c| {
            let tx = c.transaction().await?;
            let sessions = match lock_target(&tx, &tenant, target).await? {
                Some(sessions) => sessions,
                None => {
                    let again = deleted_before(&tx, &tenant, target).await?;
                    tx.rollback().await?;
                    return match (again, target) {
                        (true, _) => Ok(Erased::AlreadyDeleted),
                        (false, Target::Session(id)) => Err(not_found_session(id)),
                        (false, Target::Incident(id)) => Err(StoreError::NotFound {
                            what: "incident",
                            id: id.to_string(),
                        }),
                    };
                }
            };
            if !force
                && let Some((session, status)) =
                    sessions.iter().find(|(_, status)| status.is_active())
            {
                tx.rollback().await?;
                return Ok(Erased::Running {
                    session: *session,
                    status: *status,
                });
            }
            let ids: Vec<Uuid> = sessions.iter().map(|(s, _)| *s.as_uuid()).collect();
            erase_sessions(&tx, &store.replica, &ids).await?;
            if let Target::Incident(incident) = target {
                erase_incident(&tx, *incident.as_uuid()).await?;
            }
            insert_audit(&tx, &audit).await?;
            tx.commit().await?;
            Ok(Erased::Deleted {
                sessions: sessions.into_iter().map(|(s, _)| s).collect(),
            })
        })
        .await
    }
}

/// Locks the target's session rows (and the incident's row); `None` when
/// the tenant has no such target.
async fn lock_target(
    tx: &Transaction<'_>,
    tenant: &Tenant,
    target: Target,
) -> Result<Option<Vec<(SessionId, SessionStatus)>>, StoreError> {
    let rows = match target {
        Target::Session(id) => {
            tx.query(
                "SELECT id, status::text FROM sessions WHERE id = $1 AND tenant = $2 FOR UPDATE",
                &[id.as_uuid(), &tenant.as_str()],
            )
            .await?
        }
        Target::Incident(id) => {
            let found = tx
                .query_opt(
                    "SELECT 1 FROM incidents WHERE id = $1 AND tenant = $2 FOR UPDATE",
                    &[id.as_uuid(), &tenant.as_str()],
                )
                .await?;
            if found.is_none() {
                return Ok(None);
            }
            tx.query(
                "SELECT id, status::text FROM sessions WHERE incident_id = $1 \
                 ORDER BY id FOR UPDATE",
                &[id.as_uuid()],
            )
            .await?
        }
    };
    if rows.is_empty() && matches!(target, Target::Session(_)) {
        return Ok(None);
    }
    rows.iter()
        .map(|row| {
            let status: String = get(row, 1)?;
            Ok((
                SessionId::from_uuid(get(row, 0)?),
                SessionStatus::parse(&status)
                    .ok_or_else(|| StoreError::Corrupt(format!("session status {status:?}")))?,
            ))
        })
        .collect::<Result<Vec<_>, StoreError>>()
        .map(Some)
}

/// Whether `tenant` erased `target` before: its audit record says so.
async fn deleted_before(
    tx: &Transaction<'_>,
    tenant: &Tenant,
    target: Target,
) -> Result<bool, StoreError> {
    let row = match target {
        Target::Session(id) => {
            tx.query_opt(
                "SELECT 1 FROM audit_events WHERE tenant = $1 AND session_id = $2 \
                 AND method = 'DeleteSession' AND code = 'OK' LIMIT 1",
                &[&tenant.as_str(), id.as_uuid()],
            )
            .await?
        }
        Target::Incident(id) => {
            tx.query_opt(
                "SELECT 1 FROM audit_events WHERE tenant = $1 AND incident_id = $2 \
                 AND method = 'DeleteIncident' AND code = 'OK' LIMIT 1",
                &[&tenant.as_str(), id.as_uuid()],
            )
            .await?
        }
    };
    Ok(row.is_some())
}

/// Removes every row that names `ids` (locked by the caller), then the
/// sessions, and announces each deletion at commit.
pub(crate) async fn erase_sessions(
    tx: &Transaction<'_>,
    origin: &ReplicaId,
    ids: &[Uuid],
) -> Result<(), StoreError> {
    if ids.is_empty() {
        return Ok(());
    }
    let texts: Vec<String> = ids.iter().map(Uuid::to_string).collect();
    // Keys whose scope is named after a session: its follow-ups, its
    // decisions, and forks made from it.
    let scopes: Vec<String> = texts
        .iter()
        .flat_map(|id| {
            ["send_message", "decide_tool_calls", "fork_session"]
                .into_iter()
                .map(move |kind| format!("{kind}:{id}"))
        })
        .collect();
    for (sql, params) in [
        (
            "DELETE FROM turns WHERE session_id = ANY($1)",
            &[&ids as &(dyn tokio_postgres::types::ToSql + Sync)][..],
        ),
        ("DELETE FROM reports WHERE session_id = ANY($1)", &[&ids]),
        ("DELETE FROM approvals WHERE session_id = ANY($1)", &[&ids]),
        (
            "DELETE FROM queued_messages WHERE session_id = ANY($1)",
            &[&ids],
        ),
        (
            "DELETE FROM token_usage WHERE session_id = ANY($1)",
            &[&ids],
        ),
        (
            "DELETE FROM idempotency_keys WHERE session_id = ANY($1)",
            &[&ids],
        ),
        (
            "DELETE FROM idempotency_keys WHERE scope = ANY($1)",
            &[&scopes],
        ),
        (
            "DELETE FROM webhook_attempts WHERE event_id IN \
             (SELECT id FROM events WHERE session_id = ANY($1))",
            &[&ids],
        ),
        ("DELETE FROM events WHERE session_id = ANY($1)", &[&ids]),
        (
            "UPDATE alert_groups SET session_id = NULL WHERE session_id = ANY($1)",
            &[&ids],
        ),
        (
            "UPDATE schedule_ticks SET session_id = NULL, skipped = 'session deleted' \
             WHERE session_id = ANY($1)",
            &[&ids],
        ),
        // A fork keeps its history but no longer names its source: the
        // notice that says where it was cut loses the id too.
        (
            "UPDATE turns t SET content = replace(t.content, s.forked_from::text, \
             '(a deleted session)') \
             FROM sessions s WHERE s.forked_from = ANY($1) AND NOT s.id = ANY($1) \
             AND t.session_id = s.id AND t.role = 'notice' \
             AND t.content LIKE '%' || s.forked_from::text || '%'",
            &[&ids],
        ),
        (
            "UPDATE sessions SET forked_from = NULL, forked_at_seq = NULL \
             WHERE forked_from = ANY($1) AND NOT id = ANY($1)",
            &[&ids],
        ),
    ] {
        tx.execute(sql, params).await?;
    }
    tx.execute("SELECT set_config('inquest.erasing', 'on', true)", &[])
        .await?;
    tx.execute("DELETE FROM sessions WHERE id = ANY($1)", &[&ids])
        .await?;
    tx.execute("SELECT set_config('inquest.erasing', '', true)", &[])
        .await?;
    tx.execute(
        "SELECT pg_notify($1, json_build_object('v', 1, 'o', $2::text, 'k', 'deleted', \
         's', s)::text) FROM unnest($3::uuid[]) s",
        &[&CHANNEL, &origin.as_str(), &ids],
    )
    .await?;
    Ok(())
}

/// Removes what names the incident once its sessions are gone.
async fn erase_incident(tx: &Transaction<'_>, incident: Uuid) -> Result<(), StoreError> {
    let scope = format!("start_session:{incident}");
    tx.execute("DELETE FROM idempotency_keys WHERE scope = $1", &[&scope])
        .await?;
    for sql in [
        "DELETE FROM alert_events WHERE incident_id = $1",
        "DELETE FROM alert_states WHERE incident_id = $1",
        "DELETE FROM alert_groups WHERE incident_id = $1",
        "UPDATE schedule_ticks SET incident_id = NULL WHERE incident_id = $1",
        "DELETE FROM webhook_attempts WHERE event_id IN \
         (SELECT id FROM events WHERE incident_id = $1)",
        "DELETE FROM events WHERE incident_id = $1",
        "DELETE FROM incidents WHERE id = $1",
    ] {
        tx.execute(sql, &[&incident]).await?;
    }
    Ok(())
}
