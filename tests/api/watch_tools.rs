//! ToolCallStart ordering, late-watcher announcements, and CancelSession
//! mid-tool.

use inquest_core::{SessionId, SessionStatus};
use inquest_proto::v1::{self as pb, watch_event::Event};
use inquest_tests::{
    driver::{Driver, new_session},
    spawn_app,
    watching::{collect, eventually, next, turn_seqs, watch},
};
use tonic::Code;

/// Position of the first event matching `f`.
fn position(events: &[Event], f: impl Fn(&Event) -> bool) -> Option<usize> {
    events.iter().position(f)
}

/// Every watcher that receives both a tool start and its result receives
/// the start first; watchers attached before the run receive every start.
#[tokio::test]
async fn tool_call_start_arrives_before_its_result_for_every_watcher() {
    let app = spawn_app().await;
    let mut client = app.client().await;
    let session = new_session(&mut client).await;
    let driver = Driver::claim(&app, &session).await;
    // The early watcher is caught up (its drain delivered the user turn)
    // before the first call: every start after that reaches it live.
    let mut early = watch(&mut client, &session, 0).await.unwrap();
    let first = next(&mut early).await.unwrap().expect("the user turn");
    let early = tokio::spawn(async move {
        let (mut events, ending) = collect(early).await;
        events.insert(0, first);
        (events, ending)
    });
    let mut late = Vec::new();
    for round in 0..12 {
        let call_id = format!("call-{round}");
        let call = driver.call(&call_id, "grep").await;
        driver.start(call.seq, &call_id, "grep");
        // Attach a watcher mid-tool every few rounds.
        if round % 3 == 0 {
            late.push(tokio::spawn(collect(
                watch(&mut client, &session, 0).await.unwrap(),
            )));
        }
        driver.result(&call_id, "grep", "found").await;
    }
    driver.finish().await;

    let check = |events: &[Event], all_starts: bool| {
        ending_ok_and_gapless(events);
        for round in 0..12 {
            let id = format!("call-{round}");
            let start = position(
                events,
                |e| matches!(e, Event::ToolCallStart(s) if s.call_id == id),
            );
            let result = position(
                events,
                |e| matches!(e, Event::Turn(t) if t.tool_call_id == id),
            )
            .expect("every result is delivered");
            if all_starts {
                assert!(start.is_some(), "early watcher missed the start of {id}");
            }
            if let Some(start) = start {
                assert!(start < result, "start of {id} after its result");
            }
        }
    };
    let (events, ending) = early.await.unwrap();
    ending.unwrap();
    check(&events, true);
    for watcher in late {
        let (events, ending) = watcher.await.unwrap();
        ending.unwrap();
        check(&events, false);
    }
    app.stop().await.unwrap();
}

fn ending_ok_and_gapless(events: &[Event]) {
    let seqs = turn_seqs(events);
    assert_eq!(seqs, (1..=seqs.len() as i64).collect::<Vec<_>>());
}

/// A watcher attaching while a tool runs is told about it right after the
/// stored turns, as an early watcher would have seen it.
#[tokio::test]
async fn late_watcher_is_told_which_tools_are_running() {
    let app = spawn_app().await;
    let mut client = app.client().await;
    let session = new_session(&mut client).await;
    let driver = Driver::claim(&app, &session).await;
    let call = driver.call("c-1", "kubectl_get").await;
    driver.start(call.seq, "c-1", "kubectl_get");

    let mut stream = watch(&mut client, &session, 0).await.unwrap();
    assert!(matches!(next(&mut stream).await.unwrap(), Some(Event::Turn(t)) if t.seq == 1));
    assert!(matches!(next(&mut stream).await.unwrap(), Some(Event::Turn(t)) if t.seq == 2));
    match next(&mut stream).await.unwrap() {
        Some(Event::ToolCallStart(s)) => {
            assert_eq!(
                (s.call_id.as_str(), s.tool_name.as_str()),
                ("c-1", "kubectl_get")
            );
            assert_eq!(s.assistant_seq, 2);
            assert_eq!(s.session_id, session);
            assert!(s.started_at.is_some());
        }
        other => panic!("expected the running call, got {other:?}"),
    }
    driver.result("c-1", "kubectl_get", "3 pods").await;
    driver.finish().await;
    let (events, ending) = collect(stream).await;
    ending.unwrap();
    assert_eq!(turn_seqs(&events), vec![3]);
    assert!(!events.iter().any(|e| matches!(e, Event::ToolCallStart(_))));

    // Finished: nothing is running any more, and nobody is told otherwise.
    assert!(
        app.turn_log
            .live()
            .running_calls(SessionId::parse(&session).unwrap())
            .is_empty()
    );
    app.stop().await.unwrap();
}

/// CancelSession after a ToolCallStart and before its result: status
/// cancelled with its exit reason, earlier turns persisted, watchers end,
/// the burst's token fires; the session takes no more messages.
#[tokio::test]
async fn cancel_session_mid_tool() {
    let app = spawn_app().await;
    let mut client = app.client().await;
    let session = new_session(&mut client).await;
    let id = SessionId::parse(&session).unwrap();
    let driver = Driver::claim(&app, &session).await;
    let call = driver.call("c-1", "restart_pod").await;
    driver.start(call.seq, "c-1", "restart_pod");
    let watcher = tokio::spawn(collect(watch(&mut client, &session, 0).await.unwrap()));
    eventually("watcher subscribed", || {
        app.broadcaster().subscriber_count(id) == 1
    })
    .await;

    let cancelled = client
        .cancel_session(pb::CancelSessionRequest {
            session_id: session.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(cancelled.status(), pb::SessionStatus::Cancelled);
    assert_eq!(cancelled.exit_reason, "cancelled");
    assert_eq!(cancelled.head_seq, 2);
    assert!(driver.cancelled.is_cancelled());
    assert!(app.turn_log.live().running_calls(id).is_empty());

    let (events, ending) = watcher.await.unwrap();
    ending.unwrap();
    assert_eq!(turn_seqs(&events), vec![1, 2]);
    assert_eq!(app.broadcaster().subscriber_count(id), 0);

    // What the tool did after the cancel is still recorded; the late close
    // of the burst does not undo the cancel.
    driver.result("c-1", "restart_pod", "restarted").await;
    driver.finish().await;
    let row = app.store.get_session(id).await.unwrap();
    assert_eq!(row.status, SessionStatus::Cancelled);
    assert_eq!(row.exit_reason, Some(inquest_core::ExitReason::Cancelled));
    assert_eq!(row.head_seq.map(|s| s.get()), Some(3));

    // Cancelling again returns it as it is; a message is refused with why.
    let again = client
        .cancel_session(pb::CancelSessionRequest {
            session_id: session.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(again.status(), pb::SessionStatus::Cancelled);
    let refused = client
        .send_message(pb::SendMessageRequest {
            session_id: session.clone(),
            message: "continue".into(),
            idempotency_key: String::new(),
            if_running: 0,
        })
        .await
        .unwrap_err();
    crate::error_details::assert_reason(
        &refused,
        Code::FailedPrecondition,
        inquest_server::reason::Reason::SessionCancelled,
        &[("status", "cancelled")],
    );
    assert!(
        refused.message().contains("cancelled"),
        "{}",
        refused.message()
    );
    app.stop().await.unwrap();
}

/// An idle session (its burst waits for a human) is cancelled for good:
/// an operator closes the investigation that way, and a follower's watch
/// ends. A completed one keeps its outcome: refused, with what to do.
#[tokio::test]
async fn cancel_ends_an_idle_session_but_not_a_completed_one() {
    let app = spawn_app().await;
    let mut client = app.client().await;
    let session = new_session(&mut client).await;
    Driver::claim(&app, &session).await.finish().await;
    let cancelled = client
        .cancel_session(pb::CancelSessionRequest {
            session_id: session.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(cancelled.status(), pb::SessionStatus::Cancelled);
    assert_eq!(cancelled.exit_reason, "cancelled");
    // Final: a follow-up is refused.
    let refused = client
        .send_message(pb::SendMessageRequest {
            session_id: session.clone(),
            message: "more?".into(),
            idempotency_key: String::new(),
            if_running: 0,
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");

    let done = new_session(&mut client).await;
    Driver::claim(&app, &done)
        .await
        .finish_as(inquest_core::ExitReason::Completed)
        .await;
    let refused = client
        .cancel_session(pb::CancelSessionRequest {
            session_id: done.clone(),
        })
        .await
        .unwrap_err();
    crate::error_details::assert_reason(
        &refused,
        Code::FailedPrecondition,
        inquest_server::reason::Reason::NotCancellable,
        &[("status", "completed")],
    );
    assert!(
        refused.message().contains("Ctrl-C"),
        "{}",
        refused.message()
    );
    app.stop().await.unwrap();
}

#[tokio::test]
async fn a_recovery_notice_settles_the_calls_it_repaired() {
    let app = spawn_app().await;
    let mut client = app.client().await;
    let session = new_session(&mut client).await;
    let id = SessionId::parse(&session).unwrap();
    let driver = Driver::claim(&app, &session).await;
    let call = driver.call("c1", "restart_service").await;
    driver.start(call.seq, "c1", "restart_service");
    assert_eq!(app.turn_log.live().running_calls(id).len(), 1);
    // The worker running c1 died; the claimer's plan repairs c1 and its
    // notice says so. No result will ever come for c1.
    let stored = app.store.all_turns(id).await.unwrap();
    let plan =
        inquest_core::plan_resume(id, &stored, &|_: &str| inquest_core::SideEffect::Mutating);
    assert_eq!(plan.repaired_call_ids, ["c1"]);
    driver
        .burst
        .append(inquest_core::NewTurn::Notice {
            text: plan.notice_text.clone(),
            plan: Some(Box::new(inquest_core::notice_plan(&plan))),
        })
        .await
        .unwrap();
    assert!(app.turn_log.live().running_calls(id).is_empty());
    // A watcher starting now is not told c1 is running.
    let stream = watch(&mut client, &session, 0).await.unwrap();
    driver.finish().await;
    let (events, ending) = collect(stream).await;
    ending.unwrap();
    assert_eq!(turn_seqs(&events), [1, 2, 3]);
    assert!(
        !events.iter().any(|e| matches!(e, Event::ToolCallStart(_))),
        "{events:?}"
    );
}
