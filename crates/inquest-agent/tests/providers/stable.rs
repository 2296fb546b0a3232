//! Request bytes are stable: the transcript a burst builds as it goes and
//! the one a resume rebuilds from the stored turns serialize to the same
//! bytes, so a provider's prompt cache serves a resumed session's old part.

use inquest_agent::{CompletionRequest, ToolSpec, anthropic, openai};
use inquest_core::{Message, Role, Seq, SessionId, TokenUsage, ToolCall, Turn, rebuild_messages};
use inquest_testkit::fake::cache::{self, Prompt};
use serde_json::{Value, json};
use time::OffsetDateTime;

/// What the store hands back for a turn the loop appended: its tool calls
/// went through the `tool_calls` column as JSON text (jsonb keeps keys
/// sorted and numbers as written, which a `BTreeMap` `Map` already is).
fn stored(session: SessionId, seq: i64, role: Role, content: &str, calls: &[ToolCall]) -> Turn {
    let column = ToolCall::encode_all(calls).to_string();
    Turn {
        session_id: session,
        seq: Seq::from_stored(seq).unwrap(),
        role,
        content: content.to_owned(),
        tool_calls_raw: serde_json::from_str(&column).unwrap(),
        tool_call_id: None,
        recovery_plan_raw: None,
        tool_name: None,
        is_error: false,
        usage: TokenUsage::default(),
        created_at: OffsetDateTime::UNIX_EPOCH,
    }
}

fn tools() -> Vec<ToolSpec> {
    // Schemas as an MCP server lists them: keys in no particular order.
    let schema: Value = serde_json::from_str(
        r#"{"type": "object", "required": ["path"], "properties":
            {"path": {"type": "string"}, "max_lines": {"type": "integer"}, "start_line": {"type": "integer"}}}"#,
    )
    .unwrap();
    ["read_file", "search"]
        .into_iter()
        .map(|name| ToolSpec {
            name: name.into(),
            description: format!("{name} over the evidence"),
            input_schema: schema.clone(),
        })
        .collect()
}

/// Plays a burst as the loop does (each reply parsed by the adapter, the
/// live transcript extended as `Agent::work` extends it) and stores its
/// turns; returns the live transcript after each model call's results.
fn play(session: SessionId) -> (Vec<Vec<Message<'static>>>, Vec<Turn>) {
    let opening = "Checkout is slow. Why?";
    let mut turns = vec![stored(session, 1, Role::User, opening, &[])];
    let mut live = rebuild_messages(&turns).into_owned_messages();
    let mut snapshots = Vec::new();
    // Arguments with keys out of order, nested objects, floats and unicode.
    let replies = [
        json!({"content": [{"type": "text", "text": "Reading the log."},
            {"type": "tool_use", "id": "toolu_1", "name": "read_file",
             "input": {"start_line": 1, "path": "app.log", "max_lines": 50}}],
            "stop_reason": "tool_use", "usage": {"input_tokens": 10, "output_tokens": 5}}),
        json!({"content": [{"type": "tool_use", "id": "toolu_2", "name": "search",
             "input": {"z": {"b": 2.5, "a": [1, 0.1, -3e-7]}, "pattern": "p99 — über"}},
            {"type": "tool_use", "id": "toolu_3", "name": "read_file", "input": {"path": "db.log"}}],
            "stop_reason": "tool_use", "usage": {"input_tokens": 10, "output_tokens": 5}}),
    ];
    for reply in replies {
        let completion = anthropic::parse_response(&reply).unwrap();
        let seq = turns.len() as i64 + 1;
        turns.push(stored(
            session,
            seq,
            Role::Assistant,
            &completion.text,
            &completion.tool_calls,
        ));
        live.push(Message::Assistant {
            text: completion.text.clone().into(),
            tool_calls: completion
                .tool_calls
                .iter()
                .cloned()
                .map(Into::into)
                .collect(),
        });
        for call in &completion.tool_calls {
            let content = format!("{} lines of {}", 40, call.name);
            let seq = turns.len() as i64 + 1;
            let mut result = stored(session, seq, Role::Tool, &content, &[]);
            result.tool_call_id = Some(call.id.clone());
            result.tool_name = Some(call.name.clone());
            turns.push(result);
            live.push(Message::ToolResult {
                call_id: call.id.clone().into(),
                name: call.name.clone().into(),
                content: content.into(),
                is_error: false,
            });
        }
        snapshots.push(live.clone());
    }
    (snapshots, turns)
}

fn bodies(messages: &[Message<'_>], tools: &[ToolSpec]) -> [Vec<u8>; 2] {
    let request = CompletionRequest {
        system: "You investigate incidents.",
        messages,
        tools,
        max_tokens: 1024,
    };
    [
        serde_json::to_vec(&anthropic::request_body("m", &request)).unwrap(),
        serde_json::to_vec(&openai::request_body("m", &request)).unwrap(),
    ]
}

fn prompts(body: &[Vec<u8>; 2]) -> [Prompt; 2] {
    let parse = |b: &[u8]| serde_json::from_slice::<Value>(b).unwrap();
    [
        cache::anthropic(&parse(&body[0])),
        cache::openai(&parse(&body[1])),
    ]
}

#[test]
fn a_resume_rebuilds_the_same_request_bytes_and_the_next_call_extends_them() {
    let session = SessionId::new();
    let tools = tools();
    let (snapshots, turns) = play(session);
    let live = snapshots.last().unwrap();
    // A resume: the stored turns, read back, rebuilt.
    let rebuilt = rebuild_messages(&turns).messages;
    assert_eq!(&rebuilt, live);
    let (live_bytes, rebuilt_bytes) = (bodies(live, &tools), bodies(&rebuilt, &tools));
    assert_eq!(
        live_bytes, rebuilt_bytes,
        "byte for byte, both wire formats"
    );
    // Building the same request again gives the same bytes too.
    assert_eq!(bodies(live, &tools), live_bytes);

    // Each call of the burst repeats the previous one's prompt in full (in
    // the provider's cache order, breakpoints aside).
    let first = prompts(&bodies(&snapshots[0], &tools));
    let second = prompts(&live_bytes);
    for (a, b) in first.iter().zip(&second) {
        assert!(b.text.len() > a.text.len());
        assert_eq!(b.shared_prefix(a), a.text.len());
    }
    // And a follow-up after the resume repeats the whole old request.
    let mut follow_up = rebuilt.clone();
    follow_up.push(Message::User {
        text: "and the database?".into(),
    });
    let next = prompts(&bodies(&follow_up, &tools));
    for (a, b) in second.iter().zip(&next) {
        assert_eq!(b.shared_prefix(a), a.text.len());
    }
    // The raw Anthropic bytes agree up to the old newest block, where the
    // moved breakpoint starts (`cache_control` sorts first in its block).
    let old = String::from_utf8(live_bytes[0].clone()).unwrap();
    let new = String::from_utf8(bodies(&follow_up, &tools)[0].clone()).unwrap();
    let marker = old
        .rfind(r#"{"cache_control":{"type":"ephemeral"},"content""#)
        .unwrap();
    assert_eq!(old[..marker], new[..marker]);
}
