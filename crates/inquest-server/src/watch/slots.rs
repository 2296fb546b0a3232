//! The watch stream caps (`limits.max_watch_streams`,
//! `limits.max_watch_streams_per_session`) and the counters over all
//! streams: a [`WatchSlot`] is taken before a stream starts and freed when
//! it ends, however it ends.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, atomic::AtomicU64},
    time::Duration,
};

use inquest_core::{SessionId, Tenant};

use crate::limits::ApiLimits;
use crate::status::ApiError;

/// Counters over all watch streams of this server. The atomics are read
/// without locks by tests and the benchmark and only grow; `slots` counts
/// the streams open now.
#[derive(Debug, Default)]
pub struct WatchMetrics {
    pub streams_opened: AtomicU64,
    pub streams_lagged: AtomicU64,
    /// Live events not delivered to a watcher because it had fallen behind
    /// (summed over watchers).
    pub dropped_events: AtomicU64,
    /// The streams open now (the caps count these).
    pub slots: WatchSlots,
}

/// How long a watch refused by a cap is told to wait before retrying.
pub const WATCH_RETRY_AFTER: Duration = Duration::from_secs(1);

/// Watch streams open now, in all and per session. A std mutex: held for
/// a counter update only, never across an await.
#[derive(Debug, Default)]
pub struct WatchSlots {
    counts: Mutex<SlotCounts>,
}

#[derive(Debug, Default)]
struct SlotCounts {
    total: usize,
    per_session: HashMap<SessionId, usize>,
    per_tenant: HashMap<Tenant, usize>,
}

impl WatchSlots {
    fn counts(&self) -> std::sync::MutexGuard<'_, SlotCounts> {
        // Nothing panics while holding it; a poisoned lock still counts.
        self.counts.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Streams open on this replica.
    pub fn open(&self) -> usize {
        self.counts().total
    }

    /// Streams open on this replica for `session`.
    pub fn open_for(&self, session: SessionId) -> usize {
        self.counts()
            .per_session
            .get(&session)
            .copied()
            .unwrap_or(0)
    }
}

/// One open stream's place under the caps; dropping it frees the place.
pub struct WatchSlot {
    metrics: Arc<WatchMetrics>,
    session: SessionId,
    tenant: Tenant,
}

/// Whose stream a slot is for, and that tenant's share of the replica
/// (`[tenants] max_watch_streams`; `None`: no share of its own).
pub struct TenantShare<'a> {
    pub tenant: &'a Tenant,
    pub share: Option<usize>,
}

impl WatchSlot {
    /// Takes a place for a stream of `session`, or says which cap is
    /// reached.
    pub(super) fn take(
        metrics: &Arc<WatchMetrics>,
        session: SessionId,
        share: TenantShare<'_>,
        limits: &ApiLimits,
    ) -> Result<Self, ApiError> {
        let mut counts = metrics.slots.counts();
        let here = counts.per_session.get(&session).copied().unwrap_or(0);
        let tenants = counts.per_tenant.get(share.tenant).copied().unwrap_or(0);
        let refused = if let Some(cap) = share.share.filter(|cap| tenants >= *cap) {
            Some((
                format!("this tenant has {tenants} watch streams open on this replica"),
                "tenants.max_watch_streams",
                cap,
            ))
        } else if counts.total >= limits.max_watch_streams {
            Some((
                format!("this replica has {} watch streams open", counts.total),
                "limits.max_watch_streams",
                limits.max_watch_streams,
            ))
        } else if here >= limits.max_watch_streams_per_session {
            Some((
                format!("session {session} has {here} watch streams open on this replica"),
                "limits.max_watch_streams_per_session",
                limits.max_watch_streams_per_session,
            ))
        } else {
            None
        };
        if let Some((what, limit, value)) = refused {
            return Err(ApiError::ResourceExhausted {
                what,
                limit,
                value,
                retry_after: WATCH_RETRY_AFTER,
            });
        }
        counts.total += 1;
        *counts.per_session.entry(session).or_insert(0) += 1;
        *counts.per_tenant.entry(share.tenant.clone()).or_insert(0) += 1;
        Ok(Self {
            metrics: Arc::clone(metrics),
            session,
            tenant: share.tenant.clone(),
        })
    }
}

impl Drop for WatchSlot {
    fn drop(&mut self) {
        let mut counts = self.metrics.slots.counts();
        counts.total = counts.total.saturating_sub(1);
        if let Some(n) = counts.per_session.get_mut(&self.session) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.per_session.remove(&self.session);
            }
        }
        if let Some(n) = counts.per_tenant.get_mut(&self.tenant) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.per_tenant.remove(&self.tenant);
            }
        }
    }
}
