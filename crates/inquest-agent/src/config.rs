//! The `[[providers]]` config section and building providers from it.
//!
//! ```toml
//! [[providers]]
//! kind = "anthropic"            # "anthropic" | "openai" | "script"
//! model = "claude-sonnet-4-5"
//! base_url = "https://…"        # optional; the provider's public API
//! api_key_env = "ANTHROPIC_API_KEY"
//! timeout = "120s"              # optional; per request ("500ms", "30s", "2m", or seconds)
//! max_retries = 2               # optional; retries of retryable errors before failing over
//! backoff = "500ms"             # optional; first retry delay, doubled each retry
//! name = "primary"              # optional; how reports name it (default "kind:model")
//! context_window = 200000       # optional; tokens (default by model family, see below)
//! output_reserve = 4096         # optional; tokens kept free for the answer
//! # optional; USD per million tokens. Left out: cost unknown (never 0).
//! # Cache prices left out are charged at input_per_mtok.
//! price = { input_per_mtok = 3.0, output_per_mtok = 15.0, cached_input_per_mtok = 0.3, cache_write_per_mtok = 3.75 }
//!
//! [[providers]]
//! kind = "script"
//! script = "examples/checkout/script.json"
//! delay = "2s"                  # optional; how long each scripted reply takes
//! ```
//!
//! The key itself is never in the config: `api_key_env` names the
//! environment variable holding it, read once when the chain is built.
//! It is required for `anthropic`, optional for `openai` (local servers
//! need none) and not allowed for `script`.

use std::{fmt, path::PathBuf, time::Duration};

use inquest_core::Price;
use serde::{Deserialize, Deserializer};

use crate::script::ScriptError;

pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
pub const DEFAULT_MAX_RETRIES: u32 = 2;
pub const DEFAULT_BACKOFF: Duration = Duration::from_millis(500);
/// Upper bounds that catch typos (a timeout in milliseconds written as
/// seconds) rather than limit anyone.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(30 * 60);
pub const MAX_RETRIES: u32 = 10;
pub const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// The context window assumed for a model of no family known here (and
/// for the `script` provider): small enough for most models served today.
pub const DEFAULT_CONTEXT_WINDOW: u64 = 32_768;
/// Default of `output_reserve`: tokens of the window kept for the answer.
pub const DEFAULT_OUTPUT_RESERVE: u64 = 4_096;
/// The smallest `context_window` accepted (below it no investigation fits).
pub const MIN_CONTEXT_WINDOW: u64 = 2_048;

/// The built-in context window of a model, by family: what a
/// provider entry without `context_window` is budgeted at. Conservative:
/// where a family's members differ, the smaller window.
pub fn default_context_window(kind: ProviderKind, model: Option<&str>) -> u64 {
    let model = model.unwrap_or_default().to_ascii_lowercase();
    let model = model.rsplit('/').next().unwrap_or_default();
    let has = |prefix: &str| model.starts_with(prefix);
    match kind {
        ProviderKind::Script => DEFAULT_CONTEXT_WINDOW,
        _ if has("claude") => 200_000,
        _ if has("gpt-4o") || has("gpt-4.1") || has("gpt-4-turbo") || has("gpt-5") => 128_000,
        _ if has("o1") || has("o3") || has("o4") => 128_000,
        _ if has("gpt-3.5") => 16_385,
        _ if model == "gpt-4" => 8_192,
        _ => DEFAULT_CONTEXT_WINDOW,
    }
}

/// Which wire format a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    Anthropic,
    #[serde(rename = "openai")]
    OpenAi,
    Script,
}

impl ProviderKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::OpenAi => "openai",
            ProviderKind::Script => "script",
        }
    }
}

/// One `[[providers]]` entry, in failover order.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderConfig {
    pub kind: ProviderKind,
    #[serde(default)]
    pub name: Option<String>,
    /// Required for `anthropic` and `openai`.
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub base_url: Option<String>,
    #[serde(default)]
    pub api_key_env: Option<String>,
    #[serde(default, deserialize_with = "duration")]
    pub timeout: Option<Duration>,
    #[serde(default)]
    pub max_retries: Option<u32>,
    #[serde(default, deserialize_with = "duration")]
    pub backoff: Option<Duration>,
    /// The script file, for `script` only. A relative path is taken from
    /// the process's working directory; the config loader may resolve it
    /// against the config file's directory first.
    #[serde(default)]
    pub script: Option<PathBuf>,
    /// For `script` only: how long each scripted reply takes to arrive
    /// (a reply's own `delay` in the script wins). Default none. A demo
    /// slow enough to watch, or to kill the replica running it.
    #[serde(default, deserialize_with = "duration")]
    pub delay: Option<Duration>,
    /// The model's context window in tokens. Default by model
    /// family ([`default_context_window`]). A provider's "too long" answer
    /// that names a smaller limit overrides it for the burst.
    #[serde(default)]
    pub context_window: Option<u64>,
    /// Tokens of the window kept free for the answer (default
    /// [`DEFAULT_OUTPUT_RESERVE`], at most half the window).
    #[serde(default)]
    pub output_reserve: Option<u64>,
    // Cost.
    /// USD per million tokens of this entry's model (`input_per_mtok`,
    /// `output_per_mtok`, optional `cached_input_per_mtok` and
    /// `cache_write_per_mtok`, see [`Price`]). Left out, the cost of its
    /// calls is unknown, never zero. On the entry, not keyed by model name:
    /// the same model costs differently at different endpoints (a local
    /// server, a reseller).
    #[serde(default)]
    pub price: Option<Price>,
}

impl ProviderConfig {
    /// A minimal entry; the other fields take their defaults.
    pub fn new(kind: ProviderKind) -> Self {
        Self {
            kind,
            name: None,
            model: None,
            base_url: None,
            api_key_env: None,
            timeout: None,
            max_retries: None,
            backoff: None,
            script: None,
            delay: None,
            context_window: None,
            output_reserve: None,
            price: None,
        }
    }

    /// The window budgeted for this entry, in tokens.
    pub fn context_window(&self) -> u64 {
        self.context_window
            .unwrap_or_else(|| default_context_window(self.kind, self.model.as_deref()))
    }

    /// The output reserve, in tokens.
    pub fn output_reserve(&self) -> u64 {
        self.output_reserve
            .unwrap_or(DEFAULT_OUTPUT_RESERVE.min(self.context_window() / 4))
    }

    /// How reports and logs name this provider.
    pub fn display_name(&self) -> String {
        match (&self.name, &self.model) {
            (Some(name), _) => name.clone(),
            (None, Some(model)) => format!("{}:{model}", self.kind.as_str()),
            (None, None) => self.kind.as_str().to_owned(),
        }
    }

    pub fn timeout(&self) -> Duration {
        self.timeout.unwrap_or(DEFAULT_TIMEOUT)
    }

    pub fn max_retries(&self) -> u32 {
        self.max_retries.unwrap_or(DEFAULT_MAX_RETRIES)
    }

    pub fn backoff(&self) -> Duration {
        self.backoff.unwrap_or(DEFAULT_BACKOFF)
    }

    /// Checks the entry on its own; `Err` says what is wrong.
    pub fn validate(&self) -> Result<(), String> {
        let blank = |v: &Option<String>| v.as_deref().is_some_and(|s| s.trim().is_empty());
        if blank(&self.name) || blank(&self.model) || blank(&self.api_key_env) {
            return Err("`name`, `model` and `api_key_env` must not be blank".into());
        }
        if self.timeout().is_zero() || self.timeout() > MAX_TIMEOUT {
            return Err(format!("`timeout` must be between 1ms and {MAX_TIMEOUT:?}"));
        }
        if self.max_retries() > MAX_RETRIES {
            return Err(format!("`max_retries` must be at most {MAX_RETRIES}"));
        }
        if self.delay.is_some_and(|d| d >= self.timeout()) {
            return Err("`delay` must be shorter than `timeout`".into());
        }
        if self.backoff() > MAX_BACKOFF {
            return Err(format!("`backoff` must be at most {MAX_BACKOFF:?}"));
        }
        if self.context_window() < MIN_CONTEXT_WINDOW {
            return Err(format!(
                "`context_window` must be at least {MIN_CONTEXT_WINDOW} tokens"
            ));
        }
        if self.output_reserve() > self.context_window() / 2 {
            return Err("`output_reserve` must be at most half of `context_window`".into());
        }
        if let Some(price) = &self.price {
            price.validate()?;
        }
        match self.kind {
            ProviderKind::Anthropic | ProviderKind::OpenAi => {
                if self.model.is_none() {
                    return Err("`model` is required".into());
                }
                if self.script.is_some() || self.delay.is_some() {
                    return Err("`script` and `delay` are only for kind = \"script\"".into());
                }
                if self.kind == ProviderKind::Anthropic && self.api_key_env.is_none() {
                    return Err("`api_key_env` is required for kind = \"anthropic\"".into());
                }
                if let Some(url) = &self.base_url {
                    let scheme_ok = url.starts_with("http://") || url.starts_with("https://");
                    if !scheme_ok || url.contains(char::is_whitespace) {
                        return Err(format!("`base_url` {url:?} is not an http(s) URL"));
                    }
                }
            }
            ProviderKind::Script => {
                if self.script.is_none() {
                    return Err("`script` (a file path) is required for kind = \"script\"".into());
                }
                if self.base_url.is_some() || self.api_key_env.is_some() {
                    return Err(
                        "`base_url` and `api_key_env` are not used by kind = \"script\"".into(),
                    );
                }
            }
        }
        Ok(())
    }
}

/// An API key. Its `Debug` and `Display` never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    pub fn new(key: impl Into<String>) -> Self {
        Self(key.into())
    }

    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

/// Why a provider chain could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("no [[providers]] configured")]
    NoProviders,
    #[error("providers[{index}] ({name}): {reason}")]
    Invalid {
        index: usize,
        name: String,
        reason: String,
    },
    #[error("providers[{index}] ({name}): environment variable {env} is not set or empty")]
    MissingApiKey {
        index: usize,
        name: String,
        env: String,
    },
    #[error("providers[{index}] ({name}): {source}")]
    Script {
        index: usize,
        name: String,
        source: ScriptError,
    },
    #[error("cannot build the HTTP client: {0}")]
    HttpClient(#[source] reqwest::Error),
}

/// Reads `"500ms"`, `"30s"`, `"2m"` or a number of seconds.
pub(crate) fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Seconds(u64),
        Text(String),
    }
    match Option::<Raw>::deserialize(d)? {
        None => Ok(None),
        Some(Raw::Seconds(s)) => Ok(Some(Duration::from_secs(s))),
        Some(Raw::Text(text)) => parse_duration(&text)
            .map(Some)
            .ok_or_else(|| serde::de::Error::custom(format!("bad duration {text:?}; try \"30s\""))),
    }
}

/// `"500ms"`, `"30s"`, `"2m"`, `"1h"`; `None` for anything else.
pub fn parse_duration(text: &str) -> Option<Duration> {
    inquest_core::duration_text::parse(text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct File {
        providers: Vec<ProviderConfig>,
    }

    fn parse(text: &str) -> Result<Vec<ProviderConfig>, String> {
        serde_json::from_str::<File>(text)
            .map(|f| f.providers)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn reads_entries_and_durations() {
        let p = parse(
            r#"{"providers": [
                {"kind": "anthropic", "model": "m", "api_key_env": "K", "timeout": "90s", "backoff": "250ms"},
                {"kind": "openai", "model": "llama", "base_url": "http://localhost:11434/v1", "timeout": 5},
                {"kind": "script", "script": "s.json"}]}"#,
        )
        .unwrap();
        assert_eq!(p[0].timeout(), Duration::from_secs(90));
        assert_eq!(p[0].backoff(), Duration::from_millis(250));
        assert_eq!(p[1].timeout(), Duration::from_secs(5));
        assert_eq!(p[1].display_name(), "openai:llama");
        assert!(p.iter().all(|c| c.validate().is_ok()));
        assert!(parse(r#"{"providers": [{"kind": "anthropic", "modle": "m"}]}"#).is_err());
        assert!(parse(r#"{"providers": [{"kind": "gemini"}]}"#).is_err());
        assert!(parse(r#"{"providers": [{"kind": "script", "timeout": "3 hours"}]}"#).is_err());
    }

    #[test]
    fn context_windows_default_by_model_family() {
        let window = |kind, model: &str| default_context_window(kind, Some(model));
        assert_eq!(
            window(ProviderKind::Anthropic, "claude-sonnet-4-5"),
            200_000
        );
        assert_eq!(window(ProviderKind::OpenAi, "gpt-4o-mini"), 128_000);
        assert_eq!(window(ProviderKind::OpenAi, "openai/gpt-4.1"), 128_000);
        assert_eq!(window(ProviderKind::OpenAi, "o3-mini"), 128_000);
        assert_eq!(
            window(ProviderKind::OpenAi, "llama3.1:8b"),
            DEFAULT_CONTEXT_WINDOW
        );
        assert_eq!(
            default_context_window(ProviderKind::Script, None),
            DEFAULT_CONTEXT_WINDOW
        );
        let mut c = ProviderConfig::new(ProviderKind::OpenAi);
        c.model = Some("m".into());
        assert_eq!(c.output_reserve(), DEFAULT_OUTPUT_RESERVE);
        c.context_window = Some(1000);
        assert!(c.validate().unwrap_err().contains("context_window"));
        c.context_window = Some(16_384);
        c.output_reserve = Some(9000);
        assert!(c.validate().unwrap_err().contains("output_reserve"));
    }

    #[test]
    fn a_price_is_read_and_checked() {
        let p = parse(
            r#"{"providers": [{"kind": "openai", "model": "m",
                "price": {"input_per_mtok": 0.15, "output_per_mtok": 0.6, "cached_input_per_mtok": 0.075}}]}"#,
        )
        .unwrap();
        let price = p[0].price.unwrap();
        assert_eq!(price.cached_input_per_mtok, Some(0.075));
        assert_eq!(price.cache_write_per_mtok, None);
        assert!(p[0].validate().is_ok());
        // A typo in a rate's name is refused, not read as "no price".
        assert!(
            parse(
                r#"{"providers": [{"kind": "openai", "model": "m",
                "price": {"input_per_mtok": 1, "output_per_mtok": 1, "cache_per_mtok": 1}}]}"#
            )
            .is_err()
        );
        let mut negative = p[0].clone();
        negative.price = Some(Price {
            output_per_mtok: -1.0,
            ..price
        });
        assert!(negative.validate().unwrap_err().contains("output_per_mtok"));
    }

    #[test]
    fn validation_names_the_problem() {
        let mut c = ProviderConfig::new(ProviderKind::Anthropic);
        assert!(c.validate().unwrap_err().contains("model"));
        c.model = Some("m".into());
        assert!(c.validate().unwrap_err().contains("api_key_env"));
        c.api_key_env = Some("K".into());
        c.base_url = Some("ftp://x".into());
        assert!(c.validate().is_err());
        c.base_url = None;
        c.max_retries = Some(99);
        assert!(c.validate().is_err());
        let mut s = ProviderConfig::new(ProviderKind::Script);
        assert!(s.validate().is_err());
        s.script = Some("a.json".into());
        s.api_key_env = Some("K".into());
        assert!(s.validate().is_err());
        assert_eq!(parse_duration("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_duration("s"), None);
        assert_eq!(
            format!("{:?}", ApiKey::new("sk-secret")),
            "ApiKey(<redacted>)"
        );
    }
}
