//! The environment layer: `INQUEST_*` (and `DATABASE_URL`) over the file.

use std::{path::PathBuf, str::FromStr};

use super::{Config, ConfigError};

/// `name` parsed as a `T`, if set.
fn parsed<T>(
    get: &impl Fn(&str) -> Option<String>,
    name: &'static str,
) -> Result<Option<T>, ConfigError>
where
    T: FromStr,
    T::Err: std::fmt::Display,
{
    get(name)
        .map(|v| {
            v.parse().map_err(|e: T::Err| ConfigError::Env {
                name,
                reason: e.to_string(),
            })
        })
        .transpose()
}

/// `name` as text, if set; empty means unset.
fn text(get: &impl Fn(&str) -> Option<String>, name: &str) -> Option<Option<String>> {
    get(name).map(|v| Some(v).filter(|v| !v.is_empty()))
}

impl Config {
    /// The environment layer. `get` is `std::env::var` in production and a
    /// map in tests.
    pub fn apply_env(&mut self, get: impl Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
        if let Some(v) = parsed(&get, "INQUEST_LISTEN")? {
            self.listen = v;
        }
        if let Some(v) = parsed(&get, "INQUEST_ADMIN_LISTEN")? {
            self.admin.listen = v;
        }
        if let Some(v) = text(&get, "INQUEST_DATABASE_URL").or_else(|| text(&get, "DATABASE_URL")) {
            self.database_url = v;
        }
        if let Some(v) = text(&get, "INQUEST_REPLICA_ID") {
            self.replica_id = v;
        }
        if let Some(v) = get("INQUEST_DATA_DIR") {
            self.data_dir = PathBuf::from(v);
        }
        if let Some(v) = parsed(&get, "INQUEST_AGENT_THREADS")? {
            self.runtime.agent_threads = v;
        }
        if let Some(v) = parsed(&get, "INQUEST_SERVING_NICE")? {
            self.runtime.serving_nice = v;
        }
        if let Some(v) = parsed(&get, "INQUEST_MAX_MESSAGE_BYTES")? {
            self.limits.max_message_bytes = v;
        }
        if let Some(v) = get("INQUEST_LEASE_TTL") {
            self.lease.ttl =
                inquest_core::duration_text::parse(&v).map_err(|reason| ConfigError::Env {
                    name: "INQUEST_LEASE_TTL",
                    reason,
                })?;
        }
        Ok(())
    }
}
