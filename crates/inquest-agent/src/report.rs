//! What a burst lands: its exit reason, a summary, the session's audit
//! counters and active time. Also the skills (prompt snippets tied to an
//! MCP server) and the prompts of the author step.

use std::collections::{BTreeMap, BTreeSet};

use inquest_core::{AuditCounters, ExitReason, Role, TokenUsage, UsageTotals, active_time};
use serde::{Deserialize, Serialize};

use crate::state::SessionState;

/// A named prompt snippet for work with one MCP server (`[[skills]]`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Skill {
    pub name: String,
    /// The MCP server whose tools this skill is about.
    pub server: String,
    pub prompt: String,
}

/// A burst's report, as the server stores it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BurstReport {
    /// 1 for the session's first burst.
    pub burst: u32,
    pub exit_reason: ExitReason,
    pub summary: String,
    /// The session's figures: over every stored turn of the session so far
    /// (as `GetSession` counts them). Report-writing calls are not turns:
    /// they are in their burst's [`BurstReport::author_usage`] only.
    pub audit: AuditCounters,
    /// Skills put in the system prompt at the burst's start.
    pub skills_loaded: Vec<String>,
    /// Loaded skills whose server actually served a tool call.
    pub skills_used: Vec<String>,
    /// Servers a tool call actually reached, over the session.
    pub servers_used: Vec<String>,
    /// Working time summed over the session's bursts; idle gaps excluded.
    /// Earlier bursts count from their stored turns; this one until its
    /// report, so a model call cut short (a cancel) or the report's
    /// writing counts too.
    pub active_time_ms: u64,
    /// This burst's model calls only, tokens by kind and cost: its stored
    /// model turns (assistant and compaction, since its opening user turn,
    /// so a recovered burst counts the turns its first worker stored too)
    /// and its report-writing call.
    #[serde(default)]
    pub burst_usage: UsageTotals,
    /// Tool calls this burst's assistant turns asked for.
    #[serde(default)]
    pub burst_tool_calls: u64,
    /// The report-writing call, part of `burst_usage` (not a stored turn,
    /// so not in the session's figures).
    #[serde(default)]
    pub author_usage: UsageTotals,
}

/// Skills whose server is among the session's tool servers.
pub fn loaded_skills(skills: &[Skill], tool_servers: &BTreeMap<String, String>) -> Vec<String> {
    let servers: BTreeSet<&str> = tool_servers.values().map(String::as_str).collect();
    skills
        .iter()
        .filter(|s| servers.contains(s.server.as_str()))
        .map(|s| s.name.clone())
        .collect()
}

/// The base prompt followed by each loaded skill.
pub fn system_prompt(base: &str, skills: &[Skill], loaded: &[String]) -> String {
    let mut prompt = base.to_owned();
    for skill in skills.iter().filter(|s| loaded.contains(&s.name)) {
        prompt.push_str(&format!(
            "\n\n## Skill: {} (tools of {})\n{}",
            skill.name, skill.server, skill.prompt
        ));
    }
    prompt
}

pub const AUTHOR_SYSTEM: &str = "You write the report of an incident investigation for the on-call \
     engineers. Be factual and brief; cite the evidence found.";

pub const AUTHOR_PROMPT: &str = "Write the investigation report now: the likely cause, the evidence \
     for it, what is still unknown, and the next steps. Do not call tools.";

/// Whether the author step runs for a burst that ended this way. Not
/// after a cancel, a shutdown, a store failure or a provider failure: the
/// model call would fail or nobody wants it.
pub fn worth_authoring(exit: ExitReason) -> bool {
    matches!(
        exit,
        ExitReason::Completed
            | ExitReason::AwaitingUser
            | ExitReason::IterationBudgetExhausted
            | ExitReason::BurstLimitReached
            | ExitReason::NoProgress
    )
}

/// A summary written without the model: what happened, from the state.
pub fn fallback_summary(exit: ExitReason, state: &SessionState) -> String {
    format!(
        "No model-written summary: the burst ended with {exit} after {} tool call(s) in the session.",
        state.audit.tool_calls
    )
}

/// The report of a burst that ended with `exit`; `started`: when this
/// worker began it (a recovered burst's earlier worker counts from its
/// stored turns).
pub fn build(
    state: &SessionState,
    exit: ExitReason,
    summary: String,
    author_usage: Option<TokenUsage>,
    skills: &[Skill],
    skills_loaded: Vec<String>,
    started: time::OffsetDateTime,
) -> BurstReport {
    let audit = state.audit;
    let skills_used = skills
        .iter()
        .filter(|s| skills_loaded.contains(&s.name) && state.servers_used.contains(&s.server))
        .map(|s| s.name.clone())
        .collect();
    let opening = state
        .turns
        .iter()
        .rposition(|t| t.role == Role::User)
        .unwrap_or(0);
    let burst_turns = &state.turns[opening..];
    // The stored turns stop at the last one; the burst went on working
    // until now (a model call cut short, the report's writing), from
    // whichever is later: that turn, or this worker's start.
    let last = burst_turns
        .iter()
        .filter(|t| t.role != Role::Notice)
        .map(|t| t.created_at)
        .max();
    let tail_from = last.map_or(started, |l| l.max(started));
    let tail = time::OffsetDateTime::now_utc() - tail_from;
    let active = active_time(&state.turns).saturating_add(if tail.is_negative() {
        time::Duration::ZERO
    } else {
        tail
    });
    let mut burst_usage = UsageTotals::default();
    let mut burst_tool_calls = 0u64;
    for turn in burst_turns {
        match turn.role {
            Role::Assistant => {
                burst_usage.add(&turn.usage);
                let calls = turn.tool_calls().map_or(0, |c| c.len());
                burst_tool_calls = burst_tool_calls.saturating_add(calls as u64);
            }
            Role::Compaction => burst_usage.add(&turn.usage),
            Role::User | Role::Tool | Role::Notice => {}
        }
    }
    let mut author = UsageTotals::default();
    if let Some(usage) = &author_usage {
        burst_usage.add(usage);
        author.add(usage);
    }
    BurstReport {
        burst: state.burst,
        exit_reason: exit,
        summary,
        audit,
        skills_loaded,
        skills_used,
        servers_used: state.servers_used.iter().cloned().collect(),
        active_time_ms: u64::try_from(active.whole_milliseconds()).unwrap_or(0),
        burst_usage,
        burst_tool_calls,
        author_usage: author,
    }
}
