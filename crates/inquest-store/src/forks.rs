//! ForkSession: a new session of the same incident whose turns
//! `1..=at_seq` are copies of another session's (migration V32 records the
//! lineage).
//!
//! The copy is one `INSERT ... SELECT` (turns keep their seq, role, text,
//! calls, usage and time; only the session id changes), and the same
//! statement sets the fork's head and counters from what it copied, so a
//! 100k-turn fork is one statement, not 100k appends (`inquest-bench
//! fork`). A shared prefix the readers follow would make the fork itself
//! O(1), but every turn read (watch drain, ListTurns, resume from the
//! latest compaction, the NOTIFY payload) would then be a union over two
//! sessions with a seq bound; one statement keeps every reader as it is.
//!
//! After the copy come the turns of `inquest_core::fork_turns` (a notice,
//! then an error result per call the cut left without one) and the
//! optional first message, appended as any turn is. The source is only
//! read: its row is not locked, so a running source keeps appending, and
//! its turns up to its committed head never change.

use inquest_core::{
    IdempotencyKey, NewTurn, RequestFingerprint, Seq, SessionId, SessionStatus, Tenant,
    TenantQuota, Turn, UserMessage,
};

use crate::{
    ReplicaId, Store, StoreError, idempotency,
    rows::{TURN_COLUMNS, get, turn_from_row},
    sessions::{SESSION_COLUMNS, SessionRow, not_found_session, session_from_row},
};

/// A fork to make.
#[derive(Debug, Clone)]
pub struct ForkRequest {
    pub source: SessionId,
    /// The last turn of the source the fork copies.
    pub at_seq: Seq,
    /// The fork's first message; `None` leaves the fork idle.
    pub message: Option<UserMessage>,
    pub key: Option<IdempotencyKey>,
}

/// What `fork_session` did.
#[derive(Debug, Clone)]
pub enum ForkOutcome {
    Forked(Box<Forked>),
    /// `at_seq` is past the source's newest committed turn: nothing stored.
    BeyondHead {
        head: u64,
    },
}

/// A fork, made now or by an earlier call with the same key.
#[derive(Debug, Clone)]
pub struct Forked {
    pub session: SessionRow,
    /// The turns stored after the copied ones (the notice, the cut calls'
    /// results, the first message), in seq order; empty for a replay.
    pub new_turns: Vec<Turn>,
    /// False when an earlier call with the same idempotency key made it.
    pub created: bool,
}

impl Store {
    /// Forks `tenant`'s session `req.source` at `req.at_seq`, in one
    /// transaction: the fork's row (`pending` with a message, else `idle`),
    /// the copy, the notice and cut results, the message, the key. Another
    /// tenant's source is NotFound, as an unknown one. With a message the
    /// fork opens a burst: over `quota` is [`StoreError::QuotaExceeded`]
    /// (a replay is not). The same key with the same request returns the
    /// first fork; with another request [`StoreError::IdempotencyConflict`].
    ///
    /// Runs detached with the turn-write timeout, like every turn write.
    pub async fn fork_session(
        &self,
        tenant: &Tenant,
        quota: TenantQuota,
        req: ForkRequest,
    ) -> Result<ForkOutcome, StoreError> {
        let store = self.clone();
        let limit = self.turn_write_timeout;
        let tenant = tenant.clone();
        self.detached(async move {
            store
                .run_with_timeout("fork_session", limit, async |c| {
                    fork_session_tx(c, &store.replica, &tenant, &quota, &req).await
                })
                .await
        })
        .await
    }
}

async fn fork_session_tx(
    client: &mut deadpool_postgres::Client,
    origin: &ReplicaId,
    tenant: &Tenant,
    quota: &TenantQuota,
    req: &ForkRequest,
) -> Result<ForkOutcome, StoreError> {
    let scope = format!("fork_session:{}", req.source);
    let request = RequestFingerprint::fork_session(req.at_seq.get(), req.message.as_ref());
    let tx = client.transaction().await?;
    // The tenant first: a key must not replay into another tenant's fork.
    // FOR KEY SHARE: appends to the source (which never change its key)
    // go on, but an erasure of it waits until this copy committed, and a
    // copy after an erasure finds no source.
    let source = tx
        .query_opt(
            "SELECT incident_id, head_seq::bigint FROM sessions WHERE id = $1 AND tenant = $2 \
             FOR KEY SHARE",
            &[req.source.as_uuid(), &tenant.as_str()],
        )
        .await?
        .ok_or_else(|| not_found_session(req.source))?;
    if let Some(key) = &req.key
        && let Some(found) = existing_fork(&tx, &scope, key, &request).await?
    {
        tx.commit().await?;
        return Ok(ForkOutcome::Forked(Box::new(found)));
    }
    let incident: uuid::Uuid = get(&source, 0)?;
    let head: i64 = get(&source, 1)?;
    if head < req.at_seq.as_i64() {
        return Ok(ForkOutcome::BeyondHead {
            head: u64::try_from(head).unwrap_or(0),
        });
    }
    let status = match req.message {
        Some(_) => {
            crate::tenants::admit(&tx, tenant, quota, None).await?;
            SessionStatus::INITIAL
        }
        None => SessionStatus::Idle,
    };
    let id = SessionId::new();
    tx.execute(
        "INSERT INTO sessions (id, incident_id, status, head_seq, turn_count, tenant, \
             forked_from, forked_at_seq, skills) \
         VALUES ($1, $2, $3::text, 0, 0, $4, $5, $6, \
             (SELECT skills FROM sessions WHERE id = $5))",
        &[
            id.as_uuid(),
            &incident,
            &status.as_str(),
            &tenant.as_str(),
            req.source.as_uuid(),
            &req.at_seq.as_i64(),
        ],
    )
    .await?;
    tx.execute(
        COPY_SQL,
        &[id.as_uuid(), req.source.as_uuid(), &req.at_seq.as_i64()],
    )
    .await?;
    // Only the calls of the copy's last user or assistant turn can be cut
    // from their results: read from that turn on (a handful of rows, found
    // by walking the primary key back from the cut), never the whole copy.
    let tail_sql = format!(
        "SELECT {TURN_COLUMNS} FROM turns WHERE session_id = $1 AND seq <= $2 \
         AND seq >= coalesce((SELECT max(seq) FROM turns WHERE session_id = $1 \
             AND seq <= $2 AND role IN ('user', 'assistant')), 1) \
         ORDER BY seq"
    );
    let tail = tx
        .query(&tail_sql, &[id.as_uuid(), &req.at_seq.as_i64()])
        .await?
        .iter()
        .map(turn_from_row)
        .collect::<Result<Vec<_>, _>>()?;
    let cut = inquest_core::fork_cut_calls(&tail);
    let mut stored = inquest_core::fork_turns(req.source, req.at_seq.get(), &cut);
    if let Some(message) = &req.message {
        stored.push(NewTurn::User(message.clone()));
    }
    let mut new_turns = Vec::with_capacity(stored.len());
    for turn in &stored {
        new_turns.push(crate::turns::insert_turn(&tx, origin, id, None, None, turn).await?);
    }
    let last = new_turns.last().map_or(req.at_seq, |t| t.seq);
    if let Some(key) = &req.key
        && !idempotency::claim(&tx, &scope, key, id, last, &request).await?
    {
        // A concurrent fork with the same key committed first (our claim
        // waited for it): undo ours, then answer as a retry would.
        tx.rollback().await?;
        let tx = client.transaction().await?;
        let found = existing_fork(&tx, &scope, key, &request)
            .await?
            .ok_or_else(|| StoreError::Internal("idempotency key vanished".into()))?;
        tx.commit().await?;
        return Ok(ForkOutcome::Forked(Box::new(found)));
    }
    let sql = format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE id = $1");
    let session = session_from_row(&tx.query_one(&sql, &[id.as_uuid()]).await?)?;
    tx.commit().await?;
    Ok(ForkOutcome::Forked(Box::new(Forked {
        session,
        new_turns,
        created: true,
    })))
}

/// The copy of turns `1..=$3` of session `$2` into the new session `$1`,
/// and the fork's head and counters set from the copied rows, as the
/// appends would have set them (`turns.rs` `APPEND_SQL`). Write ids are not
/// copied: they name the source's writes.
const COPY_SQL: &str = "WITH copied AS ( \
       INSERT INTO turns (session_id, seq, role, content, tool_calls, tool_call_id, tool_name, \
           is_error, input_tokens, output_tokens, escaped, recovery_plan, \
           cache_read_input_tokens, cache_creation_input_tokens, cost_nano_usd, created_at) \
       SELECT $1, seq, role, content, tool_calls, tool_call_id, tool_name, is_error, \
           input_tokens, output_tokens, escaped, recovery_plan, cache_read_input_tokens, \
           cache_creation_input_tokens, cost_nano_usd, created_at \
       FROM turns WHERE session_id = $2 AND seq <= $3 \
       RETURNING seq, role, tool_calls, input_tokens, output_tokens, cache_read_input_tokens, \
           cache_creation_input_tokens, cost_nano_usd) \
     UPDATE sessions SET head_seq = c.head, turn_count = c.n, tool_calls = c.calls, \
       input_tokens = c.input, output_tokens = c.output, cache_read_input_tokens = c.cache_read, \
       cache_creation_input_tokens = c.cache_creation, cost_nano_usd = c.cost, \
       cost_unknown_turns = c.unknown \
     FROM (SELECT coalesce(max(seq), 0) AS head, count(*) AS n, \
             coalesce(sum(CASE WHEN role = 'assistant' AND jsonb_typeof(tool_calls) = 'array' \
                 THEN jsonb_array_length(tool_calls) ELSE 0 END), 0)::bigint AS calls, \
             coalesce(sum(input_tokens), 0)::bigint AS input, \
             coalesce(sum(output_tokens), 0)::bigint AS output, \
             coalesce(sum(cache_read_input_tokens), 0)::bigint AS cache_read, \
             coalesce(sum(cache_creation_input_tokens), 0)::bigint AS cache_creation, \
             coalesce(sum(cost_nano_usd), 0)::bigint AS cost, \
             count(*) FILTER (WHERE role = 'assistant' AND cost_nano_usd IS NULL) AS unknown \
           FROM copied) c \
     WHERE sessions.id = $1";

/// The fork a key names, if the key is in use; an error when it was used
/// for another request.
async fn existing_fork(
    tx: &deadpool_postgres::Transaction<'_>,
    scope: &str,
    key: &IdempotencyKey,
    request: &RequestFingerprint,
) -> Result<Option<Forked>, StoreError> {
    let Some(claim) = tx
        .query_opt(
            "SELECT session_id, request_hash FROM idempotency_keys WHERE scope = $1 AND key = $2",
            &[&scope, &key.as_str()],
        )
        .await?
    else {
        return Ok(None);
    };
    let stored: Option<&[u8]> = get(&claim, 1)?;
    idempotency::bound_to(stored, request, key)?;
    let id: uuid::Uuid = get(&claim, 0)?;
    let sql = format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE id = $1");
    let session = session_from_row(&tx.query_one(&sql, &[&id]).await?)?;
    Ok(Some(Forked {
        session,
        new_turns: Vec::new(),
        created: false,
    }))
}
