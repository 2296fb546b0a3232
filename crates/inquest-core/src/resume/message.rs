//! The provider-neutral transcript a resume sends to the model, and the
//! record of every repair made while rebuilding it.
//!
//! A rebuilt [`Message`] borrows from the stored turns it came from (text,
//! ids, names, and a call's arguments as the stored JSON); only what a
//! repair makes up or renames is owned. [`Message::into_owned`] detaches
//! one, for a transcript that outlives its turns (the agent's).

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use super::message_calls::{CallArguments, MessageCall, MessageCalls, view};

/// The content of a synthetic result for a call whose result was never
/// recorded.
pub const INTERRUPTED_TOOL_RESULT: &str =
    "the run ended before this tool's result was recorded; it may have partly run";

/// Stands in for a stored user message whose text is blank.
pub const EMPTY_USER_MESSAGE: &str = "[empty message]";

/// Opens a transcript whose first stored turn is not a user message.
pub const MISSING_OPENING_MESSAGE: &str = "[the start of this session's transcript is missing]";

/// One message of a rebuilt transcript. Adapters map it to a provider's
/// wire format; same-role neighbours may occur and are folded there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message<'a> {
    User {
        text: Cow<'a, str>,
    },
    Assistant {
        text: Cow<'a, str>,
        #[serde(default, with = "calls_serde")]
        tool_calls: MessageCalls<'a>,
    },
    /// The result of the tool call `call_id` of the preceding assistant
    /// message; `name` is the called tool's name.
    ToolResult {
        call_id: Cow<'a, str>,
        name: Cow<'a, str>,
        content: Cow<'a, str>,
        is_error: bool,
    },
}

impl Message<'_> {
    /// The same message borrowed from this one (nothing copied but the
    /// list of calls): for a request that adds to a transcript it keeps.
    pub fn reborrow(&self) -> Message<'_> {
        match self {
            Message::User { text } => Message::User { text: view(text) },
            Message::Assistant { text, tool_calls } => Message::Assistant {
                text: view(text),
                tool_calls: tool_calls.iter().map(MessageCall::reborrow).collect(),
            },
            Message::ToolResult {
                call_id,
                name,
                content,
                is_error,
            } => Message::ToolResult {
                call_id: view(call_id),
                name: view(name),
                content: view(content),
                is_error: *is_error,
            },
        }
    }

    /// The same message owning everything it holds.
    pub fn into_owned(self) -> Message<'static> {
        match self {
            Message::User { text } => Message::User {
                text: Cow::Owned(text.into_owned()),
            },
            Message::Assistant { text, tool_calls } => Message::Assistant {
                text: Cow::Owned(text.into_owned()),
                tool_calls: tool_calls.into_owned(),
            },
            Message::ToolResult {
                call_id,
                name,
                content,
                is_error,
            } => Message::ToolResult {
                call_id: Cow::Owned(call_id.into_owned()),
                name: Cow::Owned(name.into_owned()),
                content: Cow::Owned(content.into_owned()),
                is_error,
            },
        }
    }
}

/// A change made to the stored transcript so it can be sent to a provider,
/// or a broken invariant found in it. Recorded in the recovery plan and in
/// its notice. Seqs are the stored turns' seqs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Repair {
    /// A call without a stored result was answered with
    /// [`INTERRUPTED_TOOL_RESULT`]. `call_id` is the stored id.
    SynthesizedToolResult {
        call_id: String,
        name: String,
        assistant_seq: u64,
    },
    /// A second result for an already answered call was dropped.
    DroppedDuplicateToolResult { call_id: String, seq: u64 },
    /// A result for no call requested before it was dropped.
    DroppedOrphanToolResult { call_id: String, seq: u64 },
    /// A result stored after a later user or assistant turn was moved back
    /// to the call it answers.
    MovedToolResult { call_id: String, from_seq: u64 },
    /// A call id already used by an earlier call was renamed in the
    /// transcript so every call id is unique.
    RenamedDuplicateToolCall {
        call_id: String,
        new_id: String,
        seq: u64,
    },
    /// An assistant turn whose stored tool calls do not decode (or have an
    /// empty id or name) was kept as plain text without tool calls.
    UndecodableToolCalls { seq: u64 },
    /// An assistant turn with no text and no tool calls was left out.
    DroppedEmptyAssistantTurn { seq: u64 },
    /// A blank user message was replaced by [`EMPTY_USER_MESSAGE`].
    EmptyUserMessage { seq: u64 },
    /// The transcript did not open with a user message;
    /// [`MISSING_OPENING_MESSAGE`] was put first.
    InsertedOpeningUserMessage,
    /// Found, not repaired: seqs jump from `after_seq` to `next_seq`
    /// (`after_seq` 0: the first stored turn is not seq 1).
    HistoryGap { after_seq: u64, next_seq: u64 },
    /// Found, not repaired: a seq not greater than an earlier one. Turns are
    /// used in the order given.
    SeqNotIncreasing { seq: u64, previous_seq: u64 },
    /// A turn of another session was left out.
    DroppedForeignTurn { seq: u64 },
    /// Found: the session has no stored turns a model could see.
    NoTurns,
}

impl Repair {
    /// One line for humans.
    pub fn describe(&self) -> String {
        match self {
            Repair::SynthesizedToolResult {
                call_id,
                name,
                assistant_seq,
            } => format!(
                "tool call {call_id} ({name}) of turn {assistant_seq} had no recorded result; marked as failed"
            ),
            Repair::DroppedDuplicateToolResult { call_id, seq } => {
                format!("dropped duplicate result for tool call {call_id} (turn {seq})")
            }
            Repair::DroppedOrphanToolResult { call_id, seq } => {
                format!("dropped result for unknown tool call {call_id:?} (turn {seq})")
            }
            Repair::MovedToolResult { call_id, from_seq } => {
                format!(
                    "moved result for tool call {call_id} from turn {from_seq} back to its call"
                )
            }
            Repair::RenamedDuplicateToolCall {
                call_id,
                new_id,
                seq,
            } => format!("renamed reused tool call id {call_id} of turn {seq} to {new_id}"),
            Repair::UndecodableToolCalls { seq } => {
                format!("tool calls of turn {seq} could not be decoded; kept as text")
            }
            Repair::DroppedEmptyAssistantTurn { seq } => {
                format!("left out empty assistant turn {seq}")
            }
            Repair::EmptyUserMessage { seq } => format!("user turn {seq} is empty"),
            Repair::InsertedOpeningUserMessage => {
                "transcript does not start with a user message".to_owned()
            }
            Repair::HistoryGap {
                after_seq,
                next_seq,
            } => {
                format!("turns missing between seq {after_seq} and seq {next_seq}")
            }
            Repair::SeqNotIncreasing { seq, previous_seq } => {
                format!("turn seq {seq} follows seq {previous_seq}")
            }
            Repair::DroppedForeignTurn { seq } => {
                format!("left out turn {seq}, which belongs to another session")
            }
            Repair::NoTurns => "no stored turns".to_owned(),
        }
    }
}

/// Tool calls serialize as stored: `[{"id", "name", "arguments"}]`, where
/// `arguments` is an object, or a string holding the text as sent. Keys in
/// sorted order, as the stored `Value` form ([`ToolCall::encode_all`])
/// serializes, so both give the same bytes.
mod calls_serde {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use serde_json::Value;

    use super::{CallArguments, MessageCall, MessageCalls};
    use crate::ToolCall;

    #[derive(Serialize)]
    struct Stored<'c> {
        arguments: &'c CallArguments<'c>,
        id: &'c str,
        name: &'c str,
    }

    pub fn serialize<S: Serializer>(calls: &MessageCalls<'_>, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(calls.iter().map(|c| Stored {
            arguments: &c.arguments,
            id: &c.id,
            name: &c.name,
        }))
    }

    pub fn deserialize<'de, 'a, D: Deserializer<'de>>(d: D) -> Result<MessageCalls<'a>, D::Error> {
        let value = Value::deserialize(d)?;
        let calls = ToolCall::decode_all(&value).map_err(serde::de::Error::custom)?;
        Ok(calls.into_iter().map(MessageCall::from).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ToolArguments, ToolCall};

    #[test]
    fn messages_serialize_with_stored_call_shape() {
        let m = Message::Assistant {
            text: "x".into(),
            tool_calls: vec![
                ToolCall {
                    id: "c1".into(),
                    name: "t".into(),
                    arguments: ToolArguments::from_model("{oops"),
                }
                .into(),
            ]
            .into(),
        };
        let v = serde_json::to_value(&m).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"role":"assistant","text":"x","tool_calls":[{"id":"c1","name":"t","arguments":"{oops"}]})
        );
        assert_eq!(serde_json::from_value::<Message>(v).unwrap(), m);
        let u: Message = serde_json::from_str(r#"{"role":"assistant","text":"hi"}"#).unwrap();
        assert_eq!(
            u,
            Message::Assistant {
                text: "hi".into(),
                tool_calls: MessageCalls::new()
            }
        );
    }

    #[test]
    fn borrowed_calls_serialize_as_the_stored_value_does() {
        let calls = vec![
            ToolCall {
                id: "c1".into(),
                name: "grep".into(),
                arguments: ToolArguments::from_model(r#"{"z":1,"a":{"y":[1,"é\n"],"b":null}}"#),
            },
            ToolCall {
                id: "c\"2".into(),
                name: "t".into(),
                arguments: ToolArguments::from_model("{oops"),
            },
        ];
        let stored = ToolCall::encode_all(&calls);
        let m = Message::Assistant {
            text: "x".into(),
            tool_calls: calls.iter().map(MessageCall::from).collect(),
        };
        let old = serde_json::json!({"role": "assistant", "text": "x", "tool_calls": stored});
        let new = serde_json::to_string(&m).unwrap();
        // The old form: `role` first (the tag), then the fields in order,
        // the calls as their stored `Value`.
        let old_bytes = format!(
            r#"{{"role":"assistant","text":"x","tool_calls":{}}}"#,
            serde_json::to_string(&old["tool_calls"]).unwrap()
        );
        assert_eq!(new, old_bytes);
        let owned = m.clone().into_owned();
        assert_eq!(owned, m);
        let Message::Assistant { tool_calls, .. } = &owned else {
            unreachable!()
        };
        let back: Vec<ToolCall> = tool_calls.iter().map(MessageCall::to_tool_call).collect();
        assert_eq!(back, calls);
        assert_eq!(
            tool_calls[0].arguments.as_sent(),
            calls[0].arguments.as_sent()
        );
        assert_eq!(tool_calls[1].arguments.as_sent(), "{oops");
    }

    #[test]
    fn repairs_serialize_snake_case_tagged() {
        let r = Repair::MovedToolResult {
            call_id: "c".into(),
            from_seq: 4,
        };
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            serde_json::json!({"type":"moved_tool_result","call_id":"c","from_seq":4})
        );
        let n: Repair =
            serde_json::from_str(r#"{"type":"inserted_opening_user_message"}"#).unwrap();
        assert_eq!(n, Repair::InsertedOpeningUserMessage);
        assert!(r.describe().contains("turn 4"));
    }
}
