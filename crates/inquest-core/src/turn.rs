//! Turns: the durable rows of a session's transcript.
//!
//! A [`NewTurn`] is what a writer hands to the store; its shape depends on
//! its role, so a user turn cannot carry tool calls and a tool result cannot
//! lack the call it answers. A [`Turn`] is what the store hands back, seq and
//! timestamp included.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;

use crate::{SessionId, UserMessage, seq::Seq};

/// Who produced a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Assistant,
    Tool,
    /// A system record shown to humans and never sent to a model.
    Notice,
}

impl Role {
    pub const ALL: [Role; 4] = [Role::User, Role::Assistant, Role::Tool, Role::Notice];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
            Role::Notice => "notice",
        }
    }

    pub fn parse(text: &str) -> Option<Role> {
        Self::ALL.into_iter().find(|r| r.as_str() == text)
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Tool-call arguments as the model sent them.
///
/// Arguments that are a JSON object are kept as JSON. Anything else (text
/// that does not parse, or JSON that is not an object) is kept verbatim and
/// stored as a JSON string, so it can be shown back exactly as sent. A
/// stored JSON string therefore always means "raw text".
#[derive(Debug, Clone, PartialEq)]
pub enum ToolArguments {
    Json(serde_json::Map<String, Value>),
    Raw(String),
}

impl ToolArguments {
    /// Classifies arguments text as received from a model.
    pub fn from_model(text: &str) -> Self {
        match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(map)) => ToolArguments::Json(map),
            _ => ToolArguments::Raw(text.to_owned()),
        }
    }

    /// The value stored in the `tool_calls` column.
    pub fn to_stored(&self) -> Value {
        match self {
            ToolArguments::Json(map) => Value::Object(map.clone()),
            ToolArguments::Raw(text) => Value::String(text.clone()),
        }
    }

    /// Reads a stored value back. `None` for shapes no writer produces.
    pub fn from_stored(value: &Value) -> Option<Self> {
        match value {
            Value::Object(map) => Some(ToolArguments::Json(map.clone())),
            Value::String(text) => Some(ToolArguments::Raw(text.clone())),
            _ => None,
        }
    }

    /// The arguments as text, as the model sent them.
    pub fn as_sent(&self) -> String {
        match self {
            ToolArguments::Json(map) => Value::Object(map.clone()).to_string(),
            ToolArguments::Raw(text) => text.clone(),
        }
    }

    /// Whether the model's arguments were a well-formed JSON object.
    pub fn is_valid_json(&self) -> bool {
        matches!(self, ToolArguments::Json(_))
    }
}

/// One tool call requested by an assistant turn.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The provider's call id; a tool result names it.
    pub id: String,
    pub name: String,
    pub arguments: ToolArguments,
}

#[derive(Serialize, Deserialize)]
struct StoredCall {
    id: String,
    name: String,
    arguments: Value,
}

/// Why a stored `tool_calls` value could not be read back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("stored tool calls do not decode: {0}")]
pub struct ToolCallsDecodeError(String);

impl ToolCall {
    /// Encodes calls for the `tool_calls` column.
    pub fn encode_all(calls: &[ToolCall]) -> Value {
        Value::Array(
            calls
                .iter()
                .map(|c| {
                    serde_json::json!({
                        "id": c.id,
                        "name": c.name,
                        "arguments": c.arguments.to_stored(),
                    })
                })
                .collect(),
        )
    }

    /// Decodes the `tool_calls` column; the inverse of [`ToolCall::encode_all`].
    pub fn decode_all(value: &Value) -> Result<Vec<ToolCall>, ToolCallsDecodeError> {
        // From a reference: no copy of the whole column first.
        let stored = Vec::<StoredCall>::deserialize(value)
            .map_err(|e| ToolCallsDecodeError(e.to_string()))?;
        stored
            .into_iter()
            .map(|c| {
                let arguments = ToolArguments::from_stored(&c.arguments).ok_or_else(|| {
                    ToolCallsDecodeError(format!(
                        "arguments of call {:?} are not an object or a string",
                        c.id
                    ))
                })?;
                Ok(ToolCall {
                    id: c.id,
                    name: c.name,
                    arguments,
                })
            })
            .collect()
    }
}

/// Tokens a model call consumed, as the provider reported them, and what
/// they cost.
///
/// `input_tokens` counts every prompt token, cached ones included; the two
/// cache counts are the parts of it the provider read from its prompt
/// cache and wrote to it (Anthropic `cache_read_input_tokens` /
/// `cache_creation_input_tokens`, OpenAI
/// `prompt_tokens_details.cached_tokens`, which has no write count).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TokenUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    // Prompt caching and cost (issue 13 items 4–5; migration V13).
    /// Of `input_tokens`: read from the provider's prompt cache.
    #[serde(default)]
    pub cache_read_input_tokens: u64,
    /// Of `input_tokens`: written to the provider's prompt cache.
    #[serde(default)]
    pub cache_creation_input_tokens: u64,
    /// What the call cost at the configured price of the provider that
    /// answered it (`crate::cost`); `None` = unknown (no price configured),
    /// never a made-up zero.
    #[serde(default)]
    pub cost: Option<crate::cost::Cost>,
}

impl TokenUsage {
    /// Input and output counts only (cache counts zero, cost unknown).
    pub fn new(input_tokens: u64, output_tokens: u64) -> Self {
        Self {
            input_tokens,
            output_tokens,
            ..Self::default()
        }
    }
}

/// A turn to append. The store assigns its seq and timestamp.
#[derive(Debug, Clone, PartialEq)]
pub enum NewTurn {
    User(UserMessage),
    Assistant {
        text: String,
        tool_calls: Vec<ToolCall>,
        usage: TokenUsage,
    },
    Tool {
        call_id: String,
        tool_name: String,
        content: String,
        is_error: bool,
    },
    Notice(String),
}

impl NewTurn {
    pub fn role(&self) -> Role {
        match self {
            NewTurn::User(_) => Role::User,
            NewTurn::Assistant { .. } => Role::Assistant,
            NewTurn::Tool { .. } => Role::Tool,
            NewTurn::Notice(_) => Role::Notice,
        }
    }

    pub fn content(&self) -> &str {
        match self {
            NewTurn::User(m) => m.as_str(),
            NewTurn::Assistant { text, .. } => text,
            NewTurn::Tool { content, .. } => content,
            NewTurn::Notice(text) => text,
        }
    }

    /// Value for the `tool_calls` column (an empty array when none).
    pub fn tool_calls_stored(&self) -> Value {
        match self {
            NewTurn::Assistant { tool_calls, .. } => ToolCall::encode_all(tool_calls),
            _ => Value::Array(Vec::new()),
        }
    }

    /// `(call id, tool name, is_error)` for a tool result.
    pub fn tool_result_of(&self) -> Option<(&str, &str, bool)> {
        match self {
            NewTurn::Tool {
                call_id,
                tool_name,
                is_error,
                ..
            } => Some((call_id, tool_name, *is_error)),
            _ => None,
        }
    }

    pub fn usage(&self) -> TokenUsage {
        match self {
            NewTurn::Assistant { usage, .. } => *usage,
            _ => TokenUsage::default(),
        }
    }

    /// How many tool calls this turn requests.
    pub fn tool_call_count(&self) -> usize {
        match self {
            NewTurn::Assistant { tool_calls, .. } => tool_calls.len(),
            _ => 0,
        }
    }
}

/// A committed turn as read back from the store.
#[derive(Debug, Clone, PartialEq)]
pub struct Turn {
    pub session_id: SessionId,
    pub seq: Seq,
    pub role: Role,
    pub content: String,
    /// The raw `tool_calls` column; decode with [`Turn::tool_calls`]. Kept
    /// raw so a row whose calls do not decode is still a readable turn.
    pub tool_calls_raw: Value,
    /// For tool turns: the call this result answers, and its tool.
    pub tool_call_id: Option<String>,
    pub tool_name: Option<String>,
    pub is_error: bool,
    pub usage: TokenUsage,
    pub created_at: OffsetDateTime,
}

impl Turn {
    /// The tool calls this (assistant) turn requested.
    pub fn tool_calls(&self) -> Result<Vec<ToolCall>, ToolCallsDecodeError> {
        ToolCall::decode_all(&self.tool_calls_raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_json_arguments_are_kept_as_sent() {
        for text in ["{\"a\": 1", "[1,2]", "\"s\"", ""] {
            let args = ToolArguments::from_model(text);
            assert!(!args.is_valid_json());
            let back = ToolArguments::from_stored(&args.to_stored()).unwrap();
            assert_eq!(back.as_sent(), text);
        }
        let ok = ToolArguments::from_model("{\"path\": \"/var/log\"}");
        assert!(ok.is_valid_json());
    }

    #[test]
    fn tool_calls_round_trip_through_storage() {
        let calls = vec![
            ToolCall {
                id: "c1".into(),
                name: "grep".into(),
                arguments: ToolArguments::from_model("{\"q\":\"oom\"}"),
            },
            ToolCall {
                id: "c2".into(),
                name: "tail".into(),
                arguments: ToolArguments::from_model("{broken"),
            },
        ];
        let stored = ToolCall::encode_all(&calls);
        assert_eq!(ToolCall::decode_all(&stored).unwrap(), calls);
        assert!(ToolCall::decode_all(&serde_json::json!({"x": 1})).is_err());
        assert!(
            ToolCall::decode_all(&serde_json::json!([{"id": "a", "name": "b", "arguments": 3}]))
                .is_err()
        );
    }

    #[test]
    fn role_text_round_trips() {
        for r in Role::ALL {
            assert_eq!(Role::parse(r.as_str()), Some(r));
        }
    }
}
