//! Leases: which replica runs a session's burst, until when, and the
//! fencing epoch.
//!
//! A burst runs only under a [`Lease`], and a `Lease` is only ever made
//! here, by a statement that took it in the database: claiming a `pending`
//! session ([`Store::claim_pending`]) or an orphan, a `running` session
//! whose lease expired ([`Store::claim_orphans`], [`Store::claim_orphan`]).
//! Every claim bumps `lease_epoch`. The burst's turn inserts, its report
//! and its closing status all check that epoch in the same statement that
//! writes ([`Store::append_turn_leased`]), so a worker that stalled past its
//! expiry and was replaced cannot write another row: the statement finds a
//! newer epoch and reports [`StoreError::LeaseLost`].
//!
//! The holder renews the expiry on a timer ([`Store::renew_lease`]); a
//! replica shutting down hands its bursts over ([`Store::release_lease`])
//! so another replica's reaper continues them at once.

use std::{fmt, time::Duration};

use inquest_core::{Event, SessionId, SessionStatus};
use tokio::time::Instant;

use tokio_postgres::{Row, types::ToSql};

use crate::{Store, StoreError, rows::get};

/// Names one replica (process) in lease rows and notifications.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ReplicaId(String);

impl ReplicaId {
    /// At most 128 characters of `[A-Za-z0-9._:-]`, not empty (a pod name
    /// or a hostname fits).
    pub fn parse(text: &str) -> Result<Self, String> {
        let ok = !text.is_empty()
            && text.len() <= 128
            && text
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-'));
        if ok {
            Ok(Self(text.to_owned()))
        } else {
            Err(format!(
                "replica id {text:?} must be 1 to 128 characters of letters, digits, '.', '_', \
                 ':' or '-'"
            ))
        }
    }

    /// A fresh id for a process that was not given one: host name (when
    /// known), process id and a random suffix, so two processes never share
    /// an id.
    pub fn generate() -> Self {
        let host = std::env::var("HOSTNAME")
            .ok()
            .filter(|h| Self::parse(h).is_ok() && h.len() <= 64)
            .unwrap_or_else(|| "inquest".to_owned());
        let suffix = uuid::Uuid::new_v4().simple().to_string();
        Self(format!(
            "{host}-{}-{}",
            std::process::id(),
            suffix.get(..8).unwrap_or("0")
        ))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ReplicaId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A lease this replica took on a session. Only the store makes one, from
/// a claim that committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    session: SessionId,
    epoch: i64,
    /// When the claim statement was sent. The database computed the
    /// expiry (`now() + ttl`) after this instant, so `sent_at + ttl` is a
    /// lower bound of the expiry other replicas see: the holder's deadline
    /// counts from here, never from when the answer arrived.
    sent_at: Instant,
    /// An interrupting message was queued when the claim ran: the burst
    /// stops at its first safe point (the message was sent while the
    /// session waited to be claimed, or while a worker that died ran it).
    interrupt: bool,
}

impl Lease {
    /// When the claim that made this lease was sent.
    pub fn sent_at(&self) -> Instant {
        self.sent_at
    }

    pub fn session(&self) -> SessionId {
        self.session
    }

    /// The fencing epoch every write of the burst checks.
    pub fn epoch(&self) -> i64 {
        self.epoch
    }

    /// Whether an interrupting message waited when the claim ran.
    pub fn interrupt_requested(&self) -> bool {
        self.interrupt
    }
}

/// What a renewal found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renewal {
    /// Still ours, expiry pushed out; the session's current status (a
    /// `cancelled` here means another replica cancelled it), and whether
    /// an interrupting message waits in its queue (the burst stops).
    Held {
        status: SessionStatus,
        interrupt: bool,
    },
    /// Another replica claimed the session (a newer epoch): stop writing.
    Lost,
}

/// Leases from claim rows of `(id, lease_epoch, interrupt)`, claimed by a
/// statement sent at `sent_at`.
fn leases(rows: &[Row], sent_at: Instant) -> Result<Vec<Lease>, StoreError> {
    rows.iter()
        .map(|r| {
            Ok(Lease {
                session: SessionId::from_uuid(get(r, 0)?),
                epoch: get(r, 1)?,
                sent_at,
                interrupt: get(r, 2)?,
            })
        })
        .collect()
}

/// SQL: whether the session `{table}.id` names has an interrupting
/// message queued (migration V29).
fn interrupt_queued(table: &str) -> String {
    format!(
        "EXISTS (SELECT 1 FROM queued_messages q WHERE q.session_id = {table}.id AND q.interrupt)"
    )
}

/// The interval expression `now() + ttl` for the lease TTL in `$n` (ms).
fn expiry(param: usize) -> String {
    format!("now() + ${param}::bigint * interval '1 millisecond'")
}

/// `event`'s target and source statuses as bound parameters: the state
/// machine's table decides both, and no status is ever SQL text.
fn transition(event: Event) -> (Box<dyn ToSql + Send + Sync>, Box<dyn ToSql + Send + Sync>) {
    (
        Box::new(event.target().as_str()),
        Box::new(event.source_texts()),
    )
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl Store {
    /// This replica's id (lease owner, notification origin).
    pub fn replica_id(&self) -> &ReplicaId {
        &self.replica
    }

    /// How long a claim or renewal holds a lease.
    pub fn lease_ttl(&self) -> Duration {
        self.lease_ttl
    }

    /// Claims a `pending` session's burst: `running`, this replica's lease,
    /// epoch + 1. `None` when it is not pending (claimed elsewhere, or
    /// cancelled). Records no trace id (see [`Store::claim_pending_traced`]).
    pub async fn claim_pending(&self, session: SessionId) -> Result<Option<Lease>, StoreError> {
        self.claim_pending_traced(session, None).await
    }

    /// [`Store::claim_pending`] that also stores `trace_id`, the burst's
    /// trace, as the session's `trace_id` in the same statement (`None`
    /// clears it: the latest burst was not traced).
    pub async fn claim_pending_traced(
        &self,
        session: SessionId,
        trace_id: Option<String>,
    ) -> Result<Option<Lease>, StoreError> {
        let sql = format!(
            "UPDATE sessions SET status = $5::text, lease_owner = $2, \
             lease_epoch = lease_epoch + 1, lease_expires_at = {}, updated_at = now(), \
             trace_id = $4 \
             WHERE id = $1 AND status = ANY($6) RETURNING lease_epoch, {}",
            expiry(3),
            interrupt_queued("sessions"),
        );
        let (to, from) = transition(Event::Claim);
        let sent_at = Instant::now();
        let rows = self
            .lease_write(
                "claim_pending",
                sql,
                vec![
                    Box::new(*session.as_uuid()),
                    Box::new(self.replica.as_str().to_owned()),
                    Box::new(millis(self.lease_ttl)),
                    Box::new(trace_id),
                    to,
                    from,
                ],
            )
            .await?;
        rows.first()
            .map(|r| {
                Ok(Lease {
                    session,
                    epoch: get(r, 0)?,
                    sent_at,
                    interrupt: get(r, 1)?,
                })
            })
            .transpose()
    }

    /// Claims up to `limit` orphans: sessions `running` whose lease expired
    /// (or that never had one). Rows another replica is claiming right now
    /// are skipped, not waited for.
    pub async fn claim_orphans(&self, limit: u32) -> Result<Vec<Lease>, StoreError> {
        self.claim_expired(None, limit).await
    }

    /// Claims `session` if it is an orphan; `None` when it is not (its lease
    /// is live, it is not running, or another replica is claiming it).
    pub async fn claim_orphan(&self, session: SessionId) -> Result<Option<Lease>, StoreError> {
        Ok(self.claim_expired(Some(session), 1).await?.pop())
    }

    async fn claim_expired(
        &self,
        only: Option<SessionId>,
        limit: u32,
    ) -> Result<Vec<Lease>, StoreError> {
        let sql = format!(
            "UPDATE sessions s SET lease_owner = $1, lease_epoch = s.lease_epoch + 1, \
             lease_expires_at = {}, updated_at = now() \
             FROM (SELECT id FROM sessions WHERE status = ANY($5) \
                     AND (lease_expires_at IS NULL OR lease_expires_at <= now()) \
                     AND ($3::uuid IS NULL OR id = $3) \
                   ORDER BY lease_expires_at NULLS FIRST LIMIT $4 \
                   FOR UPDATE SKIP LOCKED) orphan \
             WHERE s.id = orphan.id RETURNING s.id, s.lease_epoch, {}",
            expiry(2),
            interrupt_queued("s"),
        );
        // Recovery keeps the status (`running` to `running`): only the
        // sources are bound.
        let (_, from) = transition(Event::Recover);
        let sent_at = Instant::now();
        let rows = self
            .lease_write(
                "claim_orphans",
                sql,
                vec![
                    Box::new(self.replica.as_str().to_owned()),
                    Box::new(millis(self.lease_ttl)),
                    Box::new(only.map(|s| *s.as_uuid())),
                    Box::new(i64::from(limit)),
                    from,
                ],
            )
            .await?;
        leases(&rows, sent_at)
    }

    /// Claims up to `limit` sessions `pending` for at least `min_age`,
    /// longest-waiting first: a queue of sessions that waited for a free
    /// burst slot (`min_age` zero), or ones whose replica died before
    /// claiming them (`min_age` the lease TTL).
    pub async fn claim_oldest_pending(
        &self,
        limit: u32,
        min_age: Duration,
    ) -> Result<Vec<Lease>, StoreError> {
        let sql = format!(
            "UPDATE sessions s SET status = $5::text, lease_owner = $1, \
             lease_epoch = s.lease_epoch + 1, lease_expires_at = {}, updated_at = now() \
             FROM (SELECT id FROM sessions WHERE status = ANY($6) \
                     AND updated_at <= now() - $4::bigint * interval '1 millisecond' \
                   ORDER BY updated_at, id LIMIT $3 FOR UPDATE SKIP LOCKED) oldest \
             WHERE s.id = oldest.id RETURNING s.id, s.lease_epoch, {}",
            expiry(2),
            interrupt_queued("s"),
        );
        let (to, from) = transition(Event::Claim);
        let sent_at = Instant::now();
        let rows = self
            .lease_write(
                "claim_oldest_pending",
                sql,
                vec![
                    Box::new(self.replica.as_str().to_owned()),
                    Box::new(millis(self.lease_ttl)),
                    Box::new(i64::from(limit)),
                    Box::new(millis(min_age)),
                    to,
                    from,
                ],
            )
            .await?;
        leases(&rows, sent_at)
    }

    /// Pushes the lease's expiry out by the TTL if the epoch is still
    /// ours, and reads whether an interrupting message waits: the bound
    /// on how late a holder that missed the interrupt's notification
    /// learns of it is the renew interval.
    pub async fn renew_lease(&self, lease: &Lease) -> Result<Renewal, StoreError> {
        let sql = format!(
            "UPDATE sessions SET lease_expires_at = {} \
             WHERE id = $1 AND lease_epoch = $2 RETURNING status, {}",
            expiry(3),
            interrupt_queued("sessions"),
        );
        let session = lease.session;
        let epoch = lease.epoch;
        let ttl = millis(self.lease_ttl);
        let row = self
            .run("renew_lease", async |c| {
                Ok(c.query_opt(&sql, &[session.as_uuid(), &epoch, &ttl])
                    .await?)
            })
            .await?;
        match row {
            None => Ok(Renewal::Lost),
            Some(row) => Ok(Renewal::Held {
                status: crate::rows::status(&row, 0)?,
                interrupt: get(&row, 1)?,
            }),
        }
    }

    /// Stores `trace_id` as the session's latest burst's trace, fenced by
    /// the lease: for bursts claimed before their trace existed (the
    /// reaper's batch claims, recovery on access). `false` when the lease
    /// is no longer ours.
    pub async fn record_trace_id(
        &self,
        lease: &Lease,
        trace_id: String,
    ) -> Result<bool, StoreError> {
        let rows = self
            .lease_write(
                "record_trace_id",
                "UPDATE sessions SET trace_id = $3 WHERE id = $1 AND lease_epoch = $2 RETURNING id"
                    .to_owned(),
                vec![
                    Box::new(*lease.session.as_uuid()),
                    Box::new(lease.epoch),
                    Box::new(trace_id),
                ],
            )
            .await?;
        Ok(rows.len() == 1)
    }

    /// Hands a running burst over: the session stays `running` but its
    /// lease expires now, so any replica's reaper claims and continues it.
    /// Used at shutdown. `false` when the lease was no longer ours.
    pub async fn release_lease(&self, lease: &Lease) -> Result<bool, StoreError> {
        let rows = self
            .lease_write(
                "release_lease",
                "UPDATE sessions SET lease_owner = NULL, lease_expires_at = now(), \
                 updated_at = now() \
                 WHERE id = $1 AND lease_epoch = $2 AND status = ANY($3) RETURNING id"
                    .to_owned(),
                vec![
                    Box::new(*lease.session.as_uuid()),
                    Box::new(lease.epoch),
                    transition(Event::HandOver).1,
                ],
            )
            .await?;
        Ok(rows.len() == 1)
    }

    /// Runs one lease write detached, with the turn-write timeout: a claim
    /// or hand-over whose caller went away still lands (or fails) whole,
    /// like every write that changes who owns a session.
    async fn lease_write(
        &self,
        op: &'static str,
        sql: String,
        params: Vec<Box<dyn ToSql + Send + Sync>>,
    ) -> Result<Vec<Row>, StoreError> {
        let store = self.clone();
        let limit = self.turn_write_timeout;
        self.detached(async move {
            store
                .run_with_timeout(op, limit, async |c| {
                    let refs: Vec<&(dyn ToSql + Sync)> = params
                        .iter()
                        .map(|p| p.as_ref() as &(dyn ToSql + Sync))
                        .collect();
                    Ok(c.query(&sql, &refs).await?)
                })
                .await
        })
        .await
    }
}
