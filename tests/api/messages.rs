//! SendMessage: idempotency, refusal while running, atomic reopening.

use inquest_core::{SessionId, SessionStatus};
use inquest_proto::v1 as pb;
use inquest_tests::{
    driver::{Driver, new_session},
    spawn_app,
};
use tonic::Code;

fn send(session: &str, message: &str, key: &str) -> pb::SendMessageRequest {
    pb::SendMessageRequest {
        session_id: session.into(),
        message: message.into(),
        idempotency_key: key.into(),
        if_running: 0,
    }
}

#[tokio::test]
async fn send_message_is_idempotent_per_session() {
    let app = spawn_app().await;
    let mut client = app.client().await;
    let session = new_session(&mut client).await;
    Driver::claim(&app, &session).await.finish().await;

    let first = client
        .send_message(send(&session, "more?", "k1"))
        .await
        .unwrap();
    let again = client
        .send_message(send(&session, "more?", "k1"))
        .await
        .unwrap();
    assert_eq!(first.into_inner().seq, 2);
    assert_eq!(again.into_inner().seq, 2);
    assert_eq!(app.count("turns").await, 2);
    let row = app
        .store
        .get_session(SessionId::parse(&session).unwrap())
        .await
        .unwrap();
    assert_eq!(row.status, SessionStatus::Pending);

    // The same key on another session is another message.
    let other = new_session(&mut client).await;
    Driver::claim(&app, &other).await.finish().await;
    let seq = client
        .send_message(send(&other, "more?", "k1"))
        .await
        .unwrap();
    assert_eq!(seq.into_inner().seq, 2);
    assert_eq!(app.count("turns").await, 4);
    app.stop().await.unwrap();
}

#[tokio::test]
async fn send_message_to_a_running_session_is_refused() {
    let app = spawn_app().await;
    let mut client = app.client().await;
    let session = new_session(&mut client).await;

    // Pending (its first burst has not started) and running: both refused.
    let pending = client
        .send_message(send(&session, "hello?", ""))
        .await
        .unwrap_err();
    crate::error_details::assert_reason(
        &pending,
        Code::FailedPrecondition,
        inquest_server::reason::Reason::SessionRunning,
        &[("status", "pending")],
    );
    let driver = Driver::claim(&app, &session).await;
    let running = client
        .send_message(send(&session, "hello?", ""))
        .await
        .unwrap_err();
    crate::error_details::assert_reason(
        &running,
        Code::FailedPrecondition,
        inquest_server::reason::Reason::SessionRunning,
        &[("status", "running")],
    );
    assert_eq!(app.count("turns").await, 1);

    // Bad input is refused before the state is looked at.
    let empty = client
        .send_message(send(&session, " ", ""))
        .await
        .unwrap_err();
    assert_eq!(empty.code(), Code::InvalidArgument);
    let unknown = client
        .send_message(send("01890a5d-ac96-774b-bcce-b302099a8057", "x", ""))
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound);

    // A failed session is not a dead end: a follow-up reopens it.
    driver
        .finish_as(inquest_core::ExitReason::StoreFailed)
        .await;
    let reopened = client
        .send_message(send(&session, "retry", ""))
        .await
        .expect("a follow-up reopens a failed session");
    assert_eq!(reopened.into_inner().seq, 2);
    assert_eq!(app.count("turns").await, 2);

    // A cancelled one is final, and says why.
    client
        .cancel_session(pb::CancelSessionRequest {
            session_id: session.clone(),
        })
        .await
        .expect("cancel");
    let cancelled = client
        .send_message(send(&session, "again", ""))
        .await
        .unwrap_err();
    crate::error_details::assert_reason(
        &cancelled,
        Code::FailedPrecondition,
        inquest_server::reason::Reason::SessionCancelled,
        &[("status", "cancelled")],
    );
    assert!(
        cancelled.message().contains("cancelled"),
        "{}",
        cancelled.message()
    );
    assert_eq!(app.count("turns").await, 2);
    app.stop().await.unwrap();
}

/// Concurrent follow-ups to one idle session: exactly one opens a burst.
#[tokio::test]
async fn concurrent_messages_open_one_burst() {
    let app = spawn_app().await;
    let mut client = app.client().await;
    let session = new_session(&mut client).await;
    Driver::claim(&app, &session).await.finish().await;

    let mut calls = Vec::new();
    for i in 0..8 {
        let mut client = client.clone();
        let request = send(&session, &format!("message {i}"), "");
        calls.push(tokio::spawn(
            async move { client.send_message(request).await },
        ));
    }
    let mut ok = 0;
    for call in calls {
        match call.await.unwrap() {
            Ok(r) => {
                assert_eq!(r.into_inner().seq, 2);
                ok += 1;
            }
            Err(s) => {
                crate::error_details::assert_reason(
                    &s,
                    Code::FailedPrecondition,
                    inquest_server::reason::Reason::SessionRunning,
                    &[],
                );
            }
        }
    }
    assert_eq!(ok, 1);
    assert_eq!(app.count("turns").await, 2);
    app.stop().await.unwrap();
}
