//! The `[mcp]` section of the server's TOML config.
//!
//! ```toml
//! [mcp]
//! config = "mcp.json"          # the mcpServers file (see `config`)
//! call_timeout = "60s"         # optional; per tool call
//! connect_timeout = "30s"      # optional; start + handshake + tool listing, per server
//! [mcp.side_effects.servers]   # optional; overrides the tools' annotations
//! kubernetes = "read_only"
//! [mcp.side_effects.tools]     # a tool entry wins over its server's
//! kubectl_delete = "mutating"
//! ```

use std::{path::PathBuf, time::Duration};

use inquest_core::ToolClassOverrides;
use serde::Deserialize;

use super::McpConfigError;
use crate::config::duration;

pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// Upper bound that catches unit typos.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(60 * 60);

/// The `[mcp]` section of the server config.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpSection {
    /// The `mcpServers` JSON file. A relative path is taken from the
    /// process's working directory; the config loader may resolve it
    /// against the config file's directory first.
    pub config: PathBuf,
    /// Side-effect classes that override the tools' annotations.
    #[serde(default)]
    pub side_effects: ToolClassOverrides,
    #[serde(default, deserialize_with = "duration")]
    pub call_timeout: Option<Duration>,
    #[serde(default, deserialize_with = "duration")]
    pub connect_timeout: Option<Duration>,
}

impl McpSection {
    pub fn new(config: impl Into<PathBuf>) -> Self {
        Self {
            config: config.into(),
            side_effects: ToolClassOverrides::default(),
            call_timeout: None,
            connect_timeout: None,
        }
    }

    pub fn call_timeout(&self) -> Duration {
        self.call_timeout.unwrap_or(DEFAULT_CALL_TIMEOUT)
    }

    pub fn connect_timeout(&self) -> Duration {
        self.connect_timeout.unwrap_or(DEFAULT_CONNECT_TIMEOUT)
    }

    /// Checks the timeouts; the servers file is checked by [`super::McpServers::load`].
    pub fn validate(&self) -> Result<(), McpConfigError> {
        for (name, value) in [
            ("call_timeout", self.call_timeout()),
            ("connect_timeout", self.connect_timeout()),
        ] {
            if value.is_zero() || value > MAX_TIMEOUT {
                return Err(McpConfigError::Section(format!(
                    "`{name}` must be between 1ms and {MAX_TIMEOUT:?}"
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use inquest_core::SideEffect;

    #[test]
    fn section_reads_overrides_and_timeouts() {
        #[derive(Deserialize)]
        struct Config {
            mcp: McpSection,
        }
        let c: Config = serde_json::from_str(
            r#"{"mcp": {"config": "mcp.json", "call_timeout": "90s",
                "side_effects": {"servers": {"k8s": "read_only"}, "tools": {"rm": "mutating"}}}}"#,
        )
        .unwrap();
        assert_eq!(c.mcp.call_timeout(), Duration::from_secs(90));
        assert_eq!(c.mcp.connect_timeout(), DEFAULT_CONNECT_TIMEOUT);
        assert_eq!(c.mcp.side_effects.servers["k8s"], SideEffect::ReadOnly);
        assert!(c.mcp.validate().is_ok());
        let mut zero = McpSection::new("m.json");
        zero.call_timeout = Some(Duration::ZERO);
        assert!(zero.validate().is_err());
        assert!(serde_json::from_str::<McpSection>(r#"{"config": "m", "timeout": 1}"#).is_err());
    }
}
