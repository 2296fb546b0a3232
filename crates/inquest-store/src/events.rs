//! The event log (migration V22) and the delivery cursors of webhooks.
//!
//! Events are written by the database itself, in the statement that makes
//! the change (triggers on `sessions.status`, `reports` and `incidents`),
//! or by the statement that stores a recovered burst's plan
//! ([`Store::save_recovery_plan`]); nothing here writes one. Ids are
//! committed in order (`record_event` takes a lock held to commit), so a
//! reader that pages by id never skips an event that committed late.

use std::time::Duration;

use serde_json::Value;
use time::OffsetDateTime;
use tokio_postgres::Row;
use uuid::Uuid;

use crate::{Store, StoreError, rows::get};

/// One stored event.
#[derive(Debug, Clone, PartialEq)]
pub struct EventRow {
    /// Monotonic, in commit order.
    pub id: i64,
    /// `session.completed`, `report.ready`, ...
    pub kind: String,
    pub tenant: String,
    /// `None` for `incident.created`.
    pub session_id: Option<Uuid>,
    pub incident_id: Uuid,
    pub payload: Value,
    pub created_at: OffsetDateTime,
}

const EVENT_COLUMNS: &str = "id, type, tenant, session_id, incident_id, payload, created_at";

fn event_from_row(row: &Row) -> Result<EventRow, StoreError> {
    Ok(EventRow {
        id: get(row, 0)?,
        kind: get(row, 1)?,
        tenant: get(row, 2)?,
        session_id: get(row, 3)?,
        incident_id: get(row, 4)?,
        payload: get(row, 5)?,
        created_at: get(row, 6)?,
    })
}

/// What a person reading an event needs beside its payload (a Slack
/// message): the incident's title, the session's status now, and for an
/// approval the arguments of the call asked about.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventContext {
    /// `None` when the incident is gone.
    pub incident_title: Option<String>,
    pub session_status: Option<String>,
    pub exit_reason: Option<String>,
    /// The held call's arguments, for `approval.*` events.
    pub approval_arguments: Option<String>,
}

/// How long a webhook's stream has been failing, as its failed attempt
/// left the row (migration V28).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failing {
    /// Since the first failed attempt of the event at the head.
    pub retrying: Duration,
    /// Since the first failed attempt after the last 2xx.
    pub failing: Duration,
}

impl Failing {
    pub(crate) fn from_row(row: &Row) -> Result<Self, StoreError> {
        let ms = |i| -> Result<Duration, StoreError> {
            let v: i64 = get(row, i)?;
            Ok(Duration::from_millis(u64::try_from(v).unwrap_or(0)))
        };
        Ok(Self {
            retrying: ms(0)?,
            failing: ms(1)?,
        })
    }
}

/// The SET of a failed attempt, on `webhook_cursors` and `webhooks` alike
/// (`$3` the error, `$4` the lease's ms).
pub(crate) const FAILED: &str = "failed_attempts = failed_attempts + 1, last_error = $3, \
     updated_at = now(), retry_since = coalesce(retry_since, now()), \
     failing_since = coalesce(failing_since, now()), \
     lease_expires_at = now() + $4::bigint * interval '1 millisecond'";
/// What a failed attempt returns, read by [`Failing::from_row`].
pub(crate) const FAILING: &str = "(extract(epoch FROM now() - retry_since) * 1000)::bigint, \
     (extract(epoch FROM now() - failing_since) * 1000)::bigint";
/// The SET of a moved cursor (`$3` the event, `$4` the lease's ms, `$5`
/// whether it was delivered): only a delivery ends the failing streak.
pub(crate) const ADVANCE: &str = "delivered_id = greatest(delivered_id, $3), retry_since = NULL, \
     failed_attempts = CASE WHEN $5 THEN 0 ELSE failed_attempts END, \
     last_error = CASE WHEN $5 THEN NULL ELSE last_error END, \
     failing_since = CASE WHEN $5 THEN NULL ELSE failing_since END, \
     updated_at = now(), lease_expires_at = now() + $4::bigint * interval '1 millisecond'";

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl Store {
    /// Up to `limit` events after `after`, oldest first.
    pub async fn events_after(&self, after: i64, limit: u32) -> Result<Vec<EventRow>, StoreError> {
        let sql = format!("SELECT {EVENT_COLUMNS} FROM events WHERE id > $1 ORDER BY id LIMIT $2");
        let rows = self
            .run("events_after", async |c| {
                Ok(c.query(&sql, &[&after, &i64::from(limit)]).await?)
            })
            .await?;
        rows.iter().map(event_from_row).collect()
    }

    /// The context of `event` (see [`EventContext`]), read now: a status
    /// may have moved on since the event, which the message says as it
    /// is when sent.
    pub async fn event_context(&self, event: &EventRow) -> Result<EventContext, StoreError> {
        let call = event.payload.get("call_id").and_then(Value::as_str);
        let row = self
            .run("event_context", async |c| {
                Ok(c.query_opt(
                    "SELECT i.title, i.escaped, s.status::text, s.exit_reason, \
                            (SELECT a.arguments FROM approvals a \
                              WHERE a.session_id = $2 AND a.call_id = $3) \
                     FROM incidents i LEFT JOIN sessions s ON s.id = $2 WHERE i.id = $1",
                    &[&event.incident_id, &event.session_id, &call],
                )
                .await?)
            })
            .await?;
        let Some(row) = row else {
            return Ok(EventContext::default());
        };
        let escaped: bool = get(&row, 1)?;
        Ok(EventContext {
            incident_title: Some(crate::text::read(get(&row, 0)?, escaped, "incident title")?),
            session_status: get(&row, 2)?,
            exit_reason: get(&row, 3)?,
            approval_arguments: get(&row, 4)?,
        })
    }

    /// Up to `limit` of `tenant`'s events after `after`, oldest first,
    /// only of `types` (empty: all) and of `session` (when given).
    pub async fn list_events(
        &self,
        tenant: &inquest_core::Tenant,
        after: i64,
        types: &[String],
        session: Option<inquest_core::SessionId>,
        limit: u32,
    ) -> Result<Vec<EventRow>, StoreError> {
        let sql = format!(
            "SELECT {EVENT_COLUMNS} FROM events WHERE tenant = $1 AND id > $2 \
             AND (cardinality($3::text[]) = 0 OR type = ANY($3)) \
             AND ($4::uuid IS NULL OR session_id = $4) ORDER BY id LIMIT $5"
        );
        let session = session.map(|s| *s.as_uuid());
        let rows = self
            .run("list_events", async |c| {
                Ok(c.query(
                    &sql,
                    &[
                        &tenant.as_str(),
                        &after,
                        &types,
                        &session,
                        &i64::from(limit),
                    ],
                )
                .await?)
            })
            .await?;
        rows.iter().map(event_from_row).collect()
    }

    /// Creates the cursor of webhook `name` if it has none, at the newest
    /// event: a webhook added to the config receives what happens from
    /// then on, not the whole history. An existing cursor is kept, so a
    /// restart resumes where delivery stopped.
    pub async fn open_webhook_cursor(&self, name: &str) -> Result<(), StoreError> {
        self.run("open_webhook_cursor", async |c| {
            c.execute(
                "INSERT INTO webhook_cursors (name, delivered_id) \
                 SELECT $1, coalesce(max(id), 0) FROM events ON CONFLICT (name) DO NOTHING",
                &[&name],
            )
            .await?;
            Ok(())
        })
        .await
    }

    /// Takes (or keeps) the delivery lease of webhook `name` for `ttl`;
    /// the id delivered so far, or `None` while another replica holds a
    /// live lease.
    pub async fn claim_webhook(
        &self,
        name: &str,
        ttl: Duration,
    ) -> Result<Option<i64>, StoreError> {
        let holder = self.replica_id().as_str().to_owned();
        let row = self
            .run("claim_webhook", async |c| {
                Ok(c.query_opt(
                    "UPDATE webhook_cursors SET holder = $2, \
                     lease_expires_at = now() + $3::bigint * interval '1 millisecond' \
                     WHERE name = $1 AND (holder = $2 OR lease_expires_at IS NULL \
                                          OR lease_expires_at <= now()) \
                     RETURNING delivered_id",
                    &[&name, &holder, &millis(ttl)],
                )
                .await?)
            })
            .await?;
        row.map(|r| get(&r, 0)).transpose()
    }

    /// Moves webhook `name`'s cursor to `id` and renews the lease: every
    /// event up to `id` reached it (`delivered`: the failing streak ends),
    /// or was given up, or is not for it. `false` when this replica no
    /// longer holds the lease: another one delivers now, and this one
    /// must stop.
    pub async fn advance_webhook(
        &self,
        name: &str,
        id: i64,
        delivered: bool,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        let holder = self.replica_id().as_str().to_owned();
        let sql = format!("UPDATE webhook_cursors SET {ADVANCE} WHERE name = $1 AND holder = $2");
        self.run("advance_webhook", async |c| {
            Ok(
                c.execute(&sql, &[&name, &holder, &id, &millis(ttl), &delivered])
                    .await?
                    == 1,
            )
        })
        .await
    }

    /// Records a failed attempt (its error, already free of secrets) and
    /// renews the lease; how long the stream has been failing, or `None`
    /// when the lease is no longer this replica's.
    pub async fn webhook_failed(
        &self,
        name: &str,
        error: &str,
        ttl: Duration,
    ) -> Result<Option<Failing>, StoreError> {
        let holder = self.replica_id().as_str().to_owned();
        let sql = format!(
            "UPDATE webhook_cursors SET {FAILED} WHERE name = $1 AND holder = $2 \
             RETURNING {FAILING}"
        );
        let row = self
            .run("webhook_failed", async |c| {
                Ok(c.query_opt(&sql, &[&name, &holder, &error, &millis(ttl)])
                    .await?)
            })
            .await?;
        row.map(|r| Failing::from_row(&r)).transpose()
    }

    /// Gives the lease of webhook `name` up (at shutdown), so another
    /// replica takes the stream over at once.
    pub async fn release_webhook(&self, name: &str) -> Result<(), StoreError> {
        let holder = self.replica_id().as_str().to_owned();
        self.run("release_webhook", async |c| {
            c.execute(
                "UPDATE webhook_cursors SET holder = NULL, lease_expires_at = NULL \
                 WHERE name = $1 AND holder = $2",
                &[&name, &holder],
            )
            .await?;
            Ok(())
        })
        .await
    }
}
