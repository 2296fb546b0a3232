//! `[tenants]`: the limits each tenant's new bursts are checked against.
//!
//! ```toml
//! [tenants]
//! max_running_bursts = 20         # bursts pending or running at once
//! daily_token_budget = 5000000    # input + output tokens per UTC day
//!
//! [tenants.overrides.acme]        # one tenant's own limits
//! max_running_bursts = 5
//! daily_token_budget = 200000
//! ```
//!
//! Absent keys are no limit; an override replaces the defaults key by key
//! (an override without `daily_token_budget` keeps the default budget).
//! StartSession, SendMessage and ContinueSession over a limit answer
//! RESOURCE_EXHAUSTED (`TENANT_BURST_LIMIT`, `TOKEN_BUDGET_EXHAUSTED`) and
//! write nothing; a burst already running finishes.
//!
//! `max_watch_streams` is each tenant's share of a replica's watch streams
//! (`limits.max_watch_streams` is the whole), so one tenant cannot take
//! them all; past it WatchSession answers RESOURCE_EXHAUSTED
//! (`LIMIT_EXCEEDED`, limit `tenants.max_watch_streams`).

use std::collections::BTreeMap;

use inquest_core::{Tenant, TenantQuota};
use serde::Deserialize;

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsEntry {
    pub max_running_bursts: Option<u32>,
    pub daily_token_budget: Option<u64>,
    pub max_watch_streams: Option<usize>,
    /// The tenant's own `[alerts] max_started_per_hour`.
    pub alerts_max_started_per_hour: Option<u32>,
    /// The tenant's own `[approval]`, replacing the default whole.
    pub approval: Option<crate::config::approval::ApprovalSection>,
    /// The tenant's own `[retention] finished_sessions`.
    pub retention_finished_sessions: Option<Keep>,
    /// The tenant's own `[retention] audit_events`.
    pub retention_audit_events: Option<Keep>,
}

/// How long a tenant's override keeps its data: a duration (`"30d"`), or
/// `"forever"`, which keeps it even when `[retention]` would not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    For(std::time::Duration),
    Forever,
}

impl<'de> Deserialize<'de> for Keep {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        if text.trim() == "forever" {
            return Ok(Self::Forever);
        }
        inquest_core::duration_text::parse(&text)
            .map(Self::For)
            .map_err(|e| serde::de::Error::custom(format!("{e}, or \"forever\"")))
    }
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct TenantsSection {
    pub max_running_bursts: Option<u32>,
    pub daily_token_budget: Option<u64>,
    /// Watch streams one tenant may have open on a replica (absent: only
    /// the replica's `limits.max_watch_streams`).
    pub max_watch_streams: Option<usize>,
    /// Per-tenant limits, by tenant name.
    pub overrides: BTreeMap<String, LimitsEntry>,
}

impl TenantsSection {
    pub fn validate(&self) -> Result<(), String> {
        for name in self.overrides.keys() {
            Tenant::parse(name).map_err(|e| format!("tenants.overrides.{name:?}: {e}"))?;
        }
        Ok(())
    }

    /// The limits of `tenant`'s new bursts.
    pub fn quota(&self, tenant: &Tenant) -> TenantQuota {
        let own = self
            .overrides
            .get(tenant.as_str())
            .cloned()
            .unwrap_or_default();
        TenantQuota {
            max_running_bursts: own.max_running_bursts.or(self.max_running_bursts),
            daily_token_budget: own.daily_token_budget.or(self.daily_token_budget),
        }
    }

    /// How many investigations `tenant`'s alerts may start per hour:
    /// its override, else `default` (`[alerts] max_started_per_hour`).
    pub fn alert_starts_per_hour(&self, tenant: &Tenant, default: u32) -> u32 {
        self.overrides
            .get(tenant.as_str())
            .and_then(|own| own.alerts_max_started_per_hour)
            .unwrap_or(default)
    }

    /// How many watch streams `tenant` may have open on a replica.
    pub fn watch_share(&self, tenant: &Tenant) -> Option<usize> {
        self.overrides
            .get(tenant.as_str())
            .and_then(|own| own.max_watch_streams)
            .or(self.max_watch_streams)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_replace_defaults_key_by_key() {
        let section: TenantsSection = toml::from_str(
            "max_running_bursts = 20\ndaily_token_budget = 1000\n\
             [overrides.acme]\nmax_running_bursts = 5\n",
        )
        .unwrap();
        section.validate().unwrap();
        let acme = section.quota(&Tenant::parse("acme").unwrap());
        assert_eq!(acme.max_running_bursts, Some(5));
        assert_eq!(acme.daily_token_budget, Some(1000));
        let other = section.quota(&Tenant::default_tenant());
        assert_eq!(other.max_running_bursts, Some(20));
        assert_eq!(
            TenantsSection::default().quota(&Tenant::default_tenant()),
            TenantQuota::UNLIMITED
        );
    }

    #[test]
    fn a_watch_share_is_the_tenants_own_or_the_default() {
        let section: TenantsSection =
            toml::from_str("max_watch_streams = 50\n[overrides.acme]\nmax_watch_streams = 5\n")
                .unwrap();
        assert_eq!(
            section.watch_share(&Tenant::parse("acme").unwrap()),
            Some(5)
        );
        assert_eq!(section.watch_share(&Tenant::default_tenant()), Some(50));
        assert_eq!(
            TenantsSection::default().watch_share(&Tenant::default_tenant()),
            None
        );
    }

    #[test]
    fn an_override_must_name_a_tenant() {
        let section: TenantsSection =
            toml::from_str("[overrides.\"Not A Tenant\"]\nmax_running_bursts = 1\n").unwrap();
        assert!(section.validate().is_err());
        assert!(toml::from_str::<TenantsSection>("max_bursts = 1").is_err());
    }
}
