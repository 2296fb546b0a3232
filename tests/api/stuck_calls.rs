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
    let database = fresh_database().await;
    let url = database.url.clone();
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
    let database = fresh_database().await;
    let url = database.url.clone();
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

/// A replica frozen inside one of its transactions (SIGSTOP between two
/// statements) does not hold what it wrote until it runs again: the
/// database ends its idle transaction (`idle_in_transaction_timeout`), so
/// the client's retry of the same `StartSession` on another replica, with
/// the same idempotency key, which waits for the frozen one's uncommitted
/// key row, is answered while the first replica is still frozen.
#[test]
fn a_replica_frozen_inside_a_transaction_lets_go_of_its_rows() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("test runtime");
    let database = runtime.block_on(fresh_database());
    let url = database.url.clone();
    let limits = Limits::default();
    let tenant = inquest_core::Tenant::default_tenant();
    let mut live_config = StoreConfig::new(&url);
    // Far longer than the frozen replica's idle timeout: the retry must
    // be answered because that transaction ended, not because it gave up.
    live_config.turn_write_timeout = Duration::from_secs(20);
    let live = Store::connect(&live_config).expect("live replica's store");
    let (incident, lock) = runtime.block_on(async {
        live.migrate().await.expect("migrating");
        let incident = live
            .create_incident(
                &tenant,
                &IncidentText::parse("frozen replica".into(), String::new(), &limits)
                    .expect("title"),
            )
            .await
            .expect("incident")
            .id;
        // Holds the frozen replica's key insert back, mid-execution, until
        // it is frozen: an uncommitted row with the same key, which its
        // `INSERT ... ON CONFLICT` waits on. (A table lock would hold it
        // back while its statement is being prepared, before it writes.)
        let other = new_session(&live).await;
        let lock = connect(&url).await;
        lock.batch_execute(&format!(
            "BEGIN; INSERT INTO idempotency_keys (scope, key, session_id, seq) \
             VALUES ('start_session:{incident}', 'frozen-retry', '{}', 1)",
            other.as_uuid()
        ))
        .await
        .expect("holding the key");
        (incident, lock)
    });
    let key = inquest_core::IdempotencyKey::parse_optional("frozen-retry".into())
        .expect("key")
        .expect("a key");
    let message = UserMessage::parse("what happened?".into(), &limits).expect("message");

    // The replica to freeze: its store on a one-thread runtime of its
    // own, which the test blocks, as SIGSTOP would.
    let app = "inquest_frozen_replica";
    let separator = if url.contains('?') { '&' } else { '?' };
    let mut frozen_config = StoreConfig::new(format!("{url}{separator}application_name={app}"));
    frozen_config.idle_in_transaction_timeout = Duration::from_secs(2);
    let frozen_store = Store::connect(&frozen_config).expect("frozen replica's store");
    let (freeze_tx, freeze_rx) = tokio::sync::oneshot::channel::<()>();
    let (frozen_tx, frozen_rx) = std::sync::mpsc::channel::<()>();
    let (thaw_tx, thaw_rx) = std::sync::mpsc::channel::<()>();
    let replica = {
        let (tenant, key, message) = (tenant.clone(), key.clone(), message.clone());
        std::thread::spawn(move || {
            let own = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("frozen replica's runtime");
            own.block_on(async move {
                let call = tokio::spawn(async move {
                    frozen_store
                        .start_session(
                            &tenant,
                            inquest_core::TenantQuota::UNLIMITED,
                            incident,
                            message,
                            Some(key),
                        )
                        .await
                });
                let _ = freeze_rx.await;
                let _ = frozen_tx.send(());
                // Frozen: nothing on this runtime runs until thawed.
                let _ = thaw_rx.recv_timeout(Duration::from_secs(120));
                call.await.expect("the frozen replica's call panicked")
            })
        })
    };

    let winner = runtime.block_on(async {
        let watch = connect(&url).await;
        let state = async |wanted: &str| {
            tokio::time::timeout(Duration::from_secs(30), async {
                loop {
                    let rows = watch
                        .query(
                            "SELECT coalesce(state, ''), coalesce(wait_event_type, '') \
                             FROM pg_stat_activity WHERE application_name = $1",
                            &[&app],
                        )
                        .await
                        .expect("pg_stat_activity");
                    let seen: Vec<(String, String)> =
                        rows.iter().map(|r| (r.get(0), r.get(1))).collect();
                    let matched = match wanted {
                        "waiting" => seen.iter().any(|(s, w)| s == "active" && w == "Lock"),
                        _ => seen.iter().any(|(s, _)| s == wanted),
                    };
                    if matched {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            })
            .await
            .unwrap_or_else(|_| panic!("the frozen replica's backend never got {wanted}"))
        };
        // Its transaction has written the session and its first turn and
        // is inserting the key.
        state("waiting").await;
        freeze_tx.send(()).expect("freezing");
        frozen_rx.recv().expect("the replica froze");
        // The key insert goes through; its answer reaches a frozen client.
        lock.batch_execute("ROLLBACK")
            .await
            .expect("letting the key go");
        state("idle in transaction").await;

        let retried = live
            .start_session(
                &tenant,
                inquest_core::TenantQuota::UNLIMITED,
                incident,
                message.clone(),
                Some(key.clone()),
            )
            .await
            .expect("the retry on the live replica is answered while the other is frozen");
        assert!(
            retried.created,
            "the frozen replica's transaction never committed: the retry made the session"
        );
        let keys: i64 = watch
            .query_one(
                "SELECT count(*) FROM idempotency_keys WHERE key = $1",
                &[&key.as_str()],
            )
            .await
            .expect("counting keys")
            .get(0);
        assert_eq!(keys, 1);
        retried.session.id
    });

    thaw_tx.send(()).expect("thawing");
    let frozen_outcome = replica.join().expect("the frozen replica's thread");
    // Its transaction was ended: it failed, or (the store resolving the
    // unknown by asking again under the same key) it found the retry's.
    if let Ok(found) = &frozen_outcome {
        assert_eq!(found.session.id, winner, "the same key, the same session");
        assert!(!found.created, "{frozen_outcome:?}");
    }
    let sessions: i64 = runtime.block_on(async {
        connect(&url)
            .await
            .query_one(
                "SELECT count(*) FROM sessions WHERE incident_id = $1",
                &[incident.as_uuid()],
            )
            .await
            .expect("counting sessions")
            .get(0)
    });
    assert_eq!(sessions, 1, "one session for one key");
}
