//! The ordered failover chain of providers.
//!
//! A call goes to the provider at the caller's [`ChainCursor`]. A
//! retryable error ([`ProviderError::is_retryable`]) is retried on the same
//! provider up to its `max_retries`, after an exponential backoff with
//! jitter (the delay doubles each retry from `backoff`, capped at
//! [`MAX_RETRY_DELAY`], and is drawn from its upper half; a `retry-after`
//! the provider sent is waited at least, up to [`MAX_RETRY_DELAY`]). When a
//! provider gives up (retries exhausted, or a fatal error that retrying
//! cannot fix), the call fails over to the next provider and the cursor
//! moves with it: the failed provider is skipped by every later call that
//! uses the same cursor. The caller owns the cursor (the loop keeps it in
//! its burst state) and calls [`ChainCursor::reset`] when a burst begins,
//! so each burst, and each resume, asks the first provider again.
//!
//! A provider's "too long" answer ([`ProviderError::ContextTooLong`]) is
//! neither retried nor failed over: the next provider would get the same
//! transcript, and the loop can fix it (compaction). The call ends at once
//! with that failure and the cursor stays where it is
//! ([`ChainError::context_too_long`]).
//!
//! Each entry carries its [`Budget`] (context window and output reserve),
//! which the loop's compaction reads.
//!
//! The request timeout is each HTTP provider's own (its client's timeout
//! covers connect, send and the whole body).

use std::time::Duration;

use inquest_core::{Backoff, Price};
use tracing::Instrument;

use crate::{
    AnthropicProvider, ApiKey, Completion, CompletionRequest, ConfigError, OpenAiProvider,
    Provider, ProviderConfig, ProviderError, ProviderKind, ScriptProvider, anthropic, openai,
};

/// The longest wait before a retry, whatever backoff or `retry-after` ask.
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(30);

/// How one provider is retried before the chain fails over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt, for retryable errors only.
    pub max_retries: u32,
    /// The delay before the first retry; doubled for each next one.
    pub backoff: Duration,
}

/// What one provider's requests may hold, in tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub context_window: u64,
    pub output_reserve: u64,
}

impl Default for Budget {
    fn default() -> Self {
        Self {
            context_window: crate::config::DEFAULT_CONTEXT_WINDOW,
            output_reserve: crate::config::DEFAULT_OUTPUT_RESERVE,
        }
    }
}

struct Entry {
    name: String,
    provider: Box<dyn Provider>,
    policy: RetryPolicy,
    /// The configured model, for the `provider.request` span; empty when
    /// the provider has none (a script, or one pushed by an embedder).
    model: String,
    budget: Budget,
    /// The model's price (`price` on its `[[providers]]` entry); `None`:
    /// its calls' cost is unknown.
    price: Option<Price>,
}

/// Providers in failover order.
#[derive(Default)]
pub struct ProviderChain {
    entries: Vec<Entry>,
}

/// Which provider the next call starts at. Held by the caller's burst
/// state; see the module docs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChainCursor {
    position: usize,
}

impl ChainCursor {
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts again from the first provider (a new burst).
    pub fn reset(&mut self) {
        self.position = 0;
    }

    /// Index of the provider the next call starts at.
    pub fn position(&self) -> usize {
        self.position
    }
}

/// A successful call: the completion and who produced it.
#[derive(Debug, Clone, PartialEq)]
pub struct Answered {
    pub completion: Completion,
    /// Index in the chain of the provider that answered.
    pub provider_index: usize,
    /// Its name (the config's `name`, or `kind:model`).
    pub provider: String,
    /// Attempts made by this call, over all providers, the answer included.
    pub attempts: u32,
}

/// One provider's last error when it gave up.
#[derive(Debug, Clone)]
pub struct ProviderFailure {
    pub provider_index: usize,
    pub provider: String,
    pub attempts: u32,
    pub error: ProviderError,
}

/// Every provider from the cursor on gave up.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}", describe(.failures))]
pub struct ChainError {
    /// One per provider tried, in order.
    pub failures: Vec<ProviderFailure>,
}

impl ChainError {
    /// When the call ended because a provider said the request is too
    /// long: that provider's index, and the limit and the request's size
    /// it named, if any.
    pub fn context_too_long(&self) -> Option<(usize, Option<u64>, Option<u64>)> {
        match self.failures.last() {
            Some(ProviderFailure {
                provider_index,
                error: ProviderError::ContextTooLong { limit, requested },
                ..
            }) => Some((*provider_index, *limit, *requested)),
            _ => None,
        }
    }

    /// The error of the last provider tried.
    pub fn last_error(&self) -> Option<&ProviderError> {
        self.failures.last().map(|f| &f.error)
    }
}

fn describe(failures: &[ProviderFailure]) -> String {
    if failures.is_empty() {
        return "no provider to call".to_owned();
    }
    let parts: Vec<String> = failures
        .iter()
        .map(|f| {
            format!(
                "{} gave up after {} attempt(s): {}",
                f.provider, f.attempts, f.error
            )
        })
        .collect();
    format!("every provider failed: {}", parts.join("; "))
}

impl ProviderChain {
    /// An empty chain; add providers with [`ProviderChain::push`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a provider (tests and embedders with their own providers),
    /// budgeted at the default window ([`Budget::default`]).
    pub fn push(
        &mut self,
        name: impl Into<String>,
        provider: Box<dyn Provider>,
        policy: RetryPolicy,
    ) {
        self.push_with(name, provider, policy, Budget::default(), None);
    }

    /// Appends a provider with its budget (tokens).
    pub fn push_with_budget(
        &mut self,
        name: impl Into<String>,
        provider: Box<dyn Provider>,
        policy: RetryPolicy,
        budget: Budget,
    ) {
        self.push_with(name, provider, policy, budget, None);
    }

    /// Appends a provider whose calls cost `price` (`None`: unknown).
    pub fn push_priced(
        &mut self,
        name: impl Into<String>,
        provider: Box<dyn Provider>,
        policy: RetryPolicy,
        price: Option<Price>,
    ) {
        self.push_with(name, provider, policy, Budget::default(), price);
    }

    /// Appends a provider with its budget and price.
    pub fn push_with(
        &mut self,
        name: impl Into<String>,
        provider: Box<dyn Provider>,
        policy: RetryPolicy,
        budget: Budget,
        price: Option<Price>,
    ) {
        self.entries.push(Entry {
            name: name.into(),
            provider,
            policy,
            model: String::new(),
            budget,
            price,
        });
    }

    /// The budget of the provider at `index` (the default past the end).
    pub fn budget(&self, index: usize) -> Budget {
        self.entries
            .get(index)
            .map(|e| e.budget)
            .unwrap_or_default()
    }

    /// Builds the chain from `[[providers]]`, reading API keys from the
    /// process environment; HTTP providers read no response body past
    /// `max_response_bytes` (`limits.max_provider_response_bytes`).
    pub fn from_config(
        configs: &[ProviderConfig],
        max_response_bytes: usize,
    ) -> Result<Self, ConfigError> {
        Self::from_config_with(configs, max_response_bytes, |name| std::env::var(name).ok())
    }

    /// Like [`ProviderChain::from_config`] with the default body cap
    /// ([`crate::DEFAULT_MAX_RESPONSE_BYTES`]) and `env` looking up variables.
    pub fn from_config_with_env(
        configs: &[ProviderConfig],
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        Self::from_config_with(configs, crate::DEFAULT_MAX_RESPONSE_BYTES, env)
    }

    /// Like [`ProviderChain::from_config`], with `env` looking up variables.
    pub fn from_config_with(
        configs: &[ProviderConfig],
        max_response_bytes: usize,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        if configs.is_empty() {
            return Err(ConfigError::NoProviders);
        }
        let mut chain = Self::new();
        for (index, config) in configs.iter().enumerate() {
            let name = config.display_name();
            config.validate().map_err(|reason| ConfigError::Invalid {
                index,
                name: name.clone(),
                reason,
            })?;
            // A configured variable must be set: a missing key is an
            // operator error worth failing startup for.
            let key = || -> Result<Option<ApiKey>, ConfigError> {
                let Some(var) = &config.api_key_env else {
                    return Ok(None);
                };
                match env(var).filter(|v| !v.trim().is_empty()) {
                    Some(value) => {
                        inquest_redact::register(value.trim());
                        Ok(Some(ApiKey::new(value.trim())))
                    }
                    None => Err(ConfigError::MissingApiKey {
                        index,
                        name: name.clone(),
                        env: var.clone(),
                    }),
                }
            };
            let model = config.model.as_deref().unwrap_or_default();
            let provider: Box<dyn Provider> = match config.kind {
                ProviderKind::Anthropic => {
                    let base = config
                        .base_url
                        .as_deref()
                        .unwrap_or(anthropic::DEFAULT_BASE_URL);
                    let key = key()?.ok_or_else(|| ConfigError::Invalid {
                        index,
                        name: name.clone(),
                        reason: "`api_key_env` is required".into(),
                    })?;
                    Box::new(
                        AnthropicProvider::new(base, model, key, config.timeout())?
                            .with_max_response_bytes(max_response_bytes),
                    )
                }
                ProviderKind::OpenAi => {
                    let base = config
                        .base_url
                        .as_deref()
                        .unwrap_or(openai::DEFAULT_BASE_URL);
                    Box::new(
                        OpenAiProvider::new(base, model, key()?, config.timeout())?
                            .with_max_response_bytes(max_response_bytes),
                    )
                }
                ProviderKind::Script => {
                    let path = config.script.as_deref().unwrap_or(std::path::Path::new(""));
                    let script =
                        ScriptProvider::from_file(path).map_err(|source| ConfigError::Script {
                            index,
                            name: name.clone(),
                            source,
                        })?;
                    Box::new(script.with_delay(config.delay.unwrap_or_default()))
                }
            };
            let policy = RetryPolicy {
                max_retries: config.max_retries(),
                backoff: config.backoff(),
            };
            let budget = Budget {
                context_window: config.context_window(),
                output_reserve: config.output_reserve(),
            };
            chain.push_with(name, provider, policy, budget, config.price);
            if let Some(entry) = chain.entries.last_mut() {
                entry.model = model.to_owned();
            }
        }
        Ok(chain)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Provider names in failover order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|e| e.name.as_str())
    }

    /// One model call through the chain; see the module docs. On failure
    /// the cursor is left at the last provider tried. The answer's
    /// `usage.cost` is priced at the answering provider's price (unknown
    /// without one), so a turn stored from it carries what it cost.
    pub async fn complete(
        &self,
        cursor: &mut ChainCursor,
        request: &CompletionRequest<'_>,
    ) -> Result<Answered, ChainError> {
        self.complete_streaming(cursor, request, &|_, _| {}).await
    }

    /// [`ProviderChain::complete`], handing the answer's text to `on_text`
    /// as it streams, with the number of the attempt it belongs to (from
    /// 1, over every retry and failover of this call). A retry or a
    /// failover starts the answer again under the next number; the text of
    /// an attempt that failed is void. The pieces of the attempt that
    /// answered join to its completion's text.
    pub async fn complete_streaming(
        &self,
        cursor: &mut ChainCursor,
        request: &CompletionRequest<'_>,
        on_text: &(dyn Fn(u32, &str) + Send + Sync),
    ) -> Result<Answered, ChainError> {
        let mut failures = Vec::new();
        let mut attempts_total = 0;
        while let Some(entry) = self.entries.get(cursor.position) {
            match call_with_retries(entry, request, attempts_total, on_text).await {
                Ok((mut completion, attempts)) => {
                    completion.usage.cost = entry.price.map(|p| p.cost(&completion.usage));
                    return Ok(Answered {
                        completion,
                        provider_index: cursor.position,
                        provider: entry.name.clone(),
                        attempts: attempts_total + attempts,
                    });
                }
                Err((error, attempts)) => {
                    attempts_total += attempts;
                    let too_long = matches!(error, ProviderError::ContextTooLong { .. });
                    failures.push(ProviderFailure {
                        provider_index: cursor.position,
                        provider: entry.name.clone(),
                        attempts,
                        error,
                    });
                    if too_long {
                        // The loop compacts and asks this provider again.
                        break;
                    }
                    if cursor.position + 1 >= self.entries.len() {
                        break;
                    }
                    cursor.position += 1;
                    tracing::warn!(
                        from = %entry.name,
                        to = %self.entries[cursor.position].name,
                        "model provider failed over"
                    );
                }
            }
        }
        Err(ChainError { failures })
    }
}

/// Calls one provider, retrying retryable errors. The attempt count comes
/// back with the result either way.
async fn call_with_retries(
    entry: &Entry,
    request: &CompletionRequest<'_>,
    attempts_before: u32,
    on_text: &(dyn Fn(u32, &str) + Send + Sync),
) -> Result<(Completion, u32), (ProviderError, u32)> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        // One `provider.request` span per attempt (a retry is a sibling).
        let span = tracing::info_span!(
            "provider.request",
            provider = %entry.name,
            model = %entry.model,
            attempt,
            outcome = tracing::field::Empty,
        );
        let started = std::time::Instant::now();
        let number = attempts_before + attempt;
        let text = |piece: &str| on_text(number, piece);
        let outcome = entry
            .provider
            .complete_streaming(request, &text)
            .instrument(span.clone())
            .await;
        span.record(
            "outcome",
            match &outcome {
                Ok(_) => "ok",
                Err(e) => e.class(),
            },
        );
        drop(span);
        record(entry, &outcome, started.elapsed());
        match outcome {
            Ok(completion) => return Ok((completion, attempt)),
            Err(error) if error.is_retryable() && attempt <= entry.policy.max_retries => {
                let retry_after = match &error {
                    ProviderError::Status { retry_after, .. } => *retry_after,
                    _ => None,
                };
                let delay = retry_delay(entry.policy.backoff, attempt - 1, retry_after);
                tracing::warn!(
                    provider = %entry.name,
                    attempt,
                    ?delay,
                    error = %error,
                    "model call failed; retrying"
                );
                tokio::time::sleep(delay).await;
            }
            Err(error) => return Err((error, attempt)),
        }
    }
}

/// One provider request's metrics: by provider (the config's name: a
/// bounded set) and outcome, its latency, and the tokens it reported.
fn record(entry: &Entry, outcome: &Result<Completion, ProviderError>, took: Duration) {
    let provider = entry.name.clone();
    let result = match outcome {
        Ok(_) => "ok",
        Err(e) => e.class(),
    };
    metrics::counter!("inquest_provider_requests_total", "provider" => provider.clone(), "outcome" => result)
        .increment(1);
    metrics::histogram!("inquest_provider_request_duration_seconds", "provider" => provider.clone())
        .record(took.as_secs_f64());
    if let Ok(c) = outcome {
        metrics::counter!("inquest_provider_tokens_total", "provider" => provider.clone(), "kind" => "input")
            .increment(c.usage.input_tokens);
        metrics::counter!("inquest_provider_tokens_total", "provider" => provider, "kind" => "output")
            .increment(c.usage.output_tokens);
    }
}

/// The wait before retry number `retry` (from 0); see the module docs.
pub fn retry_delay(backoff: Duration, retry: u32, retry_after: Option<Duration>) -> Duration {
    let jittered = Backoff::new(backoff, MAX_RETRY_DELAY)
        .jittered()
        .delay(retry);
    match retry_after {
        Some(asked) => jittered.max(asked.min(MAX_RETRY_DELAY)),
        None => jittered,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_delays_grow_stay_in_bounds_and_honour_retry_after() {
        let base = Duration::from_millis(100);
        for retry in 0..6 {
            let full = base.saturating_mul(1 << retry).min(MAX_RETRY_DELAY);
            let d = retry_delay(base, retry, None);
            assert!(d >= full / 2 && d <= full, "{retry}: {d:?}");
        }
        assert!(retry_delay(base, 40, None) <= MAX_RETRY_DELAY);
        let asked = retry_delay(base, 0, Some(Duration::from_secs(5)));
        assert_eq!(asked, Duration::from_secs(5));
        let capped = retry_delay(base, 0, Some(Duration::from_secs(3600)));
        assert_eq!(capped, MAX_RETRY_DELAY);
        let samples: Vec<Duration> = (0..100).map(|_| retry_delay(base, 3, None)).collect();
        assert!(samples.windows(2).any(|w| w[0] != w[1]), "jittered");
    }

    #[test]
    fn cursor_resets_to_the_first_provider() {
        let mut cursor = ChainCursor { position: 2 };
        cursor.reset();
        assert_eq!(cursor.position(), 0);
    }
}
