//! The plan a resume acts on, and the `notice` turn that records it.
//!
//! [`plan_recovery`] reads the raw tail: a session whose last stored turn is
//! a user message always looks like `interrupted_prompt`, because the model
//! owes that message an answer. For a follow-up (a user message stored
//! after earlier turns) that hides how the PREVIOUS burst ended: a tool call
//! cut off before the follow-up arrived is only a repair there. So
//! [`plan_resume`] classifies the turns before the follow-up, and keeps the
//! repairs and transcript of the whole history.

use super::message::Message;
use super::recovery::{RecoveryKind, RecoveryPlan, classify, notice_text, plan_recovery_rebuilt};
use crate::{Role, SessionId, ToolClasses, Turn};

/// The plan a resume of `session_id` acts on (the one function behind the
/// runner, `ContinueSession` and `GetRecoveryPlan`).
///
/// - Not a follow-up (no user message at the tail, or no model-visible turn
///   before it): exactly [`plan_recovery`] over all turns.
/// - A follow-up on a degraded history: [`plan_recovery`] over all turns
///   (degraded, never auto-continued, confirmation required).
/// - Otherwise the kind and interrupted calls are those of the turns
///   before the follow-up (how the previous burst ended), the repairs and
///   transcript those of all turns, and the new message means the model
///   owes an answer: `can_continue` is true; it continues without a human
///   unless the previous burst left unsafe tool calls without results.
pub fn plan_resume(
    session_id: SessionId,
    turns: &[Turn],
    classes: &impl ToolClasses,
) -> RecoveryPlan {
    plan_resume_rebuilt(session_id, turns, classes).0
}

/// [`plan_resume`] and the repaired transcript of all turns it was
/// computed with, borrowed from `turns`: what the burst runs from, so a
/// resume rebuilds once. The turns before the follow-up are only
/// classified, not rebuilt.
pub fn plan_resume_rebuilt<'a>(
    session_id: SessionId,
    turns: &'a [Turn],
    classes: &impl ToolClasses,
) -> (RecoveryPlan, Vec<Message<'a>>) {
    let (full, transcript) = plan_recovery_rebuilt(session_id, turns, classes);
    let Some(before) = follow_up_split(session_id, turns) else {
        return (full, transcript);
    };
    if full.kind == RecoveryKind::DegradedHistory {
        return (full, transcript);
    }
    let (previous, _) = classify(session_id, before, classes);
    // Degraded before but not with the whole history cannot happen (the
    // same findings), so the previous kind is used as is.
    let kind = previous.kind;
    let can_auto_continue = match kind {
        RecoveryKind::Clean | RecoveryKind::InterruptedPrompt => true,
        RecoveryKind::InterruptedTurn => previous.can_auto_continue,
        RecoveryKind::DegradedHistory => false,
    };
    let mut plan = RecoveryPlan {
        kind,
        tail: previous.tail,
        interrupted_calls: previous.interrupted_calls,
        can_continue: true,
        can_auto_continue,
        requires_confirmation: !can_auto_continue,
        notice_text: String::new(),
        ..full
    };
    plan.notice_text = if kind == RecoveryKind::Clean {
        "Recovery: clean. The last burst had finished; the new message continues the session."
            .to_owned()
    } else {
        notice_text(&plan)
    };
    (plan, transcript)
}

/// Whether the tail is a follow-up: a user message with model-visible
/// turns of this session before it (a first message is not one).
pub fn is_follow_up(session_id: SessionId, turns: &[Turn]) -> bool {
    follow_up_split(session_id, turns).is_some()
}

/// The turns before the follow-up, when the last model-visible turn is a
/// user message with model-visible turns of this session before it. The
/// follow-up is every user message at the tail: messages queued behind a
/// burst open the next one together, and the one before the last is no
/// interrupted prompt (the model answers them all at once).
fn follow_up_split(session_id: SessionId, turns: &[Turn]) -> Option<&[Turn]> {
    let visible = |t: &Turn| t.session_id == session_id && !t.role.is_record();
    let last = turns.iter().rposition(visible)?;
    if turns.get(last)?.role != Role::User {
        return None;
    }
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

/// The plan as a recovery notice turn carries it (`NewTurn::Notice`'s
/// `plan`, the `turns.recovery_plan` column, `SessionTurn.recovery_plan`):
/// everything but the human text, whose place is the turn's content (so a
/// notice holds it once, cut at `limits.max_notice_bytes`).
pub fn notice_plan(plan: &RecoveryPlan) -> RecoveryPlan {
    RecoveryPlan {
        kind: plan.kind,
        tail: plan.tail,
        repairs: plan.repairs.clone(),
        repaired_call_ids: plan.repaired_call_ids.clone(),
        interrupted_calls: plan.interrupted_calls.clone(),
        can_continue: plan.can_continue,
        can_auto_continue: plan.can_auto_continue,
        requires_confirmation: plan.requires_confirmation,
        notice_text: String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resume::testing::*;
    use crate::{SideEffect, plan_recovery};

    fn classes(tool: &str) -> SideEffect {
        if tool == "grep" {
            SideEffect::ReadOnly
        } else {
            SideEffect::Mutating
        }
    }

    #[test]
    fn first_message_and_crash_tails_are_plain_plans() {
        let turns = [user(1, "a")];
        assert_eq!(
            plan_resume(session(), &turns, &classes),
            plan_recovery(session(), &turns, &classes)
        );
        let turns = [user(1, "a"), assistant(2, "", &[("c1", "rm")])];
        assert_eq!(
            plan_resume(session(), &turns, &classes),
            plan_recovery(session(), &turns, &classes)
        );
    }

    #[test]
    fn a_follow_up_keeps_the_interrupted_turn_visible() {
        let turns = [
            user(1, "a"),
            assistant(2, "", &[("c1", "rm")]),
            user(3, "and now?"),
            notice(4, "n"),
        ];
        assert_eq!(
            plan_recovery(session(), &turns, &classes).kind,
            RecoveryKind::InterruptedPrompt
        );
        let (p, transcript) = plan_resume_rebuilt(session(), &turns, &classes);
        assert_eq!(p, plan_resume(session(), &turns, &classes));
        assert_eq!(p.kind, RecoveryKind::InterruptedTurn);
        assert_eq!(p.repaired_call_ids, vec!["c1".to_owned()]);
        assert!(p.can_continue && p.requires_confirmation && !p.can_auto_continue);
        assert_eq!(transcript.len(), 4);

        let safe = [
            user(1, "a"),
            assistant(2, "", &[("c1", "grep")]),
            user(3, "b"),
        ];
        let p = plan_resume(session(), &safe, &classes);
        assert_eq!(p.kind, RecoveryKind::InterruptedTurn);
        assert!(p.can_auto_continue && !p.requires_confirmation);
    }

    #[test]
    fn a_follow_up_after_a_clean_end_is_clean() {
        let turns = [user(1, "a"), assistant(2, "done", &[]), user(3, "b")];
        let p = plan_resume(session(), &turns, &classes);
        assert_eq!(p.kind, RecoveryKind::Clean);
        assert!(p.can_continue && p.can_auto_continue && !p.requires_confirmation);
        // Messages queued together are one follow-up.
        let queued = [
            user(1, "a"),
            assistant(2, "done", &[]),
            user(3, "b"),
            user(4, "c"),
        ];
        assert_eq!(
            plan_resume(session(), &queued, &classes).kind,
            RecoveryKind::Clean
        );
        let unanswered = [user(1, "a"), user(2, "b")];
        let p = plan_resume(session(), &unanswered, &classes);
        assert_eq!(p.kind, RecoveryKind::InterruptedPrompt);
        assert!(p.can_auto_continue);
    }

    #[test]
    fn degraded_follow_ups_need_confirmation() {
        let turns = [user(1, "a"), assistant(3, "gap", &[]), user(4, "b")];
        let p = plan_resume(session(), &turns, &classes);
        assert_eq!(p.kind, RecoveryKind::DegradedHistory);
        assert!(p.can_continue && p.requires_confirmation && !p.can_auto_continue);
    }

    #[test]
    fn a_notice_plan_is_the_plan_without_its_text() {
        let turns = [
            user(1, "a"),
            assistant(2, "", &[("c1", "rm")]),
            user(3, "b"),
        ];
        let p = plan_resume(session(), &turns, &classes);
        assert!(p.notice_text.starts_with("Recovery: interrupted_turn."));
        let n = notice_plan(&p);
        assert!(n.notice_text.is_empty());
        assert_eq!(
            RecoveryPlan {
                notice_text: p.notice_text.clone(),
                ..n
            },
            p
        );
    }
}
