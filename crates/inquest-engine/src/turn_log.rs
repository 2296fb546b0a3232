//! Persist, then publish: the one path every turn takes.
//!
//! [`TurnLog`] is what `StartSession` and `SendMessage` write through, and
//! [`BurstLog`](crate::burst_log::BurstLog) (one per claimed burst, fenced
//! by its lease, in `burst_log.rs`) is what the agent loop and the resume
//! notices write through. A turn is appended to
//! the store (a detached write with its own timeout, so a cancelled caller
//! still records what happened) and only after the commit is it published
//! to the broadcaster; other replicas hear of it from the store's
//! `NOTIFY` and [`TurnLog::apply_remote`]. A failed write publishes nothing
//! and comes back as [`TurnLogError::NotPersisted`].
//!
//! It also keeps the per-session memory the live view needs and the
//! database does not: which tool calls are running right now and the text
//! of the assistant turn being streamed (so a late watcher can be told),
//! and the cancellation token of each running burst (so `CancelSession`
//! can stop it).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, MutexGuard, PoisonError, atomic::AtomicBool},
};

use std::time::Duration;

use inquest_broadcast::{Event, PublishedTurn, TextDelta, ToolCallStart, TurnBroadcaster};
use inquest_core::{
    IdempotencyKey, IncidentId, Role, Seq, SessionId, SessionStatus, Tenant, TenantQuota, Turn,
    UserMessage, error_chain,
};
use inquest_redact::StreamedText;
use inquest_store::{
    CallerEvent, Lease, SendOutcome, SessionRow, StartedSession, Store, StoreError, Transition,
    notify::Notification,
};
use tokio_util::sync::CancellationToken;

use crate::burst_log::{BurstLog, LeaseClock};

/// Why a [`TurnLog`] write failed. Distinct from every other failure so a
/// burst can end with its own exit reason when its transcript cannot be
/// written.
#[derive(Debug, thiserror::Error)]
pub enum TurnLogError {
    /// The write was refused (not an outage), and nothing was published.
    #[error("write was refused; nothing was published")]
    NotPersisted(#[source] StoreError),
    /// The store stayed unreachable until the lease deadline; the write
    /// may or may not have committed (the next claimer reads the store).
    #[error("store unavailable until the lease deadline")]
    Unavailable(#[source] StoreError),
    /// The burst's final status was not recorded (watchers were still
    /// ended).
    #[error("burst end was not recorded")]
    CloseNotRecorded(#[source] StoreError),
    /// The burst could not be claimed.
    #[error("burst could not be claimed")]
    ClaimFailed(#[source] StoreError),
    /// The lease deadline passed: another replica may own the session.
    #[error("the lease deadline passed; another replica may run this session")]
    DeadlinePassed,
}

impl TurnLogError {
    pub fn store_error(&self) -> Option<&StoreError> {
        match self {
            TurnLogError::NotPersisted(e)
            | TurnLogError::Unavailable(e)
            | TurnLogError::CloseNotRecorded(e)
            | TurnLogError::ClaimFailed(e) => Some(e),
            TurnLogError::DeadlinePassed => None,
        }
    }
}

/// How long a lease holds and how early before its expiry its holder
/// stops acting for it (see [`LeaseClock`]).
#[derive(Debug, Clone, Copy)]
pub struct LeaseTiming {
    pub ttl: Duration,
    pub margin: Duration,
}

impl LeaseTiming {
    /// The default margin: a sixth of the TTL (5 s of the default 30 s).
    pub fn with_default_margin(ttl: Duration) -> Self {
        Self {
            ttl,
            margin: ttl / 6,
        }
    }
}

/// The persist-then-publish path. Cheap to clone; clones share state.
#[derive(Clone)]
pub struct TurnLog {
    /// The API lane: the writes and reads callers make.
    store: Store,
    /// The burst lane ([`Store::for_bursts`]): every write a burst makes,
    /// so a flood of API calls cannot starve a running burst.
    burst_store: Store,
    broadcaster: TurnBroadcaster,
    state: Arc<Mutex<LiveState>>,
    lease: LeaseTiming,
}

/// Per-session memory of live bursts on this replica.
///
/// A std mutex: every critical section is a map update, never held across
/// an `.await`. Entries are removed when their call's result is published or
/// the burst is closed or cancelled, so the maps hold only running things.
#[derive(Default)]
struct LiveState {
    /// Tool calls started and without a result yet, in start order.
    running_calls: HashMap<SessionId, Vec<ToolCallStart>>,
    /// The text of the assistant turn each session's burst here is
    /// streaming: released so far (what a late watcher is sent first) and
    /// held back. Replaced when a new turn or attempt starts; removed when
    /// a turn at or past its seq is published or the burst ends.
    streaming: HashMap<SessionId, Streaming>,
    /// Cancellation of each claimed burst, by session and lease epoch;
    /// fired by `CancelSession`. Keyed by the epoch too, so a stale burst
    /// that ends late never drops the token of the burst that replaced it.
    bursts: HashMap<(SessionId, i64), CancellationToken>,
}

/// One session's streamed text; see [`LiveState::streaming`].
struct Streaming {
    epoch: i64,
    turn_seq: Seq,
    attempt: u32,
    text: StreamedText,
}

impl TurnLog {
    pub fn new(store: Store, broadcaster: TurnBroadcaster) -> Self {
        let lease = LeaseTiming::with_default_margin(store.lease_ttl());
        Self {
            burst_store: store.for_bursts(),
            store,
            broadcaster,
            state: Arc::default(),
            lease,
        }
    }

    /// The same log with another lease safety margin.
    pub fn with_lease_timing(mut self, lease: LeaseTiming) -> Self {
        self.lease = lease;
        self
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The store on the burst lane, for bursts, their leases and the
    /// reaper.
    pub fn burst_store(&self) -> &Store {
        &self.burst_store
    }

    pub fn broadcaster(&self) -> &TurnBroadcaster {
        &self.broadcaster
    }

    fn lock(&self) -> MutexGuard<'_, LiveState> {
        // Every critical section leaves the maps consistent; a panic
        // elsewhere must not wedge the live view.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Publishes a turn the store has committed.
    pub(crate) fn publish_committed(&self, turn: Turn) -> Arc<Turn> {
        let turn = Arc::new(turn);
        // A tool result settles its call; a recovery notice settles every
        // call it repaired (its worker died: no result will come).
        let settled: Vec<String> = match (&turn.tool_call_id, turn.role) {
            (Some(call_id), _) => vec![call_id.clone()],
            (None, Role::Notice) => turn.repaired_call_ids(),
            (None, _) => Vec::new(),
        };
        {
            let mut state = self.lock();
            if state
                .streaming
                .get(&turn.session_id)
                .is_some_and(|s| s.turn_seq <= turn.seq)
            {
                state.streaming.remove(&turn.session_id);
            }
        }
        if !settled.is_empty() {
            let mut state = self.lock();
            if let Some(calls) = state.running_calls.get_mut(&turn.session_id) {
                calls.retain(|c| !settled.contains(&c.call_id));
                if calls.is_empty() {
                    state.running_calls.remove(&turn.session_id);
                }
            }
        }
        self.broadcaster.publish(
            turn.session_id,
            Event::Turn(PublishedTurn::new(Arc::clone(&turn))),
        );
        turn
    }

    /// Announces a tool call about to run, here and to other replicas.
    /// Waits for the announcement to go out, so it precedes the call's
    /// result everywhere; a failure is logged (watchers elsewhere will see
    /// the result without a start, which they handle).
    ///
    /// `elsewhere: false` skips the announcement to other replicas (a
    /// database round trip): the caller knows none watches the session
    /// (`BurstLog`'s `watched_elsewhere`).
    pub async fn announce_tool_call_start(&self, start: ToolCallStart, elsewhere: bool) {
        self.publish_tool_call_start(start.clone());
        if !elsewhere {
            return;
        }
        if let Err(e) = self
            .burst_store
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

    /// A piece of the raw text the burst at `epoch` streams for the turn
    /// that will take `turn_seq`: the whole words it completes are
    /// redacted and published to this replica's watchers
    /// ([`StreamedText`]), at their byte offset in the attempt's text. A
    /// new turn or attempt starts the text again. Never waits.
    pub fn text_delta(
        &self,
        session: SessionId,
        epoch: i64,
        turn_seq: Seq,
        attempt: u32,
        raw: &str,
    ) {
        self.release_text(session, epoch, turn_seq, attempt, |t| t.push(raw));
    }

    /// The attempt's answer is complete: publishes what was held back.
    pub fn text_complete(&self, session: SessionId, epoch: i64, turn_seq: Seq, attempt: u32) {
        self.release_text(session, epoch, turn_seq, attempt, StreamedText::finish);
    }

    fn release_text(
        &self,
        session: SessionId,
        epoch: i64,
        turn_seq: Seq,
        attempt: u32,
        release: impl FnOnce(&mut StreamedText) -> Option<String>,
    ) {
        let delta = {
            let mut state = self.lock();
            let current = state.streaming.entry(session).or_insert_with(|| Streaming {
                epoch,
                turn_seq,
                attempt,
                text: StreamedText::new(),
            });
            if (current.epoch, current.turn_seq, current.attempt) != (epoch, turn_seq, attempt) {
                *current = Streaming {
                    epoch,
                    turn_seq,
                    attempt,
                    text: StreamedText::new(),
                };
            }
            let offset = current.text.shown().len() as u64;
            release(&mut current.text).map(|run| TextDelta {
                session_id: session,
                turn_seq,
                attempt,
                offset,
                text: run.into(),
            })
        };
        if let Some(delta) = delta {
            self.broadcaster.publish(session, Event::TextDelta(delta));
        }
    }

    /// The text streamed so far for `session`'s turn being written here,
    /// as one delta at offset 0, if there is any.
    pub fn streamed_text(&self, session: SessionId) -> Option<TextDelta> {
        let state = self.lock();
        let current = state.streaming.get(&session)?;
        let shown = current.text.shown();
        (!shown.is_empty()).then(|| TextDelta {
            session_id: session,
            turn_seq: current.turn_seq,
            attempt: current.attempt,
            offset: 0,
            text: shown.into(),
        })
    }

    /// Makes every watcher on this replica reconnect from its last seq
    /// (the cross-replica feed may have missed something).
    pub fn lag_all_watchers(&self) -> usize {
        self.broadcaster.lag_all_sessions()
    }

    /// Publishes a tool call start locally. Not persisted; remembered until
    /// its result turn is appended or the burst ends.
    pub fn publish_tool_call_start(&self, start: ToolCallStart) {
        let session = start.session_id;
        self.lock()
            .running_calls
            .entry(session)
            .or_default()
            .push(start.clone());
        self.broadcaster
            .publish(session, Event::ToolCallStart(start));
    }

    /// Tool calls of `session` started and not yet answered.
    pub fn running_calls(&self, session: SessionId) -> Vec<ToolCallStart> {
        self.lock()
            .running_calls
            .get(&session)
            .cloned()
            .unwrap_or_default()
    }

    /// Opens a session with its first user turn and publishes the turn.
    pub async fn start_session(
        &self,
        tenant: &Tenant,
        quota: TenantQuota,
        incident: IncidentId,
        message: UserMessage,
        key: Option<IdempotencyKey>,
    ) -> Result<StartedSession, StoreError> {
        let started = self
            .store
            .start_session(tenant, quota, incident, message, key)
            .await?;
        if started.created {
            self.publish_committed(started.first_turn.clone());
        }
        Ok(started)
    }

    /// Stores a follow-up user turn (session becomes `pending`), lifts the
    /// broadcaster latch, and publishes the turn, all before returning, so
    /// a watch started after this returns follows the new burst.
    pub async fn send_message(
        &self,
        tenant: &Tenant,
        quota: TenantQuota,
        session: SessionId,
        message: UserMessage,
        key: Option<IdempotencyKey>,
    ) -> Result<SendOutcome, StoreError> {
        let outcome = self
            .store
            .send_message(tenant, quota, session, message, key)
            .await?;
        if let SendOutcome::Sent { turn, created } = &outcome {
            // A replay lifts the latch too: the first call may have been
            // cut off before it did (watchers check the store before they
            // end, so a latch lifted late never misleads one).
            self.broadcaster.reopen(session);
            if *created {
                self.publish_committed((**turn).clone());
            }
        }
        Ok(outcome)
    }

    /// Claims a `pending` session's burst under a fresh lease (status
    /// `running`, epoch + 1). The token fires when the session is
    /// cancelled. `None` when the session is not pending (someone else
    /// claimed it, or it was cancelled).
    pub async fn claim_burst(
        &self,
        session: SessionId,
    ) -> Result<Option<(BurstLog, CancellationToken)>, TurnLogError> {
        self.claim_burst_traced(session, None).await
    }

    /// [`TurnLog::claim_burst`], storing `trace_id` (the burst's trace) on
    /// the session in the claim statement.
    pub async fn claim_burst_traced(
        &self,
        session: SessionId,
        trace_id: Option<String>,
    ) -> Result<Option<(BurstLog, CancellationToken)>, TurnLogError> {
        let lease = self
            .burst_store
            .claim_pending_traced(session, trace_id)
            .await
            .map_err(TurnLogError::ClaimFailed)?;
        Ok(lease.map(|lease| self.adopt(lease)))
    }

    /// Takes charge of a burst whose lease this replica holds (a claimed
    /// orphan): its writes go through the returned [`BurstLog`], and the
    /// token fires when the session is cancelled.
    pub fn adopt(&self, lease: Lease) -> (BurstLog, CancellationToken) {
        let token = CancellationToken::new();
        self.lock()
            .bursts
            .insert((lease.session(), lease.epoch()), token.clone());
        let clock = LeaseClock::new(&lease, self.lease.ttl, self.lease.margin);
        (
            BurstLog {
                log: self.clone(),
                lease,
                clock,
                head: Arc::default(),
                watched_elsewhere: Arc::new(AtomicBool::new(true)),
            },
            token,
        )
    }

    /// `ContinueSession`: a session `awaiting_confirmation` becomes
    /// `pending` (atomically: of two concurrent confirmations one wins) and
    /// the broadcaster latch is lifted, so a watch started after this
    /// returns follows the confirmed burst.
    pub async fn confirm(&self, session: SessionId) -> Result<Transition, StoreError> {
        let transition = self.store.transition(session, CallerEvent::Confirm).await?;
        if matches!(transition, Transition::Changed(_)) {
            self.broadcaster.reopen(session);
        }
        Ok(transition)
    }

    /// `CancelSession`: a pending, running or awaiting-confirmation session
    /// becomes `cancelled`
    /// (atomically; a burst that ends at the same moment loses), its
    /// watchers end and its burst's token fires. Turns stay.
    pub async fn cancel(&self, session: SessionId) -> Result<Transition, StoreError> {
        let transition = self.store.transition(session, CallerEvent::Cancel).await?;
        if matches!(transition, Transition::Changed(_)) {
            for token in self.forget_session(session) {
                token.cancel();
            }
            self.broadcaster.close(session);
        }
        Ok(transition)
    }

    /// Whether this replica holds a claimed burst of `session`.
    pub fn has_burst(&self, session: SessionId) -> bool {
        self.lock().bursts.keys().any(|(s, _)| *s == session)
    }

    /// Applies what another replica announced (see
    /// [`inquest_store::notify`]): its committed turns and tool-call starts
    /// reach this replica's watchers, its status changes close or reopen
    /// them, and a cancel made there stops a burst running here. Our own
    /// announcements are skipped: they were published locally already.
    pub async fn apply_remote(&self, notification: Notification) {
        if notification.origin() == self.store.replica_id().as_str() {
            return;
        }
        match notification {
            Notification::Turn {
                turn: Some(turn), ..
            } => {
                self.publish_committed(turn);
            }
            Notification::Turn {
                session,
                seq,
                turn: None,
                ..
            } => {
                // Too large to travel inline: fetch it, but only when
                // someone here follows the session.
                let wanted = self.broadcaster.subscriber_count(session) > 0
                    || self.lock().running_calls.contains_key(&session);
                if !wanted {
                    return;
                }
                match self.store.get_turn(session, seq).await {
                    Ok(Some(turn)) => {
                        self.publish_committed(turn);
                    }
                    Ok(None) => {
                        tracing::warn!(%session, %seq, "announced turn not found");
                    }
                    Err(e) => {
                        // Watchers would miss it: make them reconnect, the
                        // drain reads it from the table.
                        tracing::warn!(%session, %seq, error = %error_chain(&e), "cannot fetch an announced turn; lagging its watchers");
                        self.broadcaster.lag_session(session);
                    }
                }
            }
            Notification::ToolCallStart {
                session,
                assistant_seq,
                call_id,
                tool_name,
                started_at,
                ..
            } => self.publish_tool_call_start(ToolCallStart {
                session_id: session,
                assistant_seq,
                call_id,
                tool_name,
                started_at,
            }),
            Notification::Status {
                session, status, ..
            } => match status {
                SessionStatus::Pending => self.broadcaster.reopen(session),
                SessionStatus::Running => {}
                _ => {
                    for token in self.forget_session(session) {
                        if status == SessionStatus::Cancelled {
                            token.cancel();
                        }
                    }
                    self.broadcaster.close(session);
                }
            },
        }
    }

    /// Drops all of the session's live memory; returns its bursts' tokens.
    fn forget_session(&self, session: SessionId) -> Vec<CancellationToken> {
        let mut state = self.lock();
        state.running_calls.remove(&session);
        state.streaming.remove(&session);
        let keys: Vec<_> = state
            .bursts
            .keys()
            .filter(|(s, _)| *s == session)
            .copied()
            .collect();
        keys.into_iter()
            .filter_map(|k| state.bursts.remove(&k))
            .collect()
    }

    /// Forgets the burst of `session` at `epoch` (it ended or lost its
    /// lease). Its running calls go only when no newer burst of the
    /// session runs here.
    pub(crate) fn forget_burst(&self, session: SessionId, epoch: i64) {
        let mut state = self.lock();
        state.bursts.remove(&(session, epoch));
        if state
            .streaming
            .get(&session)
            .is_some_and(|s| s.epoch <= epoch)
        {
            state.streaming.remove(&session);
        }
        if !state.bursts.keys().any(|(s, _)| *s == session) {
            state.running_calls.remove(&session);
        }
    }

    /// The burst of `session` at `epoch` closed in the store: forget it
    /// and end the session's watchers here (they check the store before
    /// they end OK, so a stale close cannot end a successor's stream).
    pub(crate) fn burst_closed(&self, session: SessionId, epoch: i64) {
        self.forget_burst(session, epoch);
        self.broadcaster.close(session);
    }

    /// The session row, for callers that only hold a `TurnLog`.
    pub async fn session(&self, session: SessionId) -> Result<SessionRow, StoreError> {
        self.store.get_session(session).await
    }
}
