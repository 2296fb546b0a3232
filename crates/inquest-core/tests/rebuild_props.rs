//! Property tests: whatever the store holds, rebuilding never panics and
//! always yields a transcript both providers accept; recovery, restore,
//! validation and active time never panic.

mod support;

use std::collections::BTreeMap;

use inquest_core::{
    CompactionInfo, IncidentId, Message, RecoveryKind, RecoveryPlan, ResumeRequest, Role, Seq,
    SessionId, SideEffect, TokenUsage, ToolArguments, ToolCall, Turn, active_time, plan_recovery,
    plan_recovery_rebuilt, plan_resume, plan_resume_rebuilt, rebuild_messages, restore,
};
use proptest::prelude::*;
use serde_json::{Value, json};
use time::OffsetDateTime;

fn main_session() -> SessionId {
    SessionId::from_uuid(uuid::Uuid::from_u128(1))
}

fn call_id() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("c1".to_owned()),
        Just("c2".to_owned()),
        Just("c3".to_owned()),
        Just("call_0".to_owned()),
        Just("c1_dup2".to_owned()),
        Just(String::new()),
        "[a-z]{1,3}",
    ]
}

fn tool_name() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("grep".to_owned()),
        Just("rm".to_owned()),
        Just("scale".to_owned()),
        Just(String::new()),
    ]
}

fn arguments() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!({"q": 1})),
        Just(json!("{broken")),
        Just(json!("")),
        Just(json!(42)),
        Just(Value::Null),
        Just(json!([1, 2])),
    ]
}

fn stored_calls() -> impl Strategy<Value = Value> {
    let call = (call_id(), tool_name(), arguments())
        .prop_map(|(id, name, arguments)| json!({"id": id, "name": name, "arguments": arguments}));
    prop_oneof![
        6 => prop::collection::vec(call, 0..4).prop_map(Value::Array),
        1 => Just(Value::Null),
        1 => Just(json!({"id": "c1"})),
        1 => Just(json!("garbage")),
        1 => Just(json!([{"id": 7, "name": "grep"}])),
        1 => Just(json!([1, 2, 3])),
    ]
}

fn role() -> impl Strategy<Value = Role> {
    prop_oneof![3 => Just(Role::User), 4 => Just(Role::Assistant), 4 => Just(Role::Tool), 1 => Just(Role::Notice), 1 => Just(Role::Compaction)]
}

fn content() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("  \n".to_owned()),
        Just("text".to_owned()),
        Just("é✓".to_owned()),
        ".{0,12}"
    ]
}

prop_compose! {
    fn turn()(
        role in role(),
        seq_jump in prop_oneof![8 => Just(1i64), 1 => Just(0i64), 1 => -3i64..6],
        foreign in prop::bool::weighted(0.05),
        content in content(),
        calls in stored_calls(),
        result_id in prop::option::weighted(0.9, call_id()),
        name in prop::option::of(tool_name()),
        is_error in any::<bool>(),
        secs in -100i64..100_000,
        tokens in (0u64..1000, 0u64..1000),
    ) -> (i64, Turn) {
        let session_id = if foreign { SessionId::from_uuid(uuid::Uuid::from_u128(2)) } else { main_session() };
        (seq_jump, Turn {
            session_id,
            seq: Seq::FIRST,
            role,
            content,
            tool_calls_raw: calls,
            recovery_plan_raw: None,
            tool_call_id: result_id,
            tool_name: name,
            is_error,
            usage: TokenUsage::new(tokens.0, tokens.1),
            created_at: OffsetDateTime::UNIX_EPOCH + time::Duration::seconds(secs),
        })
    }
}

fn turns() -> impl Strategy<Value = Vec<Turn>> {
    prop::collection::vec(turn(), 0..24).prop_map(|raw| {
        let mut seq: i64 = 0;
        raw.into_iter()
            .map(|(jump, mut t)| {
                seq = (seq + jump).max(1);
                t.seq = Seq::from_stored(seq).unwrap_or(Seq::FIRST);
                t
            })
            .collect()
    })
}

fn classes(tool: &str) -> SideEffect {
    match tool {
        "grep" => SideEffect::ReadOnly,
        "scale" => SideEffect::Idempotent,
        _ => SideEffect::Mutating,
    }
}

/// Checks the plan of `turns` and the transcript it was computed with.
fn check_plan(plan: &RecoveryPlan, turns: &[Turn]) -> Result<(), TestCaseError> {
    let (same, transcript) = plan_recovery_rebuilt(main_session(), turns, &classes);
    prop_assert_eq!(&same, plan);
    support::check_transcript(&transcript).map_err(TestCaseError::fail)?;
    prop_assert!(!(plan.can_auto_continue && plan.requires_confirmation));
    prop_assert!(plan.can_auto_continue || plan.requires_confirmation || !plan.can_continue);
    if plan.kind == RecoveryKind::DegradedHistory || plan.kind == RecoveryKind::Clean {
        prop_assert!(!plan.can_auto_continue);
    }
    if plan.kind == RecoveryKind::InterruptedTurn {
        prop_assert!(!plan.interrupted_calls.is_empty());
        prop_assert_eq!(
            plan.can_auto_continue,
            plan.interrupted_calls
                .iter()
                .all(|c| c.side_effect.safe_to_repeat())
        );
    }
    prop_assert!(plan.notice_text.contains(plan.kind.as_str()));
    let json = serde_json::to_string(plan).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let back: RecoveryPlan =
        serde_json::from_str(&json).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(&back.repairs, &plan.repairs);
    prop_assert_eq!(back.kind, plan.kind);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn rebuild_always_yields_a_valid_transcript(turns in turns()) {
        let rebuilt = rebuild_messages(&turns);
        support::check_transcript(&rebuilt.messages).map_err(TestCaseError::fail)?;
        // Every user turn survives, in order.
        let users_in = turns.iter().filter(|t| t.role == Role::User).count();
        let users_out = rebuilt.messages.iter().filter(|m| matches!(m, Message::User { .. })).count();
        prop_assert!(users_out == users_in || users_out == users_in + 1);
    }

    #[test]
    fn recovery_and_friends_never_panic(turns in turns()) {
        let plan = plan_recovery(main_session(), &turns, &classes);
        check_plan(&plan, &turns)?;
        prop_assert!(!active_time(&turns).is_negative());
        let servers: BTreeMap<String, String> = [("grep".to_owned(), "logs".to_owned())].into();
        let r = restore(&turns, &servers);
        prop_assert_eq!(r.turn_count, turns.len() as u64);
        let incident = IncidentId::from_uuid(uuid::Uuid::from_u128(3));
        let _ = ResumeRequest { session_id: Some(main_session()), incident_id: incident, session_incident_id: incident, turns }.validate();
    }
}

/// A healthy history (bursts of assistant turns whose calls all get results)
/// rebuilds without repairs and is never degraded.
fn healthy() -> impl Strategy<Value = Vec<Turn>> {
    let step = prop::collection::vec(
        (
            tool_name().prop_filter("named", |n| !n.is_empty()),
            any::<bool>(),
        ),
        0..3,
    );
    let burst = prop::collection::vec(step, 1..4);
    prop::collection::vec(burst, 1..4).prop_map(|bursts| {
        let mut out = Vec::new();
        let mut n = 0u64;
        let mut push = |out: &mut Vec<Turn>,
                        role: Role,
                        content: String,
                        calls: Vec<ToolCall>,
                        result: Option<(String, String)>| {
            n += 1;
            out.push(Turn {
                session_id: main_session(),
                seq: Seq::from_stored(n as i64).unwrap_or(Seq::FIRST),
                role,
                content,
                tool_calls_raw: ToolCall::encode_all(&calls),
                recovery_plan_raw: None,
                tool_call_id: result.as_ref().map(|r| r.0.clone()),
                tool_name: result.map(|r| r.1),
                is_error: false,
                usage: TokenUsage::default(),
                created_at: OffsetDateTime::UNIX_EPOCH + time::Duration::seconds(n as i64),
            });
        };
        for (b, burst) in bursts.into_iter().enumerate() {
            push(&mut out, Role::User, format!("question {b}"), vec![], None);
            for (s, step) in burst.iter().enumerate() {
                let calls: Vec<ToolCall> = step
                    .iter()
                    .enumerate()
                    .map(|(i, (name, raw))| ToolCall {
                        id: format!("b{b}s{s}c{i}"),
                        name: name.clone(),
                        arguments: if *raw {
                            ToolArguments::from_model("{oops")
                        } else {
                            ToolArguments::from_model("{}")
                        },
                    })
                    .collect();
                let text = if calls.is_empty() {
                    "answer".to_owned()
                } else {
                    String::new()
                };
                push(&mut out, Role::Assistant, text, calls.clone(), None);
                for c in calls {
                    push(
                        &mut out,
                        Role::Tool,
                        "ok".into(),
                        vec![],
                        Some((c.id, c.name)),
                    );
                }
            }
        }
        out
    })
}

proptest! {
    #[test]
    fn healthy_histories_need_no_repair(turns in healthy()) {
        let rebuilt = rebuild_messages(&turns);
        prop_assert!(rebuilt.repairs.is_empty(), "{:?}", rebuilt.repairs);
        support::check_transcript(&rebuilt.messages).map_err(TestCaseError::fail)?;
        let plan = plan_recovery(main_session(), &turns, &classes);
        prop_assert_ne!(plan.kind, RecoveryKind::DegradedHistory);
        prop_assert_ne!(plan.kind, RecoveryKind::InterruptedTurn);
        check_plan(&plan, &turns)?;
        let incident = IncidentId::from_uuid(uuid::Uuid::from_u128(3));
        let mut reopened = turns.clone();
        let last = reopened.last().map(|t| t.seq.next()).unwrap_or(Seq::FIRST);
        let mut follow_up = turns[0].clone();
        follow_up.seq = last;
        reopened.push(follow_up);
        let req = ResumeRequest { session_id: Some(main_session()), incident_id: incident, session_incident_id: incident, turns: reopened };
        prop_assert_eq!(req.validate(), Ok(main_session()));
    }

    #[test]
    fn cutting_a_healthy_history_anywhere_is_never_degraded(turns in healthy(), cut in any::<prop::sample::Index>()) {
        let cut = cut.index(turns.len()) + 1;
        let plan = plan_recovery(main_session(), &turns[..cut], &classes);
        prop_assert_ne!(plan.kind, RecoveryKind::DegradedHistory);
        check_plan(&plan, &turns[..cut])?;
        let tail_is_assistant_with_calls = turns[..cut].last().is_some_and(|t| {
            t.role == Role::Assistant && t.tool_calls().is_ok_and(|c| !c.is_empty())
        });
        if tail_is_assistant_with_calls {
            prop_assert_eq!(plan.kind, RecoveryKind::InterruptedTurn);
        }
    }
}

/// A compaction turn at `seq` keeping the tail from `first_retained_seq`.
fn compaction_turn(seq: u64, first_retained_seq: u64, summary: &str) -> Turn {
    Turn {
        session_id: main_session(),
        seq: Seq::from_stored(seq as i64).unwrap_or(Seq::FIRST),
        role: Role::Compaction,
        content: summary.to_owned(),
        tool_calls_raw: serde_json::to_value(CompactionInfo {
            first_retained_seq,
            tokens_before: 1000,
            tokens_after: 100,
            carried: None,
        })
        .unwrap_or(Value::Null),
        tool_call_id: None,
        recovery_plan_raw: None,
        tool_name: None,
        is_error: false,
        usage: TokenUsage::default(),
        created_at: OffsetDateTime::UNIX_EPOCH + time::Duration::seconds(seq as i64),
    }
}

/// `turns` with a compaction appended whose tail starts at a legal start
/// chosen by `pick` (nothing retained when `keep_none`), then `later`
/// turns of `more` renumbered after it. Also returns the first retained seq.
fn compact(
    turns: &[Turn],
    pick: prop::sample::Index,
    keep_none: bool,
    more: &[Turn],
) -> (Vec<Turn>, u64) {
    let starts = inquest_core::compaction::legal_tail_starts(turns);
    let head = turns.last().map_or(0, |t| t.seq.get());
    let at = head + 1;
    let first_retained = if keep_none || starts.is_empty() {
        at
    } else {
        turns[starts[pick.index(starts.len())]].seq.get()
    };
    let mut out = turns.to_vec();
    out.push(compaction_turn(
        at,
        first_retained,
        "summary of the older part",
    ));
    for (k, t) in more.iter().enumerate() {
        let mut t = t.clone();
        t.seq = Seq::from_stored((at + 1 + k as u64) as i64).unwrap_or(Seq::FIRST);
        // Later turns use call ids of their own.
        if t.role == Role::Assistant
            && let Ok(mut calls) = t.tool_calls()
        {
            for c in &mut calls {
                c.id = format!("m{}", c.id);
            }
            t.tool_calls_raw = ToolCall::encode_all(&calls);
        }
        if t.role == Role::Tool {
            t.tool_call_id = t.tool_call_id.map(|id| format!("m{id}"));
        }
        out.push(t);
    }
    (out, first_retained)
}

fn orphans(repairs: &[inquest_core::Repair], from_seq: u64) -> Vec<u64> {
    repairs
        .iter()
        .filter_map(|r| match r {
            inquest_core::Repair::DroppedOrphanToolResult { seq, .. } if *seq >= from_seq => {
                Some(*seq)
            }
            _ => None,
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    /// Whatever the store holds, compaction turns included (valid or
    /// not, anywhere), the rebuild is provider-valid.
    #[test]
    fn compacted_histories_rebuild_valid(turns in turns(), pick in any::<prop::sample::Index>(), keep_none in any::<bool>(), more in turns()) {
        let (compacted, _) = compact(&turns, pick, keep_none, &more);
        let rebuilt = rebuild_messages(&compacted);
        support::check_transcript(&rebuilt.messages).map_err(TestCaseError::fail)?;
        let plan = plan_recovery(main_session(), &compacted, &classes);
        check_plan(&plan, &compacted)?;
    }

    /// A healthy history compacted at any legal start: valid, the opening
    /// request first and verbatim, the summary next, no call separated
    /// from its result, and counters, bursts and the recovery plan exactly
    /// as without the compaction.
    #[test]
    fn compaction_keeps_the_opening_and_every_pair(turns in healthy(), pick in any::<prop::sample::Index>(), keep_none in any::<bool>(), more in healthy()) {
        let (compacted, first_retained) = compact(&turns, pick, keep_none, &more);
        let rebuilt = rebuild_messages(&compacted);
        support::check_transcript(&rebuilt.messages).map_err(TestCaseError::fail)?;
        prop_assert!(rebuilt.repairs.is_empty(), "{:?}", rebuilt.repairs);
        prop_assert!(orphans(&rebuilt.repairs, first_retained).is_empty());
        let opening = &turns[0];
        prop_assert_eq!(&rebuilt.messages[0], &Message::User { text: opening.content.clone().into() });
        let summary_at = 1;
        let is_summary = matches!(&rebuilt.messages[summary_at], Message::User { text } if text.ends_with("summary of the older part"));
        prop_assert!(is_summary);
        // The messages after the summary are exactly the rebuild of the
        // retained tail and the later turns.
        let kept: Vec<Turn> = compacted.iter().filter(|t| t.role != Role::Compaction && t.seq.get() >= first_retained.max(2)).cloned().collect();
        let tail = rebuild_messages(&kept).messages;
        let after = &rebuilt.messages[summary_at + 1..];
        if kept.first().is_some_and(|t| t.role == Role::User) || kept.is_empty() {
            prop_assert_eq!(after, &tail[..]);
        } else {
            // The tail opens with an assistant turn: its own rebuild
            // inserts the missing-opening placeholder first.
            prop_assert_eq!(after, &tail[1..]);
        }
        let servers: BTreeMap<String, String> = [("grep".to_owned(), "logs".to_owned())].into();
        // The same history with the compaction as a notice (a record every
        // reader already skips), seqs unchanged.
        let mut plain = compacted.clone();
        plain[turns.len()].role = Role::Notice;
        let (a, b) = (restore(&compacted, &servers), restore(&plain, &servers));
        prop_assert_eq!(a.audit, b.audit);
        prop_assert_eq!(a.bursts, b.bursts);
        prop_assert_eq!(a.assistant_turns, b.assistant_turns);
        prop_assert_eq!(a.used_servers, b.used_servers);
        let (pa, pb) = (plan_recovery(main_session(), &compacted, &classes), plan_recovery(main_session(), &plain, &classes));
        prop_assert_eq!(pa.kind, pb.kind);
        prop_assert_eq!(pa.tail, pb.tail);
        check_plan(&pa, &compacted)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Item 6: a read from the latest compaction (the opening, the turns
    /// from its first retained seq) restores the same counters, active
    /// time, transcript and plan as every stored turn, when the
    /// compaction carries what the read leaves out.
    #[test]
    fn reading_from_a_carrying_compaction_equals_reading_everything(turns in healthy(), pick in any::<prop::sample::Index>(), keep_none in any::<bool>(), more in healthy(), twice in any::<bool>()) {
        let servers: BTreeMap<String, String> = [("grep".to_owned(), "logs".to_owned())].into();
        let carry = |history: &[Turn], first_retained: u64| -> Vec<Turn> {
            let mut out = history[..history.len() - 1].to_vec();
            let mut c = history[history.len() - 1].clone();
            let mut info = c.compaction().unwrap();
            info.first_retained_seq = first_retained;
            info.carried = None;
            c.tool_calls_raw = serde_json::to_value(&info).unwrap();
            info.carried = Some(inquest_core::compaction::carry_for(&out, &c, &servers));
            c.tool_calls_raw = serde_json::to_value(&info).unwrap();
            out.push(c);
            out
        };
        let (compacted, first_retained) = compact(&turns, pick, keep_none, &[]);
        let mut full = carry(&compacted, first_retained);
        if twice {
            // A second compaction over a burst's worth of later turns.
            let (again, r2) = compact(&full, pick, keep_none, &[]);
            full = carry(&again, r2);
        }
        let (c_at, info) = full.iter().enumerate().rev().find_map(|(i, t)| t.compaction().map(|c| (i, c))).unwrap();
        let mut with_more = full.clone();
        for (k, t) in more.iter().enumerate() {
            let mut t = t.clone();
            t.seq = Seq::from_stored((full.len() + 1 + k) as i64).unwrap();
            t.created_at = OffsetDateTime::UNIX_EPOCH + time::Duration::seconds((full.len() + 1 + k) as i64 * 7);
            if t.role == Role::Assistant && let Ok(mut calls) = t.tool_calls() {
                for c in &mut calls { c.id = format!("m{}", c.id); }
                t.tool_calls_raw = ToolCall::encode_all(&calls);
            }
            if t.role == Role::Tool { t.tool_call_id = t.tool_call_id.map(|id| format!("m{id}")); }
            with_more.push(t);
        }
        let _ = c_at;
        let opening = with_more.iter().position(|t| t.role == Role::User).unwrap();
        let read: Vec<Turn> = with_more.iter().enumerate()
            .filter(|(i, t)| *i == opening || t.seq.get() >= info.first_retained_seq)
            .map(|(_, t)| t.clone()).collect();
        let (a, b) = (restore(&with_more, &servers), restore(&read, &servers));
        prop_assert_eq!(a.audit, b.audit);
        prop_assert_eq!(a.bursts, b.bursts);
        prop_assert_eq!(a.assistant_turns, b.assistant_turns);
        prop_assert_eq!(a.used_servers, b.used_servers);
        prop_assert_eq!(active_time(&with_more), active_time(&read));
        // And both equal the history without any compaction.
        let plain: Vec<Turn> = with_more.iter().filter(|t| t.role != Role::Compaction).cloned().collect();
        let p = restore(&plain, &servers);
        prop_assert_eq!(a.audit, p.audit);
        prop_assert_eq!(a.bursts, p.bursts);
        prop_assert_eq!(a.assistant_turns, p.assistant_turns);
        prop_assert_eq!(rebuild_messages(&with_more), rebuild_messages(&read));
        let (pa, pb) = (plan_recovery(main_session(), &with_more, &classes), plan_recovery(main_session(), &read, &classes));
        prop_assert_eq!(pa.kind, pb.kind);
        prop_assert_eq!(pa.tail, pb.tail);
        prop_assert_eq!(pa.repairs, pb.repairs);
    }
}

/// The new rebuild and plans (borrowed messages, interned ids, one
/// rebuild per resume plan) against the reference: the code they replaced
/// (`support/reference.rs`). Same messages, same repairs in the same
/// order, same plans, whatever the store holds.
fn check_against_reference(turns: &[Turn]) -> Result<(), TestCaseError> {
    use support::reference::{self, OldMessage, OldPlan};
    let old_form = |m: &[Message<'_>]| m.iter().map(OldMessage::of).collect::<Vec<_>>();
    let new = rebuild_messages(turns);
    let old = reference::rebuild_messages(turns);
    prop_assert_eq!(&new.repairs, &old.repairs);
    prop_assert_eq!(old_form(&new.messages), old.messages);
    let (plan, transcript) = plan_recovery_rebuilt(main_session(), turns, &classes);
    let (old_plan, old_transcript) = reference::plan_recovery(main_session(), turns, &classes);
    prop_assert_eq!(OldPlan::of(&plan), old_plan);
    prop_assert_eq!(old_form(&transcript), old_transcript);
    let (plan, transcript) = plan_resume_rebuilt(main_session(), turns, &classes);
    let (old_plan, old_transcript) = reference::plan_resume(main_session(), turns, &classes);
    prop_assert_eq!(OldPlan::of(&plan), old_plan);
    prop_assert_eq!(old_form(&transcript), old_transcript);
    prop_assert_eq!(plan, plan_resume(main_session(), turns, &classes));
    Ok(())
}

/// Stored calls as `[id, name, arguments]` arrays: a shape no writer
/// produces that still decodes (serde reads a struct from a sequence), so
/// the rebuild takes its general, owned path.
fn as_array_calls(turns: &mut [Turn]) {
    for t in turns.iter_mut().filter(|t| t.role == Role::Assistant) {
        if let Value::Array(items) = &t.tool_calls_raw {
            let items: Vec<Value> = items
                .iter()
                .map(|c| json!([c["id"], c["name"], c["arguments"]]))
                .collect();
            t.tool_calls_raw = Value::Array(items);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn new_rebuild_equals_the_reference(mut turns in turns(), follow_up in any::<bool>(), arrays in prop::bool::weighted(0.2), reuse in prop::bool::weighted(0.3)) {
        if reuse {
            // Providers that reuse ids per response (renames, moves).
            for t in turns.iter_mut() {
                if t.role == Role::Assistant && let Ok(mut calls) = t.tool_calls() {
                    for (i, c) in calls.iter_mut().enumerate() { c.id = format!("call_{i}"); }
                    t.tool_calls_raw = ToolCall::encode_all(&calls);
                }
                if t.role == Role::Tool { t.tool_call_id = Some("call_0".into()); }
            }
        }
        if arrays {
            as_array_calls(&mut turns);
        }
        if follow_up {
            let mut next = turns.last().map_or_else(|| user_turn(1), |t| user_turn(t.seq.get() + 1));
            next.content = "and now?".into();
            turns.push(next);
        }
        check_against_reference(&turns)?;
    }

    #[test]
    fn new_rebuild_equals_the_reference_on_compacted_histories(turns in healthy(), pick in any::<prop::sample::Index>(), keep_none in any::<bool>(), more in turns(), follow_up in any::<bool>()) {
        let (mut compacted, _) = compact(&turns, pick, keep_none, &more);
        if follow_up {
            let seq = compacted.last().map_or(1, |t| t.seq.get() + 1);
            compacted.push(user_turn(seq));
        }
        check_against_reference(&compacted)?;
    }
}

fn user_turn(seq: u64) -> Turn {
    Turn {
        session_id: main_session(),
        seq: Seq::from_stored(seq as i64).unwrap_or(Seq::FIRST),
        role: Role::User,
        content: "follow-up".into(),
        tool_calls_raw: json!([]),
        recovery_plan_raw: None,
        tool_call_id: None,
        tool_name: None,
        is_error: false,
        usage: TokenUsage::default(),
        created_at: OffsetDateTime::UNIX_EPOCH,
    }
}

/// Call ids a hostile or sloppy provider may store: repeats, NUL bytes,
/// non-ASCII, long ones, near-equal ones (`c1` / `c1\0`).
fn hostile_id() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => call_id(),
        1 => Just("c1\0".to_owned()),
        1 => Just("\0".to_owned()),
        1 => Just("é✓".to_owned()),
        1 => "\\PC{1,6}",
        1 => "x{60,70}",
        1 => Just("b0s0c0".to_owned()),
    ]
}

/// Hostile edits of a stored history: a result's id or a call's id
/// replaced, huge or NUL-bearing arguments, non-ASCII content.
fn hostile_edit() -> impl Strategy<Value = (prop::sample::Index, u8, String)> {
    (any::<prop::sample::Index>(), 0u8..5, hostile_id())
}

fn apply_hostile(turns: &mut [Turn], edits: &[(prop::sample::Index, u8, String)]) {
    if turns.is_empty() {
        return;
    }
    for (at, kind, id) in edits {
        let t = &mut turns[at.index(turns.len())];
        match (kind, t.role) {
            (0, Role::Tool) => t.tool_call_id = Some(id.clone()),
            (1, Role::Assistant) => {
                if let Ok(mut calls) = t.tool_calls()
                    && let Some(c) = calls.first_mut()
                {
                    c.id = id.clone();
                    t.tool_calls_raw = ToolCall::encode_all(&calls);
                }
            }
            (2, Role::Assistant) => {
                if let Ok(mut calls) = t.tool_calls()
                    && let Some(c) = calls.last_mut()
                {
                    let big = format!("{{\"blob\":\"{}\\u0000{}\"}}", "é".repeat(40_000), id);
                    c.arguments = ToolArguments::from_model(&big);
                    t.tool_calls_raw = ToolCall::encode_all(&calls);
                }
            }
            (3, _) => t.content = format!("{id}\0✓"),
            _ => t.tool_call_id = t.tool_call_id.take().map(|old| format!("{old}\0")),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    /// The rebuild's fast bookkeeping (hashes of ids, the open message)
    /// hands over to the exact one at the first reused id or misplaced
    /// result, wherever that is: a healthy prefix (some results lost, so
    /// closed messages keep unanswered calls), then anything, then a
    /// healthy history reusing the prefix's ids, with hostile edits. The
    /// transcript and repairs equal the reference's.
    #[test]
    fn fast_and_exact_bookkeeping_equal_the_reference(
        prefix in healthy(),
        lost in prop::collection::vec(any::<prop::sample::Index>(), 0..3),
        middle in turns(),
        suffix in healthy(),
        edits in prop::collection::vec(hostile_edit(), 0..4),
    ) {
        let mut all: Vec<Turn> = prefix;
        let len = all.len();
        let mut dropped: Vec<usize> = lost
            .iter()
            .map(|i| i.index(len))
            .filter(|&i| all[i].role == Role::Tool)
            .collect();
        dropped.sort_unstable();
        dropped.dedup();
        for i in dropped.into_iter().rev() {
            all.remove(i);
        }
        all.extend(middle.into_iter().filter(|t| t.session_id == main_session()));
        all.extend(suffix);
        for (i, t) in all.iter_mut().enumerate() {
            t.seq = Seq::from_stored(i as i64 + 1).unwrap_or(Seq::FIRST);
        }
        let split = all.len() / 2;
        apply_hostile(&mut all[split..], &edits);
        check_against_reference(&all)?;
    }
}
