//! `WatchSession`: stored turns, then live events, each turn exactly once.
//!
//! The handshake (DESIGN.md, "WatchSession"):
//! 1. subscribe to the broadcaster;
//! 2. read the session row (404, cursor check, is it running?), take a
//!    stream slot (the caps), and only then, for a running session,
//!    register this replica as a watcher (the one write of a watch) and
//!    take a snapshot of the tool calls running right now;
//! 3. send the stored turns with `seq > after_seq`, a page at a time;
//! 4. if the session is not pending/running, end (OK);
//! 5. announce the snapshot's calls whose result was not among the stored
//!    turns sent;
//! 6. send the text streamed so far of the assistant turn being written
//!    here, if any, as one delta at offset 0 (`TurnLog::streamed_text`);
//! 7. forward live events: turns at or below the last sent seq are skipped,
//!    a turn past a gap is preceded by the missing turns read from the
//!    database, a tool start already announced is skipped, and a text
//!    delta is sent only where it continues the text this stream showed
//!    (`Watcher::admit_delta`: the part already sent is cut off, one for a
//!    turn already sent, an older attempt, or past a gap is skipped).
//!
//! A turn committed during step 3 was either read in step 3 or published
//! after step 1, so it arrives, once. A tool start published after step 1
//! arrives live; one published before is in the snapshot of step 2. A
//! text delta published after step 1 is queued; one released before step
//! 6 is in its snapshot; the offsets say which part of a queued one is new,
//! so the text arrives once, in order, and never after its turn.
//!
//! A refused watch (NOT_FOUND, OUT_OF_RANGE, RESOURCE_EXHAUSTED) writes
//! nothing: every check comes before the registration.
//!
//! Each message carries one event; a turn is shown in at most
//! `limits.max_response_bytes` (`convert::turn_within`), so no message
//! exceeds what a default client accepts.
//!
//! Streams are capped per replica and per session
//! (`limits.max_watch_streams`, `limits.max_watch_streams_per_session`):
//! a [`WatchSlot`] is taken before the stream starts and released when
//! its task ends, however it ends (client gone included).
//!
//! Each stream is no task of its own: it is the [`Watcher`]'s future,
//! polled by tonic through [`WatchStream`], and every event the watcher
//! sends comes out of the stream's `poll_next` (an outbox of at most
//! `stream::BATCH` events, not a channel). So a live event takes one
//! wake-up from the broadcaster to the HTTP/2 stream, as a bare tonic
//! stream over a channel does, a watcher woken with a backlog moves a
//! batch of it per poll, and the rest of a slow client's backlog sits in
//! the broadcaster's per-subscriber channel, where lag is measured. A
//! stream ends when the session's burst ends, when its subscriber lags (Lagged, then ABORTED), on server
//! shutdown (UNAVAILABLE), or as soon as the client goes away (tonic drops
//! the stream, and with it the watcher). Its [`Subscription`] and its
//! [`WatchSlot`] are dropped before the final events are handed out, so a
//! client slow to take them holds neither.

use std::{
    collections::HashSet,
    sync::{Arc, atomic::Ordering},
    time::Duration,
};

use inquest_broadcast::{
    Event, PublishedTurn, Subscription, SubscriptionItem, TextDelta, ToolCallStart,
};
use inquest_core::{AfterSeq, Role, SessionId, Turn};
use inquest_proto::{
    EncodedWatchEvent,
    v1::{self as pb, watch_event::Event as WireEvent},
};
use inquest_store::{SessionRow, Store, StoreError};
use tokio_util::sync::CancellationToken;
use tonic::{Code, Status};

mod slots;
mod stream;

pub use slots::{TenantShare, WATCH_RETRY_AFTER, WatchMetrics, WatchSlot, WatchSlots};
use stream::Outbox;
pub use stream::WatchStream;

use crate::limits::ApiLimits;
use crate::{
    convert,
    reason::{self, Reason, key},
    status::ApiError,
};
use inquest_engine::turn_log::TurnLog;

/// What every watch stream needs; one per server.
#[derive(Clone)]
pub struct Watches {
    pub log: TurnLog,
    /// The API lane of the store: watcher registration and drain reads.
    pub store: Store,
    pub shutdown: CancellationToken,
    pub heartbeat: Duration,
    pub drain_page: u32,
    pub drain_delay: Option<Duration>,
    pub metrics: Arc<WatchMetrics>,
    /// The broadcaster's per-subscriber capacity: how many recent tool
    /// results a watcher remembers (see `Watcher::answered`).
    pub channel_capacity: usize,
    /// The stream caps and the largest message (`[limits]`).
    pub limits: ApiLimits,
}

impl Watches {
    /// Runs steps 1 and 2 in the caller (so NOT_FOUND / OUT_OF_RANGE /
    /// RESOURCE_EXHAUSTED come back as the call's status) and the rest as
    /// the returned stream is polled. Returns the session row it read too
    /// (the caller checks it for an orphan).
    pub async fn start(
        &self,
        session: SessionId,
        after: AfterSeq,
        share: TenantShare<'_>,
    ) -> Result<(WatchStream, SessionRow), ApiError> {
        let subscription = self.log.live().broadcaster().subscribe(session);
        // Every check before the one write, so a refused watch writes
        // nothing.
        let row = self.log.session(session).await?;
        let head = row.head_seq.map_or(0, |h| h.get());
        if after.get() > head {
            return Err(ApiError::OutOfRange {
                after: after.get(),
                head,
            });
        }
        let slot = WatchSlot::take(&self.metrics, session, share, &self.limits)?;
        let running = row.status.is_active();
        let snapshot = if running {
            // Other replicas announce this session's turns and tool starts
            // only to replicas that registered a watcher. Registering after
            // subscribing and before the drain reads means every turn
            // arrives one way or the other: one committed before the
            // registration is read by the drain (which starts after it),
            // one committed after it is announced here, and a turn of this
            // replica is published to the subscription. The snapshot of
            // running calls is taken after registering for the same
            // reason (a start announced before it is in the registry, one
            // after reaches the subscription). Reading the row before
            // registering is safe: a session that settles in between ends
            // the subscription through the status notification, which
            // every replica hears, watcher or not. A session not running
            // is not registered at all: its stream ends after the drain
            // (and the store ignores a registration of it anyway).
            self.store.register_watcher(session).await?;
            self.log.live().running_calls(session)
        } else {
            Vec::new()
        };
        let out = Outbox::default();
        self.metrics.streams_opened.fetch_add(1, Ordering::Relaxed);
        let watcher = Watcher {
            watches: self.clone(),
            session,
            subscription,
            out: out.clone(),
            last: after,
            head,
            running,
            snapshot,
            announced: HashSet::new(),
            answered: RecentIds::new(self.channel_capacity),
            sent_at: std::collections::VecDeque::new(),
            open_calls: running.then(Vec::new),
            shown_text: None,
            _slot: slot,
        };
        let stream = WatchStream {
            run: Some(Box::pin(watcher.run())),
            out,
        };
        Ok((stream, row))
    }
}

/// Why a stream stopped.
enum End {
    /// The burst ended, or the session was not running: OK.
    Finished,
    Lagged,
    Shutdown,
    Failed(Status),
}

type Step<T = ()> = Result<T, End>;

struct Watcher {
    watches: Watches,
    session: SessionId,
    subscription: Subscription,
    out: Outbox,
    /// The last turn sent (or the request's cursor).
    last: AfterSeq,
    /// The head seq read at attach time.
    head: u64,
    /// Whether the session was pending/running at attach time.
    running: bool,
    /// Tool calls running at attach time not yet settled by a sent result.
    snapshot: Vec<ToolCallStart>,
    /// Call ids announced from the snapshot, so their live start (published
    /// between subscribe and snapshot) is not sent twice.
    announced: HashSet<String>,
    /// Call ids of the tool results this stream sent most recently. A live
    /// start still queued when the drain read its result from the database
    /// must not be shown after that result. Every event published after the
    /// start sits behind it in the same bounded queue, so remembering as
    /// many results as the queue holds is enough.
    answered: RecentIds,
    /// When each of the latest turns this stream sent was committed, by
    /// seq (the last [`SENT_AT`]): a live turn under a seq already sent is
    /// the same turn again (equal time) or a different one, which only a
    /// database failover that lost turns makes possible.
    sent_at: std::collections::VecDeque<(u64, time::OffsetDateTime)>,
    /// During the first drain: the calls of the latest assistant turn sent
    /// that no sent result answers yet, in call order. Calls run one after
    /// another, so the first of them is the one running (or about to). A
    /// replica that registered as a watcher after the writer announced that
    /// call never heard of it, so its snapshot lacks it: this fills the gap.
    open_calls: Option<Vec<ToolCallStart>>,
    /// The streamed text this stream showed: (turn seq, attempt, bytes).
    shown_text: Option<(inquest_core::Seq, u32, u64)>,
    /// This stream's place under the caps, freed when the task ends.
    _slot: WatchSlot,
}

impl Watcher {
    async fn run(mut self) {
        // A token of this stream's own: every stream polls it with every
        // event, and polling the server's token itself would take the one
        // lock all streams share.
        let shutdown = self.watches.shutdown.child_token();
        // Biased: polled once per batch the stream hands out, and a fixed
        // order draws no random number for it.
        let end = tokio::select! {
            biased;
            () = shutdown.cancelled() => End::Shutdown,
            end = self.stream() => match end { Ok(()) => End::Finished, Err(end) => end },
        };
        let Watcher {
            watches,
            session,
            subscription,
            out,
            last,
            head,
            _slot,
            ..
        } = self;
        let dropped = subscription.dropped_events();
        // Unregister now and free the slot: nothing more comes from the
        // broadcaster, and a client slow to take the final events must
        // hold neither a subscriber nor a place under the caps.
        drop(subscription);
        drop(_slot);
        let cursor = last.get();
        let mut last_words = Vec::new();
        match end {
            End::Finished => {}
            End::Shutdown => last_words.push(Err(reason::status(
                Code::Unavailable,
                Reason::ShuttingDown,
                format!("server shutting down; reconnect with after_seq={cursor}"),
                vec![(key::AFTER_SEQ, cursor.to_string())],
            ))),
            End::Lagged => {
                let metrics = &watches.metrics;
                metrics.streams_lagged.fetch_add(1, Ordering::Relaxed);
                metrics.dropped_events.fetch_add(dropped, Ordering::Relaxed);
                tracing::info!(session_id = %session, last_delivered_seq = cursor, dropped_events = dropped, "watcher fell behind");
                let head = match watches.log.session(session).await {
                    Ok(row) => row.head_seq.map_or(0, |h| h.get()),
                    Err(_) => head.max(cursor),
                };
                let lagged = WireEvent::Lagged(pb::Lagged {
                    last_delivered_seq: last.as_i64(),
                    head_seq: i64::try_from(head).unwrap_or(i64::MAX),
                });
                last_words.push(Ok(EncodedWatchEvent::new(&convert::watch_event(lagged))));
                last_words.push(Err(reason::status(
                    Code::Aborted,
                    Reason::WatcherLagged,
                    format!("watcher fell behind; reconnect with after_seq={cursor}"),
                    vec![
                        (key::AFTER_SEQ, cursor.to_string()),
                        (key::HEAD_SEQ, head.to_string()),
                    ],
                )));
            }
            End::Failed(status) => last_words.push(Err(status)),
        }
        // Handed out as the client takes them; a client that never does
        // keeps only this stream (and its HTTP/2 window) until it leaves
        // or the server's shutdown grace ends.
        for item in last_words {
            out.send(item).await;
        }
    }

    async fn stream(&mut self) -> Step {
        if let Some(delay) = self.watches.drain_delay {
            tokio::time::sleep(delay).await;
        }
        if !self.running {
            // Settled when we attached: everything up to that head, what
            // waits for a human, then OK.
            self.drain(Some(self.head)).await?;
            return self.announce_held().await;
        }
        self.drain(None).await?;
        if let Some(open) = self.open_calls.take()
            && let Some(first) = open.into_iter().next()
            && !self.snapshot.iter().any(|c| c.call_id == first.call_id)
        {
            self.snapshot.insert(0, first);
        }
        for start in std::mem::take(&mut self.snapshot) {
            self.announced.insert(start.call_id.clone());
            self.send(WireEvent::ToolCallStart(convert::tool_call_start(&start)))
                .await?;
        }
        if let Some(so_far) = self.watches.log.live().streamed_text(self.session) {
            self.send_delta(&so_far).await?;
        }
        let heartbeat = self.watches.heartbeat;
        let mut quiet = std::pin::pin!(tokio::time::sleep(heartbeat));
        // When this stream last had an event. The quiet timer is not reset
        // per event (that takes the runtime's timer lock once per event and
        // watcher: 1,000 times per turn at 1,000 watchers); when it fires
        // early it is pushed to a heartbeat after the last event. Nor is
        // the clock read per event: only after the last of a run of
        // events already queued, when the stream goes quiet.
        let mut active_at = tokio::time::Instant::now();
        // An event taken from the queue (while merging deltas, or the next
        // one already queued), to handle next.
        let mut held: Option<Event> = None;
        loop {
            let item = tokio::select! {
                biased;
                item = std::future::ready(held.take()), if held.is_some() => {
                    item.map(SubscriptionItem::Event)
                }
                item = self.subscription.recv() => item,
                () = &mut quiet => {
                    let due = active_at + heartbeat;
                    if tokio::time::Instant::now() < due {
                        quiet.as_mut().reset(due);
                        continue;
                    }
                    // A quiet stream also asks the store whether the burst
                    // ended: a close whose notification this replica
                    // missed must not leave the stream open for ever.
                    if self.settled_or_resubscribe(false).await? {
                        return Ok(());
                    }
                    let head_seq = self.last.as_i64();
                    self.send(WireEvent::Heartbeat(pb::Heartbeat { head_seq })).await?;
                    active_at = tokio::time::Instant::now();
                    quiet.as_mut().reset(active_at + heartbeat);
                    continue;
                }
            };
            match item {
                None => {
                    if self.settled_or_resubscribe(true).await? {
                        return Ok(());
                    }
                }
                Some(SubscriptionItem::Lagged) => return Err(End::Lagged),
                Some(SubscriptionItem::Event(Event::Turn(turn))) => {
                    if !self.last.admits(turn.seq) {
                        let other = self
                            .sent_at
                            .iter()
                            .find(|(seq, _)| *seq == turn.seq.get())
                            .is_some_and(|(_, at)| *at != turn.created_at);
                        if turn.is_lost_in_failover() || other {
                            // A turn this stream sent is gone: say so.
                            return Err(self.turns_lost(turn.seq.get().saturating_sub(1)));
                        }
                        continue;
                    }
                    if turn.seq.get() > self.last.get() + 1 {
                        // Published out of commit order (concurrent
                        // writers): the missing turns are committed, since
                        // seqs are assigned under the session row's lock.
                        self.drain(Some(turn.seq.get() - 1)).await?;
                    }
                    self.send_published(turn).await?;
                }
                Some(SubscriptionItem::Event(Event::ToolCallStart(start))) => {
                    if self.announced.remove(&start.call_id)
                        || self.answered.contains(&start.call_id)
                    {
                        continue;
                    }
                    self.send(WireEvent::ToolCallStart(convert::tool_call_start(&start)))
                        .await?;
                }
                Some(SubscriptionItem::Event(Event::MessageQueued(queued))) => {
                    self.send(WireEvent::MessageQueued(pb::MessageQueued {
                        session_id: queued.session_id.to_string(),
                        text: queued.text.to_string(),
                        position: queued.position,
                    }))
                    .await?;
                }
                Some(SubscriptionItem::Event(Event::TextDelta(delta))) => {
                    let (merged, next) = self.merge_queued(delta);
                    held = next;
                    self.send_delta(&merged).await?;
                }
            }
            if held.is_none() {
                held = self.subscription.try_next_event();
            }
            if held.is_none() {
                active_at = tokio::time::Instant::now();
            }
        }
    }

    /// Whether the burst really ended, asked of the store rather than of
    /// this replica's latch (another replica may have reopened the
    /// session, or a stale close may have ended the subscription). When
    /// the store records the burst as ended, every turn up to its final
    /// head is sent and the answer is `true`: the stream may end OK. When
    /// the session is still pending or running and `closed` says the
    /// subscription ended, a fresh one is taken (lifting a stale latch),
    /// this replica is registered as a watcher again, and the store is
    /// asked once more — subscribe first, then read, so a close that comes
    /// after the read ends the new subscription and brings us back here.
    async fn settled_or_resubscribe(&mut self, mut closed: bool) -> Step<bool> {
        loop {
            if closed {
                let broadcaster = self.watches.log.live().broadcaster();
                let mut fresh = broadcaster.subscribe(self.session);
                if fresh.is_closed_at_start() {
                    broadcaster.reopen(self.session);
                    fresh = broadcaster.subscribe(self.session);
                }
                self.subscription = fresh;
                self.watches
                    .store
                    .register_watcher(self.session)
                    .await
                    .map_err(|e| self.unavailable(e))?;
            }
            let row = self
                .watches
                .log
                .session(self.session)
                .await
                .map_err(|e| self.unavailable(e))?;
            let head = row.head_seq.map_or(0, |h| h.get());
            if head < self.last.get() {
                // The store holds less than this stream sent: a failover
                // lost turns, and their tombstones are not stored yet.
                return Err(self.turns_lost(head));
            }
            if !row.status.is_active() {
                self.drain(Some(head)).await?;
                if row.status == inquest_core::SessionStatus::AwaitingApproval {
                    self.announce_held().await?;
                }
                return Ok(true);
            }
            if !closed {
                return Ok(false);
            }
            // Anything committed while no subscription was live.
            self.drain(None).await?;
            if !self.subscription.is_closed() {
                return Ok(false);
            }
            closed = true;
        }
    }

    /// Sends an `ApprovalRequested` event for each call of the latest hold
    /// still pending: a settled stream says what waits for a human before
    /// it ends (the approvals are durable, so a late watcher gets them
    /// too).
    async fn announce_held(&mut self) -> Step {
        let approvals = self
            .watches
            .store
            .approvals(self.session)
            .await
            .map_err(|e| self.unavailable(e))?;
        for approval in approvals
            .into_iter()
            .filter(|a| a.state == inquest_core::approval::ApprovalState::Pending)
        {
            self.send(WireEvent::ApprovalRequested(convert::approval(approval)))
                .await?;
        }
        Ok(())
    }

    /// The store could not be asked: end with a retryable code and the
    /// cursor, never OK.
    /// The end of a stream that sent turns the database no longer holds
    /// as sent (a failover lost them; tombstones stand under their seqs,
    /// or will): DATA_LOSS with the cursor to read again from.
    fn turns_lost(&self, after: u64) -> End {
        tracing::warn!(session_id = %self.session, sent_up_to = self.last.get(), after, "a watcher received turns a database failover lost; told to read again");
        End::Failed(reason::status(
            Code::DataLoss,
            Reason::TurnsLost,
            format!(
                "turns after seq {after} that this stream sent were lost in a database failover; \
                 their seqs now hold tombstones: reconnect with after_seq={after} to read them"
            ),
            vec![(key::AFTER_SEQ, after.to_string())],
        ))
    }

    fn unavailable(&self, e: StoreError) -> End {
        if matches!(e, StoreError::NotFound { .. }) {
            // Erased while watched (DeleteSession, retention): the session
            // is gone for good, not for now.
            tracing::info!(session_id = %self.session, "the watched session was erased");
            return End::Failed(crate::status::ApiError::from(e).into());
        }
        tracing::warn!(session_id = %self.session, error = %inquest_core::error_chain(&e), "watch cannot read the session");
        let last = self.last.get();
        End::Failed(crate::status::store_unavailable(
            format!("database unavailable; reconnect with after_seq={last}"),
            Some(last),
        ))
    }

    /// Sends stored turns after `last`, up to `until` (inclusive) or the
    /// head, a page at a time.
    async fn drain(&mut self, until: Option<u64>) -> Step {
        loop {
            let page = self
                .watches
                .store
                .list_turns(self.session, self.last, self.watches.drain_page)
                .await
                .map_err(|e| self.unavailable(e))?;
            for turn in &page.turns {
                if until.is_some_and(|u| turn.seq.get() > u) {
                    return Ok(());
                }
                if let Some(call_id) = &turn.tool_call_id
                    && !self.snapshot.is_empty()
                {
                    self.snapshot.retain(|c| &c.call_id != call_id);
                }
                self.send_turn(turn).await?;
            }
            if !page.more || page.turns.is_empty() {
                return Ok(());
            }
        }
    }

    /// A live turn: its encoding is shared with every other watcher of it
    /// on this replica, and goes to the stream in the reference to the
    /// published turn this watcher was given.
    async fn send_published(&mut self, turn: PublishedTurn) -> Step {
        let max = self.watches.limits.max_response_bytes;
        let seq = turn.seq;
        self.note_sent(&turn);
        let wire = turn.into_wire(|t| encode_turn(t, max).into_bytes());
        self.send_encoded(EncodedWatchEvent::from_shared(wire))
            .await?;
        self.last = AfterSeq::after(seq);
        Ok(())
    }

    async fn send_turn(&mut self, turn: &Turn) -> Step {
        let wire = encode_turn(turn, self.watches.limits.max_response_bytes);
        self.note_sent(turn);
        self.send_encoded(wire).await?;
        self.last = AfterSeq::after(turn.seq);
        Ok(())
    }

    /// What sending `turn` settles, noted before it is handed to the
    /// stream: nothing reads it before that hand-off completes. Only the
    /// cursor (`last`, which a shutdown or a lag reports) is moved after
    /// it, so it never runs ahead of what was handed out.
    fn note_sent(&mut self, turn: &Turn) {
        self.sent_at.push_back((turn.seq.get(), turn.created_at));
        if self.sent_at.len() > SENT_AT {
            self.sent_at.pop_front();
        }
        if let Some(call_id) = &turn.tool_call_id {
            self.answered.insert(call_id.clone());
        }
        if let Some(open) = &mut self.open_calls {
            match (&turn.tool_call_id, turn.role) {
                (Some(call_id), _) => open.retain(|c| &c.call_id != call_id),
                (None, Role::Assistant) => {
                    // Undecodable calls are kept as text by the rebuild:
                    // nothing of them runs.
                    let calls = turn.tool_calls().unwrap_or_default();
                    *open = calls
                        .into_iter()
                        .map(|c| ToolCallStart {
                            session_id: self.session,
                            assistant_seq: turn.seq,
                            call_id: c.id,
                            tool_name: c.name,
                            started_at: turn.created_at,
                        })
                        .collect();
                }
                (None, Role::Notice) => {
                    // A recovery notice settles the calls it repaired.
                    let repaired = turn.repaired_call_ids();
                    if !repaired.is_empty() {
                        open.retain(|c| !repaired.contains(&c.call_id));
                    }
                }
                (None, _) => {}
            }
        }
    }

    /// `delta` joined with the deltas queued right behind it that continue
    /// it (same turn and attempt, next offset), up to [`MAX_MERGED_DELTA`]
    /// bytes: a watcher that fell behind catches up in a few messages
    /// instead of one per piece. The first queued event that does not
    /// continue it comes back, to be handled next.
    fn merge_queued(&mut self, delta: TextDelta) -> (TextDelta, Option<Event>) {
        let mut merged: Option<String> = None;
        let end = |d: &TextDelta, extra: usize| d.offset + (d.text.len() + extra) as u64;
        loop {
            let extra = merged.as_ref().map_or(0, String::len);
            if delta.text.len() + extra >= MAX_MERGED_DELTA {
                break;
            }
            match self.subscription.try_next_event() {
                Some(Event::TextDelta(next))
                    if next.turn_seq == delta.turn_seq
                        && next.attempt == delta.attempt
                        && next.offset == end(&delta, extra) =>
                {
                    merged.get_or_insert_with(String::new).push_str(&next.text);
                }
                Some(other) => {
                    return (with_more(delta, merged), Some(other));
                }
                None => break,
            }
        }
        (with_more(delta, merged), None)
    }

    /// Sends the part of `delta` this stream has not shown, if it
    /// continues what it showed ([`Watcher::admit_delta`]).
    async fn send_delta(&mut self, delta: &TextDelta) -> Step {
        let Some((offset, skip)) = self.admit_delta(delta) else {
            return Ok(());
        };
        let text = &delta.text[skip..];
        // A snapshot too large for one message is left out: the turn
        // follows, and what streams after it shows as a gap, skipped.
        if text.len() + 1024 > self.watches.limits.max_response_bytes {
            return Ok(());
        }
        self.send(WireEvent::TextDelta(convert::text_delta(
            delta, offset, text,
        )))
        .await?;
        self.shown_text = Some((delta.turn_seq, delta.attempt, offset + text.len() as u64));
        Ok(())
    }

    /// Where the new part of `delta` starts (its offset in the attempt's
    /// text, and the bytes of `delta.text` to skip), or `None` when
    /// nothing of it may be sent: its turn was sent already, an older
    /// attempt, nothing new, or a gap before it (a delta this stream
    /// missed; the turn will supersede the text). A new turn or attempt is
    /// taken only from its start (offset 0).
    fn admit_delta(&self, delta: &TextDelta) -> Option<(u64, usize)> {
        if !self.last.admits(delta.turn_seq) {
            return None;
        }
        let end = delta.offset + delta.text.len() as u64;
        match self.shown_text {
            Some((seq, attempt, shown)) if seq == delta.turn_seq && attempt == delta.attempt => {
                if end <= shown || delta.offset > shown {
                    return None;
                }
                let skip = usize::try_from(shown - delta.offset).ok()?;
                delta.text.is_char_boundary(skip).then_some((shown, skip))
            }
            Some((seq, attempt, _)) if seq == delta.turn_seq && delta.attempt < attempt => None,
            _ => (delta.offset == 0 && end > 0).then_some((0, 0)),
        }
    }

    async fn send(&self, event: WireEvent) -> Step {
        self.send_encoded(EncodedWatchEvent::new(&convert::watch_event(event)))
            .await
    }

    async fn send_encoded(&self, event: EncodedWatchEvent) -> Step {
        self.out.send(Ok(event)).await;
        Ok(())
    }
}

/// A turn as one watch event, cut to fit one response
/// (`convert::turn_within`).
fn encode_turn(turn: &Turn, max_response_bytes: usize) -> EncodedWatchEvent {
    let wire = convert::turn_within(turn, max_response_bytes);
    EncodedWatchEvent::new(&convert::watch_event(WireEvent::Turn(wire)))
}

/// The most text one merged delta carries (see `Watcher::merge_queued`).
const MAX_MERGED_DELTA: usize = 16 * 1024;

/// `delta` with `more` appended to its text.
fn with_more(delta: TextDelta, more: Option<String>) -> TextDelta {
    match more {
        None => delta,
        Some(more) => TextDelta {
            text: format!("{}{more}", delta.text).into(),
            ..delta
        },
    }
}

/// A set of the last `capacity` ids inserted (oldest evicted first).
struct RecentIds {
    order: std::collections::VecDeque<String>,
    set: HashSet<String>,
    capacity: usize,
}

/// Sent turns whose commit time a stream keeps (see `Watcher::sent_at`):
/// the turns a failover loses are the latest few.
const SENT_AT: usize = 64;

impl RecentIds {
    fn new(capacity: usize) -> Self {
        Self {
            order: std::collections::VecDeque::new(),
            set: HashSet::new(),
            capacity: capacity.max(1),
        }
    }

    fn insert(&mut self, id: String) {
        if !self.set.insert(id.clone()) {
            return;
        }
        self.order.push_back(id);
        if self.order.len() > self.capacity
            && let Some(old) = self.order.pop_front()
        {
            self.set.remove(&old);
        }
    }

    fn contains(&self, id: &str) -> bool {
        self.set.contains(id)
    }
}
