//! The hasher of the rebuild's call-id intern map: a keyed multiply-fold
//! hash, several times cheaper than std's SipHash-1-3 on short ids (which
//! was ~15% of a 100k-turn rebuild).
//!
//! Hash flooding. Call ids are chosen by the provider, and some
//! OpenAI-compatible servers pass through what the model wrote, so an id
//! is attacker-influenced text (a prompt injection in a tool result can ask
//! for one). A plain FxHash would be a risk: its bucket index depends only
//! on the low bits of the last word, so ids crafted offline all land in
//! one bucket and the map degrades to a list scan per call, quadratic in
//! the session's calls. What bounds that here:
//!
//! - The state is keyed by a seed drawn from std's `RandomState` (random
//!   per process, different per map), never stored or sent anywhere, so
//!   colliding ids cannot be computed offline; each 8-byte word goes
//!   through a folded 64×64→128-bit multiply (the core of foldhash and
//!   wyhash), whose output's low bits depend on every input bit, so there
//!   is no seed-independent way to fix the bucket index either.
//! - The map lives for one rebuild of one session and holds at most one
//!   entry per stored call of that session (ids are session-unique since
//!   `session_unique_call_ids`; older sessions may repeat some), so an
//!   attacker gets no feedback from one rebuild to the next.
//!
//! It is not a cryptographic hash and does not need to be: what a
//! collision costs is time in one rebuild, never a wrong answer, because
//! the map compares keys for equality (equal ids hash equal under one
//! seed; unequal ids that collide are still told apart).

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};

/// An odd 64-bit constant with well-spread bits (from the digits of pi,
/// as foldhash and wyhash use).
const MULTIPLIER: u64 = 0x243f_6a88_85a3_08d3;
const FINISH: u64 = 0x1319_8a2e_0370_7344;

/// The 128-bit product of `a` and `b`, its halves xored: every output bit
/// depends on every input bit.
#[inline]
fn fold_mul(a: u64, b: u64) -> u64 {
    let full = u128::from(a) * u128::from(b);
    (full as u64) ^ ((full >> 64) as u64)
}

/// Builds [`IdHasher`]s sharing one random seed (one map's worth).
#[derive(Clone, Copy, Debug)]
pub(crate) struct IdHashBuilder {
    seed: u64,
}

impl IdHashBuilder {
    /// A builder with a fresh random seed.
    pub(crate) fn new() -> Self {
        Self::with_seed(RandomState::new().hash_one(0x1d_u64))
    }

    /// A builder with a given seed (tests).
    pub(crate) fn with_seed(seed: u64) -> Self {
        IdHashBuilder { seed }
    }
}

impl Default for IdHashBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl BuildHasher for IdHashBuilder {
    type Hasher = IdHasher;

    #[inline]
    fn build_hasher(&self) -> IdHasher {
        IdHasher {
            state: self.seed,
            seed: self.seed.rotate_left(32),
        }
    }
}

/// See the module docs. The state starts as the seed, so every round
/// after the first depends on it; the finish mixes the seed in again.
#[derive(Clone, Copy, Debug)]
pub(crate) struct IdHasher {
    state: u64,
    seed: u64,
}

impl IdHasher {
    #[inline]
    fn mix(&mut self, word: u64) {
        self.state = fold_mul(self.state ^ word, MULTIPLIER);
    }
}

impl Hasher for IdHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.mix(u64::from_le_bytes(word));
        }
        // The tail (0 to 7 bytes) with the length in its top byte, so
        // "ab" and "ab\0" differ; always mixed, so "" counts too.
        let rest = chunks.remainder();
        let mut word = [0u8; 8];
        if let Some(dst) = word.get_mut(..rest.len()) {
            dst.copy_from_slice(rest);
        }
        word[7] = bytes.len() as u8;
        self.mix(u64::from_le_bytes(word));
    }

    #[inline]
    fn write_u8(&mut self, byte: u8) {
        // `str`'s `Hash` ends with `write_u8(0xff)`; one cheap round.
        self.state = self.state.rotate_left(8) ^ u64::from(byte);
    }

    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.mix(u64::from(n));
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.mix(n);
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.mix(n as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        fold_mul(self.state ^ self.seed, FINISH)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{HashMap, HashSet};

    fn hash(builder: &IdHashBuilder, s: &str) -> u64 {
        builder.hash_one(s)
    }

    #[test]
    fn near_equal_ids_hash_apart() {
        let b = IdHashBuilder::with_seed(7);
        let ids = [
            "",
            "\0",
            "a",
            "ab",
            "ab\0",
            "ab\0\0",
            "abcdefgh",
            "abcdefgh\0",
            "abcdefghi",
            "c1",
            "c2",
            "1c",
            "é",
            "e\u{301}",
        ];
        let hashes: HashSet<u64> = ids.iter().map(|s| hash(&b, s)).collect();
        assert_eq!(hashes.len(), ids.len());
        // Another seed, other hashes.
        let other = IdHashBuilder::with_seed(8);
        assert_ne!(hash(&b, "call_0"), hash(&other, "call_0"));
    }

    #[test]
    fn a_cow_and_its_str_hash_alike() {
        let b = IdHashBuilder::new();
        let owned: std::borrow::Cow<'_, str> = std::borrow::Cow::Owned("toolu_01".to_owned());
        assert_eq!(b.hash_one(&owned), hash(&b, "toolu_01"));
    }

    /// Sequential ids (what providers number calls with) spread over the
    /// low bits a table indexes by, and over the top seven (its tags).
    #[test]
    fn sequential_ids_spread_over_buckets() {
        let b = IdHashBuilder::with_seed(0x5eed);
        let n = 1 << 16;
        let mut low: HashMap<u64, u32> = HashMap::new();
        let mut top: HashMap<u64, u32> = HashMap::new();
        for i in 0..n {
            let h = hash(&b, &format!("call_{i}"));
            *low.entry(h & ((1 << 14) - 1)).or_default() += 1;
            *top.entry(h >> 57).or_default() += 1;
        }
        // 4 per bucket on average; a uniform hash stays far below 32.
        assert!(low.values().all(|&c| c < 32), "{:?}", low.values().max());
        assert_eq!(top.len(), 128);
        assert!(top.values().all(|&c| c > 256 && c < 1024));
    }

    proptest! {
        /// Equality semantics: equal ids hash equal under one seed, and a
        /// map keyed with it finds exactly the ids put in.
        #[test]
        fn map_semantics_match_std(
            ids in proptest::collection::vec("(c[0-9]{0,3}|[ -~]{0,20}|\\PC{0,12}|\0{0,9})", 0..64),
            probes in proptest::collection::vec("(c[0-9]{0,3}|[ -~]{0,20})", 0..32),
            seed: u64,
        ) {
            let b = IdHashBuilder::with_seed(seed);
            let mut ours: HashMap<&str, usize, IdHashBuilder> = HashMap::with_hasher(b);
            let mut std_map: HashMap<&str, usize> = HashMap::new();
            for (i, id) in ids.iter().enumerate() {
                prop_assert_eq!(hash(&b, id), hash(&b, &id.clone()));
                ours.entry(id).or_insert(i);
                std_map.entry(id).or_insert(i);
            }
            prop_assert_eq!(ours.len(), std_map.len());
            for id in ids.iter().chain(&probes) {
                prop_assert_eq!(ours.get(id.as_str()), std_map.get(id.as_str()));
            }
        }
    }
}
