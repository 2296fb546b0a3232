//! An independent provider-validity checker for rebuilt transcripts.
//!
//! Written from the providers' published rules, not from the rebuild code:
//! the transcript is lowered the way an adapter would (Anthropic Messages:
//! tool results are `tool_result` blocks of a user message and same-role
//! neighbours fold into one message; OpenAI Chat Completions: one `tool`
//! message per result) and each wire form is checked against its API's
//! rules. On top, Inquest's own contract: results in call order, one per
//! call, carrying the call's tool name, and call ids unique in the whole
//! transcript.

#![allow(dead_code)]

use std::collections::HashSet;

use inquest_core::Message;

#[derive(Debug)]
enum Block {
    Text(String),
    ToolUse { id: String, name: String },
    ToolResult { tool_use_id: String },
}

#[derive(Debug)]
struct AnthropicMsg {
    user: bool,
    blocks: Vec<Block>,
}

fn to_anthropic(messages: &[Message]) -> Vec<AnthropicMsg> {
    let mut out: Vec<AnthropicMsg> = Vec::new();
    for m in messages {
        let (user, blocks) = match m {
            Message::User { text } => (true, vec![Block::Text(text.to_string())]),
            Message::Assistant { text, tool_calls } => {
                let mut b = Vec::new();
                // Adapters omit an empty text block next to tool calls.
                if !text.is_empty() || tool_calls.is_empty() {
                    b.push(Block::Text(text.to_string()));
                }
                b.extend(tool_calls.iter().map(|c| Block::ToolUse {
                    id: c.id.to_string(),
                    name: c.name.to_string(),
                }));
                (false, b)
            }
            Message::ToolResult { call_id, .. } => (
                true,
                vec![Block::ToolResult {
                    tool_use_id: call_id.to_string(),
                }],
            ),
        };
        match out.last_mut() {
            Some(last) if last.user == user => last.blocks.extend(blocks),
            _ => out.push(AnthropicMsg { user, blocks }),
        }
    }
    out
}

fn check_anthropic(messages: &[Message]) -> Result<(), String> {
    let wire = to_anthropic(messages);
    if let Some(first) = wire.first()
        && !first.user
    {
        return Err("anthropic: first message must use the user role".into());
    }
    let mut seen_ids = HashSet::new();
    for (i, m) in wire.iter().enumerate() {
        if m.blocks.is_empty() {
            return Err(format!("anthropic: message {i} has no content"));
        }
        let uses: Vec<&str> = m
            .blocks
            .iter()
            .filter_map(|b| match b {
                Block::ToolUse { id, .. } => Some(id.as_str()),
                _ => None,
            })
            .collect();
        for b in &m.blocks {
            match b {
                Block::Text(t) if t.trim().is_empty() => {
                    return Err(format!("anthropic: message {i} has an empty text block"));
                }
                Block::ToolUse { id, name } => {
                    if id.is_empty() || name.is_empty() {
                        return Err(format!(
                            "anthropic: message {i} has a tool_use without id or name"
                        ));
                    }
                    if !seen_ids.insert(id.clone()) {
                        return Err(format!("anthropic: tool_use id {id:?} is not unique"));
                    }
                }
                Block::ToolResult { .. } if !m.user => {
                    return Err(format!("anthropic: tool_result in assistant message {i}"));
                }
                _ => {}
            }
        }
        // Results in a user message must answer the tool_use blocks of the
        // message right before it, and come before any text.
        let results: Vec<&str> = m
            .blocks
            .iter()
            .filter_map(|b| match b {
                Block::ToolResult { tool_use_id } => Some(tool_use_id.as_str()),
                _ => None,
            })
            .collect();
        if m.user && !results.is_empty() {
            let first_text = m.blocks.iter().position(|b| matches!(b, Block::Text(_)));
            let last_result = m
                .blocks
                .iter()
                .rposition(|b| matches!(b, Block::ToolResult { .. }));
            if let (Some(t), Some(r)) = (first_text, last_result)
                && t < r
            {
                return Err(format!(
                    "anthropic: message {i} has text before a tool_result"
                ));
            }
            let prev_uses: Vec<&str> = match i.checked_sub(1).and_then(|p| wire.get(p)) {
                Some(p) if !p.user => p
                    .blocks
                    .iter()
                    .filter_map(|b| match b {
                        Block::ToolUse { id, .. } => Some(id.as_str()),
                        _ => None,
                    })
                    .collect(),
                _ => Vec::new(),
            };
            for r in &results {
                if !prev_uses.contains(r) {
                    return Err(format!(
                        "anthropic: tool_result {r:?} in message {i} has no tool_use in the previous message"
                    ));
                }
            }
        }
        if !m.user && !uses.is_empty() {
            let next = wire
                .get(i + 1)
                .ok_or_else(|| format!("anthropic: tool_use in message {i} never answered"))?;
            let answered: Vec<&str> = next
                .blocks
                .iter()
                .filter_map(|b| match b {
                    Block::ToolResult { tool_use_id } => Some(tool_use_id.as_str()),
                    _ => None,
                })
                .collect();
            if answered != uses {
                return Err(format!(
                    "anthropic: tool_use ids {uses:?} answered as {answered:?}"
                ));
            }
        }
    }
    Ok(())
}

fn check_openai(messages: &[Message]) -> Result<(), String> {
    // Pending tool_call ids of the last assistant message, in order.
    let mut pending: Vec<(String, String)> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        match m {
            Message::ToolResult { call_id, name, .. } => {
                if pending.is_empty() {
                    return Err(format!(
                        "openai: tool message {i} does not follow an assistant message with tool_calls"
                    ));
                }
                let (id, call_name) = pending.remove(0);
                if &id != call_id {
                    return Err(format!(
                        "openai: tool message {i} answers {call_id:?}, expected {id:?} (call order)"
                    ));
                }
                if &call_name != name {
                    return Err(format!(
                        "openai: tool message {i} names {name:?}, the call was {call_name:?}"
                    ));
                }
            }
            other => {
                if !pending.is_empty() {
                    return Err(format!(
                        "openai: message {i} arrives while tool_call_ids {:?} are unanswered",
                        pending.iter().map(|p| &p.0).collect::<Vec<_>>()
                    ));
                }
                match other {
                    Message::User { text } if text.trim().is_empty() => {
                        return Err(format!("openai: user message {i} is empty"));
                    }
                    Message::Assistant { text, tool_calls } => {
                        if text.trim().is_empty() && tool_calls.is_empty() {
                            return Err(format!(
                                "openai: assistant message {i} has neither content nor tool_calls"
                            ));
                        }
                        pending = tool_calls
                            .iter()
                            .map(|c| (c.id.to_string(), c.name.to_string()))
                            .collect();
                    }
                    _ => {}
                }
            }
        }
    }
    if !pending.is_empty() {
        return Err("openai: the last assistant message's tool_calls are unanswered".into());
    }
    Ok(())
}

/// Checks a rebuilt transcript against both providers' rules.
pub fn check_transcript(messages: &[Message]) -> Result<(), String> {
    check_anthropic(messages)?;
    check_openai(messages)
}

#[test]
fn checker_rejects_broken_transcripts() {
    use inquest_core::{ToolArguments, ToolCall};
    let call = |id: &str| ToolCall {
        id: id.into(),
        name: "t".into(),
        arguments: ToolArguments::from_model("{}"),
    };
    let user = |t: &str| Message::User {
        text: t.to_owned().into(),
    };
    let asst = |ids: &[&str]| Message::Assistant {
        text: "x".into(),
        tool_calls: ids.iter().map(|i| call(i).into()).collect(),
    };
    let res = |id: &str| Message::ToolResult {
        call_id: id.to_owned().into(),
        name: "t".into(),
        content: "r".into(),
        is_error: false,
    };
    let ok = vec![
        user("q"),
        asst(&["a", "b"]),
        res("a"),
        res("b"),
        user("more"),
        asst(&[]),
    ];
    assert_eq!(check_transcript(&ok), Ok(()));
    let bad: Vec<Vec<Message>> = vec![
        vec![asst(&[])],
        vec![user(" ")],
        vec![user("q"), asst(&["a"])],
        vec![user("q"), asst(&["a"]), user("no result"), res("a")],
        vec![user("q"), asst(&["a", "b"]), res("b"), res("a")],
        vec![user("q"), asst(&["a"]), res("a"), res("a")],
        vec![user("q"), res("a")],
        vec![user("q"), asst(&["a"]), res("a"), asst(&["a"]), res("a")],
        vec![user("q"), asst(&["a", "a"]), res("a"), res("a")],
        vec![
            user("q"),
            Message::Assistant {
                text: "".into(),
                tool_calls: vec![].into(),
            },
        ],
        vec![user("q"), asst(&[""]), res("")],
    ];
    for b in bad {
        assert!(check_transcript(&b).is_err(), "accepted {b:?}");
    }
}

pub mod reference;
