//! Group commit of turn appends.
//!
//! Every append waits in one queue per lane. At most
//! [`crate::StoreConfig::append_statements`] append statements run at a
//! time; a caller that gets a slot takes everything waiting (one turn per
//! session, at most [`MAX_GROUP`]) and writes it in ONE statement, so under
//! load the per-statement work PostgreSQL does (executor start, the
//! constraint expressions it rebuilds per statement, the commit) is paid
//! once for many sessions. A caller that finds a free slot and nothing
//! else waiting first yields once, holding the slot, so that appends of
//! other sessions whose tasks are ready to run right now queue behind it
//! and go in its statement; still alone, it writes its turn alone, with
//! the single-turn statement: without contention nothing changes but
//! that one yield.
//!
//! What a turn is promised is the single append's ([`crate::turns`]): the
//! group statement bumps each session row under its lock, fences each
//! turn by its own epoch in the same `UPDATE`, announces each turn to
//! other replicas in the same statement, and one turn's fence failing
//! does not stop the others (it matches no row and is reported as the
//! single append reports it). A statement PostgreSQL refuses commits
//! nothing, so then each turn is written again alone and gets its own
//! outcome (a repeated write id, a constraint); a statement whose answer
//! did not come back is unknown for every turn in it, as a single
//! append's would be.
//!
//! Sessions are locked in id order, so two groups that share two sessions
//! cannot deadlock each other. A caller that gave up (its timeout, its
//! shutdown) before its turn was taken is never written.

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex},
};

use inquest_core::{NewTurn, Seq, SessionId};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};
use tokio_postgres::{Row, types::ToSql};
use uuid::Uuid;

use crate::{
    ReplicaId, Store, StoreError,
    turns::{Appended, Staged, StoredFields, WriteId, insert_turn_seen, no_row, to_i64},
};

/// Most turns one group statement writes.
pub const MAX_GROUP: usize = 32;

/// Default for [`crate::StoreConfig::append_statements`].
pub const DEFAULT_APPEND_STATEMENTS: usize = 1;

/// The appends of one lane waiting for a statement, and the slots.
pub(crate) struct AppendQueue {
    waiting: Mutex<VecDeque<Pending>>,
    slots: Arc<Semaphore>,
}

/// One caller's turn, and where its outcome goes.
struct Pending {
    session: SessionId,
    epoch: Option<i64>,
    /// The head this writer knows committed (see `StoreError::HeadBehind`).
    known: Option<i64>,
    write: Option<WriteId>,
    turn: NewTurn,
    reply: oneshot::Sender<Result<Appended, StoreError>>,
}

impl AppendQueue {
    pub(crate) fn new(statements: usize) -> Arc<Self> {
        Arc::new(Self {
            waiting: Mutex::new(VecDeque::new()),
            slots: Arc::new(Semaphore::new(statements.max(1))),
        })
    }

    /// No turn is waiting for a statement.
    fn is_idle(&self) -> bool {
        self.lock().is_empty()
    }

    fn push(&self, pending: Pending) {
        self.lock().push_back(pending);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Pending>> {
        // A panic while holding it cannot leave the queue half-changed
        // (push and the swap in `take` are single moves), so a poisoned
        // lock is still a sound queue.
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The next group: the oldest waiting turn of each session whose
    /// caller still waits, at most [`MAX_GROUP`], in session-id order.
    fn take(&self) -> Vec<Pending> {
        let mut waiting = self.lock();
        let mut group: Vec<Pending> = Vec::new();
        let mut rest = VecDeque::with_capacity(waiting.len());
        while let Some(p) = waiting.pop_front() {
            if p.reply.is_closed() {
                continue;
            }
            if group.len() < MAX_GROUP && !group.iter().any(|g| g.session == p.session) {
                group.push(p);
            } else {
                rest.push_back(p);
            }
        }
        *waiting = rest;
        drop(waiting);
        group.sort_by_key(|p| *p.session.as_uuid());
        group
    }
}

impl Store {
    /// Queues one turn and waits for its outcome, writing the group it
    /// is in when a slot is free (see the module docs).
    pub(crate) async fn append_grouped(
        &self,
        session: SessionId,
        epoch: Option<i64>,
        known: Option<i64>,
        write: Option<WriteId>,
        turn: NewTurn,
    ) -> Result<Appended, StoreError> {
        let (reply, answer) = oneshot::channel();
        let pending = Pending {
            session,
            epoch,
            known,
            write,
            turn,
            reply,
        };
        if let Ok(slot) = self.appends.slots.clone().try_acquire_owned()
            && self.appends.is_idle()
        {
            // Nothing waits and a slot is free. First, holding the slot,
            // let the tasks that are ready to run right now go once: an
            // append of another session among them queues behind this one
            // and joins its statement, instead of waiting for it to commit
            // (busy sessions on one agent thread, woken together by the
            // statement that answered them, otherwise alternate a turn
            // alone with a group of the rest: two commits a round).
            tokio::task::yield_now().await;
            if self.appends.is_idle() {
                // Still alone: written here, as a single append.
                return self.append_alone(slot, pending).await;
            }
            // Others queued behind it: a group, written as below (this
            // turn may be left for the next one if the group is full).
            self.appends.push(pending);
            self.spawn_group(self.appends.take(), slot);
        } else {
            self.appends.push(pending);
        }
        self.wait_for_outcome(answer).await
    }

    /// Writes a turn that found itself alone here, with no hand-off to
    /// another task (what a quiet replica does every time). No timer of
    /// its own: the caller ([`Store::append`]) bounds this whole call by
    /// the same `turn_write_timeout`.
    async fn append_alone(
        &self,
        slot: OwnedSemaphorePermit,
        pending: Pending,
    ) -> Result<Appended, StoreError> {
        let Pending {
            session,
            epoch,
            known,
            write,
            turn,
            ..
        } = pending;
        let outcome = self
            .run_measured("append_turn", None, async |c| {
                insert_turn_seen(&*c, &self.replica, session, epoch, known, write, &turn).await
            })
            .await;
        drop(slot);
        outcome
    }

    /// Waits for the queued turn's `answer`, writing the waiting group
    /// whenever a slot comes free first.
    async fn wait_for_outcome(
        &self,
        mut answer: oneshot::Receiver<Result<Appended, StoreError>>,
    ) -> Result<Appended, StoreError> {
        loop {
            let slot = tokio::select! {
                biased;
                outcome = &mut answer => return answered(outcome),
                slot = self.appends.slots.clone().acquire_owned() => {
                    slot.map_err(|_| StoreError::ShuttingDown)?
                }
            };
            let group = self.appends.take();
            if group.is_empty() {
                // Another caller took this turn: its statement answers.
                drop(slot);
                return answered(answer.await);
            }
            self.spawn_group(group, slot);
        }
    }

    /// Writes `group` apart from this caller, so its timeout does not cut
    /// short the others' writes; the store's tracker owns it. The slot is
    /// freed when the write ends.
    fn spawn_group(&self, group: Vec<Pending>, slot: OwnedSemaphorePermit) {
        let store = self.clone();
        self.writes.spawn(async move {
            store.write_group(group).await;
            drop(slot);
        });
    }

    /// Writes `group` and sends each turn its outcome.
    async fn write_group(&self, mut group: Vec<Pending>) {
        let limit = self.turn_write_timeout;
        if group.len() == 1 {
            if let Some(p) = group.pop() {
                let outcome = self
                    .run_with_timeout("append_turn", limit, async |c| {
                        insert_turn_seen(
                            &*c,
                            &self.replica,
                            p.session,
                            p.epoch,
                            p.known,
                            p.write,
                            &p.turn,
                        )
                        .await
                    })
                    .await;
                let _ = p.reply.send(outcome);
            }
            return;
        }
        let outcomes = self
            .run_with_timeout("append_turns", limit, async |c| {
                insert_group(&*c, &self.replica, &group).await
            })
            .await;
        match outcomes {
            Ok(outcomes) => {
                for (p, outcome) in group.into_iter().zip(outcomes) {
                    let _ = p.reply.send(outcome);
                }
            }
            Err(e) => {
                for p in group {
                    let _ = p.reply.send(Err(shared(&e)));
                }
            }
        }
    }
}

fn answered(
    outcome: Result<Result<Appended, StoreError>, oneshot::error::RecvError>,
) -> Result<Appended, StoreError> {
    outcome.unwrap_or_else(|_| {
        Err(StoreError::Internal(
            "the append's group statement ended without an outcome".into(),
        ))
    })
}

/// One group statement's failure, told to each of its turns.
fn shared(e: &StoreError) -> StoreError {
    match e {
        StoreError::Timeout { op, after } => StoreError::Timeout { op, after: *after },
        StoreError::OutcomeUnknown { op, after } => {
            StoreError::OutcomeUnknown { op, after: *after }
        }
        StoreError::ShuttingDown => StoreError::ShuttingDown,
        StoreError::Unavailable(cause) => {
            StoreError::Unavailable(Box::<dyn std::error::Error + Send + Sync>::from(
                cause.to_string(),
            ))
        }
        other => StoreError::Internal(format!("group append failed: {other}")),
    }
}

/// The group statement: [`crate::turns`]'s append over arrays, one
/// element per session (distinct), the token upsert included (per row, it
/// writes only for turns that spent tokens), the notification built as the
/// single append builds it (once, and only for a watched turn). The update
/// carries each session's element through its `RETURNING`, so the token
/// upsert, the insert and the final `SELECT` read `bumped` alone: no join
/// (three hash joins and four scans of a materialised `unnest` before,
/// about a tenth of the statement's instructions per turn at 8 sessions;
/// `benches/callgrind/append.py`).
const GROUP_SQL: &str = "WITH bumped AS ( \
     UPDATE sessions s SET head_seq = s.head_seq + 1, turn_count = s.turn_count + 1, \
         tool_calls = s.tool_calls + v.ntc, input_tokens = s.input_tokens + v.it, \
         output_tokens = s.output_tokens + v.ot, \
         cache_read_input_tokens = s.cache_read_input_tokens + v.cr, \
         cache_creation_input_tokens = s.cache_creation_input_tokens + v.cw, \
         cost_nano_usd = s.cost_nano_usd + coalesce(v.cu, 0), \
         cost_unknown_turns = s.cost_unknown_turns \
             + CASE WHEN v.role = 'assistant' AND v.cu IS NULL THEN 1 ELSE 0 END \
     FROM unnest($1::uuid[], $2::text[], $3::text[], $4::jsonb[], $5::text[], \
         $6::text[], $7::boolean[], $8::bigint[], $9::bigint[], $10::bigint[], $11::bigint[], \
         $13::uuid[], $14::boolean[], $15::jsonb[], $16::bigint[], $17::bigint[], \
         $18::bigint[], $19::bigint[]) \
         AS v(sid, role, content, tc, ci, tn, e, ntc, it, ot, epoch, wid, x, rp, cr, cw, cu, \
              known) \
     WHERE s.id = v.sid AND (v.epoch IS NULL OR s.lease_epoch = v.epoch) \
         AND (v.known IS NULL OR s.head_seq >= v.known) \
     RETURNING s.id AS sid, s.head_seq AS seq, s.tenant, \
         cardinality(array_remove(s.watch_replicas, $12::text)) > 0 AS watched, \
         v.role, v.content, v.tc, v.ci, v.tn, v.e, v.it, v.ot, v.wid, v.x, v.rp, v.cr, v.cw, \
         v.cu), \
 used AS ( \
     INSERT INTO token_usage (tenant, day, session_id, tokens) \
     SELECT b.tenant, (now() AT TIME ZONE 'UTC')::date, b.sid, b.it + b.ot \
     FROM bumped b WHERE b.it + b.ot > 0 \
     ON CONFLICT (tenant, day, session_id) \
     DO UPDATE SET tokens = token_usage.tokens + EXCLUDED.tokens), \
 ins AS ( \
     INSERT INTO turns (session_id, seq, role, content, tool_calls, tool_call_id, \
                        tool_name, is_error, input_tokens, output_tokens, write_id, \
                        escaped, recovery_plan, cache_read_input_tokens, \
                        cache_creation_input_tokens, cost_nano_usd, created_at) \
     SELECT b.sid, b.seq, b.role, b.content, b.tc, b.ci, b.tn, b.e, b.it, b.ot, b.wid, \
         b.x, b.rp, b.cr, b.cw, b.cu, now() \
     FROM bumped b) \
 SELECT b.sid, b.seq, now(), b.watched, \
     CASE WHEN b.watched THEN (SELECT pg_notify('inquest_events', \
         CASE WHEN octet_length(p.whole) <= 7900 THEN p.whole \
         ELSE json_build_object('v', 1, 'o', $12::text, 'k', 'turn', 's', b.sid, \
             'q', b.seq)::text END) \
     FROM (SELECT json_build_object('v', 1, 'o', $12::text, 'k', 'turn', 's', b.sid, \
         'q', b.seq, \
         'turn', json_build_object('r', b.role, 'c', b.content, 'tc', b.tc, 'ci', b.ci, \
             'tn', b.tn, 'e', b.e, 'it', b.it, 'ot', b.ot, 'at', now(), 'x', b.x, \
             'rp', b.rp, 'cr', b.cr, 'cw', b.cw, 'cu', b.cu))::text AS whole OFFSET 0) p) END \
 FROM bumped b";

/// Writes `group` (distinct sessions) in one statement; one outcome per
/// turn, in `group`'s order. Err: the statement's outcome is not known.
async fn insert_group(
    client: &impl deadpool_postgres::GenericClient,
    origin: &ReplicaId,
    group: &[Pending],
) -> Result<Vec<Result<Appended, StoreError>>, StoreError> {
    let staged: Vec<Staged<'_>> = group.iter().map(|p| Staged::new(&p.turn)).collect();
    let fields: Vec<_> = staged.iter().map(Staged::fields).collect();
    let columns = GroupColumns::new(origin, group, &staged, &fields);
    let stmt = client.prepare_cached(GROUP_SQL).await?;
    let rows = client.query(&stmt, &columns.params()).await;
    drop(columns);
    drop(fields);
    let rows = match rows {
        Ok(rows) => rows,
        Err(e) => {
            return match StoreError::from(e) {
                // Refused: nothing committed. Each turn alone gets its own
                // outcome (one repeated write id, one constraint).
                StoreError::Database(_) => Ok(insert_each(client, origin, group).await),
                other => Err(other),
            };
        }
    };
    let committed = committed_by_session(&rows)?;
    Ok(group_outcomes(client, group, staged, committed).await)
}

/// The arrays [`GROUP_SQL`] takes, one element per turn of the group, and
/// the origin it announces turns with.
struct GroupColumns<'g> {
    sessions: Vec<Uuid>,
    roles: Vec<&'g str>,
    contents: Vec<&'g str>,
    calls: Vec<&'g serde_json::Value>,
    call_ids: Vec<Option<&'g str>>,
    tool_names: Vec<Option<&'g str>>,
    errors: Vec<bool>,
    call_counts: Vec<i64>,
    inputs: Vec<i64>,
    outputs: Vec<i64>,
    epochs: Vec<Option<i64>>,
    knowns: Vec<Option<i64>>,
    origin: &'g str,
    writes: Vec<Option<Uuid>>,
    escaped: Vec<bool>,
    plans: Vec<Option<&'g serde_json::Value>>,
    cache_reads: Vec<i64>,
    cache_writes: Vec<i64>,
    costs: Vec<Option<i64>>,
}

impl<'g> GroupColumns<'g> {
    fn new(
        origin: &'g ReplicaId,
        group: &'g [Pending],
        staged: &'g [Staged<'g>],
        fields: &'g [StoredFields<'g>],
    ) -> Self {
        GroupColumns {
            sessions: group.iter().map(|p| *p.session.as_uuid()).collect(),
            roles: group.iter().map(|p| p.turn.role().as_str()).collect(),
            contents: fields.iter().map(|f| &*f.content).collect(),
            calls: fields.iter().map(|f| &*f.tool_calls).collect(),
            call_ids: fields.iter().map(|f| f.call_id.as_deref()).collect(),
            tool_names: fields.iter().map(|f| f.tool_name.as_deref()).collect(),
            errors: staged.iter().map(|s| s.is_error).collect(),
            call_counts: group
                .iter()
                .map(|p| to_i64(p.turn.tool_call_count() as u64))
                .collect(),
            inputs: staged
                .iter()
                .map(|s| to_i64(s.usage.input_tokens))
                .collect(),
            outputs: staged
                .iter()
                .map(|s| to_i64(s.usage.output_tokens))
                .collect(),
            epochs: group.iter().map(|p| p.epoch).collect(),
            knowns: group.iter().map(|p| p.known).collect(),
            origin: origin.as_str(),
            writes: group
                .iter()
                .map(|p| p.write.as_ref().map(|w| *w.as_uuid()))
                .collect(),
            escaped: staged.iter().map(|s| s.escaped).collect(),
            plans: fields.iter().map(|f| f.recovery_plan.as_deref()).collect(),
            cache_reads: staged
                .iter()
                .map(|s| to_i64(s.usage.cache_read_input_tokens))
                .collect(),
            cache_writes: staged
                .iter()
                .map(|s| to_i64(s.usage.cache_creation_input_tokens))
                .collect(),
            costs: staged
                .iter()
                .map(|s| s.usage.cost.map(|c| to_i64(c.nanos())))
                .collect(),
        }
    }

    /// `$1` to `$18`, in order.
    fn params(&self) -> [&(dyn ToSql + Sync); 19] {
        [
            &self.sessions,
            &self.roles,
            &self.contents,
            &self.calls,
            &self.call_ids,
            &self.tool_names,
            &self.errors,
            &self.call_counts,
            &self.inputs,
            &self.outputs,
            &self.epochs,
            &self.origin,
            &self.writes,
            &self.escaped,
            &self.plans,
            &self.cache_reads,
            &self.cache_writes,
            &self.costs,
            &self.knowns,
        ]
    }
}

/// Each turn of `group` written alone, with the single append.
async fn insert_each(
    client: &impl deadpool_postgres::GenericClient,
    origin: &ReplicaId,
    group: &[Pending],
) -> Vec<Result<Appended, StoreError>> {
    let mut outcomes = Vec::with_capacity(group.len());
    for p in group {
        outcomes.push(
            insert_turn_seen(
                client, origin, p.session, p.epoch, p.known, p.write, &p.turn,
            )
            .await,
        );
    }
    outcomes
}

/// What the group statement wrote, by session: the turn's seq, when it
/// was written, and whether another replica watches the session.
fn committed_by_session(
    rows: &[Row],
) -> Result<HashMap<Uuid, (Seq, time::OffsetDateTime, bool)>, StoreError> {
    let mut committed = HashMap::with_capacity(rows.len());
    for row in rows {
        let session: Uuid = crate::rows::get(row, 0)?;
        let seq = crate::rows::seq(crate::rows::get(row, 1)?)?;
        let created_at: time::OffsetDateTime = crate::rows::get(row, 2)?;
        let watched: bool = crate::rows::get(row, 3)?;
        committed.insert(session, (seq, created_at, watched));
    }
    Ok(committed)
}

/// Each turn's outcome, in `group`'s order: the turn `committed` holds
/// for its session, else why its session matched no row.
async fn group_outcomes(
    client: &impl deadpool_postgres::GenericClient,
    group: &[Pending],
    staged: Vec<Staged<'_>>,
    mut committed: HashMap<Uuid, (Seq, time::OffsetDateTime, bool)>,
) -> Vec<Result<Appended, StoreError>> {
    let mut outcomes = Vec::with_capacity(group.len());
    for (p, staged) in group.iter().zip(staged) {
        outcomes.push(match committed.remove(p.session.as_uuid()) {
            Some((seq, created_at, watched_elsewhere)) => Ok(Appended {
                turn: staged.committed(p.session, seq, created_at),
                watched_elsewhere,
            }),
            // Fenced off, or no such session: the single append's answer.
            None => Err(no_row(client, p.session, p.epoch, p.known).await),
        });
    }
    outcomes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(session: SessionId) -> (Pending, oneshot::Receiver<Result<Appended, StoreError>>) {
        let (reply, answer) = oneshot::channel();
        (
            Pending {
                session,
                epoch: None,
                known: None,
                write: None,
                turn: NewTurn::notice("n"),
                reply,
            },
            answer,
        )
    }

    fn session(n: u128) -> SessionId {
        SessionId::from_uuid(Uuid::from_u128(n))
    }

    #[test]
    fn a_group_takes_one_turn_per_session_in_id_order_and_skips_callers_gone() {
        let queue = AppendQueue::new(1);
        let mut answers = Vec::new();
        for n in [3, 1, 3, 2, 4] {
            let (p, answer) = pending(session(n));
            queue.push(p);
            answers.push(answer);
        }
        // The caller of session 4's turn gave up before any group took it.
        drop(answers.pop());
        let group: Vec<u128> = queue
            .take()
            .iter()
            .map(|p| p.session.as_uuid().as_u128())
            .collect();
        assert_eq!(group, [1, 2, 3]);
        // The second turn of session 3 waits for the next group; the
        // abandoned one is gone.
        let next: Vec<u128> = queue
            .take()
            .iter()
            .map(|p| p.session.as_uuid().as_u128())
            .collect();
        assert_eq!(next, [3]);
        assert!(queue.take().is_empty());
    }

    #[test]
    fn a_group_is_bounded() {
        let queue = AppendQueue::new(1);
        let mut answers = Vec::new();
        for n in 0..(MAX_GROUP as u128 + 5) {
            let (p, answer) = pending(session(n));
            queue.push(p);
            answers.push(answer);
        }
        assert_eq!(queue.take().len(), MAX_GROUP);
        assert_eq!(queue.take().len(), 5);
    }
}
