use std::collections::BTreeSet;

use inquest_core::{AfterSeq, IncidentText, Limits, NewTurn, TokenUsage, UserMessage};
use inquest_proto::v1 as pb;
use inquest_tests::{TestApp, spawn_app, spawn_app_with};

async fn session(app: &TestApp) -> inquest_core::SessionId {
    let limits = Limits::default();
    let inc = app
        .store
        .create_incident(
            &inquest_core::Tenant::default_tenant(),
            &IncidentText::parse("t".into(), String::new(), &limits).unwrap(),
        )
        .await
        .unwrap();
    app.store
        .start_session(
            &inquest_core::Tenant::default_tenant(),
            inquest_core::TenantQuota::UNLIMITED,
            inc.id,
            UserMessage::parse("go".into(), &limits).unwrap(),
            None,
        )
        .await
        .unwrap()
        .session
        .id
}

fn assistant(text: &str) -> NewTurn {
    NewTurn::Assistant {
        text: text.into(),
        tool_calls: Vec::new(),
        usage: TokenUsage::new(10, 3),
    }
}

#[tokio::test]
async fn concurrent_appends_get_gapless_unique_seqs() {
    let app = spawn_app().await;
    let id = session(&app).await;
    let mut tasks = Vec::new();
    for i in 0..8 {
        let store = app.store.clone();
        tasks.push(tokio::spawn(async move {
            store
                .append_turn(id, assistant(&format!("writer {i}")))
                .await
        }));
    }
    let mut seqs = BTreeSet::new();
    for t in tasks {
        let turn = t.await.unwrap().unwrap();
        assert!(seqs.insert(turn.seq.get()), "duplicate seq {}", turn.seq);
    }
    // The opening user turn holds seq 1; the 8 writers get 2..=9.
    assert_eq!(seqs, (2..=9).collect());
    let page = app
        .store
        .list_turns(id, AfterSeq::START, 100)
        .await
        .unwrap();
    let stored: Vec<u64> = page.turns.iter().map(|t| t.seq.get()).collect();
    assert_eq!(stored, (1..=9).collect::<Vec<_>>());
    let row = app.store.get_session(id).await.unwrap();
    assert_eq!(
        (row.turn_count, row.input_tokens, row.output_tokens),
        (9, 80, 24)
    );
    app.stop().await.unwrap();
}

#[tokio::test]
async fn a_cancelled_caller_does_not_cancel_its_turn_write() {
    let app = spawn_app().await;
    let id = session(&app).await;
    // Poll the append exactly once (a zero timeout polls its future before
    // checking the deadline), then drop it, as a cancelled request would.
    let dropped = tokio::time::timeout(
        std::time::Duration::ZERO,
        app.store.append_turn(id, assistant("still written")),
    )
    .await;
    assert!(
        dropped.is_err(),
        "the write cannot have finished without yielding"
    );
    // The write was detached from its caller: it lands anyway. Poll the
    // store for it (bounded, so a broken build fails instead of hanging).
    for _ in 0..1000 {
        let page = app.store.list_turns(id, AfterSeq::START, 10).await.unwrap();
        if let Some(t) = page.turns.get(1) {
            assert_eq!(t.content, "still written");
            app.stop().await.unwrap();
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("the dropped caller's turn was never written");
}

#[tokio::test]
async fn a_caller_dropped_at_any_point_of_its_write_still_gets_the_turn_written_once() {
    let app = spawn_app().await;
    let id = session(&app).await;
    // The write runs in its caller's task until the caller goes away, then
    // in a task of its own: drop it after 0, 1, 2, ... scheduler turns, so
    // the hand-off happens before the connection is taken, with the
    // statement in flight, and (for the late ones) never.
    const WRITES: usize = 40;
    let mut finished = 0;
    for k in 0..WRITES {
        let append = app
            .store
            .append_turn(id, assistant(&format!("dropped after {k}")));
        let give_up = async {
            for _ in 0..k {
                tokio::task::yield_now().await;
            }
        };
        tokio::select! {
            biased;
            written = append => {
                written.unwrap();
                finished += 1;
            }
            () = give_up => {}
        }
    }
    // Every write lands exactly once, with gapless seqs (the handed-off
    // ones may commit after later writes, so not in the order issued).
    // Poll, bounded, until all are there.
    for _ in 0..1000 {
        let page = app
            .store
            .list_turns(id, AfterSeq::START, 100)
            .await
            .unwrap();
        if page.turns.len() > WRITES {
            let seqs: Vec<u64> = page.turns.iter().map(|t| t.seq.get()).collect();
            assert_eq!(seqs, (1..=WRITES as u64 + 1).collect::<Vec<_>>());
            let mut contents: Vec<String> =
                page.turns[1..].iter().map(|t| t.content.clone()).collect();
            contents.sort();
            let mut expected: Vec<String> =
                (0..WRITES).map(|k| format!("dropped after {k}")).collect();
            expected.sort();
            assert_eq!(contents, expected);
            let row = app.store.get_session(id).await.unwrap();
            assert_eq!(row.turn_count as usize, WRITES + 1);
            // At least the first one was dropped before it could finish.
            assert!(finished < WRITES, "no caller was dropped mid-write");
            app.stop().await.unwrap();
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("a dropped caller's turn was never written");
}

#[tokio::test]
async fn list_turns_pages_by_after_seq() {
    let app = spawn_app().await;
    let id = session(&app).await;
    for i in 2..=25 {
        app.store
            .append_turn(id, assistant(&format!("turn {i}")))
            .await
            .unwrap();
    }
    let mut client = app.client().await;
    let mut after = 0;
    let mut pages = Vec::new();
    let mut seen = Vec::new();
    loop {
        let page = client
            .list_turns(pb::ListTurnsRequest {
                session_id: id.to_string(),
                after_seq: after,
                before_seq: 0,
                limit: 10,
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(page.head_seq, 25);
        pages.push(page.turns.len());
        seen.extend(page.turns.iter().map(|t| t.seq));
        if page.next_after_seq == 0 {
            break;
        }
        after = page.next_after_seq;
    }
    assert_eq!(pages, vec![10, 10, 5]);
    assert_eq!(seen, (1..=25).collect::<Vec<_>>());

    // Every cursor yields exactly the suffix after it.
    for after in 0..=25 {
        let page = client
            .list_turns(pb::ListTurnsRequest {
                session_id: id.to_string(),
                after_seq: after,
                before_seq: 0,
                limit: 1000,
            })
            .await
            .unwrap()
            .into_inner();
        let seqs: Vec<i64> = page.turns.iter().map(|t| t.seq).collect();
        assert_eq!(seqs, ((after + 1)..=25).collect::<Vec<_>>());
    }
    app.stop().await.unwrap();
}

#[tokio::test]
async fn list_turns_pages_backwards_from_the_head() {
    let app = spawn_app().await;
    let id = session(&app).await;
    for i in 2..=25 {
        app.store
            .append_turn(id, assistant(&format!("turn {i}")))
            .await
            .unwrap();
    }
    let mut client = app.client().await;
    let back = |before_seq: i64, limit: u32| pb::ListTurnsRequest {
        session_id: id.to_string(),
        after_seq: 0,
        before_seq,
        limit,
    };
    // A before_seq past the head opens at the newest turns; each page is
    // in seq order and the next one ends where this one began.
    let mut before = (1 << 53) - 1;
    let mut pages = Vec::new();
    let mut seen = Vec::new();
    loop {
        let page = client
            .list_turns(back(before, 10))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(page.head_seq, 25);
        assert_eq!(page.next_after_seq, 0);
        let seqs: Vec<i64> = page.turns.iter().map(|t| t.seq).collect();
        assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
        pages.push(seqs.clone());
        seen.splice(0..0, seqs);
        if page.next_before_seq == 0 {
            break;
        }
        before = page.next_before_seq;
    }
    assert_eq!(
        pages,
        vec![
            (16..=25).collect::<Vec<_>>(),
            (6..=15).collect(),
            (1..=5).collect()
        ]
    );
    assert_eq!(seen, (1..=25).collect::<Vec<_>>());

    // Every cursor yields exactly the prefix before it.
    for before in 1..=26 {
        let page = client
            .list_turns(back(before, 1000))
            .await
            .unwrap()
            .into_inner();
        let seqs: Vec<i64> = page.turns.iter().map(|t| t.seq).collect();
        assert_eq!(seqs, (1..before).collect::<Vec<_>>());
        assert_eq!(page.next_before_seq, 0);
    }

    // Both cursors, or a negative one: refused.
    for (after_seq, before_seq) in [(3, 10), (0, -1)] {
        let err = client
            .list_turns(pb::ListTurnsRequest {
                session_id: id.to_string(),
                after_seq,
                before_seq,
                limit: 10,
            })
            .await
            .unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err:?}");
    }
    app.stop().await.unwrap();
}

#[tokio::test]
async fn a_backward_page_cut_by_bytes_keeps_its_newest_turns() {
    let app = spawn_app_with(|c| c.limits.max_response_bytes = 128 * 1024).await;
    let id = session(&app).await;
    for i in 2..=12 {
        app.store
            .append_turn(id, assistant(&format!("{i} {}", "x".repeat(40_000))))
            .await
            .unwrap();
    }
    let mut client = app.client().await;
    let mut before = 13;
    let mut seen = Vec::new();
    let mut pages = 0;
    loop {
        let page = client
            .list_turns(pb::ListTurnsRequest {
                session_id: id.to_string(),
                after_seq: 0,
                before_seq: before,
                limit: 1000,
            })
            .await
            .unwrap()
            .into_inner();
        pages += 1;
        let seqs: Vec<i64> = page.turns.iter().map(|t| t.seq).collect();
        assert_eq!(
            seqs.last(),
            Some(&(before - 1)),
            "the newest turns are kept"
        );
        seen.splice(0..0, seqs);
        if page.next_before_seq == 0 {
            break;
        }
        before = page.next_before_seq;
    }
    assert!(pages > 2, "128 KiB cannot hold 11 turns of 40 KB");
    assert_eq!(seen, (1..=12).collect::<Vec<_>>());
    app.stop().await.unwrap();
}

#[tokio::test]
async fn tool_calls_and_results_round_trip_through_the_api() {
    let app = spawn_app().await;
    let id = session(&app).await;
    let call = inquest_core::ToolCall {
        id: "call-1".into(),
        name: "grep_logs".into(),
        arguments: inquest_core::ToolArguments::from_model("{\"pattern\": \"ENOSPC\""),
    };
    app.store
        .append_turn(
            id,
            NewTurn::Assistant {
                text: "Looking at the logs.".into(),
                tool_calls: vec![call],
                usage: TokenUsage::default(),
            },
        )
        .await
        .unwrap();
    app.store
        .append_turn(
            id,
            NewTurn::Tool {
                call_id: "call-1".into(),
                tool_name: "grep_logs".into(),
                content: "bad arguments".into(),
                is_error: true,
            },
        )
        .await
        .unwrap();
    let mut client = app.client().await;
    let page = client
        .list_turns(pb::ListTurnsRequest {
            session_id: id.to_string(),
            after_seq: 1,
            before_seq: 0,
            limit: 10,
        })
        .await
        .unwrap()
        .into_inner();
    let [a, t] = page.turns.as_slice() else {
        panic!("expected two turns, got {:?}", page.turns);
    };
    assert_eq!(a.role(), pb::TurnRole::Assistant);
    assert_eq!(a.tool_calls.len(), 1);
    // Invalid JSON arguments come back exactly as the model sent them.
    assert_eq!(a.tool_calls[0].arguments_json, "{\"pattern\": \"ENOSPC\"");
    assert_eq!(t.role(), pb::TurnRole::Tool);
    assert_eq!(
        (t.tool_call_id.as_str(), t.tool_name.as_str(), t.is_error),
        ("call-1", "grep_logs", true)
    );
    let s = app.store.get_session(id).await.unwrap();
    assert_eq!(s.tool_calls, 1);
    app.stop().await.unwrap();
}

// ---- Appends near the INSERT ceiling: the append's
// session-row update must be able to stay HOT, and `updated_at` as read
// must still move with every turn.

/// Every turn kind an append writes, spending tokens (unknown cost), so
/// every counter the statement bumps changes.
fn every_kind() -> Vec<NewTurn> {
    vec![
        NewTurn::Assistant {
            text: "looking".into(),
            tool_calls: vec![inquest_core::ToolCall {
                id: "c1".into(),
                name: "grep_logs".into(),
                arguments: inquest_core::ToolArguments::from_model("{}"),
            }],
            usage: TokenUsage::new(120, 7),
        },
        NewTurn::Tool {
            call_id: "c1".into(),
            tool_name: "grep_logs".into(),
            content: "ENOSPC".into(),
            is_error: false,
        },
        NewTurn::notice("a notice"),
        NewTurn::User(UserMessage::parse("and now?".into(), &Limits::default()).unwrap()),
        assistant("done"),
    ]
}

/// The columns of `sessions` some index covers: keys, expressions and
/// partial-index predicates, from the catalog, so an index added later is
/// checked too. An update that changes none of them can be HOT.
async fn indexed_session_columns(db: &tokio_postgres::Client) -> Vec<String> {
    let rows = db
        .query(
            "SELECT DISTINCT a.attname::text FROM pg_index i \
             JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum > 0 \
                 AND NOT a.attisdropped \
             WHERE i.indrelid = 'sessions'::regclass AND (a.attnum = ANY (i.indkey) \
                 OR coalesce(pg_get_expr(i.indexprs, i.indrelid), '') \
                     ~ ('\\m' || a.attname || '\\M') \
                 OR coalesce(pg_get_expr(i.indpred, i.indrelid), '') \
                     ~ ('\\m' || a.attname || '\\M')) \
             ORDER BY 1",
            &[],
        )
        .await
        .unwrap();
    rows.iter().map(|r| r.get(0)).collect()
}

/// An append changes no indexed column of its session row, for every turn
/// kind: the precondition of a HOT update. With `updated_at = now()` in the
/// append statement (a key of `sessions_pending`) this fails.
#[tokio::test]
async fn an_append_changes_no_indexed_session_column() {
    let app = spawn_app().await;
    let id = session(&app).await;
    let db = inquest_tests::connect(&app.db_url).await;
    let columns = indexed_session_columns(&db).await;
    // The catalog query sees what it must: the listing keys and the
    // pending queue's key and predicate.
    for expected in ["id", "status", "tenant", "updated_at", "lease_expires_at"] {
        assert!(
            columns.iter().any(|c| c == expected),
            "{expected} missing from {columns:?}"
        );
    }
    let snapshot = format!(
        "SELECT row({})::text, xmin::text FROM sessions WHERE id = $1",
        columns.join(", ")
    );
    let uuid = *id.as_uuid();
    for turn in every_kind() {
        let role = turn.role();
        let (before, before_xmin): (String, String) = {
            let r = db.query_one(&snapshot, &[&uuid]).await.unwrap();
            (r.get(0), r.get(1))
        };
        app.store.append_turn(id, turn).await.unwrap();
        let r = db.query_one(&snapshot, &[&uuid]).await.unwrap();
        let (after, after_xmin): (String, String) = (r.get(0), r.get(1));
        // The row was rewritten (the counters moved) ...
        assert_ne!(before_xmin, after_xmin, "{role:?}: the row was not updated");
        // ... and no indexed value with it.
        assert_eq!(before, after, "{role:?} changed an indexed column");
    }
    let row = app.store.get_session(id).await.unwrap();
    assert_eq!(
        (row.turn_count, row.tool_calls, row.input_tokens),
        (6, 1, 130)
    );
    app.stop().await.unwrap();
}

/// PostgreSQL's own count agrees: every append's update of the session row
/// was HOT. The counts are read once the appending store's connections
/// closed (a backend flushes its statistics when it exits), polled for a
/// bounded time so a broken build fails instead of hanging.
#[tokio::test]
async fn appends_update_the_session_row_hot() {
    let app = spawn_app().await;
    let id = session(&app).await;
    let db = inquest_tests::connect(&app.db_url).await;
    let counts = "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables \
                  WHERE relid = 'sessions'::regclass";
    let read = async |db: &tokio_postgres::Client| -> (i64, i64) {
        let r = db.query_one(counts, &[]).await.unwrap();
        (r.get(0), r.get(1))
    };
    let (upd_before, hot_before) = read(&db).await;
    const APPENDS: i64 = 40;
    {
        let store =
            inquest_store::Store::connect(&inquest_store::StoreConfig::new(&app.db_url)).unwrap();
        for i in 0..APPENDS {
            let turn = match i % 5 {
                0 => NewTurn::notice("n"),
                _ => assistant(&format!("turn {i}")),
            };
            store.append_turn(id, turn).await.unwrap();
        }
    }
    let mut seen = (upd_before, hot_before);
    for _ in 0..600 {
        seen = read(&db).await;
        if seen.0 - upd_before >= APPENDS {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let (upd, hot) = (seen.0 - upd_before, seen.1 - hot_before);
    assert!(
        upd >= APPENDS,
        "the appends' updates never showed in pg_stat_user_tables ({upd} of {APPENDS})"
    );
    assert!(
        hot >= APPENDS,
        "{hot} of {upd} session-row updates were HOT; the {APPENDS} appends' must all be"
    );
    app.stop().await.unwrap();
}

/// `updated_at` as read (GetSession, ListSessions, the store) is the head
/// turn's commit instant after an append, and a later row change (a
/// cancel) moves it on: it is never older than the newest turn.
#[tokio::test]
async fn updated_at_follows_the_newest_turn() {
    let app = spawn_app().await;
    let id = session(&app).await;
    let started = app.store.get_session(id).await.unwrap().updated_at;
    let turn = app.store.append_turn(id, assistant("x")).await.unwrap();
    assert!(turn.created_at >= started);
    let row = app.store.get_session(id).await.unwrap();
    assert_eq!(row.updated_at, turn.created_at);

    let mut client = app.client().await;
    let got = client
        .get_session(pb::GetSessionRequest {
            session_id: id.to_string(),
        })
        .await
        .unwrap()
        .into_inner();
    let stamp = got.updated_at.expect("updated_at");
    let wire = time::OffsetDateTime::from_unix_timestamp_nanos(
        i128::from(stamp.seconds) * 1_000_000_000 + i128::from(stamp.nanos),
    )
    .unwrap();
    assert_eq!(wire, turn.created_at);
    let listed = app
        .store
        .list_sessions(
            &inquest_core::Tenant::default_tenant(),
            None,
            &[],
            None,
            10,
            false,
        )
        .await
        .unwrap();
    let listed = listed.sessions.iter().find(|s| s.id == id).unwrap();
    assert_eq!(listed.updated_at, turn.created_at);

    client
        .cancel_session(pb::CancelSessionRequest {
            session_id: id.to_string(),
        })
        .await
        .unwrap();
    let cancelled = app.store.get_session(id).await.unwrap();
    assert!(cancelled.updated_at >= turn.created_at);
    app.stop().await.unwrap();
}

/// Migration V18 moved the session row's checks into domains and replaced
/// the turns -> sessions foreign key by a rule that sessions are never
/// deleted (both cheaper for every append). What the old constraints
/// refused is still refused, with the same error class, and an append's
/// turn still cannot outlive its session.
#[tokio::test]
async fn the_schema_refuses_what_the_append_constraints_refused() {
    let app = spawn_app().await;
    let id = session(&app).await;
    app.store.append_turn(id, assistant("a")).await.unwrap();
    let db = inquest_tests::connect(&app.db_url).await;
    let uuid = *id.as_uuid();
    let code = async |sql: &str| -> Option<tokio_postgres::error::SqlState> {
        match db.execute(sql, &[&uuid]).await {
            Ok(n) => panic!("{sql}: accepted ({n} rows)"),
            Err(e) => e.code().cloned(),
        }
    };
    use tokio_postgres::error::SqlState;
    for sql in [
        "UPDATE sessions SET status = 'bogus' WHERE id = $1",
        "UPDATE sessions SET head_seq = -1 WHERE id = $1",
        "UPDATE sessions SET head_seq = head_seq - 100 WHERE id = $1",
    ] {
        assert_eq!(code(sql).await, Some(SqlState::CHECK_VIOLATION), "{sql}");
    }
    assert_eq!(
        code("DELETE FROM sessions WHERE id = $1").await,
        Some(SqlState::RAISE_EXCEPTION)
    );
    // Every legal status is still accepted, and read back as text.
    for status in [
        "pending",
        "running",
        "idle",
        "completed",
        "failed",
        "cancelled",
        "awaiting_confirmation",
    ] {
        let back: String = db
            .query_one(
                "UPDATE sessions SET status = $2::text WHERE id = $1 RETURNING status",
                &[&uuid, &status],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(back, status);
    }
    let turns: i64 = db
        .query_one("SELECT count(*) FROM turns WHERE session_id = $1", &[&uuid])
        .await
        .unwrap()
        .get(0);
    assert_eq!(turns, 2, "the session and its turns are still there");
    app.stop().await.unwrap();
}
