//! Builders shared by the provider tests.

use std::time::Duration;

use inquest_agent::{AnthropicProvider, ApiKey, CompletionRequest, OpenAiProvider, ToolSpec};
use inquest_core::{Message, ToolArguments, ToolCall, Turn, rebuild_messages};
use inquest_testkit::{fake::FakeProvider, fixture::TranscriptFixture};
use serde_json::json;

pub const TIMEOUT: Duration = Duration::from_secs(20);

pub fn tools() -> Vec<ToolSpec> {
    vec![ToolSpec {
        name: "read_log".into(),
        description: "Reads a log file.".into(),
        input_schema: json!({"type": "object",
            "properties": {"file": {"type": "string"}}, "required": ["file"]}),
    }]
}

pub fn request<'a>(messages: &'a [Message], tools: &'a [ToolSpec]) -> CompletionRequest<'a> {
    CompletionRequest {
        system: "You investigate incidents.",
        messages,
        tools,
        max_tokens: 1024,
    }
}

pub fn anthropic(fake: &FakeProvider) -> AnthropicProvider {
    AnthropicProvider::new(
        &fake.base_url(),
        "claude-test",
        ApiKey::new("sk-ant-test"),
        TIMEOUT,
    )
    .expect("client builds")
}

pub fn openai(fake: &FakeProvider) -> OpenAiProvider {
    OpenAiProvider::new(
        &fake.base_url(),
        "gpt-test",
        Some(ApiKey::new("sk-test")),
        TIMEOUT,
    )
    .expect("client builds")
}

pub fn user(text: &str) -> Message<'static> {
    Message::User {
        text: text.to_owned().into(),
    }
}

pub fn assistant(text: &str, calls: &[(&str, &str)]) -> Message<'static> {
    Message::Assistant {
        text: text.to_owned().into(),
        tool_calls: calls
            .iter()
            .map(|(id, args)| ToolCall {
                id: (*id).into(),
                name: "read_log".into(),
                arguments: ToolArguments::from_model(args),
            })
            .map(Into::into)
            .collect(),
    }
}

pub fn result(id: &str, content: &str, is_error: bool) -> Message<'static> {
    Message::ToolResult {
        call_id: id.to_owned().into(),
        name: "read_log".into(),
        content: content.to_owned().into(),
        is_error,
    }
}

/// A stored session with a follow-up, an interrupted call, a call with
/// invalid JSON arguments, a notice, and a dangling call at the tail.
pub fn stored_turns() -> Vec<Turn> {
    let fixture = TranscriptFixture::from_json(
        r#"{"description": "provider test", "session_id": "00000000-0000-0000-0000-000000005e55",
        "turns": [
          {"seq": 1, "role": "user", "content": "checkout is slow"},
          {"seq": 2, "role": "assistant", "content": "",
           "tool_calls": [{"id": "c1", "name": "read_log", "arguments": {"file": "app.log"}},
                          {"id": "c2", "name": "read_log", "arguments": "{\"file\": app.log"}]},
          {"seq": 3, "role": "tool", "content": "pool exhausted", "tool_call_id": "c1", "tool_name": "read_log"},
          {"seq": 4, "role": "assistant", "content": "The pool is exhausted."},
          {"seq": 5, "role": "user", "content": "why?"},
          {"seq": 6, "role": "assistant", "content": "Checking the db log.",
           "tool_calls": [{"id": "c3", "name": "read_log", "arguments": {"file": "db.log"}}]},
          {"seq": 7, "role": "notice", "content": "recovered"},
          {"seq": 8, "role": "user", "content": "go on"}
        ]}"#,
    )
    .expect("fixture parses");
    fixture.turns().expect("fixture turns")
}

/// The stored turns rebuilt into a provider-valid transcript.
pub fn rebuilt_transcript() -> Vec<Message<'static>> {
    let turns = stored_turns();
    let rebuilt = rebuild_messages(&turns);
    assert!(!rebuilt.repairs.is_empty(), "the fixture needs repairs");
    rebuilt.into_owned_messages()
}

/// The stored turns mapped naively, without rebuild's repairs: c2 and c3
/// are never answered.
pub fn unrepaired_transcript() -> Vec<Message<'static>> {
    stored_turns()
        .iter()
        .filter_map(|t| match t.role {
            inquest_core::Role::User => Some(Message::User {
                text: t.content.clone().into(),
            }),
            inquest_core::Role::Assistant => Some(Message::Assistant {
                text: t.content.clone().into(),
                tool_calls: t
                    .tool_calls()
                    .expect("calls decode")
                    .into_iter()
                    .map(Into::into)
                    .collect(),
            }),
            inquest_core::Role::Tool => Some(Message::ToolResult {
                call_id: t.tool_call_id.clone().unwrap_or_default().into(),
                name: t.tool_name.clone().unwrap_or_default().into(),
                content: t.content.clone().into(),
                is_error: t.is_error,
            }),
            inquest_core::Role::Notice | inquest_core::Role::Compaction => None,
        })
        .collect()
}
