//! `[approval]`: which tool calls wait for a human before they first run.
//!
//! ```toml
//! [approval]
//! mode = "mutating"      # "off" | "mutating" (default) | "all"
//! timeout = "24h"        # then what is still pending is denied as expired
//!
//! [[approval.rules]]     # first match wins; before the mode
//! name = "no deletes"
//! server = "kubectl"     # optional
//! tool = "delete_*"      # * and ? wildcards
//! action = "deny"        # "require" | "allow" | "deny"
//!
//! [[approval.rules]]
//! tool = "restart_service"
//! arguments = [{ pointer = "/namespace", prefix = "staging-" }]
//! action = "allow"
//! ```
//!
//! A tenant's own policy replaces the whole section:
//! `[tenants.overrides.<tenant>.approval]`.

use std::time::Duration;

use inquest_core::{
    approval::{Action, ArgumentMatch, ArgumentTest, Gate, Glob, Mode, Pointer, Policy, Rule},
    duration_text,
};
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct ApprovalSection {
    pub mode: Mode,
    #[serde(with = "duration_text")]
    pub timeout: Duration,
    pub rules: Vec<RuleEntry>,
}

impl Default for ApprovalSection {
    fn default() -> Self {
        Self {
            mode: Mode::default(),
            timeout: Gate::DEFAULT_TIMEOUT,
            rules: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RuleEntry {
    /// What the turn and the audit trail call the rule (else `rules[N]`).
    pub name: Option<String>,
    pub server: Option<String>,
    pub tool: String,
    #[serde(default)]
    pub arguments: Vec<ArgumentEntry>,
    pub action: Action,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ArgumentEntry {
    /// A JSON pointer into the call's arguments, e.g. `/namespace`.
    pub pointer: String,
    pub equals: Option<toml::Value>,
    pub prefix: Option<String>,
}

impl ApprovalSection {
    /// The checked policy; `at` names the section in errors
    /// (`approval`, `tenants.overrides.acme.approval`).
    pub fn gate(&self, at: &str) -> Result<Gate, String> {
        if self.timeout.is_zero() {
            return Err(format!("{at}.timeout must be > 0"));
        }
        let rules = self
            .rules
            .iter()
            .enumerate()
            .map(|(i, r)| r.rule(i).map_err(|e| format!("{at}.rules[{i}]: {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Gate {
            policy: Policy {
                mode: self.mode,
                rules,
            },
            timeout: self.timeout,
        })
    }
}

impl RuleEntry {
    fn rule(&self, index: usize) -> Result<Rule, String> {
        let tool = Glob::parse(&self.tool).map_err(|e| format!("tool: {e}"))?;
        let arguments = self
            .arguments
            .iter()
            .map(ArgumentEntry::argument)
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(name) = &self.name
            && (name.is_empty() || name.chars().any(char::is_control))
        {
            return Err(format!(
                "name {name:?} must be non-empty, without control characters"
            ));
        }
        Ok(Rule {
            name: self
                .name
                .clone()
                .unwrap_or_else(|| format!("rules[{index}]")),
            server: self.server.clone(),
            tool,
            arguments,
            action: self.action,
        })
    }
}

impl ArgumentEntry {
    fn argument(&self) -> Result<ArgumentMatch, String> {
        let pointer = Pointer::parse(&self.pointer).map_err(|e| e.to_string())?;
        let test = match (&self.equals, &self.prefix) {
            (Some(v), None) => ArgumentTest::Equals(
                serde_json::to_value(v)
                    .map_err(|e| format!("argument {:?} equals: {e}", self.pointer))?,
            ),
            (None, Some(p)) => ArgumentTest::Prefix(p.clone()),
            _ => {
                return Err(inquest_core::approval::RuleError::Test {
                    pointer: self.pointer.clone(),
                }
                .to_string());
            }
        };
        Ok(ArgumentMatch { pointer, test })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ApprovalSection, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }

    #[test]
    fn the_default_holds_mutating_calls_for_a_day() {
        let gate = ApprovalSection::default().gate("approval").unwrap();
        assert_eq!(gate.policy.mode, Mode::Mutating);
        assert_eq!(gate.timeout, Duration::from_secs(86_400));
        assert!(gate.policy.rules.is_empty());
    }

    #[test]
    fn rules_parse_in_order_with_their_names() {
        let section = parse(
            "mode = \"all\"\ntimeout = \"90s\"\n\
             [[rules]]\nname = \"no deletes\"\ntool = \"delete_*\"\naction = \"deny\"\n\
             [[rules]]\nserver = \"k8s\"\ntool = \"restart_?\"\naction = \"allow\"\n\
             arguments = [{ pointer = \"/ns\", prefix = \"staging-\" }, { pointer = \"/n\", equals = 3 }]\n",
        )
        .unwrap();
        let gate = section.gate("approval").unwrap();
        assert_eq!(gate.timeout, Duration::from_secs(90));
        assert_eq!(gate.policy.rules[0].name, "no deletes");
        assert_eq!(gate.policy.rules[1].name, "rules[1]");
        assert_eq!(gate.policy.rules[1].server.as_deref(), Some("k8s"));
        assert_eq!(
            gate.policy.rules[1].arguments[1].test,
            ArgumentTest::Equals(serde_json::json!(3))
        );
    }

    #[test]
    fn bad_rules_are_refused_naming_what_is_wrong() {
        let cases = [
            (
                "[[rules]]\ntool = \"a[b]\"\naction = \"deny\"\n",
                "approval.rules[0]: tool",
            ),
            (
                "[[rules]]\ntool = \"x\"\naction = \"deny\"\narguments = [{ pointer = \"ns\", prefix = \"a\" }]\n",
                "argument pointer \"ns\"",
            ),
            (
                "[[rules]]\ntool = \"x\"\naction = \"deny\"\narguments = [{ pointer = \"/ns\" }]\n",
                "exactly one of `equals` and `prefix`",
            ),
            ("timeout = \"0s\"\n", "approval.timeout must be > 0"),
        ];
        for (text, want) in cases {
            let err = parse(text).unwrap().gate("approval").unwrap_err();
            assert!(err.contains(want), "{text}: {err}");
        }
        for text in [
            "mode = \"sometimes\"\n",
            "[[rules]]\ntool = \"x\"\naction = \"maybe\"\n",
            "[[rules]]\ntool = \"x\"\naction = \"deny\"\ncolour = 1\n",
            "unknown = 1\n",
        ] {
            assert!(parse(text).is_err(), "{text}");
        }
    }
}
