//! Group commit of turn appends (`inquest-store` `group.rs`), against a
//! real database: appends of many sessions written in one statement keep
//! every promise a single append makes, and one turn's failure in a group
//! does not decide another's.
//!
//! A group is forced, not hoped for: the store runs ONE append statement
//! at a time, an append to a session whose row another connection holds
//! locked takes that slot and waits, and the appends queued meanwhile go
//! out together once the lock is released. Turns written by one statement
//! share their `xmin` (one transaction), which is how the tests see a
//! group happened.

use std::{collections::BTreeMap, time::Duration};

use inquest_core::{
    AfterSeq, IncidentText, Limits, NewTurn, SessionId, TokenUsage, ToolArguments, ToolCall,
    UserMessage,
};
use inquest_store::{Lease, ReplicaId, Store, StoreConfig, StoreError, WriteId};
use inquest_tests::spawn_app;

fn grouping_store(url: &str, turn_write_timeout: Duration) -> Store {
    let mut config = StoreConfig::new(url);
    config.max_connections = 8;
    config.append_statements = 1;
    config.turn_write_timeout = turn_write_timeout;
    config.replica_id = ReplicaId::parse("replica-g").unwrap();
    Store::connect(&config).unwrap()
}

async fn pending_session(store: &Store) -> SessionId {
    let limits = Limits::default();
    let incident = store
        .create_incident(
            &inquest_core::Tenant::default_tenant(),
            &IncidentText::parse("group test".into(), String::new(), &limits).unwrap(),
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

/// A pending session claimed by `store`: its burst's lease.
async fn claimed_session(store: &Store) -> Lease {
    let session = pending_session(store).await;
    store
        .claim_pending(session)
        .await
        .unwrap()
        .expect("pending")
}

/// The turns a session's writer appends, in order: every kind, tokens on
/// the assistant turns, U+0000 in some texts.
fn script(writer: usize, turns: usize) -> Vec<NewTurn> {
    (0..turns)
        .map(|i| match i % 4 {
            0 => NewTurn::Assistant {
                text: format!("w{writer} t{i} looking"),
                tool_calls: vec![ToolCall {
                    id: format!("c{writer}-{i}"),
                    name: "grep_logs".into(),
                    arguments: ToolArguments::from_model("{\"q\":\"a\\u0000b\"}"),
                }],
                usage: TokenUsage::new(100 + i as u64, 7),
            },
            1 => NewTurn::Tool {
                call_id: format!("c{writer}-{}", i - 1),
                tool_name: "grep_logs".into(),
                content: format!("w{writer} t{i} \u{0}ENOSPC"),
                is_error: i % 8 == 1,
            },
            2 => NewTurn::notice(format!("w{writer} t{i} notice")),
            _ => NewTurn::Assistant {
                text: format!("w{writer} t{i} done"),
                tool_calls: Vec::new(),
                usage: TokenUsage::new(5, 3),
            },
        })
        .collect()
}

/// Opens a transaction on its own connection that holds `session`'s row
/// locked until the returned client commits.
async fn lock_row(url: &str, session: SessionId) -> tokio_postgres::Client {
    let db = inquest_tests::connect(url).await;
    db.batch_execute("BEGIN").await.unwrap();
    db.execute(
        "SELECT 1 FROM sessions WHERE id = $1 FOR UPDATE",
        &[session.as_uuid()],
    )
    .await
    .unwrap();
    db
}

/// Waits (bounded) until some backend waits for a row lock: the append
/// holding the store's one statement slot is blocked.
async fn until_blocked(url: &str) {
    let db = inquest_tests::connect(url).await;
    for _ in 0..500 {
        let row = db
            .query_one(
                "SELECT count(*) FROM pg_stat_activity \
                 WHERE datname = current_database() AND wait_event_type = 'Lock'",
                &[],
            )
            .await
            .unwrap();
        if row.get::<_, i64>(0) > 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the append to the locked session never blocked");
}

async fn xmin_of(db: &tokio_postgres::Client, session: SessionId, seq: u64) -> String {
    db.query_one(
        "SELECT xmin::text FROM turns WHERE session_id = $1 AND seq = $2",
        &[session.as_uuid(), &(seq as i64)],
    )
    .await
    .unwrap()
    .get(0)
}

#[tokio::test]
async fn grouped_appends_of_many_sessions_keep_every_promise() {
    let app = spawn_app().await;
    let store = grouping_store(&app.db_url, Duration::from_secs(30));
    const WRITERS: usize = 12;
    const TURNS: usize = 24;
    let mut sessions = Vec::new();
    for _ in 0..WRITERS {
        let lease = claimed_session(&store).await;
        sessions.push((lease.session(), lease));
    }
    // Many writers, one statement at a time: appends queue and group.
    let mut tasks = Vec::new();
    for (writer, (_, lease)) in sessions.iter().enumerate() {
        let store = store.clone();
        let lease: Lease = lease.clone();
        tasks.push(tokio::spawn(async move {
            let mut appended = Vec::new();
            for turn in script(writer, TURNS) {
                appended.push(
                    store
                        .append_turn_leased(&lease, WriteId::new(), turn)
                        .await
                        .unwrap()
                        .turn,
                );
            }
            appended
        }));
    }
    let mut answers = Vec::new();
    for (writer, task) in tasks.into_iter().enumerate() {
        let appended = task.await.unwrap();
        // The opening user turn is seq 1; this writer's turns 2.. in order.
        assert_eq!(
            appended.iter().map(|t| t.seq.get()).collect::<Vec<_>>(),
            (2..2 + TURNS as u64).collect::<Vec<_>>(),
            "writer {writer}"
        );
        answers.push(appended);
    }
    let db = inquest_tests::connect(&app.db_url).await;
    for (writer, (session, _)) in sessions.iter().enumerate() {
        let page = store
            .list_turns(*session, AfterSeq::START, 1000)
            .await
            .unwrap();
        assert_eq!(page.turns.len(), TURNS + 1, "writer {writer}");
        for ((stored, sent), answered) in page.turns[1..]
            .iter()
            .zip(script(writer, TURNS))
            .zip(&answers[writer])
        {
            // What the append answered is what was stored, to the microsecond.
            assert_eq!(stored.created_at, answered.created_at, "writer {writer}");
            assert_eq!(stored.role, sent.role(), "writer {writer}");
            assert_eq!(stored.content, sent.content(), "writer {writer}");
            assert_eq!(
                stored.tool_calls_raw,
                sent.tool_calls_stored(),
                "writer {writer}"
            );
            assert_eq!(
                stored.tool_call_id.as_deref(),
                sent.tool_result_of().map(|(id, _, _)| id)
            );
            assert_eq!(stored.usage, sent.usage(), "writer {writer}");
        }
        let want =
            script(writer, TURNS)
                .iter()
                .fold((0u64, 0u64, 0u64), |(calls, input, output), t| {
                    let u = t.usage();
                    (
                        calls + t.tool_call_count() as u64,
                        input + u.input_tokens,
                        output + u.output_tokens,
                    )
                });
        let row = store.get_session(*session).await.unwrap();
        assert_eq!(
            (
                row.turn_count,
                row.tool_calls,
                row.input_tokens,
                row.output_tokens
            ),
            (TURNS as u64 + 1, want.0, want.1, want.2),
            "writer {writer}: the counters are exact"
        );
        let tokens: i64 = db
            .query_one(
                "SELECT coalesce(sum(tokens), 0)::bigint FROM token_usage WHERE session_id = $1",
                &[session.as_uuid()],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(
            tokens as u64,
            want.1 + want.2,
            "writer {writer}: token_usage"
        );
    }
    // And they were grouped: some transaction wrote turns of several
    // sessions.
    let widest: i64 = db
        .query_one(
            "SELECT max(n) FROM (SELECT count(DISTINCT session_id) AS n FROM turns \
             WHERE seq > 1 GROUP BY xmin::text) g",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(
        widest > 1,
        "no statement wrote more than one session's turn: nothing was grouped"
    );
    app.stop().await.unwrap();
}

#[tokio::test]
async fn one_turn_fenced_off_or_missing_does_not_decide_the_others() {
    let app = spawn_app().await;
    let store = grouping_store(&app.db_url, Duration::from_secs(30));
    let blocker = pending_session(&store).await;
    let mut leases = Vec::new();
    for _ in 0..3 {
        let session = pending_session(&store).await;
        leases.push(
            store
                .claim_pending(session)
                .await
                .unwrap()
                .expect("pending"),
        );
    }
    let (ok_a, stale, ok_b) = (leases[0].clone(), leases[1].clone(), leases[2].clone());
    // Another replica took `stale`'s session over.
    let db = inquest_tests::connect(&app.db_url).await;
    db.execute(
        "UPDATE sessions SET lease_epoch = lease_epoch + 1 WHERE id = $1",
        &[stale.session().as_uuid()],
    )
    .await
    .unwrap();
    let missing = SessionId::from_uuid(uuid::Uuid::now_v7());

    let lock = lock_row(&app.db_url, blocker).await;
    let first = tokio::spawn({
        let store = store.clone();
        async move { store.append_turn(blocker, NewTurn::notice("first")).await }
    });
    until_blocked(&app.db_url).await;
    let say = |text: &str| NewTurn::Assistant {
        text: text.into(),
        tool_calls: Vec::new(),
        usage: TokenUsage::new(3, 2),
    };
    let mut queued = Vec::new();
    for (lease, text) in [(&ok_a, "a"), (&stale, "stale"), (&ok_b, "b")] {
        let store = store.clone();
        let lease = lease.clone();
        let turn = say(text);
        queued.push(tokio::spawn(async move {
            store.append_turn_leased(&lease, WriteId::new(), turn).await
        }));
    }
    let lost = tokio::spawn({
        let store = store.clone();
        async move { store.append_turn(missing, NewTurn::notice("nowhere")).await }
    });
    // Queued behind the blocked statement; then let it through.
    tokio::time::sleep(Duration::from_millis(300)).await;
    lock.batch_execute("COMMIT").await.unwrap();
    first.await.unwrap().unwrap();

    let a = queued.remove(0).await.unwrap().unwrap();
    let refused = queued.remove(0).await.unwrap().unwrap_err();
    let b = queued.remove(0).await.unwrap().unwrap();
    assert!(
        matches!(refused, StoreError::LeaseLost { held, current, .. }
            if held == stale.epoch() && current == stale.epoch() + 1),
        "{refused:?}"
    );
    let not_found = lost.await.unwrap().unwrap_err();
    assert!(
        matches!(not_found, StoreError::NotFound { .. }),
        "{not_found:?}"
    );
    assert_eq!((a.turn.seq.get(), b.turn.seq.get()), (2, 2));
    assert_eq!(
        xmin_of(&db, ok_a.session(), 2).await,
        xmin_of(&db, ok_b.session(), 2).await,
        "a and b were written by one statement"
    );
    // The stale holder wrote nothing; the counters of the others moved once.
    let stale_page = store
        .list_turns(stale.session(), AfterSeq::START, 10)
        .await
        .unwrap();
    assert_eq!(stale_page.turns.len(), 1);
    for lease in [&ok_a, &ok_b] {
        let row = store.get_session(lease.session()).await.unwrap();
        assert_eq!((row.turn_count, row.input_tokens), (2, 3));
    }
    app.stop().await.unwrap();
}

#[tokio::test]
async fn a_repeated_write_in_a_group_returns_its_first_commit_and_the_rest_land() {
    let app = spawn_app().await;
    let store = grouping_store(&app.db_url, Duration::from_secs(30));
    let blocker = pending_session(&store).await;
    let mut leases = Vec::new();
    for _ in 0..2 {
        let session = pending_session(&store).await;
        leases.push(
            store
                .claim_pending(session)
                .await
                .unwrap()
                .expect("pending"),
        );
    }
    let (again, fresh) = (leases[0].clone(), leases[1].clone());
    let write = WriteId::new();
    let first = store
        .append_turn_leased(&again, write, NewTurn::notice("once"))
        .await
        .unwrap();

    let lock = lock_row(&app.db_url, blocker).await;
    let blocked = tokio::spawn({
        let store = store.clone();
        async move { store.append_turn(blocker, NewTurn::notice("first")).await }
    });
    until_blocked(&app.db_url).await;
    // The same write sent again (its answer was lost), grouped with a
    // new turn of another session: the statement is refused as a whole
    // (the write id is unique), and each turn then goes alone.
    let repeated = tokio::spawn({
        let store = store.clone();
        let again = again.clone();
        async move {
            store
                .append_turn_leased(&again, write, NewTurn::notice("once"))
                .await
        }
    });
    let other = tokio::spawn({
        let store = store.clone();
        let fresh = fresh.clone();
        async move {
            store
                .append_turn_leased(&fresh, WriteId::new(), NewTurn::notice("new"))
                .await
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    lock.batch_execute("COMMIT").await.unwrap();
    blocked.await.unwrap().unwrap();
    let repeated = repeated.await.unwrap().unwrap();
    let other = other.await.unwrap().unwrap();
    assert_eq!(
        repeated.turn.seq, first.turn.seq,
        "the first commit is the outcome"
    );
    assert_eq!(other.turn.seq.get(), 2);
    let contents: BTreeMap<u64, String> = store
        .list_turns(again.session(), AfterSeq::START, 10)
        .await
        .unwrap()
        .turns
        .into_iter()
        .map(|t| (t.seq.get(), t.content))
        .collect();
    assert_eq!(contents.len(), 2, "written once: {contents:?}");
    assert_eq!(
        store.get_session(again.session()).await.unwrap().turn_count,
        2
    );
    app.stop().await.unwrap();
}

#[tokio::test]
async fn a_group_announces_each_watched_turn_and_only_those() {
    use inquest_store::notify::Notification;
    let app = spawn_app().await;
    let store = grouping_store(&app.db_url, Duration::from_secs(30));
    let other = crate::leases::store_as(&app.db_url, "replica-other");
    let mut listening = crate::leases::Listening::start(&app.db_url).await;

    let blocker = pending_session(&store).await;
    let mut leases = Vec::new();
    for _ in 0..3 {
        let session = pending_session(&store).await;
        leases.push(
            store
                .claim_pending(session)
                .await
                .unwrap()
                .expect("pending"),
        );
    }
    let (watched, unwatched, large) = (leases[0].clone(), leases[1].clone(), leases[2].clone());
    other.register_watcher(watched.session()).await.unwrap();
    other.register_watcher(large.session()).await.unwrap();

    let lock = lock_row(&app.db_url, blocker).await;
    let blocked = tokio::spawn({
        let store = store.clone();
        async move { store.append_turn(blocker, NewTurn::notice("first")).await }
    });
    until_blocked(&app.db_url).await;
    let mut queued = Vec::new();
    for (lease, text) in [
        (&watched, "seen \u{0} elsewhere".to_owned()),
        (&unwatched, "seen nowhere".to_owned()),
        (&large, "x".repeat(10_000)),
    ] {
        let store = store.clone();
        let lease = lease.clone();
        queued.push(tokio::spawn(async move {
            store
                .append_turn_leased(&lease, WriteId::new(), NewTurn::notice(text))
                .await
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    lock.batch_execute("COMMIT").await.unwrap();
    blocked.await.unwrap().unwrap();
    let mut appended = Vec::new();
    for task in queued {
        appended.push(task.await.unwrap().unwrap());
    }
    assert_eq!(
        appended
            .iter()
            .map(|a| a.watched_elsewhere)
            .collect::<Vec<_>>(),
        [true, false, true]
    );
    let db = inquest_tests::connect(&app.db_url).await;
    assert_eq!(
        xmin_of(&db, watched.session(), 2).await,
        xmin_of(&db, unwatched.session(), 2).await,
        "one statement wrote the group"
    );
    crate::leases::marker(&app.db_url, "group-done").await;
    let seen = crate::leases::until_marker(&mut listening.rx, "group-done").await;
    let turns: Vec<_> = seen
        .into_iter()
        .filter(|n| matches!(n, Notification::Turn { .. }))
        .collect();
    assert_eq!(turns.len(), 2, "{turns:?}");
    for n in turns {
        let Notification::Turn {
            origin,
            session,
            seq,
            turn,
        } = n
        else {
            unreachable!()
        };
        assert_eq!(origin, "replica-g");
        assert_eq!(seq.get(), 2);
        if session == watched.session() {
            let turn = turn.expect("small enough to travel whole");
            assert_eq!(turn.content, "seen \u{0} elsewhere");
            assert_eq!(turn.created_at, appended[0].turn.created_at);
        } else {
            assert_eq!(session, large.session());
            assert!(turn.is_none(), "too large: announced by seq");
        }
    }
    listening.stop().await;
    app.stop().await.unwrap();
}

/// The single-turn statement (what a quiet lane writes) announces as the
/// group does: a watched turn whole when it fits, by seq when it does not,
/// an unwatched one not at all.
#[tokio::test]
async fn a_single_append_announces_a_watched_turn_whole_or_by_seq() {
    use inquest_store::notify::Notification;
    let app = spawn_app().await;
    let store = grouping_store(&app.db_url, Duration::from_secs(30));
    let other = crate::leases::store_as(&app.db_url, "replica-other");
    let mut listening = crate::leases::Listening::start(&app.db_url).await;

    let watched = pending_session(&store).await;
    let unwatched = pending_session(&store).await;
    other.register_watcher(watched).await.unwrap();
    // One at a time: each finds the lane idle and is written alone.
    let small = store
        .append_turn(watched, NewTurn::notice("seen \u{0} elsewhere"))
        .await
        .unwrap();
    store
        .append_turn(unwatched, NewTurn::notice("seen nowhere"))
        .await
        .unwrap();
    store
        .append_turn(watched, NewTurn::notice("x".repeat(10_000)))
        .await
        .unwrap();
    crate::leases::marker(&app.db_url, "singles-done").await;
    let seen = crate::leases::until_marker(&mut listening.rx, "singles-done").await;
    let turns: Vec<_> = seen
        .into_iter()
        .filter_map(|n| match n {
            Notification::Turn {
                origin,
                session,
                seq,
                turn,
            } => Some((origin, session, seq.get(), turn)),
            _ => None,
        })
        .collect();
    assert_eq!(turns.len(), 2, "{turns:?}");
    let (origin, session, seq, turn) = &turns[0];
    assert_eq!((origin.as_str(), *session, *seq), ("replica-g", watched, 2));
    let turn = turn.as_ref().expect("small enough to travel whole");
    assert_eq!(turn.content, "seen \u{0} elsewhere");
    assert_eq!(turn.created_at, small.created_at);
    let (origin, session, seq, turn) = &turns[1];
    assert_eq!((origin.as_str(), *session, *seq), ("replica-g", watched, 3));
    assert!(turn.is_none(), "too large: announced by seq");
    listening.stop().await;
    app.stop().await.unwrap();
}

/// Appends of several sessions whose tasks are ready at the same moment
/// (as busy bursts on one agent thread are, woken together by the
/// statement that answered them) go out in ONE statement: the first finds
/// the slot free and nothing waiting, and yields once before writing
/// alone, so the others queue behind it and join it. Without that yield
/// the first went alone and the rest followed in a second statement. A
/// one-thread runtime makes "ready at the same moment" exact.
#[tokio::test(flavor = "current_thread")]
async fn appends_ready_at_the_same_moment_share_one_statement() {
    let app = spawn_app().await;
    let store = grouping_store(&app.db_url, Duration::from_secs(30));
    const SESSIONS: usize = 8;
    let db = inquest_tests::connect(&app.db_url).await;
    for round in 0..3 {
        let mut leases = Vec::new();
        for _ in 0..SESSIONS {
            leases.push(claimed_session(&store).await);
        }
        let mut tasks = Vec::new();
        for (writer, lease) in leases.iter().enumerate() {
            let store = store.clone();
            let lease: Lease = lease.clone();
            tasks.push(tokio::spawn(async move {
                store
                    .append_turn_leased(
                        &lease,
                        WriteId::new(),
                        NewTurn::Assistant {
                            text: format!("round {round} writer {writer}"),
                            tool_calls: Vec::new(),
                            usage: TokenUsage::new(3, 4),
                        },
                    )
                    .await
                    .unwrap()
                    .turn
                    .seq
                    .get()
            }));
        }
        for task in tasks {
            assert_eq!(task.await.unwrap(), 2, "round {round}");
        }
        let mut xmins = std::collections::BTreeSet::new();
        for lease in &leases {
            xmins.insert(xmin_of(&db, lease.session(), 2).await);
        }
        assert_eq!(xmins.len(), 1, "round {round}: statements {xmins:?}");
    }
    app.stop().await.unwrap();
}
