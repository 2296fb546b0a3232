//! Size bounds and caps of the API: ListTurns pages and watch
//! messages a default gRPC client accepts (4 MiB), oversized and
//! undecodable requests answering INVALID_ARGUMENT, the watch stream caps,
//! and a refused watch writing nothing. Every client here is the default
//! generated one (4 MiB receive limit), over the real socket.

use inquest_proto::v1::{
    self as pb, investigations_client::InvestigationsClient, watch_event::Event,
};
use inquest_tests::{
    TestApp,
    driver::{Driver, new_session},
    spawn_app, spawn_app_with,
    watching::{collect, eventually, turn_seqs, watch},
};
use prost::Message;
use tonic::{Code, transport::Channel};
use tonic_types::StatusExt;

const MIB: usize = 1024 * 1024;
/// The default gRPC client's receive limit.
const CLIENT_LIMIT: usize = 4 * MIB;

/// Every turn of the session, paging by `next_after_seq` with `limit`;
/// checks that each page encodes within `max` bytes.
async fn list_all(
    client: &mut InvestigationsClient<Channel>,
    session: &str,
    limit: u32,
    max: usize,
) -> (Vec<pb::SessionTurn>, usize) {
    let (mut turns, mut pages, mut after) = (Vec::new(), 0, 0);
    loop {
        let page = client
            .list_turns(pb::ListTurnsRequest {
                session_id: session.into(),
                after_seq: after,
                before_seq: 0,
                limit,
            })
            .await
            .expect("a page a default client accepts")
            .into_inner();
        pages += 1;
        assert!(
            page.encoded_len() <= max,
            "page of {} bytes",
            page.encoded_len()
        );
        assert!(!page.turns.is_empty() || page.next_after_seq == 0);
        turns.extend(page.turns);
        if page.next_after_seq == 0 {
            return (turns, pages);
        }
        assert_eq!(page.next_after_seq, turns.last().unwrap().seq);
        after = page.next_after_seq;
    }
}

fn seqs(turns: &[pb::SessionTurn]) -> Vec<i64> {
    turns.iter().map(|t| t.seq).collect()
}

/// Many large turns (user messages near a 1 MiB `max_message_bytes`, sent
/// with SendMessage, and large assistant turns): ListTurns with limit 1000
/// answers pages within `max_response_bytes`, cut by bytes, and paging by
/// next_after_seq yields every turn exactly once, whole; WatchSession from
/// 0 delivers them all.
#[tokio::test]
async fn large_turns_page_within_the_response_cap() {
    let app = spawn_app_with(|c| c.limits.max_message_bytes = MIB).await;
    let max = app.config.limits.max_response_bytes;
    assert!(max < CLIENT_LIMIT);
    let mut client = app.client().await;
    let session = new_session(&mut client).await;
    let big = |tag: usize| format!("{tag:>8}") + &"m".repeat(MIB - 8);
    let mut expected = vec!["what happened?".to_owned()];
    for round in 0..4 {
        let driver = Driver::claim(&app, &session).await;
        for i in 0..4 {
            let text = format!("{round}/{i}") + &"a".repeat(900 * 1024);
            driver.say(&text).await;
            expected.push(text);
        }
        driver.finish().await;
        let message = big(round);
        client
            .send_message(pb::SendMessageRequest {
                session_id: session.clone(),
                message: message.clone(),
                idempotency_key: String::new(),
                if_running: 0,
            })
            .await
            .expect("a message at the limit is accepted");
        expected.push(message);
    }
    let total: usize = expected.iter().map(String::len).sum();
    assert!(total > 4 * CLIENT_LIMIT, "{total}");

    let (turns, pages) = list_all(&mut client, &session, 1000, max).await;
    assert_eq!(
        seqs(&turns),
        (1..=expected.len() as i64).collect::<Vec<_>>()
    );
    assert!(pages >= total / max, "{pages} pages for {total} bytes");
    for (turn, text) in turns.iter().zip(&expected) {
        assert_eq!(&turn.content, text, "seq {}", turn.seq);
    }
    // Small limits page by count as before.
    let (by_two, _) = list_all(&mut client, &session, 2, max).await;
    assert_eq!(seqs(&by_two), seqs(&turns));

    // The session is pending (no agent here): finish it so the watch ends.
    let driver = Driver::claim(&app, &session).await;
    driver.finish().await;
    let (events, ending) = collect(watch(&mut client, &session, 0).await.unwrap()).await;
    ending.unwrap();
    assert_eq!(
        turn_seqs(&events),
        (1..=expected.len() as i64).collect::<Vec<_>>()
    );
    let watched: Vec<&String> = events
        .iter()
        .filter_map(|e| match e {
            Event::Turn(t) => Some(&t.content),
            _ => None,
        })
        .collect();
    assert!(watched.into_iter().eq(expected.iter()));
    app.stop().await.unwrap();
}

/// A turn stored over the response cap (a row written before the caps
/// existed; the test driver writes past the agent's model-text cap) is
/// shown cut, with a marker, in ListTurns and WatchSession alike, while the
/// stored row stays whole; the turns around it and after it are unharmed
/// and the session goes on.
#[tokio::test]
async fn a_turn_over_the_response_cap_is_shown_cut_and_the_session_goes_on() {
    let app = spawn_app().await;
    let max = app.config.limits.max_response_bytes;
    let mut client = app.client().await;
    let session = new_session(&mut client).await;
    let driver = Driver::claim(&app, &session).await;
    let huge = "€".repeat(2 * MIB); // 6 MiB of UTF-8, 3 bytes a char
    driver.say(&huge).await;
    driver.say("after the huge one").await;

    let page = client
        .list_turns(pb::ListTurnsRequest {
            session_id: session.clone(),
            after_seq: 0,
            before_seq: 0,
            limit: 1000,
        })
        .await
        .expect("a default client reads the page")
        .into_inner();
    assert!(page.encoded_len() <= max);
    let shown = &page.turns[1];
    assert_eq!(shown.seq, 2);
    let (kept, marker) = shown.content.split_once("…[cut by inquest").unwrap();
    assert!(huge.starts_with(kept) && !kept.is_empty());
    assert!(
        marker.contains("more bytes of content over limits.max_response_bytes"),
        "{marker}"
    );
    // Page 1 holds the huge turn's cut form; the rest follows.
    let (all, _) = list_all(&mut client, &session, 1000, max).await;
    assert_eq!(seqs(&all), vec![1, 2, 3]);
    assert_eq!(all[2].content, "after the huge one");

    // The stored row is whole.
    let stored = app
        .store
        .list_turns(
            inquest_core::SessionId::parse(&session).unwrap(),
            inquest_core::AfterSeq::START,
            10,
        )
        .await
        .unwrap();
    assert_eq!(stored.turns[1].content, huge);

    // A live watcher gets it cut too, and the session goes on.
    let mut stream = watch(&mut client, &session, 0).await.unwrap();
    let mut live = Vec::new();
    while live.len() < 3 {
        if let Some(pb::WatchEvent {
            event: Some(Event::Turn(t)),
        }) = stream
            .message()
            .await
            .expect("a message the client accepts")
        {
            live.push(t);
        }
    }
    assert!(live[1].content.contains("more bytes of content"));
    driver.say("and on").await;
    driver.finish().await;
    let (events, ending) = collect(stream).await;
    ending.unwrap();
    assert_eq!(turn_seqs(&events), vec![4]);
    app.stop().await.unwrap();
}

async fn incident(client: &mut InvestigationsClient<Channel>) -> String {
    client
        .create_incident(pb::CreateIncidentRequest {
            title: "limits".into(),
            description: String::new(),
        })
        .await
        .unwrap()
        .into_inner()
        .id
}

/// A request over the transport limit (`max_request_bytes`, 4 MiB) answers
/// INVALID_ARGUMENT naming the limit, not OUT_OF_RANGE; one under it but
/// over `max_message_bytes` answers INVALID_ARGUMENT too. Neither writes
/// anything, and the connection goes on serving.
#[tokio::test]
async fn an_oversized_request_answers_invalid_argument_naming_the_limit() {
    let app = spawn_app().await;
    let mut client = app.client().await;
    let incident = incident(&mut client).await;
    let session = new_session(&mut client).await;
    let (sessions, turns) = (app.count("sessions").await, app.count("turns").await);

    let huge = "x".repeat(5 * MIB);
    let start = client
        .start_session(pb::StartSessionRequest {
            incident_id: incident.clone(),
            message: huge.clone(),
            idempotency_key: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(start.code(), Code::InvalidArgument, "{start:?}");
    assert!(
        start.message().contains("limits.max_request_bytes") && start.message().contains("4194304"),
        "{}",
        start.message()
    );
    let send = client
        .send_message(pb::SendMessageRequest {
            session_id: session.clone(),
            message: huge,
            idempotency_key: String::new(),
            if_running: 0,
        })
        .await
        .unwrap_err();
    assert_eq!(send.code(), Code::InvalidArgument, "{send:?}");
    assert!(send.message().contains("limits.max_request_bytes"));
    crate::error_details::assert_reason(
        &send,
        Code::InvalidArgument,
        inquest_server::reason::Reason::LimitExceeded,
        &[("limit", "limits.max_request_bytes"), ("value", "4194304")],
    );

    // Under the transport limit, over max_message_bytes (32 KiB).
    let over = client
        .start_session(pb::StartSessionRequest {
            incident_id: incident.clone(),
            message: "y".repeat(100 * 1024),
            idempotency_key: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(over.code(), Code::InvalidArgument, "{over:?}");
    assert!(over.message().contains("over the limit of 32768 bytes"));

    assert_eq!(app.count("sessions").await, sessions);
    assert_eq!(app.count("turns").await, turns);
    // The same connection still serves.
    client
        .start_session(pb::StartSessionRequest {
            incident_id: incident,
            message: "fine".into(),
            idempotency_key: String::new(),
        })
        .await
        .unwrap();
    app.stop().await.unwrap();
}

/// StartSessionRequest as the wire sees it, with `message` as raw bytes:
/// string and bytes share a wire type, so this sends a string field that
/// is not UTF-8.
#[derive(Clone, PartialEq, prost::Message)]
struct RawStartSession {
    #[prost(string, tag = "1")]
    incident_id: String,
    #[prost(bytes = "vec", tag = "2")]
    message: Vec<u8>,
}

/// HealthCheckRequest with `service` as raw bytes.
#[derive(Clone, PartialEq, prost::Message)]
struct RawHealthCheck {
    #[prost(bytes = "vec", tag = "1")]
    service: Vec<u8>,
}

/// The health service answers an undecodable request as the API does:
/// INVALID_ARGUMENT with MALFORMED_REQUEST, not tonic's INTERNAL.
#[tokio::test]
async fn a_health_check_that_is_not_utf8_answers_invalid_argument() {
    let app = spawn_app().await;
    let mut raw = tonic::client::Grpc::new(app.channel().await);
    let path = tonic::codegen::http::uri::PathAndQuery::from_static("/grpc.health.v1.Health/Check");
    let codec =
        tonic_prost::ProstCodec::<RawHealthCheck, tonic_health::pb::HealthCheckResponse>::default();
    for service in [vec![0xff, 0xfe], vec![0xc3, 0x28], vec![0xed, 0xa0, 0x80]] {
        raw.ready().await.unwrap();
        let status = raw
            .unary(
                tonic::Request::new(RawHealthCheck { service }),
                path.clone(),
                codec.clone(),
            )
            .await
            .unwrap_err();
        crate::error_details::assert_reason(
            &status,
            Code::InvalidArgument,
            inquest_server::reason::Reason::MalformedRequest,
            &[],
        );
    }
    // The same raw path with a known service name is served.
    raw.ready().await.unwrap();
    let serving = raw
        .unary(
            tonic::Request::new(RawHealthCheck {
                service: b"inquest.v1.Investigations".to_vec(),
            }),
            path,
            codec,
        )
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        serving.status(),
        tonic_health::pb::health_check_response::ServingStatus::Serving
    );
    app.stop().await.unwrap();
}

/// A request whose string field is not UTF-8 answers INVALID_ARGUMENT
/// (tonic's default is INTERNAL) and writes nothing; the watch cursor's
/// OUT_OF_RANGE is still OUT_OF_RANGE, with its head seq.
#[tokio::test]
async fn invalid_utf8_answers_invalid_argument() {
    let app = spawn_app().await;
    let mut client = app.client().await;
    let incident = incident(&mut client).await;
    let sessions = app.count("sessions").await;

    let mut raw = tonic::client::Grpc::new(app.channel().await);
    raw.ready().await.unwrap();
    let path = tonic::codegen::http::uri::PathAndQuery::from_static(
        "/inquest.v1.Investigations/StartSession",
    );
    let codec = tonic_prost::ProstCodec::<RawStartSession, pb::Session>::default();
    let status = raw
        .unary(
            tonic::Request::new(RawStartSession {
                incident_id: incident.clone(),
                message: vec![b'o', b'k', 0xff, 0xfe],
            }),
            path.clone(),
            codec.clone(),
        )
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(status.message().contains("UTF-8"), "{}", status.message());
    crate::error_details::assert_reason(
        &status,
        Code::InvalidArgument,
        inquest_server::reason::Reason::MalformedRequest,
        &[],
    );
    assert_eq!(app.count("sessions").await, sessions);

    // The same raw path with valid UTF-8 works: the check is the bytes.
    raw.ready().await.unwrap();
    let ok = raw
        .unary(
            tonic::Request::new(RawStartSession {
                incident_id: incident,
                message: b"ok".to_vec(),
            }),
            path,
            codec,
        )
        .await
        .unwrap()
        .into_inner();
    let cursor = watch(&mut client, &ok.id, 9).await.unwrap_err();
    assert_eq!(cursor.code(), Code::OutOfRange);
    assert_eq!(
        cursor
            .metadata()
            .get("inquest-head-seq")
            .unwrap()
            .to_str()
            .unwrap(),
        "1"
    );
    app.stop().await.unwrap();
}

async fn watch_replicas(app: &TestApp, session: &str) -> Vec<String> {
    inquest_tests::connect(&app.db_url)
        .await
        .query_one(
            "SELECT watch_replicas FROM sessions WHERE id = $1",
            &[&uuid::Uuid::parse_str(session).unwrap()],
        )
        .await
        .unwrap()
        .get(0)
}

/// Watch streams are capped per session and per replica: past either,
/// RESOURCE_EXHAUSTED naming the cap, with a retry hint (RetryInfo and
/// `retry-after-ms`); the refusal writes nothing; a slot frees when a
/// stream is dropped.
#[tokio::test]
async fn watch_caps_refuse_with_a_retry_hint_and_free_on_drop() {
    let app = spawn_app_with(|c| {
        c.limits.max_watch_streams = 3;
        c.limits.max_watch_streams_per_session = 2;
    })
    .await;
    let slots = || app.watch_metrics.slots.open();
    let mut client = app.client().await;
    // Pending sessions (no agent): their streams stay open.
    let a = new_session(&mut client).await;
    let b = new_session(&mut client).await;
    let a1 = watch(&mut client, &a, 0).await.unwrap();
    let _a2 = watch(&mut client, &a, 0).await.unwrap();
    let refused = watch(&mut client, &a, 0).await.unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(
        refused
            .message()
            .contains("limits.max_watch_streams_per_session = 2")
            && refused.message().contains("retry later"),
        "{}",
        refused.message()
    );
    let retry = refused
        .get_details_retry_info()
        .expect("a RetryInfo detail");
    assert!(retry.retry_delay.is_some_and(|d| !d.is_zero()));
    assert!(refused.metadata().get("retry-after-ms").is_some());
    let info = refused
        .get_details_error_info()
        .expect("an ErrorInfo detail");
    assert_eq!(info.reason, "LIMIT_EXCEEDED");
    assert_eq!(info.domain, "inquest.v1");
    assert_eq!(
        info.metadata.get("limit").map(String::as_str),
        Some("limits.max_watch_streams_per_session")
    );

    let _b1 = watch(&mut client, &b, 0).await.unwrap();
    assert_eq!(slots(), 3);
    let c = new_session(&mut client).await;
    let full = watch(&mut client, &c, 0).await.unwrap_err();
    assert_eq!(full.code(), Code::ResourceExhausted);
    assert!(
        full.message().contains("limits.max_watch_streams = 3"),
        "{}",
        full.message()
    );
    // Refused before its registration: c is watched by nobody.
    assert!(watch_replicas(&app, &c).await.is_empty());

    drop(a1);
    eventually("the dropped stream frees its slot", || slots() == 2).await;
    let _c1 = watch(&mut client, &c, 0).await.unwrap();
    assert_eq!(watch_replicas(&app, &c).await.len(), 1);
    assert_eq!(
        app.watch_metrics
            .slots
            .open_for(inquest_core::SessionId::parse(&a).unwrap()),
        1
    );
    app.stop().await.unwrap();
}

/// A watch refused with OUT_OF_RANGE (or NOT_FOUND) registers no watcher:
/// `sessions.watch_replicas` is unchanged (and appends to the session do
/// not start notifying); an accepted watch of the same session does
/// register, so the check can see a write.
#[tokio::test]
async fn a_refused_watch_writes_nothing() {
    let app = spawn_app().await;
    let mut client = app.client().await;
    let session = new_session(&mut client).await;
    assert!(watch_replicas(&app, &session).await.is_empty());
    let before = inquest_tests::connect(&app.db_url)
        .await
        .query_one(
            "SELECT updated_at, xmin::text FROM sessions WHERE id = $1",
            &[&uuid::Uuid::parse_str(&session).unwrap()],
        )
        .await
        .unwrap();
    let before: (time::OffsetDateTime, String) = (before.get(0), before.get(1));

    let refused = watch(&mut client, &session, 5).await.unwrap_err();
    assert_eq!(refused.code(), Code::OutOfRange, "{refused:?}");
    assert!(watch_replicas(&app, &session).await.is_empty());
    let after = inquest_tests::connect(&app.db_url)
        .await
        .query_one(
            "SELECT updated_at, xmin::text FROM sessions WHERE id = $1",
            &[&uuid::Uuid::parse_str(&session).unwrap()],
        )
        .await
        .unwrap();
    // No new row version: nothing wrote the session row at all.
    assert_eq!(before, (after.get(0), after.get(1)));

    let unknown = watch(&mut client, "00000000-0000-4000-8000-000000000000", 0)
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound);
    assert_eq!(app.watch_metrics.slots.open(), 0);

    let _accepted = watch(&mut client, &session, 1).await.unwrap();
    assert_eq!(watch_replicas(&app, &session).await.len(), 1);
    app.stop().await.unwrap();
}

/// A recovery notice over `limits.max_notice_bytes` is stored cut, with
/// the marker saying how much was cut, and the session goes on: a
/// follow-up to a session whose last assistant turn left 40 read-only
/// calls without results (a plan with 40 repairs) continues and lands.
#[tokio::test]
async fn a_long_recovery_notice_is_cut_with_a_marker_and_the_session_goes_on() {
    use inquest_core::{Role, Seq, SessionId, SideEffect, TokenUsage, Turn};
    use inquest_tests::resume::{
        fake_provider, incident, insert_session, insert_turn, send, settled, tool_classes, turns,
    };

    let fake = inquest_testkit::fake::FakeProvider::start(inquest_testkit::fake::Flavor::OpenAi)
        .await
        .unwrap();
    let cap = 1024;
    let app = spawn_app_with(|c| {
        c.providers = vec![fake_provider(&fake, "fake")];
        tool_classes(c, &[("grep_logs".to_owned(), SideEffect::ReadOnly)].into());
        c.limits.max_notice_bytes = cap;
    })
    .await;
    let mut client = app.client().await;
    let db = inquest_tests::connect(&app.db_url).await;
    let incident = incident(&mut client).await;
    let session = SessionId::new();
    let now = time::OffsetDateTime::now_utc();
    let user = Turn {
        session_id: session,
        seq: Seq::FIRST,
        role: Role::User,
        content: "why is checkout slow?".into(),
        tool_calls_raw: serde_json::json!([]),
        recovery_plan_raw: None,
        tool_call_id: None,
        tool_name: None,
        is_error: false,
        usage: TokenUsage::default(),
        created_at: now - time::Duration::seconds(60),
    };
    let calls: Vec<serde_json::Value> = (0..40)
        .map(|i| serde_json::json!({"id": format!("c{i}"), "name": "grep_logs", "arguments": {}}))
        .collect();
    let assistant = Turn {
        seq: Seq::from_stored(2).unwrap(),
        role: Role::Assistant,
        content: String::new(),
        tool_calls_raw: serde_json::Value::Array(calls),
        recovery_plan_raw: None,
        created_at: now - time::Duration::seconds(59),
        ..user.clone()
    };
    let stored = [user, assistant];
    insert_session(&db, incident, session, "idle", &stored).await;
    for t in &stored {
        insert_turn(&db, t).await.unwrap();
    }

    send(&mut client, session, "any news?").await.unwrap();
    let s = settled(&mut client, session).await;
    assert_eq!(s.status(), pb::SessionStatus::Idle, "{s:?}");
    assert_eq!(s.exit_reason, "awaiting_user");
    let all = turns(&mut client, session).await;
    let notice = all
        .iter()
        .find(|t| t.role() == pb::TurnRole::Notice)
        .expect("a recovery notice");
    let (kept, marker) = notice.content.split_once('…').expect("the cut marker");
    assert!(kept.len() <= cap && kept.starts_with("Recovery: interrupted_turn."));
    assert!(
        marker.starts_with("[cut by inquest: ")
            && marker.ends_with("more bytes of notice over limits.max_notice_bytes = 1024]"),
        "{marker}"
    );
    // The session went on past the notice, and GetSession has the whole
    // plan.
    assert_eq!(all.last().unwrap().role(), pb::TurnRole::Assistant);
    let plan = s.last_recovery_plan.expect("the whole plan");
    assert_eq!(plan.repaired_call_ids.len(), 40);
    app.stop().await.unwrap();
}
