//! The transcript fixture format shared by the core tests and the
//! integration tests (`tests/fixtures/transcripts/*.json`).
//!
//! A fixture is a stored transcript plus what resuming it must produce:
//!
//! ```json
//! {
//!   "description": "what this case covers",
//!   "session_id": "00000000-0000-0000-0000-000000005e55",
//!   "tool_classes": { "kubectl_get": "read_only" },
//!   "tool_servers": { "kubectl_get": "kubernetes" },
//!   "turns": [
//!     { "seq": 1, "role": "user", "content": "why is checkout slow?",
//!       "created_at": "2025-01-01T10:00:00Z" },
//!     { "seq": 2, "role": "assistant", "content": "",
//!       "tool_calls": [{ "id": "c1", "name": "kubectl_get", "arguments": {"kind": "pods"} }],
//!       "input_tokens": 120, "output_tokens": 30, "created_at": "2025-01-01T10:00:04Z" },
//!     { "seq": 3, "role": "tool", "content": "3 pods", "tool_call_id": "c1",
//!       "tool_name": "kubectl_get", "is_error": false, "created_at": "2025-01-01T10:00:05Z" }
//!   ],
//!   "expected": {
//!     "messages": [ { "role": "user", "text": "..." },
//!                   { "role": "assistant", "text": "", "tool_calls": [ ... ] },
//!                   { "role": "tool_result", "call_id": "c1", "name": "kubectl_get",
//!                     "content": "3 pods", "is_error": false } ],
//!     "plan": { "kind": "interrupted_prompt", "repairs": [], "repaired_call_ids": [],
//!               "can_auto_continue": true, "requires_confirmation": false },
//!     "active_time_ms": 5000
//!   }
//! }
//! ```
//!
//! Turn fields are the `turns` columns: `tool_calls` is the raw stored
//! JSON (default `[]`; any JSON, so broken rows can be written),
//! `session_id` overrides the fixture's session for that turn, and
//! `content`, `is_error`, the token counts and `created_at` (RFC 3339,
//! default the Unix epoch) may be left out. `tool_classes` and
//! `tool_servers` default to empty (every tool mutating and unknown).
//! Messages and repairs use the serde forms of [`inquest_core::Message`] and
//! [`inquest_core::Repair`]; `plan.repairs` lists every repair, in plan order.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;
use time::OffsetDateTime;

use inquest_core::{
    Message, RecoveryKind, Repair, Role, Seq, SessionId, SideEffect, TokenUsage, Turn,
};

/// One fixture file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TranscriptFixture {
    pub description: String,
    pub session_id: String,
    #[serde(default)]
    pub tool_classes: BTreeMap<String, SideEffect>,
    #[serde(default)]
    pub tool_servers: BTreeMap<String, String>,
    pub turns: Vec<FixtureTurn>,
    pub expected: Option<Expected>,
}

/// A stored turn as written in a fixture.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixtureTurn {
    pub seq: i64,
    pub role: String,
    #[serde(default)]
    pub content: String,
    #[serde(default = "empty_array")]
    pub tool_calls: Value,
    #[serde(default)]
    pub tool_call_id: Option<String>,
    #[serde(default)]
    pub tool_name: Option<String>,
    #[serde(default)]
    pub is_error: bool,
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub created_at: Option<OffsetDateTime>,
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    #[serde(default)]
    pub session_id: Option<String>,
}

/// What resuming the fixture must produce.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expected {
    pub messages: Vec<Message<'static>>,
    pub plan: ExpectedPlan,
    pub active_time_ms: i64,
}

/// The plan fields a fixture pins down.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectedPlan {
    pub kind: RecoveryKind,
    pub repairs: Vec<Repair>,
    pub repaired_call_ids: Vec<String>,
    pub can_auto_continue: bool,
    pub requires_confirmation: bool,
}

fn empty_array() -> Value {
    Value::Array(Vec::new())
}

/// Why a fixture could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FixtureError {
    #[error("fixture is not valid JSON of the expected shape: {0}")]
    Json(#[from] serde_json::Error),
    #[error("bad session id: {0}")]
    SessionId(#[from] inquest_core::IdError),
    #[error("turn {seq}: unknown role {role:?}")]
    Role { seq: i64, role: String },
    #[error("turn seq {0} is not a valid stored seq (must be >= 1)")]
    Seq(i64),
}

impl TranscriptFixture {
    pub fn from_json(text: &str) -> Result<Self, FixtureError> {
        Ok(serde_json::from_str(text)?)
    }

    pub fn session(&self) -> Result<SessionId, FixtureError> {
        Ok(SessionId::parse(&self.session_id)?)
    }

    /// The stored turns, as the store would hand them back.
    pub fn turns(&self) -> Result<Vec<Turn>, FixtureError> {
        let session = self.session()?;
        self.turns.iter().map(|t| t.to_turn(session)).collect()
    }
}

impl FixtureTurn {
    /// The [`Turn`] this row describes; `session` unless overridden.
    pub fn to_turn(&self, session: SessionId) -> Result<Turn, FixtureError> {
        let role = Role::parse(&self.role).ok_or_else(|| FixtureError::Role {
            seq: self.seq,
            role: self.role.clone(),
        })?;
        let session_id = match &self.session_id {
            Some(s) => SessionId::parse(s)?,
            None => session,
        };
        Ok(Turn {
            session_id,
            seq: Seq::from_stored(self.seq).ok_or(FixtureError::Seq(self.seq))?,
            role,
            content: self.content.clone(),
            tool_calls_raw: self.tool_calls.clone(),
            recovery_plan_raw: None,
            tool_call_id: self.tool_call_id.clone(),
            tool_name: self.tool_name.clone(),
            is_error: self.is_error,
            usage: TokenUsage::new(self.input_tokens, self.output_tokens),
            created_at: self.created_at.unwrap_or(OffsetDateTime::UNIX_EPOCH),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_minimal_fixture() {
        let f = TranscriptFixture::from_json(
            r#"{"description":"d","session_id":"00000000-0000-0000-0000-000000005e55",
                "turns":[{"seq":1,"role":"user","content":"hi","created_at":"2025-01-01T10:00:00Z"},
                         {"seq":2,"role":"assistant","tool_calls":"garbage",
                          "session_id":"00000000-0000-0000-0000-000000000001"}]}"#,
        )
        .unwrap();
        let turns = f.turns().unwrap();
        assert_eq!(turns[0].role, Role::User);
        assert_eq!(turns[0].tool_calls_raw, serde_json::json!([]));
        assert_ne!(turns[1].session_id, turns[0].session_id);
        assert!(turns[1].tool_calls().is_err());
        assert!(f.expected.is_none());
    }

    #[test]
    fn rejects_bad_rows() {
        let bad_role = r#"{"description":"d","session_id":"00000000-0000-0000-0000-000000005e55",
            "turns":[{"seq":1,"role":"system"}]}"#;
        let f = TranscriptFixture::from_json(bad_role).unwrap();
        assert!(matches!(f.turns(), Err(FixtureError::Role { .. })));
        let bad_seq = bad_role
            .replace("\"system\"", "\"user\"")
            .replace("\"seq\":1", "\"seq\":0");
        let f = TranscriptFixture::from_json(&bad_seq).unwrap();
        assert!(matches!(f.turns(), Err(FixtureError::Seq(0))));
    }
}
