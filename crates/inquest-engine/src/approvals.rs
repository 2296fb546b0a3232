//! Which approval policy a session's bursts run under: the `[approval]`
//! default, or its tenant's own (`[tenants.overrides.<tenant>.approval]`).

use std::{collections::HashMap, sync::Arc};

use inquest_core::{
    Tenant,
    approval::{Gate, Mode},
};

/// The policies of every tenant, chosen per burst.
#[derive(Debug, Clone)]
pub struct ApprovalGates {
    default: Option<Arc<Gate>>,
    tenants: HashMap<String, Option<Arc<Gate>>>,
}

impl Default for ApprovalGates {
    /// `mode = "mutating"`, no rules, for every tenant.
    fn default() -> Self {
        Self::new(Gate::default(), [])
    }
}

impl ApprovalGates {
    pub fn new(default: Gate, tenants: impl IntoIterator<Item = (Tenant, Gate)>) -> Self {
        Self {
            default: screening(default),
            tenants: tenants
                .into_iter()
                .map(|(t, g)| (t.as_str().to_owned(), screening(g)))
                .collect(),
        }
    }

    /// The policy `tenant`'s bursts screen calls with; `None` when it
    /// lets every call run (mode off, no rules): nothing is screened.
    pub fn for_tenant(&self, tenant: &Tenant) -> Option<Arc<Gate>> {
        match self.tenants.get(tenant.as_str()) {
            Some(gate) => gate.clone(),
            None => self.default.clone(),
        }
    }
}

fn screening(gate: Gate) -> Option<Arc<Gate>> {
    (gate.policy.mode != Mode::Off || !gate.policy.rules.is_empty()).then(|| Arc::new(gate))
}

#[cfg(test)]
mod tests {
    use inquest_core::approval::{Action, Glob, Policy, Rule};

    use super::*;

    fn tenant(name: &str) -> Tenant {
        Tenant::parse(name).unwrap()
    }

    #[test]
    fn a_tenant_override_replaces_the_default_whole() {
        let own = Gate {
            policy: Policy {
                mode: Mode::All,
                rules: Vec::new(),
            },
            timeout: std::time::Duration::from_secs(60),
        };
        let gates = ApprovalGates::new(Gate::default(), [(tenant("acme"), own.clone())]);
        assert_eq!(gates.for_tenant(&tenant("acme")).as_deref(), Some(&own));
        assert_eq!(
            gates.for_tenant(&tenant("globex")).as_deref(),
            Some(&Gate::default())
        );
    }

    #[test]
    fn a_policy_that_lets_everything_run_screens_nothing() {
        let off = Gate {
            policy: Policy {
                mode: Mode::Off,
                rules: Vec::new(),
            },
            ..Gate::default()
        };
        let gates = ApprovalGates::new(off.clone(), [(tenant("acme"), Gate::default())]);
        assert!(gates.for_tenant(&tenant("globex")).is_none());
        assert!(gates.for_tenant(&tenant("acme")).is_some());
        // Off with a rule still screens: the rule may deny.
        let ruled = Gate {
            policy: Policy {
                mode: Mode::Off,
                rules: vec![Rule {
                    name: "no deletes".into(),
                    server: None,
                    tool: Glob::parse("delete_*").unwrap(),
                    arguments: Vec::new(),
                    action: Action::Deny,
                }],
            },
            ..off
        };
        assert!(
            ApprovalGates::new(ruled, [])
                .for_tenant(&tenant("x"))
                .is_some()
        );
    }
}
