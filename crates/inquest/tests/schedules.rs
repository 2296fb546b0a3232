//! `[[schedules]]` on three real `inquest serve` replicas sharing one
//! database: each tick fires once, also when one replica is killed (kill
//! -9) at a random moment around the tick, and again after the killed
//! replica comes back; the tick's session runs to its end on a survivor;
//! `inquest schedule list` shows the run.

mod support;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use support::Server;

const CONFIG: &str = "[admin]\nenabled = false\n\n\
[lease]\nttl = \"3000ms\"\nrenew_interval = \"1000ms\"\nreap_interval = \"500ms\"\n\n\
[[schedules]]\nname = \"every-minute\"\ncron = \"* * * * *\"\ntimezone = \"UTC\"\n\
title = \"Minute review\"\nprompt = \"Review the last minute.\"\n";

fn unix_now() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

/// The ticks recorded: (tick as unix seconds, session id, skipped).
async fn ticks(
    db: &inquest_tests::tokio_postgres::Client,
) -> Vec<(i64, Option<String>, Option<String>)> {
    db.query(
        "SELECT extract(epoch FROM tick)::bigint, session_id::text, skipped FROM schedule_ticks \
         WHERE schedule = 'every-minute' ORDER BY tick",
        &[],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| (r.get(0), r.get(1), r.get(2)))
    .collect()
}

#[tokio::test]
async fn a_tick_fires_once_across_three_replicas_when_one_is_killed_at_it() {
    let database = inquest_tests::fresh_database().await;
    let db = inquest_tests::connect(&database.url).await;
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    std::fs::write(&script, r#"[{"text": "The last minute was quiet."}]"#).unwrap();
    let config = dir.path().join("inquest.toml");
    std::fs::write(
        &config,
        format!(
            "{CONFIG}\n[[providers]]\nkind = \"script\"\nscript = \"{}\"\n",
            script.display()
        ),
    )
    .unwrap();
    let args = [
        "--database-url",
        &database.url,
        "--config",
        config.to_str().unwrap(),
    ];
    // The schedule counts from the first replica's start, so a minute
    // boundary passing while the three start would fire a tick before the
    // one this test kills at. Starting well clear of a boundary (a slow
    // CI machine took seconds to start them) leaves only that one.
    let to_boundary = 60 - unix_now().as_secs() % 60;
    if to_boundary < 20 {
        tokio::time::sleep(Duration::from_secs(to_boundary + 1)).await;
    }
    let mut replicas = Vec::new();
    for name in ["sched-a", "sched-b", "sched-c"] {
        replicas.push(Some(Server::start_with(name, &args, &[]).await));
    }
    // The schedule is registered at the first replica's start: ticks from
    // then on. The next minute boundary, at least 3 s away.
    let now = unix_now();
    let mut tick = (now.as_secs() / 60 + 1) * 60;
    if tick - now.as_secs() < 3 {
        tick += 60;
    }
    // A victim and a moment within 600 ms either side of the tick, from
    // the clock's nanoseconds (the timing varies from run to run).
    let jitter = u64::from(now.subsec_nanos() % 1200);
    let victim = usize::try_from(now.subsec_nanos() % 3).unwrap_or(0);
    let kill_at =
        Duration::from_secs(tick) - Duration::from_millis(600) + Duration::from_millis(jitter);
    tokio::time::sleep(kill_at.saturating_sub(unix_now())).await;
    let killed = replicas[victim].take().unwrap();
    let killed_name = killed.name.clone();
    killed.kill9().await;
    eprintln!(
        "killed {killed_name} {} ms from the tick",
        i128::from(jitter) - 600
    );
    // Fired within a second of the tick by whoever holds it.
    tokio::time::sleep((Duration::from_secs(tick + 4)).saturating_sub(unix_now())).await;
    let tick = i64::try_from(tick).unwrap();
    let recorded = ticks(&db).await;
    assert_eq!(recorded.len(), 1, "one tick recorded: {recorded:?}");
    let (at, session, skipped) = recorded[0].clone();
    assert_eq!((at, skipped), (tick, None), "{recorded:?}");
    let session = session.expect("the tick started a session");
    let incidents: i64 = db
        .query_one(
            "SELECT count(*) FROM incidents WHERE title = 'Minute review'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(incidents, 1);

    // The session runs to its end on a survivor (its burst may have begun
    // on the replica that died: the lease passes on).
    let mut status = String::new();
    for _ in 0..200 {
        status = db
            .query_one(
                "SELECT status::text FROM sessions WHERE id = $1::text::uuid",
                &[&session],
            )
            .await
            .unwrap()
            .get(0);
        if matches!(
            status.as_str(),
            "completed" | "idle" | "awaiting_confirmation"
        ) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        matches!(
            status.as_str(),
            "completed" | "idle" | "awaiting_confirmation"
        ),
        "the scheduled session settled: {status}"
    );

    // The killed replica comes back: the tick is not fired again.
    replicas[victim] = Some(Server::start_with(&killed_name, &args, &[]).await);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let again = ticks(&db).await;
    assert_eq!(again.iter().filter(|t| t.0 == tick).count(), 1, "{again:?}");

    // `inquest schedule list` shows it.
    let port = replicas.iter().flatten().next().map(|r| r.port).unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_inquest"))
        .args([
            "schedule",
            "list",
            "--server",
            &format!("http://127.0.0.1:{port}"),
        ])
        .env_remove("INQUEST_TOKEN")
        .env_remove("INQUEST_SERVER")
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("every-minute") && text.contains("\"* * * * *\" UTC"),
        "{text}"
    );
    let listed_session = text.contains(&session);
    let later_tick = ticks(&db).await.len() > 1;
    assert!(
        listed_session || later_tick,
        "the last run's session is listed: {text}"
    );
    for r in replicas.into_iter().flatten() {
        r.stop().await;
    }
}
