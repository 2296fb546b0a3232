//! The live API tokens a replica verifies against, held in memory and
//! read whole from the store, and the gate that failed authentications
//! pass through.
//!
//! A presented token is checked against the last read of the table when
//! that read is at most [`VERIFY_CACHE_TTL`] old (a valid caller costs the
//! database nothing per call; a revocation reaches every replica within
//! the TTL). A token that fails the check, whatever the reason (an unknown
//! id, a wrong secret, expired, revoked), waits for a read of the table
//! that started after it arrived and is checked once more: that finds a
//! token created a moment ago on another replica, and it makes every kind
//! of failure take the same time, so the answer's timing says nothing
//! about whether an id exists. Reads are single-flight and at least
//! [`MIN_REREAD`] apart, so however many failing calls arrive, from however
//! many peers, the database sees at most one read per [`MIN_REREAD`].
//! Failing calls wait under a bound per peer and in all
//! ([`FailureGate`]); past it they are refused at once, without waiting.

use std::{
    collections::HashMap,
    net::IpAddr,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use inquest_store::{ApiToken, Store};
use tokio::{sync::Notify, time::Instant};
use uuid::Uuid;

/// How long a read of the table is trusted: the longest a revocation
/// takes to reach every replica.
pub const VERIFY_CACHE_TTL: Duration = Duration::from_secs(2);
/// Reads of the table start at least this far apart.
pub const MIN_REREAD: Duration = Duration::from_millis(250);
/// Live tokens read at most; past it, an id the read does not hold is
/// looked up by itself (still under the failure gate).
const MAX_LIVE_TOKENS: usize = 100_000;
/// Failing calls waiting at once from one peer address, and in all.
pub const FAILURES_PER_PEER: usize = 64;
pub const FAILURES_IN_ALL: usize = 1_024;

/// One read of the live tokens.
#[derive(Debug)]
pub struct Snapshot {
    tokens: HashMap<Uuid, ApiToken>,
    /// Whether every live token is here (fewer than the read's limit).
    pub complete: bool,
    /// When the read started: nothing it misses is older.
    started: Instant,
}

impl Snapshot {
    pub fn get(&self, id: Uuid) -> Option<&ApiToken> {
        self.tokens.get(&id)
    }
}

/// Why the table could not be read; the reader logged the cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unreadable;

#[derive(Default)]
struct State {
    snapshot: Option<Arc<Snapshot>>,
    reading: bool,
    last_start: Option<Instant>,
    /// When the last read that failed started.
    last_failure: Option<Instant>,
}

/// The table, read on demand (see the module's comment).
pub struct TokenTable {
    store: Store,
    /// A std mutex: a few fields read or set, never held across an await.
    state: Mutex<State>,
    read_done: Notify,
    /// Failed reads, logged once per interval.
    unreadable: crate::edge::auth::Sampled,
}

/// Sets `reading` back and wakes the waiters when the read ends, however
/// it ends (its caller may be dropped mid-read).
struct Reading<'a>(&'a TokenTable);

impl Drop for Reading<'_> {
    fn drop(&mut self) {
        self.0.lock().reading = false;
        self.0.read_done.notify_waiters();
    }
}

enum Next<'a> {
    Ready(Result<Arc<Snapshot>, Unreadable>),
    Wait(tokio::sync::futures::Notified<'a>),
    Sleep(Instant),
    Read(Instant),
}

impl TokenTable {
    pub fn new(store: Store) -> Self {
        Self {
            store,
            state: Mutex::default(),
            read_done: Notify::new(),
            unreadable: crate::edge::auth::Sampled::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A read of the table that started at or after `since`: the last one
    /// if it did, else the next, joining one in flight.
    pub async fn read_since(&self, since: Instant) -> Result<Arc<Snapshot>, Unreadable> {
        loop {
            let next = {
                let mut state = self.lock();
                let now = Instant::now();
                match &state.snapshot {
                    Some(s) if s.started >= since => Next::Ready(Ok(Arc::clone(s))),
                    _ if state.last_failure.is_some_and(|f| f >= since) => {
                        Next::Ready(Err(Unreadable))
                    }
                    _ if state.reading => Next::Wait(self.read_done.notified()),
                    _ => match state.last_start.map(|l| l + MIN_REREAD) {
                        Some(allowed) if allowed > now => Next::Sleep(allowed),
                        _ => {
                            state.reading = true;
                            state.last_start = Some(now);
                            Next::Read(now)
                        }
                    },
                }
            };
            match next {
                Next::Ready(result) => return result,
                Next::Wait(done) => done.await,
                Next::Sleep(until) => tokio::time::sleep_until(until).await,
                Next::Read(started) => return self.read(started).await,
            }
        }
    }

    async fn read(&self, started: Instant) -> Result<Arc<Snapshot>, Unreadable> {
        let _reading = Reading(self);
        let limit = i64::try_from(MAX_LIVE_TOKENS).unwrap_or(i64::MAX);
        match self.store.live_tokens(limit).await {
            Ok(rows) => {
                let complete = rows.len() < MAX_LIVE_TOKENS;
                let snapshot = Arc::new(Snapshot {
                    tokens: rows.into_iter().map(|t| (t.id, t)).collect(),
                    complete,
                    started,
                });
                self.lock().snapshot = Some(Arc::clone(&snapshot));
                Ok(snapshot)
            }
            Err(e) => {
                metrics::counter!("inquest_auth_failures_total", "why" => "store_unavailable")
                    .increment(1);
                // A flood of calls while the database is away would log a
                // line each: one line per interval says how many there were.
                if let Some(since_last) = self.unreadable.tick() {
                    tracing::warn!(error = %inquest_core::error_chain(&e), failures = since_last, "cannot read API tokens");
                }
                self.lock().last_failure = Some(started);
                Err(Unreadable)
            }
        }
    }

    /// One token by id, for a table too large to hold whole.
    pub async fn find(&self, id: Uuid) -> Result<Option<ApiToken>, Unreadable> {
        self.store.find_token(id).await.map_err(|e| {
            if let Some(since_last) = self.unreadable.tick() {
                tracing::warn!(error = %inquest_core::error_chain(&e), failures = since_last, "cannot read API tokens");
            }
            Unreadable
        })
    }
}

/// Bounds the failing calls that wait for a fresh read: per peer address
/// and in all.
#[derive(Default)]
pub struct FailureGate {
    /// A std mutex: counts, never held across an await.
    waiting: Mutex<(usize, HashMap<IpAddr, usize>)>,
}

/// A place at the gate, given back when dropped.
pub struct Waiting<'a> {
    gate: &'a FailureGate,
    peer: Option<IpAddr>,
}

impl FailureGate {
    /// A place for one more failing call from `peer`, or `None` when that
    /// peer or everyone already has as many waiting as allowed.
    pub fn enter(&self, peer: Option<IpAddr>) -> Option<Waiting<'_>> {
        let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
        let (all, per_peer) = &mut *waiting;
        if *all >= FAILURES_IN_ALL {
            return None;
        }
        if let Some(ip) = peer {
            let mine = per_peer.entry(ip).or_default();
            if *mine >= FAILURES_PER_PEER {
                return None;
            }
            *mine += 1;
        }
        *all += 1;
        Some(Waiting { gate: self, peer })
    }

    #[cfg(test)]
    fn peers(&self) -> usize {
        self.waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .1
            .len()
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut waiting = self
            .gate
            .waiting
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let (all, per_peer) = &mut *waiting;
        *all -= 1;
        if let Some(ip) = self.peer
            && let Some(mine) = per_peer.get_mut(&ip)
        {
            *mine -= 1;
            if *mine == 0 {
                per_peer.remove(&ip);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gate_bounds_each_peer_and_everyone_and_forgets_a_peer_with_none_waiting() {
        let gate = FailureGate::default();
        let one: IpAddr = "192.0.2.1".parse().unwrap();
        let mine: Vec<_> = (0..FAILURES_PER_PEER)
            .map(|_| gate.enter(Some(one)).unwrap())
            .collect();
        assert!(gate.enter(Some(one)).is_none(), "the peer's share is full");
        let other: IpAddr = "192.0.2.2".parse().unwrap();
        let theirs = gate.enter(Some(other)).expect("another peer still gets in");
        drop(theirs);
        drop(mine);
        assert_eq!(gate.peers(), 0, "no entry left for peers with none waiting");
        let mut all = Vec::new();
        for i in 0..FAILURES_IN_ALL {
            let ip = IpAddr::from([10, 0, (i / 256) as u8, (i % 256) as u8]);
            all.push(gate.enter(Some(ip)).unwrap());
        }
        assert!(gate.enter(None).is_none(), "the global bound holds");
        all.pop();
        assert!(gate.enter(None).is_some());
    }
}
