//! The "finished" latch: a bounded FIFO set of sessions whose run has ended.

use std::collections::{HashSet, VecDeque};

use inquest_core::SessionId;

/// Remembers the last `capacity` closed sessions, oldest evicted first.
///
/// Plain data; the broadcaster guards it with its state mutex.
#[derive(Debug)]
pub(crate) struct Latch {
    capacity: usize,
    /// Latched sessions in the order they were latched (front = oldest).
    order: VecDeque<SessionId>,
    /// The same sessions, for O(1) membership tests.
    members: HashSet<SessionId>,
}

impl Latch {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            capacity,
            order: VecDeque::with_capacity(capacity),
            members: HashSet::with_capacity(capacity),
        }
    }

    /// Latches `session`. Latching an already latched session keeps its
    /// place in the queue. When full, the oldest latch is evicted.
    pub(crate) fn insert(&mut self, session: SessionId) {
        if self.capacity == 0 || !self.members.insert(session) {
            return;
        }
        self.order.push_back(session);
        while self.order.len() > self.capacity {
            if let Some(oldest) = self.order.pop_front() {
                self.members.remove(&oldest);
            }
        }
    }

    /// Lifts the latch on `session`, if any.
    pub(crate) fn remove(&mut self, session: SessionId) {
        if self.members.remove(&session) {
            // At most `capacity` entries, so a linear scan is cheap.
            self.order.retain(|s| *s != session);
        }
    }

    pub(crate) fn contains(&self, session: SessionId) -> bool {
        self.members.contains(&session)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_oldest_first_and_ignores_duplicates() {
        let ids: Vec<SessionId> = (0..4).map(|_| SessionId::new()).collect();
        let mut latch = Latch::new(3);
        latch.insert(ids[0]);
        latch.insert(ids[1]);
        latch.insert(ids[0]); // no-op: keeps ids[0] oldest
        latch.insert(ids[2]);
        latch.insert(ids[3]); // evicts ids[0]
        assert!(!latch.contains(ids[0]));
        assert!(ids[1..].iter().all(|s| latch.contains(*s)));

        latch.remove(ids[2]);
        assert!(!latch.contains(ids[2]));
        latch.insert(ids[0]); // room again: nothing evicted
        assert!(latch.contains(ids[1]) && latch.contains(ids[3]) && latch.contains(ids[0]));
    }

    #[test]
    fn zero_capacity_latches_nothing() {
        let mut latch = Latch::new(0);
        let s = SessionId::new();
        latch.insert(s);
        assert!(!latch.contains(s));
    }
}
