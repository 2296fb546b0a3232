//! Several tool runners served as one: the configured MCP servers and the
//! built-in file tools side by side.

use std::{collections::BTreeMap, sync::Arc};

use inquest_core::{SessionId, SideEffect, ToolCall};

use crate::{
    ToolSpec,
    sink::{BoxFuture, ToolOutcome, ToolRunner},
};

/// Runners in priority order: when two offer a tool of the same name, the
/// first keeps it.
#[derive(Clone, Default)]
pub struct ToolSet {
    runners: Vec<Arc<dyn ToolRunner>>,
    /// Tool name → index in `runners`, fixed when the set is built.
    routes: BTreeMap<String, usize>,
    /// Whether servers were configured that are all down.
    configured_but_down: bool,
}

impl ToolSet {
    pub fn new(runners: Vec<Arc<dyn ToolRunner>>) -> Self {
        let mut routes = BTreeMap::new();
        for (i, runner) in runners.iter().enumerate() {
            for spec in runner.specs() {
                routes.entry(spec.name).or_insert(i);
            }
        }
        Self {
            runners,
            routes,
            configured_but_down: false,
        }
    }

    /// Records that tool servers were configured but none could be reached:
    /// bursts then end with `tool_servers_unavailable`.
    pub fn with_configured_servers_down(mut self) -> Self {
        self.configured_but_down = true;
        self
    }
}

impl ToolRunner for ToolSet {
    fn specs(&self) -> Vec<ToolSpec> {
        let mut specs: Vec<ToolSpec> = Vec::new();
        for (i, runner) in self.runners.iter().enumerate() {
            specs.extend(
                runner
                    .specs()
                    .into_iter()
                    .filter(|s| self.routes.get(&s.name) == Some(&i)),
            );
        }
        specs
    }

    fn server_map(&self) -> BTreeMap<String, String> {
        let mut map = BTreeMap::new();
        for (i, runner) in self.runners.iter().enumerate() {
            for (tool, server) in runner.server_map() {
                if self.routes.get(&tool) == Some(&i) {
                    map.insert(tool, server);
                }
            }
        }
        map
    }

    fn available(&self) -> bool {
        !self.configured_but_down && self.runners.iter().all(|r| r.available())
    }

    /// The class from the runner that serves `tool`. A tool no runner
    /// serves (any more) is classed by the first runner that knows better
    /// than mutating (an operator override names it), else mutating.
    fn side_effect(&self, tool: &str) -> SideEffect {
        if let Some(runner) = self.routes.get(tool).and_then(|&i| self.runners.get(i)) {
            return runner.side_effect(tool);
        }
        self.runners
            .iter()
            .map(|r| r.side_effect(tool))
            .find(|c| *c != SideEffect::Mutating)
            .unwrap_or(SideEffect::Mutating)
    }

    fn call<'a>(&'a self, session: SessionId, call: &'a ToolCall) -> BoxFuture<'a, ToolOutcome> {
        match self
            .routes
            .get(&call.name)
            .and_then(|&i| self.runners.get(i))
        {
            Some(runner) => runner.call(session, call),
            None => {
                let name = call.name.clone();
                Box::pin(async move { ToolOutcome::refused(format!("unknown tool {name:?}")) })
            }
        }
    }
}
