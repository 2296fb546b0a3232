//! `[lease]`: how long a replica holds a running session's lease, how
//! often it renews, how early it stops acting for it, and how often the
//! reaper looks for orphans. The keeper and the reaper that use it are in
//! [`crate::runner`]; the claims themselves are the store's.

use std::time::Duration;

use inquest_core::duration_text;
use serde::Deserialize;

/// Leases of running bursts, and the reaper that recovers orphans.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LeaseSection {
    /// How long a claim or renewal holds a session's lease. A replica that
    /// dies is replaced after at most this long (plus `reap_interval`).
    #[serde(with = "duration_text")]
    pub ttl: Duration,
    /// How often the holder renews; a third of `ttl` when absent.
    #[serde(with = "duration_text::option")]
    pub renew_interval: Option<Duration>,
    /// How long before its lease could expire the holder stops acting for
    /// it: it counts `ttl` from when each renewal was *sent*, and this much
    /// earlier it stops starting tools, cancels running ones and retries no
    /// write, so no two replicas ever run tools for one session. Covers
    /// clock-rate drift and scheduling delay. A sixth of `ttl` when absent;
    /// `ttl` must exceed `renew_interval` + this.
    #[serde(with = "duration_text::option")]
    pub safety_margin: Option<Duration>,
    /// How often each replica looks for orphaned sessions (running with an
    /// expired lease) and for pending sessions nobody claimed.
    #[serde(with = "duration_text")]
    pub reap_interval: Duration,
}

impl Default for LeaseSection {
    fn default() -> Self {
        Self {
            ttl: Duration::from_secs(30),
            renew_interval: None,
            safety_margin: None,
            reap_interval: Duration::from_secs(1),
        }
    }
}

impl LeaseSection {
    pub fn renew_interval(&self) -> Duration {
        self.renew_interval.unwrap_or(self.ttl / 3)
    }

    pub fn margin(&self) -> Duration {
        self.safety_margin.unwrap_or(self.ttl / 6)
    }

    /// The checks the server's config runs on `[lease]`.
    pub fn validate(&self) -> Result<(), String> {
        if self.ttl < Duration::from_millis(100) {
            return Err("lease.ttl must be at least 100ms".into());
        }
        let renew = self.renew_interval();
        if renew.is_zero() || renew >= self.ttl {
            return Err("lease.renew_interval must be > 0 and shorter than lease.ttl".into());
        }
        if renew + self.margin() >= self.ttl {
            return Err(format!(
                "lease.ttl ({:?}) must exceed lease.renew_interval ({renew:?}) + \
                 lease.safety_margin ({:?}): a holder must be able to renew before it stops \
                 acting for its lease",
                self.ttl,
                self.margin()
            ));
        }
        if self.reap_interval.is_zero() {
            return Err("lease.reap_interval must be > 0".into());
        }
        Ok(())
    }
}
