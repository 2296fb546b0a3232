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

use crate::{RecoveryPlan, SessionId, UserMessage, seq::Seq};

/// Who produced a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    User,
    Assistant,
    Tool,
    /// A system record shown to humans and never sent to a model.
    Notice,
    /// A compaction of the transcript: `content` is the summary
    /// of everything before `first_retained_seq` ([`CompactionInfo`]). A
    /// role of its own rather than a typed notice because, unlike a notice,
    /// it changes what the model sees: the rebuild starts from the latest
    /// one (its summary stands in for the turns it covers), while every
    /// reader that skips records (recovery, follow-up detection, counters)
    /// treats it like a notice ([`Role::is_record`]).
    Compaction,
}

impl Role {
    pub const ALL: [Role; 5] = [
        Role::User,
        Role::Assistant,
        Role::Tool,
        Role::Notice,
        Role::Compaction,
    ];

    /// A system record (notice or compaction): never a transcript message
    /// of its own, never a model's or user's turn.
    pub fn is_record(self) -> bool {
        matches!(self, Role::Notice | Role::Compaction)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
            Role::Notice => "notice",
            Role::Compaction => "compaction",
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
    // Prompt caching and cost (migration V13).
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

/// The most tokens one model call may report in any one count; a larger
/// figure is clamped to it. No model's window comes within a hundred times
/// of it, and it keeps every sum the store keeps (a session's counters, a
/// tenant's day, their cost) far inside a bigint: a provider (or a proxy in
/// front of it) reporting `u64::MAX` must not make the turn that carries
/// it unstorable.
pub const MAX_TOKENS_PER_CALL: u64 = 1 << 28;

impl TokenUsage {
    /// Counts as a provider reported them, each clamped to
    /// [`MAX_TOKENS_PER_CALL`]; cost unknown until a price is applied.
    pub fn reported(input: u64, output: u64, cache_read: u64, cache_creation: u64) -> Self {
        let clamp = |n: u64| n.min(MAX_TOKENS_PER_CALL);
        Self {
            input_tokens: clamp(input),
            output_tokens: clamp(output),
            cache_read_input_tokens: clamp(cache_read),
            cache_creation_input_tokens: clamp(cache_creation),
            cost: None,
        }
    }

    /// Input and output counts only (cache counts zero, cost unknown).
    pub fn new(input_tokens: u64, output_tokens: u64) -> Self {
        Self {
            input_tokens,
            output_tokens,
            ..Self::default()
        }
    }
}

/// What a compaction turn records besides its summary. Stored as the
/// turn's `tool_calls` jsonb object (a compaction has no calls; see
/// migration V12), so the row, the notification and every reader carry it
/// without a column of their own.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CompactionInfo {
    /// The seq of the first stored turn kept verbatim after the summary.
    /// Equal to the compaction's own seq when no turn before it is kept.
    pub first_retained_seq: u64,
    /// Estimated tokens of the transcript before and after the compaction.
    pub tokens_before: u64,
    pub tokens_after: u64,
    /// What the turns this compaction leaves out of a resume read (those
    /// before `first_retained_seq`, the opening user turn excepted) add to
    /// the session's counters, so a follow-up can read only from the
    /// latest compaction (`crate::resume::restore`, `active_time`). Absent
    /// in records that predate it: then readers need every turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carried: Option<Carried>,
}

/// See [`CompactionInfo::carried`]: cumulative over every compaction
/// before it too.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Carried {
    pub assistant_turns: u64,
    /// User turns (bursts).
    pub user_turns: u64,
    pub tool_calls: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Every MCP server a call reached so far (a union, not a difference).
    pub used_servers: std::collections::BTreeSet<String>,
    /// Active time of the left-out turns, in milliseconds.
    pub active_ms: u64,
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
    /// A system record for humans: `text` is all of its content. A
    /// recovery notice also carries the plan it records (see
    /// [`crate::notice_plan`]); other notices ("resume refused") none.
    Notice {
        text: String,
        plan: Option<Box<RecoveryPlan>>,
    },
    /// See [`Role::Compaction`].
    Compaction {
        summary: String,
        info: CompactionInfo,
        /// What the summary call consumed (counted like a model call's).
        usage: TokenUsage,
    },
}

impl NewTurn {
    pub fn role(&self) -> Role {
        match self {
            NewTurn::User(_) => Role::User,
            NewTurn::Assistant { .. } => Role::Assistant,
            NewTurn::Tool { .. } => Role::Tool,
            NewTurn::Notice { .. } => Role::Notice,
            NewTurn::Compaction { .. } => Role::Compaction,
        }
    }

    pub fn content(&self) -> &str {
        match self {
            NewTurn::User(m) => m.as_str(),
            NewTurn::Assistant { text, .. } => text,
            NewTurn::Tool { content, .. } => content,
            NewTurn::Notice { text, .. } => text,
            NewTurn::Compaction { summary, .. } => summary,
        }
    }

    /// A notice that records no plan.
    pub fn notice(text: impl Into<String>) -> Self {
        NewTurn::Notice {
            text: text.into(),
            plan: None,
        }
    }

    /// The tombstone stored under `seq` when the turn committed and
    /// published under it was lost in a database failover (an
    /// asynchronous standby promoted before it had received the turn).
    /// `was`: what the writer knew of the lost turn, if anything. The seq
    /// is never reused for other content.
    pub fn lost_in_failover(seq: Seq, was: Option<&str>) -> Self {
        let was = was.map_or_else(String::new, |w| format!(" It was {w}."));
        NewTurn::notice(format!(
            "{LOST_IN_FAILOVER} turn {seq} was committed and sent to watchers, then lost when \
             the database failed over to a standby that had not received it.{was} Its content \
             and the outcome of any tool call in it are unknown."
        ))
    }

    /// Value for the `recovery_plan` column: the serde form of a recovery
    /// notice's plan, `None` for every other turn.
    pub fn recovery_plan_stored(&self) -> Option<Value> {
        match self {
            NewTurn::Notice {
                plan: Some(plan), ..
            } => serde_json::to_value(plan.as_ref()).ok(),
            _ => None,
        }
    }

    /// Value for the `tool_calls` column (an empty array when none).
    pub fn tool_calls_stored(&self) -> Value {
        match self {
            NewTurn::Assistant { tool_calls, .. } => ToolCall::encode_all(tool_calls),
            NewTurn::Compaction { info, .. } => {
                serde_json::to_value(info).unwrap_or_else(|_| Value::Array(Vec::new()))
            }
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
            NewTurn::Assistant { usage, .. } | NewTurn::Compaction { usage, .. } => *usage,
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
    /// The raw `recovery_plan` column (migration V11): a recovery
    /// notice's plan, `None` for every other turn; decode with
    /// [`Turn::recovery_plan`]. Kept raw for the same reason.
    pub recovery_plan_raw: Option<Value>,
    /// For tool turns: the call this result answers, and its tool.
    pub tool_call_id: Option<String>,
    pub tool_name: Option<String>,
    pub is_error: bool,
    pub usage: TokenUsage,
    pub created_at: OffsetDateTime,
}

/// How every tombstone of a turn lost in a failover starts
/// ([`NewTurn::lost_in_failover`], [`Turn::is_lost_in_failover`]).
pub const LOST_IN_FAILOVER: &str = "Lost in a database failover:";

impl Turn {
    /// Whether this is the tombstone of a turn lost in a failover: a
    /// watcher that saw the turn it replaces is told.
    pub fn is_lost_in_failover(&self) -> bool {
        self.role == Role::Notice && self.content.starts_with(LOST_IN_FAILOVER)
    }

    /// What this turn is, in a few words: what its tombstone says it was
    /// if a failover loses it ([`NewTurn::lost_in_failover`]).
    pub fn described(&self) -> String {
        match self.role {
            Role::Assistant => {
                // The names straight from the stored column: every turn
                // published is described, so the arguments are not decoded.
                let names: Vec<&str> = self
                    .tool_calls_raw
                    .as_array()
                    .map(|calls| {
                        calls
                            .iter()
                            .filter_map(|c| c.get("name").and_then(Value::as_str))
                            .collect()
                    })
                    .unwrap_or_default();
                if names.is_empty() {
                    "an assistant reply".to_owned()
                } else {
                    format!("an assistant reply calling {}", names.join(", "))
                }
            }
            Role::Tool => format!(
                "the result of {} (call {})",
                self.tool_name.as_deref().unwrap_or("a tool"),
                self.tool_call_id.as_deref().unwrap_or("unknown")
            ),
            Role::User => "a user message".to_owned(),
            Role::Notice => "a notice".to_owned(),
            Role::Compaction => "a compaction summary".to_owned(),
        }
    }

    /// The tool calls this (assistant) turn requested.
    pub fn tool_calls(&self) -> Result<Vec<ToolCall>, ToolCallsDecodeError> {
        if self.role == Role::Compaction {
            return Ok(Vec::new());
        }
        ToolCall::decode_all(&self.tool_calls_raw)
    }

    /// The recovery plan this (notice) turn records; `None` when it records
    /// none or the stored value does not decode.
    pub fn recovery_plan(&self) -> Option<RecoveryPlan> {
        RecoveryPlan::deserialize(self.recovery_plan_raw.as_ref()?).ok()
    }

    /// The calls a recovery notice answered with a synthetic result, which
    /// settles them for watchers (empty for any other turn).
    pub fn repaired_call_ids(&self) -> Vec<String> {
        self.recovery_plan()
            .map(|p| p.repaired_call_ids)
            .unwrap_or_default()
    }

    /// What a compaction turn records; `None` for other roles and for a
    /// compaction row whose record does not decode (it is then ignored).
    pub fn compaction(&self) -> Option<CompactionInfo> {
        if self.role != Role::Compaction {
            return None;
        }
        CompactionInfo::deserialize(&self.tool_calls_raw).ok()
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
    fn a_recovery_notice_stores_its_plan_and_reads_it_back() {
        let session = SessionId::from_uuid(uuid::Uuid::from_u128(7));
        let mut plan = crate::plan_recovery(session, &[], &|_: &str| crate::SideEffect::Mutating);
        plan.repaired_call_ids = vec!["c1".into()];
        let notice = NewTurn::Notice {
            text: "Recovery: degraded_history.".into(),
            plan: Some(Box::new(crate::notice_plan(&plan))),
        };
        assert_eq!(notice.content(), "Recovery: degraded_history.");
        let stored = notice.recovery_plan_stored().unwrap();
        let turn = Turn {
            session_id: session,
            seq: Seq::FIRST,
            role: Role::Notice,
            content: notice.content().into(),
            tool_calls_raw: Value::Array(Vec::new()),
            recovery_plan_raw: Some(stored),
            tool_call_id: None,
            tool_name: None,
            is_error: false,
            usage: TokenUsage::default(),
            created_at: OffsetDateTime::UNIX_EPOCH,
        };
        assert_eq!(turn.recovery_plan(), Some(crate::notice_plan(&plan)));
        assert_eq!(turn.repaired_call_ids(), ["c1"]);
        // No plan, or one that does not decode: none, and nothing settles.
        assert_eq!(
            NewTurn::notice("Resume refused").recovery_plan_stored(),
            None
        );
        let odd = Turn {
            recovery_plan_raw: Some(serde_json::json!({"kind": 3})),
            ..turn
        };
        assert_eq!(odd.recovery_plan(), None);
        assert!(odd.repaired_call_ids().is_empty());
    }

    #[test]
    fn role_text_round_trips() {
        for r in Role::ALL {
            assert_eq!(Role::parse(r.as_str()), Some(r));
        }
    }
}
