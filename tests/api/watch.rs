//! WatchSession: the subscribe/drain handshake, cursors, ends, heartbeats.

use std::time::Duration;

use inquest_proto::v1::{self as pb, watch_event::Event};
use inquest_tests::{
    driver::{Driver, new_session},
    spawn_app, spawn_app_with,
    watching::{collect, next, turn_seqs, watch},
};
use tonic::Code;

/// The race the handshake exists for: turns committed while a watcher is
/// between subscribing and reading the database (widened by the test-only
/// `watch.test_drain_delay`) are seen exactly once. Many iterations, the
/// writer's start staggered against the delay.
#[tokio::test]
async fn turns_committed_during_the_drain_are_seen_exactly_once() {
    let app = spawn_app_with(|c| c.watch.test_drain_delay = Some(Duration::from_millis(15))).await;
    let mut client = app.client().await;
    for round in 0..40u64 {
        let session = new_session(&mut client).await;
        let driver = Driver::claim(&app, &session).await;
        driver.say("before").await;
        let stream = watch(&mut client, &session, 0).await.unwrap();
        let reader = tokio::spawn(collect(stream));
        // Stagger: some turns land before, during and after the delay.
        tokio::time::sleep(Duration::from_millis(round % 20)).await;
        for i in 0..8 {
            driver.say(&format!("turn {i}")).await;
        }
        driver.finish().await;
        let (events, ending) = reader.await.unwrap();
        ending.unwrap();
        assert_eq!(
            turn_seqs(&events),
            (1..=10).collect::<Vec<_>>(),
            "round {round}"
        );
    }
    app.stop().await.unwrap();
}

/// Reconnecting a finished session with every possible cursor yields
/// exactly the suffix after it, then a clean end.
#[tokio::test]
async fn every_after_seq_of_a_finished_session_yields_the_exact_suffix() {
    let app = spawn_app_with(|c| c.watch.drain_page = 3).await;
    let mut client = app.client().await;
    let session = new_session(&mut client).await;
    let driver = Driver::claim(&app, &session).await;
    for i in 0..5 {
        driver.say(&format!("a{i}")).await;
    }
    driver.tool_round("c1", "grep").await;
    driver.finish().await;
    let head = 8;
    for after in 0..=head {
        let (events, ending) = collect(watch(&mut client, &session, after).await.unwrap()).await;
        ending.unwrap();
        assert_eq!(turn_seqs(&events), ((after + 1)..=head).collect::<Vec<_>>());
        assert!(events.iter().all(|e| matches!(e, Event::Turn(_))));
    }
    app.stop().await.unwrap();
}

/// A watcher attaching after the run ended gets the stored turns and a
/// closed stream, never a hang; so does one of a never-run session that is
/// not pending (cancelled).
#[tokio::test]
async fn watcher_after_the_run_gets_a_closed_stream_after_the_drain() {
    let app = spawn_app().await;
    let mut client = app.client().await;
    let session = new_session(&mut client).await;
    let driver = Driver::claim(&app, &session).await;
    driver.say("done").await;
    driver.finish().await;
    let (events, ending) = collect(watch(&mut client, &session, 0).await.unwrap()).await;
    ending.unwrap();
    assert_eq!(turn_seqs(&events), vec![1, 2]);

    // The latch can have been evicted (or the process restarted): the
    // stored status alone still ends the stream.
    app.broadcaster()
        .reopen(inquest_core::SessionId::parse(&session).unwrap());
    let (events, ending) = collect(watch(&mut client, &session, 1).await.unwrap()).await;
    ending.unwrap();
    assert_eq!(turn_seqs(&events), vec![2]);
    app.stop().await.unwrap();
}

/// A client that watches right after SendMessage returns sees the new
/// burst's turns and is not closed early, although the previous burst
/// latched the session as finished.
#[tokio::test]
async fn watch_right_after_send_message_follows_the_new_burst() {
    let app = spawn_app().await;
    let mut client = app.client().await;
    let session = new_session(&mut client).await;
    let first = Driver::claim(&app, &session).await;
    first.say("first answer").await;
    first.finish().await;

    let seq = client
        .send_message(pb::SendMessageRequest {
            session_id: session.clone(),
            message: "and now?".into(),
            idempotency_key: String::new(),
            if_running: 0,
        })
        .await
        .unwrap()
        .into_inner()
        .seq;
    assert_eq!(seq, 3);
    let mut stream = watch(&mut client, &session, 2).await.unwrap();
    match next(&mut stream).await.unwrap() {
        Some(Event::Turn(t)) => assert_eq!((t.seq, t.role()), (3, pb::TurnRole::User)),
        other => panic!("expected the follow-up turn, got {other:?}"),
    }
    // The burst starts only now; the stream must still be open.
    let second = Driver::claim(&app, &session).await;
    second.say("second answer").await;
    second.finish().await;
    let (events, ending) = collect(stream).await;
    ending.unwrap();
    assert_eq!(turn_seqs(&events), vec![4]);
    app.stop().await.unwrap();
}

#[tokio::test]
async fn cursor_errors_are_typed() {
    let app = spawn_app().await;
    let mut client = app.client().await;
    let session = new_session(&mut client).await;

    let beyond = watch(&mut client, &session, 2).await.unwrap_err();
    assert_eq!(beyond.code(), Code::OutOfRange);
    assert!(
        beyond.message().contains("head seq 1"),
        "{}",
        beyond.message()
    );
    assert_eq!(
        beyond
            .metadata()
            .get("inquest-head-seq")
            .unwrap()
            .to_str()
            .unwrap(),
        "1"
    );
    let negative = watch(&mut client, &session, -1).await.unwrap_err();
    crate::error_details::assert_reason(
        &negative,
        Code::InvalidArgument,
        inquest_server::reason::Reason::InvalidCursor,
        &[],
    );
    let unknown = watch(&mut client, "01890a5d-ac96-774b-bcce-b302099a8057", 0)
        .await
        .unwrap_err();
    crate::error_details::assert_reason(
        &unknown,
        Code::NotFound,
        inquest_server::reason::Reason::SessionNotFound,
        &[("session_id", "01890a5d-ac96-774b-bcce-b302099a8057")],
    );
    let malformed = watch(&mut client, "nope", 0).await.unwrap_err();
    crate::error_details::assert_reason(
        &malformed,
        Code::InvalidArgument,
        inquest_server::reason::Reason::InvalidId,
        &[("field", "session_id")],
    );
    // Refused calls leave no subscriber behind.
    let id = inquest_core::SessionId::parse(&session).unwrap();
    inquest_tests::watching::eventually("subscribers freed", || {
        app.broadcaster().subscriber_count(id) == 0
    })
    .await;
    app.stop().await.unwrap();
}

/// A quiet running session sends Heartbeat { head_seq } (that it arrives is
/// asserted, not when).
#[tokio::test]
async fn quiet_running_session_sends_heartbeats() {
    let app = spawn_app_with(|c| c.watch.heartbeat = Duration::from_millis(50)).await;
    let mut client = app.client().await;
    let session = new_session(&mut client).await;
    let driver = Driver::claim(&app, &session).await;
    let mut stream = watch(&mut client, &session, 0).await.unwrap();
    assert!(matches!(
        next(&mut stream).await.unwrap(),
        Some(Event::Turn(_))
    ));
    match next(&mut stream).await.unwrap() {
        Some(Event::Heartbeat(h)) => assert_eq!(h.head_seq, 1),
        other => panic!("expected a heartbeat, got {other:?}"),
    }
    driver.say("finally").await;
    let mut saw_turn = false;
    while let Some(event) = next(&mut stream).await.unwrap() {
        match event {
            Event::Turn(t) => {
                assert_eq!(t.seq, 2);
                saw_turn = true;
                break;
            }
            Event::Heartbeat(h) => assert_eq!(h.head_seq, 1),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(saw_turn);
    driver.finish().await;
    let (events, ending) = collect(stream).await;
    ending.unwrap();
    assert!(events.iter().all(|e| matches!(e, Event::Heartbeat(_))));
    app.stop().await.unwrap();
}

/// A session watched by more streams than the hand-off threshold (32) has
/// its live events delivered by the broadcaster's forwarding task on the
/// serving runtime, not by the writer: every watcher still gets every turn
/// once, in order, and ends OK only after the burst ended, including
/// watchers that join mid-run and the turns written right before the
/// close (which queue behind the hand-off).
#[tokio::test]
async fn a_widely_watched_session_reaches_every_watcher_in_order() {
    let app = spawn_app().await;
    let mut client = app.client().await;
    for round in 0..4u64 {
        let session = new_session(&mut client).await;
        let driver = Driver::claim(&app, &session).await;
        let mut readers = Vec::new();
        for _ in 0..40 {
            let stream = watch(&mut client, &session, 0).await.unwrap();
            readers.push(tokio::spawn(collect(stream)));
        }
        for i in 0..30u64 {
            driver.say(&format!("turn {i}")).await;
            if i == 10 + round {
                // Late joiners, from a cursor in the middle.
                for after in [3, 7, 11] {
                    let stream = watch(&mut client, &session, after).await.unwrap();
                    readers.push(tokio::spawn(collect(stream)));
                }
            }
            if i % (round + 2) == 0 {
                tokio::time::sleep(Duration::from_millis(round)).await;
            }
        }
        driver.finish().await;
        for (w, reader) in readers.into_iter().enumerate() {
            let (events, ending) = reader.await.unwrap();
            ending.unwrap_or_else(|e| panic!("round {round} watcher {w}: {e:?}"));
            let seqs = turn_seqs(&events);
            let first = seqs.first().copied().unwrap_or(0);
            assert_eq!(
                seqs,
                (first..=31).collect::<Vec<_>>(),
                "round {round} watcher {w}"
            );
            assert!(
                first == 1 || [4, 8, 12].contains(&first),
                "round {round} watcher {w} started at {first}"
            );
        }
    }
    app.stop().await.unwrap();
}

/// A client that stops reading builds a backlog on the server (its HTTP/2
/// window fills, then its broadcaster queue). When it reads again, the
/// watcher moves that backlog to the stream a batch at a time: every turn
/// arrives once, in order, each tool start before its result and after
/// its call, then a clean end. Several rounds, the pause varied, and
/// turns large enough that the window fills after a few dozen.
#[tokio::test]
async fn a_backlog_larger_than_a_batch_arrives_once_in_order() {
    let app = spawn_app().await;
    let mut client = app.client().await;
    for round in 0..4u64 {
        let session = new_session(&mut client).await;
        let driver = Driver::claim(&app, &session).await;
        let mut stream = watch(&mut client, &session, 0).await.unwrap();
        // The stored user turn: the watcher is live from here on.
        let first = next(&mut stream).await.unwrap();
        assert!(matches!(first, Some(Event::Turn(t)) if t.seq == 1));
        let big = "x".repeat(4096);
        let mut rounds = 0;
        let mut early = Vec::new();
        for i in 0..120u64 {
            if i % 7 == round {
                driver.tool_round(&format!("call-{i}"), "probe").await;
                rounds += 1;
            } else {
                driver.say(&format!("{i} {big}")).await;
            }
            if i == 40 + round * 10 {
                // Part of the backlog read while more is written.
                for _ in 0..(round * 5) {
                    early.extend(next(&mut stream).await.unwrap());
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(20 * round)).await;
        driver.finish().await;
        let (rest, ending) = collect(stream).await;
        ending.unwrap_or_else(|e| panic!("round {round}: {e:?}"));
        let events: Vec<Event> = early.into_iter().chain(rest).collect();
        let total = 1 + 120 + rounds;
        assert_eq!(
            turn_seqs(&events),
            (2..=total as i64).collect::<Vec<_>>(),
            "round {round}"
        );
        // Each start after its call's turn and before its result.
        let mut calls = std::collections::HashSet::new();
        let mut started = std::collections::HashSet::new();
        for event in &events {
            match event {
                Event::Turn(t) if t.role == pb::TurnRole::Assistant as i32 => {
                    calls.extend(t.tool_calls.iter().map(|c| c.id.clone()));
                }
                Event::Turn(t) if !t.tool_call_id.is_empty() => {
                    assert!(
                        started.contains(&t.tool_call_id) || !calls.contains(&t.tool_call_id),
                        "round {round}: result of {} before its start",
                        t.tool_call_id
                    );
                }
                Event::ToolCallStart(s) => {
                    assert!(
                        calls.contains(&s.call_id),
                        "round {round}: start of {} before its call",
                        s.call_id
                    );
                    assert!(
                        started.insert(s.call_id.clone()),
                        "round {round}: start twice"
                    );
                }
                _ => {}
            }
        }
    }
    app.stop().await.unwrap();
}
