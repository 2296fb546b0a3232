//! Load slows Inquest down rather than break it: a cap
//! on the bursts one replica runs at once, a burst lane of connections
//! API reads cannot take, and health answers from a cached probe.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use inquest_proto::v1 as pb;
use inquest_testkit::fake::{FakeProvider, Flavor};
use inquest_tests::connect;
use tokio::task::JoinSet;
use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};

use crate::{
    agent_support::{Client, HANG_GUARD, provider_at, session, start},
    faults_support::{SlowLink, all_turns, assert_gapless, settled},
};

/// Every session of the app's database and its lease epoch (one claim per
/// burst; a takeover would add one).
async fn epochs(db_url: &str) -> Vec<(String, i64, String)> {
    connect(db_url)
        .await
        .query(
            "SELECT id::text, lease_epoch, coalesce(exit_reason, '') FROM sessions ORDER BY id",
            &[],
        )
        .await
        .expect("reading sessions")
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect()
}

/// How many sessions the store has `running` right now.
async fn running_now(db: &tokio_postgres::Client) -> i64 {
    db.query_one(
        "SELECT count(*) FROM sessions WHERE status = 'running'",
        &[],
    )
    .await
    .expect("counting running sessions")
    .get(0)
}

/// Ten sessions started at once on a replica with `max_running_bursts = 2`:
/// all complete, and the store never shows more than two running. Each
/// model answer is held back by a slow link, so without the cap all ten
/// would run together.
#[tokio::test]
async fn ten_sessions_through_two_slots_all_complete() {
    for round in 0..2u64 {
        let fake = FakeProvider::start(Flavor::OpenAi).await.expect("fake");
        // Uneven delays between rounds: the order slots free in varies.
        let link = SlowLink::in_front_of(&fake, Duration::from_millis(150 + 100 * round)).await;
        let base = link.base_url(&fake);
        let app = inquest_tests::spawn_app_with(|c| {
            c.providers = vec![provider_at(Flavor::OpenAi, "slow", base)];
            c.limits.max_running_bursts = 2;
        })
        .await;
        let db = connect(&app.db_url).await;
        let stop = Arc::new(AtomicBool::new(false));
        let watcher_stop = Arc::clone(&stop);
        let peak = tokio::spawn(async move {
            let mut peak = 0;
            while !watcher_stop.load(Ordering::SeqCst) {
                peak = peak.max(running_now(&db).await);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            peak
        });

        let mut starts = JoinSet::new();
        for i in 0..10 {
            let mut client = app.client().await;
            starts.spawn(async move { start(&mut client, &format!("question {i}")).await });
        }
        let mut ids = Vec::new();
        while let Some(id) = starts.join_next().await {
            ids.push(id.expect("start task"));
        }
        let mut client = app.client().await;
        for id in &ids {
            let s = settled(&mut client, id, HANG_GUARD).await;
            assert_eq!(
                s.status(),
                pb::SessionStatus::Completed,
                "round {round}: {s:?}"
            );
            assert_gapless(&all_turns(&mut client, id).await);
        }
        stop.store(true, Ordering::SeqCst);
        let peak = peak.await.expect("peak task");
        assert!(
            peak <= 2,
            "round {round}: {peak} sessions were running at once with max_running_bursts = 2"
        );
        assert!(peak >= 1, "round {round}: never saw a session running");
        for (id, epoch, reason) in epochs(&app.db_url).await {
            assert_eq!(
                epoch, 1,
                "round {round}: session {id} was claimed {epoch} times"
            );
            assert_eq!(reason, "completed", "round {round}: session {id}");
        }
        app.stop().await.expect("stop");
    }
}

/// A flood of reads (GetSession, ListTurns, ListSessions, health) on a
/// replica with two API connections, during bursts with a short lease:
/// the reads may wait or be shed, but no burst fails a write
/// (`store_failed` / `store_unavailable`) and no lease lapses (one claim
/// per session).
#[tokio::test]
async fn a_flood_of_reads_fails_no_burst() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.expect("fake");
    let link = SlowLink::in_front_of(&fake, Duration::from_millis(200)).await;
    let base = link.base_url(&fake);
    let app = inquest_tests::spawn_app_with(|c| {
        c.providers = vec![provider_at(Flavor::OpenAi, "slow", base)];
        c.store.max_connections = 2;
        c.store.burst_connections = 3;
        c.store.connect_timeout = Duration::from_millis(500);
        c.lease.ttl = Duration::from_millis(1500);
        c.lease.renew_interval = Some(Duration::from_millis(400));
        c.lease.safety_margin = Some(Duration::from_millis(300));
    })
    .await;
    let mut client = app.client().await;
    let mut ids = Vec::new();
    for i in 0..6 {
        ids.push(start(&mut client, &format!("question {i}")).await);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mut readers = JoinSet::new();
    for r in 0..64usize {
        let mut client: Client = app.client().await;
        let mut health = HealthClient::new(app.channel().await);
        let id = ids[r % ids.len()].clone();
        let stop = Arc::clone(&stop);
        readers.spawn(async move {
            let mut answered = 0u64;
            while !stop.load(Ordering::SeqCst) {
                let ok = match r % 4 {
                    0 => client
                        .get_session(pb::GetSessionRequest {
                            session_id: id.clone(),
                        })
                        .await
                        .is_ok(),
                    1 => client
                        .list_turns(pb::ListTurnsRequest {
                            session_id: id.clone(),
                            after_seq: 0,
                            before_seq: 0,
                            limit: 1000,
                        })
                        .await
                        .is_ok(),
                    2 => client
                        .list_sessions(pb::ListSessionsRequest::default())
                        .await
                        .is_ok(),
                    _ => health
                        .check(HealthCheckRequest {
                            service: String::new(),
                        })
                        .await
                        .is_ok(),
                };
                answered += u64::from(ok);
            }
            answered
        });
    }
    // The test's own reads would be shed too: it watches the store.
    let db = connect(&app.db_url).await;
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    loop {
        let active: i64 = db
            .query_one(
                "SELECT count(*) FROM sessions WHERE status IN ('pending', 'running')",
                &[],
            )
            .await
            .expect("counting active sessions")
            .get(0);
        if active == 0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{active} sessions never settled under the flood: {:?}",
            epochs(&app.db_url).await
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.store(true, Ordering::SeqCst);
    let mut answered = 0;
    while let Some(n) = readers.join_next().await {
        answered += n.expect("reader");
    }
    assert!(answered > 0, "no read was answered during the flood");
    for (id, epoch, reason) in epochs(&app.db_url).await {
        assert_eq!(
            epoch, 1,
            "session {id} was claimed {epoch} times: a lease lapsed"
        );
        assert_eq!(reason, "completed", "session {id}");
    }
    for id in &ids {
        assert_gapless(&all_turns(&mut client, id).await);
        assert_eq!(
            session(&mut client, id).await.status(),
            pb::SessionStatus::Completed
        );
    }
    app.stop().await.expect("stop");
}

/// Health checks answer from a probe taken at most once a second: four
/// hundred checks cost a handful of database round trips, not four
/// hundred.
#[tokio::test]
async fn health_checks_share_one_cached_probe() {
    let app = inquest_tests::spawn_app().await;
    let mut health = HealthClient::new(app.channel().await);
    let before = app.health_probes.load(Ordering::SeqCst);
    let started = tokio::time::Instant::now();
    let mut checks = JoinSet::new();
    for _ in 0..4 {
        let mut health = health.clone();
        checks.spawn(async move {
            for _ in 0..100 {
                let r = health
                    .check(HealthCheckRequest {
                        service: String::new(),
                    })
                    .await
                    .expect("health check")
                    .into_inner();
                assert_eq!(
                    r.status(),
                    tonic_health::pb::health_check_response::ServingStatus::Serving
                );
            }
        });
    }
    while let Some(done) = checks.join_next().await {
        done.expect("checks");
    }
    let probes = app.health_probes.load(Ordering::SeqCst) - before;
    // At most one probe per second went by, plus the one in flight.
    let allowed = started.elapsed().as_secs() + 2;
    assert!(
        probes <= allowed,
        "400 health checks made {probes} database probes in {:?}",
        started.elapsed()
    );
    let _ = health
        .check(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .expect("health check");
    app.stop().await.expect("stop");
}

/// A replica whose cross-replica feed queue holds one notification: a
/// burst on the other replica writes faster than it applies them, so the
/// queue overflows. Nothing is lost: the watcher there is lagged, resumes
/// from its cursor, and ends up with every turn exactly once, in order.
#[tokio::test]
async fn an_overflowing_feed_queue_lags_watchers_and_loses_nothing() {
    let logs = crate::faults_support::LogDump::install();
    let app = inquest_tests::spawn_app_with(|c| c.limits.feed_queue_capacity = 1).await;
    let other = crate::faults_support::Replica::beside(&app, "replica-b").await;
    let mut client = app.client().await;
    let id = inquest_tests::driver::new_session(&mut client).await;
    let driver = inquest_tests::driver::Driver::claim(&app, &id).await;
    let mut watcher = other.client().await;
    let mut stream = inquest_tests::watching::watch(&mut watcher, &id, 0)
        .await
        .expect("watch on the other replica");
    // The user turn arrives first: the watcher is registered.
    let first = inquest_tests::watching::next(&mut stream)
        .await
        .expect("first event");
    assert!(
        matches!(first, Some(pb::watch_event::Event::Turn(ref t)) if t.seq == 1),
        "{first:?}"
    );
    const TURNS: i64 = 300;
    const HELD: i64 = 50;
    // The writer runs on a runtime of its own (its connections live on
    // the app's burst runtime), so it goes on while this thread, where
    // replica b reads its LISTEN connection, is held below.
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let writer = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("the writer's runtime");
        runtime.block_on(async move {
            for i in 0..TURNS {
                driver.say(&format!("turn {i}")).await;
                if i + 1 == HELD {
                    let _ = held_tx.send(());
                }
            }
            driver.finish().await;
        });
    });
    // Hold this thread while the first turns commit: their notifications
    // then reach replica b together, and its one-slot queue overflows
    // whatever the machine's timing (a writer that b kept up with would
    // leave the overflow, and this test, to chance).
    held_rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the writer committed its first turns");
    let mut seqs = vec![1];
    let mut lagged = 0;
    loop {
        match inquest_tests::watching::next(&mut stream).await {
            Ok(Some(pb::watch_event::Event::Turn(t))) => seqs.push(t.seq),
            Ok(Some(pb::watch_event::Event::Lagged(_))) => {
                lagged += 1;
                let after = *seqs.last().expect("at least the user turn");
                stream = inquest_tests::watching::watch(&mut watcher, &id, after)
                    .await
                    .expect("re-watch from the cursor");
            }
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(status) => panic!("watch failed: {status:?}"),
        }
    }
    writer.join().expect("writer");
    let want: Vec<i64> = (1..=TURNS + 1).collect();
    assert_eq!(seqs, want, "turns lost, repeated or out of order");
    assert!(
        logs.text().contains("cross-replica feed queue full"),
        "the queue never overflowed: the test did not exercise it"
    );
    assert!(lagged >= 1, "an overflow must lag the watcher");
    other.stop().await.expect("stop b");
    app.stop().await.expect("stop a");
}
