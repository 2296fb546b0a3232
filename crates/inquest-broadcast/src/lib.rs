//! In-process fan-out of a session's live events to its watchers. Depends
//! on the domain crate only; start at [`TurnBroadcaster::publish`] and
//! [`Subscription`].
//!
//! The agent persists a turn, then [`TurnBroadcaster::publish`]es it; each
//! `WatchSession` stream holds a [`Subscription`]. Events are hints on top of
//! the database, which stays the source of truth: a watcher that falls
//! behind is told so ([`SubscriptionItem::Lagged`]) and recovers by
//! reconnecting with `after_seq`.
//!
//! Rules:
//! - One bounded channel per subscriber carries both turns and tool starts,
//!   so a tool start is never seen after its result.
//! - Publishing never blocks or awaits. A full channel drops the event for
//!   that subscriber only and ends its stream with `Lagged` once the events
//!   already queued have been read: never a silent gap.
//! - Text deltas ([`Event::TextDelta`]) are best effort: dropped, never
//!   lagging, for a subscriber whose channel is filling up, so they never
//!   crowd out the committed turn that supersedes them.
//! - [`TurnBroadcaster::close`] ends every stream of a session (after its
//!   queued events) and latches the session as finished, so a late
//!   subscriber gets an ended stream instead of one that never ends.
//! - No tasks are spawned, except the one forwarding task of
//!   [`TurnBroadcaster::with_fanout`], which delivers large fan-outs from
//!   the runtime the watchers run on, in publish order, and ends with the
//!   broadcaster. A subscriber's map entry lives exactly as long as its
//!   [`Subscription`] (or until the session is closed).

mod latch;

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fmt;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use inquest_core::{Seq, SessionId, Turn};
use time::OffsetDateTime;
use tokio::sync::mpsc::{self, error::TrySendError};
use tokio_stream::Stream;

use crate::latch::Latch;

/// Default per-subscriber channel capacity, in events.
pub const DEFAULT_CAPACITY: usize = 1024;
/// Default number of finished sessions remembered by the close latch.
pub const DEFAULT_LATCH_CAPACITY: usize = 256;

/// A tool call about to be dispatched. Not persisted: the durable record is
/// the tool turn carrying its result, published later on the same channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCallStart {
    pub session_id: SessionId,
    /// Seq of the assistant turn that requested the call.
    pub assistant_seq: Seq,
    pub call_id: String,
    pub tool_name: String,
    pub started_at: OffsetDateTime,
}

/// A piece of the text of the assistant turn being written, as the model
/// streams it. Not persisted: the committed turn `turn_seq`, published
/// later on the same channel, supersedes every delta for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextDelta {
    pub session_id: SessionId,
    /// The seq the assistant turn will take.
    pub turn_seq: Seq,
    /// From 1; a higher attempt starts the text again.
    pub attempt: u32,
    /// UTF-8 byte offset of `text` in the attempt's text.
    pub offset: u64,
    pub text: Arc<str>,
}

/// A message stored in the session's queue, to open its next burst.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageQueued {
    pub session_id: SessionId,
    pub text: Arc<str>,
    /// Its place in the queue when it was stored (1 = next).
    pub position: u32,
}

/// A committed turn as published: shared by every subscriber, with room
/// for its wire encoding, made by the first subscriber that needs it and
/// reused by the others (so a turn fanned out to 1,000 watchers is encoded
/// once). The broadcaster never looks inside the encoding. One `Arc` for
/// both, so handing it to a subscriber is one reference count, not two:
/// at 1,000 watchers that count is taken and given back 1,000 times per
/// turn from both cores.
#[derive(Clone)]
pub struct PublishedTurn(Arc<Published>);

struct Published {
    turn: Arc<Turn>,
    wire: OnceLock<Bytes>,
}

impl PublishedTurn {
    pub fn new(turn: Arc<Turn>) -> Self {
        Self(Arc::new(Published {
            turn,
            wire: OnceLock::new(),
        }))
    }

    pub fn turn(&self) -> &Arc<Turn> {
        &self.0.turn
    }

    /// The turn's wire encoding, `encode`d by the first caller and
    /// shared after (every caller must pass the same encoding), as bytes
    /// this published turn keeps: handing them on moves this reference
    /// instead of taking another.
    pub fn into_wire(
        self,
        encode: impl FnOnce(&Turn) -> Bytes,
    ) -> Arc<dyn AsRef<[u8]> + Send + Sync> {
        self.0.wire.get_or_init(|| encode(&self.0.turn));
        self.0
    }
}

impl AsRef<[u8]> for Published {
    /// The encoding; only handed out by [`PublishedTurn::into_wire`], once
    /// it is made.
    fn as_ref(&self) -> &[u8] {
        self.wire.get().map_or(&[], |wire| wire.as_ref())
    }
}

impl std::ops::Deref for PublishedTurn {
    type Target = Turn;

    fn deref(&self) -> &Turn {
        &self.0.turn
    }
}

impl fmt::Debug for PublishedTurn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.turn.fmt(f)
    }
}

impl PartialEq for PublishedTurn {
    fn eq(&self, other: &Self) -> bool {
        self.0.turn == other.0.turn
    }
}

impl From<Arc<Turn>> for PublishedTurn {
    fn from(turn: Arc<Turn>) -> Self {
        Self::new(turn)
    }
}

/// One live event of a session: exactly one payload.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A turn that is already committed to the database.
    Turn(PublishedTurn),
    ToolCallStart(ToolCallStart),
    /// Best effort, unlike the others: see [`TurnBroadcaster::publish`].
    TextDelta(TextDelta),
    /// A message was queued behind the running burst (committed).
    MessageQueued(MessageQueued),
}

impl Event {
    pub fn session_id(&self) -> SessionId {
        match self {
            Event::Turn(turn) => turn.session_id,
            Event::ToolCallStart(start) => start.session_id,
            Event::TextDelta(delta) => delta.session_id,
            Event::MessageQueued(queued) => queued.session_id,
        }
    }
}

/// What a [`Subscription`] yields.
#[derive(Debug, Clone, PartialEq)]
pub enum SubscriptionItem {
    Event(Event),
    /// Terminal: at least one event was dropped for this subscriber after
    /// the events yielded so far. The stream ends right after this.
    Lagged,
}

/// Per-session pub/sub of live events. Cheap to clone; clones share state.
#[derive(Clone)]
pub struct TurnBroadcaster {
    inner: Arc<Inner>,
}

struct Inner {
    /// Capacity of each subscriber's channel (at least 1). When a channel is
    /// full the event is dropped for that subscriber, which becomes lagged.
    capacity: usize,
    /// Subscribers and the finished latch.
    ///
    /// A std mutex, not a tokio one: every critical section is short and
    /// synchronous (map updates and `try_send`, which never waits), the lock
    /// is never held across an `.await`, and it must be taken from `Drop`,
    /// which cannot await. One lock for all sessions keeps close/subscribe/
    /// publish trivially atomic with respect to each other; holding it while
    /// publishing also gives every subscriber of a session the same order.
    state: Mutex<State>,
    /// Total events not delivered to some subscriber because it was lagged
    /// (one count per event per subscriber). An atomic so readers (metrics)
    /// need not take the lock; it only ever grows (wraps after 2^64).
    dropped: AtomicU64,
    /// Text deltas not sent to a subscriber whose channel was too full.
    dropped_deltas: AtomicU64,
    /// Where large fan-outs are delivered, if set
    /// ([`TurnBroadcaster::with_fanout`]).
    fanout: OnceLock<Fanout>,
}

/// The hand-off of large fan-outs to a task on another runtime.
struct Fanout {
    /// To the forwarding task; bounded ([`FANOUT_QUEUE`]).
    tx: mpsc::Sender<Deferred>,
    /// Sessions with at least this many subscribers are handed off.
    threshold: usize,
}

/// What the forwarding task does next, in publish order.
enum Deferred {
    Publish(SessionId, Event),
    /// Ends the subscribers whose key is below the bound: those there at
    /// the close. One that subscribed after a reopen, while the close still
    /// waited, belongs to the next burst and stays.
    Close(SessionId, u64),
}

/// Events waiting for the forwarding task, over all sessions. Full: the
/// event cannot be delivered, and the session's watchers are lagged (they
/// reconnect and read the database), as a full subscriber channel does.
pub const FANOUT_QUEUE: usize = 4096;

struct State {
    /// Live subscribers by session, then by subscriber key. A session entry
    /// exists only while it has at least one subscriber.
    sessions: HashMap<SessionId, HashMap<u64, Slot>>,
    /// Sessions whose run has finished (bounded FIFO, oldest evicted).
    latch: Latch,
    /// Next subscriber key; unique for the broadcaster's lifetime.
    next_key: u64,
    /// Per session, the items handed to the forwarding task and not yet
    /// done. While a session has any, its publishes and its close are
    /// handed off too, so they stay in order behind them.
    deferred: HashMap<SessionId, usize>,
}

/// The broadcaster's side of one subscriber.
struct Slot {
    /// Bounded sender (capacity [`Inner::capacity`]); `None` once the
    /// subscriber is lagged, which closes the channel so the reader ends
    /// after draining what was queued before the gap.
    tx: Option<mpsc::Sender<Event>>,
    stats: Arc<SubscriberStats>,
}

/// State shared between a [`Slot`] and its [`Subscription`]. Atomics, so the
/// subscription can read them without the broadcaster's lock.
#[derive(Default)]
struct SubscriberStats {
    /// Set (before the sender is dropped) when an event was dropped for this
    /// subscriber; the reader turns channel-closed into `Lagged`.
    lagged: AtomicBool,
    /// Events not delivered to this subscriber.
    dropped: AtomicU64,
}

impl Slot {
    /// Marks the subscriber lagged and closes its channel.
    fn lag(&mut self) {
        // Release, then drop the sender: the reader sees the channel closed
        // only after this store, so it reads `lagged == true`.
        self.stats.lagged.store(true, Ordering::Release);
        self.tx = None;
    }
}

impl Default for TurnBroadcaster {
    fn default() -> Self {
        Self::new(DEFAULT_CAPACITY)
    }
}

impl fmt::Debug for TurnBroadcaster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TurnBroadcaster")
            .field("capacity", &self.inner.capacity)
            .field("dropped_events", &self.dropped_events())
            .finish_non_exhaustive()
    }
}

impl TurnBroadcaster {
    /// A broadcaster whose subscriber channels hold `capacity` events (a
    /// capacity of 0 is treated as 1), latching the last
    /// [`DEFAULT_LATCH_CAPACITY`] closed sessions.
    pub fn new(capacity: usize) -> Self {
        Self::with_latch_capacity(capacity, DEFAULT_LATCH_CAPACITY)
    }

    /// Like [`TurnBroadcaster::new`], remembering `latch_capacity` closed
    /// sessions.
    pub fn with_latch_capacity(capacity: usize, latch_capacity: usize) -> Self {
        Self {
            inner: Arc::new(Inner {
                capacity: capacity.max(1),
                state: Mutex::new(State {
                    sessions: HashMap::new(),
                    latch: Latch::new(latch_capacity),
                    next_key: 0,
                    deferred: HashMap::new(),
                }),
                dropped: AtomicU64::new(0),
                dropped_deltas: AtomicU64::new(0),
                fanout: OnceLock::new(),
            }),
        }
    }

    /// Subscribes to `session`'s live events. For a latched (finished)
    /// session the subscription is already ended
    /// ([`Subscription::is_closed_at_start`]).
    pub fn subscribe(&self, session: SessionId) -> Subscription {
        let stats = Arc::new(SubscriberStats::default());
        let mut state = self.inner.lock();
        if state.latch.contains(session) {
            drop(state);
            // Sender dropped at once: the receiver yields `None` straight away.
            let (_, rx) = mpsc::channel(1);
            return Subscription::new(&self.inner, session, None, rx, stats);
        }
        let (tx, rx) = mpsc::channel(self.inner.capacity);
        let key = state.next_key;
        state.next_key += 1;
        let slot = Slot {
            tx: Some(tx),
            stats: Arc::clone(&stats),
        };
        state.sessions.entry(session).or_default().insert(key, slot);
        drop(state);
        Subscription::new(&self.inner, session, Some(key), rx, stats)
    }

    /// Sends `event` to every subscriber of `session`. Never blocks: a
    /// subscriber whose channel is full misses this event, is marked lagged
    /// and gets no further events.
    ///
    /// A [`Event::TextDelta`] is best effort: it goes only to a subscriber
    /// whose channel has more than a quarter of its capacity free, and is
    /// otherwise dropped for that subscriber without lagging it (counted
    /// in [`TurnBroadcaster::dropped_text_deltas`]). So deltas never fill
    /// a slow watcher's channel to the point where the committed turn that
    /// follows them could not be queued; a watcher that missed a delta
    /// sees a gap in its offsets and waits for the turn.
    ///
    /// With [`TurnBroadcaster::with_fanout`] set, the sends to a widely
    /// watched session happen shortly after, on the forwarding task, in
    /// the same order.
    pub fn publish(&self, session: SessionId, event: Event) {
        debug_assert_eq!(
            event.session_id(),
            session,
            "event published to another session"
        );
        let mut state = self.inner.lock();
        let Some(subscribers) = state.sessions.get(&session) else {
            return;
        };
        if let Some(fanout) = self.inner.fanout.get()
            && (subscribers.len() >= fanout.threshold || state.deferred.contains_key(&session))
        {
            match fanout.tx.try_send(Deferred::Publish(session, event)) {
                Ok(()) => *state.deferred.entry(session).or_insert(0) += 1,
                Err(_) => {
                    let lagged = lag_slots(&mut state, session);
                    // Once per lagging, not per event while the queue is full.
                    if lagged > 0 {
                        tracing::warn!(%session, queue = FANOUT_QUEUE, watchers = lagged, "fan-out queue full; lagging the session's watchers");
                    }
                }
            }
            return;
        }
        self.inner.deliver(&mut state, session, event);
    }

    /// Hands the delivery of a session's events to a task on `runtime`
    /// once the session has `threshold` subscribers or more (and keeps
    /// handing them off while any are waiting there, so a session's events
    /// and its close keep their order). The publisher then does one queue
    /// send instead of waking every subscriber itself: a burst's writer on
    /// the agent runtime waking 1,000 watch streams on the serving runtime
    /// paid a cross-runtime wake-up for each, where the task wakes them
    /// from one of the serving runtime's own threads. The task ends when
    /// the last clone of this broadcaster is dropped (or with its runtime).
    /// Set once; a second call changes nothing.
    pub fn with_fanout(self, runtime: &tokio::runtime::Handle, threshold: usize) -> Self {
        let (tx, rx) = mpsc::channel(FANOUT_QUEUE);
        let fanout = Fanout {
            tx,
            threshold: threshold.max(1),
        };
        if self.inner.fanout.set(fanout).is_ok() {
            runtime.spawn(forward(rx, Arc::downgrade(&self.inner)));
        }
        self
    }

    /// Ends every subscriber's stream of `session` (each drains its queued
    /// events first) and latches the session as finished. Closed
    /// subscribers no longer count in [`TurnBroadcaster::subscriber_count`].
    pub fn close(&self, session: SessionId) {
        let mut state = self.inner.lock();
        state.latch.insert(session);
        if let Some(fanout) = self.inner.fanout.get()
            && state.deferred.contains_key(&session)
            && fanout
                .tx
                .try_send(Deferred::Close(session, state.next_key))
                .is_ok()
        {
            // After the events queued before it.
            *state.deferred.entry(session).or_insert(0) += 1;
            return;
        }
        // Dropping the slots drops the senders, which closes the channels.
        let removed = state.sessions.remove(&session);
        drop(state);
        drop(removed);
    }

    /// Lifts the finished latch so the session can be watched again.
    pub fn reopen(&self, session: SessionId) {
        self.inner.lock().latch.remove(session);
    }

    /// Whether `session` is latched as finished.
    pub fn is_latched(&self, session: SessionId) -> bool {
        self.inner.lock().latch.contains(session)
    }

    /// Marks every current subscriber of every session lagged: each stream
    /// yields its queued events, then `Lagged`, then ends. For when live
    /// delivery can no longer be trusted (e.g. the replica's LISTEN
    /// connection dropped) and every watcher must reconnect. Returns how
    /// many subscribers were newly lagged.
    pub fn lag_all_sessions(&self) -> usize {
        let mut state = self.inner.lock();
        let mut lagged = 0;
        for slot in state.sessions.values_mut().flat_map(HashMap::values_mut) {
            if slot.tx.is_some() {
                slot.lag();
                lagged += 1;
            }
        }
        drop(state);
        if lagged > 0 {
            tracing::info!(subscribers = lagged, "lagged every watcher");
        }
        lagged
    }

    /// Marks every subscriber of `session` lagged (an event for it could
    /// not be delivered). Returns how many were newly lagged.
    pub fn lag_session(&self, session: SessionId) -> usize {
        lag_slots(&mut self.inner.lock(), session)
    }

    /// Subscribers of `session` not yet closed, lagged ones included until
    /// their [`Subscription`] is dropped.
    pub fn subscriber_count(&self, session: SessionId) -> usize {
        self.inner
            .lock()
            .sessions
            .get(&session)
            .map_or(0, HashMap::len)
    }

    /// Total events dropped for lagged subscribers, over all sessions.
    pub fn dropped_events(&self) -> u64 {
        self.inner.dropped.load(Ordering::Relaxed)
    }

    /// Text deltas not sent to some subscriber because its channel was
    /// too full (one count per delta per subscriber); see
    /// [`TurnBroadcaster::publish`].
    pub fn dropped_text_deltas(&self) -> u64 {
        self.inner.dropped_deltas.load(Ordering::Relaxed)
    }
}

impl Inner {
    /// Poisoning is ignored: every critical section leaves the state
    /// consistent at each step, so a panic elsewhere must not wedge watchers.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sends `event` to every subscriber of `session` now (see
    /// [`TurnBroadcaster::publish`]).
    fn deliver(&self, state: &mut State, session: SessionId, event: Event) {
        let Some(subscribers) = state.sessions.get_mut(&session) else {
            return;
        };
        if matches!(event, Event::TextDelta(_)) {
            let reserve = (self.capacity / 4).max(1);
            let mut skipped = 0;
            for slot in subscribers.values_mut() {
                let sent = slot.tx.as_ref().is_some_and(|tx| {
                    tx.capacity() > reserve && tx.try_send(event.clone()).is_ok()
                });
                if !sent {
                    skipped += 1;
                }
            }
            if skipped > 0 {
                self.dropped_deltas.fetch_add(skipped, Ordering::Relaxed);
            }
            return;
        }
        let mut dropped = 0;
        for (key, slot) in subscribers.iter_mut() {
            let Some(tx) = &slot.tx else {
                slot.stats.dropped.fetch_add(1, Ordering::Relaxed);
                dropped += 1;
                continue;
            };
            match tx.try_send(event.clone()) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) => {
                    tracing::debug!(%session, subscriber = key, "watcher fell behind; ending its stream");
                    slot.lag();
                    slot.stats.dropped.fetch_add(1, Ordering::Relaxed);
                    dropped += 1;
                }
                // Unreachable in practice: `Subscription::drop` removes the
                // slot before its receiver goes away.
                Err(TrySendError::Closed(_)) => slot.tx = None,
            }
        }
        if dropped > 0 {
            self.dropped.fetch_add(dropped, Ordering::Relaxed);
        }
    }
}

/// Marks every subscriber of `session` lagged; returns how many were newly
/// lagged.
fn lag_slots(state: &mut State, session: SessionId) -> usize {
    let mut lagged = 0;
    if let Some(slots) = state.sessions.get_mut(&session) {
        for slot in slots.values_mut() {
            if slot.tx.is_some() {
                slot.lag();
                lagged += 1;
            }
        }
    }
    lagged
}

/// The forwarding task of [`TurnBroadcaster::with_fanout`]: delivers the
/// handed-off items in order, until the broadcaster is gone.
async fn forward(mut rx: mpsc::Receiver<Deferred>, inner: std::sync::Weak<Inner>) {
    while let Some(item) = rx.recv().await {
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let mut state = inner.lock();
        let session = match &item {
            Deferred::Publish(session, _) | Deferred::Close(session, _) => *session,
        };
        if let Entry::Occupied(mut waiting) = state.deferred.entry(session) {
            *waiting.get_mut() -= 1;
            if *waiting.get() == 0 {
                waiting.remove();
            }
        }
        match item {
            Deferred::Publish(session, event) => inner.deliver(&mut state, session, event),
            Deferred::Close(session, below) => {
                let mut removed = Vec::new();
                if let Entry::Occupied(mut slots) = state.sessions.entry(session) {
                    removed.extend(slots.get_mut().extract_if(|key, _| *key < below));
                    if slots.get().is_empty() {
                        slots.remove();
                    }
                }
                // The senders drop outside the lock, closing the channels.
                drop(state);
                drop(removed);
            }
        }
    }
}

/// One watcher's view of a session. A [`Stream`] of [`SubscriptionItem`]s
/// (or use [`Subscription::recv`]). It ends (`None`) when the session is
/// closed, right after `Lagged` if the subscriber fell behind, or at once
/// if the session was already latched as finished when subscribing.
/// Dropping it unregisters the subscriber.
pub struct Subscription {
    inner: Arc<Inner>,
    session: SessionId,
    /// Key in the session's subscriber map; `None` if never registered
    /// (the session was latched at subscribe time).
    key: Option<u64>,
    rx: mpsc::Receiver<Event>,
    stats: Arc<SubscriberStats>,
    /// The stream has yielded its last item.
    ended: bool,
}

impl Subscription {
    fn new(
        inner: &Arc<Inner>,
        session: SessionId,
        key: Option<u64>,
        rx: mpsc::Receiver<Event>,
        stats: Arc<SubscriberStats>,
    ) -> Self {
        Self {
            inner: Arc::clone(inner),
            session,
            key,
            rx,
            stats,
            ended: false,
        }
    }

    /// The next item, or `None` once the stream has ended. Cancel-safe.
    pub async fn recv(&mut self) -> Option<SubscriptionItem> {
        std::future::poll_fn(|cx| Pin::new(&mut *self).poll_next(cx)).await
    }

    pub fn session_id(&self) -> SessionId {
        self.session
    }

    /// The next event if one is queued right now, without waiting. `None`
    /// when nothing is queued or the stream is ending: [`Subscription::recv`]
    /// then says which (it yields `Lagged` and the end as usual).
    pub fn try_next_event(&mut self) -> Option<Event> {
        if self.ended {
            return None;
        }
        self.rx.try_recv().ok()
    }

    /// Whether the session was already latched as finished when this
    /// subscription was made (the stream is empty).
    pub fn is_closed_at_start(&self) -> bool {
        self.key.is_none()
    }

    /// Whether the stream has ended or will end once its queued events
    /// are taken (closed, lagged, or latched at start).
    pub fn is_closed(&self) -> bool {
        self.ended || self.rx.is_closed()
    }

    /// Whether an event was dropped for this subscriber.
    pub fn is_lagged(&self) -> bool {
        self.stats.lagged.load(Ordering::Acquire)
    }

    /// How many events were dropped for this subscriber.
    pub fn dropped_events(&self) -> u64 {
        self.stats.dropped.load(Ordering::Relaxed)
    }
}

impl Stream for Subscription {
    type Item = SubscriptionItem;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.ended {
            return Poll::Ready(None);
        }
        match ready!(self.rx.poll_recv(cx)) {
            Some(event) => Poll::Ready(Some(SubscriptionItem::Event(event))),
            // All senders are gone: closed, lagged, or latched at start.
            None => {
                self.ended = true;
                Poll::Ready(self.is_lagged().then_some(SubscriptionItem::Lagged))
            }
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let Some(key) = self.key else { return };
        let mut state = self.inner.lock();
        if let Entry::Occupied(mut entry) = state.sessions.entry(self.session) {
            entry.get_mut().remove(&key);
            if entry.get().is_empty() {
                entry.remove();
            }
        }
    }
}

impl fmt::Debug for Subscription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Subscription")
            .field("session", &self.session)
            .field("closed_at_start", &self.is_closed_at_start())
            .field("lagged", &self.is_lagged())
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests;
