//! Tool-call ids are unique within a session, whatever the provider sent:
//! an OpenAI-compatible server that leaves ids out, and one that numbers
//! them per reply (`call_0` in every turn). Over three tool-calling turns
//! and a follow-up, every place an id shows up agrees on one unique id per
//! call: the stored calls and the results that answer them, the watch
//! stream's `ToolCallStart`s, the MCP idempotency key a real MCP server
//! receives, and the rebuilt transcript the strict fake accepts.

use std::collections::HashSet;

use inquest_agent::McpSection;
use inquest_core::{SessionId, tool_idempotency_key};
use inquest_proto::v1::{self as pb, watch_event::Event};
use inquest_testkit::{
    fake::{FakeProvider, FakeReply, Flavor},
    mcp,
};
use inquest_tests::{
    spawn_app_with,
    watching::{collect, next, watch},
};

use crate::{
    agent_mcp::McpFile,
    agent_support::{
        Gate, assert_ended, eventually, evidence_tools, finished, provider_at, send, start, turns,
    },
};

/// What the fake provider sends as ids.
#[derive(Clone, Copy, Debug)]
enum Ids {
    /// No `id` field at all.
    Missing,
    /// `call_{k}` for the k-th call of each reply: the same ids every turn.
    PerReply,
}

/// Adds the `k`-th call of a reply, with an id as `ids` says.
fn call(reply: FakeReply, ids: Ids, k: usize, name: &str, arguments: &str) -> FakeReply {
    match ids {
        Ids::Missing => reply.call_without_id(name, arguments),
        Ids::PerReply => reply.call(&format!("call_{k}"), name, arguments),
    }
}

/// Runs the session and checks every place an id shows up; `expected` are
/// the stored ids of the four calls, in order.
async fn ids_are_unique_everywhere(ids: Ids, expected: [&str; 4]) {
    let Some(python) = mcp::python() else {
        return;
    };
    let mcp = McpFile::new(&python);
    let fake = FakeProvider::start(Flavor::OpenAi).await.unwrap();
    fake.reply(call(
        FakeReply::text("Turn one."),
        ids,
        0,
        "echo_meta",
        "{}",
    ))
    .reply(call(
        call(FakeReply::text("Turn two."), ids, 0, "echo_meta", "{}"),
        ids,
        1,
        "list_files",
        "{}",
    ))
    .reply(call(
        FakeReply::text("Turn three."),
        ids,
        0,
        "echo_meta",
        "{}",
    ))
    .reply(FakeReply::text("Done."))
    .reply(FakeReply::text("S1"))
    .reply(FakeReply::text("The database is fine."))
    .reply(FakeReply::text("S2"));
    // Every answer is held back until the watcher is attached, so it sees
    // every start.
    let gate = Gate::in_front_of(&fake).await;
    let entry = provider_at(Flavor::OpenAi, "no-ids", gate.base_url(&fake));
    let section = McpSection::new(&mcp.file);
    let app = spawn_app_with(|c| {
        c.providers = vec![entry];
        evidence_tools(c);
        c.mcp = Some(section);
    })
    .await;
    let mut client = app.client().await;
    let id = start(&mut client, "why is checkout slow?").await;
    let sid = SessionId::parse(&id).unwrap();

    let mut stream = watch(&mut client, &id, 0).await.unwrap();
    let first = next(&mut stream).await.unwrap();
    assert!(matches!(&first, Some(Event::Turn(t)) if t.seq == 1));
    eventually("the first model call", || fake.request_count() == 1).await;
    gate.open();
    let (events, ending) = collect(stream).await;
    ending.expect("the stream ends cleanly with the burst");

    let (report, s) = finished(&mut client, &id, 1).await;
    assert_eq!(report.exit_reason, "completed");
    assert_eq!(report.tool_calls, 4);
    assert_ended(&s, pb::SessionStatus::Completed, "completed");

    // Stored: four calls with the expected, distinct ids; each answered by
    // the result turns right after its assistant turn, in call order.
    let stored = turns(&mut client, &id).await;
    let mut calls: Vec<(i64, String, String)> = Vec::new();
    for (i, turn) in stored.iter().enumerate() {
        for (k, c) in turn.tool_calls.iter().enumerate() {
            calls.push((turn.seq, c.id.clone(), c.name.clone()));
            let result = &stored[i + 1 + k];
            assert_eq!(result.role(), pb::TurnRole::Tool, "{result:?}");
            assert_eq!(
                result.tool_call_id, c.id,
                "result of {} at {}",
                c.id, result.seq
            );
            assert!(!result.is_error, "{result:?}");
        }
    }
    let stored_ids: Vec<&str> = calls.iter().map(|(_, id, _)| id.as_str()).collect();
    assert_eq!(stored_ids, expected, "{ids:?}");
    assert_eq!(
        stored_ids.iter().collect::<HashSet<_>>().len(),
        4,
        "ids repeat"
    );

    // Watched: one start per call, with its stored id and requesting turn;
    // none was taken for an earlier call's start and dropped.
    let starts: Vec<(i64, String, String)> = events
        .iter()
        .filter_map(|e| match e {
            Event::ToolCallStart(s) => {
                Some((s.assistant_seq, s.call_id.clone(), s.tool_name.clone()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(starts, calls, "the starts a watcher saw");

    // The MCP server received one distinct idempotency key per call, made
    // from the stored id.
    let mut keys = HashSet::new();
    for (_, call_id, name) in &calls {
        if name != "echo_meta" {
            continue;
        }
        let result = stored
            .iter()
            .find(|t| t.tool_call_id == *call_id)
            .expect("a result");
        let key = tool_idempotency_key(sid, call_id);
        assert!(
            result
                .content
                .contains(&format!("\"idempotency_key\": \"{key}\"")),
            "{} lacks {key}",
            result.content
        );
        assert!(keys.insert(key), "idempotency key repeats");
    }
    assert_eq!(keys.len(), 3);

    // A follow-up: the rebuilt transcript (the strict fake refuses tool
    // messages that answer no preceding call) carries the same ids.
    send(&mut client, &id, "and the database?").await;
    let (report2, s) = finished(&mut client, &id, 2).await;
    assert_eq!(report2.exit_reason, "awaiting_user");
    assert_eq!(report2.summary, "S2");
    assert_ended(&s, pb::SessionStatus::Idle, "awaiting_user");
    let requests = fake.requests();
    let follow_up = &requests[5].body["messages"];
    let sent: Vec<String> = follow_up
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["tool_calls"].as_array().cloned().unwrap_or_default())
        .map(|c| c["id"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(sent, expected, "ids in the rebuilt transcript");
    let answered: Vec<String> = follow_up
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["tool_call_id"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(answered, expected, "results in the rebuilt transcript");
    app.stop().await.unwrap();
}

#[tokio::test]
async fn a_provider_that_sends_no_ids_gets_session_unique_ones_everywhere() {
    ids_are_unique_everywhere(Ids::Missing, ["inq_2_0", "inq_4_0", "inq_4_1", "inq_7_0"]).await;
}

#[tokio::test]
async fn ids_a_provider_repeats_across_turns_are_replaced_everywhere() {
    // `call_0` is new in turn 2 and kept; its repeats get ours. `call_1`
    // is new in turn 4 and kept.
    ids_are_unique_everywhere(Ids::PerReply, ["call_0", "inq_4_0", "call_1", "inq_7_0"]).await;
}
