//! Session-scoped and burst-scoped state, split so that one function,
//! [`SessionState::begin_burst`], is the only place that knows which
//! fields reset at a burst boundary.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use inquest_core::{
    AuditCounters, Message, Restored, SessionId, Turn, compaction::RunningEstimate, restore,
    used_call_ids,
};

use crate::{ChainCursor, sink::ToolRunner};

/// Spans bursts. Rebuilt from the store at every burst start, so nothing
/// here needs a previous run's memory.
#[derive(Debug)]
pub struct SessionState {
    pub session_id: SessionId,
    /// The provider-valid transcript sent to the model. Grown by pushing;
    /// replaced only through [`SessionState::replace_transcript`] (the
    /// running token estimate counts each message once).
    pub transcript: Vec<Message<'static>>,
    /// Every stored turn, the ones this burst adds included (for active
    /// time and the report).
    pub turns: Vec<Turn>,
    pub audit: AuditCounters,
    /// Model calls made over the session's life (its assistant turns):
    /// what the iteration budget counts.
    pub iterations_used: u32,
    /// Burst number of the burst now running (1 for the first).
    pub burst: u32,
    /// Tool name → server, snapshotted once when the session (re)starts.
    pub tool_servers: BTreeMap<String, String>,
    /// MCP servers a call actually reached.
    pub servers_used: BTreeSet<String>,
    /// Where the provider chain stands. Failover is sticky within a burst;
    /// `begin_burst` puts it back on the first provider.
    pub provider: ChainCursor,
    /// Every tool-call id the session has used (stored calls, results and
    /// the rebuilt transcript), and each id the loop gives out: what
    /// `inquest_core::session_unique_call_ids` keeps new ids apart from.
    pub call_ids: HashSet<String>,
    /// Context windows providers named in a "too long" answer (chain
    /// index → tokens, in the units of the loop's estimate): they override
    /// the configured window for the rest of the burst (`compact.rs`).
    pub learned_windows: BTreeMap<usize, u64>,
    /// The burst started from a read of the latest compaction, not every
    /// stored turn: the ids of the calls it summarised
    /// are not in `call_ids`, so every new call gets a generated
    /// `inq_{seq}_{i}` id (unique by seq) instead of the provider's.
    pub partial_history: bool,
    /// The context estimate of `transcript`, kept as it grows.
    estimate: RunningEstimate,
}

/// Reset at every burst: the no-progress rails and the burst's own count.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct BurstState {
    /// Consecutive replies with neither text nor tool calls.
    pub empty_replies: u32,
    /// Calls to unknown tools or with arguments that were not JSON.
    pub bad_tool_strikes: u32,
    /// Model calls made in this burst.
    pub model_calls: u32,
    /// Turns this burst appended.
    pub turns: u32,
}

impl SessionState {
    /// Restores the session from its stored turns (the opening user turn of
    /// the new burst included). `transcript` is the rebuild of those turns
    /// when the caller made it already (the resume plan's, see
    /// `inquest_core::plan_resume_rebuilt`), so it is not made twice;
    /// `None` rebuilds here.
    pub fn restore(
        session_id: SessionId,
        turns: Vec<Turn>,
        transcript: Option<Vec<Message<'static>>>,
        tools: &dyn ToolRunner,
    ) -> Self {
        let tool_servers = tools.server_map();
        let restored: Restored = restore(&turns, &tool_servers);
        let transcript = transcript
            .unwrap_or_else(|| inquest_core::rebuild_messages(&turns).into_owned_messages());
        let call_ids = used_call_ids(&turns, &transcript);
        let partial_history = turns
            .last()
            .is_some_and(|t| t.seq.get() != turns.len() as u64);
        Self {
            session_id,
            transcript,
            audit: restored.audit,
            iterations_used: u32::try_from(restored.assistant_turns).unwrap_or(u32::MAX),
            burst: u32::try_from(restored.bursts).unwrap_or(u32::MAX).max(1),
            servers_used: restored.used_servers,
            provider: ChainCursor::new(),
            tool_servers,
            turns,
            call_ids,
            learned_windows: BTreeMap::new(),
            partial_history,
            estimate: RunningEstimate::default(),
        }
    }

    /// Replaces the transcript (the fit at burst start, a compaction).
    pub fn replace_transcript(&mut self, transcript: Vec<Message<'static>>) {
        self.transcript = transcript;
        self.estimate.reset();
    }

    /// [`inquest_core::compaction::estimate_tokens`] of a request with
    /// `system`, the transcript and `tools_bytes` of tool specs, counting
    /// only the messages pushed since the last call.
    pub fn transcript_tokens(&mut self, system: &str, tools_bytes: usize) -> u64 {
        let tokens = self.estimate.tokens(system, &self.transcript, tools_bytes);
        debug_assert_eq!(
            tokens,
            inquest_core::compaction::estimate_tokens(system, &self.transcript, tools_bytes),
            "the running estimate drifted: the transcript was changed other than by a push \
             without replace_transcript"
        );
        tokens
    }

    /// Records that provider `index` refused a request estimated at
    /// `estimate` tokens as too long, naming `limit` and its own count
    /// `requested` when it did. The window kept is in the estimate's
    /// units: the limit scaled by estimate / requested when the provider
    /// counts more than the estimate does, 90% of the estimate when no
    /// limit was named; never larger than one learned before.
    pub fn learn_window(
        &mut self,
        index: usize,
        limit: Option<u64>,
        requested: Option<u64>,
        estimate: u64,
    ) {
        let learned = match (limit, requested) {
            (Some(limit), Some(requested)) if requested > estimate && requested > 0 => {
                (limit as u128 * estimate as u128 / requested as u128) as u64
            }
            (Some(limit), _) => limit,
            (None, _) => estimate / 10 * 9,
        };
        let entry = self.learned_windows.entry(index).or_insert(learned);
        *entry = (*entry).min(learned);
        tracing::warn!(
            provider_index = index,
            window = *entry,
            "provider said the request is too long; window learned"
        );
    }

    /// Starts a burst: resets exactly the burst-scoped state and the
    /// provider position; everything else (history, audit counters, the
    /// iteration budget, servers used) carries on.
    pub fn begin_burst(&mut self) -> BurstState {
        self.provider.reset();
        BurstState::default()
    }

    /// Whether this is a follow-up burst (its model stopping means
    /// `awaiting_user`, not `completed`).
    pub fn is_follow_up(&self) -> bool {
        self.burst > 1
    }
}
