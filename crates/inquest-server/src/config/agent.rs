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

    /// Refuses a config file whose script, `mcp.config` or
    /// `tools.files_root` is not there, before anything starts, saying
    /// where a relative path was looked for: a copy of a config file moved
    /// away from its files fails here, not after the database is migrated.
    pub(crate) fn check_agent_paths(&self, file: &Path) -> Result<(), ConfigError> {
        let scripts =
            self.providers.iter().enumerate().filter_map(|(i, p)| {
                Some((format!("providers[{i}].script"), p.script.as_deref()?))
            });
        let mcp = self
            .mcp
            .iter()
            .map(|m| ("mcp.config".to_owned(), m.config.as_path()));
        let files = self
            .tools
            .files_root
            .iter()
            .map(|r| ("tools.files_root".to_owned(), r.as_path()));
        for (key, path) in scripts.chain(mcp).chain(files) {
            if !path.exists() {
                let dir = file.parent().unwrap_or(Path::new("."));
                return Err(ConfigError::Invalid(format!(
                    "{key}: {} does not exist (a relative path in {} is taken from that file's \
                     directory, {}; a copy of the file elsewhere needs absolute paths)",
                    path.display(),
                    file.display(),
                    dir.display()
                )));
            }
        }
        Ok(())
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
