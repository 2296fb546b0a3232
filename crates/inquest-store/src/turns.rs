use inquest_core::{AfterSeq, NewTurn, Seq, SessionId, SessionStatus, Turn};
use uuid::Uuid;

use crate::{
    Lease, ReplicaId, Store, StoreError,
    rows::{TURN_COLUMNS, turn_from_row},
    text,
};

/// One page of a session's turns.
#[derive(Debug, Clone)]
pub struct TurnPage {
    pub turns: Vec<Turn>,
    /// The session's newest committed turn when the page was read.
    pub head: Option<Seq>,
    /// Whether turns past this page existed when it was read.
    pub more: bool,
}

/// Appends a turn, bumps the session's counters and announces the turn, in
/// ONE statement.
///
/// The `UPDATE` takes the session row's lock, so concurrent appends to one
/// session queue on it and each reads the previous writer's `head_seq`:
/// seqs come out 1..N with no gap and no duplicate, and a failed insert
/// rolls the bump back with it. A burst's write is fenced: `$11` is its
/// lease epoch, checked by the same `UPDATE`, so a worker whose lease was
/// taken over matches no row and writes nothing (API writes pass NULL).
///
/// `pg_notify` runs in the same statement, so other replicas hear of the
/// turn exactly when it commits (the whole turn when it fits in a
/// notification, else its seq; see [`crate::notify`]) — but only when a
/// replica other than this one registered a watcher on the session
/// (`watch_replicas`, migration V6): notifying commits serialise on
/// PostgreSQL's notify-queue lock, so unwatched sessions must not pay it.
/// The column is read from the row version the `UPDATE` locked, which is
/// what makes the decision race-free against a registration. The
/// notification is a subquery of the `CASE`, so an unwatched turn builds
/// no JSON at all, and its `OFFSET 0` keeps PostgreSQL from inlining it:
/// the whole turn's JSON is built once, not once for the size check and
/// again for the payload (which cost a watched append 16% of its
/// instructions; `benches/callgrind/append.py --watched`).
///
/// Text fields holding U+0000 are bound in the encoding of [`crate::text`]
/// with `$14` (`escaped`) set, for the row and for the notification alike
/// (which therefore carries the flag, `x`). `$15` is a recovery notice's
/// plan (`recovery_plan`, migration V11; NULL for other turns), inlined as
/// `rp` like the tool calls; `$16`–`$18` are the cache counts and the cost
/// (migration V13), inlined as `cr`, `cw`, `cu`. A turn that spent tokens
/// adds them to its session's row of today in `token_usage` (migration
/// V16), what the tenant's daily token budget reads; that row is only ever
/// written under the session row's lock this statement already holds.
///
/// Only `seq` and `created_at` come back: the rest of the row is what the
/// caller sent, so it is not shipped back and decoded again. Both are read
/// from `bumped`, not from the insert: the seq is the head the update
/// returned, and `created_at` is written as `now()`, the transaction's
/// start, which the final `SELECT` reads again. So the insert needs no
/// `RETURNING` and the final `SELECT` joins nothing; PostgreSQL still runs
/// the unreferenced insert to completion (a data-modifying `WITH` always
/// runs), and a failing one fails the statement.
///
/// The `UPDATE` changes no column any index of `sessions` covers (keys or
/// partial-index predicates), so PostgreSQL can make it a HOT update: one
/// new row version on the same page and no index entry. It therefore does
/// not set `updated_at` (a key of `sessions_pending`, V4): a session's
/// `updated_at` as read is the later of the row's and its head turn's
/// `created_at` ([`crate::sessions`] `SESSION_COLUMNS`), which is the same
/// instant this statement used to store. Setting it made every append a
/// non-HOT update that added an entry to every index of the table whose
/// predicate the row met, seven for a running session (docs/benchmarks.md,
/// "Turn appends"); `tests/api/turns.rs`
/// `an_append_changes_no_indexed_session_column` keeps it so.
macro_rules! append_sql {
    ($used:literal) => {
        concat!(
            "WITH bumped AS ( \
             UPDATE sessions SET head_seq = head_seq + 1, turn_count = turn_count + 1, \
                 tool_calls = tool_calls + $8, input_tokens = input_tokens + $9, \
                 output_tokens = output_tokens + $10, \
                 cache_read_input_tokens = cache_read_input_tokens + $16, \
                 cache_creation_input_tokens = cache_creation_input_tokens + $17, \
                 cost_nano_usd = cost_nano_usd + coalesce($18::bigint, 0), \
                 cost_unknown_turns = cost_unknown_turns \
                     + CASE WHEN $2 = 'assistant' AND $18::bigint IS NULL THEN 1 ELSE 0 END \
             WHERE id = $1 AND ($11::bigint IS NULL OR lease_epoch = $11) \
                 AND ($19::bigint IS NULL OR head_seq >= $19) \
             RETURNING head_seq, tenant, \
                 cardinality(array_remove(watch_replicas, $12::text)) > 0 AS watched), \
             ",
            $used,
            "ins AS ( \
             INSERT INTO turns (session_id, seq, role, content, tool_calls, tool_call_id, \
                                tool_name, is_error, input_tokens, output_tokens, write_id, \
                                escaped, recovery_plan, cache_read_input_tokens, \
                                cache_creation_input_tokens, cost_nano_usd, created_at) \
             SELECT $1, bumped.head_seq, $2, $3, $4, $5, $6, $7, $9, $10, $13, $14, $15, $16, \
                 $17, $18, now() FROM bumped) \
         SELECT bumped.head_seq, now(), bumped.watched, \
             CASE WHEN bumped.watched THEN (SELECT pg_notify('inquest_events', \
                 CASE WHEN octet_length(p.whole) <= 7900 THEN p.whole \
                 ELSE json_build_object('v', 1, 'o', $12::text, 'k', 'turn', 's', $1, \
                     'q', bumped.head_seq)::text END) \
             FROM (SELECT json_build_object('v', 1, 'o', $12::text, 'k', 'turn', 's', $1, \
                 'q', bumped.head_seq, \
                 'turn', json_build_object('r', $2, 'c', $3, 'tc', $4, 'ci', $5, 'tn', $6, \
                     'e', $7, 'it', $9, 'ot', $10, 'at', now(), 'x', $14, \
                     'rp', $15::jsonb, 'cr', $16, 'cw', $17, 'cu', $18::bigint))::text \
                 AS whole OFFSET 0) p) END \
         FROM bumped"
        )
    };
}

/// The append of a turn that spent tokens: it also adds them to its
/// session's row of today in `token_usage`.
const APPEND_SQL: &str = append_sql!(
    "used AS ( \
             INSERT INTO token_usage (tenant, day, session_id, tokens) \
             SELECT bumped.tenant, (now() AT TIME ZONE 'UTC')::date, $1, $9 + $10 FROM bumped \
             WHERE $9 + $10 > 0 \
             ON CONFLICT (tenant, day, session_id) \
             DO UPDATE SET tokens = token_usage.tokens + EXCLUDED.tokens), \
     "
);

/// The append of a turn that spent no tokens (a tool result, a user
/// message, a notice): no `token_usage` clause, whose insert PostgreSQL
/// would set up for every statement even when it writes no row.
const APPEND_SQL_NO_TOKENS: &str = append_sql!("");

/// Names one turn write of a burst, so that sending the same write again
/// (after an answer that never came) applies it at most once and finds out
/// whether the first attempt committed (migration V7). Made fresh for each
/// turn, kept across that turn's retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteId(Uuid);

impl WriteId {
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        Self(Uuid::new_v4())
    }

    pub(crate) fn as_uuid(&self) -> &Uuid {
        &self.0
    }
}

/// The unique index that makes a repeated write id a conflict. The turns
/// table is partitioned (migration V40), and a conflict names the index of
/// the partition it happened in: `<partition>_write_id`, the name
/// `inquest_turns_partition_for` gives it (and `turns_legacy_write_id`).
const WRITE_ID_INDEX: &str = "_write_id";

/// Inserts `turn` as the session's next seq on `client` (a pooled
/// connection or an open transaction), fenced by `epoch` when given.
/// Unknown session: NotFound; a newer epoch: LeaseLost. A `write` that
/// already committed is not inserted again: the committed turn comes back.
pub(crate) async fn insert_turn(
    client: &impl deadpool_postgres::GenericClient,
    origin: &ReplicaId,
    session: SessionId,
    epoch: Option<i64>,
    write: Option<WriteId>,
    turn: &NewTurn,
) -> Result<Turn, StoreError> {
    insert_turn_seen(client, origin, session, epoch, None, write, turn)
        .await
        .map(|appended| appended.turn)
}

/// A turn the store committed, and whether another replica was
/// registered as a watcher of its session when it did.
#[derive(Debug, Clone)]
pub struct Appended {
    pub turn: Turn,
    /// Read under the session row's lock in the append's own statement,
    /// so it is ordered with every registration (an update of the same
    /// row). `true` when not known (an earlier attempt's commit found by
    /// its write id).
    pub watched_elsewhere: bool,
}

/// A turn as the append statements bind it: its text fields in the
/// stored encoding ([`crate::text`]) and the counts the session row adds.
pub(crate) struct Staged<'t> {
    pub(crate) turn: &'t NewTurn,
    pub(crate) call_id: Option<&'t str>,
    pub(crate) tool_name: Option<&'t str>,
    pub(crate) is_error: bool,
    pub(crate) usage: inquest_core::TokenUsage,
    pub(crate) tool_calls: serde_json::Value,
    pub(crate) recovery_plan: Option<serde_json::Value>,
    /// Some text field holds U+0000, which PostgreSQL refuses: every text
    /// field of the row is stored escaped.
    pub(crate) escaped: bool,
}

impl<'t> Staged<'t> {
    pub(crate) fn new(turn: &'t NewTurn) -> Self {
        let (call_id, tool_name, is_error) = match turn.tool_result_of() {
            Some((id, name, err)) => (Some(id), Some(name), err),
            None => (None, None, false),
        };
        let tool_calls = turn.tool_calls_stored();
        let recovery_plan = turn.recovery_plan_stored();
        let escaped = text::has_nul(turn.content())
            || call_id.is_some_and(text::has_nul)
            || tool_name.is_some_and(text::has_nul)
            || text::json_has_nul(&tool_calls)
            || recovery_plan.as_ref().is_some_and(text::json_has_nul);
        Self {
            turn,
            call_id,
            tool_name,
            is_error,
            usage: turn.usage(),
            tool_calls,
            recovery_plan,
            escaped,
        }
    }

    /// The bound values, in the stored encoding.
    pub(crate) fn fields(&self) -> StoredFields<'_> {
        StoredFields {
            content: text::field(self.turn.content(), self.escaped),
            tool_calls: text::json_field(&self.tool_calls, self.escaped),
            recovery_plan: self
                .recovery_plan
                .as_ref()
                .map(|plan| text::json_field(plan, self.escaped)),
            call_id: self.call_id.map(|id| text::field(id, self.escaped)),
            tool_name: self.tool_name.map(|name| text::field(name, self.escaped)),
        }
    }

    /// Whether the append must also add tokens to `token_usage`.
    pub(crate) fn spent_tokens(&self) -> bool {
        self.usage.input_tokens > 0 || self.usage.output_tokens > 0
    }

    /// The committed turn, from what the statement returned.
    pub(crate) fn committed(
        self,
        session: SessionId,
        seq: Seq,
        created_at: time::OffsetDateTime,
    ) -> Turn {
        Turn {
            session_id: session,
            seq,
            role: self.turn.role(),
            content: self.turn.content().to_owned(),
            tool_calls_raw: self.tool_calls,
            recovery_plan_raw: self.recovery_plan,
            tool_call_id: self.call_id.map(str::to_owned),
            tool_name: self.tool_name.map(str::to_owned),
            is_error: self.is_error,
            usage: self.usage,
            created_at,
        }
    }
}

/// [`Staged`]'s text fields as bound.
pub(crate) struct StoredFields<'a> {
    pub(crate) content: std::borrow::Cow<'a, str>,
    pub(crate) tool_calls: std::borrow::Cow<'a, serde_json::Value>,
    pub(crate) recovery_plan: Option<std::borrow::Cow<'a, serde_json::Value>>,
    pub(crate) call_id: Option<std::borrow::Cow<'a, str>>,
    pub(crate) tool_name: Option<std::borrow::Cow<'a, str>>,
}

/// [`insert_turn`], telling whether another replica watches the session.
pub(crate) async fn insert_turn_seen(
    client: &impl deadpool_postgres::GenericClient,
    origin: &ReplicaId,
    session: SessionId,
    epoch: Option<i64>,
    known: Option<i64>,
    write: Option<WriteId>,
    turn: &NewTurn,
) -> Result<Appended, StoreError> {
    let staged = Staged::new(turn);
    // Prepared once per connection (deadpool caches it).
    let sql = if staged.spent_tokens() {
        APPEND_SQL
    } else {
        APPEND_SQL_NO_TOKENS
    };
    let stmt = client.prepare_cached(sql).await?;
    let write_uuid = write.map(|w| w.0);
    let usage = staged.usage;
    let fields = staged.fields();
    let row = client
        .query_opt(
            &stmt,
            &[
                session.as_uuid(),
                &turn.role().as_str(),
                &&*fields.content,
                &*fields.tool_calls,
                &fields.call_id.as_deref(),
                &fields.tool_name.as_deref(),
                &staged.is_error,
                &to_i64(turn.tool_call_count() as u64),
                &to_i64(usage.input_tokens),
                &to_i64(usage.output_tokens),
                &epoch,
                &origin.as_str(),
                &write_uuid,
                &staged.escaped,
                &fields.recovery_plan.as_deref(),
                &to_i64(usage.cache_read_input_tokens),
                &to_i64(usage.cache_creation_input_tokens),
                &usage.cost.map(|c| to_i64(c.nanos())),
                &known,
            ],
        )
        .await;
    drop(fields);
    let row = match row {
        Ok(row) => row,
        Err(e) if is_write_id_conflict(&e) => return committed_write(client, session, write).await,
        Err(e) => return Err(e.into()),
    };
    let Some(row) = row else {
        return Err(no_row(client, session, epoch, known).await);
    };
    let watched_elsewhere = crate::rows::get(&row, 2)?;
    let seq = crate::rows::seq(crate::rows::get(&row, 0)?)?;
    let turn = staged.committed(session, seq, crate::rows::get(&row, 1)?);
    Ok(Appended {
        turn,
        watched_elsewhere,
    })
}

/// The turn an earlier attempt of `write` committed (its answer was
/// lost): that turn is the outcome of sending it again.
async fn committed_write(
    client: &impl deadpool_postgres::GenericClient,
    session: SessionId,
    write: Option<WriteId>,
) -> Result<Appended, StoreError> {
    let sql = format!("SELECT {TURN_COLUMNS} FROM turns WHERE session_id = $1 AND write_id = $2");
    let found = client
        .query_opt(&sql, &[session.as_uuid(), &write.map(|w| w.0)])
        .await?;
    match found {
        Some(row) => turn_from_row(&row).map(|turn| Appended {
            turn,
            watched_elsewhere: true,
        }),
        None => Err(StoreError::Internal(
            "write id conflicted but its turn is not there".into(),
        )),
    }
}

/// Why a fenced write matched no session row: the session does not exist,
/// its head is behind what the writer knows committed (`known`: turns
/// lost in a failover, whatever the epoch says), or its epoch moved on.
pub(crate) async fn no_row(
    client: &impl deadpool_postgres::GenericClient,
    session: SessionId,
    epoch: Option<i64>,
    known: Option<i64>,
) -> StoreError {
    let current = match client
        .query_opt(
            "SELECT lease_epoch, head_seq FROM sessions WHERE id = $1",
            &[session.as_uuid()],
        )
        .await
    {
        Ok(row) => row,
        Err(e) => return e.into(),
    };
    if let (Some(row), Some(known)) = (&current, known) {
        match crate::rows::get::<i64>(row, 1) {
            Ok(head) if head < known => {
                return StoreError::HeadBehind {
                    session: session.to_string(),
                    head,
                    known,
                };
            }
            Ok(_) => {}
            Err(e) => return e,
        }
    }
    match (current, epoch) {
        (Some(row), Some(held)) => match crate::rows::get::<i64>(&row, 0) {
            Ok(current) => StoreError::LeaseLost {
                session: session.to_string(),
                held,
                current,
            },
            Err(e) => e,
        },
        (Some(_), None) => StoreError::Internal(format!(
            "append to session {session} matched no row without a fence"
        )),
        (None, _) => StoreError::NotFound {
            what: "session",
            id: session.to_string(),
        },
    }
}

pub(crate) fn is_write_id_conflict(e: &tokio_postgres::Error) -> bool {
    e.as_db_error().is_some_and(|db| {
        db.code() == &tokio_postgres::error::SqlState::UNIQUE_VIOLATION
            && db
                .constraint()
                .is_some_and(|c| c.starts_with("turns_") && c.ends_with(WRITE_ID_INDEX))
    })
}

pub(crate) fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl Store {
    /// Durably appends one turn and returns it with its assigned seq.
    ///
    /// The write runs detached from the caller with its own timeout
    /// (`turn_write_timeout`): dropping the returned future (a cancelled
    /// request or burst) does not cancel the write, so what already happened
    /// is still recorded. Shutdown waits for writes in flight.
    pub async fn append_turn(&self, session: SessionId, turn: NewTurn) -> Result<Turn, StoreError> {
        self.append(session, None, None, None, turn)
            .await
            .map(|appended| appended.turn)
    }

    /// [`Store::append_turn`] for a burst: fenced by its lease, so the
    /// write fails with [`StoreError::LeaseLost`] once another replica
    /// claimed the session. Sending the same `write` again is safe: it is
    /// applied at most once, and a retry of a write that did commit returns
    /// the committed turn.
    pub async fn append_turn_leased(
        &self,
        lease: &Lease,
        write: WriteId,
        turn: NewTurn,
    ) -> Result<Appended, StoreError> {
        self.append(
            lease.session(),
            Some(lease.epoch()),
            None,
            Some(write),
            turn,
        )
        .await
    }

    /// [`Store::append_turn_leased`], also refused with
    /// [`StoreError::HeadBehind`] when the session's head is below
    /// `known`, the highest seq this writer saw committed (`None`: not
    /// known yet): after a failover to a standby that lacked them, the
    /// lost seqs are never given to new content.
    pub async fn append_turn_after(
        &self,
        lease: &Lease,
        known: Option<Seq>,
        write: WriteId,
        turn: NewTurn,
    ) -> Result<Appended, StoreError> {
        self.append(
            lease.session(),
            Some(lease.epoch()),
            known.map(Seq::as_i64),
            Some(write),
            turn,
        )
        .await
    }

    async fn append(
        &self,
        session: SessionId,
        epoch: Option<i64>,
        known: Option<i64>,
        write: Option<WriteId>,
        turn: NewTurn,
    ) -> Result<Appended, StoreError> {
        let store = self.clone();
        let limit = self.turn_write_timeout;
        self.detached(async move {
            // Grouped with the appends of other sessions when statements
            // are busy (crate::group).
            tokio::time::timeout(
                limit,
                store.append_grouped(session, epoch, known, write, turn),
            )
            .await
            .unwrap_or(Err(StoreError::Timeout {
                op: "append_turn",
                after: limit,
            }))
        })
        .await
    }

    /// Announces to other replicas that a tool call is about to run. Not
    /// persisted; an error means the announcement did not go out.
    pub async fn notify_tool_call_start(
        &self,
        session: SessionId,
        assistant_seq: Seq,
        call_id: &str,
        tool_name: &str,
        started_at: time::OffsetDateTime,
    ) -> Result<(), StoreError> {
        let payload = crate::notify::tool_call_start_payload(
            self.replica.as_str(),
            session,
            assistant_seq,
            call_id,
            tool_name,
            started_at,
        );
        let origin = self.replica.as_str().to_owned();
        // Only when another replica watches the session (see APPEND_SQL).
        self.run("notify_tool_call_start", async |c| {
            c.execute(
                "SELECT pg_notify($1, $2) FROM sessions WHERE id = $3 \
                 AND cardinality(array_remove(watch_replicas, $4::text)) > 0",
                &[
                    &crate::notify::CHANNEL,
                    &payload,
                    session.as_uuid(),
                    &origin,
                ],
            )
            .await?;
            Ok(())
        })
        .await
    }

    /// Registers this replica as watching `session`, so the session's
    /// turns and tool-call starts are announced to it (see `APPEND_SQL`).
    /// Call it after subscribing locally and before reading stored turns:
    /// every turn then reaches the watcher through one or the other.
    /// Nothing to do for a session that is not pending or running, or that
    /// this replica already registered.
    pub async fn register_watcher(&self, session: SessionId) -> Result<(), StoreError> {
        let replica = self.replica.as_str().to_owned();
        let active: Vec<&str> = SessionStatus::ACTIVE.iter().map(|s| s.as_str()).collect();
        self.run("register_watcher", async |c| {
            c.execute(
                "UPDATE sessions SET watch_replicas = array_append(watch_replicas, $2::text) \
                 WHERE id = $1 AND status = ANY($3) \
                 AND NOT ($2::text = ANY (watch_replicas))",
                &[session.as_uuid(), &replica, &active],
            )
            .await?;
            Ok(())
        })
        .await
    }

    /// One committed turn by seq (for notifications too large to carry it).
    pub async fn get_turn(&self, session: SessionId, seq: Seq) -> Result<Option<Turn>, StoreError> {
        let sql = format!("SELECT {TURN_COLUMNS} FROM turns WHERE session_id = $1 AND seq = $2");
        let row = self
            .run("get_turn", async |c| {
                Ok(c.query_opt(&sql, &[session.as_uuid(), &seq.as_i64()])
                    .await?)
            })
            .await?;
        row.as_ref().map(turn_from_row).transpose()
    }

    /// Committed turns with seq after `after`, oldest first, at most
    /// `limit` of them, with the session's head. Unknown session: NotFound.
    pub async fn list_turns(
        &self,
        session: SessionId,
        after: AfterSeq,
        limit: u32,
    ) -> Result<TurnPage, StoreError> {
        let sql = format!(
            "SELECT {TURN_COLUMNS} FROM turns WHERE session_id = $1 AND seq > $2 \
             ORDER BY seq LIMIT $3"
        );
        let (head, mut turns) = self
            .head_and_page("list_turns", session, &sql, after.as_i64(), limit)
            .await?;
        // The head is read just before the page; a turn committed in
        // between may lie past it. The page is then the better witness.
        let head = Seq::from_stored(head).max(turns.last().map(|t| t.seq));
        let more = turns.len() > limit as usize;
        turns.truncate(limit as usize);
        Ok(TurnPage { turns, head, more })
    }

    /// Committed turns with seq below `before`, the `limit` nearest to it,
    /// oldest first, with the session's head: the page a reader opening a
    /// long session at its newest turns reads, and every older page after
    /// it. `more` says turns older than the page exist. Unknown session:
    /// NotFound.
    pub async fn list_turns_before(
        &self,
        session: SessionId,
        before: i64,
        limit: u32,
    ) -> Result<TurnPage, StoreError> {
        // Newest first, so the primary key's range scan stops after
        // `limit` rows however old the session is.
        let sql = format!(
            "SELECT {TURN_COLUMNS} FROM turns WHERE session_id = $1 AND seq < $2 \
             ORDER BY seq DESC LIMIT $3"
        );
        let (head, mut turns) = self
            .head_and_page("list_turns_before", session, &sql, before, limit)
            .await?;
        let more = turns.len() > limit as usize;
        turns.truncate(limit as usize);
        turns.reverse();
        let head = Seq::from_stored(head).max(turns.last().map(|t| t.seq));
        Ok(TurnPage { turns, head, more })
    }

    /// The session's stored head, then `page_sql` (bound to the session,
    /// `bound` and one row more than `limit`, so the caller can tell a
    /// further page exists) in one connection. Unknown session: NotFound.
    async fn head_and_page(
        &self,
        op: &'static str,
        session: SessionId,
        page_sql: &str,
        bound: i64,
        limit: u32,
    ) -> Result<(i64, Vec<Turn>), StoreError> {
        let fetch = i64::from(limit) + 1;
        let (head, rows) = self
            .run(op, async |c| {
                let head = c
                    .query_opt(
                        "SELECT head_seq FROM sessions WHERE id = $1",
                        &[session.as_uuid()],
                    )
                    .await?;
                let Some(head) = head else {
                    return Ok((None, Vec::new()));
                };
                let head: i64 = crate::rows::get(&head, 0)?;
                let stmt = c.prepare_cached(page_sql).await?;
                let rows = c.query(&stmt, &[session.as_uuid(), &bound, &fetch]).await?;
                Ok((Some(head), rows))
            })
            .await?;
        let Some(head) = head else {
            return Err(StoreError::NotFound {
                what: "session",
                id: session.to_string(),
            });
        };
        let turns = rows
            .iter()
            .map(turn_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        Ok((head, turns))
    }
}

impl Store {
    /// Every committed turn of a session, oldest first, read in pages.
    /// What a burst rebuilds its transcript from.
    /// The turns a resume reads, in ONE query: with a
    /// latest compaction that carries counters (`CompactionInfo::carried`),
    /// the opening user turn and every turn from that compaction's first
    /// retained seq (the compaction and later turns included), so the read
    /// stops growing with the session's age; without one, every turn.
    /// Both arms are index range scans on the primary key (the latest
    /// compaction is found by `turns_compactions`, migration V12).
    pub async fn resume_turns(&self, session: SessionId) -> Result<Vec<Turn>, StoreError> {
        let sql = format!(
            "WITH c AS (SELECT seq, tool_calls FROM turns \
                 WHERE session_id = $1 AND role = 'compaction' ORDER BY seq DESC LIMIT 1), \
             r AS (SELECT COALESCE((SELECT CASE WHEN tool_calls ? 'carried' \
                 THEN LEAST(seq, (tool_calls->>'first_retained_seq')::bigint) ELSE 1 END \
                 FROM c), 1) AS from_seq), \
             o AS (SELECT seq FROM turns WHERE session_id = $1 AND role = 'user' \
                 ORDER BY seq LIMIT 1) \
             SELECT {TURN_COLUMNS} FROM turns WHERE session_id = $1 \
                 AND seq = (SELECT seq FROM o) AND seq < (SELECT from_seq FROM r) \
             UNION ALL \
             SELECT {TURN_COLUMNS} FROM turns WHERE session_id = $1 \
                 AND seq >= (SELECT from_seq FROM r) \
             ORDER BY seq"
        );
        let rows = self
            .run("resume_turns", async |c| {
                let stmt = c.prepare_cached(&sql).await?;
                Ok(c.query(&stmt, &[session.as_uuid()]).await?)
            })
            .await?;
        rows.iter().map(turn_from_row).collect()
    }

    pub async fn all_turns(&self, session: SessionId) -> Result<Vec<Turn>, StoreError> {
        const PAGE: u32 = 1000;
        let mut turns = Vec::new();
        let mut after = AfterSeq::START;
        loop {
            let page = self.list_turns(session, after, PAGE).await?;
            if let Some(last) = page.turns.last() {
                after = AfterSeq::after(last.seq);
            }
            turns.extend(page.turns);
            if !page.more {
                return Ok(turns);
            }
        }
    }
}
