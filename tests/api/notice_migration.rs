//! Migration V11: recovery notices written before it
//! carried their plan as a JSON line at the end of their content. A
//! database migrated to V10 gets such rows exactly as the old writer
//! stored them (NUL-escaped ones included), then a server starts on it,
//! applies V11, and ListTurns / WatchSession show each notice's human text
//! with its plan typed beside it; rows V11 must not touch are unchanged.

use inquest_core::{
    IncidentId, RecoveryPlan, Role, Seq, SessionId, SideEffect, TokenUsage, Turn, notice_plan,
    plan_recovery,
};
use inquest_proto::v1::{self as pb, watch_event::Event};
use inquest_server::convert;
use inquest_store::{Store, StoreConfig};
use inquest_tests::{
    connect, fresh_database,
    resume::{insert_session, insert_turn, turns},
    spawn_app_on,
    watching::{collect, watch},
};

/// The notice text the old writer stored: the human text, then one line
/// `{"recovery_plan": {...}}` (the plan's serde form).
fn old_notice_text(human: &str, plan: &RecoveryPlan) -> String {
    let line = serde_json::to_string(&serde_json::json!({ "recovery_plan": plan })).unwrap();
    assert!(line.starts_with("{\"recovery_plan\":"), "{line}");
    format!("{human}\n{line}")
}

/// The text encoding of `inquest-store/src/text.rs`, as an escaped row
/// holds its text fields.
fn escape(text: &str) -> String {
    text.replace('\u{E000}', "\u{E000}\u{E000}")
        .replace('\0', "\u{E000}0")
}

fn turn(session: SessionId, seq: i64, role: Role, content: &str) -> Turn {
    Turn {
        session_id: session,
        seq: Seq::from_stored(seq).unwrap(),
        role,
        content: content.into(),
        tool_calls_raw: serde_json::json!([]),
        recovery_plan_raw: None,
        tool_call_id: None,
        tool_name: None,
        is_error: false,
        usage: TokenUsage::default(),
        created_at: time::OffsetDateTime::now_utc(),
    }
}

/// Inserts a notice row as stored before V11 (its `escaped` flag as given).
async fn insert_old_notice(
    db: &tokio_postgres::Client,
    session: SessionId,
    seq: i64,
    content: &str,
    escaped: bool,
) {
    db.execute(
        "INSERT INTO turns (session_id, seq, role, content, escaped) \
         VALUES ($1, $2, 'notice', $3, $4)",
        &[session.as_uuid(), &seq, &content, &escaped],
    )
    .await
    .unwrap();
}

/// `(content, escaped, recovery_plan IS NULL)` of a stored row, raw.
async fn raw(db: &tokio_postgres::Client, session: SessionId, seq: i64) -> (String, bool, bool) {
    let row = db
        .query_one(
            "SELECT content, escaped, recovery_plan IS NULL FROM turns \
             WHERE session_id = $1 AND seq = $2",
            &[session.as_uuid(), &seq],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1), row.get(2))
}

#[tokio::test]
async fn v11_moves_old_notice_plans_into_the_column_and_leaves_the_rest() {
    let database = fresh_database().await;
    let (db_name, db_url) = (database.name.clone(), database.url.clone());
    let store = Store::connect(&StoreConfig::new(db_url.clone())).unwrap();
    assert_eq!(store.migrate_up_to(10).await.unwrap(), 10);
    let db = connect(&db_url).await;
    let has_column = db
        .query_one(
            "SELECT count(*) FROM information_schema.columns \
             WHERE table_name = 'turns' AND column_name = 'recovery_plan'",
            &[],
        )
        .await
        .unwrap()
        .get::<_, i64>(0);
    assert_eq!(has_column, 0, "V11 is not applied yet");

    // A session cut off after the model asked for c1: its real plan.
    let incident = IncidentId::new();
    db.execute(
        "INSERT INTO incidents (id, title) VALUES ($1, 'checkout slow')",
        &[incident.as_uuid()],
    )
    .await
    .unwrap();
    let session = SessionId::new();
    let user = turn(session, 1, Role::User, "why is checkout slow?");
    let mut assistant = turn(session, 2, Role::Assistant, "");
    assistant.tool_calls_raw =
        serde_json::json!([{"id": "c1", "name": "restart_service", "arguments": {}}]);
    let stored = [user, assistant];
    let plan = plan_recovery(session, &stored, &|_: &str| SideEffect::Mutating);
    assert_eq!(plan.repaired_call_ids, ["c1"]);
    assert!(plan.notice_text.contains('\n'), "a multi-line human text");

    // 3: a plain notice; one id holds a literal backslash-u0000 (six
    // characters, no NUL), which the NUL rewrite must not touch.
    let mut plain = plan.clone();
    plain.repaired_call_ids.push(r"lit\u0000eral".into());
    // 4: a NUL-escaped row: NUL and the escape character in the text and
    // in the plan, a backslash right before a NUL.
    let mut nul = plan.clone();
    nul.notice_text = format!("{}\nnul \0 and esc \u{E000}", plan.notice_text);
    nul.repaired_call_ids
        .extend(["n\0ul".into(), "e\u{E000}sc".into(), "\\\0".into()]);
    // 5: an unflagged row whose NUL is only in its plan line (serde wrote
    // it as the JSON escape): its human text holds the escape character.
    let mut plan_only = plan.clone();
    plan_only.repaired_call_ids.push("z\0".into());
    let plan_only_human = "Recovery: cut \u{E000} by the old cap";
    // 6: a plan line the old cap cut: not JSON.
    let whole = old_notice_text(&plan.notice_text, &plan);
    let cut = format!(
        "{}…[cut by inquest: 40 more bytes of notice over limits.max_notice_bytes = 16384]",
        &whole[..whole.len() - 40]
    );
    // 7: a refusal, no plan. 8: the right prefix, but no plan object.
    let refused = "Resume refused: history gap after seq 3. No burst ran and nothing stored \
                   was changed; the session is idle and a new message starts a new attempt.";
    let null_plan = "Recovery: odd\n{\"recovery_plan\":null}";

    let notices = 6;
    let mut rows: Vec<Turn> = stored.to_vec();
    rows.extend((0..notices).map(|i| turn(session, 3 + i, Role::Notice, "")));
    insert_session(&db, incident, session, "idle", &rows).await;
    for t in &stored {
        insert_turn(&db, t).await.unwrap();
    }
    insert_old_notice(
        &db,
        session,
        3,
        &old_notice_text(&plain.notice_text, &plain),
        false,
    )
    .await;
    let nul_text = old_notice_text(&nul.notice_text, &nul);
    assert!(nul_text.contains('\0') && nul_text.contains(r"\\\u0000"));
    insert_old_notice(&db, session, 4, &escape(&nul_text), true).await;
    let plan_only_text = old_notice_text(plan_only_human, &plan_only);
    assert!(!plan_only_text.contains('\0') && plan_only_text.contains(r"\u0000"));
    insert_old_notice(&db, session, 5, &plan_only_text, false).await;
    insert_old_notice(&db, session, 6, &cut, false).await;
    insert_old_notice(&db, session, 7, refused, false).await;
    insert_old_notice(&db, session, 8, null_plan, false).await;

    // The server applies V11 at startup.
    let app = spawn_app_on(db_name, db_url, |_| {}).await;

    // Stored: the plan moved (escaped where the row is), the line gone.
    assert_eq!(
        raw(&db, session, 3).await,
        (plain.notice_text.clone(), false, false)
    );
    assert_eq!(
        raw(&db, session, 4).await,
        (escape(&nul.notice_text), true, false)
    );
    assert_eq!(
        raw(&db, session, 5).await,
        (escape(plan_only_human), true, false),
        "a row whose plan held NUL becomes escaped"
    );
    // Untouched, byte for byte.
    assert_eq!(raw(&db, session, 6).await, (cut.clone(), false, true));
    assert_eq!(
        raw(&db, session, 7).await,
        (refused.to_owned(), false, true)
    );
    assert_eq!(
        raw(&db, session, 8).await,
        (null_plan.to_owned(), false, true)
    );

    // Read back by the store: the original text and the plan, decoded.
    let read = app.store.all_turns(session).await.unwrap();
    let expect: [(&str, Option<&RecoveryPlan>); 6] = [
        (&plain.notice_text, Some(&plain)),
        (&nul.notice_text, Some(&nul)),
        (plan_only_human, Some(&plan_only)),
        (&cut, None),
        (refused, None),
        (null_plan, None),
    ];
    for (t, (content, plan)) in read[2..].iter().zip(expect) {
        assert_eq!(t.content, content, "seq {}", t.seq);
        assert_eq!(t.recovery_plan(), plan.map(notice_plan), "seq {}", t.seq);
    }

    // Through the API: ListTurns and WatchSession show the same notices.
    let mut client = app.client().await;
    let listed = turns(&mut client, session).await;
    assert_eq!(listed.len(), 8);
    for (t, (content, plan)) in listed[2..].iter().zip(expect) {
        assert_eq!(t.role(), pb::TurnRole::Notice);
        assert_eq!(t.content, content, "seq {}", t.seq);
        assert_eq!(
            t.recovery_plan,
            plan.map(|p| convert::recovery_plan(&notice_plan(p))),
            "seq {}",
            t.seq
        );
    }
    assert_eq!(
        listed[4].recovery_plan.as_ref().unwrap().repaired_call_ids,
        ["c1", "z\0"]
    );
    let (events, ending) =
        collect(watch(&mut client, &session.to_string(), 0).await.unwrap()).await;
    ending.unwrap();
    let watched: Vec<pb::SessionTurn> = events
        .into_iter()
        .filter_map(|e| match e {
            Event::Turn(t) => Some(t),
            _ => None,
        })
        .collect();
    assert_eq!(watched, listed);
    app.stop().await.unwrap();
}
