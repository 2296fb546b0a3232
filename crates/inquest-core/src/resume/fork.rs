//! Forking a session: what a fork stores after the copied turns
//! `1..=at_seq` of its source, so its history is provider-valid and says
//! where it was cut.
//!
//! A cut can fall between an assistant turn's tool calls and their
//! results (right after the assistant turn, or in the middle of its
//! results). The calls left without a result are found exactly as a
//! recovery finds dangling calls (`classify_tail`), and each is answered
//! with an error result, in call order, as a rebuild would answer it. The
//! results are stored, not left to every rebuild: the fork did not crash,
//! so its next burst must not wait for a human to confirm calls that were
//! cut on purpose (a rebuild-only repair would make the follow-up plan an
//! `interrupted_turn`). The first new turn is a notice naming the source,
//! the seq and each call cut.

use std::fmt::Write as _;

use super::recovery::{InterruptedCall, classify_tail};
use crate::{NewTurn, SessionId, SideEffect, Turn};

/// The content of the error result a fork stores for a call whose result
/// lies past the cut.
pub const FORKED_TOOL_RESULT: &str = "this session was forked before this tool's result was \
     recorded; the call has no result in this fork (it may have run in the original session)";

/// How many cut calls the notice names one by one; the rest are counted.
const NAMED_CALLS: usize = 20;

/// The calls of the last assistant turn in `tail` left without a result
/// in `tail`, in call order. `tail` is the source's turns from its last
/// user or assistant turn at or before the cut through the cut, in seq
/// order (any earlier start gives the same answer; records are ignored).
pub fn fork_cut_calls(tail: &[Turn]) -> Vec<InterruptedCall> {
    let visible: Vec<&Turn> = tail.iter().filter(|t| !t.role.is_record()).collect();
    // Whether a trailing result is fresh only matters when the last
    // assistant turn has no calls, and then nothing dangles either way.
    let fresh = vec![false; visible.len()];
    let (_, dangling) = classify_tail(&visible, &fresh, &|_: &str| SideEffect::Mutating);
    dangling
}

/// The turns a fork stores after its copy of `source`'s turns
/// `1..=at_seq`: the notice, then one error result per cut call.
pub fn fork_turns(source: SessionId, at_seq: u64, cut: &[InterruptedCall]) -> Vec<NewTurn> {
    let mut turns = vec![NewTurn::notice(fork_notice_text(source, at_seq, cut))];
    turns.extend(cut.iter().map(|c| NewTurn::Tool {
        call_id: c.call_id.clone(),
        tool_name: c.name.clone(),
        content: FORKED_TOOL_RESULT.to_owned(),
        is_error: true,
    }));
    turns
}

fn fork_notice_text(source: SessionId, at_seq: u64, cut: &[InterruptedCall]) -> String {
    let mut text = format!("Forked from session {source} at seq {at_seq}.");
    let Some(first) = cut.first() else {
        text.push_str(" No tool call was cut from its result.");
        return text;
    };
    let n = cut.len();
    let calls = if n == 1 { "call" } else { "calls" };
    let _ = write!(
        text,
        " The cut fell between turn {} and its results: {n} tool {calls} without a result \
         before seq {} answered as not run in this fork:",
        first.assistant_seq,
        at_seq + 1
    );
    for c in cut.iter().take(NAMED_CALLS) {
        let _ = write!(text, " {} ({}),", c.call_id, c.name);
    }
    text.pop();
    if n > NAMED_CALLS {
        let _ = write!(text, " and {} more", n - NAMED_CALLS);
    }
    text.push('.');
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resume::testing::*;
    use crate::{plan_resume, rebuild_messages};

    fn ids(cut: &[InterruptedCall]) -> Vec<&str> {
        cut.iter().map(|c| c.call_id.as_str()).collect()
    }

    #[test]
    fn each_kind_of_cut_finds_the_calls_past_it() {
        let reply = assistant(2, "", &[("c1", "grep"), ("c2", "rm"), ("c3", "tail")]);
        // After a user turn, and after a complete set of results: nothing.
        assert!(fork_cut_calls(&[user(1, "a")]).is_empty());
        let done = [
            reply.clone(),
            tool(3, "c1", "grep", "x"),
            tool(4, "c2", "rm", "y"),
            tool(5, "c3", "tail", "z"),
        ];
        assert!(fork_cut_calls(&done).is_empty());
        // Right after the assistant turn: every call.
        assert_eq!(ids(&fork_cut_calls(&done[..1])), ["c1", "c2", "c3"]);
        // In the middle of its results: the rest, in call order.
        assert_eq!(ids(&fork_cut_calls(&done[..2])), ["c2", "c3"]);
        // Records in the tail change nothing.
        let with_notice = [reply.clone(), notice(3, "n"), tool(4, "c1", "grep", "x")];
        assert_eq!(ids(&fork_cut_calls(&with_notice)), ["c2", "c3"]);
    }

    #[test]
    fn a_fork_history_rebuilds_without_repairs_and_continues_without_a_human() {
        let source = session();
        let copied = vec![
            user(1, "why is checkout slow"),
            assistant(2, "", &[("c1", "grep"), ("c2", "rm")]),
            tool(3, "c1", "grep", "x"),
        ];
        let cut = fork_cut_calls(&copied[1..]);
        let mut history = copied.clone();
        for (i, t) in fork_turns(source, 3, &cut).into_iter().enumerate() {
            let seq = 4 + i as u64;
            history.push(match t {
                NewTurn::Notice { text, .. } => notice(seq, &text),
                NewTurn::Tool {
                    call_id,
                    tool_name,
                    content,
                    ..
                } => tool(seq, &call_id, &tool_name, &content),
                other => panic!("unexpected {other:?}"),
            });
        }
        assert!(
            history[3].content.contains("c2 (rm)"),
            "{}",
            history[3].content
        );
        assert!(rebuild_messages(&history).repairs.is_empty());
        history.push(user(6, "look at the cache first"));
        let classes = |_: &str| SideEffect::Mutating;
        let plan = plan_resume(source, &history, &classes);
        assert!(plan.can_auto_continue, "{plan:?}");
        assert!(plan.repairs.is_empty(), "{plan:?}");
    }

    #[test]
    fn a_long_cut_names_the_first_calls_and_counts_the_rest() {
        let calls: Vec<(String, String)> = (0..25).map(|i| (format!("c{i}"), "t".into())).collect();
        let refs: Vec<(&str, &str)> = calls
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        let cut = fork_cut_calls(&[assistant(2, "", &refs)]);
        let text = fork_notice_text(session(), 2, &cut);
        assert!(
            text.contains("c19 (t)") && !text.contains("c20 (t)"),
            "{text}"
        );
        assert!(text.ends_with("and 5 more."), "{text}");
    }
}
