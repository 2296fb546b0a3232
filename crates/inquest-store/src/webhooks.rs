//! Webhooks managed over the API (migration V25): each row is one tenant's
//! endpoint with its own delivery cursor and lease, and `webhook_attempts`
//! keeps the newest attempts of each. The configured webhooks of
//! `[[events.webhooks]]` keep their cursors in `webhook_cursors`
//! ([`crate::events`]).
//!
//! Every read and write the API makes is scoped by tenant: another
//! tenant's webhook is absent, exactly as an unknown id.

use std::time::Duration;

use inquest_core::Tenant;
use time::OffsetDateTime;
use tokio_postgres::Row;
use uuid::Uuid;

use crate::{
    EventRow, Store, StoreError,
    events::{ADVANCE, FAILED, FAILING, Failing},
    rows::get,
};

/// Attempts kept per webhook; older ones are deleted as new ones come.
pub const MAX_ATTEMPTS_KEPT: i64 = 1000;

/// One API webhook, secret included (callers decide who sees it).
#[derive(Clone, PartialEq)]
pub struct WebhookRow {
    pub id: Uuid,
    pub tenant: String,
    pub url: String,
    /// Empty: every type.
    pub event_types: Vec<String>,
    pub description: String,
    pub format: String,
    /// `whsec_<base64>`.
    pub secret: String,
    pub created_at: OffsetDateTime,
    pub disabled_at: Option<OffsetDateTime>,
    pub disabled_reason: Option<String>,
    /// The last event delivered (or skipped as not this webhook's).
    pub delivered_id: i64,
    /// Failed attempts since the last delivery, and the last one's error.
    pub failed_attempts: i32,
    pub last_error: Option<String>,
}

impl std::fmt::Debug for WebhookRow {
    // The secret never reaches a log line or a test failure's output.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookRow")
            .field("id", &self.id)
            .field("tenant", &self.tenant)
            .field("url", &self.url)
            .field("event_types", &self.event_types)
            .field("delivered_id", &self.delivered_id)
            .field("disabled_at", &self.disabled_at)
            .finish_non_exhaustive()
    }
}

/// What CreateWebhook stores.
pub struct NewWebhook<'a> {
    pub tenant: &'a Tenant,
    pub url: &'a str,
    pub event_types: &'a [String],
    pub description: &'a str,
    pub format: &'a str,
    pub secret: &'a str,
}

/// One delivery attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptRow {
    pub id: i64,
    pub event_id: i64,
    pub attempted_at: OffsetDateTime,
    /// The receiver's status; `None` when no answer came.
    pub status_code: Option<i32>,
    /// `None` after a 2xx.
    pub error: Option<String>,
    pub duration_ms: i64,
    pub redelivery: bool,
}

/// What an attempt ended with, to record.
#[derive(Debug, Clone)]
pub struct NewAttempt<'a> {
    pub webhook: Uuid,
    pub event_id: i64,
    pub status_code: Option<u16>,
    pub error: Option<&'a str>,
    pub duration: Duration,
    pub redelivery: bool,
}

/// A page of attempts, newest first; `next` is the cursor of the next.
#[derive(Debug, Clone)]
pub struct AttemptPage {
    pub attempts: Vec<AttemptRow>,
    pub next: Option<i64>,
}

/// A stream's backlog is counted to this many events at most, so that
/// measuring a queue days behind stays cheap.
pub const BACKLOG_COUNT_CAP: i64 = 100_000;

/// Events not yet delivered, and how long the oldest has waited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Backlog {
    pub events: i64,
    /// `None` when there is none.
    pub oldest: Option<Duration>,
}

impl Backlog {
    fn from_row(row: &Row) -> Result<Self, StoreError> {
        let events: Option<i64> = get(row, 0)?;
        let age: Option<i64> = get(row, 1)?;
        Ok(Self {
            events: events.unwrap_or(0),
            oldest: age.map(|ms| Duration::from_millis(u64::try_from(ms).unwrap_or(0))),
        })
    }

    /// Both backlogs together: the sum, and the older of the oldest.
    #[must_use]
    pub fn and(self, other: Self) -> Self {
        Self {
            events: self.events + other.events,
            oldest: self.oldest.max(other.oldest),
        }
    }
}

const COLUMNS: &str = "id, tenant, url, event_types, description, format, secret, created_at, \
                       disabled_at, disabled_reason, delivered_id, failed_attempts, last_error";

fn webhook_from_row(row: &Row) -> Result<WebhookRow, StoreError> {
    Ok(WebhookRow {
        id: get(row, 0)?,
        tenant: get(row, 1)?,
        url: get(row, 2)?,
        event_types: get(row, 3)?,
        description: get(row, 4)?,
        format: get(row, 5)?,
        secret: get(row, 6)?,
        created_at: get(row, 7)?,
        disabled_at: get(row, 8)?,
        disabled_reason: get(row, 9)?,
        delivered_id: get(row, 10)?,
        failed_attempts: get(row, 11)?,
        last_error: get(row, 12)?,
    })
}

fn attempt_from_row(row: &Row) -> Result<AttemptRow, StoreError> {
    Ok(AttemptRow {
        id: get(row, 0)?,
        event_id: get(row, 1)?,
        attempted_at: get(row, 2)?,
        status_code: get(row, 3)?,
        error: get(row, 4)?,
        duration_ms: get(row, 5)?,
        redelivery: get(row, 6)?,
    })
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl Store {
    /// Stores a webhook whose stream starts at the newest event (it
    /// receives what happens from now on), unless the tenant already has
    /// `max_per_tenant`: then `None`.
    pub async fn create_webhook(
        &self,
        new: NewWebhook<'_>,
        max_per_tenant: i64,
    ) -> Result<Option<WebhookRow>, StoreError> {
        let id = Uuid::now_v7();
        let sql = format!(
            "INSERT INTO webhooks (id, tenant, url, event_types, description, format, secret, \
                                   delivered_id) \
             SELECT $1, $2, $3, $4, $5, $6, $7, (SELECT coalesce(max(id), 0) FROM events) \
             WHERE (SELECT count(*) FROM webhooks WHERE tenant = $2 AND deleted_at IS NULL) < $8 \
             RETURNING {COLUMNS}"
        );
        let row = self
            .run("create_webhook", async |c| {
                Ok(c.query_opt(
                    &sql,
                    &[
                        &id,
                        &new.tenant.as_str(),
                        &new.url,
                        &new.event_types,
                        &new.description,
                        &new.format,
                        &new.secret,
                        &max_per_tenant,
                    ],
                )
                .await?)
            })
            .await?;
        row.map(|r| webhook_from_row(&r)).transpose()
    }

    /// The tenant's webhooks, oldest first.
    pub async fn list_webhooks(&self, tenant: &Tenant) -> Result<Vec<WebhookRow>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM webhooks WHERE tenant = $1 AND deleted_at IS NULL \
             ORDER BY created_at, id"
        );
        let rows = self
            .run("list_webhooks", async |c| {
                Ok(c.query(&sql, &[&tenant.as_str()]).await?)
            })
            .await?;
        rows.iter().map(webhook_from_row).collect()
    }

    /// The tenant's webhook `id`; `None` for an unknown id or another
    /// tenant's.
    pub async fn webhook_of(
        &self,
        tenant: &Tenant,
        id: Uuid,
    ) -> Result<Option<WebhookRow>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM webhooks WHERE id = $1 AND tenant = $2 AND deleted_at IS NULL"
        );
        let row = self
            .run("webhook_of", async |c| {
                Ok(c.query_opt(&sql, &[&id, &tenant.as_str()]).await?)
            })
            .await?;
        row.map(|r| webhook_from_row(&r)).transpose()
    }

    /// Deletes the tenant's webhook `id`: marks it deleted, clears its
    /// secret and drops its attempts. `None` when the tenant has no such
    /// webhook; `Some(false)` when it was deleted already.
    pub async fn delete_webhook(
        &self,
        tenant: &Tenant,
        id: Uuid,
    ) -> Result<Option<bool>, StoreError> {
        let row = self
            .run("delete_webhook", async |c| {
                let row = c
                    .query_opt(
                        "WITH old AS (SELECT deleted_at FROM webhooks \
                                      WHERE id = $1 AND tenant = $2 FOR UPDATE) \
                         UPDATE webhooks w SET deleted_at = coalesce(w.deleted_at, now()), \
                                secret = '', holder = NULL, lease_expires_at = NULL \
                         FROM old WHERE w.id = $1 RETURNING old.deleted_at IS NULL",
                        &[&id, &tenant.as_str()],
                    )
                    .await?;
                if row.is_some() {
                    c.execute("DELETE FROM webhook_attempts WHERE webhook_id = $1", &[&id])
                        .await?;
                }
                Ok(row)
            })
            .await?;
        row.map(|r| get(&r, 0)).transpose()
    }

    /// Replaces the secret of the tenant's webhook `id`; the next attempt
    /// signs with it. `None` when there is no such webhook.
    pub async fn rotate_webhook_secret(
        &self,
        tenant: &Tenant,
        id: Uuid,
        secret: &str,
    ) -> Result<Option<WebhookRow>, StoreError> {
        let sql = format!(
            "UPDATE webhooks SET secret = $3, updated_at = now() \
             WHERE id = $1 AND tenant = $2 AND deleted_at IS NULL RETURNING {COLUMNS}"
        );
        let row = self
            .run("rotate_webhook_secret", async |c| {
                Ok(c.query_opt(&sql, &[&id, &tenant.as_str(), &secret]).await?)
            })
            .await?;
        row.map(|r| webhook_from_row(&r)).transpose()
    }

    /// The attempts of the tenant's webhook `id`, newest first, older
    /// than `before` (an attempt id); `None` when there is no such webhook.
    pub async fn list_webhook_attempts(
        &self,
        tenant: &Tenant,
        id: Uuid,
        before: Option<i64>,
        limit: u32,
    ) -> Result<Option<AttemptPage>, StoreError> {
        if self.webhook_of(tenant, id).await?.is_none() {
            return Ok(None);
        }
        let before = before.unwrap_or(i64::MAX);
        let fetch = i64::from(limit) + 1;
        let rows = self
            .run("list_webhook_attempts", async |c| {
                Ok(c.query(
                    "SELECT a.id, a.event_id, a.attempted_at, a.status_code, a.error, \
                            a.duration_ms, a.redelivery \
                     FROM webhook_attempts a JOIN webhooks w ON w.id = a.webhook_id \
                     WHERE a.webhook_id = $1 AND w.tenant = $2 AND a.id < $3 \
                     ORDER BY a.id DESC LIMIT $4",
                    &[&id, &tenant.as_str(), &before, &fetch],
                )
                .await?)
            })
            .await?;
        let mut attempts = rows
            .iter()
            .map(attempt_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        let next = if attempts.len() > limit as usize {
            attempts.truncate(limit as usize);
            attempts.last().map(|a| a.id)
        } else {
            None
        };
        Ok(Some(AttemptPage { attempts, next }))
    }

    /// The tenant's event `id`; `None` for an unknown id or another
    /// tenant's.
    pub async fn event_of(&self, tenant: &Tenant, id: i64) -> Result<Option<EventRow>, StoreError> {
        let events = self
            .list_events(tenant, id.saturating_sub(1), &[], None, 1)
            .await?;
        Ok(events.into_iter().find(|e| e.id == id))
    }

    /// Records one attempt, then trims the webhook's history to its newest
    /// [`MAX_ATTEMPTS_KEPT`]; the attempt as stored. An attempt of a
    /// webhook deleted meanwhile is not recorded (`None`).
    pub async fn record_webhook_attempt(
        &self,
        attempt: NewAttempt<'_>,
    ) -> Result<Option<AttemptRow>, StoreError> {
        let status = attempt.status_code.map(i32::from);
        let duration = millis(attempt.duration);
        let row = self
            .run("record_webhook_attempt", async |c| {
                let row = c
                    .query_opt(
                        "INSERT INTO webhook_attempts (webhook_id, event_id, status_code, error, \
                                                       duration_ms, redelivery) \
                         SELECT $1, $2, $3, $4, $5, $6 \
                         WHERE EXISTS (SELECT 1 FROM webhooks WHERE id = $1 AND deleted_at IS NULL) \
                         RETURNING id, event_id, attempted_at, status_code, error, duration_ms, \
                                   redelivery",
                        &[
                            &attempt.webhook,
                            &attempt.event_id,
                            &status,
                            &attempt.error,
                            &duration,
                            &attempt.redelivery,
                        ],
                    )
                    .await?;
                // The row at the limit, if there is one, and all below it go.
                c.execute(
                    "DELETE FROM webhook_attempts WHERE webhook_id = $1 AND id <= \
                     (SELECT id FROM webhook_attempts WHERE webhook_id = $1 \
                      ORDER BY id DESC OFFSET $2 LIMIT 1)",
                    &[&attempt.webhook, &MAX_ATTEMPTS_KEPT],
                )
                .await?;
                Ok(row)
            })
            .await?;
        row.map(|r| attempt_from_row(&r)).transpose()
    }

    /// The webhooks to deliver (not disabled), at most `limit`, oldest
    /// first.
    pub async fn active_webhooks(&self, limit: u32) -> Result<Vec<WebhookRow>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM webhooks WHERE disabled_at IS NULL AND deleted_at IS NULL \
             ORDER BY created_at, id LIMIT $1"
        );
        let rows = self
            .run("active_webhooks", async |c| {
                Ok(c.query(&sql, &[&i64::from(limit)]).await?)
            })
            .await?;
        rows.iter().map(webhook_from_row).collect()
    }

    /// The webhook `id` as it is now (its secret may have been rotated a
    /// moment ago); `None` once deleted.
    pub async fn webhook_now(&self, id: Uuid) -> Result<Option<WebhookRow>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM webhooks WHERE id = $1 AND deleted_at IS NULL");
        let row = self
            .run("webhook_now", async |c| {
                Ok(c.query_opt(&sql, &[&id]).await?)
            })
            .await?;
        row.map(|r| webhook_from_row(&r)).transpose()
    }

    /// Takes (or keeps) the delivery lease of API webhook `id` for `ttl`;
    /// the id delivered so far, or `None` while another replica holds a
    /// live lease (or the webhook is gone).
    pub async fn claim_api_webhook(
        &self,
        id: Uuid,
        ttl: Duration,
    ) -> Result<Option<i64>, StoreError> {
        let holder = self.replica_id().as_str().to_owned();
        let row = self
            .run("claim_api_webhook", async |c| {
                Ok(c.query_opt(
                    "UPDATE webhooks SET holder = $2, \
                     lease_expires_at = now() + $3::bigint * interval '1 millisecond' \
                     WHERE id = $1 AND deleted_at IS NULL \
                       AND (holder = $2 OR lease_expires_at IS NULL OR lease_expires_at <= now()) \
                     RETURNING delivered_id",
                    &[&id, &holder, &millis(ttl)],
                )
                .await?)
            })
            .await?;
        row.map(|r| get(&r, 0)).transpose()
    }

    /// Moves API webhook `id`'s cursor to `event` (`delivered`: the
    /// failing streak ends) and renews the lease; `false` when this replica
    /// no longer holds it.
    pub async fn advance_api_webhook(
        &self,
        id: Uuid,
        event: i64,
        delivered: bool,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        let holder = self.replica_id().as_str().to_owned();
        let sql = format!("UPDATE webhooks SET {ADVANCE} WHERE id = $1 AND holder = $2");
        self.run("advance_api_webhook", async |c| {
            Ok(
                c.execute(&sql, &[&id, &holder, &event, &millis(ttl), &delivered])
                    .await?
                    == 1,
            )
        })
        .await
    }

    /// [`Self::advance_api_webhook`] with the attempts that delivered the
    /// events up to `event`, recorded in the same round of statements: a
    /// stream records a run of deliveries at once rather than one row per
    /// event. The attempts are recorded even when the lease moved on (they
    /// happened); `false` as for `advance_api_webhook`.
    pub async fn advance_api_webhook_with(
        &self,
        id: Uuid,
        event: i64,
        delivered: bool,
        ttl: Duration,
        attempts: &[NewAttempt<'_>],
    ) -> Result<bool, StoreError> {
        let holder = self.replica_id().as_str().to_owned();
        let sql = format!("UPDATE webhooks SET {ADVANCE} WHERE id = $1 AND holder = $2");
        let events: Vec<i64> = attempts.iter().map(|a| a.event_id).collect();
        let statuses: Vec<Option<i32>> = attempts
            .iter()
            .map(|a| a.status_code.map(i32::from))
            .collect();
        let errors: Vec<Option<&str>> = attempts.iter().map(|a| a.error).collect();
        let durations: Vec<i64> = attempts.iter().map(|a| millis(a.duration)).collect();
        self.run("advance_api_webhook_with", async |c| {
            let tx = c.transaction().await?;
            let moved = tx
                .execute(&sql, &[&id, &holder, &event, &millis(ttl), &delivered])
                .await?
                == 1;
            if !events.is_empty() {
                tx.execute(
                    "INSERT INTO webhook_attempts (webhook_id, event_id, status_code, error, \
                                                   duration_ms, redelivery) \
                     SELECT $1, a.event_id, a.status_code, a.error, a.duration_ms, false \
                     FROM unnest($2::bigint[], $3::integer[], $4::text[], $5::bigint[]) \
                          AS a(event_id, status_code, error, duration_ms) \
                     WHERE EXISTS (SELECT 1 FROM webhooks WHERE id = $1 AND deleted_at IS NULL) \
                     ORDER BY a.event_id",
                    &[&id, &events, &statuses, &errors, &durations],
                )
                .await?;
                tx.execute(
                    "DELETE FROM webhook_attempts WHERE webhook_id = $1 AND id <= \
                     (SELECT id FROM webhook_attempts WHERE webhook_id = $1 \
                      ORDER BY id DESC OFFSET $2 LIMIT 1)",
                    &[&id, &MAX_ATTEMPTS_KEPT],
                )
                .await?;
            }
            tx.commit().await?;
            Ok(moved)
        })
        .await
    }

    /// Records a failed attempt on API webhook `id`'s row and renews the
    /// lease; how long it has been failing, or `None` when the lease is no
    /// longer this replica's.
    pub async fn api_webhook_failed(
        &self,
        id: Uuid,
        error: &str,
        ttl: Duration,
    ) -> Result<Option<Failing>, StoreError> {
        let holder = self.replica_id().as_str().to_owned();
        let sql = format!(
            "UPDATE webhooks SET {FAILED} WHERE id = $1 AND holder = $2 RETURNING {FAILING}"
        );
        let row = self
            .run("api_webhook_failed", async |c| {
                Ok(c.query_opt(&sql, &[&id, &holder, &error, &millis(ttl)])
                    .await?)
            })
            .await?;
        row.map(|r| Failing::from_row(&r)).transpose()
    }

    /// Disables API webhook `id` for `reason` and gives its lease up: it is
    /// no longer delivered, and ListWebhooks says why. `false` when this
    /// replica no longer holds the lease (or it is gone).
    pub async fn disable_api_webhook(&self, id: Uuid, reason: &str) -> Result<bool, StoreError> {
        let holder = self.replica_id().as_str().to_owned();
        self.run("disable_api_webhook", async |c| {
            Ok(c.execute(
                "UPDATE webhooks SET disabled_at = now(), disabled_reason = $3, \
                 holder = NULL, lease_expires_at = NULL, updated_at = now() \
                 WHERE id = $1 AND holder = $2 AND deleted_at IS NULL",
                &[&id, &holder, &reason],
            )
            .await?
                == 1)
        })
        .await
    }

    /// The API webhooks' events this replica has still to deliver: the
    /// streams whose live lease it holds, each counted to
    /// [`BACKLOG_COUNT_CAP`].
    pub async fn held_api_webhooks_backlog(&self) -> Result<Backlog, StoreError> {
        let holder = self.replica_id().as_str().to_owned();
        let sql = format!(
            "SELECT coalesce(sum(b.n), 0)::bigint, max(b.age)::bigint FROM webhooks w \
             CROSS JOIN LATERAL (\
               SELECT (SELECT count(*) FROM (SELECT 1 FROM events e \
                        WHERE e.tenant = w.tenant AND e.id > w.delivered_id \
                          AND (cardinality(w.event_types) = 0 OR e.type = ANY(w.event_types)) \
                        LIMIT {BACKLOG_COUNT_CAP}) x) AS n, \
                      (SELECT (extract(epoch FROM now() - e.created_at) * 1000)::bigint \
                       FROM events e WHERE e.tenant = w.tenant AND e.id > w.delivered_id \
                         AND (cardinality(w.event_types) = 0 OR e.type = ANY(w.event_types)) \
                       ORDER BY e.id LIMIT 1) AS age) b \
             WHERE w.holder = $1 AND w.lease_expires_at > now() \
               AND w.deleted_at IS NULL AND w.disabled_at IS NULL"
        );
        let row = self
            .run("held_api_webhooks_backlog", async |c| {
                Ok(c.query_one(&sql, &[&holder]).await?)
            })
            .await?;
        Backlog::from_row(&row)
    }

    /// The configured webhooks whose live lease this replica holds, with
    /// their cursors.
    pub async fn held_webhook_cursors(&self) -> Result<Vec<(String, i64)>, StoreError> {
        let holder = self.replica_id().as_str().to_owned();
        let rows = self
            .run("held_webhook_cursors", async |c| {
                Ok(c.query(
                    "SELECT name, delivered_id FROM webhook_cursors \
                     WHERE holder = $1 AND lease_expires_at > now()",
                    &[&holder],
                )
                .await?)
            })
            .await?;
        rows.iter().map(|r| Ok((get(r, 0)?, get(r, 1)?))).collect()
    }

    /// The events after `delivered` of `tenant` (`None`: every tenant's)
    /// and of `types` (empty: all), counted to [`BACKLOG_COUNT_CAP`].
    pub async fn events_backlog(
        &self,
        delivered: i64,
        tenant: Option<&str>,
        types: &[String],
    ) -> Result<Backlog, StoreError> {
        let filter = "id > $1 AND ($2::text IS NULL OR tenant = $2) \
                      AND (cardinality($3::text[]) = 0 OR type = ANY($3))";
        let sql = format!(
            "SELECT (SELECT count(*) FROM (SELECT 1 FROM events WHERE {filter} \
                     LIMIT {BACKLOG_COUNT_CAP}) x), \
                    (SELECT (extract(epoch FROM now() - created_at) * 1000)::bigint \
                     FROM events WHERE {filter} ORDER BY id LIMIT 1)"
        );
        let row = self
            .run("events_backlog", async |c| {
                Ok(c.query_one(&sql, &[&delivered, &tenant, &types]).await?)
            })
            .await?;
        Backlog::from_row(&row)
    }

    /// Gives API webhook `id`'s lease up.
    pub async fn release_api_webhook(&self, id: Uuid) -> Result<(), StoreError> {
        let holder = self.replica_id().as_str().to_owned();
        self.run("release_api_webhook", async |c| {
            c.execute(
                "UPDATE webhooks SET holder = NULL, lease_expires_at = NULL \
                 WHERE id = $1 AND holder = $2",
                &[&id, &holder],
            )
            .await?;
            Ok(())
        })
        .await
    }
}
