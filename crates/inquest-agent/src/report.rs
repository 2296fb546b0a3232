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
    /// Over every stored turn of the session so far, plus this burst's
    /// author call (earlier bursts' author calls are in their own reports).
    pub audit: AuditCounters,
    /// Skills put in the system prompt at the burst's start.
    pub skills_loaded: Vec<String>,
    /// Loaded skills whose server actually served a tool call.
    pub skills_used: Vec<String>,
    /// Servers a tool call actually reached, over the session.
    pub servers_used: Vec<String>,
    /// Working time summed over the session's bursts; idle gaps excluded.
    pub active_time_ms: u64,
    /// This burst's model calls only, tokens by kind and cost: its
    /// assistant turns (since its opening user turn, so a recovered burst
    /// counts the turns its first worker stored too) and its author call.
    #[serde(default)]
    pub burst_usage: UsageTotals,
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

pub fn build(
    state: &SessionState,
    exit: ExitReason,
    summary: String,
    author_usage: Option<TokenUsage>,
    skills: &[Skill],
    skills_loaded: Vec<String>,
) -> BurstReport {
    let mut audit = state.audit;
    if let Some(author) = &author_usage {
        audit.input_tokens = audit.input_tokens.saturating_add(author.input_tokens);
        audit.output_tokens = audit.output_tokens.saturating_add(author.output_tokens);
    }
    let skills_used = skills
        .iter()
        .filter(|s| skills_loaded.contains(&s.name) && state.servers_used.contains(&s.server))
        .map(|s| s.name.clone())
        .collect();
    let active = active_time(&state.turns);
    let mut burst_usage = UsageTotals::default();
    let opening = state
        .turns
        .iter()
        .rposition(|t| t.role == Role::User)
        .unwrap_or(0);
    for turn in state.turns[opening..]
        .iter()
        .filter(|t| t.role == Role::Assistant)
    {
        burst_usage.add(&turn.usage);
    }
    if let Some(author) = &author_usage {
        burst_usage.add(author);
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
    }
}
