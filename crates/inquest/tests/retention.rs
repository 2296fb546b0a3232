//! `[retention]` on three real `inquest serve` replicas sharing one
//! database: thousands of expired sessions are erased in batches by
//! whichever replicas get to them, one replica is killed (kill -9) while
//! the passes run, and afterwards every expired session is gone exactly
//! once (one audit record each, no turn or incident left behind), the
//! recent ones and their turns are whole, and each survivor logged its
//! passes.

mod support;

use std::time::Duration;

use support::Server;

const EXPIRED: i64 = 3000;
const RECENT: i64 = 50;
const TURNS: i64 = 4;

async fn count(db: &inquest_tests::tokio_postgres::Client, sql: &str) -> i64 {
    db.query_one(sql, &[]).await.unwrap().get(0)
}

#[tokio::test]
async fn retention_across_three_replicas_survives_one_killed_mid_pass() {
    let database = inquest_tests::fresh_database().await;
    let db = inquest_tests::connect(&database.url).await;
    let store = inquest_store::Store::connect(&inquest_store::StoreConfig::new(&database.url))
        .expect("a store");
    store.migrate().await.expect("migrating");
    let expired = inquest_tests::retention::seed_settled(&db, "default", EXPIRED, TURNS, 120).await;
    let recent = inquest_tests::retention::seed_settled(&db, "default", RECENT, TURNS, 5).await;
    assert_eq!(expired.len() as i64, EXPIRED);

    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("inquest.toml");
    std::fs::write(
        &config,
        "[admin]\nenabled = false\n\n[retention]\nfinished_sessions = \"90d\"\n\
         interval = \"300ms\"\nbatch_size = 20\nbatch_pause = \"5ms\"\n",
    )
    .unwrap();
    let args = [
        "--database-url",
        &database.url,
        "--config",
        config.to_str().unwrap(),
    ];
    let mut replicas = Vec::new();
    for name in ["keep-a", "keep-b", "keep-c"] {
        replicas.push(Some(Server::start_with(name, &args, &[]).await));
    }
    // Kill one as soon as the passes are under way.
    let total = EXPIRED + RECENT;
    for _ in 0..2000 {
        if count(&db, "SELECT count(*) FROM sessions").await < total {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let at_kill = count(&db, "SELECT count(*) FROM sessions").await;
    let victim = replicas[1].take().unwrap();
    victim.kill9().await;
    eprintln!("killed keep-b with {at_kill} sessions left");
    assert!(
        at_kill > RECENT,
        "the passes were done before the kill: {at_kill}"
    );

    let mut left = at_kill;
    for _ in 0..600 {
        left = count(&db, "SELECT count(*) FROM sessions").await;
        if left == RECENT {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(left, RECENT, "the survivors erased every expired session");
    let kept: Vec<uuid::Uuid> = db
        .query("SELECT id FROM sessions", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(kept.iter().all(|id| recent.contains(id)), "{kept:?}");
    assert_eq!(
        count(&db, "SELECT count(*) FROM turns").await,
        RECENT * TURNS
    );
    assert_eq!(count(&db, "SELECT count(*) FROM incidents").await, RECENT);
    // Each expired session was erased by one batch: one record each.
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM (SELECT session_id FROM audit_events \
             WHERE method = 'Retention/DeleteSession' GROUP BY session_id \
             HAVING count(*) = 1) once"
        )
        .await,
        EXPIRED
    );
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM audit_events WHERE method = 'Retention/DeleteSession'"
        )
        .await,
        EXPIRED
    );
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM audit_events WHERE method = 'Retention/DeleteIncident'"
        )
        .await,
        EXPIRED
    );
    assert_eq!(count(&db, "SELECT count(*) FROM events").await, RECENT);
    let mut passes = 0;
    for r in replicas.into_iter().flatten() {
        let lines = r.stop_and_read_logs().await;
        passes += lines
            .iter()
            .filter(|l| l.contains("retention pass"))
            .count();
    }
    assert!(passes >= 2, "each survivor logs its passes: {passes}");
}
