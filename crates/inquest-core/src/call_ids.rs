//! Tool-call ids that are unique within a session, whatever the provider
//! sent.
//!
//! A call id is what a tool result names, what a watcher's `ToolCallStart`
//! carries, and half of the MCP idempotency key (`inquest:{session}:{id}`).
//! Providers do not make them session-unique: OpenAI-compatible servers may
//! leave ids out or number them per reply (`call_0` in every turn), so a
//! deduplicating tool would drop a new mutating call as a retry, and a
//! watcher would drop a new call's start as already answered. So the loop
//! passes every reply's ids through [`session_unique_call_ids`] before the
//! assistant turn is stored; the rewritten ids are the only ones anything
//! after that sees.

use std::collections::HashSet;

use crate::{Message, Role, Turn};

/// The longest call id kept (Anthropic's limit on `tool_use.id`).
pub const MAX_CALL_ID_LEN: usize = 64;

/// Whether `id` may be sent to every provider as it is: 1 to
/// [`MAX_CALL_ID_LEN`] bytes of `[a-zA-Z0-9_-]` (Anthropic's pattern; OpenAI
/// takes any string).
pub fn is_valid_call_id(id: &str) -> bool {
    (1..=MAX_CALL_ID_LEN).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Every call id a session has used: the ids of its stored assistant turns'
/// calls (those that decode), the ids its tool results name, and the ids of
/// its rebuilt transcript (which may rename a legacy duplicate).
pub fn used_call_ids<'a, 'm: 'a>(
    turns: &[Turn],
    transcript: impl IntoIterator<Item = &'a Message<'m>>,
) -> HashSet<String> {
    let mut used = HashSet::new();
    for turn in turns {
        match turn.role {
            Role::Assistant => {
                used.extend(
                    crate::resume::decoded_calls(turn)
                        .unwrap_or_default()
                        .into_iter()
                        .map(|c| c.id.into_owned()),
                );
            }
            Role::Tool => used.extend(turn.tool_call_id.clone()),
            Role::User | Role::Notice | Role::Compaction => {}
        }
    }
    for message in transcript {
        if let Message::Assistant { tool_calls, .. } = message {
            used.extend(tool_calls.iter().map(|c| c.id.to_string()));
        }
    }
    used
}

/// The ids to store for one assistant turn's calls, in call order.
///
/// `provided[i]` is what the provider sent for call `i` (`None`: nothing).
/// A provided id is kept when it is valid ([`is_valid_call_id`]), not in
/// `used` and not kept already for an earlier call of this turn. Every
/// other call gets `inq_{seq}_{i}`, where `seq` is the seq the assistant
/// turn will be stored at, or `inq_{seq}_{i}_{n}` with the least `n >= 1`
/// that is free when that is taken (by `used` or by any id of this turn,
/// kept or given). So the result is deterministic, valid, and unique within
/// the turn and against `used`.
///
/// Length: `inq_` + two u64s in decimal is at most 45 bytes; the `_{n}`
/// suffix needs `n` to exceed the number of ids taken, so it stays under
/// 19 digits for any set that fits in memory.
pub fn session_unique_call_ids(
    used: &HashSet<String>,
    seq: u64,
    provided: &[Option<&str>],
) -> Vec<String> {
    // First the provided ids that are kept, so a generated id can never
    // take one that a later call of this turn keeps.
    let mut taken: HashSet<&str> = HashSet::with_capacity(provided.len());
    let kept: Vec<Option<&str>> = provided
        .iter()
        .map(|id| id.filter(|id| is_valid_call_id(id) && !used.contains(*id) && taken.insert(id)))
        .collect();
    let mut given: HashSet<String> = HashSet::new();
    kept.iter()
        .enumerate()
        .map(|(index, kept)| match kept {
            Some(id) => (*id).to_owned(),
            None => {
                let free = |id: &String| {
                    !used.contains(id) && !taken.contains(id.as_str()) && !given.contains(id)
                };
                let base = format!("inq_{seq}_{index}");
                let id = if free(&base) {
                    base
                } else {
                    (1u64..)
                        .map(|n| format!("{base}_{n}"))
                        .find(free)
                        .unwrap_or(base)
                };
                given.insert(id.clone());
                id
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn used(ids: &[&str]) -> HashSet<String> {
        ids.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn fresh_valid_ids_are_kept() {
        let ids = session_unique_call_ids(&used(&["a"]), 4, &[Some("b"), Some("toolu_01-X")]);
        assert_eq!(ids, ["b", "toolu_01-X"]);
    }

    #[test]
    fn missing_repeated_and_invalid_ids_are_replaced() {
        let long = "x".repeat(65);
        let ids = session_unique_call_ids(
            &used(&["call_0"]),
            7,
            &[
                None,
                Some("call_0"),
                Some("c"),
                Some("c"),
                Some("has space"),
                Some(""),
                Some(&long),
            ],
        );
        assert_eq!(
            ids,
            [
                "inq_7_0", "inq_7_1", "c", "inq_7_3", "inq_7_4", "inq_7_5", "inq_7_6"
            ]
        );
        assert!(is_valid_call_id(&"x".repeat(64)));
    }

    #[test]
    fn a_given_id_never_takes_a_used_or_kept_one() {
        let ids = session_unique_call_ids(
            &used(&["inq_3_0", "inq_3_0_1"]),
            3,
            &[None, Some("inq_3_0_2"), Some("inq_3_0_2")],
        );
        assert_eq!(ids, ["inq_3_0_3", "inq_3_0_2", "inq_3_2"]);
    }

    #[test]
    fn used_ids_come_from_calls_results_and_the_transcript() {
        use crate::resume::testing::{assistant, tool, user};
        let turns = vec![
            user(1, "q"),
            assistant(2, "", &[("a", "t")]),
            tool(3, "orphan", "t", "r"),
        ];
        let transcript = [Message::Assistant {
            text: "".into(),
            tool_calls: vec![
                crate::ToolCall {
                    id: "a_dup1".into(),
                    name: "t".into(),
                    arguments: crate::ToolArguments::from_model("{}"),
                }
                .into(),
            ]
            .into(),
        }];
        assert_eq!(
            used_call_ids(&turns, &transcript),
            used(&["a", "orphan", "a_dup1"])
        );
    }

    proptest! {
        #[test]
        fn ids_are_valid_unique_and_keep_what_they_can(
            used_ids in proptest::collection::hash_set("(inq_[0-9]_[0-9](_[0-9])?|call_[0-9]|[a-z]{1,3})", 0..12),
            provided in proptest::collection::vec(
                proptest::option::of("(inq_[0-9]_[0-9](_[0-9])?|call_[0-9]|[a-z]{1,3}|[ -~]{0,3}|x{60,70})"), 0..10),
            seq in prop_oneof![0u64..10, Just(u64::MAX)],
        ) {
            let provided_refs: Vec<Option<&str>> = provided.iter().map(|p| p.as_deref()).collect();
            let ids = session_unique_call_ids(&used_ids, seq, &provided_refs);
            prop_assert_eq!(ids.len(), provided.len());
            let mut seen = HashSet::new();
            for (id, asked) in ids.iter().zip(&provided) {
                prop_assert!(is_valid_call_id(id), "{:?}", id);
                prop_assert!(!used_ids.contains(id), "{:?} reused", id);
                prop_assert!(seen.insert(id.clone()), "{:?} twice", id);
                // A provided id is either kept or replaced by ours.
                if asked.as_deref() != Some(id.as_str()) {
                    prop_assert!(id.starts_with(&format!("inq_{seq}_")), "{:?}", id);
                }
            }
            // The first valid, unused occurrence of each provided id is kept.
            let mut first = HashSet::new();
            for (id, asked) in ids.iter().zip(&provided) {
                if let Some(asked) = asked
                    && is_valid_call_id(asked)
                    && !used_ids.contains(asked)
                    && first.insert(asked.clone())
                {
                    prop_assert_eq!(id, asked);
                }
            }
            // Deterministic.
            prop_assert_eq!(ids, session_unique_call_ids(&used_ids, seq, &provided_refs));
        }
    }
}
