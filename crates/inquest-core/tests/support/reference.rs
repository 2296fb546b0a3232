//! The rebuild, recovery plan and resume plan as they were before the
//! borrowed rebuild, kept verbatim in logic (owned
//! messages, owned decoded calls, two full plans per follow-up) as the
//! reference the new code is checked against (`rebuild_props.rs`,
//! `new_rebuild_equals_the_reference`). Tests only.

#![allow(dead_code)]

use std::collections::{HashMap, HashSet};

use inquest_core::resume::{
    EMPTY_USER_MESSAGE, INTERRUPTED_TOOL_RESULT, MISSING_OPENING_MESSAGE, undecodable_turn_text,
    usable_tool_calls,
};
use inquest_core::{
    InterruptedCall, Message, RecoveryKind, Repair, Role, SessionId, Tail, ToolCall, ToolClasses,
    Turn,
};

/// The old owned message.
#[derive(Debug, Clone, PartialEq)]
pub enum OldMessage {
    User {
        text: String,
    },
    Assistant {
        text: String,
        tool_calls: Vec<ToolCall>,
    },
    ToolResult {
        call_id: String,
        name: String,
        content: String,
        is_error: bool,
    },
}

impl OldMessage {
    /// A new (borrowed) message in the old form.
    pub fn of(m: &Message<'_>) -> Self {
        match m {
            Message::User { text } => OldMessage::User {
                text: text.to_string(),
            },
            Message::Assistant { text, tool_calls } => OldMessage::Assistant {
                text: text.to_string(),
                tool_calls: tool_calls.iter().map(|c| c.to_tool_call()).collect(),
            },
            Message::ToolResult {
                call_id,
                name,
                content,
                is_error,
            } => OldMessage::ToolResult {
                call_id: call_id.to_string(),
                name: name.to_string(),
                content: content.to_string(),
                is_error: *is_error,
            },
        }
    }
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Rebuilt {
    pub messages: Vec<OldMessage>,
    pub repairs: Vec<Repair>,
}

/// The old plan's fields (its notice text is made from them by the one
/// `notice_text`, which did not change).
#[derive(Debug, Clone, PartialEq)]
pub struct OldPlan {
    pub kind: RecoveryKind,
    pub tail: Tail,
    pub repairs: Vec<Repair>,
    pub repaired_call_ids: Vec<String>,
    pub interrupted_calls: Vec<InterruptedCall>,
    pub can_continue: bool,
    pub can_auto_continue: bool,
    pub requires_confirmation: bool,
}

impl OldPlan {
    pub fn of(p: &inquest_core::RecoveryPlan) -> Self {
        OldPlan {
            kind: p.kind,
            tail: p.tail,
            repairs: p.repairs.clone(),
            repaired_call_ids: p.repaired_call_ids.clone(),
            interrupted_calls: p.interrupted_calls.clone(),
            can_continue: p.can_continue,
            can_auto_continue: p.can_auto_continue,
            requires_confirmation: p.requires_confirmation,
        }
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
    items.push(Item::Summary(inquest_core::compaction::summary_message(
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
            Block::User(text) => messages.push(OldMessage::User { text }),
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
                messages.push(OldMessage::Assistant { text, tool_calls });
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
                    messages.push(OldMessage::ToolResult {
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
        .is_some_and(|m| !matches!(m, OldMessage::User { .. }))
    {
        messages.insert(
            0,
            OldMessage::User {
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

pub fn plan_recovery(
    session_id: SessionId,
    turns: &[Turn],
    classes: &impl ToolClasses,
) -> (OldPlan, Vec<OldMessage>) {
    let mut findings = Vec::new();
    let mut own: Vec<Turn> = Vec::with_capacity(turns.len());
    for t in turns {
        if t.session_id == session_id {
            own.push(t.clone());
        } else {
            findings.push(Repair::DroppedForeignTurn { seq: t.seq.get() });
        }
    }
    let mut degraded = !findings.is_empty();

    // A read from a compaction that carries counters skips the turns
    // between the opening and its first retained seq: that gap is the
    // read's, not a hole in the history.
    let read_gap_ends = own
        .iter()
        .rev()
        .find_map(|t| t.compaction().filter(|i| i.carried.is_some()))
        .map_or(0, |i| i.first_retained_seq);
    let mut previous = 0u64;
    for t in &own {
        let seq = t.seq.get();
        if seq > previous.saturating_add(1) && seq <= read_gap_ends && previous > 0 {
            previous = seq;
            continue;
        }
        if seq <= previous {
            findings.push(Repair::SeqNotIncreasing {
                seq,
                previous_seq: previous,
            });
        } else if seq > previous.saturating_add(1) {
            findings.push(Repair::HistoryGap {
                after_seq: previous,
                next_seq: seq,
            });
        }
        previous = previous.max(seq);
    }

    let visible: Vec<&Turn> = own.iter().filter(|t| !t.role.is_record()).collect();
    if visible.is_empty() {
        findings.push(Repair::NoTurns);
    }
    degraded |= !findings.is_empty();
    degraded |= visible.first().is_some_and(|t| t.role != Role::User);

    // Raw scan: undecodable calls, orphan results, and which results
    // answer a call for the first time ("fresh", as opposed to duplicates).
    let mut open: HashMap<String, usize> = HashMap::new();
    let mut fresh = vec![false; visible.len()];
    let mut decoded = Vec::with_capacity(visible.len());
    for (i, t) in visible.iter().enumerate() {
        let calls = usable_tool_calls(t);
        degraded |= calls.is_none();
        let calls = calls.unwrap_or_default();
        for c in &calls {
            *open.entry(c.id.clone()).or_default() += 1;
        }
        if t.role == Role::Tool {
            let id = t.tool_call_id.as_deref().unwrap_or_default();
            match open.get_mut(id) {
                Some(n) if *n > 0 => {
                    *n -= 1;
                    if let Some(f) = fresh.get_mut(i) {
                        *f = true;
                    }
                }
                Some(_) => {}
                None => degraded = true,
            }
        }
        decoded.push(calls);
    }

    let (tail, interrupted_calls) = classify_tail(&visible, &decoded, &fresh, classes);
    let kind = if degraded || tail == Tail::Empty {
        RecoveryKind::DegradedHistory
    } else {
        match tail {
            Tail::FinalAnswer => RecoveryKind::Clean,
            Tail::AwaitingModel => RecoveryKind::InterruptedPrompt,
            Tail::DanglingToolCalls | Tail::Empty => RecoveryKind::InterruptedTurn,
        }
    };

    let rebuilt = rebuild_messages(&own);
    let mut repairs = findings;
    repairs.extend(rebuilt.repairs);
    let mut repaired_call_ids: Vec<String> = Vec::new();
    for r in &repairs {
        if let Repair::SynthesizedToolResult { call_id, .. } = r
            && !repaired_call_ids.contains(call_id)
        {
            repaired_call_ids.push(call_id.clone());
        }
    }

    let can_continue = matches!(tail, Tail::AwaitingModel | Tail::DanglingToolCalls);
    let can_auto_continue = match kind {
        RecoveryKind::InterruptedPrompt => true,
        RecoveryKind::InterruptedTurn => interrupted_calls
            .iter()
            .all(|c| c.side_effect.safe_to_repeat()),
        RecoveryKind::Clean | RecoveryKind::DegradedHistory => false,
    };
    let plan = OldPlan {
        kind,
        tail,
        repairs,
        repaired_call_ids,
        interrupted_calls,
        can_continue,
        can_auto_continue,
        requires_confirmation: can_continue && !can_auto_continue,
    };
    (plan, rebuilt.messages)
}

fn classify_tail(
    visible: &[&Turn],
    decoded: &[Vec<ToolCall>],
    fresh: &[bool],
    classes: &impl ToolClasses,
) -> (Tail, Vec<InterruptedCall>) {
    let Some(last) = visible.iter().rposition(|t| t.role != Role::Tool) else {
        return (Tail::Empty, Vec::new());
    };
    let Some(turn) = visible.get(last) else {
        return (Tail::Empty, Vec::new());
    };
    let trailing = visible.get(last + 1..).unwrap_or_default();
    let any_fresh = fresh.get(last + 1..).unwrap_or_default().contains(&true);
    if turn.role == Role::User {
        return (Tail::AwaitingModel, Vec::new());
    }
    let calls = decoded.get(last).map(Vec::as_slice).unwrap_or_default();
    if calls.is_empty() {
        let tail = if any_fresh {
            Tail::AwaitingModel
        } else {
            Tail::FinalAnswer
        };
        return (tail, Vec::new());
    }
    let mut answered = vec![false; calls.len()];
    for result in trailing {
        let id = result.tool_call_id.as_deref().unwrap_or_default();
        let slot = calls
            .iter()
            .zip(answered.iter_mut())
            .find(|(c, done)| c.id == id && !**done);
        if let Some((_, done)) = slot {
            *done = true;
        }
    }
    let dangling: Vec<InterruptedCall> = calls
        .iter()
        .zip(&answered)
        .filter(|(_, done)| !**done)
        .map(|(c, _)| InterruptedCall {
            call_id: c.id.clone(),
            name: c.name.clone(),
            assistant_seq: turn.seq.get(),
            side_effect: classes.side_effect(&c.name),
        })
        .collect();
    if dangling.is_empty() {
        (Tail::AwaitingModel, dangling)
    } else {
        (Tail::DanglingToolCalls, dangling)
    }
}

pub fn plan_resume(
    session_id: SessionId,
    turns: &[Turn],
    classes: &impl ToolClasses,
) -> (OldPlan, Vec<OldMessage>) {
    let (full, transcript) = plan_recovery(session_id, turns, classes);
    let Some(before) = follow_up_split(session_id, turns) else {
        return (full, transcript);
    };
    if full.kind == RecoveryKind::DegradedHistory {
        return (full, transcript);
    }
    let (previous, _) = plan_recovery(session_id, before, classes);
    // Degraded before but not with the whole history cannot happen (the
    // same findings), so the previous kind is used as is.
    let kind = previous.kind;
    let can_auto_continue = match kind {
        RecoveryKind::Clean | RecoveryKind::InterruptedPrompt => true,
        RecoveryKind::InterruptedTurn => previous.can_auto_continue,
        RecoveryKind::DegradedHistory => false,
    };
    let plan = OldPlan {
        kind,
        tail: previous.tail,
        interrupted_calls: previous.interrupted_calls,
        can_continue: true,
        can_auto_continue,
        requires_confirmation: !can_auto_continue,
        ..full
    };
    (plan, transcript)
}

/// Whether the tail is a follow-up: a user message with model-visible
/// turns of this session before it (a first message is not one).
#[allow(dead_code)]
pub fn is_follow_up(session_id: SessionId, turns: &[Turn]) -> bool {
    follow_up_split(session_id, turns).is_some()
}

/// The turns before the follow-up message, when the last model-visible
/// turn is a user message with model-visible turns of this session before
/// it.
fn follow_up_split(session_id: SessionId, turns: &[Turn]) -> Option<&[Turn]> {
    let visible = |t: &Turn| t.session_id == session_id && !t.role.is_record();
    let last = turns.iter().rposition(visible)?;
    let turn = turns.get(last)?;
    if turn.role != Role::User {
        return None;
    }
    // Every user message at the tail is the follow-up (messages queued
    // behind a burst open the next one together), as in the crate.
    let mut first = last;
    while let Some(prev) = turns.get(..first)?.iter().rposition(visible) {
        if turns.get(prev)?.role != Role::User {
            break;
        }
        first = prev;
    }
    let before = turns.get(..first)?;
    before.iter().any(visible).then_some(before)
}
