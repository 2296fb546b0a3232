//! Session-scoped state recomputed from stored turns when a session resumes.

use std::collections::{BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use super::rebuild::stored_calls;
use crate::{Role, Seq, ToolServers, Turn};

/// The audit numbers a report carries, cumulative over the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct AuditCounters {
    /// Tool calls requested by assistant turns.
    pub tool_calls: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// What a resumed session starts from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Restored {
    /// Stored turns, every role.
    pub turn_count: u64,
    /// Assistant turns: model calls that landed (what an iteration budget
    /// spans).
    pub assistant_turns: u64,
    pub audit: AuditCounters,
    /// Bursts so far: every burst opens with exactly one user turn.
    pub bursts: u64,
    pub last_seq: Option<Seq>,
    pub last_assistant_seq: Option<Seq>,
    /// MCP servers that served at least one call: a tool result turn exists
    /// for a call whose tool the map knows and whose arguments were valid
    /// JSON. Error results count (the server answered); synthesized results
    /// do not exist as turns and never count.
    pub used_servers: BTreeSet<String>,
}

/// Recomputes session-scoped state from the stored turns (in seq order).
///
/// Tool calls are counted from assistant turns whose calls decode; a turn
/// kept as text counts none. A result is attributed through the most recent
/// earlier call with its id.
///
/// From a compaction that carries counters, only the turns a
/// read from it holds are walked and the carried counters added
/// ([`crate::compaction::carried_view`]); `turn_count` then counts the
/// turns walked.
pub fn restore(turns: &[Turn], servers: &impl ToolServers) -> Restored {
    match crate::compaction::carried_view(turns) {
        None => restore_walk(turns.iter(), servers),
        Some(view) => {
            let mut r = restore_walk(view.opening.into_iter().chain(view.rest), servers);
            let c = view.carried;
            r.assistant_turns = r.assistant_turns.saturating_add(c.assistant_turns);
            r.bursts = r.bursts.saturating_add(c.user_turns);
            r.audit.tool_calls = r.audit.tool_calls.saturating_add(c.tool_calls);
            r.audit.input_tokens = r.audit.input_tokens.saturating_add(c.input_tokens);
            r.audit.output_tokens = r.audit.output_tokens.saturating_add(c.output_tokens);
            r.used_servers.extend(c.used_servers);
            r
        }
    }
}

fn restore_walk<'a>(turns: impl Iterator<Item = &'a Turn>, servers: &impl ToolServers) -> Restored {
    let mut r = Restored::default();
    // call id → (tool name, arguments valid)
    let mut calls: HashMap<std::borrow::Cow<'a, str>, (std::borrow::Cow<'a, str>, bool)> =
        HashMap::new();
    for turn in turns {
        r.turn_count = r.turn_count.saturating_add(1);
        r.last_seq = Some(r.last_seq.map_or(turn.seq, |s| s.max(turn.seq)));
        r.audit.input_tokens = r.audit.input_tokens.saturating_add(turn.usage.input_tokens);
        r.audit.output_tokens = r
            .audit
            .output_tokens
            .saturating_add(turn.usage.output_tokens);
        match turn.role {
            Role::User => r.bursts = r.bursts.saturating_add(1),
            Role::Assistant => {
                r.assistant_turns = r.assistant_turns.saturating_add(1);
                r.last_assistant_seq = Some(turn.seq);
                for call in stored_calls(turn).unwrap_or_default() {
                    r.audit.tool_calls = r.audit.tool_calls.saturating_add(1);
                    let valid = call.arguments.is_valid_json();
                    calls.insert(call.id, (call.name, valid));
                }
            }
            Role::Tool => {
                let known = turn.tool_call_id.as_deref().and_then(|id| calls.get(id));
                if let Some((name, true)) = known
                    && let Some(server) = servers.server_of(name)
                {
                    r.used_servers.insert(server.to_owned());
                }
            }
            Role::Notice | Role::Compaction => {}
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::TokenUsage;
    use crate::resume::testing::*;

    #[test]
    fn restores_counters_bursts_and_servers() {
        let mut a1 = assistant(
            2,
            "",
            &[("c1", "grep"), ("c2", "mystery"), ("c3", "kubectl")],
        );
        a1.usage = TokenUsage::new(100, 20);
        let mut a2 = assistant(7, "done", &[]);
        a2.usage = TokenUsage::new(150, 5);
        let mut raw_args = assistant(9, "", &[]);
        raw_args.tool_calls_raw =
            serde_json::json!([{"id": "c9", "name": "grep", "arguments": "{broken"}]);
        let turns = vec![
            user(1, "a"),
            a1,
            tool(3, "c1", "grep", "r"),
            tool(4, "c2", "mystery", "r"),
            // c3 (kubectl) never answered: its server was not used.
            notice(6, "n"),
            a2,
            user(8, "b"),
            raw_args,
            tool(10, "c9", "grep", "bad args"),
        ];
        let mut map = BTreeMap::new();
        map.insert("grep".to_owned(), "logs".to_owned());
        map.insert("kubectl".to_owned(), "k8s".to_owned());
        let r = restore(&turns, &map);
        assert_eq!(r.turn_count, 9);
        assert_eq!(r.assistant_turns, 3);
        assert_eq!(r.bursts, 2);
        assert_eq!(
            r.audit,
            AuditCounters {
                tool_calls: 4,
                input_tokens: 250,
                output_tokens: 25
            }
        );
        assert_eq!(r.last_assistant_seq.map(Seq::get), Some(9));
        assert_eq!(r.last_seq.map(Seq::get), Some(10));
        assert_eq!(
            r.used_servers.into_iter().collect::<Vec<_>>(),
            vec!["logs".to_owned()]
        );
    }

    #[test]
    fn empty_history_restores_nothing() {
        assert_eq!(
            restore(&[], &BTreeMap::<String, String>::new()),
            Restored::default()
        );
    }
}
