//! `[limits]`: every size and count one replica takes on, with its
//! default and its check. Grouped by area (load, idempotency keys, API
//! sizes and watch caps, what a model sends, tool output); each area's
//! defaults come from the module that enforces it.

use std::time::Duration;

use serde::Deserialize;

use super::ConfigError;
use inquest_core::duration_text;

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// Largest user message (and incident description) accepted, in bytes.
    pub max_message_bytes: usize,
    /// Messages a session holds queued (`SendMessage` with `if_running =
    /// ENQUEUE`) while its burst is pending or running (default 20). One
    /// more: RESOURCE_EXHAUSTED, nothing stored.
    pub max_queued_messages: usize,

    // Load: what one replica takes on at once.
    /// Bursts this replica runs at once. A session beyond it stays
    /// `pending` (its message is stored, `StartSession` / `SendMessage`
    /// answer as usual) and is claimed, oldest first, when a slot frees
    /// here, or by another replica with room once it has waited
    /// `lease.ttl`. Orphan recovery takes slots too.
    pub max_running_bursts: usize,
    /// Notifications from other replicas queued between the LISTEN
    /// connection and the task applying them. When it is full the newest
    /// are dropped and every local watcher is lagged, so it reconnects from
    /// its cursor (reading the store) rather than miss a turn.
    pub feed_queue_capacity: usize,
    // -- Idempotency keys --
    /// How long an idempotency key stays bound to its first request
    /// (default 24h, at least 1s). Within it a retry with the key gets the
    /// first result (another request with it: ALREADY_EXISTS); after it the
    /// key is deleted and free for a new request. Each replica deletes
    /// expired keys every quarter of this, at most every 10 minutes
    /// ([`LimitsConfig::idempotency_cleanup_interval`]).
    #[serde(with = "duration_text")]
    pub idempotency_key_retention: Duration,
    // -- end idempotency keys --
    // --- API sizes and watch caps (`crate::limits`) ---
    /// Largest request message the gRPC server accepts, in bytes (the
    /// frame's length prefix, checked before the body is read). Larger:
    /// INVALID_ARGUMENT naming this key. Must hold a `max_message_bytes`
    /// message with the request's other fields.
    pub max_request_bytes: usize,
    /// Largest response message a list call sends, and the largest a
    /// single turn is shown as (in ListTurns and in each WatchSession
    /// message), in encoded bytes. At most 4 MiB, the default gRPC client's
    /// limit: no response exceeds what a default client accepts. Must
    /// exceed the largest turn the other caps let the server store.
    pub max_response_bytes: usize,
    /// Largest recovery or refusal notice stored, in bytes of text; a
    /// longer one is cut with a marker saying how much was cut.
    pub max_notice_bytes: usize,
    /// WatchSession streams open at once on this replica. Past it:
    /// RESOURCE_EXHAUSTED with a retry hint.
    pub max_watch_streams: usize,
    /// WatchSession streams open at once on this replica for one session.
    pub max_watch_streams_per_session: usize,
    // --- end API sizes and watch caps ---
    // --- Connections on the gRPC port ---
    /// Connections open at once on the gRPC port. Past it a new connection
    /// is closed as soon as it is accepted while the open ones keep
    /// working, so the process never runs out of file descriptors.
    pub max_connections: usize,
    /// How long a new connection may take to send the HTTP/2 preface (or
    /// its first HTTP/1.1 request line for gRPC-Web); one that sends less
    /// in that time is closed.
    #[serde(with = "duration_text")]
    pub connection_preface_timeout: Duration,
    /// A connection with no request open for this long is closed (a watch
    /// stream is a request open for as long as it runs).
    #[serde(with = "duration_text")]
    pub idle_connection_timeout: Duration,
    /// HTTP/2 streams one connection may have open at once.
    pub max_concurrent_streams: u32,
    // --- end connections ---
    // -- What a model sends (provider side of the agent). Every cut leaves
    // a marker saying what was cut and how much.
    /// Longest model-provider response body read, in bytes; a longer one
    /// fails that provider's call (not retried; the chain fails over).
    pub max_provider_response_bytes: usize,
    /// An assistant turn's text is stored cut to this many bytes (plus a
    /// marker).
    pub max_model_text_bytes: usize,
    /// A tool call whose arguments are longer than this many bytes is not
    /// run; its arguments are stored cut (plus a marker) and its error
    /// result tells the model why.
    pub max_tool_arguments_bytes: usize,
    // -- end of the model-side caps.
    // --- Tool output (MCP servers and the built-in file tools) ---
    /// Longest tool result text stored and shown to the model, in bytes
    /// (default 64 KiB, at most 16 MiB). A longer result is cut on a
    /// character boundary and ends with `…[cut by inquest: N more bytes of
    /// tool result over limits.max_tool_result_bytes = …]`. One MCP stdio
    /// message is held only up to 4 × this + 64 KiB: the rest of a longer
    /// one is read and discarded, and the call answered with what was kept;
    /// over streamable HTTP a response past that ceiling fails the call.
    /// The file tools never read more than this of a file into memory.
    pub max_tool_result_bytes: usize,
    /// Longest line of an MCP server's stderr kept for logs and the "could
    /// not start" report, in bytes (default 4 KiB, at most 1 MiB); the rest
    /// of a longer line is read and dropped, and the line says how much.
    pub max_mcp_stderr_line_bytes: usize,
    // --- end tool output ---
    // --- Context window and compaction ---
    /// Compact the transcript before a model call whose estimated size
    /// passes this share of the provider's budget (`context_window` less
    /// `output_reserve` of its `[[providers]]` entry). Default 0.8; within
    /// [0.1, 0.95].
    pub compact_at: f64,
    /// A tool result is shown to the model cut to this share of the
    /// provider's context window, at a line boundary, with a marker saying
    /// how much was cut and how to ask for less; the stored turn keeps the
    /// whole (`max_tool_result_bytes`-capped) text. Default 0.25; within
    /// [0.01, 0.5].
    pub tool_result_window_share: f64,
    // --- end context window and compaction ---
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            max_message_bytes: inquest_core::Limits::default().max_message_bytes,
            max_queued_messages: inquest_core::Limits::default().max_queued_messages,
            max_running_bursts: 256,
            feed_queue_capacity: 10_000,
            idempotency_key_retention: LimitsConfig::DEFAULT_IDEMPOTENCY_KEY_RETENTION,
            // --- API sizes and watch caps ---
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            max_notice_bytes: DEFAULT_MAX_NOTICE_BYTES,
            max_watch_streams: 10_000,
            max_watch_streams_per_session: 1_000,
            // --- end API sizes and watch caps ---
            max_connections: 10_000,
            connection_preface_timeout: Duration::from_secs(10),
            idle_connection_timeout: Duration::from_secs(300),
            max_concurrent_streams: 200,
            // -- model-side caps
            max_provider_response_bytes: inquest_agent::DEFAULT_MAX_RESPONSE_BYTES,
            max_model_text_bytes: inquest_agent::DEFAULT_MAX_MODEL_TEXT_BYTES,
            max_tool_arguments_bytes: inquest_agent::DEFAULT_MAX_TOOL_ARGUMENTS_BYTES,
            max_tool_result_bytes: inquest_agent::limit::DEFAULT_MAX_TOOL_RESULT_BYTES,
            max_mcp_stderr_line_bytes: inquest_agent::limit::DEFAULT_MAX_MCP_STDERR_LINE_BYTES,
            // --- context window and compaction
            compact_at: inquest_agent::compact::DEFAULT_COMPACT_AT,
            tool_result_window_share: inquest_agent::compact::DEFAULT_TOOL_RESULT_WINDOW_SHARE,
        }
    }
}

impl LimitsConfig {
    pub const DEFAULT_IDEMPOTENCY_KEY_RETENTION: Duration = Duration::from_secs(24 * 3600);
    /// Longest pause between two cleanups of expired idempotency keys.
    pub const MAX_IDEMPOTENCY_CLEANUP_INTERVAL: Duration = Duration::from_secs(600);

    /// How often each replica deletes expired idempotency keys: a quarter
    /// of the retention, at most every 10 minutes, so a key outlives its
    /// retention by at most that much.
    pub fn idempotency_cleanup_interval(&self) -> Duration {
        (self.idempotency_key_retention / 4).min(Self::MAX_IDEMPOTENCY_CLEANUP_INTERVAL)
    }

    /// The checks of [`super::Config::validate`] for `[limits]`.
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if self.max_message_bytes == 0 {
            return Err(ConfigError::Invalid(
                "limits.max_message_bytes must be > 0".into(),
            ));
        }
        self.validate_tool_limits()?;
        // --- context window and compaction
        for (key, value, low, high) in [
            ("limits.compact_at", self.compact_at, 0.1, 0.95),
            (
                "limits.tool_result_window_share",
                self.tool_result_window_share,
                0.01,
                0.5,
            ),
        ] {
            if !(low..=high).contains(&value) {
                return Err(ConfigError::Invalid(format!(
                    "{key} must be between {low} and {high}"
                )));
            }
        }
        // -- model-side caps
        const GIB: usize = 1 << 30;
        for (key, value) in [
            (
                "limits.max_provider_response_bytes",
                self.max_provider_response_bytes,
            ),
            ("limits.max_model_text_bytes", self.max_model_text_bytes),
            (
                "limits.max_tool_arguments_bytes",
                self.max_tool_arguments_bytes,
            ),
        ] {
            if !(1..=GIB).contains(&value) {
                return Err(ConfigError::Invalid(format!(
                    "{key} must be between 1 and {GIB} (1 GiB)"
                )));
            }
        }
        // API sizes and watch caps.
        validate(self).map_err(ConfigError::Invalid)?;
        if self.idempotency_key_retention < Duration::from_secs(1) {
            return Err(ConfigError::Invalid(
                "limits.idempotency_key_retention must be at least 1s".into(),
            ));
        }
        Ok(())
    }

    /// `[limits]` keys of tool output: within (0, their maximum].
    fn validate_tool_limits(&self) -> Result<(), ConfigError> {
        use inquest_agent::limit::{MAX_STDERR_LINE_BYTES_LIMIT, MAX_TOOL_RESULT_BYTES_LIMIT};
        for (name, value, max) in [
            (
                "limits.max_tool_result_bytes",
                self.max_tool_result_bytes,
                MAX_TOOL_RESULT_BYTES_LIMIT,
            ),
            (
                "limits.max_mcp_stderr_line_bytes",
                self.max_mcp_stderr_line_bytes,
                MAX_STDERR_LINE_BYTES_LIMIT,
            ),
        ] {
            if value == 0 || value > max {
                return Err(ConfigError::Invalid(format!(
                    "{name} must be between 1 and {max}"
                )));
            }
        }
        Ok(())
    }
}

/// The receive limit of a default gRPC client: 4 MiB.
pub const DEFAULT_CLIENT_LIMIT: usize = 4 * 1024 * 1024;
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 4 * 1024 * 1024;
/// 3.5 MiB: half a MiB under the default client's limit.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 3 * 1024 * 1024 + 512 * 1024;
pub use inquest_engine::DEFAULT_MAX_NOTICE_BYTES;
/// What a request holds besides its one large text field: ids (36 bytes
/// each), a title (500), an idempotency key (200), field tags and lengths.
pub const REQUEST_OVERHEAD_BYTES: usize = 4 * 1024;
/// What a stored turn holds besides its content, as encoded: session id,
/// seq, role, tool call ids and names, the tool-call framing, timestamp,
/// token counts, and the cut marker appended to cut content. Generous on
/// purpose (tool names come from MCP servers).
pub const TURN_OVERHEAD_BYTES: usize = 64 * 1024;
/// The smallest `max_response_bytes` accepted: a page must hold a turn.
pub const MIN_RESPONSE_BYTES: usize = 2 * TURN_OVERHEAD_BYTES;

/// Every cap on the content of a stored turn, by config key. The largest
/// turn stored is the largest of these plus [`TURN_OVERHEAD_BYTES`].
///
/// Model text (`limits.max_model_text_bytes`) and tool results
/// (`limits.max_tool_result_bytes`) belong here too once their caps land.
pub fn content_caps(c: &LimitsConfig) -> Vec<(&'static str, usize)> {
    vec![
        // User turns (StartSession, SendMessage).
        ("limits.max_message_bytes", c.max_message_bytes),
        // Recovery and refusal notices (plus their cut marker, inside the
        // overhead).
        ("limits.max_notice_bytes", c.max_notice_bytes),
        // An assistant turn's text (its tool calls' arguments are bounded
        // each, not in number: the read-time cut covers a turn of many).
        ("limits.max_model_text_bytes", c.max_model_text_bytes),
        // A tool's result (plus its cut marker, inside the overhead).
        ("limits.max_tool_result_bytes", c.max_tool_result_bytes),
    ]
}

/// The largest encoded turn the server can store under `c`, and the cap
/// that decides it.
pub fn worst_case_turn_bytes(c: &LimitsConfig) -> (usize, &'static str) {
    content_caps(c)
        .into_iter()
        .max_by_key(|(_, cap)| *cap)
        .map_or((TURN_OVERHEAD_BYTES, "none"), |(key, cap)| {
            (cap.saturating_add(TURN_OVERHEAD_BYTES), key)
        })
}

/// The checks of [`crate::Config::validate`] for the keys above.
pub fn validate(c: &LimitsConfig) -> Result<(), String> {
    if !(MIN_RESPONSE_BYTES..=DEFAULT_CLIENT_LIMIT).contains(&c.max_response_bytes) {
        return Err(format!(
            "limits.max_response_bytes must be between {MIN_RESPONSE_BYTES} and \
             {DEFAULT_CLIENT_LIMIT} (the default gRPC client's receive limit)"
        ));
    }
    let (turn, key) = worst_case_turn_bytes(c);
    if turn > c.max_response_bytes {
        return Err(format!(
            "{key} lets a stored turn reach {turn} bytes (the cap plus {TURN_OVERHEAD_BYTES} \
             bytes of other fields), over limits.max_response_bytes ({}): such a turn could \
             not be listed or watched whole",
            c.max_response_bytes
        ));
    }
    let need = c.max_message_bytes.saturating_add(REQUEST_OVERHEAD_BYTES);
    if c.max_request_bytes < need {
        return Err(format!(
            "limits.max_request_bytes ({}) must be at least limits.max_message_bytes + \
             {REQUEST_OVERHEAD_BYTES} ({need}), or a message within its limit could not be sent",
            c.max_request_bytes
        ));
    }
    if c.max_notice_bytes < 1024 {
        return Err("limits.max_notice_bytes must be at least 1024".into());
    }
    if c.max_watch_streams == 0 || c.max_watch_streams_per_session == 0 {
        return Err(
            "limits.max_watch_streams and limits.max_watch_streams_per_session must be > 0".into(),
        );
    }
    if c.max_connections == 0 || c.max_concurrent_streams == 0 {
        return Err("limits.max_connections and limits.max_concurrent_streams must be > 0".into());
    }
    if c.idle_connection_timeout < Duration::from_millis(100) {
        return Err("limits.idle_connection_timeout must be at least 100ms".into());
    }
    if c.connection_preface_timeout < Duration::from_millis(100) {
        return Err("limits.connection_preface_timeout must be at least 100ms".into());
    }
    if c.max_watch_streams_per_session > c.max_watch_streams {
        return Err(
            "limits.max_watch_streams_per_session must not exceed limits.max_watch_streams".into(),
        );
    }
    Ok(())
}
