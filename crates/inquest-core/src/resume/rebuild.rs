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
//! - Compaction: with a compaction turn whose record decodes,
//!   the transcript starts from the latest one: the session's opening user
//!   turn (verbatim, always first, never repeated), the summary as a user message
//!   ([`crate::compaction::summary_message`]), the turns before the
//!   compaction from its `first_retained_seq` on (the retained tail), then
//!   every turn after it. Every other compaction turn is left out like a
//!   notice. The rules above apply to what is kept.
//!
//! Never panics, whatever the input.

//! The rebuilt messages borrow from the turns (see [`Message`]); the cost
//! is one pass with no copy of any text and no decoded JSON: a call's
//! arguments stay the stored `Value`. Matching results to calls and
//! finding reused ids is `call_index.rs`: a healthy history keeps one
//! keyed hash per call id; the first reused id or misplaced result builds
//! exact bookkeeping (interned ids, per-id lists of waiting calls) once,
//! so matching a result stays O(1) whatever the session's length.

use std::borrow::Cow;
use std::collections::HashSet;

use serde_json::Value;

use super::call_index::{Answer, CallIndex};
use super::message::{
    EMPTY_USER_MESSAGE, INTERRUPTED_TOOL_RESULT, MISSING_OPENING_MESSAGE, Message, Repair,
};
use super::message_calls::{CallArguments, MessageCall, MessageCalls};
use crate::{Role, ToolCall, Turn};

/// A rebuilt transcript and what was changed to make it valid. Its
/// messages borrow from the turns it was rebuilt from.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Rebuilt<'a> {
    pub messages: Vec<Message<'a>>,
    pub repairs: Vec<Repair>,
}

impl Rebuilt<'_> {
    /// The messages, owning what they hold (for a transcript that outlives
    /// the turns, like the agent's).
    pub fn into_owned_messages(self) -> Vec<Message<'static>> {
        self.messages.into_iter().map(Message::into_owned).collect()
    }
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

/// [`usable_tool_calls`], borrowed from the turn: the same calls, in the
/// same cases, without decoding the stored JSON into owned values.
pub fn stored_calls(turn: &Turn) -> Option<Vec<MessageCall<'_>>> {
    let mut calls = Vec::new();
    stored_calls_into(turn, &mut calls).then_some(calls)
}

/// [`stored_calls`] into `out` (cleared first, so one buffer serves a
/// whole scan); false when the calls are not usable (`out` is then empty).
pub(crate) fn stored_calls_into<'a>(turn: &'a Turn, out: &mut Vec<MessageCall<'a>>) -> bool {
    out.clear();
    if turn.role != Role::Assistant {
        return true;
    }
    if !decoded_calls_into(turn, out) {
        return false;
    }
    if out.iter().all(|c| !is_blank(&c.id) && !is_blank(&c.name)) {
        return true;
    }
    out.clear();
    false
}

/// `text.trim().is_empty()`, reading it from one end only.
pub(crate) fn is_blank(text: &str) -> bool {
    text.chars().all(char::is_whitespace)
}

/// [`Turn::tool_calls`], borrowed from the turn where the column has the
/// shape every writer produces; a column of another shape that still
/// decodes is decoded as [`ToolCall::decode_all`] does, and owned. `None`
/// when it does not decode.
pub(crate) fn decoded_calls(turn: &Turn) -> Option<Vec<MessageCall<'_>>> {
    let mut calls = Vec::new();
    decoded_calls_into(turn, &mut calls).then_some(calls)
}

fn decoded_calls_into<'a>(turn: &'a Turn, out: &mut Vec<MessageCall<'a>>) -> bool {
    out.clear();
    if turn.role == Role::Compaction {
        return true;
    }
    if let Value::Array(items) = &turn.tool_calls_raw {
        out.reserve(items.len());
        let mut borrowed = true;
        for item in items {
            match borrowed_call(item) {
                Some(call) => out.push(call),
                None => {
                    borrowed = false;
                    break;
                }
            }
        }
        if borrowed {
            return true;
        }
        out.clear();
    }
    match turn.tool_calls() {
        Ok(calls) => {
            out.extend(calls.into_iter().map(|c| -> MessageCall<'a> { c.into() }));
            true
        }
        Err(_) => false,
    }
}

/// A stored call of the shape [`ToolCall::encode_all`] writes (an object
/// with a string `id` and `name` and object-or-string `arguments`; other
/// keys ignored, as the decoder ignores them), borrowed; `None` for any
/// other shape.
fn borrowed_call(item: &Value) -> Option<MessageCall<'_>> {
    let object = item.as_object()?;
    let (mut id, mut name, mut arguments) = (None, None, None);
    for (key, value) in object {
        match key.as_str() {
            "id" => id = Some(value.as_str()?),
            "name" => name = Some(value.as_str()?),
            "arguments" => arguments = Some(CallArguments::from_stored(value)?),
            _ => {}
        }
    }
    Some(MessageCall {
        id: Cow::Borrowed(id?),
        name: Cow::Borrowed(name?),
        arguments: arguments?,
    })
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

/// One input of the rebuild: a stored turn, or a compaction's summary.
#[derive(Clone)]
enum Item<'a> {
    Turn(&'a Turn),
    Summary(String),
}

/// The turns (and summary) the transcript is rebuilt from, from the
/// latest compaction on (see the module docs); `None` without one: every
/// turn as it is.
fn view<'a, I>(turns: I) -> Option<Vec<Item<'a>>>
where
    I: Iterator<Item = &'a Turn> + Clone,
{
    let (at, compaction, info) = turns
        .clone()
        .enumerate()
        .filter(|(_, t)| t.role == Role::Compaction)
        .filter_map(|(i, t)| t.compaction().map(|info| (i, t, info)))
        .last()?;
    let retained = |t: &Turn| t.seq.get() >= info.first_retained_seq;
    let mut items = Vec::new();
    let opening = turns.clone().take(at).position(|t| t.role == Role::User);
    if let Some(o) = opening.and_then(|o| turns.clone().nth(o)) {
        items.push(Item::Turn(o));
    }
    let model_turns = info.carried.as_ref().map(|c| c.assistant_turns);
    items.push(Item::Summary(crate::compaction::summary_message(
        &compaction.content,
        model_turns,
    )));
    for (i, t) in turns.enumerate() {
        if t.role == Role::Compaction || Some(i) == opening {
            continue;
        }
        if i > at || retained(t) {
            items.push(Item::Turn(t));
        }
    }
    Some(items)
}

/// Every id a call may end up with, so renames never collide: made the
/// first time a call is renamed (rare: legacy sessions of providers that
/// reused ids).
fn all_call_ids<'a>(items: impl Iterator<Item = Item<'a>>) -> HashSet<Cow<'a, str>> {
    let mut taken = HashSet::new();
    for item in items {
        if let Item::Turn(t) = item {
            for call in stored_calls(t).unwrap_or_default() {
                taken.insert(call.id);
            }
        }
    }
    taken
}

/// Rebuilds the provider-neutral transcript; see the module docs.
pub fn rebuild_messages(turns: &[Turn]) -> Rebuilt<'_> {
    rebuild_from(turns.iter())
}

/// [`rebuild_messages`] over turns given by reference (a filtered view).
pub(crate) fn rebuild_refs<'a>(turns: &[&'a Turn]) -> Rebuilt<'a> {
    rebuild_from(turns.iter().copied())
}

fn rebuild_from<'a, I>(turns: I) -> Rebuilt<'a>
where
    I: Iterator<Item = &'a Turn> + Clone,
{
    match view(turns.clone()) {
        None => rebuild_items(turns.map(Item::Turn)),
        Some(items) => rebuild_items(items.into_iter()),
    }
}

fn rebuild_items<'a, I>(items: I) -> Rebuilt<'a>
where
    I: Iterator<Item = Item<'a>> + Clone,
{
    let mut transcript = Transcript::with_capacity(items.size_hint().0);
    let all_ids = || all_call_ids(items.clone());
    for item in items.clone() {
        let turn = match item {
            Item::Turn(turn) => turn,
            Item::Summary(text) => {
                transcript.push_summary(text);
                continue;
            }
        };
        match turn.role {
            Role::Notice | Role::Compaction => {}
            Role::User => transcript.push_user(turn),
            Role::Assistant => transcript.push_assistant(turn, &all_ids),
            Role::Tool => transcript.place_result(turn),
        }
    }
    transcript.finish()
}

/// A transcript being rebuilt: the messages so far, the repairs made, and
/// the calls still waiting for a result.
struct Transcript<'a> {
    repairs: Vec<Repair>,
    messages: Vec<Message<'a>>,
    calls: CallIndex<'a>,
    /// Every id a call may end up with; see [`all_call_ids`].
    taken: Option<HashSet<Cow<'a, str>>>,
    // One turn's calls as decoded; moved into its message (inline when
    // there is one), so the buffer serves every turn.
    out: Vec<MessageCall<'a>>,
}

impl<'a> Transcript<'a> {
    /// A transcript sized for about `items` turns.
    fn with_capacity(items: usize) -> Self {
        Transcript {
            repairs: Vec::new(),
            messages: Vec::with_capacity(items.saturating_add(1)),
            // About one call per two turns (an assistant turn and its result).
            calls: CallIndex::with_capacity(items / 2 + 1),
            taken: None,
            out: Vec::new(),
        }
    }

    /// A compaction's summary, as a user message.
    fn push_summary(&mut self, text: String) {
        self.calls.close();
        self.messages.push(Message::User {
            text: Cow::Owned(text),
        });
    }

    fn push_user(&mut self, turn: &'a Turn) {
        self.calls.close();
        let text = if is_blank(&turn.content) {
            self.repairs.push(Repair::EmptyUserMessage {
                seq: turn.seq.get(),
            });
            Cow::Borrowed(EMPTY_USER_MESSAGE)
        } else {
            Cow::Borrowed(turn.content.as_str())
        };
        self.messages.push(Message::User { text });
    }

    /// An assistant turn and, right after it, a synthetic result for each
    /// of its calls. `all_ids` gives [`all_call_ids`] of the whole input.
    fn push_assistant(&mut self, turn: &'a Turn, all_ids: &impl Fn() -> HashSet<Cow<'a, str>>) {
        self.calls.close();
        let Some(text) = self.assistant_text(turn) else {
            return;
        };
        let at = self.messages.len();
        self.add_calls_renaming_reused(at, turn.seq.get(), all_ids);
        let count = self.out.len();
        self.messages.push(Message::Assistant {
            text,
            tool_calls: MessageCalls::take_from(&mut self.out),
        });
        self.push_interrupted_results(at, count);
    }

    /// The text an assistant turn is shown with, its calls decoded into
    /// `out`; `None` when it has neither text nor calls (it is left out).
    fn assistant_text(&mut self, turn: &'a Turn) -> Option<Cow<'a, str>> {
        let seq = turn.seq.get();
        let text = if stored_calls_into(turn, &mut self.out) {
            Cow::Borrowed(turn.content.as_str())
        } else {
            self.repairs.push(Repair::UndecodableToolCalls { seq });
            Cow::Owned(undecodable_turn_text(turn))
        };
        // Providers refuse whitespace-only text; blank means none.
        let blank = is_blank(&text);
        if self.out.is_empty() && blank {
            self.repairs.push(Repair::DroppedEmptyAssistantTurn { seq });
            return None;
        }
        Some(if blank { Cow::Borrowed("") } else { text })
    }

    /// Adds the calls in `out` (of the assistant message about to go at
    /// `at`) to the index, renaming each whose id an earlier call used.
    fn add_calls_renaming_reused(
        &mut self,
        at: usize,
        seq: u64,
        all_ids: &impl Fn() -> HashSet<Cow<'a, str>>,
    ) {
        for k in self.calls.add_calls(&self.messages, at, seq, &self.out) {
            if let Some(call) = self.out.get_mut(k) {
                let taken = self.taken.get_or_insert_with(all_ids);
                let new_id = fresh_id(&call.id, taken);
                self.repairs.push(Repair::RenamedDuplicateToolCall {
                    call_id: call.id.clone().into_owned(),
                    new_id: new_id.clone(),
                    seq,
                });
                call.id = Cow::Owned(new_id);
            }
        }
    }

    /// Each call's result follows in call order: a synthetic one until a
    /// stored result answers it.
    fn push_interrupted_results(&mut self, at: usize, count: usize) {
        for k in 0..count {
            let Some(Message::Assistant { tool_calls, .. }) = self.messages.get(at) else {
                break;
            };
            let Some(call) = tool_calls.get(k) else {
                break;
            };
            let result = Message::ToolResult {
                call_id: call.id.clone(),
                name: call.name.clone(),
                content: Cow::Borrowed(INTERRUPTED_TOOL_RESULT),
                is_error: true,
            };
            self.messages.push(result);
        }
    }

    /// A stored result: its content goes in the synthetic result of the
    /// call it answers, or it is dropped.
    fn place_result(&mut self, turn: &'a Turn) {
        let seq = turn.seq.get();
        let call_id = turn.tool_call_id.as_deref().unwrap_or_default();
        let Answer { slot, in_open } = match self.calls.answer(&self.messages, call_id) {
            Ok(answer) => answer,
            Err(known) => {
                let call_id = call_id.to_owned();
                self.repairs.push(if known {
                    Repair::DroppedDuplicateToolResult { call_id, seq }
                } else {
                    Repair::DroppedOrphanToolResult { call_id, seq }
                });
                return;
            }
        };
        if !in_open {
            self.repairs.push(Repair::MovedToolResult {
                call_id: call_id.to_owned(),
                from_seq: seq,
            });
        }
        if let Some(Message::ToolResult {
            content, is_error, ..
        }) = self.messages.get_mut(slot)
        {
            *content = Cow::Borrowed(turn.content.as_str());
            *is_error = turn.is_error;
        }
    }

    fn finish(mut self) -> Rebuilt<'a> {
        // Calls never answered keep their synthetic result, in transcript
        // order.
        self.calls.close();
        self.report_synthesized_results();
        self.ensure_user_opening();
        Rebuilt {
            messages: self.messages,
            repairs: self.repairs,
        }
    }

    fn report_synthesized_results(&mut self) {
        for (call_id, slot, assistant_seq) in self.calls.unanswered(&self.messages) {
            let name = match self.messages.get(slot) {
                Some(Message::ToolResult { name, .. }) => name.to_string(),
                _ => String::new(),
            };
            self.repairs.push(Repair::SynthesizedToolResult {
                call_id: call_id.to_owned(),
                name,
                assistant_seq,
            });
        }
    }

    fn ensure_user_opening(&mut self) {
        if self
            .messages
            .first()
            .is_some_and(|m| !matches!(m, Message::User { .. }))
        {
            self.messages.insert(
                0,
                Message::User {
                    text: Cow::Borrowed(MISSING_OPENING_MESSAGE),
                },
            );
            self.repairs.push(Repair::InsertedOpeningUserMessage);
        }
    }
}

fn fresh_id<'a>(id: &str, taken: &mut HashSet<Cow<'a, str>>) -> String {
    let mut n: u64 = 2;
    loop {
        let candidate = format!("{id}_dup{n}");
        if !taken.contains(candidate.as_str()) {
            taken.insert(Cow::Owned(candidate.clone()));
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
                } => Some((&**call_id, &**content, *is_error)),
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
        let turns = [bad, user(2, "  ")];
        let r = rebuild_messages(&turns);
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
        let turns = [user(1, "go"), compaction(2, "s", 1)];
        let r = rebuild_messages(&turns);
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
