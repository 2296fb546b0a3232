//! Several replicas on one database, as separate OS processes of
//! the real binary: a watcher on any replica follows a session another one
//! runs (turns in order, tool starts before their results), a replica whose
//! LISTEN connection is killed from the database side makes its watchers
//! reconnect without a gap. (A rolling restart: `replicas_rolling.rs`.)

mod support;

use std::{collections::HashSet, time::Duration};

use inquest_proto::v1::{self as pb, watch_event::Event};
use inquest_testkit::fake::{FakeProvider, FakeReply, Flavor};
use inquest_tests::watching::{self, collect, turn_seqs, watch};
use support::{
    Client, ReplicaConfig, all_turns, create_incident, fake_provider_toml,
    fleet::{Fleet, python},
    get_session, settled, start_session,
};

/// The tests of this file run one at a time: each starts three replicas,
/// each with its own MCP server whose start is CPU-heavy.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Hang guard for polls: long, it only turns a hang into a failure.
const GUARD: Duration = Duration::from_secs(60);

/// The turns a stream delivered, checked: seqs exactly `after + 1 ..`
/// with no gap or repeat, every tool start before the turn carrying its
/// result and never after it, no call started twice.
fn checked_turns(events: &[Event], after: i64, who: &str) -> Vec<pb::SessionTurn> {
    let mut started = HashSet::new();
    let mut answered = HashSet::new();
    let mut turns = Vec::new();
    for event in events {
        match event {
            Event::Turn(t) => {
                if !t.tool_call_id.is_empty() {
                    answered.insert(t.tool_call_id.clone());
                }
                turns.push(t.clone());
            }
            Event::ToolCallStart(s) => {
                assert!(
                    !answered.contains(&s.call_id),
                    "{who}: tool start {} arrived after its result",
                    s.call_id
                );
                assert!(
                    started.insert(s.call_id.clone()),
                    "{who}: tool start {} arrived twice",
                    s.call_id
                );
            }
            Event::Heartbeat(_) | Event::TextDelta(_) => {}
            Event::Lagged(l) => panic!("{who}: unexpected Lagged {l:?}"),
            Event::ApprovalRequested(a) => panic!("{who}: nothing is held here: {a:?}"),
            Event::MessageQueued(q) => panic!("{who}: nothing is queued here: {q:?}"),
        }
    }
    let seqs: Vec<i64> = turns.iter().map(|t| t.seq).collect();
    let expected: Vec<i64> = (after + 1..=after + i64::try_from(seqs.len()).unwrap()).collect();
    assert_eq!(seqs, expected, "{who}: turn seqs not gapless from {after}");
    turns
}

/// Call ids whose `ToolCallStart` the events carry, in arrival order.
fn started_calls(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::ToolCallStart(s) => Some(s.call_id.clone()),
            _ => None,
        })
        .collect()
}

/// Every tool call the assistant turns request, in order.
fn requested_calls(turns: &[pb::SessionTurn]) -> Vec<String> {
    turns
        .iter()
        .flat_map(|t| t.tool_calls.iter().map(|c| c.id.clone()))
        .collect()
}

/// What identifies a turn's content across replicas.
fn shape(t: &pb::SessionTurn) -> (i64, i32, String, String, Vec<String>) {
    (
        t.seq,
        t.role,
        t.content.clone(),
        t.tool_call_id.clone(),
        t.tool_calls.iter().map(|c| c.id.clone()).collect(),
    )
}

fn slow_read(seconds: f64) -> String {
    format!(r#"{{"service":"checkout","seconds":{seconds}}}"#)
}

/// Three replicas; replica A runs the session (it received StartSession),
/// watchers on B and A follow it from the start, one on C joins
/// mid-session. Every watcher sees each turn once, in order, each tool
/// start before its result, and B and A agree with `ListTurns` on C.
#[tokio::test]
async fn a_watcher_on_another_replica_sees_every_turn_in_order() {
    let _serial = SERIAL.lock().await;
    let python = python();
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    // The first tool runs long enough for every watcher to be attached
    // before it ends.
    fake.reply(FakeReply::text("Reading the status.").call("s1", "slow_read", &slow_read(1.0)))
        .reply(
            FakeReply::text("Two more reads.")
                .call("s2", "slow_read", &slow_read(0.3))
                .call("s3", "read_log", r#"{"service":"checkout"}"#),
        )
        .reply(FakeReply::text("One last check.").call("s4", "slow_read", &slow_read(0.3)))
        .reply(FakeReply::text("One more.").call("s5", "slow_read", &slow_read(0.3)))
        .reply(FakeReply::text("The checkout pool is exhausted."))
        .reply(FakeReply::text("Report: checkout pool exhausted."));
    let config = ReplicaConfig::new(&fake_provider_toml(&fake.base_url()), Some(&python));
    let database = inquest_tests::fresh_database().await;
    let url = database.url.clone();
    let mut fleet = Fleet::new();
    fleet
        .start(&["replica-a", "replica-b", "replica-c"], &config, &url)
        .await;
    let mut a = fleet.client("replica-a").await;
    let mut b = fleet.client("replica-b").await;
    let mut c = fleet.client("replica-c").await;

    let incident = create_incident(&mut a, "checkout latency").await;
    let session = start_session(&mut a, &incident.id, "why is checkout slow?")
        .await
        .unwrap();
    let id = session.id.clone();
    let on_b = watch(&mut b, &id, 0).await.unwrap();
    let on_a = watch(&mut a, &id, 0).await.unwrap();
    let on_b = tokio::spawn(collect(on_b));
    let on_a = tokio::spawn(collect(on_a));

    // C joins once a few turns are in, while the session still runs.
    let deadline = tokio::time::Instant::now() + GUARD;
    let joined_after = loop {
        let s = get_session(&mut c, &id).await;
        if s.head_seq >= 3 {
            assert_eq!(
                s.status(),
                pb::SessionStatus::Running,
                "the session ended before C joined: {s:?}"
            );
            assert_eq!(s.lease_owner, "replica-a", "{s:?}");
            break s.head_seq;
        }
        assert!(tokio::time::Instant::now() < deadline, "no turns: {s:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let (on_c, c_ending) = collect(watch(&mut c, &id, joined_after).await.unwrap()).await;
    let (on_b, b_ending) = on_b.await.unwrap();
    let (on_a, a_ending) = on_a.await.unwrap();
    b_ending.expect("B's stream ends OK when the burst closes");
    a_ending.expect("A's stream ends OK when the burst closes");
    c_ending.expect("C's stream ends OK when the burst closes");

    let s = settled(&mut c, &id).await;
    assert_eq!(s.status(), pb::SessionStatus::Completed, "{s:?}");
    let stored = all_turns(&mut c, &id).await;
    let n = i64::try_from(stored.len()).unwrap();
    assert_eq!(n, s.head_seq);
    assert_eq!(
        stored.iter().map(|t| t.seq).collect::<Vec<_>>(),
        (1..=n).collect::<Vec<_>>()
    );
    let calls = requested_calls(&stored);
    assert_eq!(calls, ["s1", "s2", "s3", "s4", "s5"]);

    let seen_b = checked_turns(&on_b, 0, "B");
    let seen_a = checked_turns(&on_a, 0, "A");
    let seen_c = checked_turns(&on_c, joined_after, "C");
    let stored_shape: Vec<_> = stored.iter().map(shape).collect();
    assert_eq!(seen_b.iter().map(shape).collect::<Vec<_>>(), stored_shape);
    assert_eq!(seen_a.iter().map(shape).collect::<Vec<_>>(), stored_shape);
    assert_eq!(
        seen_c.iter().map(shape).collect::<Vec<_>>(),
        stored_shape[usize::try_from(joined_after).unwrap()..]
    );
    assert_eq!(turn_seqs(&on_b), turn_seqs(&on_a));
    // Both followed the whole session live: every call's start was seen,
    // in the order the calls were made.
    assert_eq!(started_calls(&on_b), calls, "B's tool starts");
    assert_eq!(started_calls(&on_a), calls, "A's tool starts");
    // C joined right after s1's result: the calls made from then on
    // started while it was attached.
    let c_started = started_calls(&on_c);
    for call in ["s4", "s5"] {
        assert!(
            c_started.iter().any(|c| c == call),
            "C missed the start of {call}: {on_c:?}"
        );
    }
    fleet.stop_all().await;
}

/// A watch followed across reconnects: every event of every stream, in
/// arrival order, `Lagged` included.
#[derive(Default)]
struct Followed {
    events: Vec<Event>,
    /// How many streams ended ABORTED after a `Lagged` (each was followed
    /// by a reconnect with the after_seq its status named).
    lags: usize,
}

impl Followed {
    fn turns(&self) -> Vec<pb::SessionTurn> {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::Turn(t) => Some(t.clone()),
                _ => None,
            })
            .collect()
    }
}

/// Across every stream of a followed watch, no tool start arrives after
/// the result of its call (a reconnect re-announces only calls still
/// running).
fn check_starts_precede_results(events: &[Event], who: &str) {
    let mut answered = HashSet::new();
    for event in events {
        match event {
            Event::Turn(t) if !t.tool_call_id.is_empty() => {
                answered.insert(t.tool_call_id.clone());
            }
            Event::ToolCallStart(s) => assert!(
                !answered.contains(&s.call_id),
                "{who}: tool start {} arrived after its result",
                s.call_id
            ),
            _ => {}
        }
    }
}

/// The seq an ABORTED status tells the client to reconnect with.
fn reconnect_seq(status: &tonic::Status) -> i64 {
    let (_, rest) = status
        .message()
        .split_once("reconnect with after_seq=")
        .unwrap_or_else(|| panic!("ABORTED without a reconnect seq: {status:?}"));
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("bad reconnect seq: {status:?}"))
}

/// Opens a watch, retrying briefly while the replica answers UNAVAILABLE.
async fn watch_retrying(
    c: &mut Client,
    id: &str,
    after_seq: i64,
) -> tonic::Streaming<pb::WatchEvent> {
    let deadline = tokio::time::Instant::now() + GUARD;
    loop {
        match watch(c, id, after_seq).await {
            Ok(stream) => return stream,
            Err(s) if s.code() == tonic::Code::Unavailable => {
                assert!(tokio::time::Instant::now() < deadline, "still {s:?}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(s) => panic!("watch refused: {s:?}"),
        }
    }
}

/// Reads `stream` (opened with `after`, `seen` its events so far) to its
/// end, and whenever it ends with `Lagged` + ABORTED, reconnects with the
/// after_seq the status names, which must be the last seq delivered. Ends
/// at the first stream that ends OK.
async fn follow(
    c: &mut Client,
    id: &str,
    mut after: i64,
    mut stream: tonic::Streaming<pb::WatchEvent>,
    seen: Vec<Event>,
) -> Followed {
    let mut followed = Followed {
        events: seen,
        lags: 0,
    };
    let mut last = followed
        .events
        .iter()
        .rev()
        .find_map(|e| match e {
            Event::Turn(t) => Some(t.seq),
            _ => None,
        })
        .unwrap_or(after);
    let deadline = tokio::time::Instant::now() + GUARD;
    loop {
        assert!(tokio::time::Instant::now() < deadline, "never settled");
        let mut lagged = None;
        let ending = loop {
            match watching::next(&mut stream).await {
                Ok(Some(event)) => {
                    match &event {
                        Event::Turn(t) => last = t.seq,
                        Event::Lagged(l) => {
                            assert!(lagged.is_none(), "two Lagged on one stream");
                            lagged = Some(*l);
                        }
                        Event::ToolCallStart(_)
                        | Event::Heartbeat(_)
                        | Event::TextDelta(_)
                        | Event::ApprovalRequested(_)
                        | Event::MessageQueued(_) => {}
                    }
                    if !matches!(event, Event::Lagged(_)) {
                        assert!(lagged.is_none(), "an event after Lagged: {event:?}");
                    }
                    followed.events.push(event);
                }
                Ok(None) => break Ok(()),
                Err(status) => break Err(status),
            }
        };
        match ending {
            Ok(()) => {
                assert!(lagged.is_none(), "Lagged, then a clean end");
                return followed;
            }
            Err(status) if status.code() == tonic::Code::Aborted => {
                let lagged = lagged.unwrap_or_else(|| panic!("ABORTED without Lagged: {status:?}"));
                let seq = reconnect_seq(&status);
                assert_eq!(seq, lagged.last_delivered_seq, "{status:?} vs {lagged:?}");
                assert_eq!(seq, last, "the reconnect seq is the last one delivered");
                assert!(seq >= after);
                followed.lags += 1;
                after = seq;
                stream = watch_retrying(c, id, after).await;
            }
            Err(status) if status.code() == tonic::Code::Unavailable => {
                after = reconnect_seq(&status);
                stream = watch_retrying(c, id, after).await;
            }
            Err(status) => panic!("the watch failed: {status:?}"),
        }
    }
}

/// Pids of the backends named `application_name` on the database at
/// `url` (other tests' replicas share the names, not the database).
async fn backends(url: &str, application_name: &str) -> Vec<i32> {
    inquest_tests::connect(url)
        .await
        .query(
            "SELECT pid FROM pg_stat_activity \
             WHERE application_name = $1 AND datname = current_database()",
            &[&application_name],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get::<_, i32>(0))
        .collect()
}

/// Replica A runs a session; a watcher on B follows it. Mid-session, B's
/// LISTEN connection is terminated from the database side: the watcher
/// gets `Lagged`, then ABORTED naming the after_seq to reconnect with, and
/// reconnecting with it loses and repeats nothing. B's feed reconnects, and
/// a watcher started on B afterwards follows the session live to its end.
#[tokio::test]
async fn a_killed_listen_connection_lags_watchers_who_reconnect_without_a_gap() {
    let _serial = SERIAL.lock().await;
    let python = python();
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    let steps = 8;
    for i in 1..=steps {
        fake.reply(FakeReply::text(&format!("Step {i}.")).call(
            &format!("r{i}"),
            "slow_read",
            &slow_read(0.5),
        ));
    }
    fake.reply(FakeReply::text("The checkout pool is exhausted."))
        .reply(FakeReply::text("Report: checkout pool exhausted."));
    let config = ReplicaConfig::new(&fake_provider_toml(&fake.base_url()), Some(&python));
    let database = inquest_tests::fresh_database().await;
    let url = database.url.clone();
    let mut fleet = Fleet::new();
    fleet
        .start(&["replica-a", "replica-b", "replica-c"], &config, &url)
        .await;
    let mut a = fleet.client("replica-a").await;
    let mut b = fleet.client("replica-b").await;
    let listen_b = "inquest-listen replica-b";
    let before = backends(&url, listen_b).await;
    assert_eq!(before.len(), 1, "B's LISTEN connection: {before:?}");

    let incident = create_incident(&mut a, "checkout latency").await;
    let id = start_session(&mut a, &incident.id, "why is checkout slow?")
        .await
        .unwrap()
        .id;
    let mut stream = watch(&mut b, &id, 0).await.unwrap();
    // Follow until the second call runs, then cut B's feed.
    let mut seen = Vec::new();
    loop {
        let event = watching::next(&mut stream)
            .await
            .expect("the watch failed before the feed was cut")
            .expect("the watch ended before the feed was cut");
        let second = matches!(&event, Event::ToolCallStart(s) if s.call_id == "r2");
        seen.push(event);
        if second {
            break;
        }
    }
    let killed: Vec<bool> = inquest_tests::connect(&url)
        .await
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE application_name = $1 AND datname = current_database()",
            &[&listen_b],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(killed, [true]);

    let first = {
        let (mut b, id) = (b.clone(), id.clone());
        tokio::spawn(async move { follow(&mut b, &id, 0, stream, seen).await })
    };

    // B listens again, on a new connection.
    let deadline = tokio::time::Instant::now() + GUARD;
    let again = loop {
        let now = backends(&url, listen_b).await;
        if now.len() == 1 && now != before {
            break now;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "B never listened again: {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // A second watcher on B, from the head now: what it gets is live.
    let head = get_session(&mut b, &id).await;
    assert_eq!(
        head.status(),
        pb::SessionStatus::Running,
        "the session ended before B listened again: {head:?}"
    );
    let stream = watch_retrying(&mut b, &id, head.head_seq).await;
    let second = follow(&mut b, &id, head.head_seq, stream, Vec::new()).await;
    let first = first.await.unwrap();
    assert!(first.lags >= 1, "the cut feed did not lag the watcher");
    fleet
        .get("replica-b")
        .wait_for_log("cross-replica feed interrupted")
        .await;
    // The first stream's Lagged came right after what it had delivered.
    let lagged_at = first
        .events
        .iter()
        .position(|e| matches!(e, Event::Lagged(_)))
        .unwrap();
    let Event::Lagged(lagged) = &first.events[lagged_at] else {
        unreachable!()
    };
    let delivered_before = turn_seqs(&first.events[..lagged_at]);
    assert_eq!(lagged.last_delivered_seq, *delivered_before.last().unwrap());

    let s = settled(&mut a, &id).await;
    assert_eq!(s.status(), pb::SessionStatus::Completed, "{s:?}");
    let stored = all_turns(&mut a, &id).await;
    let stored_shape: Vec<_> = stored.iter().map(shape).collect();
    assert_eq!(
        stored.iter().map(|t| t.seq).collect::<Vec<_>>(),
        (1..=s.head_seq).collect::<Vec<_>>()
    );
    // Across its reconnects the first watcher got every turn exactly
    // once, in order.
    assert_eq!(
        first.turns().iter().map(shape).collect::<Vec<_>>(),
        stored_shape,
        "the first watcher's turns across {} reconnect(s)",
        first.lags
    );
    // The second one got the rest, live: turns past the head it started
    // from, tool starts, and the end of the burst (which only B's feed
    // could tell it: the stream ended OK).
    let rest = second.turns();
    assert_eq!(
        rest.iter().map(shape).collect::<Vec<_>>(),
        stored_shape[usize::try_from(head.head_seq).unwrap()..]
    );
    assert!(!rest.is_empty(), "no live turn after {head:?}");
    check_starts_precede_results(&first.events, "first watcher");
    check_starts_precede_results(&second.events, "second watcher");
    assert!(
        second
            .events
            .iter()
            .any(|e| matches!(e, Event::ToolCallStart(_))),
        "no live tool start: {:?}",
        second.events
    );
    assert_eq!(backends(&url, listen_b).await, again);
    eprintln!(
        "first watcher reconnected {} time(s), second {} time(s)",
        first.lags, second.lags
    );
    fleet.stop_all().await;
}
