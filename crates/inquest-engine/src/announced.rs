//! The seqs this replica has seen announced, per session: its own
//! committed turns and those every other replica announced on the
//! cross-replica feed (every replica hears every turn, watched or not).
//!
//! An asynchronous standby promoted without the last commits leaves a
//! session's head below seqs that were committed and sent to watchers. The
//! burst that wrote them finds out at its next write, but it may be gone:
//! its replica died with the primary, or its lease ran out during the
//! failover and another replica claimed the orphan. The claimer learns the
//! lost seqs here, so they get tombstones instead of new content
//! (`resume::prepare`). What the database no longer holds, this memory
//! still does, for as long as the replica runs.
//!
//! Bounded: at most [`SESSIONS`] sessions (the least recently announced
//! are forgotten first) and, per session, what the latest
//! [`DESCRIBED_PER_SESSION`] turns were. A failover loses the last commits,
//! the ones replication had not shipped yet, so the latest are what count.

use std::collections::{BTreeMap, HashMap};

use inquest_core::{Seq, SessionId};

/// Sessions remembered at most. Each costs a few hundred bytes.
pub const SESSIONS: usize = 20_000;

/// Turns of a session whose description is kept, the latest.
pub const DESCRIBED_PER_SESSION: usize = 32;

/// What one session's announcements said.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Heard {
    /// The highest seq announced.
    pub head: i64,
    /// What the latest turns were, by seq (for their tombstones).
    pub described: BTreeMap<i64, String>,
}

/// See the module documentation.
#[derive(Debug, Default)]
pub struct Announced {
    sessions: HashMap<SessionId, Entry>,
    /// Bumped by every record; an entry's `touched` orders eviction.
    clock: u64,
}

#[derive(Debug)]
struct Entry {
    heard: Heard,
    touched: u64,
}

impl Announced {
    /// Records that the turn at `seq` of `session` was announced;
    /// `described` is what it was, when the announcement carried it.
    pub fn record(&mut self, session: SessionId, seq: Seq, described: Option<String>) {
        self.clock += 1;
        let touched = self.clock;
        let entry = self.sessions.entry(session).or_insert_with(|| Entry {
            heard: Heard::default(),
            touched,
        });
        entry.touched = touched;
        let seq = seq.as_i64();
        entry.heard.head = entry.heard.head.max(seq);
        if let Some(described) = described {
            entry.heard.described.insert(seq, described);
            while entry.heard.described.len() > DESCRIBED_PER_SESSION {
                entry.heard.described.pop_first();
            }
        }
        if self.sessions.len() > SESSIONS {
            self.evict();
        }
    }

    /// What was announced for `session`, if this replica remembers it.
    pub fn heard(&self, session: SessionId) -> Option<Heard> {
        self.sessions.get(&session).map(|e| e.heard.clone())
    }

    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// Drops the least recently announced tenth, so eviction costs one
    /// pass per [`SESSIONS`]/10 new sessions rather than one per record.
    fn evict(&mut self) {
        let keep = SESSIONS - SESSIONS / 10;
        let mut touched: Vec<u64> = self.sessions.values().map(|e| e.touched).collect();
        let drop = touched.len().saturating_sub(keep);
        if drop == 0 {
            return;
        }
        let (_, cutoff, _) = touched.select_nth_unstable(drop - 1);
        let cutoff = *cutoff;
        self.sessions.retain(|_, e| e.touched > cutoff);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seq(n: i64) -> Seq {
        Seq::from_stored(n).unwrap()
    }

    #[test]
    fn the_head_is_the_highest_seq_heard_and_descriptions_keep_the_latest() {
        let mut a = Announced::default();
        let s = SessionId::new();
        assert_eq!(a.heard(s), None);
        for n in 1..=40 {
            a.record(s, seq(n), Some(format!("turn {n}")));
        }
        // A late, out-of-order announcement does not move the head back.
        a.record(s, seq(3), None);
        let heard = a.heard(s).unwrap();
        assert_eq!(heard.head, 40);
        assert_eq!(heard.described.len(), DESCRIBED_PER_SESSION);
        assert_eq!(heard.described.first_key_value().unwrap().0, &9);
        assert_eq!(heard.described[&40], "turn 40");
    }

    #[test]
    fn the_least_recently_announced_sessions_are_forgotten_first() {
        let mut a = Announced::default();
        let first = SessionId::new();
        let kept = SessionId::new();
        a.record(first, seq(1), None);
        a.record(kept, seq(1), None);
        for _ in 0..SESSIONS {
            a.record(SessionId::new(), seq(1), None);
            // `kept` stays recent.
            a.record(kept, seq(2), None);
        }
        assert!(a.len() <= SESSIONS);
        assert_eq!(a.heard(first), None);
        assert_eq!(a.heard(kept).unwrap().head, 2);
    }
}
