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
    queued::{Queue, drain_queue, drop_queue, enqueue_tx, load_queue, turns_from_queue},
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
    /// Queued (`if_running = ENQUEUE` while a burst is pending or
    /// running): stored in `queued_messages` at `position` (1 = next), to
    /// become a user turn when the burst closes. `created` is false when an
    /// earlier call with the same key queued it.
    Queued {
        position: u32,
        text: String,
        created: bool,
        /// Sent with `interrupt` ([`Queueing`]) and the burst it stops is
        /// still to end: the lease epoch of that burst (the running one,
        /// or, while the session is pending, the one its claim makes).
        /// The close of that burst drains the message, so no other burst
        /// is stopped by it.
        interrupt: Option<i64>,
    },
    /// Refused, nothing stored: the session already holds `limit` queued
    /// messages.
    QueueFull { limit: usize },
    /// Refused, nothing stored: a burst is waiting to start or running.
    Busy { status: SessionStatus },
    /// Refused, nothing stored: the session ended for good (cancelled).
    Ended {
        status: SessionStatus,
        exit_reason: Option<ExitReason>,
    },
}

/// How a message to a pending or running session is queued instead of
/// refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Queueing {
    /// The queue's bound (`limits.max_queued_messages`).
    pub bound: usize,
    /// `if_running = INTERRUPT`: the burst that will drain the message
    /// stops at its next safe point, so the message runs at once.
    pub interrupt: bool,
}

/// The burst a queued interrupting message stops, by the session's status
/// and lease epoch when it is read: the running burst, or the next claim's
/// while pending; none once the session waits for a human (that burst
/// already ended; the queue drains at a later close).
fn interrupt_target(status: SessionStatus, epoch: i64) -> Option<i64> {
    match status {
        SessionStatus::Running => Some(epoch),
        SessionStatus::Pending => Some(epoch + 1),
        _ => None,
    }
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
        self.send_or_enqueue(tenant, quota, session, message, key, None)
            .await
    }

    /// [`Store::send_message`]; with `enqueue`, a message to a `pending`
    /// or `running` session is queued instead of refused: see
    /// [`SendOutcome::Queued`]; past the bound [`SendOutcome::QueueFull`].
    /// An interrupting one is also announced to every replica (the lease
    /// holder stops the burst) and flagged for the holder's claim and
    /// renewals.
    pub async fn send_or_enqueue(
        &self,
        tenant: &Tenant,
        quota: TenantQuota,
        session: SessionId,
        message: UserMessage,
        key: Option<IdempotencyKey>,
        enqueue: Option<Queueing>,
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
                    let send = Send {
                        session,
                        message,
                        key: key.as_ref(),
                        enqueue,
                    };
                    send_message_tx(c, &store.replica, scope, send).await
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
    ///
    /// A cancel drops the session's queued messages and, when there were
    /// any, stores a notice turn saying how many (their idempotency keys
    /// are freed: a retry is refused as the cancelled session refuses any
    /// message).
    pub async fn transition(
        &self,
        session: SessionId,
        event: CallerEvent,
    ) -> Result<Transition, StoreError> {
        let (event, exit) = match event {
            CallerEvent::Confirm => (Event::Confirm, None),
            CallerEvent::Cancel => (Event::Cancel, Some(ExitReason::Cancelled)),
        };
        Ok(self.transition_fenced(session, None, event, exit).await?.0)
    }

    /// Ends the burst holding `lease` with `reason` (the status its
    /// [`ExitReason::ending`] names). Applies only while the lease's epoch
    /// is the session's, so a worker that lost its lease cannot close the
    /// session its successor runs; `Unchanged` when the epoch moved on or
    /// a cancel won.
    ///
    /// Closing into a status a follow-up may reopen (idle, completed,
    /// failed) also moves the queued messages, in order, into user turns
    /// and sets the session `pending`, in the same transaction; see
    /// [`Store::close_burst_draining`] for the turns it stored.
    pub async fn close_burst(
        &self,
        lease: &Lease,
        reason: ExitReason,
    ) -> Result<Transition, StoreError> {
        Ok(self.close_burst_draining(lease, reason).await?.0)
    }

    /// [`Store::close_burst`], with the user turns the queue became (empty
    /// when nothing was queued or the close did not apply). When there are
    /// any, the session is `pending` and its next burst waits to be
    /// claimed. A burst closing into `awaiting_approval` or
    /// `awaiting_confirmation` keeps the queue: a human must act first,
    /// and the queue drains when a later burst closes. Except an
    /// interrupting message queued before a close into
    /// `awaiting_approval`: that close supersedes the hold (its results
    /// come first in the turns returned) and drains the queue.
    pub async fn close_burst_draining(
        &self,
        lease: &Lease,
        reason: ExitReason,
    ) -> Result<(Transition, Vec<Turn>), StoreError> {
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
    ) -> Result<(Transition, Vec<Turn>), StoreError> {
        let store = self.clone();
        let limit = self.turn_write_timeout;
        let from = event.source_texts();
        let to = event.target();
        let exit_reason = exit_reason.map(ExitReason::as_str);
        let origin = self.replica.clone();
        // Only a close into a status a follow-up may reopen drains the
        // queue; a cancel drops it. Awaiting approval (also a `Send`
        // source) waits for a human instead.
        let drains = matches!(event, Event::Close(_))
            && matches!(
                to,
                SessionStatus::Idle | SessionStatus::Completed | SessionStatus::Failed
            );
        let drops = event == Event::Cancel;
        // A burst that holds calls for approval keeps the queue, unless an
        // interrupting message waits in it: it arrived after the burst
        // checked for one, and the user asked for it to run now, so the
        // hold is superseded (as a message to the held session would) and
        // the queue drained.
        let holds = matches!(event, Event::Close(_)) && to == SessionStatus::AwaitingApproval;
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
                    let tx = c.transaction().await?;
                    let queued = if drains || drops || holds {
                        // The row lock first: an enqueue holds it while it
                        // stores a message, so the queue read next is all
                        // of it.
                        tx.query_opt(
                            "SELECT 1 FROM sessions WHERE id = $1 FOR UPDATE",
                            &[session.as_uuid()],
                        )
                        .await?
                        .ok_or_else(|| not_found_session(session))?;
                        load_queue(&tx, session).await?
                    } else {
                        Vec::new()
                    };
                    // Watchers elsewhere stay registered when the close
                    // opens the next burst at once.
                    let interrupting = holds && queued.iter().any(|q| q.interrupt);
                    let drains = drains || interrupting;
                    let keep_watchers = to.is_active() || (drains && !queued.is_empty());
                    let changed = tx
                        .query_opt(
                            &update,
                            &[
                                session.as_uuid(),
                                &from,
                                &to.as_str(),
                                &exit_reason,
                                &epoch,
                                &origin.as_str(),
                                &(to == SessionStatus::Running),
                                &keep_watchers,
                            ],
                        )
                        .await?;
                    let Some(row) = changed else {
                        let row = tx
                            .query_opt(&select, &[session.as_uuid()])
                            .await?
                            .ok_or_else(|| not_found_session(session))?;
                        tx.rollback().await?;
                        return Ok((Transition::Unchanged(session_from_row(&row)?), Vec::new()));
                    };
                    if queued.is_empty() || (holds && !interrupting) {
                        tx.commit().await?;
                        return Ok((Transition::Changed(session_from_row(&row)?), Vec::new()));
                    }
                    let turns = if drains {
                        let mut turns = if interrupting {
                            crate::approvals::supersede(&tx, &origin, session).await?
                        } else {
                            Vec::new()
                        };
                        turns.extend(drain_queue(&tx, &origin, session, queued).await?);
                        turns
                    } else {
                        drop_queue(&tx, &origin, session, queued.len()).await?;
                        Vec::new()
                    };
                    let row = tx
                        .query_opt(&select, &[session.as_uuid()])
                        .await?
                        .ok_or_else(|| not_found_session(session))?;
                    tx.commit().await?;
                    Ok((Transition::Changed(session_from_row(&row)?), turns))
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

/// One SendMessage, parsed.
struct Send<'a> {
    session: SessionId,
    message: UserMessage,
    key: Option<&'a IdempotencyKey>,
    /// How a busy session queues the message, if it does.
    enqueue: Option<Queueing>,
}

async fn send_message_tx(
    client: &mut deadpool_postgres::Client,
    origin: &ReplicaId,
    caller: Scope<'_>,
    send: Send<'_>,
) -> Result<SendOutcome, StoreError> {
    let Send {
        session,
        message,
        key,
        enqueue,
    } = send;
    let scope = format!("send_message:{session}");
    let request = RequestFingerprint::send_message(&message);
    let tx = client.transaction().await?;
    // The tenant first: a key must not replay another tenant's turn.
    check_tenant_session(&tx, caller.tenant, session).await?;
    if let Some(key) = key
        && let Some(outcome) = outcome_for_key(&tx, &scope, session, key, &request).await?
    {
        tx.commit().await?;
        return Ok(outcome);
    }
    let mut opened = open_burst(&tx, origin, session).await?;
    if !opened && let Some(queueing) = enqueue {
        // Under the row lock, so a burst cannot close (and drain the
        // queue) between this read and the insert.
        let row = tx
            .query_opt(
                "SELECT status, lease_epoch FROM sessions WHERE id = $1 FOR UPDATE",
                &[session.as_uuid()],
            )
            .await?
            .ok_or_else(|| not_found_session(session))?;
        let status = crate::rows::status(&row, 0)?;
        match status {
            SessionStatus::Pending | SessionStatus::Running => {
                let queued = Queue {
                    scope: &scope,
                    request: &request,
                    bound: queueing.bound,
                    interrupt: queueing
                        .interrupt
                        .then(|| get::<i64>(&row, 1).map(|e| interrupt_target(status, e)))
                        .transpose()?
                        .flatten(),
                };
                return enqueue_tx(tx, origin, session, message, key, queued).await;
            }
            // The burst closed while our UPDATE waited: send as usual.
            _ => opened = open_burst(&tx, origin, session).await?,
        }
    }
    if !opened {
        return refused(tx, &scope, key, &request, session).await;
    }
    // The status change above is this transaction's own: the count skips
    // this session. A refusal drops the transaction, undoing the change.
    crate::tenants::admit(&tx, caller.tenant, caller.quota, Some(session)).await?;
    // Calls still waiting for approval are answered first: their results
    // must precede the message for the transcript to stay valid.
    crate::approvals::supersede(&tx, origin, session).await?;
    // Messages still queued (kept by a burst that ended awaiting approval)
    // were acknowledged first: they go first. Our status UPDATE holds the
    // row lock, so no enqueue adds to the queue meanwhile.
    let queued = load_queue(&tx, session).await?;
    if !queued.is_empty() {
        turns_from_queue(&tx, origin, session, queued).await?;
    }
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
        return replay_claimed(client, &scope, session, key, &request).await;
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
pub(crate) async fn open_burst(
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
        && let Some(outcome) = outcome_for_key(&tx, scope, session, key, request).await?
    {
        tx.commit().await?;
        return Ok(outcome);
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
    session: SessionId,
    key: &IdempotencyKey,
    request: &RequestFingerprint,
) -> Result<SendOutcome, StoreError> {
    let tx = client.transaction().await?;
    let outcome = outcome_for_key(&tx, scope, session, key, request)
        .await?
        .ok_or_else(|| StoreError::Internal("idempotency key vanished".into()))?;
    tx.commit().await?;
    Ok(outcome)
}

/// A message already stored by an earlier call with the same key.
fn replayed(turn: Turn) -> SendOutcome {
    SendOutcome::Sent {
        turn: Box::new(turn),
        created: false,
    }
}

/// What the first call with `key` got, if the key is in use: the turn it
/// stored, or, while its message is still queued (`seq` NULL), its place
/// in the queue. An error when it was used for another message
/// (`crate::idempotency`).
pub(crate) async fn outcome_for_key(
    tx: &deadpool_postgres::Transaction<'_>,
    scope: &str,
    session: SessionId,
    key: &IdempotencyKey,
    request: &RequestFingerprint,
) -> Result<Option<SendOutcome>, StoreError> {
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
    let claimed_by: uuid::Uuid = get(&claim, 0)?;
    let Some(seq) = get::<Option<i64>>(&claim, 1)? else {
        let row = tx
            .query_opt(
                "SELECT q.position, q.text, q.interrupt, s.status, s.lease_epoch \
                 FROM queued_messages q JOIN sessions s ON s.id = q.session_id \
                 WHERE q.session_id = $1 AND q.idempotency_key = $2",
                &[session.as_uuid(), &key.as_str()],
            )
            .await?
            .ok_or_else(|| {
                StoreError::Corrupt(format!(
                    "idempotency key {:?} names a queued message of session {session} that is missing",
                    key.as_str()
                ))
            })?;
        let position: i32 = get(&row, 0)?;
        let text: Vec<u8> = get(&row, 1)?;
        // A retry of an interrupt asks again for the burst that will
        // drain it: stopping it twice is stopping it once.
        let interrupt = if get::<bool>(&row, 2)? {
            interrupt_target(crate::rows::status(&row, 3)?, get(&row, 4)?)
        } else {
            None
        };
        return Ok(Some(SendOutcome::Queued {
            position: u32::try_from(position).unwrap_or(0),
            text: String::from_utf8(text)
                .map_err(|e| StoreError::Corrupt(format!("queued message: {e}")))?,
            created: false,
            interrupt,
        }));
    };
    let session = claimed_by;
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
    turn_from_row(&row).map(|turn| Some(replayed(turn)))
}
