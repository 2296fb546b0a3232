//! ForkSession through the real server: a fork at each kind of cut whose
//! next model request the strict fake accepts, its lineage, a source left
//! untouched while it runs, a fork of a compacted session, idempotent
//! retries and refusals.

use inquest_core::{
    IncidentId, Role, Seq, SessionId, TokenUsage, ToolArguments, ToolCall, Turn,
    resume::FORKED_TOOL_RESULT,
};
use inquest_proto::v1 as pb;
use inquest_server::reason::{ErrorReason, Reason};
use inquest_testkit::fake::{FakeProvider, FakeReply, Flavor};
use inquest_tests::resume::{incident, insert_session, insert_turn};
use tonic::Code;

use crate::agent_support::{
    Client, app_with_fake, finished, provider, send, session, start, turns,
};

const WHAT_IF: &str = "what if we had looked at the cache first?";

fn base(session: SessionId, seq: i64, role: Role, content: &str) -> Turn {
    Turn {
        session_id: session,
        seq: Seq::from_stored(seq).expect("a seq"),
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

fn assistant(session: SessionId, seq: i64, text: &str, calls: &[(&str, &str)]) -> Turn {
    let mut t = base(session, seq, Role::Assistant, text);
    t.usage = TokenUsage::new(10, 2);
    let calls: Vec<ToolCall> = calls
        .iter()
        .map(|(id, name)| ToolCall {
            id: (*id).into(),
            name: (*name).into(),
            arguments: ToolArguments::from_model("{}"),
        })
        .collect();
    t.tool_calls_raw = ToolCall::encode_all(&calls);
    t
}

fn result(session: SessionId, seq: i64, call_id: &str, name: &str) -> Turn {
    let mut t = base(session, seq, Role::Tool, &format!("result of {call_id}"));
    t.tool_call_id = Some(call_id.into());
    t.tool_name = Some(name.into());
    t
}

fn compaction(session: SessionId, seq: i64, summary: &str, first_retained: u64) -> Turn {
    let mut t = base(session, seq, Role::Compaction, summary);
    t.tool_calls_raw = serde_json::json!({
        "first_retained_seq": first_retained, "tokens_before": 1000, "tokens_after": 100});
    t
}

/// Stores `turns` as an idle session of `incident` (its id is the turns').
async fn seed(app: &inquest_tests::TestApp, incident: IncidentId, turns: &[Turn]) -> SessionId {
    let id = turns[0].session_id;
    let db = inquest_tests::connect(&app.db_url).await;
    insert_session(&db, incident, id, "idle", turns).await;
    for t in turns {
        insert_turn(&db, t).await.expect("inserting a turn");
    }
    id
}

/// A finished investigation with a three-call reply, then a follow-up
/// with one call: every kind of cut is a seq of it.
fn investigation(s: SessionId) -> Vec<Turn> {
    vec![
        base(s, 1, Role::User, "checkout p99 is up"),
        assistant(
            s,
            2,
            "Looking.",
            &[
                ("c1", "list_files"),
                ("c2", "read_file"),
                ("c3", "read_file"),
            ],
        ),
        result(s, 3, "c1", "list_files"),
        result(s, 4, "c2", "read_file"),
        result(s, 5, "c3", "read_file"),
        assistant(s, 6, "It is the DB pool.", &[]),
        base(s, 7, Role::User, "and the cache?"),
        assistant(s, 8, "Checking.", &[("d1", "read_file")]),
        result(s, 9, "d1", "read_file"),
        assistant(s, 10, "The cache is fine.", &[]),
    ]
}

fn fork_request(
    source: &str,
    at_seq: i64,
    message: Option<&str>,
    key: &str,
) -> pb::ForkSessionRequest {
    pb::ForkSessionRequest {
        session_id: source.into(),
        at_seq,
        message: message.map(str::to_owned),
        idempotency_key: key.into(),
    }
}

async fn fork(
    client: &mut Client,
    source: &str,
    at_seq: i64,
    message: Option<&str>,
    key: &str,
) -> Result<pb::Session, tonic::Status> {
    client
        .fork_session(fork_request(source, at_seq, message, key))
        .await
        .map(|r| r.into_inner())
}

/// The bodies of the fake's requests from `from` on, as text.
fn bodies_since(fake: &FakeProvider, from: usize) -> Vec<String> {
    fake.requests()
        .into_iter()
        .skip(from)
        .map(|r| r.body.to_string())
        .collect()
}

#[tokio::test]
async fn a_fork_at_each_kind_of_cut_is_provider_valid_and_says_what_was_cut() {
    let fake = FakeProvider::start(Flavor::Anthropic).await.unwrap();
    let entry = provider(&fake, Flavor::Anthropic, "fake");
    let app = app_with_fake(&fake, |c| c.providers = vec![entry]).await;
    let mut client = app.client().await;
    let incident = incident(&mut client).await;
    let source = seed(&app, incident, &investigation(SessionId::new())).await;
    let src = source.to_string();
    let source_turns = turns(&mut client, &src).await;

    // (cut, the calls it leaves without a result)
    let cuts: [(i64, &[&str]); 6] = [
        (1, &[]),                 // after a user turn
        (2, &["c1", "c2", "c3"]), // after an assistant turn with calls
        (3, &["c2", "c3"]),       // in the middle of a multi-call reply
        (5, &[]),                 // after the last tool result
        (8, &["d1"]),             // a follow-up's single call
        (10, &[]),                // the whole session
    ];
    for (at, cut) in cuts {
        let before = fake.request_count();
        let forked = fork(&mut client, &src, at, Some(WHAT_IF), &format!("cut-{at}"))
            .await
            .unwrap_or_else(|e| panic!("fork at {at}: {e:?}"));
        assert_ne!(forked.id, src);
        assert_eq!(forked.incident_id, incident.to_string());
        assert_eq!(
            (forked.forked_from_session_id.as_str(), forked.forked_at_seq),
            (src.as_str(), at)
        );
        // Latest report: a fork numbers its bursts after the copied ones.
        let (report, s) = finished(&mut client, &forked.id, 0).await;
        // A request the strict fake refused would have ended the burst
        // with a provider failure.
        assert!(
            ["completed", "awaiting_user"].contains(&report.exit_reason.as_str()),
            "fork at {at}: {report:?}"
        );
        assert_eq!(s.status(), pb::SessionStatus::Idle, "fork at {at}: {s:?}");

        let got = turns(&mut client, &forked.id).await;
        let n = usize::try_from(at).unwrap();
        for (copy, original) in got[..n].iter().zip(&source_turns[..n]) {
            assert_eq!(
                (
                    copy.seq,
                    copy.role,
                    &copy.content,
                    &copy.tool_calls,
                    &copy.tool_call_id
                ),
                (
                    original.seq,
                    original.role,
                    &original.content,
                    &original.tool_calls,
                    &original.tool_call_id
                ),
                "fork at {at}: copied turn"
            );
            assert_eq!(copy.session_id, forked.id);
        }
        let notice = &got[n];
        assert_eq!(notice.role(), pb::TurnRole::Notice, "fork at {at}");
        assert!(
            notice
                .content
                .starts_with(&format!("Forked from session {src} at seq {at}.")),
            "{}",
            notice.content
        );
        for (i, call) in cut.iter().enumerate() {
            let r = &got[n + 1 + i];
            assert_eq!(r.role(), pb::TurnRole::Tool, "fork at {at}");
            assert_eq!((r.tool_call_id.as_str(), r.is_error), (*call, true));
            assert_eq!(r.content, FORKED_TOOL_RESULT);
            assert!(
                notice.content.contains(&format!("{call} (")),
                "{}",
                notice.content
            );
        }
        let message = &got[n + 1 + cut.len()];
        assert_eq!(
            (message.role(), message.content.as_str()),
            (pb::TurnRole::User, WHAT_IF)
        );
        // The fork's first model request carried the copied history, the
        // cut calls' results and the new message.
        let first = bodies_since(&fake, before)
            .into_iter()
            .next()
            .expect("the fork's model request");
        assert!(first.contains(WHAT_IF), "fork at {at}: {first}");
        if !cut.is_empty() {
            assert!(
                first.contains("forked before this tool"),
                "fork at {at}: {first}"
            );
        }
        if at >= 6 {
            assert!(
                first.contains("It is the DB pool."),
                "fork at {at}: {first}"
            );
        } else {
            assert!(
                !first.contains("It is the DB pool."),
                "fork at {at}: {first}"
            );
        }
    }

    // The source is untouched.
    let after = turns(&mut client, &src).await;
    assert_eq!(after, source_turns);
    let s = session(&mut client, &src).await;
    assert_eq!((s.head_seq, s.status()), (10, pb::SessionStatus::Idle));
    assert_eq!(s.forked_from_session_id, "");
    assert_eq!(s.forked_at_seq, 0);
}

#[tokio::test]
async fn a_fork_without_a_message_is_idle_with_its_history_and_takes_a_follow_up() {
    let fake = FakeProvider::start(Flavor::Anthropic).await.unwrap();
    let entry = provider(&fake, Flavor::Anthropic, "fake");
    let app = app_with_fake(&fake, |c| c.providers = vec![entry]).await;
    let mut client = app.client().await;
    let incident = incident(&mut client).await;
    let source = seed(&app, incident, &investigation(SessionId::new())).await;
    let src = source.to_string();

    let forked = fork(&mut client, &src, 3, None, "").await.unwrap();
    assert_eq!(forked.status(), pb::SessionStatus::Idle);
    // Copied turns, the notice, the results of c2 and c3.
    assert_eq!((forked.head_seq, forked.turn_count), (6, 6));
    // The counters are those of the history it holds: the one assistant
    // turn copied asked for three calls.
    assert_eq!((forked.tool_calls, forked.input_tokens), (3, 10));
    let got = session(&mut client, &forked.id).await;
    assert_eq!(
        (got.forked_from_session_id.as_str(), got.forked_at_seq),
        (src.as_str(), 3)
    );
    assert_eq!(fake.request_count(), 0, "no burst without a message");
    // Settled: a watch drains its history and ends OK.
    let stream = inquest_tests::watching::watch(&mut client, &forked.id, 0)
        .await
        .unwrap();
    let (events, ending) = inquest_tests::watching::collect(stream).await;
    assert!(ending.is_ok(), "{ending:?}");
    assert_eq!(
        inquest_tests::watching::turn_seqs(&events),
        [1, 2, 3, 4, 5, 6]
    );

    let before = fake.request_count();
    send(&mut client, &forked.id, WHAT_IF).await;
    let (report, s) = finished(&mut client, &forked.id, 0).await;
    assert!(
        ["completed", "awaiting_user"].contains(&report.exit_reason.as_str()),
        "{report:?} {s:?}"
    );
    let first = bodies_since(&fake, before)
        .into_iter()
        .next()
        .expect("a request");
    assert!(
        first.contains(WHAT_IF) && first.contains("forked before this tool"),
        "{first}"
    );
}

#[tokio::test]
async fn a_fork_of_a_running_session_copies_committed_turns_and_leaves_it_running() {
    let fake = FakeProvider::start(Flavor::Anthropic).await.unwrap();
    let entry = provider(&fake, Flavor::Anthropic, "fake");
    fake.hold_answers();
    fake.reply(FakeReply::text("The source's answer."));
    let app = app_with_fake(&fake, |c| c.providers = vec![entry]).await;
    let mut client = app.client().await;
    let src = start(&mut client, "checkout p99 is up").await;
    crate::agent_support::eventually("the source's model call", || fake.request_count() >= 1).await;
    let running = session(&mut client, &src).await;
    assert_eq!(running.status(), pb::SessionStatus::Running);

    let forked = fork(&mut client, &src, 1, None, "while-running")
        .await
        .unwrap();
    assert_eq!(forked.status(), pb::SessionStatus::Idle);
    // Beyond the committed head: refused, naming it.
    let e = fork(&mut client, &src, 2, None, "").await.unwrap_err();
    assert_eq!(e.code(), Code::OutOfRange, "{e:?}");
    assert!(e.message().contains("head seq 1"), "{e:?}");

    let still = session(&mut client, &src).await;
    assert_eq!(still.status(), pb::SessionStatus::Running);
    assert_eq!(
        (still.lease_epoch, still.head_seq),
        (running.lease_epoch, 1)
    );
    fake.release_answers();
    let (_, s) = finished(&mut client, &src, 1).await;
    let source_turns = turns(&mut client, &src).await;
    assert_eq!(source_turns.len(), 2, "{source_turns:?}");
    assert_eq!(source_turns[1].content, "The source's answer.");
    assert!(s.forked_from_session_id.is_empty());
    // The fork kept only what was committed when it was made.
    let fork_turns = turns(&mut client, &forked.id).await;
    assert_eq!(fork_turns.len(), 2);
    assert_eq!(fork_turns[0].content, "checkout p99 is up");
    assert_eq!(fork_turns[1].role(), pb::TurnRole::Notice);
}

#[tokio::test]
async fn a_fork_of_a_compacted_session_rebuilds_from_the_latest_compaction_before_the_cut() {
    let fake = FakeProvider::start(Flavor::Anthropic).await.unwrap();
    let entry = provider(&fake, Flavor::Anthropic, "fake");
    let app = app_with_fake(&fake, |c| c.providers = vec![entry]).await;
    let mut client = app.client().await;
    let incident = incident(&mut client).await;
    let s = SessionId::new();
    let history = vec![
        base(s, 1, Role::User, "checkout p99 is up"),
        assistant(s, 2, "OLD-DETAIL-A", &[]),
        base(s, 3, Role::User, "go on"),
        assistant(s, 4, "RETAINED-B", &[]),
        compaction(s, 5, "SUMMARY-ONE", 4),
        base(s, 6, Role::User, "more"),
        assistant(s, 7, "AFTER-FIRST", &[]),
        compaction(s, 8, "SUMMARY-TWO", 8),
        base(s, 9, Role::User, "later"),
        assistant(s, 10, "AFTER-SECOND", &[]),
    ];
    let src = seed(&app, incident, &history).await.to_string();

    let forked = fork(&mut client, &src, 7, Some(WHAT_IF), "compacted")
        .await
        .unwrap();
    let (report, _) = finished(&mut client, &forked.id, 0).await;
    assert!(
        ["completed", "awaiting_user"].contains(&report.exit_reason.as_str()),
        "{report:?}"
    );
    let first = bodies_since(&fake, 0)
        .into_iter()
        .next()
        .expect("a request");
    for kept in [
        "checkout p99 is up",
        "SUMMARY-ONE",
        "RETAINED-B",
        "AFTER-FIRST",
        WHAT_IF,
    ] {
        assert!(first.contains(kept), "{kept} missing: {first}");
    }
    for gone in ["OLD-DETAIL-A", "SUMMARY-TWO", "AFTER-SECOND"] {
        assert!(!first.contains(gone), "{gone} sent: {first}");
    }
    let got = turns(&mut client, &forked.id).await;
    assert_eq!(got[4].role(), pb::TurnRole::Compaction);
}

#[tokio::test]
async fn fork_retries_by_key_return_the_same_fork_and_refusals_write_nothing() {
    let fake = FakeProvider::start(Flavor::Anthropic).await.unwrap();
    let entry = provider(&fake, Flavor::Anthropic, "fake");
    let app = app_with_fake(&fake, |c| c.providers = vec![entry]).await;
    let mut client = app.client().await;
    let incident = incident(&mut client).await;
    let src = seed(&app, incident, &investigation(SessionId::new()))
        .await
        .to_string();

    let first = fork(&mut client, &src, 4, None, "k").await.unwrap();
    let sessions = app.count("sessions").await;
    let turns_before = app.count("turns").await;
    let again = fork(&mut client, &src, 4, None, "k").await.unwrap();
    assert_eq!(again.id, first.id);
    assert_eq!(
        (app.count("sessions").await, app.count("turns").await),
        (sessions, turns_before)
    );

    // With a message: a retry returns the fork and runs no second burst.
    let running = fork(&mut client, &src, 6, Some(WHAT_IF), "m")
        .await
        .unwrap();
    let (report, _) = finished(&mut client, &running.id, 0).await;
    let replay = fork(&mut client, &src, 6, Some(WHAT_IF), "m")
        .await
        .unwrap();
    assert_eq!(replay.id, running.id);
    let again = session(&mut client, &running.id).await;
    assert_eq!(again.head_seq, replay.head_seq);
    let latest = crate::agent_support::report(&mut client, &running.id, 0)
        .await
        .expect("its report");
    assert_eq!(latest.burst, report.burst, "one burst for one keyed fork");
    let sessions = app.count("sessions").await;
    let turns_before = app.count("turns").await;

    // The key with another request: refused, nothing stored.
    for (at, message) in [(5, None), (4, Some("m"))] {
        let e = fork(&mut client, &src, at, message, "k").await.unwrap_err();
        assert_eq!(e.code(), Code::AlreadyExists, "{e:?}");
    }
    // Bad seqs, an empty message, unknown and malformed ids.
    for (at, message, code) in [
        (0, None, Code::InvalidArgument),
        (-3, None, Code::InvalidArgument),
        (11, None, Code::OutOfRange),
        (1, Some(""), Code::InvalidArgument),
    ] {
        let e = fork(&mut client, &src, at, message, "").await.unwrap_err();
        assert_eq!(e.code(), code, "at {at}: {e:?}");
    }
    let beyond = fork(&mut client, &src, 11, None, "").await.unwrap_err();
    let info = ErrorReason::of(&beyond).expect("an ErrorInfo");
    assert_eq!(info.reason, Reason::CursorBeyondHead);
    assert_eq!(
        info.metadata.get("head_seq").map(String::as_str),
        Some("10")
    );
    let unknown = SessionId::new().to_string();
    let e = fork(&mut client, &unknown, 1, None, "").await.unwrap_err();
    assert_eq!(e.code(), Code::NotFound, "{e:?}");
    let e = fork(&mut client, "not-an-id", 1, None, "")
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
    assert_eq!(
        (app.count("sessions").await, app.count("turns").await),
        (sessions, turns_before)
    );

    // Audited: the fork and its source.
    let audit = client
        .list_audit_events(pb::ListAuditEventsRequest {
            session_id: src.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(
        audit.events.iter().any(|e| e.method == "ForkSession"
            && e.message.contains(&format!("forked into {}", first.id))),
        "{audit:?}"
    );
}

#[tokio::test]
async fn concurrent_forks_with_one_key_make_one_fork() {
    let fake = FakeProvider::start(Flavor::Anthropic).await.unwrap();
    let entry = provider(&fake, Flavor::Anthropic, "fake");
    let app = app_with_fake(&fake, |c| c.providers = vec![entry]).await;
    let mut client = app.client().await;
    let incident = incident(&mut client).await;
    let src = seed(&app, incident, &investigation(SessionId::new()))
        .await
        .to_string();
    let sessions = app.count("sessions").await;
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let (mut c, src) = (client.clone(), src.clone());
        calls.spawn(async move { fork(&mut c, &src, 3, None, "race").await });
    }
    let mut ids = std::collections::BTreeSet::new();
    while let Some(done) = calls.join_next().await {
        ids.insert(done.unwrap().unwrap().id);
    }
    assert_eq!(ids.len(), 1, "{ids:?}");
    assert_eq!(app.count("sessions").await, sessions + 1);
}
