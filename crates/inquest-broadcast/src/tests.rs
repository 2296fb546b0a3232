use std::sync::Arc;

use inquest_core::{Role, Seq, SessionId, TokenUsage, ToolCall, Turn};
use time::OffsetDateTime;
use tokio_stream::StreamExt;

use super::*;

fn seq(n: i64) -> Seq {
    Seq::from_stored(n).unwrap()
}

fn turn(session: SessionId, n: i64) -> Event {
    Event::Turn(PublishedTurn::new(Arc::new(Turn {
        session_id: session,
        seq: seq(n),
        role: Role::Assistant,
        content: format!("turn {n}"),
        tool_calls_raw: ToolCall::encode_all(&[]),
        recovery_plan_raw: None,
        tool_call_id: None,
        tool_name: None,
        is_error: false,
        usage: TokenUsage::default(),
        created_at: OffsetDateTime::UNIX_EPOCH,
    })))
}

fn tool_start(session: SessionId, assistant_seq: i64, call_id: &str) -> Event {
    Event::ToolCallStart(ToolCallStart {
        session_id: session,
        assistant_seq: seq(assistant_seq),
        call_id: call_id.into(),
        tool_name: "grep".into(),
        started_at: OffsetDateTime::UNIX_EPOCH,
    })
}

/// Seq of a turn item; panics on anything else.
fn seq_of(item: &SubscriptionItem) -> u64 {
    match item {
        SubscriptionItem::Event(Event::Turn(t)) => t.seq.get(),
        other => panic!("expected a turn, got {other:?}"),
    }
}

fn session_entries(b: &TurnBroadcaster) -> usize {
    b.inner.lock().sessions.len()
}

#[tokio::test]
async fn publish_order_is_preserved() {
    let b = TurnBroadcaster::new(256);
    let s = SessionId::new();
    let sub = b.subscribe(s);
    for n in 1..=100 {
        b.publish(s, turn(s, n));
    }
    b.close(s);
    let items: Vec<_> = sub.collect().await;
    let seqs: Vec<u64> = items.iter().map(seq_of).collect();
    assert_eq!(seqs, (1..=100).collect::<Vec<_>>());
}

#[tokio::test]
async fn other_sessions_are_not_affected() {
    let b = TurnBroadcaster::default();
    let (s1, s2) = (SessionId::new(), SessionId::new());
    let mut sub2 = b.subscribe(s2);
    b.publish(s1, turn(s1, 1));
    b.publish(s2, turn(s2, 7));
    b.close(s1);
    assert_eq!(seq_of(&sub2.recv().await.unwrap()), 7);
    assert!(!b.is_latched(s2));
    assert_eq!(b.subscriber_count(s2), 1);
}

#[tokio::test]
async fn full_channel_drops_only_for_the_slow_subscriber() {
    let b = TurnBroadcaster::new(4);
    let s = SessionId::new();
    let mut fast = b.subscribe(s);
    let mut slow = b.subscribe(s);

    // `publish` is synchronous: on this single-threaded runtime, with `slow`
    // never read, any waiting in it would hang the test.
    let mut fast_seen = Vec::new();
    for n in 1..=10 {
        b.publish(s, turn(s, n));
        fast_seen.push(seq_of(&fast.recv().await.unwrap()));
    }
    assert_eq!(fast_seen, (1..=10).collect::<Vec<_>>());
    assert!(!fast.is_lagged());
    assert_eq!(fast.dropped_events(), 0);

    assert!(slow.is_lagged());
    assert_eq!(slow.dropped_events(), 6);
    assert_eq!(b.dropped_events(), 6);
    // Lagged subscribers stay registered until dropped.
    assert_eq!(b.subscriber_count(s), 2);

    // The slow one gets what was queued before the gap, then Lagged, then end.
    for n in 1..=4 {
        assert_eq!(seq_of(&slow.recv().await.unwrap()), n);
    }
    assert_eq!(slow.recv().await, Some(SubscriptionItem::Lagged));
    assert_eq!(slow.recv().await, None);
    assert_eq!(slow.recv().await, None);

    // The fast one keeps going.
    b.publish(s, turn(s, 11));
    assert_eq!(seq_of(&fast.recv().await.unwrap()), 11);
    assert_eq!(slow.dropped_events(), 7);

    drop(slow);
    assert_eq!(b.subscriber_count(s), 1);
}

#[tokio::test]
async fn close_ends_streams_after_queued_events() {
    let b = TurnBroadcaster::new(8);
    let s = SessionId::new();
    let subs = [b.subscribe(s), b.subscribe(s)];
    for n in 1..=3 {
        b.publish(s, turn(s, n));
    }
    b.close(s);
    assert!(b.is_latched(s));
    assert_eq!(b.subscriber_count(s), 0);
    for sub in subs {
        assert!(!sub.is_closed_at_start());
        let items: Vec<_> = sub.collect().await;
        assert_eq!(items.iter().map(seq_of).collect::<Vec<_>>(), [1, 2, 3]);
    }
    assert_eq!(b.dropped_events(), 0);
}

#[tokio::test]
async fn close_wakes_a_pending_reader() {
    let b = TurnBroadcaster::default();
    let s = SessionId::new();
    let mut sub = b.subscribe(s);
    let reader = tokio::spawn(async move { sub.recv().await });
    tokio::task::yield_now().await;
    b.close(s);
    assert_eq!(reader.await.unwrap(), None);
}

#[tokio::test]
async fn subscribing_to_a_latched_session_is_already_ended() {
    let b = TurnBroadcaster::default();
    let s = SessionId::new();
    b.close(s);
    let mut sub = b.subscribe(s);
    assert!(sub.is_closed_at_start());
    assert_eq!(b.subscriber_count(s), 0);
    b.publish(s, turn(s, 1));
    assert_eq!(sub.recv().await, None);
    assert!(!sub.is_lagged());
}

#[tokio::test]
async fn latch_holds_256_and_evicts_oldest_first() {
    let b = TurnBroadcaster::default();
    let sessions: Vec<SessionId> = (0..=DEFAULT_LATCH_CAPACITY)
        .map(|_| SessionId::new())
        .collect();
    for s in &sessions[..DEFAULT_LATCH_CAPACITY] {
        b.close(*s);
    }
    assert!(
        sessions[..DEFAULT_LATCH_CAPACITY]
            .iter()
            .all(|s| b.is_latched(*s))
    );

    b.close(sessions[DEFAULT_LATCH_CAPACITY]);
    assert!(!b.is_latched(sessions[0]), "oldest latch is evicted first");
    assert!(sessions[1..].iter().all(|s| b.is_latched(*s)));
    assert!(!b.subscribe(sessions[0]).is_closed_at_start());
    assert!(b.subscribe(sessions[1]).is_closed_at_start());
}

#[tokio::test]
async fn latch_capacity_is_configurable() {
    let b = TurnBroadcaster::with_latch_capacity(8, 2);
    let [a, c, d] = [SessionId::new(), SessionId::new(), SessionId::new()];
    b.close(a);
    b.close(c);
    b.close(d);
    assert!(!b.is_latched(a));
    assert!(b.is_latched(c) && b.is_latched(d));
}

#[tokio::test]
async fn reopen_lifts_the_latch() {
    let b = TurnBroadcaster::default();
    let s = SessionId::new();
    b.close(s);
    assert!(b.subscribe(s).is_closed_at_start());

    b.reopen(s);
    assert!(!b.is_latched(s));
    let mut sub = b.subscribe(s);
    assert!(!sub.is_closed_at_start());
    b.publish(s, turn(s, 5));
    assert_eq!(seq_of(&sub.recv().await.unwrap()), 5);

    b.close(s);
    assert_eq!(sub.recv().await, None);
    assert!(b.is_latched(s));
}

#[tokio::test]
async fn dropping_subscriptions_frees_their_entries() {
    let b = TurnBroadcaster::new(1);
    let s = SessionId::new();
    let first = b.subscribe(s);
    let second = b.subscribe(s);
    let lagged = b.subscribe(s);
    assert_eq!(b.subscriber_count(s), 3);

    b.publish(s, turn(s, 1));
    b.publish(s, turn(s, 2)); // lags all three (capacity 1)
    drop(first);
    assert_eq!(b.subscriber_count(s), 2);
    drop(second);
    drop(lagged);
    assert_eq!(b.subscriber_count(s), 0);
    assert_eq!(session_entries(&b), 0);
}

#[tokio::test]
async fn dropping_a_pending_reader_frees_its_entry() {
    let b = TurnBroadcaster::default();
    let s = SessionId::new();
    let mut sub = b.subscribe(s);
    let reader = tokio::spawn(async move { sub.recv().await });
    tokio::task::yield_now().await;
    assert_eq!(b.subscriber_count(s), 1);

    reader.abort();
    assert!(reader.await.unwrap_err().is_cancelled());
    assert_eq!(b.subscriber_count(s), 0);
    assert_eq!(session_entries(&b), 0);
}

#[tokio::test]
async fn lag_all_sessions_ends_every_stream_with_lagged() {
    let b = TurnBroadcaster::default();
    let (s1, s2) = (SessionId::new(), SessionId::new());
    let mut a = b.subscribe(s1);
    let mut c = b.subscribe(s2);
    let reader = tokio::spawn(async move { c.recv().await });
    tokio::task::yield_now().await;
    b.publish(s1, turn(s1, 1));

    assert_eq!(b.lag_all_sessions(), 2);
    assert_eq!(b.lag_all_sessions(), 0, "already lagged");
    b.publish(s1, turn(s1, 2));

    assert_eq!(seq_of(&a.recv().await.unwrap()), 1);
    assert_eq!(a.recv().await, Some(SubscriptionItem::Lagged));
    assert_eq!(a.recv().await, None);
    assert_eq!(a.dropped_events(), 1);
    assert_eq!(reader.await.unwrap(), Some(SubscriptionItem::Lagged));
    assert_eq!(b.subscriber_count(s2), 0);

    // A new subscriber after the reset is live again.
    let mut fresh = b.subscribe(s1);
    b.publish(s1, turn(s1, 3));
    assert_eq!(seq_of(&fresh.recv().await.unwrap()), 3);
}

#[tokio::test]
async fn tool_start_arrives_before_its_result() {
    let b = TurnBroadcaster::default();
    let s = SessionId::new();
    let sub = b.subscribe(s);
    b.publish(s, turn(s, 1));
    b.publish(s, tool_start(s, 1, "call-1"));
    b.publish(s, turn(s, 2));
    b.close(s);

    let items: Vec<_> = sub.collect().await;
    assert_eq!(items.len(), 3);
    assert_eq!(seq_of(&items[0]), 1);
    assert!(matches!(
        &items[1],
        SubscriptionItem::Event(Event::ToolCallStart(t)) if t.call_id == "call-1" && t.assistant_seq == seq(1)
    ));
    assert_eq!(seq_of(&items[2]), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_publishers_and_subscribers() {
    const PUBLISHERS: usize = 8;
    const PER_PUBLISHER: usize = 200;
    const SUBSCRIBERS: usize = 8;

    // Large enough that nobody lags: every event must reach everyone.
    let b = TurnBroadcaster::new(PUBLISHERS * PER_PUBLISHER);
    let s = SessionId::new();
    let readers: Vec<_> = (0..SUBSCRIBERS)
        .map(|_| {
            let sub = b.subscribe(s);
            tokio::spawn(async move {
                sub.map(|item| match item {
                    SubscriptionItem::Event(Event::ToolCallStart(t)) => t.call_id,
                    other => panic!("unexpected {other:?}"),
                })
                .collect::<Vec<_>>()
                .await
            })
        })
        .collect();
    let publishers: Vec<_> = (0..PUBLISHERS)
        .map(|p| {
            let b = b.clone();
            tokio::spawn(async move {
                for n in 0..PER_PUBLISHER {
                    b.publish(s, tool_start(s, 1, &format!("{p}-{n}")));
                    tokio::task::yield_now().await;
                }
            })
        })
        .collect();
    for p in publishers {
        p.await.unwrap();
    }
    b.close(s);

    let mut seen = Vec::new();
    for r in readers {
        seen.push(r.await.unwrap());
    }
    assert_eq!(b.dropped_events(), 0);
    for ids in &seen {
        assert_eq!(ids.len(), PUBLISHERS * PER_PUBLISHER);
        // Every subscriber sees the same total order...
        assert_eq!(ids, &seen[0]);
    }
    // ...which keeps each publisher's own order.
    let mut next = [0usize; PUBLISHERS];
    for id in &seen[0] {
        let (p, n) = id.split_once('-').unwrap();
        let (p, n): (usize, usize) = (p.parse().unwrap(), n.parse().unwrap());
        assert_eq!(n, next[p]);
        next[p] += 1;
    }
    assert_eq!(b.subscriber_count(s), 0);
    assert_eq!(session_entries(&b), 0);
}

fn delta(session: SessionId, offset: u64, text: &str) -> Event {
    Event::TextDelta(TextDelta {
        session_id: session,
        turn_seq: seq(2),
        attempt: 1,
        offset,
        text: text.into(),
    })
}

#[tokio::test]
async fn text_deltas_to_a_full_channel_are_dropped_without_lagging_and_the_turn_still_arrives() {
    let b = TurnBroadcaster::new(8);
    let s = SessionId::new();
    let mut slow = b.subscribe(s);
    for i in 0..20 {
        b.publish(s, delta(s, i, "x"));
    }
    // Deltas stop at the reserve (a quarter of the channel stays free) ...
    assert_eq!(b.dropped_text_deltas(), 14);
    // ... so the committed turn is queued, and nothing is lagged.
    b.publish(s, turn(s, 2));
    assert!(!slow.is_lagged());
    let mut got = Vec::new();
    b.close(s);
    while let Some(item) = slow.next().await {
        got.push(item);
    }
    assert_eq!(got.len(), 7);
    assert!(matches!(got[5], SubscriptionItem::Event(Event::TextDelta(ref d)) if d.offset == 5));
    assert_eq!(got[6], SubscriptionItem::Event(turn(s, 2)));
}

#[test]
fn a_published_turn_is_encoded_once_for_every_subscriber() {
    let Event::Turn(published) = turn(SessionId::new(), 1) else {
        unreachable!()
    };
    let copy = published.clone();
    let mut calls = 0;
    let first = published.into_wire(|t| {
        calls += 1;
        Bytes::from(t.content.clone())
    });
    let second = copy.into_wire(|_| {
        calls += 1;
        Bytes::from_static(b"other")
    });
    assert_eq!(calls, 1);
    assert_eq!((*first).as_ref(), (*second).as_ref());
    assert_eq!((*first).as_ref(), b"turn 1");
}

// The forwarding task of `with_fanout`. The tests run on a current-thread
// runtime, so the task runs only when a test awaits: what is handed off
// and not yet delivered is visible in between.

fn forwarded(capacity: usize, threshold: usize) -> TurnBroadcaster {
    TurnBroadcaster::new(capacity).with_fanout(&tokio::runtime::Handle::current(), threshold)
}

#[tokio::test]
async fn a_small_fanout_is_delivered_by_the_publisher() {
    let b = forwarded(16, 3);
    let s = SessionId::new();
    let mut one = b.subscribe(s);
    let _two = b.subscribe(s);
    b.publish(s, turn(s, 1));
    // Below the threshold: in the channel before publish returns.
    assert!(matches!(one.try_next_event(), Some(Event::Turn(t)) if t.seq.get() == 1));
}

#[tokio::test]
async fn a_large_fanout_is_handed_off_and_keeps_its_order_and_its_close() {
    let b = forwarded(256, 3);
    let s = SessionId::new();
    let subs: Vec<_> = (0..3).map(|_| b.subscribe(s)).collect();
    for n in 1..=50 {
        b.publish(s, turn(s, n));
    }
    b.close(s);
    assert!(b.is_latched(s), "latched at once");
    let mut first = subs.into_iter();
    let mut one = first.next().unwrap();
    // Handed off: nothing delivered until the forwarding task runs.
    assert!(one.try_next_event().is_none());
    for sub in std::iter::once(one).chain(first) {
        let items: Vec<_> = tokio::time::timeout(std::time::Duration::from_secs(5), sub.collect())
            .await
            .expect("the close was delivered");
        let seqs: Vec<u64> = items.iter().map(seq_of).collect();
        assert_eq!(seqs, (1..=50).collect::<Vec<_>>());
    }
    assert_eq!(session_entries(&b), 0);
    assert!(b.inner.lock().deferred.is_empty());
}

#[tokio::test]
async fn a_session_stays_handed_off_while_items_wait() {
    let b = forwarded(256, 2);
    let s = SessionId::new();
    let mut kept = b.subscribe(s);
    let gone = b.subscribe(s);
    b.publish(s, turn(s, 1)); // two subscribers: handed off
    drop(gone);
    // One subscriber now, but turn 1 still waits: turn 2 must queue behind
    // it, not overtake it.
    b.publish(s, turn(s, 2));
    assert!(kept.try_next_event().is_none());
    let a = kept.recv().await.unwrap();
    let b2 = kept.recv().await.unwrap();
    assert_eq!((seq_of(&a), seq_of(&b2)), (1, 2));
    // Nothing waits any more: the next publish goes direct.
    b.publish(s, turn(s, 3));
    assert!(matches!(kept.try_next_event(), Some(Event::Turn(t)) if t.seq.get() == 3));
}

#[tokio::test]
async fn a_full_fanout_queue_lags_the_session_never_blocks() {
    let b = forwarded(FANOUT_QUEUE * 2, 1);
    let s = SessionId::new();
    let sub = b.subscribe(s);
    for n in 1..=(FANOUT_QUEUE as i64 + 10) {
        b.publish(s, turn(s, n));
    }
    assert!(sub.is_lagged(), "an event that could not be queued lags");
    let items: Vec<_> = tokio::time::timeout(std::time::Duration::from_secs(5), sub.collect())
        .await
        .expect("the lagged stream ended");
    // Whatever was queued before the gap arrives in order, then Lagged.
    assert!(matches!(items.last(), Some(SubscriptionItem::Lagged)));
    let seqs: Vec<u64> = items[..items.len() - 1].iter().map(seq_of).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    assert!(seqs.len() < FANOUT_QUEUE + 10);
}

#[tokio::test]
async fn a_handed_off_close_spares_a_subscriber_of_the_reopened_session() {
    let b = forwarded(256, 1);
    let s = SessionId::new();
    let old = b.subscribe(s);
    b.publish(s, turn(s, 1)); // handed off
    b.close(s); // waits behind turn 1
    // A follow-up reopens the session and a watcher of the new burst
    // subscribes before the forwarding task has run the close.
    b.reopen(s);
    let mut new = b.subscribe(s);
    let items: Vec<_> = tokio::time::timeout(std::time::Duration::from_secs(5), old.collect())
        .await
        .expect("the close reached the old subscriber");
    assert_eq!(items.iter().map(seq_of).collect::<Vec<_>>(), [1]);
    assert_eq!(b.subscriber_count(s), 1, "the new subscriber stays");
    b.publish(s, turn(s, 2));
    let mut seqs = Vec::new();
    while let Some(item) = tokio::time::timeout(std::time::Duration::from_secs(5), new.recv())
        .await
        .expect("the new subscriber is live")
    {
        let n = seq_of(&item);
        seqs.push(n);
        if n == 2 {
            break;
        }
    }
    // Turn 1 was delivered to every subscriber there when it was
    // forwarded (the watch stream skips what its cursor has passed).
    assert_eq!(seqs.last(), Some(&2), "{seqs:?}");
    assert!(!new.is_closed());
    b.close(s);
    assert!(
        tokio::time::timeout(std::time::Duration::from_secs(5), new.recv())
            .await
            .expect("closed")
            .is_none()
    );
}
