//! Tool calls held for a human's approval (migration V24).
//!
//! The burst that stored an assistant turn writes one `approvals` row per
//! call the policy holds ([`Store::request_approvals`], fenced by its
//! lease), then closes into `awaiting_approval`. Each row is decided once,
//! in a transaction that first locks the session row:
//!
//! - [`Store::decide_tool_calls`]: a human approves or denies; a denied
//!   call's error result turn is written in the same transaction;
//! - [`Store::expire_approvals`]: past `expires_at`, still pending;
//! - [`supersede`] (inside `SendMessage`'s transaction): a follow-up
//!   message arrived; the results go before the user turn, so the stored
//!   transcript stays provider-valid;
//! - a cancel: the `sessions_cancel_approvals` trigger.
//!
//! When no row of the hold is pending any more, the same transaction moves
//! the session to `pending` ([`Event::Decide`]) and announces it, so any
//! replica starts the burst. An approved call is run by that burst, which
//! first sets `started_at` ([`Store::mark_approval_started`], fenced): an
//! approved call with neither a result nor `started_at` never ran.

use std::time::Duration;

use inquest_core::{
    Event, IdempotencyKey, NewTurn, RequestFingerprint, Seq, SessionId, SessionStatus, SideEffect,
    Tenant, Turn,
    approval::{ApprovalState, Decision},
};
use time::OffsetDateTime;

use crate::{
    Lease, ReplicaId, Store, StoreError, idempotency,
    notify::{CHANNEL, status_payload_sql},
    rows::get,
    sessions::{SESSION_COLUMNS, SessionRow, not_found_session, session_from_row},
    turns::insert_turn,
};

/// A call the policy holds, as the burst asks for it.
#[derive(Debug, Clone)]
pub struct NewApproval {
    pub call_id: String,
    pub tool: String,
    /// The MCP server serving the tool ("" when unknown).
    pub server: String,
    /// The arguments as stored in the assistant turn.
    pub arguments: String,
    pub side_effect: SideEffect,
    /// Why it is held (`Verdict::reason`).
    pub rule: String,
}

/// One stored approval request.
#[derive(Debug, Clone)]
pub struct ApprovalRow {
    pub session_id: SessionId,
    pub call_id: String,
    pub assistant_seq: Seq,
    pub tool: String,
    pub server: String,
    pub arguments: String,
    pub side_effect: String,
    pub rule: String,
    pub state: ApprovalState,
    pub requested_at: OffsetDateTime,
    pub expires_at: OffsetDateTime,
    pub decided_by: Option<String>,
    pub comment: Option<String>,
    pub decided_at: Option<OffsetDateTime>,
    pub started_at: Option<OffsetDateTime>,
}

/// What [`Store::decide_tool_calls`] did.
#[derive(Debug, Clone)]
pub enum DecideOutcome {
    /// Every decision is stored. `turns`: the denied calls' results, just
    /// written (empty for a replay). `reopened`: no call of the hold is
    /// pending any more and the session is `pending` now. `created` is
    /// false when an earlier call with the same key made these decisions.
    Decided {
        session: Box<SessionRow>,
        turns: Vec<Turn>,
        reopened: bool,
        created: bool,
    },
    /// Nothing was written: `call_id` is not pending in this session,
    /// whose status is `status`.
    NotPending {
        call_id: String,
        status: SessionStatus,
    },
}

const APPROVAL_COLUMNS: &str = "session_id, call_id, assistant_seq, tool, server, arguments, \
     side_effect, rule, state, requested_at, expires_at, decided_by, comment, decided_at, \
     started_at";

fn approval_from_row(row: &tokio_postgres::Row) -> Result<ApprovalRow, StoreError> {
    let session: uuid::Uuid = get(row, 0)?;
    let seq: i64 = get(row, 2)?;
    let state: String = get(row, 8)?;
    Ok(ApprovalRow {
        session_id: SessionId::from_uuid(session),
        call_id: get(row, 1)?,
        assistant_seq: Seq::from_stored(seq)
            .ok_or_else(|| StoreError::Corrupt(format!("approval assistant_seq {seq}")))?,
        tool: get(row, 3)?,
        server: get(row, 4)?,
        arguments: get(row, 5)?,
        side_effect: get(row, 6)?,
        rule: get(row, 7)?,
        state: ApprovalState::parse(&state)
            .ok_or_else(|| StoreError::Corrupt(format!("approval state {state:?}")))?,
        requested_at: get(row, 9)?,
        expires_at: get(row, 10)?,
        decided_by: get(row, 11)?,
        comment: get(row, 12)?,
        decided_at: get(row, 13)?,
        started_at: get(row, 14)?,
    })
}

/// PostgreSQL text holds no U+0000; these columns are for people to read
/// (the call itself runs from the stored assistant turn), so a NUL shows
/// as U+FFFD.
fn readable(text: &str) -> String {
    text.replace('\0', "\u{FFFD}")
}

fn side_effect_text(side_effect: SideEffect) -> &'static str {
    match side_effect {
        SideEffect::ReadOnly => "read_only",
        SideEffect::Idempotent => "idempotent",
        SideEffect::Mutating => "mutating",
    }
}

impl Store {
    /// Stores the held calls of the assistant turn at `assistant_seq`,
    /// pending until `timeout` from now (the database's clock), fenced by
    /// `lease`. A retry after a commit whose answer was lost writes
    /// nothing more (one row per call id).
    pub async fn request_approvals(
        &self,
        lease: &Lease,
        assistant_seq: Seq,
        timeout: Duration,
        requests: Vec<NewApproval>,
    ) -> Result<(), StoreError> {
        let store = self.clone();
        let limit = self.turn_write_timeout;
        let session = lease.session();
        let epoch = lease.epoch();
        let timeout_ms = i64::try_from(timeout.as_millis()).unwrap_or(i64::MAX);
        self.detached(async move {
            store
                .run_with_timeout("request_approvals", limit, async |c| {
                    let tx = c.transaction().await?;
                    // The session row first, as every writer of approvals
                    // locks it: the event lock (record_event) comes after.
                    let Some(row) = tx
                        .query_opt(
                            "SELECT tenant FROM sessions WHERE id = $1 AND lease_epoch = $2 \
                             FOR UPDATE",
                            &[session.as_uuid(), &epoch],
                        )
                        .await?
                    else {
                        drop(tx);
                        return Err(crate::turns::no_row(&*c, session, Some(epoch), None).await);
                    };
                    let tenant: String = get(&row, 0)?;
                    for (position, r) in requests.iter().enumerate() {
                        tx.execute(
                            "INSERT INTO approvals (session_id, call_id, tenant, assistant_seq, \
                               position, tool, server, arguments, side_effect, rule, expires_at) \
                             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, \
                               now() + $11 * interval '1 millisecond') \
                             ON CONFLICT (session_id, call_id) DO NOTHING",
                            &[
                                session.as_uuid(),
                                &readable(&r.call_id),
                                &tenant,
                                &assistant_seq.as_i64(),
                                &(position as i32),
                                &readable(&r.tool),
                                &readable(&r.server),
                                &readable(&r.arguments),
                                &side_effect_text(r.side_effect),
                                &readable(&r.rule),
                                &(timeout_ms as f64),
                            ],
                        )
                        .await?;
                    }
                    tx.commit().await?;
                    Ok(())
                })
                .await
        })
        .await
    }

    /// The approval requests of the session's latest hold, in call order.
    pub async fn approvals(&self, session: SessionId) -> Result<Vec<ApprovalRow>, StoreError> {
        self.run("approvals", async |c| {
            let rows = c
                .query(
                    &format!(
                        "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE session_id = $1 \
                         AND assistant_seq = (SELECT max(assistant_seq) FROM approvals \
                                              WHERE session_id = $1) \
                         ORDER BY position"
                    ),
                    &[session.as_uuid()],
                )
                .await?;
            rows.iter().map(approval_from_row).collect()
        })
        .await
    }

    /// Marks an approved call as starting, fenced by `lease`: from here on
    /// a crash leaves it "may have run". Idempotent.
    pub async fn mark_approval_started(
        &self,
        lease: &Lease,
        call_id: &str,
    ) -> Result<(), StoreError> {
        let store = self.clone();
        let limit = self.turn_write_timeout;
        let session = lease.session();
        let epoch = lease.epoch();
        let call_id = call_id.to_owned();
        self.detached(async move {
            store
                .run_with_timeout("mark_approval_started", limit, async |c| {
                    let changed = c
                        .execute(
                            "UPDATE approvals SET started_at = coalesce(started_at, now()) \
                             WHERE session_id = $1 AND call_id = $2 AND state = 'approved' \
                               AND EXISTS (SELECT 1 FROM sessions \
                                           WHERE id = $1 AND lease_epoch = $3)",
                            &[session.as_uuid(), &call_id, &epoch],
                        )
                        .await?;
                    if changed == 0 {
                        return Err(crate::turns::no_row(&*c, session, Some(epoch), None).await);
                    }
                    Ok(())
                })
                .await
        })
        .await
    }

    /// Decides pending calls of `tenant`'s `session` as a human asked
    /// (`DecideToolCalls`), all or nothing. With an idempotency key
    /// (scoped to the session), a retry of the same decisions returns the
    /// session and writes nothing; the key with other decisions is
    /// [`StoreError::IdempotencyConflict`].
    pub async fn decide_tool_calls(
        &self,
        tenant: &Tenant,
        session: SessionId,
        decisions: Vec<(String, Decision)>,
        key: Option<IdempotencyKey>,
        request: RequestFingerprint,
    ) -> Result<DecideOutcome, StoreError> {
        let store = self.clone();
        let limit = self.turn_write_timeout;
        let tenant = tenant.clone();
        self.detached(async move {
            store
                .run_with_timeout("decide_tool_calls", limit, async |c| {
                    let scope = format!("decide_tool_calls:{session}");
                    let tx = c.transaction().await?;
                    let Some(status) = lock_session(&tx, session, Some(&tenant)).await? else {
                        return Err(not_found_session(session));
                    };
                    if let Some(key) = &key
                        && key_used(&tx, &scope, key, &request).await?
                    {
                        let row = session_row(&tx, session).await?;
                        tx.commit().await?;
                        return Ok(DecideOutcome::Decided {
                            session: Box::new(row),
                            turns: Vec::new(),
                            reopened: false,
                            created: false,
                        });
                    }
                    let (turns, reopened) =
                        match decide_tx(&tx, &store.replica, session, status, &decisions).await? {
                            Ok(done) => done,
                            Err(call_id) => {
                                drop(tx);
                                return Ok(DecideOutcome::NotPending { call_id, status });
                            }
                        };
                    let row = session_row(&tx, session).await?;
                    if let Some(key) = &key {
                        let head = row.head_seq.unwrap_or(Seq::FIRST);
                        if !idempotency::claim(&tx, &scope, key, session, head, &request).await? {
                            // A concurrent call with this key won: ours
                            // would have failed on its decided calls
                            // anyway; answer as its replay.
                            drop(tx);
                            let row = store.get_session(session).await?;
                            return Ok(DecideOutcome::Decided {
                                session: Box::new(row),
                                turns: Vec::new(),
                                reopened: false,
                                created: false,
                            });
                        }
                    }
                    tx.commit().await?;
                    Ok(DecideOutcome::Decided {
                        session: Box::new(row),
                        turns,
                        reopened,
                        created: true,
                    })
                })
                .await
        })
        .await
    }

    /// Denies as expired what is still pending past its `expires_at`, one
    /// session per transaction, at most `limit` sessions: the sessions
    /// reopened (now `pending`: the caller starts their bursts).
    pub async fn expire_approvals(&self, limit: u32) -> Result<Vec<SessionId>, StoreError> {
        let due: Vec<SessionId> = self
            .run("expired_approvals", async |c| {
                let rows = c
                    .query(
                        "SELECT DISTINCT session_id FROM approvals \
                         WHERE state = 'pending' AND expires_at <= now() LIMIT $1",
                        &[&i64::from(limit)],
                    )
                    .await?;
                rows.iter()
                    .map(|r| get::<uuid::Uuid>(r, 0).map(SessionId::from_uuid))
                    .collect()
            })
            .await?;
        let mut reopened = Vec::new();
        for session in due {
            let store = self.clone();
            let write_limit = self.turn_write_timeout;
            let done = self
                .detached(async move {
                    store
                        .run_with_timeout("expire_approvals", write_limit, async |c| {
                            let tx = c.transaction().await?;
                            let Some(status) = lock_session(&tx, session, None).await? else {
                                return Ok(false);
                            };
                            let rows = tx
                                .query(
                                    "SELECT call_id FROM approvals WHERE session_id = $1 \
                                     AND state = 'pending' AND expires_at <= now() \
                                     ORDER BY assistant_seq, position",
                                    &[session.as_uuid()],
                                )
                                .await?;
                            let decisions = rows
                                .iter()
                                .map(|r| get::<String>(r, 0).map(|id| (id, Decision::Expire)))
                                .collect::<Result<Vec<_>, _>>()?;
                            if decisions.is_empty() {
                                return Ok(false);
                            }
                            let reopened =
                                match decide_tx(&tx, &store.replica, session, status, &decisions)
                                    .await?
                                {
                                    Ok((_, reopened)) => reopened,
                                    Err(_) => return Ok(false),
                                };
                            tx.commit().await?;
                            Ok(reopened)
                        })
                        .await
                })
                .await?;
            if done {
                reopened.push(session);
            }
        }
        Ok(reopened)
    }
}

/// Locks the session row (of `tenant`, when given) and reads its status;
/// `None` when there is no such session.
async fn lock_session(
    tx: &deadpool_postgres::Transaction<'_>,
    session: SessionId,
    tenant: Option<&Tenant>,
) -> Result<Option<SessionStatus>, StoreError> {
    let Some(row) = tx
        .query_opt(
            "SELECT status::text FROM sessions WHERE id = $1 AND ($2::text IS NULL OR tenant = $2) \
             FOR UPDATE",
            &[session.as_uuid(), &tenant.map(Tenant::as_str)],
        )
        .await?
    else {
        return Ok(None);
    };
    let status: String = get(&row, 0)?;
    SessionStatus::parse(&status)
        .map(Some)
        .ok_or_else(|| StoreError::Corrupt(format!("session status {status:?}")))
}

async fn session_row(
    tx: &deadpool_postgres::Transaction<'_>,
    session: SessionId,
) -> Result<SessionRow, StoreError> {
    let row = tx
        .query_opt(
            &format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE id = $1"),
            &[session.as_uuid()],
        )
        .await?
        .ok_or_else(|| not_found_session(session))?;
    session_from_row(&row)
}

/// Whether `key` already stands for this request in `scope`; an error when
/// it stands for another.
async fn key_used(
    tx: &deadpool_postgres::Transaction<'_>,
    scope: &str,
    key: &IdempotencyKey,
    request: &RequestFingerprint,
) -> Result<bool, StoreError> {
    let Some(row) = tx
        .query_opt(
            "SELECT request_hash FROM idempotency_keys WHERE scope = $1 AND key = $2",
            &[&scope, &key.as_str()],
        )
        .await?
    else {
        return Ok(false);
    };
    let stored: Option<&[u8]> = get(&row, 0)?;
    idempotency::bound_to(stored, request, key)?;
    Ok(true)
}

/// Applies `decisions` to pending calls of the session (its row locked by
/// the caller, in `status`), writing each refused call's error result, and
/// reopens the session when nothing of the hold is pending any more.
/// `Ok(Err(call_id))`: that call was not pending; the caller drops the
/// transaction, so nothing is written.
async fn decide_tx(
    tx: &deadpool_postgres::Transaction<'_>,
    origin: &ReplicaId,
    session: SessionId,
    status: SessionStatus,
    decisions: &[(String, Decision)],
) -> Result<Result<(Vec<Turn>, bool), String>, StoreError> {
    if status != SessionStatus::AwaitingApproval {
        return Ok(Err(decisions
            .first()
            .map(|(id, _)| id.clone())
            .unwrap_or_default()));
    }
    let turns = match answer(tx, origin, session, decisions).await? {
        Ok(turns) => turns,
        Err(call_id) => return Ok(Err(call_id)),
    };
    let pending: i64 = get(
        &tx.query_one(
            "SELECT count(*) FROM approvals WHERE session_id = $1 AND state = 'pending'",
            &[session.as_uuid()],
        )
        .await?,
        0,
    )?;
    let reopened = pending == 0 && reopen(tx, origin, session, Event::Decide).await?;
    Ok(Ok((turns, reopened)))
}

/// Marks each call decided (it must be pending) and writes the error
/// result of each that does not run.
async fn answer(
    tx: &deadpool_postgres::Transaction<'_>,
    origin: &ReplicaId,
    session: SessionId,
    decisions: &[(String, Decision)],
) -> Result<Result<Vec<Turn>, String>, StoreError> {
    let mut turns = Vec::new();
    for (call_id, decision) in decisions {
        let Some(row) = tx
            .query_opt(
                "UPDATE approvals SET state = $3, decided_by = $4, comment = $5, \
                   decided_at = now() \
                 WHERE session_id = $1 AND call_id = $2 AND state = 'pending' \
                 RETURNING tool",
                &[
                    session.as_uuid(),
                    call_id,
                    &decision.state().as_str(),
                    &readable(decision.by()),
                    &readable(decision.comment()),
                ],
            )
            .await?
        else {
            return Ok(Err(call_id.clone()));
        };
        if let Some(content) = decision.refusal() {
            let tool: String = get(&row, 0)?;
            let result = NewTurn::Tool {
                call_id: call_id.clone(),
                tool_name: tool,
                content,
                is_error: true,
            };
            turns.push(insert_turn(tx, origin, session, None, None, &result).await?);
        }
    }
    Ok(Ok(turns))
}

/// Moves the session to `event`'s target if its status allows, and
/// announces the status change to every replica.
async fn reopen(
    tx: &deadpool_postgres::Transaction<'_>,
    origin: &ReplicaId,
    session: SessionId,
    event: Event,
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
                &event.target().as_str(),
                &event.source_texts(),
            ],
        )
        .await?;
    Ok(opened.is_some())
}

/// Inside `SendMessage`'s transaction, after the session row was moved
/// from `awaiting_approval` to `pending` and before the user turn is
/// written: denies what is still pending as superseded and writes those
/// results, so they precede the message.
pub(crate) async fn supersede(
    tx: &deadpool_postgres::Transaction<'_>,
    origin: &ReplicaId,
    session: SessionId,
) -> Result<Vec<Turn>, StoreError> {
    // A call is pending only while its session is held (or in the moment
    // before a crashed burst's hold is closed, when SendMessage is refused
    // as running): no pending call, no hold to supersede.
    let rows = tx
        .query(
            "SELECT call_id, assistant_seq FROM approvals \
             WHERE session_id = $1 AND state = 'pending' ORDER BY assistant_seq, position",
            &[session.as_uuid()],
        )
        .await?;
    let Some(last) = rows.last() else {
        return Ok(Vec::new());
    };
    let hold: i64 = get(last, 1)?;
    // Approved calls of the same hold (a partial decision) never started:
    // no burst ran since. They are answered too, so the message does not
    // leave them dangling for a recovery plan to hold as "may have run".
    let approved = tx
        .query(
            "SELECT a.call_id, a.tool FROM approvals a WHERE a.session_id = $1 \
               AND a.assistant_seq = $2 AND a.state = 'approved' AND a.started_at IS NULL \
               AND NOT EXISTS (SELECT 1 FROM turns t WHERE t.session_id = a.session_id \
                               AND t.tool_call_id = a.call_id) \
             ORDER BY a.position",
            &[session.as_uuid(), &hold],
        )
        .await?;
    let mut turns = Vec::new();
    for row in &approved {
        let result = NewTurn::Tool {
            call_id: get(row, 0)?,
            tool_name: get(row, 1)?,
            content: "not run: a new message arrived before this approved call started".into(),
            is_error: true,
        };
        turns.push(insert_turn(tx, origin, session, None, None, &result).await?);
    }
    let decisions = rows
        .iter()
        .map(|r| get::<String>(r, 0).map(|id| (id, Decision::Supersede)))
        .collect::<Result<Vec<_>, _>>()?;
    match answer(tx, origin, session, &decisions).await? {
        Ok(answered) => {
            turns.extend(answered);
            Ok(turns)
        }
        Err(call_id) => Err(StoreError::Internal(format!(
            "approval {call_id} changed under its session's lock"
        ))),
    }
}
