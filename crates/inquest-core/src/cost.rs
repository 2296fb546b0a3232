//! What model calls cost: a provider's configured [`Price`], the [`Cost`]
//! of one call, and sums over many ([`CostTotal`], [`UsageTotals`]).
//!
//! Money is counted in whole nano-dollars (10⁻⁹ USD) in a `u64`: sums are
//! exact and order-independent (no float drift between a turn-by-turn sum
//! and a stored counter), the type stays `Eq`, and the range (18 billion
//! USD) is no limit. A cost is only ever known or unknown: a call answered
//! by a provider with no configured price has no cost (`None`), and a sum
//! over calls one of which is unknown says so ([`CostTotal::complete`])
//! instead of passing the known part off as the whole.

use serde::{Deserialize, Serialize};

use crate::TokenUsage;

/// Nano-dollars in one dollar.
const NANOS_PER_USD: f64 = 1e9;
/// The highest price per million tokens accepted: catches a price written
/// per token or per thousand by mistake, limits nobody real.
pub const MAX_PRICE_PER_MTOK: f64 = 10_000.0;

/// A model's price in USD per million tokens (`price` on a
/// `[[providers]]` entry).
///
/// Cache reads and writes are parts of the input: a read is charged
/// `cached_input_per_mtok`, a write `cache_write_per_mtok`, every other
/// input token `input_per_mtok`. A cache price left out is charged at
/// `input_per_mtok`: the bill is never underestimated by a price nobody
/// wrote down.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
    /// Input tokens read from the prompt cache (Anthropic cache reads,
    /// OpenAI cached tokens).
    #[serde(default)]
    pub cached_input_per_mtok: Option<f64>,
    /// Input tokens written to the prompt cache (Anthropic only).
    #[serde(default)]
    pub cache_write_per_mtok: Option<f64>,
}

impl Price {
    /// Every rate finite, ≥ 0 and at most [`MAX_PRICE_PER_MTOK`].
    pub fn validate(&self) -> Result<(), String> {
        let rates = [
            ("input_per_mtok", Some(self.input_per_mtok)),
            ("output_per_mtok", Some(self.output_per_mtok)),
            ("cached_input_per_mtok", self.cached_input_per_mtok),
            ("cache_write_per_mtok", self.cache_write_per_mtok),
        ];
        for (name, rate) in rates {
            if let Some(rate) = rate
                && !(rate.is_finite() && (0.0..=MAX_PRICE_PER_MTOK).contains(&rate))
            {
                return Err(format!(
                    "price.{name} = {rate} must be between 0 and {MAX_PRICE_PER_MTOK} USD per \
                     million tokens"
                ));
            }
        }
        Ok(())
    }

    /// What `usage` costs at this price. Cache counts larger than the
    /// input (a provider's inconsistency) are clamped to it.
    pub fn cost(&self, usage: &TokenUsage) -> Cost {
        let read = usage.cache_read_input_tokens.min(usage.input_tokens);
        let write = usage
            .cache_creation_input_tokens
            .min(usage.input_tokens - read);
        let plain = usage.input_tokens - read - write;
        let per_token = |per_mtok: f64| per_mtok * NANOS_PER_USD / 1e6;
        let nanos = plain as f64 * per_token(self.input_per_mtok)
            + read as f64 * per_token(self.cached_input_per_mtok.unwrap_or(self.input_per_mtok))
            + write as f64 * per_token(self.cache_write_per_mtok.unwrap_or(self.input_per_mtok))
            + usage.output_tokens as f64 * per_token(self.output_per_mtok);
        // Finite and ≥ 0 by validation; `as` saturates anything else.
        Cost::from_nanos(nanos.round() as u64)
    }
}

/// A known amount of money, in nano-dollars.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Hash, Serialize, Deserialize,
)]
pub struct Cost {
    nano_usd: u64,
}

impl Cost {
    pub const ZERO: Cost = Cost { nano_usd: 0 };

    pub fn from_nanos(nano_usd: u64) -> Self {
        Self { nano_usd }
    }

    pub fn nanos(self) -> u64 {
        self.nano_usd
    }

    /// In dollars, for display and the API.
    pub fn usd(self) -> f64 {
        self.nano_usd as f64 / NANOS_PER_USD
    }

    pub fn saturating_add(self, other: Cost) -> Cost {
        Cost::from_nanos(self.nano_usd.saturating_add(other.nano_usd))
    }
}

/// A sum of costs some of which may be unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CostTotal {
    /// The sum of the known costs.
    pub known: Cost,
    /// How many of the summed calls had no known cost.
    pub unknown_calls: u64,
}

impl CostTotal {
    pub fn add(&mut self, cost: Option<Cost>) {
        match cost {
            Some(cost) => self.known = self.known.saturating_add(cost),
            None => self.unknown_calls = self.unknown_calls.saturating_add(1),
        }
    }

    /// Whether every summed call had a known cost (true for no calls).
    pub fn complete(&self) -> bool {
        self.unknown_calls == 0
    }
}

/// Tokens by kind and their cost, summed over model calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct UsageTotals {
    pub calls: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_input_tokens: u64,
    pub cache_creation_input_tokens: u64,
    pub cost: CostTotal,
}

impl UsageTotals {
    /// Adds one model call.
    pub fn add(&mut self, usage: &TokenUsage) {
        self.calls = self.calls.saturating_add(1);
        self.input_tokens = self.input_tokens.saturating_add(usage.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(usage.output_tokens);
        self.cache_read_input_tokens = self
            .cache_read_input_tokens
            .saturating_add(usage.cache_read_input_tokens);
        self.cache_creation_input_tokens = self
            .cache_creation_input_tokens
            .saturating_add(usage.cache_creation_input_tokens);
        self.cost.add(usage.cost);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: u64, output: u64, read: u64, write: u64) -> TokenUsage {
        TokenUsage {
            input_tokens: input,
            output_tokens: output,
            cache_read_input_tokens: read,
            cache_creation_input_tokens: write,
            cost: None,
        }
    }

    const SONNET: Price = Price {
        input_per_mtok: 3.0,
        output_per_mtok: 15.0,
        cached_input_per_mtok: Some(0.3),
        cache_write_per_mtok: Some(3.75),
    };

    #[test]
    fn charges_each_kind_at_its_rate() {
        // 1M plain input = $3, 1M output = $15.
        assert_eq!(SONNET.cost(&usage(1_000_000, 0, 0, 0)).usd(), 3.0);
        assert_eq!(SONNET.cost(&usage(0, 1_000_000, 0, 0)).usd(), 15.0);
        // 1000 input of which 600 read and 300 written, 100 plain; 50 out.
        let c = SONNET.cost(&usage(1000, 50, 600, 300));
        let expected = 100.0 * 3.0 + 600.0 * 0.3 + 300.0 * 3.75 + 50.0 * 15.0;
        assert_eq!(c.nanos(), (expected * 1000.0_f64).round() as u64);
    }

    #[test]
    fn a_missing_cache_price_is_the_input_price_and_counts_are_clamped() {
        let plain = Price {
            cached_input_per_mtok: None,
            cache_write_per_mtok: None,
            ..SONNET
        };
        assert_eq!(
            plain.cost(&usage(1000, 0, 600, 300)),
            plain.cost(&usage(1000, 0, 0, 0))
        );
        // More cached than input: never more than the input is charged.
        assert_eq!(
            SONNET.cost(&usage(10, 0, 50, 50)),
            SONNET.cost(&usage(10, 0, 10, 0))
        );
    }

    #[test]
    fn unknown_is_not_zero() {
        let mut total = CostTotal::default();
        assert!(total.complete());
        total.add(Some(Cost::from_nanos(5)));
        total.add(None);
        assert_eq!(total.known, Cost::from_nanos(5));
        assert!(!total.complete());
        let mut sums = UsageTotals::default();
        sums.add(&usage(10, 2, 3, 4));
        sums.add(&TokenUsage {
            cost: Some(Cost::from_nanos(7)),
            ..usage(1, 1, 1, 0)
        });
        assert_eq!(
            (sums.calls, sums.input_tokens, sums.cache_read_input_tokens),
            (2, 11, 4)
        );
        assert_eq!(sums.cost.unknown_calls, 1);
        assert_eq!(sums.cost.known.nanos(), 7);
    }

    #[test]
    fn validation_refuses_negative_huge_and_nan_rates() {
        assert!(SONNET.validate().is_ok());
        for bad in [-1.0, f64::NAN, f64::INFINITY, 1e6] {
            let p = Price {
                output_per_mtok: bad,
                ..SONNET
            };
            assert!(p.validate().unwrap_err().contains("output_per_mtok"));
            let p = Price {
                cache_write_per_mtok: Some(bad),
                ..SONNET
            };
            assert!(p.validate().is_err());
        }
    }
}
