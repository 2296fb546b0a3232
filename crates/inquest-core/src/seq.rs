//! Turn sequence numbers and watch cursors.
//!
//! A [`Seq`] is only ever handed out by the store (which assigns it
//! atomically) or read back from it; nothing else can make one up. An
//! [`AfterSeq`] is what a client sends: "turns after this one", where 0 means
//! from the start.

use std::fmt;

/// The per-session number of a committed turn: starts at 1, no gaps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Seq(u64);

impl Seq {
    /// The seq of a session's first turn.
    pub const FIRST: Seq = Seq(1);

    /// Reads a seq back from storage, where it is a `bigint`. Returns `None`
    /// for values no committed turn can have (zero or negative).
    pub fn from_stored(value: i64) -> Option<Seq> {
        u64::try_from(value).ok().filter(|v| *v >= 1).map(Seq)
    }

    /// The seq that follows this one.
    pub fn next(self) -> Seq {
        Seq(self.0 + 1)
    }

    pub fn get(self) -> u64 {
        self.0
    }

    /// The value as stored and sent on the wire.
    pub fn as_i64(self) -> i64 {
        // A seq comes from a bigint column, so it always fits.
        i64::try_from(self.0).unwrap_or(i64::MAX)
    }
}

impl fmt::Display for Seq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CursorError {
    #[error("after_seq must not be negative (got {0})")]
    Negative(i64),
}

/// A read cursor: return turns with seq strictly greater than this.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct AfterSeq(u64);

impl AfterSeq {
    /// From the first turn on.
    pub const START: AfterSeq = AfterSeq(0);

    pub fn parse(value: i64) -> Result<Self, CursorError> {
        u64::try_from(value)
            .map(AfterSeq)
            .map_err(|_| CursorError::Negative(value))
    }

    /// The cursor positioned just after `seq`.
    pub fn after(seq: Seq) -> Self {
        AfterSeq(seq.0)
    }

    /// Whether a turn with this seq lies after the cursor.
    pub fn admits(self, seq: Seq) -> bool {
        seq.0 > self.0
    }

    pub fn get(self) -> u64 {
        self.0
    }

    pub fn as_i64(self) -> i64 {
        i64::try_from(self.0).unwrap_or(i64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_seq_must_be_positive() {
        assert_eq!(Seq::from_stored(0), None);
        assert_eq!(Seq::from_stored(-3), None);
        assert_eq!(Seq::from_stored(1), Some(Seq::FIRST));
    }

    #[test]
    fn cursor_rejects_negative_and_admits_strictly_after() {
        assert_eq!(AfterSeq::parse(-1), Err(CursorError::Negative(-1)));
        let c = AfterSeq::parse(2).unwrap();
        assert!(!c.admits(Seq::from_stored(2).unwrap()));
        assert!(c.admits(Seq::from_stored(3).unwrap()));
        assert!(AfterSeq::START.admits(Seq::FIRST));
    }
}
