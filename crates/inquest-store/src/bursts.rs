//! Status transitions that open and close bursts.
//!
//! Every transition is one conditional `UPDATE ... WHERE status = ANY(...)`,
//! so the database decides who wins a race: two concurrent follow-ups
//! cannot both open a burst, and a cancel cannot be undone by a burst that
//! finishes a moment later. The `ANY(...)` set and the new status come from
//! the session state machine ([`inquest_core::Event`]), never from literals.

use inquest_core::{
    Event, ExitReason, IdempotencyKey, NewTurn, RequestFingerprint, SessionId, SessionStatus,
    Tenant, TenantQuota, Turn, UserMessage,
};

use crate::{
    Lease, ReplicaId, Store, StoreError, idempotency,
    notify::{CHANNEL, status_payload_sql},
    rows::{TURN_COLUMNS, get, turn_from_row},
    sessions::{SESSION_COLUMNS, SessionRow, not_found_session, session_from_row},
    turns::insert_turn,
};

/// What [`Store::send_message`] did.
#[derive(Debug, Clone)]
pub enum SendOutcome {
    /// The user turn is stored and the session is `pending`. `created` is
    /// false when an earlier call with the same key stored it.
    Sent { turn: Box<Turn>, created: bool },
    /// Refused, nothing stored: a burst is waiting to start or running.
    Busy { status: SessionStatus },
    /// Refused, nothing stored: the session ended for good (cancelled).
    Ended {
        status: SessionStatus,
        exit_reason: Option<ExitReason>,
    },
}

/// The events an API call applies without holding a lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallerEvent {
    /// `ContinueSession`.
    Confirm,
    /// `CancelSession` (exit reason `cancelled`).
    Cancel,
}

/// What a conditional transition found.
#[derive(Debug, Clone)]
pub enum Transition {
    /// The session was in one of the expected statuses and now has the new one.
    Changed(SessionRow),
    /// The session was in another status; nothing changed.
    Unchanged(SessionRow),
}

impl Store {
    /// Stores a follow-up user turn and marks the session `pending`, in one
    /// transaction, only if the session is `idle` or `completed`. With an
    /// idempotency key (scoped to this session), a retry of the same
    /// message returns the seq the first call stored and stores nothing;
    /// the key with another message is [`StoreError::IdempotencyConflict`],
    /// and nothing is stored.
    ///
    /// Only `tenant`'s session: another tenant's is NotFound, as an unknown
    /// one. A message that would open a burst over `quota` is
    /// [`StoreError::QuotaExceeded`], and nothing is stored.
    ///
    /// Runs detached with the turn-write timeout, like every turn write.
    pub async fn send_message(
        &self,
        tenant: &Tenant,
        quota: TenantQuota,
        session: SessionId,
        message: UserMessage,
        key: Option<IdempotencyKey>,
    ) -> Result<SendOutcome, StoreError> {
        let store = self.clone();
        let limit = self.turn_write_timeout;
        let tenant = tenant.clone();
        self.detached(async move {
            store
                .run_with_timeout("send_message", limit, async |c| {
                    let scope = Scope {
                        tenant: &tenant,
                        quota: &quota,
                    };
                    send_message_tx(c, &store.replica, scope, session, message, key.as_ref()).await
                })
                .await
        })
        .await
    }

    /// Applies a caller's `event` if the session's status allows it (only
    /// a burst closes, through [`Store::close_burst`]). Detached
    /// with the turn-write timeout: a cancel or confirmation must land even
    /// when its caller is gone.
    ///
    /// Leaving `running` clears the lease (owner and expiry; the epoch
    /// stays, so a cancelled burst still records what it already did), and
    /// every change is announced to other replicas in the same statement.
    pub async fn transition(
        &self,
        session: SessionId,
        event: CallerEvent,
    ) -> Result<Transition, StoreError> {
        let (event, exit) = match event {
            CallerEvent::Confirm => (Event::Confirm, None),
            CallerEvent::Cancel => (Event::Cancel, Some(ExitReason::Cancelled)),
        };
        self.transition_fenced(session, None, event, exit).await
    }

    /// Ends the burst holding `lease` with `reason` (the status its
    /// [`ExitReason::ending`] names). Applies only while the lease's epoch
    /// is the session's, so a worker that lost its lease cannot close the
    /// session its successor runs; `Unchanged` when the epoch moved on or
    /// a cancel won.
    pub async fn close_burst(
        &self,
        lease: &Lease,
        reason: ExitReason,
    ) -> Result<Transition, StoreError> {
        self.transition_fenced(
            lease.session(),
            Some(lease.epoch()),
            Event::Close(reason),
            Some(reason),
        )
        .await
    }

    async fn transition_fenced(
        &self,
        session: SessionId,
        epoch: Option<i64>,
        event: Event,
        exit_reason: Option<ExitReason>,
    ) -> Result<Transition, StoreError> {
        let store = self.clone();
        let limit = self.turn_write_timeout;
        let from = event.source_texts();
        let to = event.target();
        let exit_reason = exit_reason.map(ExitReason::as_str);
        let origin = self.replica.as_str().to_owned();
        self.detached(async move {
            let update = format!(
                "UPDATE sessions SET status = $3::text, exit_reason = COALESCE($4, exit_reason), \
                 lease_owner = CASE WHEN $7 THEN lease_owner END, \
                 lease_expires_at = CASE WHEN $7 THEN lease_expires_at END, \
                 watch_replicas = CASE WHEN $8 THEN watch_replicas ELSE '{{}}' END, \
                 updated_at = now() \
                 WHERE id = $1 AND status = ANY($2) AND ($5::bigint IS NULL OR lease_epoch = $5) \
                 RETURNING {SESSION_COLUMNS}, pg_notify('{CHANNEL}', {})",
                status_payload_sql("$6::text", "id", "status")
            );
            let select = format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE id = $1");
            store
                .run_with_timeout("transition", limit, async |c| {
                    let changed = c
                        .query_opt(
                            &update,
                            &[
                                session.as_uuid(),
                                &from,
                                &to.as_str(),
                                &exit_reason,
                                &epoch,
                                &origin,
                                &(to == SessionStatus::Running),
                                &to.is_active(),
                            ],
                        )
                        .await?;
                    if let Some(row) = changed {
                        return Ok(Transition::Changed(session_from_row(&row)?));
                    }
                    let row = c
                        .query_opt(&select, &[session.as_uuid()])
                        .await?
                        .ok_or_else(|| not_found_session(session))?;
                    Ok(Transition::Unchanged(session_from_row(&row)?))
                })
                .await
        })
        .await
    }
}

/// The caller's tenant and its limits.
struct Scope<'a> {
    tenant: &'a Tenant,
    quota: &'a TenantQuota,
}

async fn send_message_tx(
    client: &mut deadpool_postgres::Client,
    origin: &ReplicaId,
    caller: Scope<'_>,
    session: SessionId,
    message: UserMessage,
    key: Option<&IdempotencyKey>,
) -> Result<SendOutcome, StoreError> {
    let scope = format!("send_message:{session}");
    let request = RequestFingerprint::send_message(&message);
    let tx = client.transaction().await?;
    // The tenant first: a key must not replay another tenant's turn.
    check_tenant_session(&tx, caller.tenant, session).await?;
    if let Some(key) = key
        && let Some(turn) = turn_for_key(&tx, &scope, key, &request).await?
    {
        tx.commit().await?;
        return Ok(replayed(turn));
    }
    if !open_burst(&tx, origin, session).await? {
        return refused(tx, &scope, key, &request, session).await;
    }
    // The status change above is this transaction's own: the count skips
    // this session. A refusal drops the transaction, undoing the change.
    crate::tenants::admit(&tx, caller.tenant, caller.quota, Some(session)).await?;
    // Calls still waiting for approval are answered first: their results
    // must precede the message for the transcript to stay valid.
    crate::approvals::supersede(&tx, origin, session).await?;
    let turn = insert_turn(&tx, origin, session, None, None, &NewTurn::User(message)).await?;
    if let Some(key) = key
        && !crate::idempotency::claim(&tx, &scope, key, session, turn.seq, &request).await?
    {
        // Rare: our key lookup ran before a call with the same key
        // committed, and that call's whole burst ended before our
        // status UPDATE ran, so the UPDATE matched again. A key never
        // maps to two turns: undo ours (turn, status, notification) and
        // answer as a retry that found the key would.
        tx.rollback().await?;
        return replay_claimed(client, &scope, key, &request).await;
    }
    tx.commit().await?;
    Ok(SendOutcome::Sent {
        turn: Box::new(turn),
        created: true,
    })
}

/// NotFound unless `session` is `tenant`'s.
async fn check_tenant_session(
    tx: &deadpool_postgres::Transaction<'_>,
    tenant: &Tenant,
    session: SessionId,
) -> Result<(), StoreError> {
    if tx
        .query_opt(
            "SELECT 1 FROM sessions WHERE id = $1 AND tenant = $2",
            &[session.as_uuid(), &tenant.as_str()],
        )
        .await?
        .is_none()
    {
        return Err(not_found_session(session));
    }
    Ok(())
}

/// Marks the session `pending` and announces it, if its status lets a
/// message open a burst; false when it does not.
async fn open_burst(
    tx: &deadpool_postgres::Transaction<'_>,
    origin: &ReplicaId,
    session: SessionId,
) -> Result<bool, StoreError> {
    let opened = tx
        .query_opt(
            &format!(
                "UPDATE sessions SET status = $3::text, updated_at = now() \
                 WHERE id = $1 AND status = ANY($4) \
                 RETURNING id, pg_notify('{CHANNEL}', {})",
                status_payload_sql("$2::text", "id", "status")
            ),
            &[
                session.as_uuid(),
                &origin.as_str(),
                &Event::Send.target().as_str(),
                &Event::Send.source_texts(),
            ],
        )
        .await?;
    Ok(opened.is_some())
}

/// What a message that could not open a burst gets: the turn its key
/// already names, or the status that refused it (nothing stored).
async fn refused(
    tx: deadpool_postgres::Transaction<'_>,
    scope: &str,
    key: Option<&IdempotencyKey>,
    request: &RequestFingerprint,
    session: SessionId,
) -> Result<SendOutcome, StoreError> {
    // Under READ COMMITTED this statement sees what a concurrent call
    // committed while our UPDATE waited on the row lock: a retry with
    // the same key that lost the race finds the winner's turn here
    // (or, for another message, is refused).
    if let Some(key) = key
        && let Some(turn) = turn_for_key(&tx, scope, key, request).await?
    {
        tx.commit().await?;
        return Ok(replayed(turn));
    }
    let row = tx
        .query_opt(
            "SELECT status, exit_reason FROM sessions WHERE id = $1",
            &[session.as_uuid()],
        )
        .await?
        .ok_or_else(|| not_found_session(session))?;
    let status = crate::rows::status(&row, 0)?;
    let exit_reason = crate::rows::exit_reason(&row, 1)?;
    tx.rollback().await?;
    Ok(match status {
        SessionStatus::Cancelled => SendOutcome::Ended {
            status,
            exit_reason,
        },
        // A reopenable status cannot reach here (the UPDATE would have
        // matched); report it as busy rather than guess.
        _ => SendOutcome::Busy { status },
    })
}

/// The turn another call claimed `key` for, read in a new transaction
/// (ours was rolled back), answered as a retry that found the key.
async fn replay_claimed(
    client: &mut deadpool_postgres::Client,
    scope: &str,
    key: &IdempotencyKey,
    request: &RequestFingerprint,
) -> Result<SendOutcome, StoreError> {
    let tx = client.transaction().await?;
    let turn = turn_for_key(&tx, scope, key, request)
        .await?
        .ok_or_else(|| StoreError::Internal("idempotency key vanished".into()))?;
    tx.commit().await?;
    Ok(replayed(turn))
}

/// A message already stored by an earlier call with the same key.
fn replayed(turn: Turn) -> SendOutcome {
    SendOutcome::Sent {
        turn: Box::new(turn),
        created: false,
    }
}

/// The turn a key names, if the key is in use; an error when it was used
/// for another message (`crate::idempotency`).
async fn turn_for_key(
    tx: &deadpool_postgres::Transaction<'_>,
    scope: &str,
    key: &IdempotencyKey,
    request: &RequestFingerprint,
) -> Result<Option<Turn>, StoreError> {
    let Some(claim) = tx
        .query_opt(
            "SELECT session_id, seq, request_hash FROM idempotency_keys \
             WHERE scope = $1 AND key = $2",
            &[&scope, &key.as_str()],
        )
        .await?
    else {
        return Ok(None);
    };
    let stored: Option<&[u8]> = get(&claim, 2)?;
    idempotency::bound_to(stored, request, key)?;
    let session: uuid::Uuid = get(&claim, 0)?;
    let seq: Option<i64> = get(&claim, 1)?;
    let sql = format!("SELECT {TURN_COLUMNS} FROM turns WHERE session_id = $1 AND seq = $2");
    let row = tx
        .query_opt(&sql, &[&session, &seq])
        .await?
        .ok_or_else(|| {
            StoreError::Corrupt(format!(
                "idempotency key {:?} names turn {seq:?} of session {session}, which is missing",
                key.as_str()
            ))
        })?;
    turn_from_row(&row).map(Some)
}
