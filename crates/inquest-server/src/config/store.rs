//! `[store]`: the two connection pools and the database timeouts.

use std::time::Duration;

use inquest_core::duration_text;
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreSection {
    /// Connections for API calls (reads, health probes, StartSession /
    /// SendMessage writes).
    pub max_connections: usize,
    /// A separate pool for running bursts: turn writes, lease claims and
    /// renewals, closes. API traffic cannot exhaust it.
    pub burst_connections: usize,
    /// Turn-append statements each pool runs at once; appends arriving
    /// while they are busy go out together in one statement (group
    /// commit, `inquest-store` `group.rs`).
    pub append_statements: usize,
    #[serde(with = "duration_text")]
    pub op_timeout: Duration,
    #[serde(with = "duration_text")]
    pub turn_write_timeout: Duration,
    #[serde(with = "duration_text")]
    pub connect_timeout: Duration,
}

impl Default for StoreSection {
    fn default() -> Self {
        let s = inquest_store::StoreConfig::new("");
        Self {
            max_connections: s.max_connections,
            burst_connections: s.burst_connections,
            append_statements: s.append_statements,
            op_timeout: s.op_timeout,
            turn_write_timeout: s.turn_write_timeout,
            connect_timeout: s.connect_timeout,
        }
    }
}
