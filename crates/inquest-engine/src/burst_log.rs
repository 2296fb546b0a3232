//! One burst's writer: every write the burst makes goes through its
//! [`BurstLog`], fenced by the lease epoch in the statement that writes,
//! and bounded by the lease's deadline ([`LeaseClock`]).
//!
//! Faults are met here, not in the loop:
//! - a write whose answer does not come (a timeout, a cut connection) is
//!   sent again under the same [`WriteId`], so it is applied at most once
//!   and the burst learns whether it committed instead of guessing;
//! - a store that is unreachable is retried with backoff for as long as the
//!   lease deadline allows; past it the burst hands the session over
//!   (`store_unavailable`), never marks it failed;
//! - a newer epoch (another replica claimed the session) ends the burst
//!   with `lease_lost` and nothing more is written;
//! - the local effects of closing (ending watchers, latching, forgetting
//!   running calls) happen only after the fenced status change committed.

use std::{
    collections::{BTreeMap, HashSet},
    future::Future,
    sync::{
        Arc, Mutex, OnceLock, PoisonError,
        atomic::{AtomicBool, AtomicI64, Ordering},
    },
    time::Duration,
};

use inquest_agent::{BoxFuture, HeldCall, SinkError, TurnSink, failpoints};
use inquest_broadcast::ToolCallStart;
use inquest_core::{
    Backoff, ExitReason, NewTurn, Seq, SessionId, ToolCall, Turn, approval::Gate, error_chain,
};
use inquest_store::{Lease, NewApproval, Store, StoreError, Transition, WriteId};
use time::OffsetDateTime;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::{
    announced::Heard,
    live::LiveView,
    turn_log::{LeaseTiming, TurnLogError},
};

/// First pause between attempts of a write the store did not take; it
/// doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(50);
/// How often a burst that gave its lease up asks an absent store for the
/// head (`BurstLog::look_for_lost_turns`).
const LOOK_AGAIN: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// Until when this worker may act for its lease: the instant the latest
/// successful claim or renewal was *sent*, plus the TTL, minus a safety
/// margin. The database computed the expiry other replicas see after that
/// instant, so before the deadline no other replica can have claimed the
/// session. Shared by the lease keeper (which moves it) and the burst
/// (which starts no tool and retries no write past it).
#[derive(Clone, Debug)]
pub struct LeaseClock {
    /// A std mutex: read and written in one step, never across an await.
    deadline: Arc<Mutex<Instant>>,
}

impl LeaseClock {
    /// The clock of a lease just claimed (by a statement sent at
    /// `lease.sent_at()`).
    pub fn new(lease: &Lease, ttl: Duration, margin: Duration) -> Self {
        Self::claimed_at(lease.sent_at(), ttl, margin)
    }

    /// The clock of a lease whose claim was sent at `sent_at`.
    pub fn claimed_at(sent_at: Instant, ttl: Duration, margin: Duration) -> Self {
        Self {
            deadline: Arc::new(Mutex::new(deadline(sent_at, ttl, margin))),
        }
    }

    pub fn deadline(&self) -> Instant {
        *self.deadline.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A renewal sent at `sent_at` succeeded.
    pub fn renewed(&self, sent_at: Instant, ttl: Duration, margin: Duration) {
        let mut d = self.deadline.lock().unwrap_or_else(PoisonError::into_inner);
        *d = (*d).max(deadline(sent_at, ttl, margin));
    }

    /// Whether the deadline has passed: the lease may be gone.
    pub fn passed(&self) -> bool {
        Instant::now() >= self.deadline()
    }
}

fn deadline(sent_at: Instant, ttl: Duration, margin: Duration) -> Instant {
    sent_at + ttl.saturating_sub(margin)
}

/// The persist-then-publish path of one burst, fenced by its lease. Made
/// only by [`crate::TurnLog::claim_burst`] and [`crate::TurnLog::adopt`].
#[derive(Clone)]
pub struct BurstLog {
    /// The burst lane of the store: every write here checks the lease.
    store: Store,
    /// Where a committed turn, a tool start and streamed text are shown.
    live: LiveView,
    lease: Lease,
    clock: LeaseClock,
    /// The session's head seq as this burst knows it (0: not known yet):
    /// set from the row the resume read and moved by every append. Under
    /// the lease this burst is the session's only writer, so the next
    /// turn takes head + 1 (the seq streamed text is announced under).
    head: Arc<AtomicI64>,
    /// Whether another replica watched the session at this burst's latest
    /// append (`Appended::watched_elsewhere`; `true` until the first). A
    /// tool start is announced to other replicas only when it is set:
    /// registering as a watcher updates the session row the append
    /// updates, so a replica registered after that append drains it (and
    /// every turn before) once registered, and its first drain takes the
    /// first call of the latest assistant turn that no drained result
    /// answers as running (`watch.rs` `open_calls`); calls run one after
    /// another and the latest append is the previous call's result or the
    /// assistant turn itself, so that first open call is the one starting.
    /// Saves a round trip per tool call when nobody else watches.
    watched_elsewhere: Arc<AtomicBool>,
    /// What each of this burst's latest turns was, by seq, for the
    /// tombstones of turns a failover loses (bounded: [`DESCRIBED`]).
    described: Arc<Mutex<BTreeMap<i64, String>>>,
    /// Set once by the resume, before the agent runs: the approval policy
    /// of the session's tenant, and the approved calls this burst runs
    /// first (each marked started in the store before it starts).
    approval: Arc<OnceLock<Approval>>,
    /// Fires when a message interrupts this burst (`if_running =
    /// INTERRUPT`), from this replica's API, the feed, the lease keeper's
    /// renewal, or at once when the claim found one waiting.
    interrupt: CancellationToken,
}

/// A burst's approval state, from [`BurstLog::set_approval`].
struct Approval {
    gate: Option<Arc<Gate>>,
    approved: HashSet<String>,
}

/// Turns of a burst remembered for the tombstones of a failover.
const DESCRIBED: usize = 256;

/// How one fenced write ended after its retries.
enum Attempts<T> {
    Done(T),
    /// The store stayed unreachable until the lease deadline.
    Unavailable(StoreError),
    /// Refused for good (lease lost, content refused, ...).
    Refused(StoreError),
}

impl<T> Attempts<T> {
    /// The write's result; a refusal becomes `refused` (a write's own
    /// error: not persisted, or the close not recorded).
    fn into_result(self, refused: fn(StoreError) -> TurnLogError) -> Result<T, TurnLogError> {
        match self {
            Attempts::Done(v) => Ok(v),
            Attempts::Unavailable(e) => Err(TurnLogError::Unavailable(e)),
            Attempts::Refused(e) => Err(refused(e)),
        }
    }

    /// The outcome label of the write's span.
    fn label(&self) -> &'static str {
        match self {
            Attempts::Done(_) => "ok",
            Attempts::Unavailable(_) => "unavailable",
            Attempts::Refused(_) => "refused",
        }
    }
}

impl BurstLog {
    pub(crate) fn new(
        store: Store,
        live: LiveView,
        lease: Lease,
        timing: LeaseTiming,
        interrupt: CancellationToken,
    ) -> Self {
        let clock = LeaseClock::new(&lease, timing.ttl, timing.margin);
        if lease.interrupt_requested() {
            metrics::counter!("inquest_interrupts_total", "via" => "claim").increment(1);
            interrupt.cancel();
        }
        Self {
            store,
            live,
            lease,
            clock,
            head: Arc::default(),
            watched_elsewhere: Arc::new(AtomicBool::new(true)),
            described: Arc::default(),
            approval: Arc::default(),
            interrupt,
        }
    }

    /// Fires when a message interrupts this burst.
    pub fn interrupt(&self) -> &CancellationToken {
        &self.interrupt
    }

    /// The approval policy the burst screens calls with (`None`: none),
    /// and the approved calls it runs first. Set once, by the runner
    /// before the agent runs (or by an embedder or a benchmark that drives
    /// bursts itself); a second call is ignored.
    pub fn set_approval(&self, gate: Option<Arc<Gate>>, approved: HashSet<String>) {
        let _ = self.approval.set(Approval { gate, approved });
    }

    fn is_approved(&self, call_id: &str) -> bool {
        self.approval
            .get()
            .is_some_and(|a| a.approved.contains(call_id))
    }

    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    pub fn clock(&self) -> &LeaseClock {
        &self.clock
    }

    pub fn session(&self) -> SessionId {
        self.lease.session()
    }

    /// This replica's live view, where the burst's turns are shown.
    pub fn live(&self) -> &LiveView {
        &self.live
    }

    /// The burst lane, for the resume's reads under this lease.
    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    /// Records the session's head seq read under this lease.
    pub fn note_head(&self, head: Option<Seq>) {
        if let Some(head) = head {
            self.head.fetch_max(head.as_i64(), Ordering::Relaxed);
        }
    }

    /// The seq the next turn of this burst will take, if the head is known.
    fn next_seq(&self) -> Option<Seq> {
        match self.head.load(Ordering::Relaxed) {
            0 => None,
            head => Seq::from_stored(head.saturating_add(1)),
        }
    }

    /// Sends `op` until it succeeds, is refused for good, or the lease
    /// deadline leaves no room for another attempt. Only for writes that
    /// are safe to send again: fenced status changes (a second copy matches
    /// no row) and turns under one write id.
    async fn with_retries<T, F, Fut>(&self, what: &'static str, mut op: F) -> Attempts<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, StoreError>>,
    {
        let mut backoff = Backoff::new(FIRST_BACKOFF, MAX_BACKOFF);
        let mut warned = false;
        loop {
            match op().await {
                Ok(v) => {
                    if warned {
                        tracing::info!(session = %self.session(), what, "store answered again");
                    }
                    return Attempts::Done(v);
                }
                Err(e) if e.is_transient() => {
                    let delay = backoff.next_delay();
                    if Instant::now() + delay >= self.clock.deadline() {
                        return Attempts::Unavailable(e);
                    }
                    if !warned {
                        tracing::warn!(session = %self.session(), what, error = %error_chain(&e), "store write did not land; retrying under the lease");
                        warned = true;
                    }
                    tokio::time::sleep(delay).await;
                }
                Err(e) => return Attempts::Refused(e),
            }
        }
    }

    /// Appends `turn` under the lease and, once committed, publishes it.
    /// A write whose answer is lost is sent again under the same write id,
    /// so the turn lands once and is published once.
    pub async fn append(&self, turn: NewTurn) -> Result<Arc<Turn>, TurnLogError> {
        let turn = redacted(turn);
        // A `turn.append` span per turn write (every retry inside it), with
        // the role and, once committed, the seq the store gave it.
        let span = tracing::info_span!(
            "turn.append",
            role = turn.role().as_str(),
            seq = tracing::field::Empty,
            outcome = tracing::field::Empty,
        );
        let write = WriteId::new();
        let store = &self.store;
        // The highest seq this burst saw committed: a head below it means
        // the database lost turns (see `inquest_store::failover`).
        let known = Seq::from_stored(self.head.load(Ordering::Relaxed));
        let stored = self
            .with_retries("append_turn", || {
                store.append_turn_after(&self.lease, known, write, turn.clone())
            })
            .instrument(span.clone())
            .await;
        span.record("outcome", stored.label());
        if let Attempts::Refused(StoreError::HeadBehind { head, known, .. }) = &stored {
            self.mark_lost(*head, *known).await;
        }
        let appended = stored.into_result(TurnLogError::NotPersisted)?;
        {
            let mut described = self
                .described
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            described.insert(appended.turn.seq.as_i64(), appended.turn.described());
            while described.len() > DESCRIBED {
                described.pop_first();
            }
        }
        self.watched_elsewhere
            .store(appended.watched_elsewhere, Ordering::Relaxed);
        let stored = appended.turn;
        span.record("seq", stored.seq.as_i64());
        self.head.fetch_max(stored.seq.as_i64(), Ordering::Relaxed);
        failpoints::hit(failpoints::BETWEEN_COMMIT_AND_PUBLISH).await;
        Ok(self.live.publish_committed(stored))
    }

    /// Before a write that is not an append (the report, the close): one
    /// read of the head, so a burst whose last turns a failover lost does
    /// not end on a transcript that lacks what watchers saw. A read that
    /// fails says nothing: the write itself then meets the same store.
    async fn check_head(&self) -> Result<(), TurnLogError> {
        let known = self.head.load(Ordering::Relaxed);
        if known == 0 {
            return Ok(());
        }
        let Ok(row) = self.store.get_session(self.session()).await else {
            return Ok(());
        };
        let head = row.head_seq.map_or(0, Seq::as_i64);
        if head >= known {
            return Ok(());
        }
        self.mark_lost(head, known).await;
        Err(TurnLogError::NotPersisted(StoreError::HeadBehind {
            session: self.session().to_string(),
            head,
            known,
        }))
    }

    /// After the database lost turns this burst had committed (its head
    /// at `head`, below `known`): stores a tombstone under each lost seq,
    /// publishes them (watchers that saw the lost turns are told), and
    /// leaves the session to recovery. The burst ends: its next step finds
    /// the lease gone. Logged once, here.
    async fn mark_lost(&self, head: i64, known: i64) {
        let Some(known) = Seq::from_stored(known) else {
            return;
        };
        let described = self
            .described
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        tracing::error!(session = %self.session(), head, known = known.as_i64(), "the database lost committed turns (a failover to a standby that lacked them): storing tombstones under the lost seqs and recovering the session");
        metrics::counter!("inquest_turns_lost_in_failover_total")
            .increment(u64::try_from(known.as_i64() - head).unwrap_or(0));
        let store = &self.store;
        match self
            .with_retries("mark_lost_turns", || {
                store.mark_lost_turns(&self.lease, known, &described)
            })
            .await
        {
            Attempts::Done(tombstones) => {
                for t in tombstones {
                    self.live.publish_committed(t);
                }
            }
            Attempts::Unavailable(e) | Attempts::Refused(e) => {
                tracing::error!(session = %self.session(), error = %error_chain(&e), "cannot store the tombstones of turns lost in a failover");
            }
        }
    }

    /// The claim read a stored head (`head`) below what this replica heard
    /// announced (`heard`): a failover lost turns that were sent to
    /// watchers, and their writer did not mark them (it died with the
    /// primary, or its lease ran out first). Marks them as that writer
    /// would have, from what the announcements said, and gives the claim
    /// up: the next claim plans the recovery with the tombstones in the
    /// transcript. Returns the error the claim ends with.
    pub(crate) async fn lost_before_claim(&self, head: i64, heard: Heard) -> TurnLogError {
        self.head.fetch_max(heard.head, Ordering::Relaxed);
        {
            let mut described = self
                .described
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            for (seq, what) in heard.described {
                described.entry(seq).or_insert(what);
            }
        }
        self.mark_lost(head, heard.head).await;
        TurnLogError::NotPersisted(StoreError::HeadBehind {
            session: self.session().to_string(),
            head,
            known: heard.head,
        })
    }

    /// Stores the recovery plan, fenced by the lease; `recovered` (an
    /// orphan this replica claimed) also records `session.recovered`. A
    /// retry after a lost acknowledgement may record that event twice:
    /// events are delivered at least once anyway.
    pub async fn save_recovery_plan(
        &self,
        plan: serde_json::Value,
        recovered: bool,
    ) -> Result<(), TurnLogError> {
        let store = &self.store;
        self.with_retries("save_recovery_plan", || {
            store.save_recovery_plan(&self.lease, plan.clone(), recovered)
        })
        .await
        .into_result(TurnLogError::NotPersisted)
    }

    /// Saves the burst's report, fenced by the lease.
    pub async fn save_report(&self, report: inquest_store::NewReport) -> Result<(), TurnLogError> {
        self.check_head().await?;
        let store = &self.store;
        self.with_retries("save_report", || {
            store.save_report(&self.lease, report.clone())
        })
        .await
        .into_result(TurnLogError::NotPersisted)
        .map(drop)
    }

    /// Ends the burst with `reason` if the lease is still ours: the status
    /// the reason leaves is recorded (fenced; a cancel that won stays),
    /// and only once that committed are the watchers ended, the session
    /// latched and its running calls forgotten. A burst whose lease moved
    /// on touches nothing of its successor's.
    pub async fn close(&self, reason: ExitReason) -> Result<Transition, TurnLogError> {
        self.check_head().await.map_err(|e| match e {
            TurnLogError::NotPersisted(e) => TurnLogError::CloseNotRecorded(e),
            e => e,
        })?;
        let store = &self.store;
        let closed = self
            .with_retries("close_burst", || {
                store.close_burst_draining(&self.lease, reason)
            })
            .await;
        let (transition, queued) = closed.into_result(TurnLogError::CloseNotRecorded)?;
        match &transition {
            // The queue became the next burst's user turns (the session is
            // `pending`): the watchers here stay and see them.
            Transition::Changed(_) if !queued.is_empty() => {
                self.live.forget_burst(self.session(), self.lease.epoch());
                for turn in queued {
                    self.live.publish_committed(turn);
                }
            }
            Transition::Changed(_) => self.live.burst_closed(self.session(), self.lease.epoch()),
            // A cancel won (it ended the watchers itself), or the lease
            // moved on: only this burst's own memory goes.
            Transition::Unchanged(_) => self.live.forget_burst(self.session(), self.lease.epoch()),
        }
        Ok(transition)
    }

    /// Hands the burst over (shutdown, an unreachable store): the session
    /// stays `running` with its lease expired, so another claim continues
    /// it at once. When the store cannot be reached either, the lease
    /// simply runs out and the reaper finds the session the same way.
    pub async fn hand_over(&self) -> Result<bool, StoreError> {
        self.live.forget_burst(self.session(), self.lease.epoch());
        self.store.release_lease(&self.lease).await
    }

    /// Forgets the burst without writing anything (its lease was lost).
    pub fn abandon(&self) {
        self.live.forget_burst(self.session(), self.lease.epoch());
    }

    /// After the burst gave up its lease (its deadline passed while the
    /// store was away, or the lease moved): reads the head once the store
    /// answers, for up to `patience`, and marks the seqs it published that
    /// a failover lost. A failover longer than the lease leaves the burst
    /// no write to find the loss with; this is that write's check. When
    /// another replica claimed the session first it is refused, and the
    /// watchers' own check (a turn under a seq they hold) tells them.
    pub async fn look_for_lost_turns(&self, patience: Duration) {
        let known = self.head.load(Ordering::Relaxed);
        if known == 0 {
            return;
        }
        let until = Instant::now() + patience;
        loop {
            match self.store.get_session(self.session()).await {
                Ok(row) => {
                    let head = row.head_seq.map_or(0, Seq::as_i64);
                    if head < known {
                        self.mark_lost(head, known).await;
                    }
                    return;
                }
                Err(_) if Instant::now() + LOOK_AGAIN < until => {
                    tokio::time::sleep(LOOK_AGAIN).await;
                }
                Err(e) => {
                    tracing::warn!(session = %self.session(), error = %error_chain(&e), "cannot check the head after giving the lease up; a failover loss, if any, is left to the watchers' check");
                    return;
                }
            }
        }
    }

    /// Announces a tool call about to run, here and to other replicas.
    /// Waits for the announcement to go out, so it precedes the call's
    /// result everywhere; a failure is logged (watchers elsewhere will see
    /// the result without a start, which they handle).
    ///
    /// `elsewhere: false` skips the announcement to other replicas (a
    /// database round trip): no other replica watches the session
    /// (`watched_elsewhere`).
    async fn announce_tool_call_start(&self, start: ToolCallStart, elsewhere: bool) {
        self.live.publish_tool_call_start(start.clone());
        if !elsewhere {
            return;
        }
        if let Err(e) = self
            .store
            .notify_tool_call_start(
                start.session_id,
                start.assistant_seq,
                &start.call_id,
                &start.tool_name,
                start.started_at,
            )
            .await
        {
            tracing::warn!(session = %start.session_id, call_id = %start.call_id, error = %error_chain(&e), "cannot announce a tool call to other replicas");
        }
    }
}

/// The agent's door to the turn log: the loop persists and publishes
/// through exactly the path every other writer uses, fenced by its lease.
/// A failed burst write, as the agent sees it.
fn sink_error(e: TurnLogError) -> SinkError {
    match e {
        TurnLogError::Unavailable(_) => SinkError::Unavailable(Box::new(e)),
        // After lost turns the session is left to recovery, as when the
        // lease moved: the burst writes nothing more.
        e if matches!(
            e.store_error(),
            Some(StoreError::LeaseLost { .. } | StoreError::HeadBehind { .. })
        ) =>
        {
            SinkError::LeaseLost(Box::new(e))
        }
        TurnLogError::DeadlinePassed => SinkError::LeaseLost(Box::new(e)),
        e => SinkError::NotPersisted(Box::new(e)),
    }
}

impl TurnSink for BurstLog {
    fn append(&self, session: SessionId, turn: NewTurn) -> BoxFuture<'_, Result<Turn, SinkError>> {
        Box::pin(async move {
            debug_assert_eq!(session, self.session());
            BurstLog::append(self, turn)
                .await
                .map(|t| (*t).clone())
                .map_err(sink_error)
        })
    }

    fn approval(&self) -> Option<Arc<Gate>> {
        self.approval.get().and_then(|a| a.gate.clone())
    }

    fn request_approvals(
        &self,
        session: SessionId,
        assistant_seq: Seq,
        held: Vec<HeldCall>,
    ) -> BoxFuture<'_, Result<(), SinkError>> {
        Box::pin(async move {
            debug_assert_eq!(session, self.session());
            let timeout = self
                .approval()
                .map_or(Gate::DEFAULT_TIMEOUT, |gate| gate.timeout);
            let requests: Vec<NewApproval> = held
                .into_iter()
                .map(|h| NewApproval {
                    call_id: h.call.id.clone(),
                    tool: h.call.name.clone(),
                    server: h.server,
                    arguments: h.call.arguments.as_sent(),
                    side_effect: h.side_effect,
                    rule: h.rule,
                })
                .collect();
            let store = &self.store;
            self.with_retries("request_approvals", || {
                store.request_approvals(&self.lease, assistant_seq, timeout, requests.clone())
            })
            .await
            .into_result(TurnLogError::NotPersisted)
            .map_err(sink_error)?;
            failpoints::hit(failpoints::AFTER_APPROVALS_REQUESTED).await;
            Ok(())
        })
    }

    fn tool_call_started<'a>(
        &'a self,
        session: SessionId,
        assistant_seq: Seq,
        call: &'a ToolCall,
    ) -> BoxFuture<'a, Result<(), SinkError>> {
        Box::pin(async move {
            if self.clock.passed() {
                return Err(SinkError::LeaseLost(Box::new(TurnLogError::DeadlinePassed)));
            }
            if self.is_approved(&call.id) {
                failpoints::hit(failpoints::BEFORE_APPROVAL_STARTED).await;
                // Durable before the call starts: after a crash from here
                // on, the call may have run and waits for a human.
                let store = &self.store;
                self.with_retries("mark_approval_started", || {
                    store.mark_approval_started(&self.lease, &call.id)
                })
                .await
                .into_result(TurnLogError::NotPersisted)
                .map_err(sink_error)?;
                failpoints::hit(failpoints::AFTER_APPROVAL_STARTED).await;
            }
            self.announce_tool_call_start(
                ToolCallStart {
                    session_id: session,
                    assistant_seq,
                    call_id: call.id.clone(),
                    tool_name: call.name.clone(),
                    started_at: OffsetDateTime::now_utc(),
                },
                self.watched_elsewhere.load(Ordering::Relaxed),
            )
            .await;
            // The announcement may have waited on the store: look again.
            if self.clock.passed() {
                return Err(SinkError::LeaseLost(Box::new(TurnLogError::DeadlinePassed)));
            }
            Ok(())
        })
    }

    /// Published to this replica's watchers under the seq the turn will
    /// take (see [`LiveView::text_delta`]); nothing goes to other replicas.
    fn text_delta(&self, session: SessionId, attempt: u32, text: &str) {
        debug_assert_eq!(session, self.session());
        if let Some(turn_seq) = self.next_seq() {
            self.live
                .text_delta(session, self.lease.epoch(), turn_seq, attempt, text);
        }
    }

    fn text_complete(&self, session: SessionId, attempt: u32) {
        if let Some(turn_seq) = self.next_seq() {
            self.live
                .text_complete(session, self.lease.epoch(), turn_seq, attempt);
        }
    }
}
/// `turn` with every secret hidden (`inquest_redact`): a tool's
/// error quoting a URL with its token, a model echoing a key. What is
/// stored, published and sent to watchers is the same redacted text.
fn redacted(turn: NewTurn) -> NewTurn {
    use inquest_redact::redact;
    let hide = |s: String| match redact(&s) {
        std::borrow::Cow::Borrowed(_) => s,
        std::borrow::Cow::Owned(r) => r,
    };
    match turn {
        NewTurn::Assistant {
            text,
            tool_calls,
            usage,
        } => NewTurn::Assistant {
            text: hide(text),
            tool_calls,
            usage,
        },
        NewTurn::Tool {
            call_id,
            tool_name,
            content,
            is_error,
        } => NewTurn::Tool {
            call_id,
            tool_name,
            content: hide(content),
            is_error,
        },
        NewTurn::Notice { text, plan } => NewTurn::Notice {
            text: hide(text),
            plan,
        },
        NewTurn::Compaction {
            summary,
            info,
            usage,
        } => NewTurn::Compaction {
            summary: hide(summary),
            info,
            usage,
        },
        // What the user typed is stored as sent (it is bound to its
        // idempotency key's fingerprint).
        user @ NewTurn::User(_) => user,
    }
}
