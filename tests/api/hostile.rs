//! Hostile input: text PostgreSQL refuses. U+0000 from every
//! source — a model's text, tool-call arguments, ids and names, an MCP
//! result, a user message, an incident, a
//! report — is stored losslessly (the encoding of `inquest-store/src/text.rs`),
//! read back, watched and sent to the model again exactly as it was, and
//! announced to other replicas exactly as it was. A NUL-padded file the
//! built-in tools read is binary to them: described, escaped
//! (`caps_tools.rs`).

use std::{path::PathBuf, time::Duration};

use inquest_agent::McpSection;
use inquest_core::{
    ExitReason, IdempotencyKey, IncidentId, IncidentText, Limits, NewTurn, SessionId, TokenUsage,
    ToolArguments, ToolCall, UserMessage,
};
use inquest_proto::v1::{self as pb, watch_event::Event};
use inquest_store::{
    NewReport, ReplicaId, SendOutcome, Store, StoreConfig, WriteId,
    listen::ListenEvent,
    notify::{CHANNEL, Notification},
};
use inquest_testkit::{
    fake::{FakeProvider, FakeReply, Flavor},
    mcp,
};
use inquest_tests::{
    spawn_app, spawn_app_with,
    watching::{collect, next, watch},
};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::agent_support::{Gate, assert_ended, finished, provider_at, send, turns};

/// A directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(what: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "inquest-hostile-{what}-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A NUL-padded log, with the store's escape character (U+E000) in it too.
const NUL_LOG: &[u8] = b"boot ok\n\0\0\0\0 padded\nesc \xee\x80\x80 char\nend\n";

/// Arguments of a well-formed call: NUL in a key and in a value (the JSON
/// escape, as a model sends it; canonical, so `as sent` is this text).
const ARGS: &str = r#"{"path":"nul.log","why\u0000":"a\u0000b"}"#;
/// Arguments that are not JSON, holding a raw NUL: kept exactly as sent.
const RAW_ARGS: &str = "{\"path\": \"nul\0";

/// The stored row of one turn: (content, escaped flag).
async fn raw_row(app: &inquest_tests::TestApp, session: &str, seq: i64) -> (String, bool) {
    let row = inquest_tests::connect(&app.db_url)
        .await
        .query_one(
            "SELECT content, escaped FROM turns WHERE session_id = $1 AND seq = $2",
            &[&uuid::Uuid::parse_str(session).unwrap(), &seq],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1))
}

/// The messages of a recorded OpenAI request.
fn messages(body: &Value) -> &Vec<Value> {
    body["messages"].as_array().expect("messages")
}

#[tokio::test]
async fn nul_from_the_model_a_file_and_the_user_is_kept_watched_and_sent_back() {
    let evidence = TempDir::new("evidence");
    std::fs::write(evidence.0.join("nul.log"), NUL_LOG).unwrap();
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(
        FakeReply::text("before\0after")
            // An id with NUL is not one every provider takes: the loop
            // stores a session-unique id of its own instead (`inq_2_0`).
            .call("call\0one", "read_file", ARGS)
            .call("call-2", "read_file", RAW_ARGS)
            .call("call-3", "no\0such", "{}"),
    )
    // No NUL, but the escape character and what follows it for a NUL:
    // stored exactly as it is, unflagged.
    .reply(FakeReply::text("found it: \u{E000}0 is not a NUL"))
    .reply(FakeReply::text("sum\0mary"))
    .reply(FakeReply::text("ok\0done"))
    .reply(FakeReply::text("S\u{0}2"));
    // Answers wait until a watcher is attached: it sees the burst live.
    let gate = Gate::in_front_of(&fake).await;
    let entry = provider_at(Flavor::OpenAi, "fake", gate.base_url(&fake));
    let root = evidence.0.clone();
    let app = spawn_app_with(move |c| {
        c.providers = vec![entry];
        c.tools.files_root = Some(root);
        c.tools.files_server = Some("evidence".into());
    })
    .await;
    let mut client = app.client().await;

    // An incident and a first message with NUL: accepted, kept.
    let incident = client
        .create_incident(pb::CreateIncidentRequest {
            title: "disk\0full".into(),
            description: "d\0".into(),
        })
        .await
        .expect("create incident")
        .into_inner();
    assert_eq!(
        (incident.title.as_str(), incident.description.as_str()),
        ("disk\0full", "d\0")
    );
    let stored = app
        .store
        .get_incident(
            &inquest_core::Tenant::default_tenant(),
            IncidentId::parse(&incident.id).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(
        (stored.title.as_str(), stored.description.as_str()),
        ("disk\0full", "d\0")
    );
    let id = client
        .start_session(pb::StartSessionRequest {
            incident_id: incident.id,
            message: "why\0?".into(),
            idempotency_key: String::new(),
        })
        .await
        .expect("start session")
        .into_inner()
        .id;

    let mut live = watch(&mut client, &id, 0).await.unwrap();
    let first = next(&mut live).await.unwrap().expect("the user turn");
    gate.open();
    let (mut live_events, ending) = collect(live).await;
    live_events.insert(0, first);
    assert!(ending.is_ok(), "{ending:?}");

    let (report, s) = finished(&mut client, &id, 1).await;
    assert_eq!(report.exit_reason, "completed");
    assert_eq!(report.summary, "sum\0mary");
    assert_ended(&s, pb::SessionStatus::Completed, "completed");

    let stored = turns(&mut client, &id).await;
    assert_eq!(stored.len(), 6, "{stored:?}");
    assert_eq!(
        (stored[0].role(), stored[0].content.as_str()),
        (pb::TurnRole::User, "why\0?")
    );
    assert_eq!(stored[1].content, "before\0after");
    let calls: Vec<_> = stored[1]
        .tool_calls
        .iter()
        .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments_json.as_str()))
        .collect();
    assert_eq!(
        calls,
        [
            ("inq_2_0", "read_file", ARGS),
            ("call-2", "read_file", RAW_ARGS),
            ("call-3", "no\0such", "{}"),
        ]
    );
    let results: Vec<_> = stored[2..5]
        .iter()
        .map(|t| (t.tool_call_id.as_str(), t.tool_name.as_str(), t.is_error))
        .collect();
    assert_eq!(
        results,
        [
            ("inq_2_0", "read_file", false),
            ("call-2", "read_file", true),
            ("call-3", "no\0such", true),
        ]
    );
    // A NUL-padded file is binary to the file tools: its size and an
    // escaped prefix (NUL in a tool result itself: the MCP test below).
    let file = stored[2].content.as_str();
    assert_eq!(
        file,
        format!(
            "binary file, {} bytes; first {} bytes escaped: \
             boot ok\\n\\x00\\x00\\x00\\x00 padded\\nesc \\xee\\x80\\x80 char\\nend\\n",
            NUL_LOG.len(),
            NUL_LOG.len()
        )
    );
    assert_eq!(stored[5].content, "found it: \u{E000}0 is not a NUL");

    // Stored escaped where it held NUL, and exactly as it is elsewhere.
    assert_eq!(
        raw_row(&app, &id, 2).await,
        ("before\u{E000}0after".to_owned(), true)
    );
    assert_eq!(
        raw_row(&app, &id, 6).await,
        ("found it: \u{E000}0 is not a NUL".to_owned(), false)
    );

    // Watchers: live (the broadcaster) and from the store (the drain), the
    // very turns ListTurns returns.
    let turns_of = |events: &[Event]| -> Vec<pb::SessionTurn> {
        events
            .iter()
            .filter_map(|e| match e {
                Event::Turn(t) => Some(t.clone()),
                _ => None,
            })
            .collect()
    };
    assert_eq!(turns_of(&live_events), stored);
    let starts: Vec<_> = live_events
        .iter()
        .filter_map(|e| match e {
            Event::ToolCallStart(s) => Some((s.call_id.as_str(), s.tool_name.as_str())),
            _ => None,
        })
        .collect();
    assert!(starts.contains(&("inq_2_0", "read_file")), "{starts:?}");
    let (drained, ending) = collect(watch(&mut client, &id, 0).await.unwrap()).await;
    assert!(ending.is_ok(), "{ending:?}");
    assert_eq!(turns_of(&drained), stored);

    // A follow-up with NUL: the model gets the whole history back exactly.
    let seq = send(&mut client, &id, "and\0then?").await;
    let (report, s) = finished(&mut client, &id, 2).await;
    assert_eq!(report.summary, "S\u{0}2");
    assert_ended(&s, pb::SessionStatus::Idle, "awaiting_user");
    let after = turns(&mut client, &id).await;
    assert_eq!(after[..6], stored[..]);
    assert_eq!(after[seq as usize - 1].content, "and\0then?");
    assert_eq!(after.last().unwrap().content, "ok\0done");

    let requests = fake.requests();
    assert_eq!(requests.len(), 5);
    let sent = messages(&requests[3].body);
    let roles: Vec<&str> = sent.iter().filter_map(|m| m["role"].as_str()).collect();
    assert_eq!(
        roles,
        [
            "system",
            "user",
            "assistant",
            "tool",
            "tool",
            "tool",
            "assistant",
            "user"
        ]
    );
    assert_eq!(sent[1]["content"], "why\0?");
    assert_eq!(sent[2]["content"], "before\0after");
    let sent_calls: Vec<_> = sent[2]["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["id"].as_str().unwrap(),
                c["function"]["name"].as_str().unwrap(),
                c["function"]["arguments"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(sent_calls, calls);
    assert_eq!(sent[3]["tool_call_id"], "inq_2_0");
    assert_eq!(sent[3]["content"], file);
    assert_eq!(sent[5]["tool_call_id"], "call-3");
    assert_eq!(sent[6]["content"], "found it: \u{E000}0 is not a NUL");
    assert_eq!(sent[7]["content"], "and\0then?");
    app.stop().await.unwrap();
}

#[tokio::test]
async fn an_mcp_result_with_nul_is_kept_and_sent_back() {
    let Some(python) = mcp::python() else {
        return;
    };
    let dir = TempDir::new("mcp");
    let file = dir.0.join("mcp.json");
    let servers = json!({"mcpServers": {"incident": {
        "command": python,
        "args": [mcp::incident_tools_script().display().to_string()],
    }}});
    std::fs::write(&file, servers.to_string()).unwrap();
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    // `page_oncall` answers "paged: {message}": the NUL comes back from
    // the MCP server in its result.
    fake.reply(FakeReply::text("Paging.").call(
        "p1",
        "page_oncall",
        r#"{"message":"disk\u0000full"}"#,
    ))
    .reply(FakeReply::text("Paged."))
    .reply(FakeReply::text("S1"))
    .reply(FakeReply::text("Done."))
    .reply(FakeReply::text("S2"));
    let entry = provider_at(Flavor::OpenAi, "fake", fake.base_url());
    let app = spawn_app_with(|c| {
        c.providers = vec![entry];
        c.mcp = Some(McpSection::new(&file));
    })
    .await;
    let mut client = app.client().await;
    let id = crate::agent_support::start(&mut client, "page someone").await;
    let (report, _) = finished(&mut client, &id, 1).await;
    assert_eq!(report.exit_reason, "completed");
    let stored = turns(&mut client, &id).await;
    assert_eq!(stored[2].tool_call_id, "p1");
    assert!(!stored[2].is_error, "{:?}", stored[2]);
    assert!(
        stored[2].content.contains("paged: disk\0full"),
        "{:?}",
        stored[2].content
    );
    send(&mut client, &id, "and now?").await;
    finished(&mut client, &id, 2).await;
    let requests = fake.requests();
    let sent = messages(&requests[3].body);
    assert_eq!(sent[3]["role"], "tool");
    assert_eq!(sent[3]["content"], stored[2].content.as_str());
    app.stop().await.unwrap();
}

fn store_as(url: &str, replica: &str) -> Store {
    let mut config = StoreConfig::new(url);
    config.max_connections = 2;
    config.replica_id = ReplicaId::parse(replica).unwrap();
    Store::connect(&config).unwrap()
}

/// Notifications until `marker` (sent after the writes under test; NOTIFY
/// is delivered in commit order).
async fn until_marker(
    url: &str,
    rx: &mut mpsc::UnboundedReceiver<ListenEvent>,
    marker: &str,
) -> Vec<Notification> {
    inquest_tests::connect(url)
        .await
        .execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &marker])
        .await
        .unwrap();
    let mut seen = Vec::new();
    loop {
        let event = tokio::time::timeout(Duration::from_secs(30), rx.recv())
            .await
            .expect("the marker never arrived")
            .expect("listener ended");
        if let ListenEvent::Notification(payload) = event {
            if payload == marker {
                return seen;
            }
            seen.push(Notification::parse(&payload).unwrap());
        }
    }
}

/// Every store path that writes or reads text, at the store level, and the
/// cross-replica announcement of turns holding NUL (inline and by seq).
#[tokio::test]
async fn every_store_path_keeps_nul_and_other_replicas_get_it_exactly() {
    let app = spawn_app().await;
    let a = store_as(&app.db_url, "replica-a");
    let b = store_as(&app.db_url, "replica-b");
    let mut listening = crate::leases::Listening::start(&app.db_url).await;
    let limits = Limits::default();
    let incident = a
        .create_incident(
            &inquest_core::Tenant::default_tenant(),
            &IncidentText::parse("t\0".into(), "\0\u{E000}".into(), &limits).unwrap(),
        )
        .await
        .unwrap();
    let read = b
        .get_incident(&inquest_core::Tenant::default_tenant(), incident.id)
        .await
        .unwrap();
    assert_eq!(read, incident);
    assert_eq!(read.description, "\0\u{E000}");

    // StartSession, and its retry under the same key (read back).
    let key = IdempotencyKey::parse_optional("k1".into()).unwrap();
    let message = UserMessage::parse("first\0".into(), &limits).unwrap();
    let started = a
        .start_session(
            &inquest_core::Tenant::default_tenant(),
            inquest_core::TenantQuota::UNLIMITED,
            incident.id,
            message.clone(),
            key.clone(),
        )
        .await
        .unwrap();
    assert_eq!(started.first_turn.content, "first\0");
    let again = a
        .start_session(
            &inquest_core::Tenant::default_tenant(),
            inquest_core::TenantQuota::UNLIMITED,
            incident.id,
            message,
            key,
        )
        .await
        .unwrap();
    assert!(!again.created);
    assert_eq!(again.first_turn, started.first_turn);
    let session: SessionId = started.session.id;

    let lease = a.claim_pending(session).await.unwrap().unwrap();
    b.register_watcher(session).await.unwrap();
    let assistant = NewTurn::Assistant {
        text: "x\0y".into(),
        tool_calls: vec![ToolCall {
            id: "c\0".into(),
            name: "n\0".into(),
            arguments: ToolArguments::from_model(r#"{"k\u0000":["\u0000",1]}"#),
        }],
        usage: TokenUsage::default(),
    };
    // A write sent twice under one write id: the second finds the first.
    let write = WriteId::new();
    let call = a
        .append_turn_leased(&lease, write, assistant.clone())
        .await
        .unwrap()
        .turn;
    let retried = a
        .append_turn_leased(&lease, write, assistant)
        .await
        .unwrap()
        .turn;
    assert_eq!(retried, call);
    a.notify_tool_call_start(session, call.seq, "c\0", "n\0", call.created_at)
        .await
        .unwrap();
    let result = a
        .append_turn_leased(
            &lease,
            WriteId::new(),
            NewTurn::Tool {
                call_id: "c\0".into(),
                tool_name: "n\0".into(),
                content: "r\0\u{E000}".into(),
                is_error: false,
            },
        )
        .await
        .unwrap()
        .turn;
    // A recovery notice whose plan alone holds NUL (and the escape
    // character): the row is escaped for its plan, which rides inline.
    let mut plan =
        inquest_core::plan_recovery(session, &[], &|_: &str| inquest_core::SideEffect::Mutating);
    plan.repaired_call_ids = vec!["c\0".into(), "\u{E000}0".into()];
    let notice = a
        .append_turn_leased(
            &lease,
            WriteId::new(),
            NewTurn::Notice {
                text: "Recovery: repaired".into(),
                plan: Some(Box::new(inquest_core::notice_plan(&plan))),
            },
        )
        .await
        .unwrap()
        .turn;
    assert_eq!(notice.repaired_call_ids(), ["c\0", "\u{E000}0"]);
    // Too large to inline: announced by seq, fetched escaped and decoded.
    let big = a
        .append_turn_leased(
            &lease,
            WriteId::new(),
            NewTurn::notice(format!("{}\0", "\0".repeat(5_000))),
        )
        .await
        .unwrap()
        .turn;
    let seen = until_marker(&app.db_url, &mut listening.rx, "m1").await;
    let inline: Vec<_> = seen
        .iter()
        .filter_map(|n| match n {
            Notification::Turn { turn: Some(t), .. } => Some(t.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(inline, [call.clone(), result.clone(), notice.clone()]);
    assert!(seen.iter().any(|n| matches!(
        n,
        Notification::ToolCallStart { call_id, tool_name, .. } if call_id == "c\0" && tool_name == "n\0"
    )));
    assert!(
        seen.iter()
            .any(|n| matches!(n, Notification::Turn { seq, turn: None, .. } if *seq == big.seq))
    );
    assert_eq!(b.get_turn(session, big.seq).await.unwrap().unwrap(), big);
    assert_eq!(
        b.all_turns(session).await.unwrap(),
        [started.first_turn.clone(), call, result, notice, big]
    );

    // A recovery plan and a report holding NUL.
    let plan = json!({"notice_text": "n\0", "repaired_call_ids": ["c\0"], "\0": "\u{E000}"});
    a.save_recovery_plan(&lease, plan.clone(), false)
        .await
        .unwrap();
    assert_eq!(
        b.get_session(session).await.unwrap().last_recovery_plan,
        Some(plan)
    );
    let report = a
        .save_report(
            &lease,
            NewReport {
                burst: 1,
                exit_reason: ExitReason::AwaitingUser,
                summary: "s\0".into(),
                counters: json!({"servers_used": ["e\0"]}),
                active_ms: 1,
            },
        )
        .await
        .unwrap();
    assert_eq!(report.summary, "s\0");
    assert_eq!(b.get_report(session, None).await.unwrap(), report);

    // SendMessage, and its retry under the same key (read back).
    a.close_burst(&lease, ExitReason::AwaitingUser)
        .await
        .unwrap();
    let key = IdempotencyKey::parse_optional("k2".into()).unwrap();
    let message = UserMessage::parse("then\0".into(), &limits).unwrap();
    let SendOutcome::Sent { turn: sent, .. } = a
        .send_message(
            &inquest_core::Tenant::default_tenant(),
            inquest_core::TenantQuota::UNLIMITED,
            session,
            message.clone(),
            key.clone(),
        )
        .await
        .unwrap()
    else {
        panic!("not sent");
    };
    assert_eq!(sent.content, "then\0");
    let SendOutcome::Sent {
        turn: replayed,
        created: false,
    } = a
        .send_message(
            &inquest_core::Tenant::default_tenant(),
            inquest_core::TenantQuota::UNLIMITED,
            session,
            message,
            key,
        )
        .await
        .unwrap()
    else {
        panic!("not replayed");
    };
    assert_eq!(replayed, sent);
    assert_eq!(b.all_turns(session).await.unwrap().last(), Some(&*sent));

    listening.stop().await;
    app.stop().await.unwrap();
}
