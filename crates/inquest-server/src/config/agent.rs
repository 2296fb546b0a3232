//! The agent's part of the configuration: `[[providers]]`, `[agent]`,
//! `[mcp]`, `[tools]` and `[[skills]]` (the sections are the agent crate's
//! own types, but `[tools]`); the agent is built from them in
//! `crate::agent`.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::{Config, ConfigError};

/// Built-in tools.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolsSection {
    /// A directory of evidence (logs, metrics) served read-only by the
    /// built-in `list_files`, `read_file` and `search` tools.
    pub files_root: Option<PathBuf>,
    /// The server name those tools are attributed to (default `files`).
    pub files_server: Option<String>,
}

/// Resolves `path` against the config file's directory when relative.
fn under(base: &Path, path: &mut PathBuf) {
    if path.is_relative() {
        *path = base.join(&*path);
    }
}

impl Config {
    /// Relative paths in the file (scripts, the MCP config, the evidence
    /// root) are taken from the config file's directory.
    pub(crate) fn resolve_paths(&mut self, base: &Path) {
        for provider in &mut self.providers {
            if let Some(script) = &mut provider.script {
                under(base, script);
            }
        }
        if let Some(mcp) = &mut self.mcp {
            under(base, &mut mcp.config);
        }
        if let Some(root) = &mut self.tools.files_root {
            under(base, root);
        }
    }

    pub(crate) fn validate_agent(&self) -> Result<(), ConfigError> {
        self.agent.validate().map_err(ConfigError::Invalid)?;
        for (i, p) in self.providers.iter().enumerate() {
            p.validate()
                .map_err(|e| ConfigError::Invalid(format!("providers[{i}]: {e}")))?;
        }
        if let Some(mcp) = &self.mcp {
            mcp.validate()
                .map_err(|e| ConfigError::Invalid(format!("mcp: {e}")))?;
        }
        Ok(())
    }
}
