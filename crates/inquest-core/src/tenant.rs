//! Tenants: who owns an incident, its sessions and their turns.
//!
//! A [`Tenant`] is a validated name: 1 to 64 characters of lowercase ASCII
//! letters, digits, `-` and `_`, starting with a letter or digit. It comes
//! from the caller's credential (an API token's row, a JWT claim), never
//! from a request field, and the store scopes every caller-facing query by
//! it in SQL.

use std::fmt;

/// The tenant of rows written before tenants existed, and of every call
/// when authentication is off.
pub const DEFAULT_TENANT: &str = "default";

/// The longest tenant name.
pub const MAX_TENANT_LEN: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tenant(String);

/// Why a text is not a tenant name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "not a tenant name (1 to {MAX_TENANT_LEN} of a-z, 0-9, '-' and '_', starting with a letter \
     or digit)"
)]
pub struct InvalidTenant;

impl Tenant {
    pub fn parse(text: &str) -> Result<Self, InvalidTenant> {
        let bytes = text.as_bytes();
        let first_ok = bytes
            .first()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
        let rest_ok = bytes
            .iter()
            .all(|&b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
        if first_ok && rest_ok && bytes.len() <= MAX_TENANT_LEN {
            Ok(Self(text.to_owned()))
        } else {
            Err(InvalidTenant)
        }
    }

    /// The tenant of rows written before tenants existed and of every call
    /// when authentication is off.
    pub fn default_tenant() -> Self {
        Self(DEFAULT_TENANT.to_owned())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Display for Tenant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A tenant's limits on new bursts (`[tenants]` in the config). `None` is
/// no limit. Checked when a call asks for a burst (StartSession,
/// SendMessage, ContinueSession); a burst already running is never
/// stopped by them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TenantQuota {
    /// Bursts of the tenant's sessions pending or running at once.
    pub max_running_bursts: Option<u32>,
    /// Input plus output tokens the tenant's turns may spend per UTC day.
    pub daily_token_budget: Option<u64>,
}

impl TenantQuota {
    pub const UNLIMITED: TenantQuota = TenantQuota {
        max_running_bursts: None,
        daily_token_budget: None,
    };

    /// Whether a new burst is allowed, given what the tenant has now.
    pub fn admits(&self, running_bursts: u64, spent_today: u64) -> Result<(), QuotaExceeded> {
        if let Some(budget) = self.daily_token_budget
            && spent_today >= budget
        {
            return Err(QuotaExceeded::TokenBudget {
                budget,
                spent: spent_today,
            });
        }
        if let Some(limit) = self.max_running_bursts
            && running_bursts >= u64::from(limit)
        {
            return Err(QuotaExceeded::RunningBursts { limit });
        }
        Ok(())
    }
}

/// Which limit refused a new burst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum QuotaExceeded {
    #[error("the tenant already has {limit} bursts pending or running (its limit)")]
    RunningBursts { limit: u32 },
    #[error(
        "the tenant spent its daily token budget ({spent} of {budget} tokens today, UTC); it \
         resets at 00:00 UTC"
    )]
    TokenBudget { budget: u64, spent: u64 },
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn accepts_and_refuses() {
        for ok in ["default", "acme", "team-7", "a", "0_x", &"a".repeat(64)] {
            assert_eq!(Tenant::parse(ok).map(|t| t.to_string()), Ok(ok.to_owned()));
        }
        for bad in [
            "",
            "Acme",
            "-x",
            "_x",
            "a b",
            "a/b",
            "ä",
            "a\0",
            &"a".repeat(65),
        ] {
            assert_eq!(Tenant::parse(bad), Err(InvalidTenant), "{bad:?}");
        }
        assert_eq!(Tenant::default_tenant().as_str(), DEFAULT_TENANT);
    }

    #[test]
    fn quota_admits_below_its_limits_only() {
        assert_eq!(TenantQuota::UNLIMITED.admits(u64::MAX, u64::MAX), Ok(()));
        let q = TenantQuota {
            max_running_bursts: Some(2),
            daily_token_budget: Some(100),
        };
        assert_eq!(q.admits(1, 99), Ok(()));
        assert_eq!(
            q.admits(2, 0),
            Err(QuotaExceeded::RunningBursts { limit: 2 })
        );
        assert_eq!(
            q.admits(0, 100),
            Err(QuotaExceeded::TokenBudget {
                budget: 100,
                spent: 100
            })
        );
        let zero = TenantQuota {
            max_running_bursts: Some(0),
            daily_token_budget: None,
        };
        assert!(zero.admits(0, 0).is_err());
    }

    proptest! {
        #[test]
        fn a_parsed_name_is_its_text(s in "\\PC{0,80}") {
            if let Ok(t) = Tenant::parse(&s) {
                prop_assert_eq!(t.as_str(), s.as_str());
                prop_assert!(s.len() <= MAX_TENANT_LEN);
            }
        }
    }
}
