use std::collections::BTreeSet;

use inquest_core::{AfterSeq, IncidentText, Limits, NewTurn, TokenUsage, UserMessage};
use inquest_proto::v1 as pb;
use inquest_tests::{TestApp, spawn_app};

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
