//! The recovery plan: what a replica does with a session whose worker died.
//!
//! [`plan_recovery`] is the one function every entry point (lazy claim on
//! `SendMessage`/`WatchSession`, the orphan sweeper, `GetRecoveryPlan`)
//! calls. It classifies the RAW stored turns first, then rebuilds the
//! transcript, so a repair (a synthesized result) can never hide an
//! interrupted turn.

use std::collections::HashMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::message::{Message, Repair};
use super::message_calls::MessageCall;
use super::rebuild::{rebuild_refs, stored_calls, stored_calls_into};
use crate::{Role, SessionId, SideEffect, ToolClasses, Turn};

/// How a session stopped, as read from its stored turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecoveryKind {
    /// The tail is a final assistant message; nothing to continue.
    Clean,
    /// The model owes an answer to a user turn or to a complete set of tool
    /// results; safe to continue automatically.
    InterruptedPrompt,
    /// The last assistant turn has tool calls without results. They may
    /// have run; continue automatically only if all are read-only or
    /// idempotent.
    InterruptedTurn,
    /// The stored transcript breaks an invariant; never continued
    /// automatically.
    DegradedHistory,
}

impl RecoveryKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RecoveryKind::Clean => "clean",
            RecoveryKind::InterruptedPrompt => "interrupted_prompt",
            RecoveryKind::InterruptedTurn => "interrupted_turn",
            RecoveryKind::DegradedHistory => "degraded_history",
        }
    }
}

/// What the end of the transcript looks like, whatever else is wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tail {
    /// An assistant message without tool calls (after which only
    /// duplicate or orphan results may follow).
    FinalAnswer,
    /// A user turn, or tool results the model has not answered.
    AwaitingModel,
    /// The last assistant turn has calls without results.
    DanglingToolCalls,
    /// No user or assistant turn at all.
    Empty,
}

/// A tool call of the last assistant turn that never got a result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterruptedCall {
    pub call_id: String,
    pub name: String,
    pub assistant_seq: u64,
    pub side_effect: SideEffect,
}

/// The classification and repairs computed when a session is recovered.
/// Serializes so the store can keep the last plan. The repaired
/// transcript it was computed with is not part of it: it borrows from the
/// turns ([`plan_recovery_rebuilt`], [`crate::plan_resume_rebuilt`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecoveryPlan {
    pub kind: RecoveryKind,
    pub tail: Tail,
    /// Broken invariants found (gaps, out-of-order seqs, foreign turns,
    /// no turns) followed by the rebuild's repairs.
    pub repairs: Vec<Repair>,
    /// Stored ids of every call answered with a synthetic result, so
    /// watchers can settle "running" tool cards.
    pub repaired_call_ids: Vec<String>,
    /// The dangling calls of the last assistant turn.
    pub interrupted_calls: Vec<InterruptedCall>,
    /// The model owes an answer: a burst may run from this transcript,
    /// possibly only after a human confirmed.
    pub can_continue: bool,
    /// A burst may run now, without a human.
    pub can_auto_continue: bool,
    /// A human must confirm (`ContinueSession`) before a burst runs.
    pub requires_confirmation: bool,
    /// The text of the `notice` turn recording this plan.
    pub notice_text: String,
}

/// Builds the recovery plan for `session_id` from its stored turns (in seq
/// order) and the session's tool classes.
///
/// Degraded history: `can_auto_continue` is always false; `can_continue`
/// and `requires_confirmation` are true when the tail still owes a model
/// answer, so a human may choose to go on from the repaired transcript.
pub fn plan_recovery(
    session_id: SessionId,
    turns: &[Turn],
    classes: &impl ToolClasses,
) -> RecoveryPlan {
    plan_recovery_rebuilt(session_id, turns, classes).0
}

/// [`plan_recovery`] and the repaired, provider-valid transcript it was
/// computed with (turns of other sessions left out), borrowed from
/// `turns`: what a burst runs from, so it is rebuilt once.
pub fn plan_recovery_rebuilt<'a>(
    session_id: SessionId,
    turns: &'a [Turn],
    classes: &impl ToolClasses,
) -> (RecoveryPlan, Vec<Message<'a>>) {
    let (found, own) = classify(session_id, turns, classes);
    let rebuilt = rebuild_refs(&own);
    let mut repairs = found.findings;
    repairs.extend(rebuilt.repairs);
    let mut repaired_call_ids: Vec<String> = Vec::new();
    for r in &repairs {
        if let Repair::SynthesizedToolResult { call_id, .. } = r
            && !repaired_call_ids.contains(call_id)
        {
            repaired_call_ids.push(call_id.clone());
        }
    }

    let tail = found.tail;
    let kind = found.kind;
    let can_continue = matches!(tail, Tail::AwaitingModel | Tail::DanglingToolCalls);
    let can_auto_continue = found.can_auto_continue;
    let mut plan = RecoveryPlan {
        kind,
        tail,
        repairs,
        repaired_call_ids,
        interrupted_calls: found.interrupted_calls,
        can_continue,
        can_auto_continue,
        requires_confirmation: can_continue && !can_auto_continue,
        notice_text: String::new(),
    };
    plan.notice_text = notice_text(&plan);
    (plan, rebuilt.messages)
}

/// How a session stopped, read from the raw stored turns (before any
/// repair), without rebuilding the transcript.
pub(super) struct Classification {
    /// Broken invariants found (gaps, out-of-order seqs, foreign turns, no
    /// turns).
    pub findings: Vec<Repair>,
    pub kind: RecoveryKind,
    pub tail: Tail,
    pub interrupted_calls: Vec<InterruptedCall>,
    pub can_auto_continue: bool,
}

/// Classifies `turns`; also returns the turns of `session_id` (the rest
/// are findings), which the transcript is rebuilt from.
pub(super) fn classify<'a>(
    session_id: SessionId,
    turns: &'a [Turn],
    classes: &impl ToolClasses,
) -> (Classification, Vec<&'a Turn>) {
    let (own, mut findings) = split_foreign(session_id, turns);
    let mut degraded = !findings.is_empty();
    findings.extend(seq_findings(&own));

    let visible: Vec<&Turn> = own
        .iter()
        .copied()
        .filter(|t| !t.role.is_record())
        .collect();
    if visible.is_empty() {
        findings.push(Repair::NoTurns);
    }
    degraded |= !findings.is_empty();
    degraded |= visible.first().is_some_and(|t| t.role != Role::User);

    // Raw scan: undecodable calls, orphan results, and which results
    // answer a call for the first time ("fresh", as opposed to duplicates).
    let (scan_degraded, fresh) = scan_fast(&visible).unwrap_or_else(|| scan_exact(&visible));
    degraded |= scan_degraded;

    let (tail, interrupted_calls) = classify_tail(&visible, &fresh, classes);
    let kind = recovery_kind(degraded, tail);
    let can_auto_continue = auto_continues(kind, &interrupted_calls);
    let found = Classification {
        findings,
        kind,
        tail,
        interrupted_calls,
        can_auto_continue,
    };
    (found, own)
}

/// The turns of `session_id`, and a finding for each turn of another
/// session.
fn split_foreign(session_id: SessionId, turns: &[Turn]) -> (Vec<&Turn>, Vec<Repair>) {
    let mut findings = Vec::new();
    let mut own: Vec<&Turn> = Vec::with_capacity(turns.len());
    for t in turns {
        if t.session_id == session_id {
            own.push(t);
        } else {
            findings.push(Repair::DroppedForeignTurn { seq: t.seq.get() });
        }
    }
    (own, findings)
}

/// The seqs of `own` that go back or skip ahead, in order.
fn seq_findings(own: &[&Turn]) -> Vec<Repair> {
    let mut findings = Vec::new();
    // A read from a compaction that carries counters skips the turns
    // between the opening and its first retained seq: that gap is the
    // read's, not a hole in the history.
    let read_gap_ends = own
        .iter()
        .rev()
        .find_map(|t| t.compaction().filter(|i| i.carried.is_some()))
        .map_or(0, |i| i.first_retained_seq);
    let mut previous = 0u64;
    for t in own {
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
    findings
}

fn recovery_kind(degraded: bool, tail: Tail) -> RecoveryKind {
    if degraded || tail == Tail::Empty {
        RecoveryKind::DegradedHistory
    } else {
        match tail {
            Tail::FinalAnswer => RecoveryKind::Clean,
            Tail::AwaitingModel => RecoveryKind::InterruptedPrompt,
            Tail::DanglingToolCalls | Tail::Empty => RecoveryKind::InterruptedTurn,
        }
    }
}

/// Whether a session of `kind` may continue without a human.
fn auto_continues(kind: RecoveryKind, interrupted_calls: &[InterruptedCall]) -> bool {
    match kind {
        RecoveryKind::InterruptedPrompt => true,
        RecoveryKind::InterruptedTurn => interrupted_calls
            .iter()
            .all(|c| c.side_effect.safe_to_repeat()),
        RecoveryKind::Clean | RecoveryKind::DegradedHistory => false,
    }
}

/// The raw scan for the healthy pattern, without a lookup: every result
/// answers a call of the latest assistant turn that no result since
/// answered. Such a result is fresh whatever came before (that turn's
/// calls of its id are still open), and none is an orphan, so this gives
/// exactly what [`scan_exact`] gives; `None` as soon as a result does not
/// fit, and the exact scan runs instead. Returns (degraded, fresh).
fn scan_fast(visible: &[&Turn]) -> Option<(bool, Vec<bool>)> {
    let mut fresh = vec![false; visible.len()];
    let mut undecodable = false;
    let mut latest: Vec<MessageCall<'_>> = Vec::new();
    let mut answered: Vec<bool> = Vec::new();
    for (i, &t) in visible.iter().enumerate() {
        match t.role {
            Role::Assistant => {
                undecodable |= !stored_calls_into(t, &mut latest);
                answered.clear();
                answered.resize(latest.len(), false);
            }
            Role::Tool => {
                let id = t.tool_call_id.as_deref().unwrap_or_default();
                let (_, done) = latest
                    .iter()
                    .zip(answered.iter_mut())
                    .find(|(c, done)| !**done && c.id == id)?;
                *done = true;
                if let Some(f) = fresh.get_mut(i) {
                    *f = true;
                }
            }
            Role::User | Role::Notice | Role::Compaction => {}
        }
    }
    Some((undecodable, fresh))
}

/// The raw scan in general: open calls counted per stored id over the
/// whole history. Returns (degraded, fresh).
fn scan_exact(visible: &[&Turn]) -> (bool, Vec<bool>) {
    let mut degraded = false;
    let mut open: HashMap<std::borrow::Cow<'_, str>, usize> = HashMap::new();
    let mut fresh = vec![false; visible.len()];
    for (i, &t) in visible.iter().enumerate() {
        match t.role {
            Role::Assistant => match stored_calls(t) {
                Some(calls) => {
                    for c in calls {
                        *open.entry(c.id).or_default() += 1;
                    }
                }
                None => degraded = true,
            },
            Role::Tool => {
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
            Role::User | Role::Notice | Role::Compaction => {}
        }
    }
    (degraded, fresh)
}

pub(super) fn classify_tail(
    visible: &[&Turn],
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
    // An assistant turn whose calls do not decode has none (the history is
    // degraded anyway).
    let calls: Vec<MessageCall<'_>> = stored_calls(turn).unwrap_or_default();
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
            call_id: c.id.to_string(),
            name: c.name.to_string(),
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

pub(super) fn notice_text(plan: &RecoveryPlan) -> String {
    let mut text = format!("Recovery: {}. ", plan.kind.as_str());
    let n = plan.interrupted_calls.len();
    let calls = if n == 1 {
        "1 tool call".to_owned()
    } else {
        format!("{n} tool calls")
    };
    let unsafe_tools: Vec<String> = plan
        .interrupted_calls
        .iter()
        .filter(|c| !c.side_effect.safe_to_repeat())
        .map(|c| format!("{} ({})", c.name, c.call_id))
        .collect();
    text.push_str(&match plan.kind {
        RecoveryKind::Clean => "The last burst had finished; nothing to continue.".to_owned(),
        RecoveryKind::InterruptedPrompt => {
            "The model had not answered yet; continuing automatically.".to_owned()
        }
        RecoveryKind::InterruptedTurn if plan.can_auto_continue => format!(
            "The run stopped while {calls} had no recorded result; they are marked as failed and may have partly run. All are read-only or idempotent, so the session continues automatically."
        ),
        RecoveryKind::InterruptedTurn => format!(
            "The run stopped while {calls} had no recorded result; they are marked as failed and may have partly run. Waiting for confirmation before continuing, because these may change things: {}.",
            unsafe_tools.join(", ")
        ),
        RecoveryKind::DegradedHistory if plan.can_continue => {
            "The stored transcript breaks an invariant; it is never continued automatically. A human may confirm to continue from the repaired transcript.".to_owned()
        }
        RecoveryKind::DegradedHistory => {
            "The stored transcript breaks an invariant; it is never continued automatically, and the model owes no answer.".to_owned()
        }
    });
    if !plan.repairs.is_empty() {
        text.push_str("\nRepairs:");
        for r in &plan.repairs {
            let _ = write!(text, "\n- {}", r.describe());
        }
    }
    if !plan.repaired_call_ids.is_empty() {
        let _ = write!(
            text,
            "\nRepaired tool calls: {}",
            plan.repaired_call_ids.join(", ")
        );
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resume::testing::*;

    fn classes(tool: &str) -> SideEffect {
        match tool {
            "grep" => SideEffect::ReadOnly,
            "scale" => SideEffect::Idempotent,
            _ => SideEffect::Mutating,
        }
    }

    fn plan(turns: &[Turn]) -> RecoveryPlan {
        plan_recovery(session(), turns, &classes)
    }

    #[test]
    fn clean_tail() {
        let p = plan(&[user(1, "a"), assistant(2, "done", &[]), notice(3, "n")]);
        assert_eq!(p.kind, RecoveryKind::Clean);
        assert!(!p.can_continue && !p.can_auto_continue && !p.requires_confirmation);
        assert!(p.repairs.is_empty());
    }

    #[test]
    fn interrupted_prompts() {
        let p = plan(&[user(1, "a")]);
        assert_eq!(p.kind, RecoveryKind::InterruptedPrompt);
        assert!(p.can_auto_continue && !p.requires_confirmation);
        let p = plan(&[
            user(1, "a"),
            assistant(2, "", &[("c1", "rm")]),
            tool(3, "c1", "rm", "ok"),
        ]);
        assert_eq!(p.kind, RecoveryKind::InterruptedPrompt);
        assert!(p.interrupted_calls.is_empty());
    }

    #[test]
    fn interrupted_turn_needs_confirmation_unless_all_safe() {
        let turns = [
            user(1, "a"),
            assistant(2, "", &[("c1", "grep"), ("c2", "rm")]),
            tool(3, "c1", "grep", "x"),
        ];
        let p = plan(&turns);
        assert_eq!(p.kind, RecoveryKind::InterruptedTurn);
        assert_eq!(p.repaired_call_ids, vec!["c2".to_owned()]);
        assert!(p.requires_confirmation && !p.can_auto_continue && p.can_continue);
        assert!(p.notice_text.contains("rm (c2)"), "{}", p.notice_text);

        let turns = [
            user(1, "a"),
            assistant(2, "", &[("c1", "grep"), ("c2", "scale")]),
        ];
        let p = plan(&turns);
        assert_eq!(p.kind, RecoveryKind::InterruptedTurn);
        assert!(p.can_auto_continue && !p.requires_confirmation);
        assert_eq!(p.interrupted_calls.len(), 2);
    }

    #[test]
    fn classification_happens_before_repair() {
        // The synthesized result must not make this look like a prompt.
        let turns = [user(1, "a"), assistant(2, "", &[("c1", "rm")])];
        let (p, transcript) = plan_recovery_rebuilt(session(), &turns, &classes);
        assert_eq!(p.kind, RecoveryKind::InterruptedTurn);
        assert_eq!(transcript.len(), 3);
        assert_eq!(p, plan(&turns));
    }

    #[test]
    fn degraded_histories() {
        let gap = plan(&[user(1, "a"), assistant(3, "b", &[])]);
        assert_eq!(gap.kind, RecoveryKind::DegradedHistory);
        assert_eq!(
            gap.repairs,
            vec![Repair::HistoryGap {
                after_seq: 1,
                next_seq: 3
            }]
        );
        assert!(!gap.can_continue && !gap.requires_confirmation);

        let mut foreign = user(2, "other session");
        foreign.session_id = crate::SessionId::new();
        let turns = [user(1, "a"), foreign, user(3, "b")];
        let (p, transcript) = plan_recovery_rebuilt(session(), &turns, &classes);
        assert_eq!(p.kind, RecoveryKind::DegradedHistory);
        assert!(p.can_continue && p.requires_confirmation && !p.can_auto_continue);
        assert_eq!(transcript.len(), 2);

        let p = plan(&[user(1, "a"), tool(2, "zz", "grep", "?")]);
        assert_eq!(p.kind, RecoveryKind::DegradedHistory);

        let p = plan(&[]);
        assert_eq!(p.kind, RecoveryKind::DegradedHistory);
        assert_eq!(p.tail, Tail::Empty);
        assert_eq!(p.repairs, vec![Repair::NoTurns]);
        assert!(!p.can_continue);
    }

    #[test]
    fn plan_round_trips_as_json() {
        let p = plan(&[user(1, "a"), assistant(2, "", &[("c1", "rm")])]);
        let json = serde_json::to_value(&p).unwrap();
        assert_eq!(json["kind"], "interrupted_turn");
        assert_eq!(json["repairs"][0]["type"], "synthesized_tool_result");
        assert!(json.get("transcript").is_none());
        let back: RecoveryPlan = serde_json::from_value(json).unwrap();
        assert_eq!(back.kind, p.kind);
        assert_eq!(back.repairs, p.repairs);
    }
}
