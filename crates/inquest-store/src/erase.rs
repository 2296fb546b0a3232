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
            erase_sessions(&tx, &store.replica, &ids, true).await?;
            if let Target::Incident(incident) = target {
                erase_incidents(&tx, &[*incident.as_uuid()]).await?;
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
/// sessions, and (`announce`) tells every replica at commit. Retention
/// does not announce: a settled session has no burst, and its watchers'
/// streams ended when it settled (a late one reads NOT_FOUND).
pub(crate) async fn erase_sessions(
    tx: &Transaction<'_>,
    origin: &ReplicaId,
    ids: &[Uuid],
    announce: bool,
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
    if announce {
        tx.execute(
            "SELECT pg_notify($1, json_build_object('v', 1, 'o', $2::text, 'k', 'deleted', \
             's', s)::text) FROM unnest($3::uuid[]) s",
            &[&CHANNEL, &origin.as_str(), &ids],
        )
        .await?;
    }
    Ok(())
}

/// Removes what names the incidents once their sessions are gone.
async fn erase_incidents(tx: &Transaction<'_>, incidents: &[Uuid]) -> Result<(), StoreError> {
    if incidents.is_empty() {
        return Ok(());
    }
    let scopes: Vec<String> = incidents
        .iter()
        .map(|i| format!("start_session:{i}"))
        .collect();
    tx.execute(
        "DELETE FROM idempotency_keys WHERE scope = ANY($1)",
        &[&scopes],
    )
    .await?;
    for sql in [
        "DELETE FROM alert_events WHERE incident_id = ANY($1)",
        "DELETE FROM alert_states WHERE incident_id = ANY($1)",
        "DELETE FROM alert_groups WHERE incident_id = ANY($1)",
        "UPDATE schedule_ticks SET incident_id = NULL WHERE incident_id = ANY($1)",
        "DELETE FROM webhook_attempts WHERE event_id IN \
         (SELECT id FROM events WHERE incident_id = ANY($1))",
        "DELETE FROM events WHERE incident_id = ANY($1)",
        "DELETE FROM incidents WHERE id = ANY($1)",
    ] {
        tx.execute(sql, &[&incidents]).await?;
    }
    Ok(())
}

/// Erases those of `incidents` that have no session left, adding a
/// retention record for each to `records`; how many. It reads on the
/// statement's own snapshot, so a session committed since the caller
/// looked keeps its incident; SKIP LOCKED leaves one a StartSession is
/// adding a session to right now (rows this transaction holds already it
/// takes).
async fn erase_incidents_left_empty(
    tx: &Transaction<'_>,
    incidents: &[Uuid],
    records: &mut Vec<RetentionRecord>,
) -> Result<u64, StoreError> {
    let empty = tx
        .query(
            "SELECT i.id, i.tenant FROM incidents i WHERE i.id = ANY($1) \
             AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.incident_id = i.id) \
             FOR UPDATE SKIP LOCKED",
            &[&incidents],
        )
        .await?;
    let mut gone = Vec::with_capacity(empty.len());
    for row in &empty {
        let (id, tenant): (Uuid, String) = (get(row, 0)?, get(row, 1)?);
        gone.push(id);
        records.push((tenant, "Retention/DeleteIncident", Some(id), None));
    }
    erase_incidents(tx, &gone).await?;
    Ok(gone.len() as u64)
}

/// How long each tenant's settled sessions (or audit events) are kept:
/// `default` for every tenant not in `overrides`; `None` keeps them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeepFor {
    pub default: Option<std::time::Duration>,
    pub overrides: Vec<(Tenant, Option<std::time::Duration>)>,
}

impl KeepFor {
    fn sql_params(&self) -> (Vec<String>, Vec<Option<i64>>, Option<i64>) {
        let secs = |d: &Option<std::time::Duration>| {
            d.map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        };
        (
            self.overrides
                .iter()
                .map(|(t, _)| t.as_str().to_owned())
                .collect(),
            self.overrides.iter().map(|(_, d)| secs(d)).collect(),
            secs(&self.default),
        )
    }
}

/// What one retention batch erased.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetentionBatch {
    pub sessions: u64,
    pub incidents: u64,
}

/// One retention erasure to record: (tenant, method, incident, session).
type RetentionRecord = (String, &'static str, Option<Uuid>, Option<Uuid>);

/// Records retention's erasures in the audit trail, one statement per
/// tenant (numbered from the tenant's counter as `insert_audit` does).
async fn record_retention(
    tx: &Transaction<'_>,
    replica: &ReplicaId,
    records: &[RetentionRecord],
) -> Result<(), StoreError> {
    let mut tenants: Vec<&str> = records.iter().map(|r| r.0.as_str()).collect();
    tenants.sort_unstable();
    tenants.dedup();
    for tenant in tenants {
        let mine: Vec<&RetentionRecord> = records.iter().filter(|r| r.0 == tenant).collect();
        let methods: Vec<&str> = mine.iter().map(|r| r.1).collect();
        let incidents: Vec<Option<Uuid>> = mine.iter().map(|r| r.2).collect();
        let sessions: Vec<Option<Uuid>> = mine.iter().map(|r| r.3).collect();
        let n = i64::try_from(mine.len()).unwrap_or(i64::MAX);
        tx.execute(
            "WITH n AS (INSERT INTO audit_counters (tenant, last) VALUES ($1, $2) \
             ON CONFLICT (tenant) DO UPDATE SET last = audit_counters.last + $2 \
             RETURNING last) \
             INSERT INTO audit_events (tenant_seq, tenant, subject, actor_name, role, \
             method, incident_id, session_id, code, message) \
             SELECT n.last - $2 + r.ord, $1, 'inquest:retention', $3, 'system', r.method, \
             r.incident, r.session, 'OK', 'settled longer than its [retention] finished_sessions' \
             FROM n, unnest($4::text[], $5::uuid[], $6::uuid[]) WITH ORDINALITY \
             r(method, incident, session, ord)",
            &[
                &tenant,
                &n,
                &replica.as_str(),
                &methods,
                &incidents,
                &sessions,
            ],
        )
        .await?;
    }
    Ok(())
}

impl Store {
    /// Erases up to `batch` sessions settled (not pending or running) for
    /// longer than their tenant keeps them, oldest first, with an audit
    /// record each, and the incidents they leave without a session. Rows
    /// another replica's batch holds are skipped (`SKIP LOCKED`), so each
    /// session is erased by one batch; a batch that dies rolls back whole
    /// and a later one takes its sessions.
    pub async fn erase_expired_sessions(
        &self,
        keep: &KeepFor,
        batch: u32,
    ) -> Result<RetentionBatch, StoreError> {
        let (tenants, secs, default) = keep.sql_params();
        let limit = i64::from(batch);
        let replica = self.replica.clone();
        self.run("erase_expired_sessions", async move |c| {
            let tx = c.transaction().await?;
            let rows = tx
                .query(
                    "SELECT s.id, s.incident_id, s.tenant FROM sessions s \
                     LEFT JOIN unnest($1::text[], $2::bigint[]) o(tenant, secs) \
                       ON o.tenant = s.tenant \
                     WHERE s.status::text NOT IN ('pending', 'running') \
                       AND s.updated_at < now() - make_interval(secs => \
                           CASE WHEN o.tenant IS NULL THEN $3::bigint ELSE o.secs END) \
                     ORDER BY s.updated_at LIMIT $4 FOR UPDATE OF s SKIP LOCKED",
                    &[&tenants, &secs, &default, &limit],
                )
                .await?;
            if rows.is_empty() {
                tx.rollback().await?;
                return Ok(RetentionBatch::default());
            }
            let mut ids = Vec::with_capacity(rows.len());
            let mut incidents: Vec<Uuid> = Vec::new();
            let mut records: Vec<RetentionRecord> = Vec::with_capacity(rows.len());
            for row in &rows {
                let (id, incident, tenant): (Uuid, Uuid, String) =
                    (get(row, 0)?, get(row, 1)?, get(row, 2)?);
                ids.push(id);
                if !incidents.contains(&incident) {
                    incidents.push(incident);
                }
                records.push((tenant, "Retention/DeleteSession", Some(incident), Some(id)));
            }
            erase_sessions(&tx, &replica, &ids, false).await?;
            // An incident goes with its last session.
            let incidents = erase_incidents_left_empty(&tx, &incidents, &mut records).await?;
            record_retention(&tx, &replica, &records).await?;
            tx.commit().await?;
            Ok(RetentionBatch {
                sessions: ids.len() as u64,
                incidents,
            })
        })
        .await
    }

    /// Erases up to `batch` incidents that have no session and nothing
    /// newer than their tenant keeps settled sessions: made that long ago,
    /// no alert notification since. They are the incidents an alert storm
    /// recorded without starting a session, ones nobody ever started a
    /// session on, and ones whose last session an erasing batch removed
    /// while something else held the incident's row (that batch skips a
    /// locked incident rather than wait). Locked rows are skipped here too;
    /// a session added after the lock is seen by the second look, which
    /// runs on a fresh snapshot, and keeps its incident.
    pub async fn erase_expired_incidents(
        &self,
        keep: &KeepFor,
        batch: u32,
    ) -> Result<u64, StoreError> {
        let (tenants, secs, default) = keep.sql_params();
        let limit = i64::from(batch);
        let replica = self.replica.clone();
        self.run("erase_expired_incidents", async move |c| {
            let tx = c.transaction().await?;
            let locked = tx
                .query(
                    "SELECT i.id FROM incidents i \
                     LEFT JOIN unnest($1::text[], $2::bigint[]) o(tenant, secs) \
                       ON o.tenant = i.tenant \
                     CROSS JOIN LATERAL (SELECT now() - make_interval(secs => \
                       CASE WHEN o.tenant IS NULL THEN $3::bigint ELSE o.secs END) AS cutoff) k \
                     WHERE i.created_at < k.cutoff \
                       AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.incident_id = i.id) \
                       AND NOT EXISTS (SELECT 1 FROM alert_events a \
                                       WHERE a.incident_id = i.id AND a.received_at >= k.cutoff) \
                     ORDER BY i.created_at LIMIT $4 FOR UPDATE OF i SKIP LOCKED",
                    &[&tenants, &secs, &default, &limit],
                )
                .await?;
            let ids: Vec<Uuid> = locked.iter().map(|r| get(r, 0)).collect::<Result<_, _>>()?;
            let mut records = Vec::with_capacity(ids.len());
            let gone = erase_incidents_left_empty(&tx, &ids, &mut records).await?;
            if gone == 0 {
                tx.rollback().await?;
                return Ok(0);
            }
            record_retention(&tx, &replica, &records).await?;
            tx.commit().await?;
            Ok(gone)
        })
        .await
    }

    /// Deletes up to `batch` audit events older than their tenant keeps
    /// them, through `expire_audit_events` (migration V33), the one path
    /// the append-only trigger lets through; returns how many.
    pub async fn expire_audit_events(&self, keep: &KeepFor, batch: u32) -> Result<u64, StoreError> {
        let limit = i32::try_from(batch).unwrap_or(i32::MAX);
        let keep = keep.clone();
        self.run("expire_audit_events", async move |c| {
            let mut gone = 0i64;
            let except: Vec<String> = keep
                .overrides
                .iter()
                .map(|(t, _)| t.as_str().to_owned())
                .collect();
            let secs = |d: std::time::Duration| i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
            for (tenant, kept) in &keep.overrides {
                let Some(kept) = kept else { continue };
                let n: i64 = c
                    .query_one(
                        "SELECT expire_audit_events(now() - make_interval(secs => $1::bigint), \
                         $2, $3, '{}')",
                        &[&secs(*kept), &limit, &tenant.as_str()],
                    )
                    .await?
                    .get(0);
                gone += n;
            }
            if let Some(kept) = keep.default {
                let n: i64 = c
                    .query_one(
                        "SELECT expire_audit_events(now() - make_interval(secs => $1::bigint), \
                         $2, NULL, $3)",
                        &[&secs(kept), &limit, &except],
                    )
                    .await?
                    .get(0);
                gone += n;
            }
            Ok(u64::try_from(gone).unwrap_or(0))
        })
        .await
    }
}
