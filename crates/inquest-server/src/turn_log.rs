//! Persist, then publish: the one path every turn takes.
//!
//! [`TurnLog`] is what `StartSession`, `SendMessage` and (with the agent
//! issue) the agent loop write through. A turn is appended to the store (a
//! detached write with its own timeout, so a cancelled caller still records
//! what happened) and only after the commit is it published to the
//! broadcaster. A failed write publishes nothing and comes back as
//! [`TurnLogError::NotPersisted`].
//!
//! It also keeps the two pieces of per-session memory the live view needs
//! and the database does not: which tool calls are running right now (so a
//! late watcher can be told), and the cancellation token of each running
//! burst (so `CancelSession` can stop it).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use inquest_broadcast::{Event, ToolCallStart, TurnBroadcaster};
use inquest_core::{
    IdempotencyKey, IncidentId, NewTurn, SessionId, SessionStatus, Turn, UserMessage,
};
use inquest_store::{
    ACTIVE, SendOutcome, SessionRow, StartedSession, Store, StoreError, Transition,
};
use tokio_util::sync::CancellationToken;

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

    /// Appends `turn` and, once committed, publishes it. A tool result
    /// settles its running call.
    pub async fn append(
        &self,
        session: SessionId,
        turn: NewTurn,
    ) -> Result<Arc<Turn>, TurnLogError> {
        let stored = self
            .store
            .append_turn(session, turn)
            .await
            .map_err(TurnLogError::NotPersisted)?;
        Ok(self.publish_committed(stored))
    }

    /// Publishes a turn the store has committed.
    fn publish_committed(&self, turn: Turn) -> Arc<Turn> {
        let turn = Arc::new(turn);
        if let Some(call_id) = &turn.tool_call_id {
            let mut state = self.lock();
            if let Some(calls) = state.running_calls.get_mut(&turn.session_id) {
                calls.retain(|c| &c.call_id != call_id);
                if calls.is_empty() {
                    state.running_calls.remove(&turn.session_id);
                }
            }
        }
        self.broadcaster
            .publish(turn.session_id, Event::Turn(Arc::clone(&turn)));
        turn
    }

    /// Announces a tool call about to run. Not persisted; remembered until
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

    /// Claims a `pending` session's burst: status becomes `running`, and the
    /// returned token fires when the session is cancelled. `None` when the
    /// session is not pending (someone else claimed it, or it was cancelled).
    pub async fn claim_burst(
        &self,
        session: SessionId,
    ) -> Result<Option<CancellationToken>, TurnLogError> {
        let transition = self
            .store
            .transition(
                session,
                &[SessionStatus::Pending],
                SessionStatus::Running,
                None,
            )
            .await
            .map_err(TurnLogError::ClaimFailed)?;
        match transition {
            Transition::Changed(_) => {
                let token = CancellationToken::new();
                self.lock().bursts.insert(session, token.clone());
                Ok(Some(token))
            }
            Transition::Unchanged(_) => Ok(None),
        }
    }

    /// Ends a burst: every watcher's stream ends, running calls are
    /// forgotten, and `status` + `exit_reason` are recorded if the session
    /// is still pending or running (a cancel that won stays).
    ///
    /// The broadcaster is closed *before* the status is written. The other
    /// order has a race: once the status says `idle`, a follow-up
    /// `SendMessage` may commit and reopen the latch, and a late `close`
    /// would then end the new burst's watchers. This order never hangs a
    /// watcher either: one that subscribes after the close gets an ended
    /// subscription, one that subscribed before is ended by it.
    pub async fn close(
        &self,
        session: SessionId,
        status: SessionStatus,
        exit_reason: &str,
    ) -> Result<Transition, TurnLogError> {
        self.forget(session);
        self.broadcaster.close(session);
        self.store
            .transition(session, &ACTIVE, status, Some(exit_reason.to_owned()))
            .await
            .map_err(TurnLogError::CloseNotRecorded)
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
