//! The one backoff every retry loop uses: a delay that doubles from a first
//! step up to a cap, optionally jittered. Pure: the caller sleeps (on
//! tokio's clock, so tests run it on paused time).

use std::{
    hash::{BuildHasher, RandomState},
    time::Duration,
};

/// Exponential backoff: `first`, `2·first`, `4·first`, … capped at `max`.
#[derive(Debug, Clone)]
pub struct Backoff {
    first: Duration,
    max: Duration,
    next: Duration,
    jitter: bool,
}

impl Backoff {
    /// Delays from `first` doubling to `max`, without jitter. (A zero first
    /// step never grows.)
    pub fn new(first: Duration, max: Duration) -> Self {
        let max = max.max(first);
        Self {
            first,
            max,
            next: first,
            jitter: false,
        }
    }

    /// Each delay is drawn between half its step and all of it, so callers
    /// that failed together (replicas that lost the database at once, the
    /// sessions of one provider outage) do not retry in lockstep.
    pub fn jittered(mut self) -> Self {
        self.jitter = true;
        self
    }

    /// The delay before the next attempt; the step after it doubles.
    pub fn next_delay(&mut self) -> Duration {
        let step = self.next;
        self.next = step.saturating_mul(2).min(self.max);
        self.jitter(step)
    }

    /// The delay before retry number `retry` (from 0), without keeping
    /// state: for callers that count their own attempts.
    pub fn delay(&self, retry: u32) -> Duration {
        let step = self
            .first
            .saturating_mul(1u32 << retry.min(20))
            .min(self.max);
        self.jitter(step)
    }

    /// Something got through: the next failure starts from the first step.
    pub fn reset(&mut self) {
        self.next = self.first;
    }

    fn jitter(&self, step: Duration) -> Duration {
        if self.jitter {
            step.mul_f64(0.5 + 0.5 * unit_random())
        } else {
            step
        }
    }
}

/// A number in [0, 1) that differs from call to call. Only spreads retries
/// apart: `RandomState` is seeded randomly per thread and changes its keys
/// on every `new`, which is plenty for jitter.
fn unit_random() -> f64 {
    let bits = RandomState::new().hash_one(0u8) >> 11;
    bits as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn doubles_to_the_cap_and_starts_over_after_a_reset() {
        let ms = Duration::from_millis;
        let mut b = Backoff::new(ms(50), ms(300));
        let seen: Vec<_> = (0..5).map(|_| b.next_delay()).collect();
        assert_eq!(seen, [ms(50), ms(100), ms(200), ms(300), ms(300)]);
        b.reset();
        assert_eq!(b.next_delay(), ms(50));
        assert_eq!(b.delay(0), ms(50));
        assert_eq!(b.delay(2), ms(200));
        assert_eq!(b.delay(u32::MAX), ms(300));
    }

    proptest! {
        #[test]
        fn a_jittered_delay_lies_between_half_its_step_and_the_step(
            first in 1u64..10_000, max in 1u64..100_000, retry in 0u32..64,
        ) {
            let plain = Backoff::new(Duration::from_millis(first), Duration::from_millis(max));
            let step = plain.delay(retry);
            let jittered = plain.clone().jittered().delay(retry);
            prop_assert!(jittered <= step);
            prop_assert!(jittered >= step / 2);
        }
    }
}
