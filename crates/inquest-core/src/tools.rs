//! What Inquest knows about tools: which MCP server serves a tool, and
//! whether running it again is safe.
//!
//! Crash recovery needs the second question. A tool call whose result was
//! never recorded may have run (fully or partly); continuing without a human
//! is only safe when running it again cannot hurt. That is read from the MCP
//! tool annotations ([`SideEffect::from_annotations`]), may be overridden in
//! config ([`ToolClassOverrides`]), and defaults to [`SideEffect::Mutating`]
//! whenever nothing is known.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::SessionId;

/// How a tool affects the world, as far as recovery is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SideEffect {
    /// Only reads; running it again changes nothing.
    ReadOnly,
    /// May change things, but running it again with the same arguments has
    /// no further effect.
    Idempotent,
    /// Anything else, including every tool nothing is known about.
    Mutating,
}

impl SideEffect {
    /// Classifies a tool from its MCP annotations (`readOnlyHint`,
    /// `idempotentHint`, `destructiveHint`). A missing hint is unknown, and
    /// unknown means mutating: only an explicit `readOnlyHint: true` or
    /// `idempotentHint: true` makes a tool safe to repeat. `destructiveHint`
    /// never makes a tool safer; it is accepted so callers can pass all
    /// annotations without picking.
    pub fn from_annotations(
        read_only_hint: Option<bool>,
        idempotent_hint: Option<bool>,
        destructive_hint: Option<bool>,
    ) -> SideEffect {
        let _ = destructive_hint;
        if read_only_hint == Some(true) {
            SideEffect::ReadOnly
        } else if idempotent_hint == Some(true) {
            SideEffect::Idempotent
        } else {
            SideEffect::Mutating
        }
    }

    /// Whether a call whose outcome is unknown may be left to the model to
    /// retry without asking a human.
    pub fn safe_to_repeat(self) -> bool {
        matches!(self, SideEffect::ReadOnly | SideEffect::Idempotent)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SideEffect::ReadOnly => "read_only",
            SideEffect::Idempotent => "idempotent",
            SideEffect::Mutating => "mutating",
        }
    }
}

/// Operator overrides of tool classes, from config:
///
/// ```toml
/// [tool_classes.servers]
/// kubernetes = "read_only"
/// [tool_classes.tools]
/// kubectl_delete = "mutating"
/// ```
///
/// A tool entry wins over its server's entry, which wins over the tool's
/// own annotations.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolClassOverrides {
    /// By MCP server name (the key in `mcpServers`).
    pub servers: BTreeMap<String, SideEffect>,
    /// By tool name, as the model sees it.
    pub tools: BTreeMap<String, SideEffect>,
}

/// One tool of the session's snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolInfo {
    /// The MCP server that serves it.
    pub server: String,
    /// Its class from its own annotations.
    pub annotated: SideEffect,
}

/// The tool-name → server map snapshotted at session start, with each
/// tool's annotated class and the operator's overrides.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolCatalog {
    tools: BTreeMap<String, ToolInfo>,
    overrides: ToolClassOverrides,
}

impl ToolCatalog {
    pub fn new(overrides: ToolClassOverrides) -> Self {
        Self {
            tools: BTreeMap::new(),
            overrides,
        }
    }

    /// Adds (or replaces) a tool.
    pub fn insert(&mut self, tool: impl Into<String>, info: ToolInfo) {
        self.tools.insert(tool.into(), info);
    }

    pub fn get(&self, tool: &str) -> Option<&ToolInfo> {
        self.tools.get(tool)
    }

    /// The effective class: tool override, then server override, then the
    /// tool's annotations; [`SideEffect::Mutating`] for unknown tools.
    pub fn side_effect(&self, tool: &str) -> SideEffect {
        if let Some(class) = self.overrides.tools.get(tool) {
            return *class;
        }
        let Some(info) = self.tools.get(tool) else {
            return SideEffect::Mutating;
        };
        self.overrides
            .servers
            .get(&info.server)
            .copied()
            .unwrap_or(info.annotated)
    }
}

/// Tells which MCP server serves a tool; `None` for unknown tools.
pub trait ToolServers {
    fn server_of(&self, tool: &str) -> Option<&str>;
}

impl ToolServers for ToolCatalog {
    fn server_of(&self, tool: &str) -> Option<&str> {
        self.tools.get(tool).map(|i| i.server.as_str())
    }
}

impl ToolServers for BTreeMap<String, String> {
    fn server_of(&self, tool: &str) -> Option<&str> {
        self.get(tool).map(String::as_str)
    }
}

impl ToolServers for HashMap<String, String> {
    fn server_of(&self, tool: &str) -> Option<&str> {
        self.get(tool).map(String::as_str)
    }
}

/// Tells how a tool affects the world. Unknown tools must answer
/// [`SideEffect::Mutating`]; the map implementations do.
pub trait ToolClasses {
    fn side_effect(&self, tool: &str) -> SideEffect;
}

impl ToolClasses for ToolCatalog {
    fn side_effect(&self, tool: &str) -> SideEffect {
        ToolCatalog::side_effect(self, tool)
    }
}

impl ToolClasses for BTreeMap<String, SideEffect> {
    fn side_effect(&self, tool: &str) -> SideEffect {
        self.get(tool).copied().unwrap_or(SideEffect::Mutating)
    }
}

impl ToolClasses for HashMap<String, SideEffect> {
    fn side_effect(&self, tool: &str) -> SideEffect {
        self.get(tool).copied().unwrap_or(SideEffect::Mutating)
    }
}

impl<F: Fn(&str) -> SideEffect> ToolClasses for F {
    fn side_effect(&self, tool: &str) -> SideEffect {
        self(tool)
    }
}

/// The idempotency key sent with a tool call, so tools that can dedupe do.
///
/// Stable: the same session and call id always give the same key, on any
/// replica and after any restart. Call ids are chosen by the provider; a
/// provider that reuses call ids within one session (some OpenAI-compatible
/// servers number them per response) makes keys collide, so the agent loop
/// should only send keys for ids unique within the session.
pub fn tool_idempotency_key(session: SessionId, call_id: &str) -> String {
    format!("inquest:{session}:{call_id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotations_default_to_mutating() {
        use SideEffect::*;
        assert_eq!(SideEffect::from_annotations(None, None, None), Mutating);
        assert_eq!(
            SideEffect::from_annotations(Some(true), None, None),
            ReadOnly
        );
        assert_eq!(
            SideEffect::from_annotations(Some(true), Some(false), Some(true)),
            ReadOnly
        );
        assert_eq!(
            SideEffect::from_annotations(Some(false), Some(true), None),
            Idempotent
        );
        assert_eq!(
            SideEffect::from_annotations(None, Some(true), Some(true)),
            Idempotent
        );
        assert_eq!(
            SideEffect::from_annotations(Some(false), Some(false), Some(false)),
            Mutating
        );
        assert!(ReadOnly.safe_to_repeat() && Idempotent.safe_to_repeat());
        assert!(!Mutating.safe_to_repeat());
    }

    #[test]
    fn tool_override_wins_over_server_over_annotation() {
        let mut overrides = ToolClassOverrides::default();
        overrides.servers.insert("k8s".into(), SideEffect::ReadOnly);
        overrides
            .tools
            .insert("kubectl_delete".into(), SideEffect::Mutating);
        overrides
            .tools
            .insert("ghost".into(), SideEffect::Idempotent);
        let mut catalog = ToolCatalog::new(overrides);
        for (tool, server, class) in [
            ("kubectl_get", "k8s", SideEffect::Mutating),
            ("kubectl_delete", "k8s", SideEffect::ReadOnly),
            ("grep_logs", "logs", SideEffect::ReadOnly),
            ("restart", "ops", SideEffect::Mutating),
        ] {
            catalog.insert(
                tool,
                ToolInfo {
                    server: server.into(),
                    annotated: class,
                },
            );
        }
        assert_eq!(catalog.side_effect("kubectl_get"), SideEffect::ReadOnly);
        assert_eq!(catalog.side_effect("kubectl_delete"), SideEffect::Mutating);
        assert_eq!(catalog.side_effect("grep_logs"), SideEffect::ReadOnly);
        assert_eq!(catalog.side_effect("restart"), SideEffect::Mutating);
        assert_eq!(catalog.side_effect("unknown"), SideEffect::Mutating);
        assert_eq!(catalog.side_effect("ghost"), SideEffect::Idempotent);
        assert_eq!(catalog.server_of("grep_logs"), Some("logs"));
        assert_eq!(catalog.server_of("ghost"), None);
    }

    #[test]
    fn overrides_read_from_config_text() {
        let o: ToolClassOverrides =
            serde_json::from_str(r#"{"servers":{"k8s":"read_only"},"tools":{"x":"idempotent"}}"#)
                .unwrap();
        assert_eq!(o.servers["k8s"], SideEffect::ReadOnly);
        assert_eq!(o.tools["x"], SideEffect::Idempotent);
        assert!(
            serde_json::from_str::<ToolClassOverrides>(r#"{"servers":{"k8s":"safe"}}"#).is_err()
        );
    }

    #[test]
    fn classes_from_maps_and_closures() {
        let mut m = BTreeMap::new();
        m.insert("a".to_owned(), SideEffect::ReadOnly);
        assert_eq!(ToolClasses::side_effect(&m, "a"), SideEffect::ReadOnly);
        assert_eq!(ToolClasses::side_effect(&m, "b"), SideEffect::Mutating);
        let f = |t: &str| {
            if t == "b" {
                SideEffect::Idempotent
            } else {
                SideEffect::Mutating
            }
        };
        assert_eq!(f.side_effect("b"), SideEffect::Idempotent);
    }

    #[test]
    fn idempotency_key_is_stable_and_distinct() {
        let s = SessionId::new();
        assert_eq!(tool_idempotency_key(s, "c1"), tool_idempotency_key(s, "c1"));
        assert_ne!(tool_idempotency_key(s, "c1"), tool_idempotency_key(s, "c2"));
        assert_ne!(
            tool_idempotency_key(s, "c1"),
            tool_idempotency_key(SessionId::new(), "c1")
        );
        assert!(tool_idempotency_key(s, "c1").contains(&s.to_string()));
    }
}
