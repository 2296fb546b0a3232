//! `[events]`: webhooks that receive the event log (migration V22),
//! signed as Standard Webhooks (standardwebhooks.com) specify. This module
//! is the configuration, the secret and the signature; the worker that
//! delivers is [`crate::delivery`].
//!
//! ```toml
//! [[events.webhooks]]
//! name = "oncall"                       # the delivery cursor's key: keep it stable
//! url = "https://hooks.example.com/inquest"
//! secret_file = "/run/secrets/inquest-webhook"   # or secret_env = "VAR"; "whsec_<base64>"
//! event_types = ["session.completed", "report.ready"]   # empty or absent: all
//! tenant = "acme"                       # absent: every tenant's events
//!
//! [[events.webhooks]]
//! name = "slack-oncall"
//! url = "https://hooks.slack.com/services/T000/B000/XXXX"   # the URL is the secret
//! format = "slack"                      # Block Kit messages, not signed
//! event_types = ["report.ready", "approval.requested", "session.failed"]
//! ```

use std::{collections::BTreeSet, path::PathBuf};

use base64::Engine as _;
use hmac::{KeyInit, Mac};
use serde::Deserialize;

/// Every event type the log records (the CHECK of `events.type`).
pub const EVENT_TYPES: [&str; 12] = [
    "session.running",
    "session.idle",
    "session.completed",
    "session.failed",
    "session.cancelled",
    "session.awaiting_confirmation",
    "session.awaiting_approval",
    "session.recovered",
    "approval.requested",
    "approval.decided",
    "report.ready",
    "incident.created",
];

/// How events are written for a receiver.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    /// Standard Webhooks: `{type, timestamp, data}`, signed.
    #[default]
    Standard,
    /// A Block Kit message for a Slack incoming webhook
    /// ([`crate::slack`]). Slack verifies nothing: its URL is the secret.
    Slack,
}

impl Format {
    /// `""` is the default, `standard`.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "" | "standard" => Some(Self::Standard),
            "slack" => Some(Self::Slack),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Standard => "standard",
            Self::Slack => "slack",
        }
    }
}

/// `[events]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EventsSection {
    pub webhooks: Vec<WebhookSection>,
}

/// One `[[events.webhooks]]` entry.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookSection {
    /// Names the delivery cursor in the database: renaming a webhook
    /// starts a new stream at the newest event.
    pub name: String,
    /// Where events are POSTed; the only place they go.
    pub url: String,
    /// `standard` (the default) or `slack`.
    #[serde(default)]
    pub format: Format,
    /// A file holding the secret (`whsec_` + base64), or...
    pub secret_file: Option<PathBuf>,
    /// ...an environment variable holding it. Exactly one of the two.
    pub secret_env: Option<String>,
    /// The event types sent; empty: all.
    #[serde(default)]
    pub event_types: Vec<String>,
    /// Only this tenant's events; absent: every tenant's.
    pub tenant: Option<String>,
}

impl EventsSection {
    /// The checks the server's config runs on `[events]` (the secrets are
    /// read later, by [`WebhookSection::load`]).
    pub fn validate(&self) -> Result<(), String> {
        let mut names = BTreeSet::new();
        for hook in &self.webhooks {
            if hook.name.trim().is_empty() {
                return Err("events.webhooks: `name` must not be blank".into());
            }
            if !names.insert(hook.name.as_str()) {
                return Err(format!(
                    "events.webhooks: the name {:?} is used twice",
                    hook.name
                ));
            }
            let url = reqwest::Url::parse(&hook.url)
                .map_err(|e| format!("events.webhooks {:?}: `url` is not a URL: {e}", hook.name))?;
            if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
                return Err(format!(
                    "events.webhooks {:?}: `url` must be http(s) with a host",
                    hook.name
                ));
            }
            let has_secret = hook.secret_file.is_some() || hook.secret_env.is_some();
            match hook.format {
                Format::Standard if hook.secret_file.is_some() == hook.secret_env.is_some() => {
                    return Err(format!(
                        "events.webhooks {:?}: give exactly one of `secret_file` and `secret_env`",
                        hook.name
                    ));
                }
                Format::Slack if has_secret => {
                    return Err(format!(
                        "events.webhooks {:?}: a Slack webhook is not signed (its URL is its secret): remove `secret_file` and `secret_env`",
                        hook.name
                    ));
                }
                _ => {}
            }
            if let Some(unknown) = hook
                .event_types
                .iter()
                .find(|t| !EVENT_TYPES.contains(&t.as_str()))
            {
                return Err(format!(
                    "events.webhooks {:?}: unknown event type {unknown:?} (known: {})",
                    hook.name,
                    EVENT_TYPES.join(", ")
                ));
            }
        }
        Ok(())
    }
}

/// A webhook ready to deliver to: its secret read and decoded.
#[derive(Clone)]
pub struct Webhook {
    pub name: String,
    pub url: reqwest::Url,
    pub format: Format,
    /// Empty for Slack, which is not signed.
    key: Vec<u8>,
    types: BTreeSet<String>,
    tenant: Option<String>,
}

impl std::fmt::Debug for Webhook {
    // The key never reaches a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Webhook")
            .field("name", &self.name)
            .field("format", &self.format)
            .field("types", &self.types)
            .field("tenant", &self.tenant)
            .finish_non_exhaustive()
    }
}

impl WebhookSection {
    /// Reads the secret (registered with the redaction registry, so it
    /// never appears in a log line or a status) and checks its form.
    /// Errors name the webhook and where the secret was looked for, never
    /// the secret.
    pub fn load(&self) -> Result<Webhook, String> {
        let name = &self.name;
        let url = reqwest::Url::parse(&self.url)
            .map_err(|e| format!("events.webhooks {name:?}: `url` is not a URL: {e}"))?;
        if self.format == Format::Slack {
            // A Slack incoming webhook's URL is its credential.
            inquest_redact::register(&self.url);
            return Ok(Webhook {
                name: name.clone(),
                url,
                format: Format::Slack,
                key: Vec::new(),
                types: self.event_types.iter().cloned().collect(),
                tenant: self.tenant.clone(),
            });
        }
        let text = match (&self.secret_file, &self.secret_env) {
            (Some(path), _) => std::fs::read_to_string(path).map_err(|e| {
                format!(
                    "events.webhooks {name:?}: cannot read secret_file {}: {e}",
                    path.display()
                )
            })?,
            (None, Some(var)) => std::env::var(var).map_err(|_| {
                format!("events.webhooks {name:?}: secret_env {var} is not set (or not UTF-8)")
            })?,
            (None, None) => {
                return Err(format!("events.webhooks {name:?}: no secret configured"));
            }
        };
        let secret = text.trim();
        if !secret.is_empty() {
            inquest_redact::register(secret);
        }
        let key = parse_secret(secret)
            .ok_or_else(|| format!("events.webhooks {name:?}: the secret is not whsec_<base64>"))?;
        Ok(Webhook {
            name: name.clone(),
            url,
            format: Format::Standard,
            key,
            types: self.event_types.iter().cloned().collect(),
            tenant: self.tenant.clone(),
        })
    }
}

/// The key bytes of a `whsec_<base64>` secret; `None` for anything else
/// (an empty key included).
pub fn parse_secret(secret: &str) -> Option<Vec<u8>> {
    let encoded = secret.strip_prefix("whsec_")?;
    let key = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .ok()?;
    (!key.is_empty()).then_some(key)
}

impl Webhook {
    /// An API webhook (migration V25) ready to deliver to: only its
    /// tenant's events. The error names what is wrong, never the secret.
    pub fn from_row(row: &inquest_store::WebhookRow) -> Result<Self, String> {
        let format =
            Format::parse(&row.format).ok_or_else(|| format!("unknown format {:?}", row.format))?;
        let key = parse_secret(&row.secret).ok_or("the secret is not whsec_<base64>")?;
        let url = reqwest::Url::parse(&row.url).map_err(|e| format!("url is not a URL: {e}"))?;
        if format == Format::Slack {
            inquest_redact::register(&row.url);
        }
        Ok(Webhook {
            name: row.id.to_string(),
            url,
            format,
            key,
            types: row.event_types.iter().cloned().collect(),
            tenant: Some(row.tenant.clone()),
        })
    }

    /// A new signing secret: `whsec_` and the base64 of 24 random bytes.
    pub fn new_secret() -> Result<String, String> {
        let mut key = [0u8; 24];
        getrandom::fill(&mut key).map_err(|e| format!("no random source for a secret: {e}"))?;
        Ok(format!(
            "whsec_{}",
            base64::engine::general_purpose::STANDARD.encode(key)
        ))
    }

    /// Whether this webhook receives an event of `kind` in `tenant`.
    /// The tenant (`None`: every tenant) and the event types (empty: all)
    /// this webhook receives, as [`Self::wants`] applies them.
    pub fn filter(&self) -> (Option<&str>, Vec<String>) {
        (self.tenant.as_deref(), self.types.iter().cloned().collect())
    }

    pub fn wants(&self, kind: &str, tenant: &str) -> bool {
        (self.types.is_empty() || self.types.contains(kind))
            && self.tenant.as_deref().is_none_or(|t| t == tenant)
    }

    /// The `webhook-signature` header's value for a message: `v1,` and the
    /// base64 HMAC-SHA256 of `id.timestamp.body` under the key.
    pub fn signature(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        sign(&self.key, id, timestamp, body)
    }
}

fn sign(key: &[u8], id: &str, timestamp: i64, body: &[u8]) -> String {
    // HMAC takes a key of any length; new_from_slice cannot fail for it.
    let Ok(mut mac) = hmac::Hmac::<sha2::Sha256>::new_from_slice(key) else {
        return String::new();
    };
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    let tag = mac.finalize().into_bytes();
    format!(
        "v1,{}",
        base64::engine::general_purpose::STANDARD.encode(tag)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the Standard Webhooks reference libraries' tests.
    #[test]
    fn signs_as_the_reference_libraries_do() {
        let key = parse_secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            sign(&key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn secrets_must_be_whsec_base64() {
        assert!(parse_secret("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").is_none());
        assert!(parse_secret("whsec_not base64!").is_none());
        assert!(parse_secret("whsec_").is_none());
    }

    #[test]
    fn filters_by_type_and_tenant() {
        let hook = WebhookSection {
            name: "n".into(),
            url: "http://127.0.0.1:1/".into(),
            format: Format::Standard,
            secret_file: None,
            secret_env: Some("INQUEST_TEST_UNSET".into()),
            event_types: vec!["report.ready".into()],
            tenant: Some("acme".into()),
        };
        let hook = Webhook {
            name: hook.name,
            url: reqwest::Url::parse(&hook.url).unwrap(),
            format: Format::Standard,
            key: vec![1],
            types: hook.event_types.into_iter().collect(),
            tenant: hook.tenant,
        };
        assert!(hook.wants("report.ready", "acme"));
        assert!(!hook.wants("report.ready", "other"));
        assert!(!hook.wants("session.running", "acme"));
    }

    #[test]
    fn validation_refuses_what_delivery_cannot_honour() {
        let good = WebhookSection {
            name: "n".into(),
            url: "http://127.0.0.1:1/".into(),
            format: Format::Standard,
            secret_file: None,
            secret_env: Some("V".into()),
            event_types: Vec::new(),
            tenant: None,
        };
        let check = |hook: WebhookSection| {
            EventsSection {
                webhooks: vec![hook],
            }
            .validate()
        };
        assert!(check(good.clone()).is_ok());
        assert!(
            check(WebhookSection {
                url: "ftp://x/".into(),
                ..good.clone()
            })
            .is_err()
        );
        assert!(
            check(WebhookSection {
                format: Format::Standard,
                secret_file: Some("f".into()),
                ..good.clone()
            })
            .is_err()
        );
        assert!(
            check(WebhookSection {
                event_types: vec!["turn.appended".into()],
                ..good.clone()
            })
            .is_err()
        );
        // Slack is not signed: no secret, and one given is a mistake.
        let slack = WebhookSection {
            format: Format::Slack,
            secret_file: None,
            secret_env: None,
            ..good.clone()
        };
        assert!(check(slack.clone()).is_ok());
        assert!(
            check(WebhookSection {
                secret_env: Some("V".into()),
                ..slack
            })
            .is_err()
        );
        let twice = EventsSection {
            webhooks: vec![good.clone(), good],
        };
        assert!(twice.validate().is_err());
    }
}
