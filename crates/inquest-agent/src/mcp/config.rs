//! The standard `mcpServers` JSON file (named by the `[mcp]` section,
//! [`super::McpSection`]).
//!
//! ```json
//! {"mcpServers": {
//!   "logs":  {"command": "python3", "args": ["logs_server.py"], "env": {"LOG_DIR": "/var/log"}},
//!   "k8s":   {"url": "https://mcp.internal/k8s/mcp", "headers": {"Authorization": "Bearer ${K8S_TOKEN}"}}
//! }}
//! ```
//!
//! Each server has exactly one of `command` (a child process speaking MCP
//! over stdio) or `url` (streamable HTTP). `${NAME}` in `env` values,
//! `headers` values and `url` is replaced by that environment variable
//! (a missing one is an error); nothing else is expanded, and `args` are
//! passed as written. A stdio server starts with a minimal environment,
//! as the official MCP SDKs give one by default: the [`INHERITED_ENV`]
//! variables Inquest has (HOME, LOGNAME, PATH, SHELL, TERM, USER), plus
//! exactly the `env` its entry names. None of Inquest's own variables
//! (provider keys, `DATABASE_URL`, …) reach it.
//! Keys other tools write into the same file (`type`, `disabled`, `cwd`)
//! are understood; other unknown keys are ignored with a warning, so one
//! file can serve several MCP clients. Only `type` values naming stdio or
//! streamable HTTP are accepted (`sse`, the older HTTP transport, is not
//! supported).

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use serde::Deserialize;
use serde_json::Value;

/// Headers the streamable-HTTP transport sets itself.
const RESERVED_HEADERS: [&str; 4] = [
    "accept",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
];

/// One entry of `mcpServers`, as written.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
pub struct McpServerEntry {
    #[serde(default)]
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    #[serde(default)]
    pub url: Option<String>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// `stdio`, `http`, `streamable-http` or `streamableHttp`, if given.
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    /// A disabled server is skipped (not reported as unavailable).
    #[serde(default)]
    pub disabled: bool,
    /// Keys this client does not use; warned about, not rejected.
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

/// The `mcpServers` file as written.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpServersFile {
    pub mcp_servers: BTreeMap<String, McpServerEntry>,
}

/// The variables a stdio server inherits from Inquest's environment; every
/// other one it gets only from its entry's `env`.
pub const INHERITED_ENV: [&str; 6] = ["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];

/// How to reach one server, validated. Its `Debug` shows the names of
/// `env` variables and headers, never their values, and the URL redacted.
#[derive(Clone, PartialEq, Eq)]
pub enum McpTransport {
    Stdio {
        command: String,
        args: Vec<String>,
        /// Added to (or overriding) the [`INHERITED_ENV`] variables.
        env: BTreeMap<String, String>,
        cwd: Option<PathBuf>,
    },
    StreamableHttp {
        url: String,
        headers: BTreeMap<String, String>,
    },
}

impl std::fmt::Debug for McpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = |m: &BTreeMap<String, String>| m.keys().cloned().collect::<Vec<_>>();
        match self {
            McpTransport::Stdio {
                command,
                args,
                env,
                cwd,
            } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("args", args)
                .field("env_names", &names(env))
                .field("cwd", cwd)
                .finish(),
            McpTransport::StreamableHttp { url, headers } => f
                .debug_struct("StreamableHttp")
                .field("url", &inquest_redact::redact(url))
                .field("header_names", &names(headers))
                .finish(),
        }
    }
}

/// One validated server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServer {
    /// The key in `mcpServers`; what reports, logs and overrides call it.
    pub name: String,
    pub transport: McpTransport,
}

/// Every enabled server, in name order (the order collisions are settled
/// in, see [`crate::mcp::McpTools`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct McpServers(pub Vec<McpServer>);

/// Why the MCP configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum McpConfigError {
    #[error("cannot read MCP servers file {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("MCP servers file {path} is not a valid mcpServers file: {source}")]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("mcpServers.{server}: {reason}")]
    Invalid { server: String, reason: String },
    #[error("[mcp]: {0}")]
    Section(String),
}

impl McpServers {
    /// Reads and validates an `mcpServers` file.
    pub fn load(path: &Path) -> Result<Self, McpConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| McpConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text).map_err(|e| match e {
            McpConfigError::Parse { source, .. } => McpConfigError::Parse {
                path: path.to_owned(),
                source,
            },
            other => other,
        })
    }

    /// Parses and validates `mcpServers` JSON text.
    pub fn parse(text: &str) -> Result<Self, McpConfigError> {
        let file: McpServersFile =
            serde_json::from_str(text).map_err(|source| McpConfigError::Parse {
                path: PathBuf::new(),
                source,
            })?;
        Self::from_file(file, &|name| std::env::var(name).ok())
    }

    /// Validates entries; `lookup` reads the environment for `${NAME}`.
    pub fn from_file(
        file: McpServersFile,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, McpConfigError> {
        let mut servers = Vec::new();
        for (name, entry) in file.mcp_servers {
            if entry.disabled {
                continue;
            }
            let invalid = |reason: String| McpConfigError::Invalid {
                server: name.clone(),
                reason,
            };
            let transport = validate_entry(&name, entry, lookup).map_err(invalid)?;
            servers.push(McpServer { name, transport });
        }
        Ok(McpServers(servers))
    }
}

fn validate_entry(
    name: &str,
    entry: McpServerEntry,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<McpTransport, String> {
    if name.trim().is_empty() || name.chars().any(char::is_control) {
        return Err("a server name must be non-blank text".into());
    }
    if !entry.other.is_empty() {
        let keys: Vec<&str> = entry.other.keys().map(String::as_str).collect();
        tracing::warn!(
            server = name,
            ?keys,
            "ignoring unknown keys in mcpServers entry"
        );
    }
    let expand = |field: &str, text: &str| {
        expand_env(text, lookup).map_err(|var| {
            format!("`{field}` uses ${{{var}}}, but that environment variable is not set")
        })
    };
    match (entry.command, entry.url) {
        (Some(_), Some(_)) => Err("has both `command` and `url`; give exactly one".into()),
        (None, None) => Err("needs `command` (stdio) or `url` (streamable HTTP)".into()),
        (Some(command), None) => {
            if !matches!(entry.kind.as_deref(), None | Some("stdio")) {
                return Err(format!(
                    "`type` {:?} does not go with `command`",
                    entry.kind
                ));
            }
            if command.trim().is_empty() {
                return Err("`command` must not be blank".into());
            }
            if !entry.headers.is_empty() {
                return Err("`headers` are only for `url` servers".into());
            }
            let mut env = BTreeMap::new();
            for (key, value) in entry.env {
                let value = expand(&format!("env.{key}"), &value)?;
                env.insert(key, value);
            }
            Ok(McpTransport::Stdio {
                command,
                args: entry.args,
                env,
                cwd: entry.cwd,
            })
        }
        (None, Some(url)) => {
            let kind_ok = matches!(
                entry.kind.as_deref(),
                None | Some("http" | "streamable-http" | "streamableHttp" | "streamable_http")
            );
            if !kind_ok {
                return Err(format!(
                    "`type` {:?} is not supported; only stdio and streamable HTTP are",
                    entry.kind
                ));
            }
            if !entry.args.is_empty() || !entry.env.is_empty() || entry.cwd.is_some() {
                return Err("`args`, `env` and `cwd` are only for `command` servers".into());
            }
            let url = expand("url", &url)?;
            let scheme_ok = url.starts_with("http://") || url.starts_with("https://");
            if !scheme_ok || url.contains(char::is_whitespace) {
                return Err(format!("`url` {url:?} is not an http(s) URL"));
            }
            let mut headers = BTreeMap::new();
            for (key, value) in entry.headers {
                let value = expand(&format!("headers.{key}"), &value)?;
                if reqwest::header::HeaderName::from_bytes(key.as_bytes()).is_err()
                    || reqwest::header::HeaderValue::from_str(&value).is_err()
                {
                    return Err(format!("header {key:?} is not a valid HTTP header"));
                }
                if RESERVED_HEADERS.iter().any(|r| key.eq_ignore_ascii_case(r)) {
                    return Err(format!("header {key:?} is set by the MCP transport itself"));
                }
                headers.insert(key, value);
            }
            Ok(McpTransport::StreamableHttp { url, headers })
        }
    }
}

/// Replaces `${NAME}` with the variable's value; `Err(NAME)` if unset.
/// A `$` not followed by `{` is kept as is.
fn expand_env(text: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return Ok(out);
        };
        let var = &after[..end];
        let value = lookup(var).ok_or_else(|| var.to_owned())?;
        // An expansion is where tokens come from: hide it everywhere.
        inquest_redact::register(&value);
        out.push_str(&value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<McpServers, McpConfigError> {
        let file: McpServersFile =
            serde_json::from_str(text).map_err(|source| McpConfigError::Parse {
                path: PathBuf::new(),
                source,
            })?;
        McpServers::from_file(file, &|v| (v == "TOKEN").then(|| "s3cret".to_owned()))
    }

    #[test]
    fn debug_never_shows_env_or_header_values() {
        let mut headers = BTreeMap::new();
        headers.insert("Authorization".to_owned(), "Bearer tok-abcdef".to_owned());
        let http = McpTransport::StreamableHttp {
            url: "https://h/mcp?token=qwerty123".into(),
            headers,
        };
        let text = format!("{http:?}");
        assert!(
            !text.contains("tok-abcdef") && !text.contains("qwerty123"),
            "{text}"
        );
        let mut env = BTreeMap::new();
        env.insert("API_KEY".to_owned(), "zxcvbn987".to_owned());
        let stdio = McpTransport::Stdio {
            command: "srv".into(),
            args: vec![],
            env,
            cwd: None,
        };
        let text = format!("{stdio:?}");
        assert!(
            text.contains("API_KEY") && !text.contains("zxcvbn987"),
            "{text}"
        );
    }

    #[test]
    fn reads_stdio_and_http_servers_in_name_order() {
        let servers = parse(
            r#"{"mcpServers": {
                "logs": {"command": "python3", "args": ["s.py"], "env": {"A": "x-${TOKEN}"}, "autoApprove": []},
                "k8s": {"type": "http", "url": "https://h/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
                "old": {"command": "gone", "disabled": true}},
              "otherClientSetting": 1}"#,
        )
        .unwrap();
        let names: Vec<&str> = servers.0.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["k8s", "logs"]);
        assert_eq!(
            servers.0[0].transport,
            McpTransport::StreamableHttp {
                url: "https://h/mcp".into(),
                headers: [("Authorization".into(), "Bearer s3cret".into())].into(),
            }
        );
        let McpTransport::Stdio {
            command, args, env, ..
        } = &servers.0[1].transport
        else {
            panic!("stdio expected");
        };
        assert_eq!(
            (command.as_str(), args.as_slice()),
            ("python3", &["s.py".to_owned()][..])
        );
        assert_eq!(env["A"], "x-s3cret");
    }

    #[test]
    fn rejects_bad_entries_with_the_server_named() {
        for (text, needle) in [
            (
                r#"{"mcpServers": {"a": {"command": "x", "url": "http://h"}}}"#,
                "exactly one",
            ),
            (
                r#"{"mcpServers": {"a": {"args": ["x"]}}}"#,
                "needs `command`",
            ),
            (r#"{"mcpServers": {"a": {"url": "ftp://h"}}}"#, "http(s)"),
            (
                r#"{"mcpServers": {"a": {"url": "http://h", "env": {"A": "b"}}}}"#,
                "only for `command`",
            ),
            (
                r#"{"mcpServers": {"a": {"command": "x", "headers": {"A": "b"}}}}"#,
                "only for `url`",
            ),
            (
                r#"{"mcpServers": {"a": {"type": "sse", "url": "http://h"}}}"#,
                "not supported",
            ),
            (
                r#"{"mcpServers": {"a": {"command": "x", "env": {"A": "${NOPE}"}}}}"#,
                "NOPE",
            ),
            (
                r#"{"mcpServers": {"a": {"url": "http://h", "headers": {"bad name": "v"}}}}"#,
                "header",
            ),
            (r#"{"mcpServers": {"a": {"command": " "}}}"#, "blank"),
            (
                r#"{"mcpServers": {"a": {"url": "http://h", "headers": {"Mcp-Session-Id": "1"}}}}"#,
                "transport itself",
            ),
        ] {
            let error = parse(text).unwrap_err().to_string();
            assert!(error.starts_with("mcpServers.a: "), "{error}");
            assert!(error.contains(needle), "{error} should mention {needle}");
        }
        assert!(matches!(
            parse(r#"{"servers": {}}"#),
            Err(McpConfigError::Parse { .. })
        ));
        assert!(parse(r#"{"mcpServers": {}}"#).unwrap().0.is_empty());
    }

    #[test]
    fn env_expansion_keeps_plain_dollars() {
        let lookup = |v: &str| (v == "X").then(|| "1".to_owned());
        assert_eq!(expand_env("a$b ${X}${X} $", &lookup).unwrap(), "a$b 11 $");
        assert_eq!(expand_env("${X", &lookup).unwrap(), "${X");
        assert_eq!(expand_env("${Y}", &lookup).unwrap_err(), "Y");
    }
}
