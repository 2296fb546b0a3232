//! The audit trail (migration V17): appended after every mutating call,
//! read back by admins of the same tenant, newest first.

use inquest_core::{IncidentId, SessionId, Tenant};
use time::OffsetDateTime;
use tokio_postgres::Row;
use uuid::Uuid;

use crate::{Store, StoreError, rows::get};

/// One recorded call.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditEntry {
    pub tenant: Tenant,
    /// The token id or JWT subject.
    pub subject: String,
    /// The token's name (or the JWT's name claim).
    pub actor_name: String,
    pub role: String,
    /// The RPC, e.g. `StartSession`.
    pub method: String,
    pub incident_id: Option<IncidentId>,
    pub session_id: Option<SessionId>,
    pub token_id: Option<Uuid>,
    /// The gRPC code's name: `OK`, `NOT_FOUND`, …
    pub code: String,
    pub message: String,
}

/// A stored entry: its position and time.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditEvent {
    /// Its number within its tenant (1, 2, 3, ...): says nothing about
    /// other tenants' calls.
    pub id: i64,
    pub at: OffsetDateTime,
    pub entry: AuditEntry,
}

/// One page, newest first.
#[derive(Debug, Clone)]
pub struct AuditPage {
    pub events: Vec<AuditEvent>,
    /// Pass as `before` for the next page; `None` on the last one.
    pub next: Option<i64>,
}

/// PostgreSQL refuses U+0000 in text; an audit message is for people, so
/// it is replaced rather than escaped.
fn clean(text: &str) -> String {
    text.replace('\0', "\u{fffd}")
}

fn event_from_row(row: &Row) -> Result<AuditEvent, StoreError> {
    let tenant: String = get(row, 2)?;
    Ok(AuditEvent {
        id: get(row, 0)?,
        at: get(row, 1)?,
        entry: AuditEntry {
            tenant: Tenant::parse(&tenant)
                .map_err(|_| StoreError::Corrupt(format!("audit tenant {tenant:?}")))?,
            subject: get(row, 3)?,
            actor_name: get(row, 4)?,
            role: get(row, 5)?,
            method: get(row, 6)?,
            incident_id: get::<Option<Uuid>>(row, 7)?.map(IncidentId::from_uuid),
            session_id: get::<Option<Uuid>>(row, 8)?.map(SessionId::from_uuid),
            token_id: get(row, 9)?,
            code: get(row, 10)?,
            message: get(row, 11)?,
        },
    })
}

/// Appends `entry` on `client` (a transaction, when the record must
/// commit with what it records).
pub(crate) async fn insert_audit(
    client: &impl deadpool_postgres::GenericClient,
    entry: &AuditEntry,
) -> Result<(), StoreError> {
    client
        .execute(
            "WITH n AS (INSERT INTO audit_counters (tenant, last) VALUES ($1, 1) \
             ON CONFLICT (tenant) DO UPDATE SET last = audit_counters.last + 1 \
             RETURNING last) \
             INSERT INTO audit_events (tenant_seq, tenant, subject, actor_name, role, \
             method, incident_id, session_id, token_id, code, message) \
             SELECT n.last, $1, $2, $3, $4, $5, $6::uuid, $7::uuid, $8::uuid, $9, $10 \
             FROM n",
            &[
                &entry.tenant.as_str(),
                &clean(&entry.subject),
                &clean(&entry.actor_name),
                &entry.role,
                &entry.method,
                &entry.incident_id.map(|i| *i.as_uuid()),
                &entry.session_id.map(|s| *s.as_uuid()),
                &entry.token_id,
                &entry.code,
                &clean(&entry.message),
            ],
        )
        .await?;
    Ok(())
}

const COLUMNS: &str = "tenant_seq, at, tenant, subject, actor_name, role, method, incident_id, \
                       session_id, token_id, code, message";

impl Store {
    /// Appends `entry`. Detached with the turn-write timeout: a call whose
    /// client left is still recorded.
    pub async fn record_audit(&self, entry: AuditEntry) -> Result<(), StoreError> {
        let store = self.clone();
        let limit = self.turn_write_timeout;
        self.detached(async move {
            store
                .run_with_timeout("record_audit", limit, async |c| {
                    insert_audit(&*c, &entry).await?;
                    Ok(())
                })
                .await
        })
        .await
    }

    /// `tenant`'s audit events newest first, of one session when given,
    /// `limit` at a time, before the event `before` (exclusive).
    pub async fn list_audit(
        &self,
        tenant: &Tenant,
        session: Option<SessionId>,
        before: Option<i64>,
        limit: u32,
    ) -> Result<AuditPage, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM audit_events WHERE tenant = $1 \
             AND ($2::uuid IS NULL OR session_id = $2) AND tenant_seq < $3 \
             ORDER BY tenant_seq DESC LIMIT $4"
        );
        let before = before.unwrap_or(i64::MAX);
        let fetch = i64::from(limit) + 1;
        let session = session.map(|s| *s.as_uuid());
        let rows = self
            .run("list_audit", async |c| {
                Ok(
                    c.query(&sql, &[&tenant.as_str(), &session, &before, &fetch])
                        .await?,
                )
            })
            .await?;
        let mut events = rows
            .iter()
            .map(event_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        let next = if events.len() > limit as usize {
            events.truncate(limit as usize);
            events.last().map(|e| e.id)
        } else {
            None
        };
        Ok(AuditPage { events, next })
    }
}
