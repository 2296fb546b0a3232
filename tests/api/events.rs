//! The event log (migration V22): every lifecycle change of a session
//! commits with its event row, and the turn append stays a HOT update.

use std::time::Duration;

use inquest_core::{ExitReason, IncidentText, Limits, NewTurn, SessionId, TokenUsage, UserMessage};
use inquest_store::{CallerEvent, NewReport, SendOutcome, Store, WriteId};
use inquest_tests::spawn_app;

use crate::leases::store_as;

async fn new_session(store: &Store, title: &str) -> SessionId {
    let limits = Limits::default();
    let incident = store
        .create_incident(
            &inquest_core::Tenant::default_tenant(),
            &IncidentText::parse(title.into(), String::new(), &limits).unwrap(),
        )
        .await
        .unwrap();
    store
        .start_session(
            &inquest_core::Tenant::default_tenant(),
            inquest_core::TenantQuota::UNLIMITED,
            incident.id,
            UserMessage::parse("what happened?".into(), &limits).unwrap(),
            None,
        )
        .await
        .unwrap()
        .session
        .id
}

/// The session's status and the type of its newest event, read in one
/// statement (one snapshot).
async fn status_and_last_event(
    db: &tokio_postgres::Client,
    session: SessionId,
) -> (String, String) {
    let row = db
        .query_one(
            "SELECT s.status::text, (SELECT type FROM events WHERE session_id = s.id \
                                    ORDER BY id DESC LIMIT 1) \
             FROM sessions s WHERE s.id = $1",
            &[session.as_uuid()],
        )
        .await
        .unwrap();
    (
        row.get(0),
        row.get::<_, Option<String>>(1).unwrap_or_default(),
    )
}

async fn types_of(db: &tokio_postgres::Client, session: SessionId) -> Vec<String> {
    db.query(
        "SELECT type FROM events WHERE session_id = $1 ORDER BY id",
        &[session.as_uuid()],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| r.get(0))
    .collect()
}

fn says(text: &str) -> NewTurn {
    NewTurn::Assistant {
        text: text.into(),
        tool_calls: Vec::new(),
        usage: TokenUsage {
            input_tokens: 7,
            output_tokens: 3,
            ..TokenUsage::default()
        },
    }
}

#[tokio::test]
async fn every_lifecycle_change_commits_with_its_event() {
    let app = spawn_app().await;
    let store = store_as(&app.db_url, "events-a");
    let db = inquest_tests::connect(&app.db_url).await;
    let session = new_session(&store, "disk full on db-3").await;
    let incident: uuid::Uuid = db
        .query_one(
            "SELECT incident_id FROM sessions WHERE id = $1",
            &[session.as_uuid()],
        )
        .await
        .unwrap()
        .get(0);
    let created = db
        .query_one(
            "SELECT payload->>'title', session_id IS NULL FROM events \
             WHERE type = 'incident.created' AND incident_id = $1",
            &[&incident],
        )
        .await
        .unwrap();
    assert_eq!(created.get::<_, String>(0), "disk full on db-3");
    assert!(created.get::<_, bool>(1));
    // Pending is the queue, not news.
    assert_eq!(types_of(&db, session).await, Vec::<String>::new());

    let lease = store.claim_pending(session).await.unwrap().unwrap();
    assert_eq!(
        status_and_last_event(&db, session).await,
        ("running".into(), "session.running".into())
    );
    // Turns are not events.
    store
        .append_turn_leased(&lease, WriteId::new(), says("looking"))
        .await
        .unwrap();
    store
        .save_report(
            &lease,
            NewReport {
                burst: 1,
                exit_reason: ExitReason::Completed,
                summary: "the disk filled with WAL".into(),
                counters: serde_json::json!({}),
                active_ms: 1234,
            },
        )
        .await
        .unwrap();
    let report = db
        .query_one(
            "SELECT payload FROM events WHERE session_id = $1 AND type = 'report.ready'",
            &[session.as_uuid()],
        )
        .await
        .unwrap()
        .get::<_, serde_json::Value>(0);
    assert_eq!(report["summary"], "the disk filled with WAL");
    assert_eq!(report["exit_reason"], "completed");
    assert_eq!(report["active_ms"], 1234);
    assert_eq!(report["input_tokens"], 7);
    assert_eq!(report["output_tokens"], 3);
    // No price configured for the turn: the cost is unknown, not zero.
    assert_eq!(report["cost_nano_usd"], serde_json::Value::Null);
    assert_eq!(report["cost_unknown_turns"], 1);
    store
        .close_burst(&lease, ExitReason::Completed)
        .await
        .unwrap();
    assert_eq!(
        status_and_last_event(&db, session).await,
        ("completed".into(), "session.completed".into())
    );
    let exit: Option<String> = db
        .query_one(
            "SELECT payload->>'exit_reason' FROM events WHERE session_id = $1 \
             ORDER BY id DESC LIMIT 1",
            &[session.as_uuid()],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(exit.as_deref(), Some("completed"));

    // A follow-up, then an orphan recovered by another replica.
    let limits = Limits::default();
    let sent = store
        .send_message(
            &inquest_core::Tenant::default_tenant(),
            inquest_core::TenantQuota::UNLIMITED,
            session,
            UserMessage::parse("and now?".into(), &limits).unwrap(),
            None,
        )
        .await
        .unwrap();
    assert!(matches!(sent, SendOutcome::Sent { .. }));
    let lease = store.claim_pending(session).await.unwrap().unwrap();
    db.execute(
        "UPDATE sessions SET lease_expires_at = now() - interval '1 second' WHERE id = $1",
        &[session.as_uuid()],
    )
    .await
    .unwrap();
    let other = store_as(&app.db_url, "events-b");
    let taken = other.claim_orphan(session).await.unwrap().unwrap();
    assert!(taken.epoch() > lease.epoch());
    // Claimed but no plan yet: the recovery is recorded with its plan.
    assert_eq!(
        status_and_last_event(&db, session).await,
        ("running".into(), "session.running".into())
    );
    other
        .save_recovery_plan(
            &taken,
            serde_json::json!({"kind": "interrupted_turn"}),
            true,
        )
        .await
        .unwrap();
    let recovered = db
        .query_one(
            "SELECT payload FROM events WHERE session_id = $1 AND type = 'session.recovered'",
            &[session.as_uuid()],
        )
        .await
        .unwrap()
        .get::<_, serde_json::Value>(0);
    assert_eq!(recovered["plan_kind"], "interrupted_turn");
    assert_eq!(recovered["lease_epoch"], taken.epoch());
    // A cancel from a caller.
    other
        .transition(session, CallerEvent::Cancel)
        .await
        .unwrap();
    assert_eq!(
        types_of(&db, session).await,
        [
            "session.running",
            "report.ready",
            "session.completed",
            "session.running",
            "session.recovered",
            "session.cancelled"
        ]
    );
    app.stop().await.unwrap();
}

/// The event is written by the statement that changes the status: a
/// rolled-back change leaves no event, an uncommitted one shows neither,
/// and a change whose event cannot be written does not happen.
#[tokio::test]
async fn a_status_change_and_its_event_commit_or_fail_together() {
    let app = spawn_app().await;
    let store = store_as(&app.db_url, "events-a");
    let session = new_session(&store, "atomic").await;
    let _lease = store.claim_pending(session).await.unwrap().unwrap();
    let reader = inquest_tests::connect(&app.db_url).await;
    let mut writer = inquest_tests::connect(&app.db_url).await;
    let before = status_and_last_event(&reader, session).await;
    assert_eq!(before, ("running".into(), "session.running".into()));

    let tx = writer.transaction().await.unwrap();
    tx.execute(
        "UPDATE sessions SET status = 'idle' WHERE id = $1",
        &[session.as_uuid()],
    )
    .await
    .unwrap();
    assert_eq!(status_and_last_event(&reader, session).await, before);
    tx.rollback().await.unwrap();
    assert_eq!(status_and_last_event(&reader, session).await, before);

    let tx = writer.transaction().await.unwrap();
    tx.execute(
        "UPDATE sessions SET status = 'idle' WHERE id = $1",
        &[session.as_uuid()],
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(
        status_and_last_event(&reader, session).await,
        ("idle".into(), "session.idle".into())
    );

    // An event that cannot be stored refuses the change itself.
    writer
        .batch_execute("ALTER TABLE events ADD CONSTRAINT refuse_all CHECK (false) NOT VALID")
        .await
        .unwrap();
    let refused = writer
        .execute(
            "UPDATE sessions SET status = 'failed' WHERE id = $1",
            &[session.as_uuid()],
        )
        .await;
    assert!(refused.is_err(), "the status changed without its event");
    writer
        .batch_execute("ALTER TABLE events DROP CONSTRAINT refuse_all")
        .await
        .unwrap();
    assert_eq!(
        status_and_last_event(&reader, session).await,
        ("idle".into(), "session.idle".into())
    );
    app.stop().await.unwrap();
}

/// The events trigger fires on `UPDATE OF status` only: the turn append,
/// which bumps the session's counters in the same statement, stays a HOT
/// update and records nothing.
#[tokio::test]
async fn the_turn_append_stays_a_hot_update_and_writes_no_event() {
    let app = spawn_app().await;
    let store = store_as(&app.db_url, "events-a");
    let db = inquest_tests::connect(&app.db_url).await;
    let session = new_session(&store, "hot").await;
    let lease = store.claim_pending(session).await.unwrap().unwrap();
    let stats = async || -> (i64, i64) {
        let row = db
            .query_one(
                "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables \
                 WHERE relname = 'sessions'",
                &[],
            )
            .await
            .unwrap();
        (row.get(0), row.get(1))
    };
    // Statistics reach the view when each backend flushes them (at most
    // once a second): wait until the claim's update is counted.
    let mut before = stats().await;
    for _ in 0..100 {
        if before.0 > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        before = stats().await;
    }
    let events_before = app.count("events").await;
    const APPENDS: i64 = 40;
    for n in 0..APPENDS {
        store
            .append_turn_leased(&lease, WriteId::new(), says(&format!("turn {n}")))
            .await
            .unwrap();
    }
    let mut after = stats().await;
    for _ in 0..100 {
        if after.0 - before.0 >= APPENDS {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        after = stats().await;
    }
    let updates = after.0 - before.0;
    let hot = after.1 - before.1;
    assert!(updates >= APPENDS, "{updates} updates counted");
    assert_eq!(hot, updates, "every append's session update is HOT");
    assert_eq!(app.count("events").await, events_before);
    app.stop().await.unwrap();
}
