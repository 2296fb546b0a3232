//! Leases and the cross-replica announcements at the store level, against
//! a real database: the fence refuses every write of a replaced worker, and
//! turns are announced only to replicas that registered a watcher.

use std::time::Duration;

use inquest_core::{
    ExitReason, IncidentText, Limits, NewTurn, SessionId, SessionStatus, TokenUsage, UserMessage,
};
use inquest_store::{
    Lease, ReplicaId, Store, StoreConfig, StoreError, Transition,
    listen::{ListenEvent, ListenerConfig, run_listener},
    notify::{CHANNEL, Notification},
};
use inquest_tests::spawn_app;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

fn store_as(url: &str, replica: &str) -> Store {
    let mut config = StoreConfig::new(url);
    config.max_connections = 2;
    config.replica_id = ReplicaId::parse(replica).unwrap();
    config.lease_ttl = Duration::from_secs(30);
    Store::connect(&config).unwrap()
}

async fn pending_session(store: &Store) -> SessionId {
    let limits = Limits::default();
    let incident = store
        .create_incident(&IncidentText::parse("lease test".into(), String::new(), &limits).unwrap())
        .await
        .unwrap();
    store
        .start_session(
            incident.id,
            UserMessage::parse("what happened?".into(), &limits).unwrap(),
            None,
        )
        .await
        .unwrap()
        .session
        .id
}

fn says(text: &str) -> NewTurn {
    NewTurn::Assistant {
        text: text.into(),
        tool_calls: Vec::new(),
        usage: TokenUsage::default(),
    }
}

/// Expires the session's lease, as if its holder stopped renewing.
async fn expire(url: &str, session: SessionId) {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    let driver = tokio::spawn(connection);
    client
        .execute(
            "UPDATE sessions SET lease_expires_at = now() - interval '1 second' WHERE id = $1",
            &[session.as_uuid()],
        )
        .await
        .unwrap();
    drop(client);
    let _ = driver.await;
}

#[tokio::test]
async fn a_replaced_worker_cannot_append_report_or_close() {
    let app = spawn_app().await;
    let a = store_as(&app.db_url, "replica-a");
    let b = store_as(&app.db_url, "replica-b");
    let session = pending_session(&a).await;
    let stale: Lease = a.claim_pending(session).await.unwrap().expect("pending");
    a.append_turn_leased(&stale, says("before the takeover"))
        .await
        .unwrap();
    // A live lease is not an orphan.
    assert_eq!(b.claim_orphan(session).await.unwrap(), None);
    expire(&app.db_url, session).await;
    let fresh = b.claim_orphan(session).await.unwrap().expect("an orphan");
    assert_eq!(fresh.epoch(), stale.epoch() + 1);
    // Only one claimer wins an orphan.
    assert_eq!(a.claim_orphan(session).await.unwrap(), None);

    let refused = a
        .append_turn_leased(&stale, says("after the takeover"))
        .await
        .unwrap_err();
    assert!(
        matches!(refused, StoreError::LeaseLost { held, current, .. } if held == stale.epoch() && current == fresh.epoch()),
        "{refused:?}"
    );
    let report = a
        .save_report(
            &stale,
            1,
            ExitReason::Completed,
            "stale".into(),
            serde_json::json!({}),
            0,
        )
        .await
        .unwrap_err();
    assert!(matches!(report, StoreError::LeaseLost { .. }), "{report:?}");
    let closed = a
        .transition_leased(
            &stale,
            &[SessionStatus::Running],
            SessionStatus::Completed,
            Some("completed".into()),
        )
        .await
        .unwrap();
    assert!(
        matches!(closed, Transition::Unchanged(ref row) if row.status == SessionStatus::Running)
    );
    assert!(matches!(
        a.renew_lease(&stale).await.unwrap(),
        inquest_store::Renewal::Lost
    ));

    // The new holder writes on; the stale write left no trace.
    let turn = b
        .append_turn_leased(&fresh, says("recovered"))
        .await
        .unwrap();
    assert_eq!(turn.seq.as_i64(), 3);
    let all = b.all_turns(session).await.unwrap();
    assert_eq!(
        all.iter().map(|t| t.content.as_str()).collect::<Vec<_>>(),
        ["what happened?", "before the takeover", "recovered"]
    );
    assert!(b.get_report(session, None).await.is_err());
    app.stop().await.unwrap();
}

/// Collects notifications until `marker` (sent after the writes under test:
/// NOTIFY is delivered in commit order, so everything before it arrived).
async fn until_marker(
    rx: &mut mpsc::UnboundedReceiver<ListenEvent>,
    marker: &str,
) -> Vec<Notification> {
    let mut seen = Vec::new();
    loop {
        let event = tokio::time::timeout(Duration::from_secs(30), rx.recv())
            .await
            .expect("the marker never arrived")
            .expect("listener ended");
        if let ListenEvent::Notification(payload) = event {
            if payload == marker {
                return seen;
            }
            seen.push(Notification::parse(&payload).unwrap());
        }
    }
}

/// A plain NOTIFY of `text` on the channel, from its own connection.
async fn marker(url: &str, text: &str) {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    let driver = tokio::spawn(connection);
    client
        .execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &text])
        .await
        .unwrap();
    drop(client);
    let _ = driver.await;
}

#[tokio::test]
async fn turns_are_announced_only_to_replicas_that_registered_a_watcher() {
    let app = spawn_app().await;
    let a = store_as(&app.db_url, "replica-a");
    let b = store_as(&app.db_url, "replica-b");
    let (tx, mut rx) = mpsc::unbounded_channel();
    let stop = CancellationToken::new();
    let listener = tokio::spawn(run_listener(
        ListenerConfig::new(app.db_url.clone(), CHANNEL),
        stop.clone(),
        move |e| {
            let _ = tx.send(e);
        },
    ));
    assert_eq!(rx.recv().await, Some(ListenEvent::Listening));

    let session = pending_session(&a).await;
    let lease = a.claim_pending(session).await.unwrap().unwrap();
    // Nobody watches: no announcement (commits stay off the notify lock).
    a.append_turn_leased(&lease, says("unwatched"))
        .await
        .unwrap();
    // The writer's own watcher does not count either.
    a.register_watcher(session).await.unwrap();
    a.append_turn_leased(&lease, says("watched by the writer only"))
        .await
        .unwrap();
    marker(&app.db_url, "m1").await;
    let seen = until_marker(&mut rx, "m1").await;
    assert!(
        !seen.iter().any(|n| matches!(n, Notification::Turn { .. })),
        "{seen:?}"
    );

    // Another replica watches: every turn is announced, whole, by the writer.
    b.register_watcher(session).await.unwrap();
    b.register_watcher(session).await.unwrap(); // idempotent
    let turn = a.append_turn_leased(&lease, says("watched")).await.unwrap();
    marker(&app.db_url, "m2").await;
    let seen = until_marker(&mut rx, "m2").await;
    match seen.as_slice() {
        [
            Notification::Turn {
                origin,
                session: s,
                seq,
                turn: Some(t),
            },
        ] => {
            assert_eq!(origin, "replica-a");
            assert_eq!(*s, session);
            assert_eq!(*seq, turn.seq);
            assert_eq!(t.content, "watched");
            assert_eq!(t.created_at, turn.created_at);
        }
        other => panic!("expected one turn announcement, got {other:?}"),
    }

    // Too large for a notification: announced by seq, fetched by it.
    let big = a
        .append_turn_leased(&lease, says(&"x".repeat(10_000)))
        .await
        .unwrap();
    marker(&app.db_url, "m2b").await;
    let seen = until_marker(&mut rx, "m2b").await;
    assert!(
        matches!(seen.as_slice(), [Notification::Turn { seq, turn: None, .. }] if *seq == big.seq),
        "{seen:?}"
    );
    let fetched = b.get_turn(session, big.seq).await.unwrap().unwrap();
    assert_eq!(fetched.content.len(), 10_000);

    // Ending the burst announces the status and forgets the watchers.
    a.transition_leased(
        &lease,
        &[SessionStatus::Running],
        SessionStatus::Idle,
        Some("awaiting_user".into()),
    )
    .await
    .unwrap();
    marker(&app.db_url, "m3").await;
    let seen = until_marker(&mut rx, "m3").await;
    assert!(
        matches!(
            seen.as_slice(),
            [Notification::Status {
                status: SessionStatus::Idle,
                ..
            }]
        ),
        "{seen:?}"
    );
    stop.cancel();
    listener.await.unwrap();
    app.stop().await.unwrap();
}
