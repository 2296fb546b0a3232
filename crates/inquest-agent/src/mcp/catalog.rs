//! Building the catalog from the servers' tool listings: side-effect
//! classes, provider tool specs, collisions and unusable names.

use std::collections::BTreeMap;

use inquest_core::{SideEffect, ToolCatalog, ToolClassOverrides, ToolInfo};
use rmcp::model::Tool;
use serde_json::Value;

use super::SkippedTool;
use crate::ToolSpec;

pub(crate) struct Built {
    pub(crate) catalog: ToolCatalog,
    /// Tool name → index of its server in the listings.
    pub(crate) routes: BTreeMap<String, usize>,
    pub(crate) specs: Vec<ToolSpec>,
    pub(crate) skipped: Vec<SkippedTool>,
}

/// `listings` are (server name, its tools) in server-name order; the
/// first server to offer a name keeps it.
pub(crate) fn build(listings: &[(&str, &[Tool])], overrides: ToolClassOverrides) -> Built {
    let mut built = Built {
        catalog: ToolCatalog::new(overrides),
        routes: BTreeMap::new(),
        specs: Vec::new(),
        skipped: Vec::new(),
    };
    for (index, (server, tools)) in listings.iter().enumerate() {
        for tool in tools.iter() {
            let name = tool.name.to_string();
            let reason = if !valid_tool_name(&name) {
                Some("model providers reject this tool name".to_owned())
            } else {
                built
                    .routes
                    .get(&name)
                    .map(|&first| format!("server {:?} offers it too", listings[first].0))
            };
            if let Some(reason) = reason {
                tracing::warn!(tool = %name, server = %server, %reason, "MCP tool left out");
                built.skipped.push(SkippedTool {
                    tool: name,
                    server: (*server).to_owned(),
                    reason,
                });
                continue;
            }
            let hints = tool.annotations.as_ref();
            let annotated = SideEffect::from_annotations(
                hints.and_then(|a| a.read_only_hint),
                hints.and_then(|a| a.idempotent_hint),
                hints.and_then(|a| a.destructive_hint),
            );
            let info = ToolInfo {
                server: (*server).to_owned(),
                annotated,
            };
            built.catalog.insert(name.clone(), info);
            built.specs.push(spec(tool));
            built.routes.insert(name, index);
        }
    }
    built
}

/// What Anthropic and OpenAI accept as a tool name.
fn valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn spec(tool: &Tool) -> ToolSpec {
    let mut schema = (*tool.input_schema).clone();
    // Providers need the object type spelled out.
    schema
        .entry("type")
        .or_insert_with(|| Value::String("object".into()));
    ToolSpec {
        name: tool.name.to_string(),
        description: tool
            .description
            .as_deref()
            .or(tool.title.as_deref())
            .unwrap_or_default()
            .to_owned(),
        input_schema: Value::Object(schema),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use inquest_core::ToolServers;
    use serde_json::json;

    fn tools(value: Value) -> Vec<Tool> {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn classes_specs_collisions_and_bad_names() {
        let logs = tools(json!([
            {"name": "grep", "description": "Greps.", "inputSchema": {"type": "object"},
             "annotations": {"readOnlyHint": true}},
            {"name": "rotate", "title": "Rotate", "inputSchema": {"properties": {}},
             "annotations": {"idempotentHint": true, "destructiveHint": true}},
            {"name": "logs.tail", "inputSchema": {"type": "object"}},
        ]));
        let ops = tools(json!([
            {"name": "grep", "inputSchema": {"type": "object"}},
            {"name": "restart", "inputSchema": {"type": "object"},
             "annotations": {"destructiveHint": false}},
        ]));
        let mut overrides = ToolClassOverrides::default();
        overrides.servers.insert("ops".into(), SideEffect::ReadOnly);
        let built = build(&[("logs", &logs), ("ops", &ops)], overrides);

        let c = &built.catalog;
        assert_eq!(c.side_effect("grep"), SideEffect::ReadOnly);
        assert_eq!(c.server_of("grep"), Some("logs"));
        assert_eq!(c.side_effect("rotate"), SideEffect::Idempotent);
        assert_eq!(c.get("restart").unwrap().annotated, SideEffect::Mutating);
        assert_eq!(
            c.side_effect("restart"),
            SideEffect::ReadOnly,
            "server override"
        );
        assert_eq!(
            built.routes,
            [
                ("grep".into(), 0),
                ("restart".into(), 1),
                ("rotate".into(), 0)
            ]
            .into()
        );
        let names: Vec<&str> = built.specs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["grep", "rotate", "restart"]);
        assert_eq!(built.specs[1].description, "Rotate");
        assert_eq!(
            built.specs[1].input_schema,
            json!({"type": "object", "properties": {}})
        );
        let skipped: Vec<(&str, &str)> = built
            .skipped
            .iter()
            .map(|s| (s.tool.as_str(), s.server.as_str()))
            .collect();
        assert_eq!(skipped, [("logs.tail", "logs"), ("grep", "ops")]);
        assert!(built.skipped[1].reason.contains("\"logs\""));
    }

    #[test]
    fn provider_safe_tool_names() {
        assert!(valid_tool_name("kubectl_get-pods2"));
        for bad in ["", "a.b", "a b", "ü", &"x".repeat(65)] {
            assert!(!valid_tool_name(bad), "{bad}");
        }
    }
}
