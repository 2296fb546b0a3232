//! A store call that outlives its timeout leaves nothing behind in the
//! pool. The timed-out statement was sent and is still in the database's
//! hands (waiting on a lock a frozen client holds, say); a connection
//! handed back to the pool with it still pending would make every later
//! call on that connection queue behind it and time out in turn, until
//! the lock goes. So a call that times out closes its connection.

use std::time::Duration;

use inquest_core::{IncidentText, Limits, SessionId, UserMessage};
use inquest_store::{CallerEvent, Store, StoreConfig, StoreError};
use inquest_tests::{connect, fresh_database};

async fn one_connection_store(url: &str) -> Store {
    let mut config = StoreConfig::new(url);
    // One connection per lane: the call after the stuck one gets the
    // stuck one's connection unless it was closed.
    config.max_connections = 1;
    config.burst_connections = 1;
    // The calls that get stuck time out whatever these are; the calls
    // after them must not, and on a loaded machine opening the fresh
    // connection they need can take a while.
    config.op_timeout = Duration::from_secs(3);
    config.turn_write_timeout = Duration::from_secs(1);
    let store = Store::connect(&config).expect("store");
    store.migrate().await.expect("migrating");
    store
}

async fn new_session(store: &Store) -> SessionId {
    let limits = Limits::default();
    let tenant = inquest_core::Tenant::default_tenant();
    let incident = store
        .create_incident(
            &tenant,
            &IncidentText::parse("stuck calls".into(), String::new(), &limits).expect("title"),
        )
        .await
        .expect("incident");
    store
        .start_session(
            &tenant,
            inquest_core::TenantQuota::UNLIMITED,
            incident.id,
            UserMessage::parse("what happened?".into(), &limits).expect("message"),
            None,
        )
        .await
        .expect("session")
        .session
        .id
}

/// A client stopped inside a transaction (a replica frozen by SIGSTOP
/// between its `UPDATE` and its `COMMIT`) holds `session`'s row.
async fn freeze_row(url: &str, session: SessionId) -> tokio_postgres::Client {
    let frozen = connect(url).await;
    frozen
        .batch_execute(&format!(
            "BEGIN; SELECT 1 FROM sessions WHERE id = '{}' FOR UPDATE",
            session.as_uuid()
        ))
        .await
        .expect("locking the session row");
    frozen
}

#[tokio::test]
async fn a_write_that_timed_out_behind_a_lock_does_not_hold_up_the_calls_after_it() {
    let (_name, url) = fresh_database().await;
    for lane in ["api", "burst"] {
        let api = one_connection_store(&url).await;
        let store = if lane == "api" {
            api.clone()
        } else {
            api.for_bursts()
        };
        let session = new_session(&api).await;
        let other = new_session(&api).await;
        let frozen = freeze_row(&url, session).await;

        let cancel = store.transition(session, CallerEvent::Cancel).await;
        assert!(
            matches!(cancel, Err(StoreError::OutcomeUnknown { .. })),
            "{lane}: a cancel waiting on the frozen row times out with its outcome unknown, got {cancel:?}"
        );
        // The lock is still held: the abandoned UPDATE is still waiting.
        for attempt in 0..3 {
            store.ping().await.unwrap_or_else(|e| {
                panic!("{lane}: ping {attempt} after the timed-out cancel failed: {e}")
            });
            let row = store.get_session(other).await.unwrap_or_else(|e| {
                panic!("{lane}: reading another session after the timed-out cancel failed: {e}")
            });
            assert_eq!(row.id, other);
        }

        // Once the frozen client lets go, the session answers again, and
        // the cancel that was sent either landed or did not: it is a
        // cancel either way once repeated.
        frozen.batch_execute("ROLLBACK").await.expect("rollback");
        let again = tokio::time::timeout(Duration::from_secs(30), async {
            loop {
                match store.transition(session, CallerEvent::Cancel).await {
                    Ok(done) => break done,
                    Err(StoreError::OutcomeUnknown { .. }) => continue,
                    Err(e) => panic!("{lane}: the repeated cancel failed: {e}"),
                }
            }
        })
        .await
        .expect("the repeated cancel answers once the lock is gone");
        let row = match again {
            inquest_store::Transition::Changed(row) | inquest_store::Transition::Unchanged(row) => {
                row
            }
        };
        assert_eq!(row.status, inquest_core::SessionStatus::Cancelled, "{lane}");
    }
}

/// A read that times out (a statement waiting on a lock: `FOR UPDATE`
/// readers are rare, so a `LOCK TABLE` stands in) closes its connection
/// too: the next read does not wait for it.
#[tokio::test]
async fn a_read_that_timed_out_does_not_hold_up_the_calls_after_it() {
    let (_name, url) = fresh_database().await;
    let store = one_connection_store(&url).await;
    let session = new_session(&store).await;
    let frozen = connect(&url).await;
    frozen
        .batch_execute("BEGIN; LOCK TABLE sessions IN ACCESS EXCLUSIVE MODE")
        .await
        .expect("locking sessions");
    let read = store.get_session(session).await;
    assert!(
        matches!(read, Err(StoreError::Timeout { .. })),
        "a read of a locked table times out, got {read:?}"
    );
    for attempt in 0..3 {
        store
            .ping()
            .await
            .unwrap_or_else(|e| panic!("ping {attempt} after the timed-out read failed: {e}"));
    }
    frozen.batch_execute("ROLLBACK").await.expect("rollback");
    let row = store
        .get_session(session)
        .await
        .expect("the read answers once the lock is gone");
    assert_eq!(row.id, session);
}
