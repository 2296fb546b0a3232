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
