//! Resume through the API: the fixture corpus stored in
//! PostgreSQL and read back through GetRecoveryPlan, a follow-up to a
//! session whose tool call was cut off, ContinueSession, and the provider
//! position reset per burst.

use std::collections::{BTreeMap, BTreeSet};

use inquest_core::{
    IncidentId, SessionId, SideEffect, Turn, is_follow_up, plan_resume,
    resume::INTERRUPTED_TOOL_RESULT,
};
use inquest_proto::v1 as pb;
use inquest_server::{convert, reason::Reason};
use inquest_testkit::fake::{FakeProvider, Flavor};
use inquest_tests::resume::*;
use serde_json::Value;

/// Fixtures the schema cannot hold: a tool turn without a call id breaks
/// the `(role = 'tool') = (tool_call_id IS NOT NULL)` check, two turns with
/// one seq break the primary key. The core tests cover them.
const NOT_STORABLE: [&str; 2] = [
    "13_orphan_result_without_call_id.json",
    "24_seq_not_increasing.json",
];

/// Every tool class any fixture names (they never disagree).
fn all_classes() -> BTreeMap<String, SideEffect> {
    let mut all = BTreeMap::new();
    for (_, f) in transcript_fixtures() {
        all.extend(f.tool_classes.clone());
    }
    all
}

/// The fixture's turns under fresh session ids (its own, and one per other
/// session it names), so fixtures share one database.
fn remapped(f: &inquest_testkit::fixture::TranscriptFixture) -> (SessionId, Vec<Turn>) {
    let original = f.session().expect("fixture session id");
    let own = SessionId::new();
    let mut others: BTreeMap<String, SessionId> = BTreeMap::new();
    let turns = f
        .turns()
        .expect("fixture turns")
        .into_iter()
        .map(|mut t| {
            t.session_id = if t.session_id == original {
                own
            } else {
                *others.entry(t.session_id.to_string()).or_default()
            };
            t
        })
        .collect();
    (own, turns)
}

#[tokio::test]
async fn fixture_corpus_through_get_recovery_plan_agrees_with_the_core() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    let classes = all_classes();
    let app = inquest_tests::spawn_app_with(|c| {
        c.providers = vec![fake_provider(&fake, "fake")];
        tool_classes(c, &classes);
    })
    .await;
    let mut client = app.client().await;
    let db = inquest_tests::connect(&app.db_url).await;
    let incident: IncidentId = incident(&mut client).await;
    let mut not_stored = BTreeSet::new();
    let mut checked_against_expected = 0;
    for (name, f) in transcript_fixtures() {
        let (session, turns) = remapped(&f);
        let sessions: BTreeSet<SessionId> = turns.iter().map(|t| t.session_id).collect();
        for s in sessions.iter().chain([&session]).collect::<BTreeSet<_>>() {
            let own: Vec<Turn> = turns
                .iter()
                .filter(|t| t.session_id == *s)
                .cloned()
                .collect();
            insert_session(&db, incident, *s, "idle", &own).await;
        }
        let mut stored = true;
        for t in &turns {
            if insert_turn(&db, t).await.is_err() {
                stored = false;
            }
        }
        if !stored {
            not_stored.insert(name);
            continue;
        }
        // What the store hands back: this session's turns, in seq order.
        let mut own: Vec<Turn> = turns
            .iter()
            .filter(|t| t.session_id == session)
            .cloned()
            .collect();
        own.sort_by_key(|t| t.seq);
        let core = plan_resume(session, &own, &classes);

        let before = get_session(&mut client, session).await;
        let served = recovery_plan(&mut client, session).await;
        assert_eq!(
            served,
            convert::recovery_plan(&core),
            "{name}: server vs core"
        );
        // A dry run: nothing changed.
        assert_eq!(get_session(&mut client, session).await, before, "{name}");
        assert_eq!(turns_of(&mut client, session).await, own.len(), "{name}");
        assert!(before.last_recovery_plan.is_none(), "{name}");

        // Where the stored transcript is the fixture's own (no foreign
        // rows, stored order = fixture order) and no follow-up is pending,
        // the plan is the fixture's expected one.
        let as_written = own.len() == turns.len();
        if let Some(expected) = &f.expected
            && as_written
            && !is_follow_up(session, &own)
        {
            let p = &expected.plan;
            assert_eq!(served.kind, p.kind.as_str(), "{name}");
            assert_eq!(core.repairs, p.repairs, "{name}");
            assert_eq!(served.repaired_call_ids, p.repaired_call_ids, "{name}");
            assert_eq!(served.can_auto_continue, p.can_auto_continue, "{name}");
            assert_eq!(
                served.requires_confirmation, p.requires_confirmation,
                "{name}"
            );
            checked_against_expected += 1;
        }
    }
    let expected_not_stored: BTreeSet<String> =
        NOT_STORABLE.iter().map(|s| (*s).to_owned()).collect();
    assert_eq!(not_stored, expected_not_stored);
    assert!(checked_against_expected >= 25, "{checked_against_expected}");
    assert_eq!(fake.request_count(), 0, "a dry run calls no model");
}

async fn turns_of(client: &mut Client, id: SessionId) -> usize {
    turns(client, id).await.len()
}

/// An idle session whose last burst was cut off after the model asked for
/// `tool` (call `c1`) and before the result was stored.
async fn cut_off_session(
    app: &inquest_tests::TestApp,
    client: &mut Client,
    tool: &str,
) -> SessionId {
    let db = inquest_tests::connect(&app.db_url).await;
    let incident = incident(client).await;
    let session = SessionId::new();
    let now = time::OffsetDateTime::now_utc();
    let mut user = Turn {
        session_id: session,
        seq: inquest_core::Seq::FIRST,
        role: inquest_core::Role::User,
        content: "why is checkout slow?".into(),
        tool_calls_raw: serde_json::json!([]),
        recovery_plan_raw: None,
        tool_call_id: None,
        tool_name: None,
        is_error: false,
        usage: inquest_core::TokenUsage::default(),
        created_at: now - time::Duration::seconds(60),
    };
    let mut assistant = user.clone();
    assistant.seq = inquest_core::Seq::from_stored(2).unwrap();
    assistant.role = inquest_core::Role::Assistant;
    assistant.content = String::new();
    assistant.tool_calls_raw =
        serde_json::json!([{"id": "c1", "name": tool, "arguments": {"target": "checkout"}}]);
    assistant.created_at = now - time::Duration::seconds(59);
    user.created_at = now - time::Duration::seconds(60);
    let turns = [user, assistant];
    insert_session(&db, incident, session, "idle", &turns).await;
    for t in &turns {
        insert_turn(&db, t).await.unwrap();
    }
    session
}

fn classes() -> BTreeMap<String, SideEffect> {
    BTreeMap::from([
        ("grep_logs".to_owned(), SideEffect::ReadOnly),
        ("restart_service".to_owned(), SideEffect::Mutating),
    ])
}

/// The OpenAI-shaped messages of a recorded request.
fn messages(body: &Value) -> Vec<Value> {
    body["messages"].as_array().cloned().unwrap_or_default()
}

/// Asserts the request carries the synthetic result for `c1`, right after
/// the call, and the follow-up last.
fn assert_synthetic_result(body: &Value, follow_up: &str) {
    let m = messages(body);
    let call = m
        .iter()
        .position(|x| x["role"] == "assistant" && x["tool_calls"][0]["id"] == "c1")
        .expect("the cut-off call is in the transcript");
    let result = &m[call + 1];
    assert_eq!(result["role"], "tool", "{m:#?}");
    assert_eq!(result["tool_call_id"], "c1");
    let content = result["content"].as_str().unwrap_or_default();
    assert!(content.contains(INTERRUPTED_TOOL_RESULT), "{content}");
    let last = m.last().unwrap();
    assert_eq!(last["role"], "user");
    assert!(last["content"].to_string().contains(follow_up), "{last}");
}

fn notices(turns: &[pb::SessionTurn]) -> Vec<&pb::SessionTurn> {
    turns
        .iter()
        .filter(|t| t.role() == pb::TurnRole::Notice)
        .collect()
}

#[tokio::test]
async fn follow_up_after_a_cut_off_read_only_call_notices_and_continues() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    let app = inquest_tests::spawn_app_with(|c| {
        c.providers = vec![fake_provider(&fake, "fake")];
        tool_classes(c, &classes());
    })
    .await;
    let mut client = app.client().await;
    let session = cut_off_session(&app, &mut client, "grep_logs").await;

    let seq = send(&mut client, session, "any news?").await.unwrap();
    assert_eq!(seq, 3);
    let s = settled(&mut client, session).await;
    assert_eq!(s.status(), pb::SessionStatus::Idle, "{s:?}");
    assert_eq!(s.exit_reason, "awaiting_user");

    let all = turns(&mut client, session).await;
    let n = notices(&all);
    assert_eq!(n.len(), 1);
    assert_eq!(n[0].seq, 4, "the notice comes before the burst's turns");
    assert!(
        n[0].content.starts_with("Recovery: interrupted_turn."),
        "{}",
        n[0].content
    );
    assert!(
        !n[0].content.contains("recovery_plan") && !n[0].content.contains("{\""),
        "the content is human text only: {}",
        n[0].content
    );
    let plan = n[0].recovery_plan.as_ref().expect("a typed plan");
    assert_eq!(plan.kind, "interrupted_turn");
    assert_eq!(plan.repaired_call_ids, vec!["c1".to_owned()]);
    assert!(plan.can_auto_continue && !plan.requires_confirmation);
    assert_eq!(plan.repairs[0].r#type, "synthesized_tool_result");
    assert_eq!(plan.repairs[0].call_id, "c1");
    assert!(plan.notice_text.is_empty(), "the text is the content's");
    // WatchSession shows the same notice, plan and all.
    let stream = inquest_tests::watching::watch(&mut client, &session.to_string(), 0)
        .await
        .unwrap();
    let (events, ending) = inquest_tests::watching::collect(stream).await;
    ending.unwrap();
    let watched: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            pb::watch_event::Event::Turn(t) if t.role() == pb::TurnRole::Notice => Some(t),
            _ => None,
        })
        .collect();
    assert_eq!(watched, n, "watched and listed notices are the same");
    assert_eq!(all[4].role(), pb::TurnRole::Assistant);

    let requests = fake.requests();
    assert!(!requests.is_empty());
    assert_synthetic_result(&requests[0].body, "any news?");

    let stored = s.last_recovery_plan.expect("GetSession exposes the plan");
    assert_eq!(stored.kind, "interrupted_turn");
    assert_eq!(stored.repaired_call_ids, vec!["c1".to_owned()]);
    assert!(stored.can_auto_continue && !stored.requires_confirmation);
    assert_eq!(stored.repairs[0].r#type, "synthesized_tool_result");
    assert_eq!(stored.repairs[0].call_id, "c1");
    assert_eq!(stored.repairs[0].seq, 2);
}

#[tokio::test]
async fn a_cut_off_mutating_call_waits_for_continue_session() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    let app = inquest_tests::spawn_app_with(|c| {
        c.providers = vec![fake_provider(&fake, "fake")];
        tool_classes(c, &classes());
    })
    .await;
    let mut client = app.client().await;
    let session = cut_off_session(&app, &mut client, "restart_service").await;

    // Nothing to confirm yet.
    let e = client
        .continue_session(pb::ContinueSessionRequest {
            session_id: session.to_string(),
        })
        .await
        .unwrap_err();
    crate::error_details::assert_reason(
        &e,
        tonic::Code::FailedPrecondition,
        Reason::NothingToConfirm,
        &[("status", "idle")],
    );

    send(&mut client, session, "did the restart happen?")
        .await
        .unwrap();
    let held = settled(&mut client, session).await;
    assert_eq!(held.status(), pb::SessionStatus::AwaitingConfirmation);
    assert_eq!(held.exit_reason, "awaiting_confirmation");
    assert_eq!(fake.request_count(), 0, "no model call before confirmation");
    let plan = held.last_recovery_plan.clone().unwrap();
    assert_eq!(plan.kind, "interrupted_turn");
    assert!(plan.requires_confirmation && plan.can_continue && !plan.can_auto_continue);
    assert_eq!(plan.interrupted_calls[0].side_effect, "mutating");
    let held_turns = turns(&mut client, session).await;
    assert_eq!(notices(&held_turns).len(), 1);
    assert!(
        notices(&held_turns)[0]
            .content
            .contains("restart_service (c1)")
    );

    // The dry run changes nothing.
    let dry = recovery_plan(&mut client, session).await;
    assert_eq!(dry.kind, "interrupted_turn");
    assert!(dry.requires_confirmation);
    assert_eq!(get_session(&mut client, session).await, held);
    assert_eq!(turns(&mut client, session).await.len(), held_turns.len());

    // A second message waits too.
    let e = send(&mut client, session, "hello?").await.unwrap_err();
    crate::error_details::assert_reason(
        &e,
        tonic::Code::FailedPrecondition,
        Reason::AwaitingConfirmation,
        &[("status", "awaiting_confirmation")],
    );
    assert!(e.message().contains("ContinueSession"), "{}", e.message());

    let continued = client
        .continue_session(pb::ContinueSessionRequest {
            session_id: session.to_string(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(matches!(
        continued.status(),
        pb::SessionStatus::Pending | pb::SessionStatus::Running | pb::SessionStatus::Idle
    ));
    let done = settled(&mut client, session).await;
    assert_eq!(done.status(), pb::SessionStatus::Idle, "{done:?}");
    assert_eq!(done.exit_reason, "awaiting_user");
    let requests = fake.requests();
    assert!(!requests.is_empty());
    assert_synthetic_result(&requests[0].body, "did the restart happen?");
    let after = turns(&mut client, session).await;
    assert_eq!(
        notices(&after).len(),
        1,
        "confirmation writes no second notice"
    );

    // Confirmed once; nothing left to confirm.
    let e = client
        .continue_session(pb::ContinueSessionRequest {
            session_id: session.to_string(),
        })
        .await
        .unwrap_err();
    crate::error_details::assert_reason(
        &e,
        tonic::Code::FailedPrecondition,
        Reason::NothingToConfirm,
        &[("status", "idle")],
    );
}

#[tokio::test]
async fn every_burst_starts_on_the_first_provider() {
    let first = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    let second = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    // The first burst's first call fails on the first provider: the chain
    // fails over and stays on the second for the rest of that burst.
    first.fail(1, 503);
    let app = inquest_tests::spawn_app_with(|c| {
        c.providers = vec![
            fake_provider(&first, "first"),
            fake_provider(&second, "second"),
        ];
    })
    .await;
    let mut client = app.client().await;
    let incident = incident(&mut client).await;
    let s = client
        .start_session(pb::StartSessionRequest {
            incident_id: incident.to_string(),
            message: "investigate".into(),
            idempotency_key: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let id = SessionId::parse(&s.id).unwrap();
    settled(&mut client, id).await;
    assert_eq!(first.request_count(), 1);
    let second_after_first = second.request_count();
    assert!(second_after_first >= 1);

    send(&mut client, id, "and then?").await.unwrap();
    let s = settled(&mut client, id).await;
    assert_eq!(s.exit_reason, "awaiting_user");
    assert!(
        first.request_count() >= 2,
        "the follow-up went to the first provider"
    );
    assert_eq!(second.request_count(), second_after_first);
    let last = first.requests().pop().unwrap();
    assert!(last.body.to_string().contains("and then?"));
}

#[tokio::test]
async fn a_confirmation_whose_replica_died_before_claiming_runs_as_confirmed_elsewhere() {
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    let mut app = inquest_tests::spawn_app_with(|c| {
        c.providers = vec![fake_provider(&fake, "fake")];
        tool_classes(c, &classes());
    })
    .await;
    let mut client = app.client().await;
    let session = cut_off_session(&app, &mut client, "restart_service").await;
    send(&mut client, session, "did the restart happen?")
        .await
        .unwrap();
    let held = settled(&mut client, session).await;
    assert_eq!(held.status(), pb::SessionStatus::AwaitingConfirmation);
    // The confirmation lands, but its replica stops before claiming the
    // burst (ContinueSession's own start is what this skips).
    assert!(matches!(
        app.turn_log.confirm(session).await.unwrap(),
        inquest_store::Transition::Changed(_)
    ));
    let mut config = app.config.clone();
    let db_url = app.db_url.clone();
    let _database = app.take_database();
    drop(client);
    app.stop().await.unwrap();

    // The next replica picks the pending session up at start: it runs it
    // as confirmed (no second hold, no second notice).
    config.listen = "127.0.0.1:0".parse().unwrap();
    let next = inquest_server::Application::build(&config, &db_url)
        .await
        .unwrap();
    let addr = next.local_addr().unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    let server = tokio::spawn(next.run(stop.clone()));
    let mut client =
        pb::investigations_client::InvestigationsClient::connect(format!("http://{addr}"))
            .await
            .unwrap();
    let done = settled(&mut client, session).await;
    assert_eq!(done.status(), pb::SessionStatus::Idle, "{done:?}");
    assert_eq!(done.exit_reason, "awaiting_user");
    assert_synthetic_result(&fake.requests()[0].body, "did the restart happen?");
    assert_eq!(notices(&turns(&mut client, session).await).len(), 1);
    stop.cancel();
    server.await.unwrap().unwrap();
}
