//! Persist, then publish: the one path every turn takes.
//!
//! [`TurnLog`] is what `StartSession` and `SendMessage` write through, and
//! [`BurstLog`] (one per claimed burst, fenced by its lease) is what the
//! agent loop and the resume notices write through. A turn is appended to
//! the store (a detached write with its own timeout, so a cancelled caller
//! still records what happened) and only after the commit is it published
//! to the broadcaster; other replicas hear of it from the store's
//! `NOTIFY` and [`TurnLog::apply_remote`]. A failed write publishes nothing
//! and comes back as [`TurnLogError::NotPersisted`].
//!
//! It also keeps the two pieces of per-session memory the live view needs
//! and the database does not: which tool calls are running right now (so a
//! late watcher can be told), and the cancellation token of each running
//! burst (so `CancelSession` can stop it).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use inquest_agent::{BoxFuture, SinkError, TurnSink, failpoints};
use inquest_broadcast::{Event, ToolCallStart, TurnBroadcaster};
use inquest_core::{
    IdempotencyKey, IncidentId, NewTurn, Role, Seq, SessionId, SessionStatus, ToolCall, Turn,
    UserMessage, plan_from_notice,
};
use inquest_store::{
    ACTIVE, Lease, SendOutcome, SessionRow, StartedSession, Store, StoreError, Transition,
    notify::Notification,
};
use time::OffsetDateTime;
use tokio_util::sync::CancellationToken;

use crate::status::chain;

/// Statuses `CancelSession` ends: a burst waiting or running, or a
/// follow-up waiting for confirmation (declining it).
const CANCELLABLE: [SessionStatus; 3] = [
    SessionStatus::Pending,
    SessionStatus::Running,
    SessionStatus::AwaitingConfirmation,
];

/// The exit reason `CancelSession` records.
pub const EXIT_CANCELLED: &str = "cancelled";

/// Why a [`TurnLog`] write failed. Distinct from every other failure so a
/// burst can end with its own exit reason when its transcript cannot be
/// written.
#[derive(Debug, thiserror::Error)]
pub enum TurnLogError {
    /// The turn was not committed, and nothing was published.
    #[error("turn was not persisted; nothing was published")]
    NotPersisted(#[source] StoreError),
    /// The burst's final status was not recorded (watchers were still
    /// ended).
    #[error("burst end was not recorded")]
    CloseNotRecorded(#[source] StoreError),
    /// The burst could not be claimed.
    #[error("burst could not be claimed")]
    ClaimFailed(#[source] StoreError),
}

impl TurnLogError {
    pub fn store_error(&self) -> &StoreError {
        match self {
            TurnLogError::NotPersisted(e)
            | TurnLogError::CloseNotRecorded(e)
            | TurnLogError::ClaimFailed(e) => e,
        }
    }
}

/// The persist-then-publish path. Cheap to clone; clones share state.
#[derive(Clone)]
pub struct TurnLog {
    store: Store,
    broadcaster: TurnBroadcaster,
    state: Arc<Mutex<LiveState>>,
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
    /// Cancellation of each claimed burst; fired by `CancelSession`.
    bursts: HashMap<SessionId, CancellationToken>,
}

impl TurnLog {
    pub fn new(store: Store, broadcaster: TurnBroadcaster) -> Self {
        Self {
            store,
            broadcaster,
            state: Arc::default(),
        }
    }

    pub fn store(&self) -> &Store {
        &self.store
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
    fn publish_committed(&self, turn: Turn) -> Arc<Turn> {
        let turn = Arc::new(turn);
        // A tool result settles its call; a recovery notice settles every
        // call it repaired (its worker died: no result will come).
        let settled: Vec<String> = match (&turn.tool_call_id, turn.role) {
            (Some(call_id), _) => vec![call_id.clone()],
            (None, Role::Notice) => plan_from_notice(&turn.content)
                .map(|plan| plan.repaired_call_ids)
                .unwrap_or_default(),
            (None, _) => Vec::new(),
        };
        if !settled.is_empty() {
            let mut state = self.lock();
            if let Some(calls) = state.running_calls.get_mut(&turn.session_id) {
                calls.retain(|c| !settled.contains(&c.call_id));
                if calls.is_empty() {
                    state.running_calls.remove(&turn.session_id);
                }
            }
        }
        self.broadcaster
            .publish(turn.session_id, Event::Turn(Arc::clone(&turn)));
        turn
    }

    /// Announces a tool call about to run, here and to other replicas.
    /// Waits for the announcement to go out, so it precedes the call's
    /// result everywhere; a failure is logged (watchers elsewhere will see
    /// the result without a start, which they handle).
    pub async fn announce_tool_call_start(&self, start: ToolCallStart) {
        self.publish_tool_call_start(start.clone());
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
            tracing::warn!(session = %start.session_id, call_id = %start.call_id, error = %chain(&e), "cannot announce a tool call to other replicas");
        }
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
        incident: IncidentId,
        message: UserMessage,
        key: Option<IdempotencyKey>,
    ) -> Result<StartedSession, StoreError> {
        let started = self.store.start_session(incident, message, key).await?;
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
        session: SessionId,
        message: UserMessage,
        key: Option<IdempotencyKey>,
    ) -> Result<SendOutcome, StoreError> {
        let outcome = self.store.send_message(session, message, key).await?;
        if let SendOutcome::Sent {
            turn,
            created: true,
        } = &outcome
        {
            self.broadcaster.reopen(session);
            self.publish_committed(turn.clone());
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
        let lease = self
            .store
            .claim_pending(session)
            .await
            .map_err(TurnLogError::ClaimFailed)?;
        Ok(lease.map(|lease| self.adopt(lease)))
    }

    /// Takes charge of a burst whose lease this replica holds (a claimed
    /// orphan): its writes go through the returned [`BurstLog`], and the
    /// token fires when the session is cancelled.
    pub fn adopt(&self, lease: Lease) -> (BurstLog, CancellationToken) {
        let token = CancellationToken::new();
        self.lock().bursts.insert(lease.session(), token.clone());
        (
            BurstLog {
                log: self.clone(),
                lease,
            },
            token,
        )
    }

    /// `ContinueSession`: a session `awaiting_confirmation` becomes
    /// `pending` (atomically: of two concurrent confirmations one wins) and
    /// the broadcaster latch is lifted, so a watch started after this
    /// returns follows the confirmed burst.
    pub async fn confirm(&self, session: SessionId) -> Result<Transition, StoreError> {
        let transition = self
            .store
            .transition(
                session,
                &[SessionStatus::AwaitingConfirmation],
                SessionStatus::Pending,
                None,
            )
            .await?;
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
        let transition = self
            .store
            .transition(
                session,
                &CANCELLABLE,
                SessionStatus::Cancelled,
                Some(EXIT_CANCELLED.to_owned()),
            )
            .await?;
        if matches!(transition, Transition::Changed(_)) {
            if let Some(token) = self.forget(session) {
                token.cancel();
            }
            self.broadcaster.close(session);
        }
        Ok(transition)
    }

    /// Whether this replica holds a claimed burst of `session`.
    pub fn has_burst(&self, session: SessionId) -> bool {
        self.lock().bursts.contains_key(&session)
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
                        tracing::warn!(%session, %seq, error = %chain(&e), "cannot fetch an announced turn; lagging its watchers");
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
                    if let Some(token) = self.forget(session)
                        && status == SessionStatus::Cancelled
                    {
                        token.cancel();
                    }
                    self.broadcaster.close(session);
                }
            },
        }
    }

    /// Drops the session's live memory; returns its burst token, if any.
    fn forget(&self, session: SessionId) -> Option<CancellationToken> {
        let mut state = self.lock();
        state.running_calls.remove(&session);
        state.bursts.remove(&session)
    }

    /// The session row, for callers that only hold a `TurnLog`.
    pub async fn session(&self, session: SessionId) -> Result<SessionRow, StoreError> {
        self.store.get_session(session).await
    }
}

/// The persist-then-publish path of one burst, fenced by its lease: every
/// turn, the report and the closing status check the lease epoch in the
/// statement that writes them, so once another replica claimed the session
/// nothing more from this burst lands. Made only by [`TurnLog::claim_burst`]
/// and [`TurnLog::adopt`].
#[derive(Clone)]
pub struct BurstLog {
    log: TurnLog,
    lease: Lease,
}

impl BurstLog {
    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    pub fn session(&self) -> SessionId {
        self.lease.session()
    }

    pub fn log(&self) -> &TurnLog {
        &self.log
    }

    /// Appends `turn` under the lease and, once committed, publishes it.
    pub async fn append(&self, turn: NewTurn) -> Result<Arc<Turn>, TurnLogError> {
        let stored = self
            .log
            .store
            .append_turn_leased(&self.lease, turn)
            .await
            .map_err(TurnLogError::NotPersisted)?;
        failpoints::hit(failpoints::BETWEEN_COMMIT_AND_PUBLISH).await;
        Ok(self.log.publish_committed(stored))
    }

    /// Ends the burst if the lease is still ours: every watcher's stream
    /// ends, running calls are forgotten, and `status` + `exit_reason` are
    /// recorded if the session is still pending or running (a cancel that
    /// won stays).
    ///
    /// The broadcaster is closed *before* the status is written. The other
    /// order has a race: once the status says `idle`, a follow-up
    /// `SendMessage` may commit and reopen the latch, and a late `close`
    /// would then end the new burst's watchers. This order never hangs a
    /// watcher either: one that subscribes after the close gets an ended
    /// subscription, one that subscribed before is ended by it.
    pub async fn close(
        &self,
        status: SessionStatus,
        exit_reason: &str,
    ) -> Result<Transition, TurnLogError> {
        let session = self.session();
        self.log.forget(session);
        self.log.broadcaster.close(session);
        self.log
            .store
            .transition_leased(&self.lease, &ACTIVE, status, Some(exit_reason.to_owned()))
            .await
            .map_err(TurnLogError::CloseNotRecorded)
    }

    /// Hands the burst over at shutdown: the session stays `running` with
    /// its lease expired, so another replica's reaper continues it at once.
    pub async fn hand_over(&self) -> Result<bool, StoreError> {
        self.log.forget(self.session());
        self.log.store.release_lease(&self.lease).await
    }

    /// Forgets the burst without writing anything (its lease was lost).
    pub fn abandon(&self) {
        self.log.forget(self.session());
    }
}

/// The agent's door to the turn log: the loop persists and publishes
/// through exactly the path every other writer uses, fenced by its lease.
impl TurnSink for BurstLog {
    fn append(&self, session: SessionId, turn: NewTurn) -> BoxFuture<'_, Result<Turn, SinkError>> {
        Box::pin(async move {
            debug_assert_eq!(session, self.session());
            BurstLog::append(self, turn)
                .await
                .map(|t| (*t).clone())
                .map_err(|e| {
                    if matches!(e.store_error(), StoreError::LeaseLost { .. }) {
                        SinkError::LeaseLost(Box::new(e))
                    } else {
                        SinkError::NotPersisted(Box::new(e))
                    }
                })
        })
    }

    fn tool_call_started<'a>(
        &'a self,
        session: SessionId,
        assistant_seq: Seq,
        call: &'a ToolCall,
    ) -> BoxFuture<'a, ()> {
        Box::pin(self.log.announce_tool_call_start(ToolCallStart {
            session_id: session,
            assistant_seq,
            call_id: call.id.clone(),
            tool_name: call.name.clone(),
            started_at: OffsetDateTime::now_utc(),
        }))
    }
}
