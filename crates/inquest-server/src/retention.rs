//! `[retention]`: settled sessions and audit events leave after a while.
//!
//! ```toml
//! [retention]
//! finished_sessions = "90d"   # settled (not pending or running) this long
//! audit_events = "400d"
//! interval = "10m"            # how often each replica runs a pass
//! batch_size = 100            # sessions (or audit events) per transaction
//! batch_pause = "1s"          # rest between batches, so appends keep their pace
//!
//! [tenants.overrides.acme]    # one tenant's own, as its limits are
//! retention_finished_sessions = "30d"
//! retention_audit_events = "forever"
//! ```
//!
//! Absent: kept forever; a tenant's override may say `"forever"` too, to
//! keep its data when the default would not. Every replica runs a pass
//! every `interval`: a batch at a time (`Store::erase_expired_sessions`,
//! `Store::erase_expired_incidents` for incidents with no session, then
//! `Store::expire_audit_events`), each in its own transaction that skips
//! rows another replica's batch holds (`SKIP LOCKED`), so each batch is
//! done once and a replica that dies mid-batch leaves it whole for
//! another. A pass stops at a short batch, at `MAX_BATCHES`, or at
//! shutdown (between batches: a batch in flight commits or rolls back
//! whole). One log line per pass that removed anything, a counter per kind.
//!
//! Erased turns give their space back when their month's partition of
//! the turns table is left empty and dropped
//! (`Store::drop_empty_turn_partitions`): at the end of every pass, and
//! hourly on every replica whether retention is configured or not
//! ([`spawn_partitions`], which also makes the months ahead), so space
//! freed by DeleteSession and DeleteIncident comes back too.

use std::time::{Duration, Instant};

use inquest_core::{Tenant, duration_text};
use inquest_store::{KeepFor, Store};
use serde::Deserialize;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use crate::config::tenants::{Keep, TenantsSection};

/// Batches one pass runs at most per kind, so a large backlog is worked
/// off over several passes rather than by one pass that never yields.
const MAX_BATCHES: u32 = 100;

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct RetentionSection {
    /// How long a settled session is kept after it last changed.
    #[serde(with = "duration_text::option")]
    pub finished_sessions: Option<Duration>,
    /// How long an audit event is kept.
    #[serde(with = "duration_text::option")]
    pub audit_events: Option<Duration>,
    /// How often each replica runs a pass.
    #[serde(with = "duration_text")]
    pub interval: Duration,
    /// Rows per batch (one transaction each).
    pub batch_size: u32,
    /// Rest between two batches of a pass: an erasure writes WAL for
    /// every row it removes, and back to back it took 0.41 of the
    /// appends' throughput (`inquest-bench erase --pause-ms 0`); at 100
    /// sessions and 1 s it takes 0.05 and still erases about 10,000 turns
    /// a second per replica (docs/benchmarks.md).
    #[serde(with = "duration_text")]
    pub batch_pause: Duration,
}

impl Default for RetentionSection {
    fn default() -> Self {
        Self {
            finished_sessions: None,
            audit_events: None,
            interval: Duration::from_secs(600),
            batch_size: 100,
            batch_pause: Duration::from_secs(1),
        }
    }
}

impl RetentionSection {
    pub fn validate(&self) -> Result<(), String> {
        if self.batch_size == 0 || self.batch_size > 10_000 {
            return Err(format!(
                "retention.batch_size = {} must be 1 to 10000",
                self.batch_size
            ));
        }
        if self.interval.is_zero() {
            return Err("retention.interval must be more than 0".into());
        }
        Ok(())
    }

    /// Each tenant's keep of settled sessions: its override, else ours.
    pub fn sessions(&self, tenants: &TenantsSection) -> KeepFor {
        self.keep(tenants, self.finished_sessions, |o| {
            o.retention_finished_sessions
        })
    }

    /// Each tenant's keep of audit events: its override, else ours.
    pub fn audit(&self, tenants: &TenantsSection) -> KeepFor {
        self.keep(tenants, self.audit_events, |o| o.retention_audit_events)
    }

    fn keep(
        &self,
        tenants: &TenantsSection,
        default: Option<Duration>,
        own: impl Fn(&crate::config::tenants::LimitsEntry) -> Option<Keep>,
    ) -> KeepFor {
        KeepFor {
            default,
            overrides: tenants
                .overrides
                .iter()
                .filter_map(|(name, entry)| {
                    let kept = match own(entry)? {
                        Keep::For(d) => Some(d),
                        Keep::Forever => None,
                    };
                    Some((Tenant::parse(name).ok()?, kept))
                })
                .collect(),
        }
    }

    /// Whether any tenant's data ever leaves.
    fn anything(&self, tenants: &TenantsSection) -> bool {
        let (s, a) = (self.sessions(tenants), self.audit(tenants));
        s.default.is_some()
            || a.default.is_some()
            || !s.overrides.is_empty()
            || !a.overrides.is_empty()
    }
}

/// What one pass removed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Pass {
    pub sessions: u64,
    pub incidents: u64,
    pub audit_events: u64,
    pub batches: u32,
    /// Turns partitions dropped because erasure left them empty.
    pub partitions: u64,
}

/// How one pass goes: rows per batch, and the rest between batches.
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    pub batch: u32,
    pub pause: Duration,
}

/// Rests `pause` unless `shutdown` fires first; false when it did.
async fn rest(pause: Duration, shutdown: &CancellationToken) -> bool {
    tokio::select! {
        () = shutdown.cancelled() => false,
        () = tokio::time::sleep(pause) => true,
    }
}

/// Runs one pass now: sessions first, then audit events, a batch at a
/// time with a rest between, until a short batch, [`MAX_BATCHES`] or
/// `shutdown`.
pub async fn pass(
    store: &Store,
    sessions: &KeepFor,
    audit: &KeepFor,
    pace: Pace,
    shutdown: &CancellationToken,
) -> Result<Pass, inquest_store::StoreError> {
    let batch = pace.batch;
    let mut done = Pass::default();
    if sessions.default.is_some() || !sessions.overrides.is_empty() {
        for n in 0..MAX_BATCHES {
            if shutdown.is_cancelled() || (n > 0 && !rest(pace.pause, shutdown).await) {
                return Ok(done);
            }
            let erased = store.erase_expired_sessions(sessions, batch).await?;
            done.batches += 1;
            done.sessions += erased.sessions;
            done.incidents += erased.incidents;
            metrics::counter!("inquest_erased_sessions_total", "via" => "retention")
                .increment(erased.sessions);
            metrics::counter!("inquest_retention_removed_total", "what" => "incidents")
                .increment(erased.incidents);
            if erased.sessions < u64::from(batch) {
                break;
            }
        }
        // Incidents left with no session by something other than this
        // pass's batches, or never given one, once as old as a session
        // would be.
        for n in 0..MAX_BATCHES {
            if shutdown.is_cancelled() || (n > 0 && !rest(pace.pause, shutdown).await) {
                return Ok(done);
            }
            let gone = store.erase_expired_incidents(sessions, batch).await?;
            done.batches += 1;
            done.incidents += gone;
            metrics::counter!("inquest_retention_removed_total", "what" => "incidents")
                .increment(gone);
            if gone < u64::from(batch) {
                break;
            }
        }
    }
    if audit.default.is_some() || !audit.overrides.is_empty() {
        for n in 0..MAX_BATCHES {
            if shutdown.is_cancelled() || (n > 0 && !rest(pace.pause, shutdown).await) {
                return Ok(done);
            }
            let gone = store.expire_audit_events(audit, batch).await?;
            done.batches += 1;
            done.audit_events += gone;
            metrics::counter!("inquest_retention_removed_total", "what" => "audit_events")
                .increment(gone);
            if gone < u64::from(batch) {
                break;
            }
        }
    }
    if sessions.default.is_some() || !sessions.overrides.is_empty() {
        // Also after a pass that erased nothing: the last sessions of a
        // month may have gone by DeleteIncident, or by a pass that shutdown
        // cut short before this point.
        done.partitions = drop_partitions(store).await?;
    }
    Ok(done)
}

/// Drops the turns partitions erasure left empty; how many.
async fn drop_partitions(store: &Store) -> Result<u64, inquest_store::StoreError> {
    let dropped = store.drop_empty_turn_partitions().await?.len() as u64;
    metrics::counter!("inquest_retention_removed_total", "what" => "turn_partitions")
        .increment(dropped);
    Ok(dropped)
}

/// How often every replica makes the turns partitions ahead and drops
/// the ones left empty.
const PARTITIONS_EVERY: Duration = Duration::from_secs(3600);

/// Keeps the turns table's partitions on this replica until shutdown:
/// every [`PARTITIONS_EVERY`], the months ahead are made and the empty
/// past ones dropped, in a task the server's tracker owns.
pub fn spawn_partitions(store: &Store, tasks: &TaskTracker, shutdown: &CancellationToken) {
    let (store, shutdown) = (store.clone(), shutdown.clone());
    tasks.spawn(async move {
        // Startup made this month's and the next ones already.
        let mut tick = tokio::time::interval_at(
            tokio::time::Instant::now() + PARTITIONS_EVERY,
            PARTITIONS_EVERY,
        );
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            let outcome = tokio::select! {
                () = shutdown.cancelled() => return,
                outcome = async {
                    store.make_turn_partitions().await?;
                    drop_partitions(&store).await
                } => outcome,
            };
            match outcome {
                Ok(0) => {}
                Ok(dropped) => tracing::info!(dropped, "turns partitions left empty dropped"),
                Err(e) => tracing::warn!(
                    error = %inquest_core::error_chain(&e),
                    "keeping the turns partitions failed; trying again in an hour"
                ),
            }
        }
    });
}

/// Runs a pass every `interval` on this replica until shutdown, in a task
/// the server's tracker owns. Nothing to keep for a limited time: no task.
pub fn spawn(
    store: &Store,
    section: &RetentionSection,
    tenants: &TenantsSection,
    tasks: &TaskTracker,
    shutdown: &CancellationToken,
) {
    if !section.anything(tenants) {
        return;
    }
    let (sessions, audit) = (section.sessions(tenants), section.audit(tenants));
    let (store, shutdown) = (store.clone(), shutdown.clone());
    let interval = section.interval;
    let pace = Pace {
        batch: section.batch_size,
        pause: section.batch_pause,
    };
    tasks.spawn(async move {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = tick.tick() => {}
            }
            let started = Instant::now();
            let outcome = tokio::select! {
                () = shutdown.cancelled() => return,
                outcome = pass(&store, &sessions, &audit, pace, &shutdown) => outcome,
            };
            metrics::counter!("inquest_retention_passes_total").increment(1);
            match outcome {
                Ok(done) => tracing::info!(
                    sessions = done.sessions,
                    incidents = done.incidents,
                    audit_events = done.audit_events,
                    partitions = done.partitions,
                    batches = done.batches,
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "retention pass"
                ),
                Err(e) => tracing::warn!(
                    error = %inquest_core::error_chain(&e),
                    "retention pass failed; trying again at the next pass"
                ),
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenants_own_retention_replaces_the_default() {
        let tenants: TenantsSection = toml::from_str(
            "[overrides.acme]\nretention_finished_sessions = \"30d\"\n\
             [overrides.globex]\nmax_running_bursts = 1\n\
             [overrides.initech]\nretention_finished_sessions = \"forever\"\n",
        )
        .unwrap();
        let section: RetentionSection =
            toml::from_str("finished_sessions = \"90d\"\naudit_events = \"400d\"\n").unwrap();
        section.validate().unwrap();
        let sessions = section.sessions(&tenants);
        assert_eq!(sessions.default, Some(Duration::from_secs(90 * 86_400)));
        assert_eq!(
            sessions.overrides,
            [
                (
                    Tenant::parse("acme").unwrap(),
                    Some(Duration::from_secs(30 * 86_400))
                ),
                (Tenant::parse("initech").unwrap(), None)
            ]
        );
        assert!(
            toml::from_str::<TenantsSection>(
                "[overrides.acme]\nretention_finished_sessions = \"sometimes\"\n"
            )
            .is_err()
        );
        assert!(section.audit(&tenants).overrides.is_empty());
        assert!(!RetentionSection::default().anything(&TenantsSection::default()));
        assert!(
            toml::from_str::<RetentionSection>("batch_size = 0")
                .unwrap()
                .validate()
                .is_err()
        );
    }
}
