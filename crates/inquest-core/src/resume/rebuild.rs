//! Rebuilding a provider-valid transcript from stored turns.
//!
//! The stored turns record what happened; a provider only accepts a
//! transcript where every tool call is answered exactly once. The rules,
//! applied to the turns in the order given (the store reads them by seq):
//!
//! - `notice` turns are left out.
//! - An assistant turn's calls are decoded from the stored column; arguments
//!   stored as a JSON string stay [`crate::ToolArguments::Raw`], so the
//!   model is shown what it sent. If the column does not decode, or a call
//!   has a blank id or name, the turn is kept as plain text: its content
//!   plus a note holding the raw column ([`Repair::UndecodableToolCalls`]).
//! - A call id already used by an earlier call (in this or an earlier turn)
//!   is renamed `<id>_dup<n>` in the transcript; results are matched to the
//!   call they most plausibly answer (see below), so providers that reuse
//!   ids per response still rebuild correctly.
//! - A tool result answers, among the calls with its id that are still
//!   unanswered: the first one of the current assistant message (no user or
//!   assistant turn since), else the latest earlier one
//!   ([`Repair::MovedToolResult`]). With no unanswered call of that id it is
//!   a duplicate if such a call exists ([`Repair::DroppedDuplicateToolResult`]),
//!   else an orphan ([`Repair::DroppedOrphanToolResult`]); both are dropped.
//! - Each assistant message is followed by exactly one result per call, in
//!   call order; a call never answered gets [`INTERRUPTED_TOOL_RESULT`] as an
//!   error result ([`Repair::SynthesizedToolResult`]). Results carry the
//!   call's tool name.
//! - Blank assistant text next to tool calls becomes empty (no text block);
//!   an assistant turn with no text and no calls is left out; a blank user
//!   message becomes [`EMPTY_USER_MESSAGE`]; a transcript that would not
//!   start with a user message gets [`MISSING_OPENING_MESSAGE`] first.
//!
//! - Compaction (issue 13): with a compaction turn whose record decodes,
//!   the transcript starts from the latest one: the session's opening user
//!   turn (verbatim, always first, never repeated), the summary as a user message
//!   ([`crate::compaction::summary_message`]), the turns before the
//!   compaction from its `first_retained_seq` on (the retained tail), then
//!   every turn after it. Every other compaction turn is left out like a
//!   notice. The rules above apply to what is kept.
//!
//! Never panics, whatever the input.

use std::collections::{HashMap, HashSet};

use super::message::{
    EMPTY_USER_MESSAGE, INTERRUPTED_TOOL_RESULT, MISSING_OPENING_MESSAGE, Message, Repair,
};
use crate::{Role, ToolCall, Turn};

/// A rebuilt transcript and what was changed to make it valid.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Rebuilt {
    pub messages: Vec<Message>,
    pub repairs: Vec<Repair>,
}

/// The calls of an assistant turn if they decode and every call has an id
/// and a name; `None` otherwise. Other roles have no calls.
pub fn usable_tool_calls(turn: &Turn) -> Option<Vec<ToolCall>> {
    if turn.role != Role::Assistant {
        return Some(Vec::new());
    }
    let calls = turn.tool_calls().ok()?;
    calls
        .iter()
        .all(|c| !c.id.trim().is_empty() && !c.name.trim().is_empty())
        .then_some(calls)
}

/// The text an assistant turn with undecodable calls is kept as.
pub fn undecodable_turn_text(turn: &Turn) -> String {
    const MAX_RAW: usize = 2000;
    let mut raw = turn.tool_calls_raw.to_string();
    if raw.len() > MAX_RAW {
        let mut cut = MAX_RAW;
        while !raw.is_char_boundary(cut) {
            cut -= 1;
        }
        raw.truncate(cut);
        raw.push('…');
    }
    let note = format!("[stored tool calls could not be decoded: {raw}]");
    if turn.content.trim().is_empty() {
        note
    } else {
        format!("{}\n\n{note}", turn.content)
    }
}

struct Answer {
    content: String,
    is_error: bool,
}

struct OutCall {
    stored_id: String,
    call: ToolCall,
    answer: Option<Answer>,
}

enum Block {
    User(String),
    Assistant {
        seq: u64,
        text: String,
        calls: Vec<OutCall>,
    },
}

/// One input of the rebuild: a stored turn, or a compaction's summary.
enum Item<'a> {
    Turn(&'a Turn),
    Summary(String),
}

/// The turns (and summary) the transcript is rebuilt from: everything, or
/// from the latest compaction on (see the module docs).
fn view(turns: &[Turn]) -> Vec<Item<'_>> {
    let latest = turns
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, t)| t.compaction().map(|info| (i, t, info)));
    let Some((at, compaction, info)) = latest else {
        return turns.iter().map(Item::Turn).collect();
    };
    let retained = |t: &Turn| t.seq.get() >= info.first_retained_seq;
    let mut items = Vec::new();
    let opening = turns[..at].iter().position(|t| t.role == Role::User);
    if let Some(o) = opening {
        items.push(Item::Turn(&turns[o]));
    }
    let model_turns = info.carried.as_ref().map(|c| c.assistant_turns);
    items.push(Item::Summary(crate::compaction::summary_message(
        &compaction.content,
        model_turns,
    )));
    for (i, t) in turns.iter().enumerate() {
        if t.role == Role::Compaction || Some(i) == opening {
            continue;
        }
        if i > at || retained(t) {
            items.push(Item::Turn(t));
        }
    }
    items
}

/// Rebuilds the provider-neutral transcript; see the module docs.
pub fn rebuild_messages(turns: &[Turn]) -> Rebuilt {
    let items = view(turns);
    let mut repairs = Vec::new();
    let mut blocks: Vec<Block> = Vec::new();
    // The assistant block answered by results right now, if no user or
    // assistant turn came after it.
    let mut open: Option<usize> = None;
    // Stored call id → (block, call index), in order of appearance.
    let mut by_id: HashMap<String, Vec<(usize, usize)>> = HashMap::new();
    // Every id a call may end up with, so renames never collide.
    // Each turn's calls, decoded once.
    let mut decoded: Vec<Option<Vec<ToolCall>>> = items
        .iter()
        .map(|item| match item {
            Item::Turn(t) => usable_tool_calls(t),
            Item::Summary(_) => Some(Vec::new()),
        })
        .collect();
    let mut taken: HashSet<String> = decoded
        .iter()
        .flatten()
        .flatten()
        .map(|c| c.id.clone())
        .collect();
    let mut used: HashSet<String> = HashSet::new();

    for (i, item) in items.iter().enumerate() {
        let turn = match item {
            Item::Turn(turn) => *turn,
            Item::Summary(text) => {
                open = None;
                blocks.push(Block::User(text.clone()));
                continue;
            }
        };
        let seq = turn.seq.get();
        match turn.role {
            Role::Notice | Role::Compaction => {}
            Role::User => {
                open = None;
                let text = if turn.content.trim().is_empty() {
                    repairs.push(Repair::EmptyUserMessage { seq });
                    EMPTY_USER_MESSAGE.to_owned()
                } else {
                    turn.content.clone()
                };
                blocks.push(Block::User(text));
            }
            Role::Assistant => {
                open = None;
                let (text, calls) = match decoded.get_mut(i).and_then(Option::take) {
                    Some(calls) => (turn.content.clone(), calls),
                    None => {
                        repairs.push(Repair::UndecodableToolCalls { seq });
                        (undecodable_turn_text(turn), Vec::new())
                    }
                };
                if calls.is_empty() && text.trim().is_empty() {
                    repairs.push(Repair::DroppedEmptyAssistantTurn { seq });
                    continue;
                }
                // Providers refuse whitespace-only text; blank means none.
                let text = if text.trim().is_empty() {
                    String::new()
                } else {
                    text
                };
                let index = blocks.len();
                let mut out = Vec::with_capacity(calls.len());
                for mut call in calls {
                    let stored_id = call.id.clone();
                    if !used.insert(stored_id.clone()) {
                        let new_id = fresh_id(&stored_id, &mut taken);
                        repairs.push(Repair::RenamedDuplicateToolCall {
                            call_id: stored_id.clone(),
                            new_id: new_id.clone(),
                            seq,
                        });
                        used.insert(new_id.clone());
                        call.id = new_id;
                    }
                    by_id
                        .entry(stored_id.clone())
                        .or_default()
                        .push((index, out.len()));
                    out.push(OutCall {
                        stored_id,
                        call,
                        answer: None,
                    });
                }
                let has_calls = !out.is_empty();
                blocks.push(Block::Assistant {
                    seq,
                    text,
                    calls: out,
                });
                if has_calls {
                    open = Some(index);
                }
            }
            Role::Tool => {
                let call_id = turn.tool_call_id.clone().unwrap_or_default();
                let candidates = by_id.get(&call_id).map(Vec::as_slice).unwrap_or(&[]);
                let unanswered = |&&(b, c): &&(usize, usize)| match blocks.get(b) {
                    Some(Block::Assistant { calls, .. }) => {
                        calls.get(c).is_some_and(|c| c.answer.is_none())
                    }
                    _ => false,
                };
                let in_open = candidates
                    .iter()
                    .filter(|(b, _)| Some(*b) == open)
                    .find(unanswered);
                let target = in_open.or_else(|| candidates.iter().rev().find(unanswered));
                let Some(&(b, c)) = target else {
                    repairs.push(if candidates.is_empty() {
                        Repair::DroppedOrphanToolResult { call_id, seq }
                    } else {
                        Repair::DroppedDuplicateToolResult { call_id, seq }
                    });
                    continue;
                };
                if in_open.is_none() {
                    repairs.push(Repair::MovedToolResult {
                        call_id,
                        from_seq: seq,
                    });
                }
                if let Some(Block::Assistant { calls, .. }) = blocks.get_mut(b)
                    && let Some(slot) = calls.get_mut(c)
                {
                    slot.answer = Some(Answer {
                        content: turn.content.clone(),
                        is_error: turn.is_error,
                    });
                }
            }
        }
    }

    let mut messages = Vec::new();
    for block in blocks {
        match block {
            Block::User(text) => messages.push(Message::User { text }),
            Block::Assistant { seq, text, calls } => {
                let mut tool_calls = Vec::with_capacity(calls.len());
                let mut results = Vec::with_capacity(calls.len());
                for out in calls {
                    results.push((
                        out.stored_id,
                        out.call.id.clone(),
                        out.call.name.clone(),
                        out.answer,
                    ));
                    tool_calls.push(out.call);
                }
                messages.push(Message::Assistant { text, tool_calls });
                for (stored_id, id, name, answer) in results {
                    let (content, is_error) = match answer {
                        Some(a) => (a.content, a.is_error),
                        None => {
                            repairs.push(Repair::SynthesizedToolResult {
                                call_id: stored_id,
                                name: name.clone(),
                                assistant_seq: seq,
                            });
                            (INTERRUPTED_TOOL_RESULT.to_owned(), true)
                        }
                    };
                    messages.push(Message::ToolResult {
                        call_id: id,
                        name,
                        content,
                        is_error,
                    });
                }
            }
        }
    }
    if messages
        .first()
        .is_some_and(|m| !matches!(m, Message::User { .. }))
    {
        messages.insert(
            0,
            Message::User {
                text: MISSING_OPENING_MESSAGE.to_owned(),
            },
        );
        repairs.push(Repair::InsertedOpeningUserMessage);
    }
    Rebuilt { messages, repairs }
}

fn fresh_id(id: &str, taken: &mut HashSet<String>) -> String {
    let mut n: u64 = 2;
    loop {
        let candidate = format!("{id}_dup{n}");
        if taken.insert(candidate.clone()) {
            return candidate;
        }
        n = n.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resume::testing::*;

    #[test]
    fn complete_history_is_unchanged() {
        let turns = vec![
            user(1, "why is api slow?"),
            assistant(2, "checking", &[("c1", "grep"), ("c2", "top")]),
            tool(3, "c1", "grep", "no errors"),
            tool(4, "c2", "top", "cpu 99%"),
            assistant(5, "cpu bound", &[]),
            notice(6, "note"),
        ];
        let r = rebuild_messages(&turns);
        assert!(r.repairs.is_empty(), "{:?}", r.repairs);
        assert_eq!(r.messages.len(), 5);
        assert!(
            matches!(&r.messages[2], Message::ToolResult { call_id, content, .. } if call_id == "c1" && content == "no errors")
        );
    }

    #[test]
    fn dangling_calls_get_synthetic_errors_in_call_order() {
        let turns = vec![
            user(1, "go"),
            assistant(2, "", &[("c1", "a"), ("c2", "b"), ("c3", "c")]),
            tool(3, "c2", "b", "two"),
        ];
        let r = rebuild_messages(&turns);
        let ids: Vec<_> = r
            .messages
            .iter()
            .filter_map(|m| match m {
                Message::ToolResult {
                    call_id,
                    content,
                    is_error,
                    ..
                } => Some((call_id.as_str(), content.as_str(), *is_error)),
                _ => None,
            })
            .collect();
        assert_eq!(
            ids,
            vec![
                ("c1", INTERRUPTED_TOOL_RESULT, true),
                ("c2", "two", false),
                ("c3", INTERRUPTED_TOOL_RESULT, true)
            ]
        );
        assert_eq!(r.repairs.len(), 2);
    }

    #[test]
    fn misplaced_duplicate_and_orphan_results() {
        let turns = vec![
            user(1, "go"),
            assistant(2, "", &[("c1", "a")]),
            user(3, "more"),
            tool(4, "c1", "a", "late"),
            tool(5, "c1", "a", "again"),
            tool(6, "zz", "a", "who"),
        ];
        let r = rebuild_messages(&turns);
        assert_eq!(
            r.repairs,
            vec![
                Repair::MovedToolResult {
                    call_id: "c1".into(),
                    from_seq: 4
                },
                Repair::DroppedDuplicateToolResult {
                    call_id: "c1".into(),
                    seq: 5
                },
                Repair::DroppedOrphanToolResult {
                    call_id: "zz".into(),
                    seq: 6
                },
            ]
        );
        assert!(matches!(&r.messages[2], Message::ToolResult { content, .. } if content == "late"));
        assert!(matches!(&r.messages[3], Message::User { .. }));
    }

    #[test]
    fn reused_call_ids_are_renamed_and_matched_locally() {
        let turns = vec![
            user(1, "go"),
            assistant(2, "", &[("call_0", "a")]),
            tool(3, "call_0", "a", "first"),
            assistant(4, "", &[("call_0", "b")]),
            tool(5, "call_0", "b", "second"),
        ];
        let r = rebuild_messages(&turns);
        assert_eq!(
            r.repairs,
            vec![Repair::RenamedDuplicateToolCall {
                call_id: "call_0".into(),
                new_id: "call_0_dup2".into(),
                seq: 4
            }]
        );
        assert!(
            matches!(&r.messages[4], Message::ToolResult { call_id, content, .. } if call_id == "call_0_dup2" && content == "second")
        );
    }

    #[test]
    fn undecodable_calls_become_text_and_openers_are_fixed() {
        let mut bad = assistant(1, "thinking", &[]);
        bad.tool_calls_raw = serde_json::json!({"not": "a list"});
        let r = rebuild_messages(&[bad, user(2, "  ")]);
        assert_eq!(r.messages.len(), 3);
        assert!(
            matches!(&r.messages[0], Message::User { text } if text == MISSING_OPENING_MESSAGE)
        );
        assert!(
            matches!(&r.messages[1], Message::Assistant { text, tool_calls } if text.starts_with("thinking\n\n[stored tool calls could not be decoded") && tool_calls.is_empty())
        );
        assert!(matches!(&r.messages[2], Message::User { text } if text == EMPTY_USER_MESSAGE));
    }

    #[test]
    fn rebuild_starts_from_the_latest_compaction() {
        let turns = vec![
            user(1, "why is api slow?"),
            assistant(2, "", &[("c1", "grep")]),
            tool(3, "c1", "grep", "old evidence"),
            assistant(4, "", &[("c2", "top")]),
            tool(5, "c2", "top", "cpu 99%"),
            compaction(6, "first summary", 2),
            assistant(7, "", &[("c3", "grep")]),
            tool(8, "c3", "grep", "newer"),
            compaction(9, "second summary", 7),
            assistant(10, "cpu bound", &[]),
        ];
        let r = rebuild_messages(&turns);
        assert!(r.repairs.is_empty(), "{:?}", r.repairs);
        let shown: Vec<String> = r
            .messages
            .iter()
            .map(|m| match m {
                Message::User { text } => format!("U:{text}"),
                Message::Assistant { text, tool_calls } => {
                    format!("A:{text}:{}", tool_calls.len())
                }
                Message::ToolResult { content, .. } => format!("T:{content}"),
            })
            .collect();
        assert_eq!(shown[0], "U:why is api slow?");
        assert!(
            shown[1].starts_with("U:[Summary by inquest") && shown[1].ends_with("second summary")
        );
        assert_eq!(&shown[2..], ["A::1", "T:newer", "A:cpu bound:0"]);
        // Nothing retained: opening, summary, later turns.
        let mut none_kept = turns[..8].to_vec();
        none_kept.push(compaction(9, "s", 9));
        none_kept.push(user(10, "and now?"));
        let r = rebuild_messages(&none_kept);
        assert_eq!(r.messages.len(), 3);
        // The opening inside the tail still comes first, once.
        let r = rebuild_messages(&[user(1, "go"), compaction(2, "s", 1)]);
        assert_eq!(r.messages.len(), 2);
        assert!(matches!(&r.messages[0], Message::User { text } if text == "go"));
    }

    #[test]
    fn long_raw_calls_are_truncated_on_a_char_boundary() {
        let mut bad = assistant(1, "", &[]);
        bad.tool_calls_raw = serde_json::Value::String("é".repeat(3000));
        let text = undecodable_turn_text(&bad);
        assert!(text.len() < 2100 && text.ends_with("…]"));
    }
}
