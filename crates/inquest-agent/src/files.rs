//! Built-in read-only tools over a directory of evidence (logs, metric
//! dumps, deploy notes): `list_files`, `read_file` and `search`. They let
//! the example investigation run with real tools and no MCP server to
//! install. Every path is confined to the root.

use std::{
    collections::BTreeMap,
    path::{Component, Path, PathBuf},
};

use inquest_core::{SessionId, ToolArguments, ToolCall};
use serde_json::{Value, json};

use crate::{
    ToolSpec,
    sink::{BoxFuture, ToolOutcome, ToolRunner},
};

/// Largest tool output returned to the model.
const MAX_OUTPUT_BYTES: usize = 16 * 1024;
/// Most matches `search` returns.
const MAX_MATCHES: usize = 200;

/// The built-in tools, served as one "server" named `server`.
#[derive(Debug, Clone)]
pub struct FileTools {
    server: String,
    root: PathBuf,
}

impl FileTools {
    pub fn new(server: impl Into<String>, root: impl Into<PathBuf>) -> Self {
        Self {
            server: server.into(),
            root: root.into(),
        }
    }

    /// `relative` under the root, refusing absolute paths and `..`.
    fn resolve(&self, relative: &str) -> Result<PathBuf, String> {
        let rel = Path::new(relative);
        if rel
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
        {
            return Err(format!(
                "path {relative:?} must be relative to the evidence root, without `..`"
            ));
        }
        Ok(self.root.join(rel))
    }

    fn files(&self) -> Result<Vec<String>, String> {
        let mut out = Vec::new();
        let mut stack = vec![self.root.clone()];
        while let Some(dir) = stack.pop() {
            let entries = std::fs::read_dir(&dir)
                .map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
            for entry in entries.flatten() {
                let path = entry.path();
                if path.is_dir() {
                    stack.push(path);
                } else if let Ok(rel) = path.strip_prefix(&self.root) {
                    out.push(rel.to_string_lossy().into_owned());
                }
            }
        }
        out.sort();
        Ok(out)
    }

    fn run(&self, name: &str, args: &serde_json::Map<String, Value>) -> Result<String, String> {
        let text = |key: &str| args.get(key).and_then(Value::as_str).map(str::to_owned);
        match name {
            "list_files" => Ok(self.files()?.join("\n")),
            "read_file" => {
                let path = text("path").ok_or("read_file needs a string `path`")?;
                let body = std::fs::read_to_string(self.resolve(&path)?)
                    .map_err(|e| format!("cannot read {path}: {e}"))?;
                let start = args
                    .get("start_line")
                    .and_then(Value::as_u64)
                    .unwrap_or(1)
                    .max(1) as usize;
                let count = args.get("max_lines").and_then(Value::as_u64).unwrap_or(200) as usize;
                let lines: Vec<String> = body
                    .lines()
                    .enumerate()
                    .skip(start - 1)
                    .take(count)
                    .map(|(i, l)| format!("{:>5}  {l}", i + 1))
                    .collect();
                Ok(lines.join("\n"))
            }
            "search" => {
                let pattern = text("pattern")
                    .ok_or("search needs a string `pattern`")?
                    .to_lowercase();
                if pattern.is_empty() {
                    return Err("search needs a non-empty `pattern`".into());
                }
                let only = text("path");
                let mut hits = Vec::new();
                for file in self.files()? {
                    if only.as_deref().is_some_and(|p| p != file) {
                        continue;
                    }
                    let Ok(body) = std::fs::read_to_string(self.root.join(&file)) else {
                        continue;
                    };
                    for (i, line) in body.lines().enumerate() {
                        if line.to_lowercase().contains(&pattern) && hits.len() < MAX_MATCHES {
                            hits.push(format!("{file}:{}: {line}", i + 1));
                        }
                    }
                }
                if hits.is_empty() {
                    Ok(format!("no line matches {pattern:?}"))
                } else {
                    Ok(hits.join("\n"))
                }
            }
            other => Err(format!("unknown tool {other:?}")),
        }
    }
}

fn truncate(mut text: String) -> String {
    if text.len() > MAX_OUTPUT_BYTES {
        let mut cut = MAX_OUTPUT_BYTES;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("\n[output truncated]");
    }
    text
}

impl ToolRunner for FileTools {
    fn specs(&self) -> Vec<ToolSpec> {
        vec![
            ToolSpec {
                name: "list_files".into(),
                description: "List the evidence files (logs, metrics, deploy notes).".into(),
                input_schema: json!({"type": "object", "properties": {}}),
            },
            ToolSpec {
                name: "read_file".into(),
                description: "Read lines of one evidence file.".into(),
                input_schema: json!({"type": "object", "properties": {
                    "path": {"type": "string"},
                    "start_line": {"type": "integer", "minimum": 1},
                    "max_lines": {"type": "integer", "minimum": 1}
                }, "required": ["path"]}),
            },
            ToolSpec {
                name: "search".into(),
                description: "Case-insensitive substring search over the evidence files.".into(),
                input_schema: json!({"type": "object", "properties": {
                    "pattern": {"type": "string"},
                    "path": {"type": "string", "description": "only this file"}
                }, "required": ["pattern"]}),
            },
        ]
    }

    fn server_map(&self) -> BTreeMap<String, String> {
        self.specs()
            .into_iter()
            .map(|s| (s.name, self.server.clone()))
            .collect()
    }

    fn available(&self) -> bool {
        self.root.is_dir()
    }

    /// Every built-in file tool only reads.
    fn side_effect(&self, tool: &str) -> inquest_core::SideEffect {
        if self.specs().iter().any(|s| s.name == tool) {
            inquest_core::SideEffect::ReadOnly
        } else {
            inquest_core::SideEffect::Mutating
        }
    }

    fn call<'a>(&'a self, _session: SessionId, call: &'a ToolCall) -> BoxFuture<'a, ToolOutcome> {
        Box::pin(async move {
            if !self.specs().iter().any(|s| s.name == call.name) {
                return ToolOutcome::refused(format!("unknown tool {:?}", call.name));
            }
            let ToolArguments::Json(args) = &call.arguments else {
                return ToolOutcome::refused(format!(
                    "the arguments of {} were not a JSON object: {}",
                    call.name,
                    call.arguments.as_sent()
                ));
            };
            let (content, is_error) = match self.run(&call.name, args) {
                Ok(text) => (truncate(text), false),
                Err(text) => (text, true),
            };
            ToolOutcome {
                content,
                is_error,
                server: Some(self.server.clone()),
                reached_server: true,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, args: &str) -> ToolCall {
        ToolCall {
            id: "c1".into(),
            name: name.into(),
            arguments: ToolArguments::from_model(args),
        }
    }

    #[tokio::test]
    async fn reads_searches_and_stays_inside_the_root() {
        let dir = std::env::temp_dir().join(format!("inquest-files-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("logs")).unwrap();
        std::fs::write(dir.join("logs/app.log"), "ok\nERROR pool exhausted\nok\n").unwrap();
        let tools = FileTools::new("evidence", &dir);
        let s = SessionId::new();
        let listed = tools.call(s, &call("list_files", "{}")).await;
        assert_eq!(listed.content, "logs/app.log");
        let found = tools
            .call(s, &call("search", r#"{"pattern": "pool"}"#))
            .await;
        assert_eq!(found.content, "logs/app.log:2: ERROR pool exhausted");
        let read = tools
            .call(
                s,
                &call(
                    "read_file",
                    r#"{"path": "logs/app.log", "start_line": 2, "max_lines": 1}"#,
                ),
            )
            .await;
        assert!(!read.is_error && read.content.ends_with("ERROR pool exhausted"));
        let escape = tools
            .call(s, &call("read_file", r#"{"path": "../etc/passwd"}"#))
            .await;
        assert!(escape.is_error && escape.reached_server);
        let unknown = tools.call(s, &call("rm", "{}")).await;
        assert!(unknown.is_error && !unknown.reached_server);
        let bad_json = tools.call(s, &call("search", "{pattern")).await;
        assert!(bad_json.is_error && !bad_json.reached_server);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
