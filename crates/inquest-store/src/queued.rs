//! The queue of `queued_messages` (V27, V29): messages waiting behind a
//! running burst. Read for the API (what GetSession and ListSessions
//! show); written by SendMessage (`enqueue_tx`, from `bursts.rs`
//! `send_message_tx`, under the session row's lock); drained into user
//! turns when the burst closes, or dropped by a cancel (`drain_queue`,
//! `drop_queue`, inside the closing transaction in `bursts.rs`).

use inquest_core::{IdempotencyKey, NewTurn, RequestFingerprint, SessionId, Turn, UserMessage};
use time::OffsetDateTime;

use crate::{
    ReplicaId, Store, StoreError,
    bursts::{SendOutcome, open_burst, outcome_for_key},
    notify::CHANNEL,
    rows::get,
    turns::insert_turn,
};

/// One queued message, as stored.
#[derive(Debug, Clone)]
pub struct QueuedMessage {
    pub session: SessionId,
    pub text: String,
    pub position: u32,
    pub interrupt: bool,
    pub queued_at: OffsetDateTime,
}

impl Store {
    /// The queued messages of `sessions`, oldest first per session, in one
    /// read of `queued_messages_session`.
    pub async fn queued_messages(
        &self,
        sessions: &[SessionId],
    ) -> Result<Vec<QueuedMessage>, StoreError> {
        if sessions.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<uuid::Uuid> = sessions.iter().map(|s| *s.as_uuid()).collect();
        let rows = self
            .run("queued_messages", async |c| {
                Ok(c.query(
                    "SELECT session_id, text, position, interrupt, created_at \
                     FROM queued_messages WHERE session_id = ANY($1) ORDER BY session_id, id",
                    &[&ids],
                )
                .await?)
            })
            .await?;
        rows.iter()
            .map(|row| {
                let session = SessionId::from_uuid(get(row, 0)?);
                let bytes: Vec<u8> = get(row, 1)?;
                let text = String::from_utf8(bytes).map_err(|e| {
                    StoreError::Corrupt(format!("queued message of session {session}: {e}"))
                })?;
                let position: i32 = get(row, 2)?;
                Ok(QueuedMessage {
                    session,
                    text,
                    position: u32::try_from(position).unwrap_or(0),
                    interrupt: get(row, 3)?,
                    queued_at: get(row, 4)?,
                })
            })
            .collect()
    }
}

impl Store {
    /// The text of a queued message, by its row; `None` once the queue
    /// drained (or a cancel dropped it).
    pub async fn queued_message_text(
        &self,
        session: SessionId,
        id: i64,
    ) -> Result<Option<String>, StoreError> {
        self.run("queued_message_text", async |c| {
            let row = c
                .query_opt(
                    "SELECT text FROM queued_messages WHERE id = $1 AND session_id = $2",
                    &[&id, session.as_uuid()],
                )
                .await?;
            row.map(|row| {
                let bytes: Vec<u8> = get(&row, 0)?;
                String::from_utf8(bytes)
                    .map_err(|e| StoreError::Corrupt(format!("queued message {id}: {e}")))
            })
            .transpose()
        })
        .await
    }
}

/// One queued message: its row id, text and idempotency key, and whether
/// it interrupts.
pub(crate) struct QueuedRow {
    pub(crate) id: i64,
    pub(crate) text: String,
    pub(crate) key: Option<String>,
    pub(crate) interrupt: bool,
}

/// The session's queued messages, oldest first.
pub(crate) async fn load_queue(
    tx: &deadpool_postgres::Transaction<'_>,
    session: SessionId,
) -> Result<Vec<QueuedRow>, StoreError> {
    let rows = tx
        .query(
            "SELECT id, text, idempotency_key, interrupt FROM queued_messages \
             WHERE session_id = $1 ORDER BY id",
            &[session.as_uuid()],
        )
        .await?;
    rows.iter()
        .map(|row| {
            let bytes: Vec<u8> = get(row, 1)?;
            let text = String::from_utf8(bytes).map_err(|e| {
                StoreError::Corrupt(format!("queued message of session {session}: {e}"))
            })?;
            Ok(QueuedRow {
                id: get(row, 0)?,
                text,
                key: get(row, 2)?,
                interrupt: get(row, 3)?,
            })
        })
        .collect()
}

/// Moves the queue into user turns, in order, binds each key to its turn,
/// and opens the next burst (`pending`), inside the closing transaction.
pub(crate) async fn drain_queue(
    tx: &deadpool_postgres::Transaction<'_>,
    origin: &ReplicaId,
    session: SessionId,
    queued: Vec<QueuedRow>,
) -> Result<Vec<Turn>, StoreError> {
    let turns = turns_from_queue(tx, origin, session, queued).await?;
    if !open_burst(tx, origin, session).await? {
        return Err(StoreError::Internal(format!(
            "session {session} closed its burst but cannot open the queued one"
        )));
    }
    Ok(turns)
}

/// Moves `queued` into user turns, in order, and binds each key to its
/// turn.
pub(crate) async fn turns_from_queue(
    tx: &deadpool_postgres::Transaction<'_>,
    origin: &ReplicaId,
    session: SessionId,
    queued: Vec<QueuedRow>,
) -> Result<Vec<Turn>, StoreError> {
    let scope = format!("send_message:{session}");
    let mut turns = Vec::with_capacity(queued.len());
    for q in queued {
        let message = UserMessage::from_stored(q.text);
        let turn = insert_turn(tx, origin, session, None, None, &NewTurn::User(message)).await?;
        if let Some(key) = &q.key {
            tx.execute(
                "UPDATE idempotency_keys SET seq = $3 WHERE scope = $1 AND key = $2",
                &[&scope, key, &turn.seq.as_i64()],
            )
            .await?;
        }
        tx.execute("DELETE FROM queued_messages WHERE id = $1", &[&q.id])
            .await?;
        turns.push(turn);
    }
    Ok(turns)
}

/// Drops the queue of a cancelled session, frees its keys, and stores a
/// notice saying how many messages it dropped.
pub(crate) async fn drop_queue(
    tx: &deadpool_postgres::Transaction<'_>,
    origin: &ReplicaId,
    session: SessionId,
    count: usize,
) -> Result<(), StoreError> {
    tx.execute(
        "DELETE FROM queued_messages WHERE session_id = $1",
        &[session.as_uuid()],
    )
    .await?;
    tx.execute(
        "DELETE FROM idempotency_keys WHERE scope = $1 AND seq IS NULL",
        &[&format!("send_message:{session}")],
    )
    .await?;
    let plural = if count == 1 { "" } else { "s" };
    let notice = NewTurn::notice(format!(
        "Session cancelled: {count} queued message{plural} dropped without being run."
    ));
    insert_turn(tx, origin, session, None, None, &notice).await?;
    Ok(())
}

/// Where a queued message's key and bound apply.
pub(crate) struct Queue<'a> {
    pub(crate) scope: &'a str,
    pub(crate) request: &'a RequestFingerprint,
    pub(crate) bound: usize,
    /// An interrupting message: the epoch of the burst it stops.
    pub(crate) interrupt: Option<i64>,
}

/// Queues `message` behind the pending or running burst of `session`,
/// whose row `tx` holds locked.
pub(crate) async fn enqueue_tx(
    tx: deadpool_postgres::Transaction<'_>,
    origin: &ReplicaId,
    session: SessionId,
    message: UserMessage,
    key: Option<&IdempotencyKey>,
    queue: Queue<'_>,
) -> Result<SendOutcome, StoreError> {
    // Another call with the key may have committed while we waited for
    // the lock.
    if let Some(key) = key
        && let Some(outcome) =
            outcome_for_key(&tx, queue.scope, session, key, queue.request).await?
    {
        tx.commit().await?;
        return Ok(outcome);
    }
    let held: i64 = get(
        &tx.query_one(
            "SELECT count(*) FROM queued_messages WHERE session_id = $1",
            &[session.as_uuid()],
        )
        .await?,
        0,
    )?;
    let held = usize::try_from(held).unwrap_or(usize::MAX);
    if held >= queue.bound {
        tx.rollback().await?;
        return Ok(SendOutcome::QueueFull { limit: queue.bound });
    }
    let position = u32::try_from(held + 1).unwrap_or(u32::MAX);
    let text = message.into_string();
    let row = tx
        .query_one(
            "INSERT INTO queued_messages \
             (session_id, text, position, idempotency_key, request_hash, interrupt) \
             VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
            &[
                session.as_uuid(),
                &text.as_bytes(),
                &i32::try_from(position).unwrap_or(i32::MAX),
                &key.map(IdempotencyKey::as_str),
                &queue.request.as_bytes().as_slice(),
                &queue.interrupt.is_some(),
            ],
        )
        .await?;
    let id: i64 = get(&row, 0)?;
    if let Some(epoch) = queue.interrupt {
        // To every replica, watched or not: the lease holder may be any of
        // them, and it hears this at the commit. One that misses it reads
        // the row's flag at its next renewal.
        let payload = crate::notify::interrupt_payload(origin.as_str(), session, epoch);
        tx.execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &payload])
            .await?;
    }
    // Watchers on other replicas hear of it at the commit, as of a turn;
    // only when another replica registered one.
    let payload =
        crate::notify::message_queued_payload(origin.as_str(), session, id, position, &text);
    tx.execute(
        "SELECT pg_notify($1, $2) FROM sessions WHERE id = $3 \
         AND cardinality(array_remove(watch_replicas, $4::text)) > 0",
        &[&CHANNEL, &payload, session.as_uuid(), &origin.as_str()],
    )
    .await?;
    if let Some(key) = key {
        // `seq` stays NULL until the message becomes a turn. The row lock
        // serialises every call that could claim this key, so it is free.
        tx.execute(
            "INSERT INTO idempotency_keys (scope, key, session_id, seq, request_hash) \
             VALUES ($1, $2, $3, NULL, $4)",
            &[
                &queue.scope,
                &key.as_str(),
                session.as_uuid(),
                &queue.request.as_bytes().as_slice(),
            ],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(SendOutcome::Queued {
        position,
        text,
        created: true,
        interrupt: queue.interrupt,
    })
}
