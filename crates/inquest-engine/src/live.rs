//! This replica's live view: what watchers here are shown before (or
//! besides) what the store holds, and the handles of the bursts running
//! here.
//!
//! [`LiveView`] publishes committed turns to the broadcaster and keeps the
//! per-session memory the live view needs and the database does not: which
//! tool calls are running right now, the text of the assistant turn being
//! streamed (so a late watcher can be told), and the cancellation token of
//! each burst running here (so a cancel can stop it). It never touches the
//! store: the writers ([`crate::turn_log`], [`crate::burst_log`]) and the
//! cross-replica [`crate::feed`] call it after their commit.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use inquest_broadcast::{
    Event, MessageQueued, PublishedTurn, TextDelta, ToolCallStart, TurnBroadcaster,
};
use inquest_core::{Role, Seq, SessionId, Turn};
use inquest_redact::StreamedText;

use crate::announced::{Announced, Heard};
use tokio_util::sync::CancellationToken;

/// The live view of this replica. Cheap to clone; clones share state.
#[derive(Clone)]
pub struct LiveView {
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
    /// The text of the assistant turn each session's burst here is
    /// streaming: released so far (what a late watcher is sent first) and
    /// held back. Replaced when a new turn or attempt starts; removed when
    /// a turn at or past its seq is published or the burst ends.
    streaming: HashMap<SessionId, Streaming>,
    /// The stop handles of each claimed burst, by session and lease
    /// epoch. Keyed by the epoch too, so a stale burst that ends late
    /// never drops the handles of the burst that replaced it, and an
    /// interrupt meant for one burst never stops the next.
    bursts: HashMap<(SessionId, i64), BurstHandles>,
    /// Interrupts asked here for a burst not registered here yet (the
    /// message was queued while its session waited to be claimed, or the
    /// claim's answer had not arrived): fired when a burst of that epoch
    /// registers. One per session, the newest epoch; dropped when the
    /// session settles or a later burst registers, so the map holds only
    /// sessions with a burst about to start.
    early_interrupts: HashMap<SessionId, i64>,
    /// The seqs announced per session, here and by other replicas: what a
    /// claim compares the stored head with (bounded, see
    /// [`crate::announced`]).
    announced: Announced,
}

/// What stops one burst from outside, fired from here.
struct BurstHandles {
    /// `CancelSession`.
    cancel: CancellationToken,
    /// An interrupting message (`if_running = INTERRUPT`).
    interrupt: CancellationToken,
}

/// One session's streamed text; see [`LiveState::streaming`].
struct Streaming {
    epoch: i64,
    turn_seq: Seq,
    attempt: u32,
    text: StreamedText,
}

impl LiveView {
    pub fn new(broadcaster: TurnBroadcaster) -> Self {
        Self {
            broadcaster,
            state: Arc::default(),
        }
    }

    pub fn broadcaster(&self) -> &TurnBroadcaster {
        &self.broadcaster
    }

    fn lock(&self) -> MutexGuard<'_, LiveState> {
        // Every critical section leaves the maps consistent; a panic
        // elsewhere must not wedge the live view.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Publishes a turn the store has committed. Only a writer that saw
    /// the commit (or the feed, for another replica's) calls this.
    pub(crate) fn publish_committed(&self, turn: Turn) -> Arc<Turn> {
        let turn = Arc::new(turn);
        // A tool result settles its call; a recovery notice settles every
        // call it repaired (its worker died: no result will come).
        let settled: Vec<String> = match (&turn.tool_call_id, turn.role) {
            (Some(call_id), _) => vec![call_id.clone()],
            (None, Role::Notice) => turn.repaired_call_ids(),
            (None, _) => Vec::new(),
        };
        // Described before the lock: the critical section stays a map
        // update.
        let described = turn.described();
        {
            let mut state = self.lock();
            state
                .announced
                .record(turn.session_id, turn.seq, Some(described));
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

    /// Records a turn another replica announced too large to travel
    /// inline, which is fetched only when someone here follows it: its
    /// seq counts all the same.
    pub(crate) fn announced_seq(&self, session: SessionId, seq: Seq) {
        self.lock().announced.record(session, seq, None);
    }

    /// What this replica heard announced for `session` since it started
    /// (or since it last forgot the session).
    pub fn heard(&self, session: SessionId) -> Option<Heard> {
        self.lock().announced.heard(session)
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

    /// Publishes a message queued behind the running burst (committed).
    pub fn publish_message_queued(&self, queued: MessageQueued) {
        let session = queued.session_id;
        self.broadcaster
            .publish(session, Event::MessageQueued(queued));
    }

    /// Tool calls of `session` started and not yet answered.
    pub fn running_calls(&self, session: SessionId) -> Vec<ToolCallStart> {
        self.lock()
            .running_calls
            .get(&session)
            .cloned()
            .unwrap_or_default()
    }

    /// Whether anyone here follows `session`: a watcher, or a tool call
    /// running for it.
    pub fn follows(&self, session: SessionId) -> bool {
        self.broadcaster.subscriber_count(session) > 0
            || self.lock().running_calls.contains_key(&session)
    }

    /// A burst of `session` at lease `epoch` runs here; the first token
    /// fires when the session is cancelled, the second when a message
    /// interrupts this burst (already fired when one asked for it before
    /// the burst registered).
    pub(crate) fn register_burst(
        &self,
        session: SessionId,
        epoch: i64,
    ) -> (CancellationToken, CancellationToken) {
        let handles = BurstHandles {
            cancel: CancellationToken::new(),
            interrupt: CancellationToken::new(),
        };
        let tokens = (handles.cancel.clone(), handles.interrupt.clone());
        let mut state = self.lock();
        if let Some(&asked) = state.early_interrupts.get(&session)
            && asked <= epoch
        {
            state.early_interrupts.remove(&session);
            if asked == epoch {
                handles.interrupt.cancel();
            }
        }
        state.bursts.insert((session, epoch), handles);
        tokens
    }

    /// Stops the burst of `session` at lease `epoch` at its next safe
    /// point, if it runs here (`true`). Otherwise, with `remember` (the
    /// interrupt was asked on this replica, which may be about to claim
    /// that burst), the burst is stopped when it registers here.
    pub fn interrupt_burst(&self, session: SessionId, epoch: i64, remember: bool) -> bool {
        let mut state = self.lock();
        if let Some(handles) = state.bursts.get(&(session, epoch)) {
            handles.interrupt.cancel();
            return true;
        }
        let later_runs = state.bursts.keys().any(|&(s, e)| s == session && e > epoch);
        if remember && !later_runs {
            let asked = state.early_interrupts.entry(session).or_insert(epoch);
            *asked = (*asked).max(epoch);
        }
        false
    }

    /// Whether this replica holds a claimed burst of `session`.
    pub fn has_burst(&self, session: SessionId) -> bool {
        self.lock().bursts.keys().any(|(s, _)| *s == session)
    }

    /// A session that waits for a burst again (a follow-up, a
    /// confirmation): its watchers follow the next burst.
    pub(crate) fn reopen(&self, session: SessionId) {
        self.broadcaster.reopen(session);
    }

    /// `session` settled in the store (anywhere): its live memory goes and
    /// its watchers here end; when it was `cancelled`, its bursts here are
    /// stopped.
    pub(crate) fn session_settled(&self, session: SessionId, cancelled: bool) {
        for token in self.forget_session(session) {
            if cancelled {
                token.cancel();
            }
        }
        self.broadcaster.close(session);
    }

    /// Drops all of the session's live memory; returns its bursts'
    /// cancel tokens.
    fn forget_session(&self, session: SessionId) -> Vec<CancellationToken> {
        let mut state = self.lock();
        state.running_calls.remove(&session);
        state.streaming.remove(&session);
        state.early_interrupts.remove(&session);
        let keys: Vec<_> = state
            .bursts
            .keys()
            .filter(|(s, _)| *s == session)
            .copied()
            .collect();
        keys.into_iter()
            .filter_map(|k| state.bursts.remove(&k))
            .map(|h| h.cancel)
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
}

#[cfg(test)]
mod tests {
    //! The live view is memory only: tested with plain data, no store.

    use inquest_core::TokenUsage;
    use time::OffsetDateTime;

    use super::*;

    fn seq(n: i64) -> Seq {
        Seq::from_stored(n).expect("a stored seq")
    }

    fn start(session: SessionId, call: &str) -> ToolCallStart {
        ToolCallStart {
            session_id: session,
            assistant_seq: seq(2),
            call_id: call.into(),
            tool_name: "restart_service".into(),
            started_at: OffsetDateTime::UNIX_EPOCH,
        }
    }

    fn result(session: SessionId, at: i64, call: &str) -> Turn {
        Turn {
            session_id: session,
            seq: seq(at),
            role: Role::Tool,
            content: "done".into(),
            tool_calls_raw: serde_json::Value::Null,
            recovery_plan_raw: None,
            tool_call_id: Some(call.into()),
            tool_name: Some("restart_service".into()),
            is_error: false,
            usage: TokenUsage::default(),
            created_at: OffsetDateTime::UNIX_EPOCH,
        }
    }

    #[test]
    fn a_running_call_is_remembered_until_its_result_is_published() {
        let live = LiveView::new(TurnBroadcaster::default());
        let s = SessionId::new();
        live.publish_tool_call_start(start(s, "c1"));
        live.publish_tool_call_start(start(s, "c2"));
        assert_eq!(live.running_calls(s).len(), 2);
        assert!(live.follows(s));
        live.publish_committed(result(s, 3, "c1"));
        let left: Vec<_> = live
            .running_calls(s)
            .into_iter()
            .map(|c| c.call_id)
            .collect();
        assert_eq!(left, ["c2"]);
        live.publish_committed(result(s, 4, "c2"));
        assert!(live.running_calls(s).is_empty());
        assert!(!live.follows(s));
    }

    #[test]
    fn a_stale_burst_ending_late_keeps_its_successors_token_and_calls() {
        let live = LiveView::new(TurnBroadcaster::default());
        let s = SessionId::new();
        let (old, _) = live.register_burst(s, 1);
        let (new, _) = live.register_burst(s, 2);
        live.publish_tool_call_start(start(s, "c1"));
        live.forget_burst(s, 1);
        assert!(live.has_burst(s), "the newer burst still runs here");
        assert_eq!(live.running_calls(s).len(), 1, "its call still runs");
        live.session_settled(s, true);
        assert!(new.is_cancelled() && !old.is_cancelled());
        assert!(!live.has_burst(s));
        assert!(live.running_calls(s).is_empty());
    }

    #[test]
    fn an_interrupt_stops_only_the_burst_of_its_epoch_even_before_it_registers() {
        let live = LiveView::new(TurnBroadcaster::default());
        let s = SessionId::new();
        let (_, first) = live.register_burst(s, 1);
        // Meant for the next claim's burst: nothing runs at epoch 2 yet.
        assert!(!live.interrupt_burst(s, 2, true));
        assert!(!first.is_cancelled(), "the burst running now is not it");
        live.forget_burst(s, 1);
        let (_, second) = live.register_burst(s, 2);
        assert!(second.is_cancelled(), "fired as it registered");
        // Once used, the early interrupt stops nothing later.
        let (_, third) = live.register_burst(s, 3);
        assert!(!third.is_cancelled());
        assert!(live.interrupt_burst(s, 3, false));
        assert!(third.is_cancelled());
        // From the feed (not remembered): a burst not here is not waited for.
        assert!(!live.interrupt_burst(s, 4, false));
        let (_, fourth) = live.register_burst(s, 4);
        assert!(!fourth.is_cancelled());
        // A stale interrupt (an older epoch) never stops a newer burst.
        live.forget_burst(s, 2);
        live.forget_burst(s, 3);
        assert!(!live.interrupt_burst(s, 2, true));
        let (_, fifth) = live.register_burst(s, 5);
        assert!(!fifth.is_cancelled());
        // A settled session forgets what was asked early.
        let t = SessionId::new();
        assert!(!live.interrupt_burst(t, 1, true));
        live.session_settled(t, false);
        let (_, after) = live.register_burst(t, 1);
        assert!(!after.is_cancelled());
    }

    #[test]
    fn streamed_text_starts_again_for_a_new_attempt_and_goes_with_its_turn() {
        let live = LiveView::new(TurnBroadcaster::default());
        let s = SessionId::new();
        live.text_delta(s, 1, seq(3), 0, "the pool is ");
        live.text_delta(s, 1, seq(3), 0, "exhausted");
        assert_eq!(
            live.streamed_text(s).map(|d| d.text.to_string()).as_deref(),
            Some("the pool is ")
        );
        live.text_complete(s, 1, seq(3), 0);
        assert_eq!(
            live.streamed_text(s).map(|d| d.text.to_string()).as_deref(),
            Some("the pool is exhausted")
        );
        live.text_delta(s, 1, seq(3), 1, "retry ");
        let again = live.streamed_text(s).expect("the new attempt's text");
        assert_eq!(
            (again.attempt, again.text.to_string().as_str()),
            (1, "retry ")
        );
        live.publish_committed(result(s, 3, "unrelated"));
        assert!(
            live.streamed_text(s).is_none(),
            "the turn it streamed is stored"
        );
    }
}
