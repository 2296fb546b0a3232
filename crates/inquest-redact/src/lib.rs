//! Secrets never leave the process in text: every log line, status message,
//! stored turn and streamed piece of text goes through this crate.
//!
//! It owns the one process-wide registry of secret values ([`register`]),
//! which is why it is a crate of its own: whoever links it shares that
//! registry, and the global is in plain sight. Start at
//! [`redact`] (whole text) and [`StreamedText`] (text that arrives in
//! pieces). Must not depend on any other Inquest crate.
//!
//! Two kinds of secret are hidden:
//!
//! - **Known values**, registered where the service learns them
//!   ([`register`]): provider API keys, the values `${VAR}` expands to in
//!   the MCP config (tokens in URLs, headers, a stdio server's `env`), the
//!   database password. Every occurrence is replaced by [`REDACTED`].
//!   Values shorter than [`MIN_SECRET_BYTES`] are not registered: hiding
//!   every "abc" in a log would garble it and protect nothing.
//! - **Shapes** that are secret whatever their value: the password in a
//!   URL's userinfo (`scheme://user:PASSWORD@host`), the token after
//!   `Bearer `, the value of a URL query parameter whose name says it is
//!   a credential (`token`, `key`, `secret`, `password`, `signature`, …),
//!   and the secret half of an Inquest API token (`inq_<id>_SECRET`: the
//!   id, which `ListTokens` shows, is kept).
//!
//! The registry is process-wide (a secret learnt by the agent's config must
//! be hidden from the server's logs); [`Redactor`] is the pure part, tested
//! with plain data.

mod streamed;

pub use streamed::StreamedText;

use std::{
    borrow::Cow,
    sync::{PoisonError, RwLock},
};

/// What a secret is replaced with.
pub const REDACTED: &str = "[redacted]";
/// Shorter values are not registered as secrets.
pub const MIN_SECRET_BYTES: usize = 6;

/// Query parameter names whose values are hidden (matched
/// case-insensitively, also as a suffix: `x-api-key`, `access_token`).
const SECRET_PARAMS: &[&str] = &[
    "token",
    "key",
    "secret",
    "password",
    "passwd",
    "pwd",
    "signature",
    "sig",
    "credential",
    "credentials",
    "auth",
    "authorization",
];

/// A set of secret values plus the secret shapes.
#[derive(Debug, Default, Clone)]
pub struct Redactor {
    /// Longest first, so a secret that contains another is hidden whole.
    values: Vec<String>,
}

impl Redactor {
    /// Adds `secret` (ignored when shorter than [`MIN_SECRET_BYTES`] or
    /// already known).
    pub fn add(&mut self, secret: &str) {
        let secret = secret.trim();
        if secret.len() < MIN_SECRET_BYTES
            || REDACTED.contains(secret)
            || self.values.iter().any(|v| v == secret)
        {
            return;
        }
        self.values.push(secret.to_owned());
        self.values.sort_by_key(|v| std::cmp::Reverse(v.len()));
    }

    /// `text` with every known secret and every secret shape replaced.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        for value in &self.values {
            if out.contains(value.as_str()) {
                out = Cow::Owned(out.replace(value.as_str(), REDACTED));
            }
        }
        let shaped = redact_shapes(&out);
        match shaped {
            Cow::Borrowed(_) => out,
            Cow::Owned(s) => Cow::Owned(s),
        }
    }
}

static GLOBAL: RwLock<Option<Redactor>> = RwLock::new(None);

/// Registers a secret value for every later [`redact`] in this process.
pub fn register(secret: &str) {
    let mut global = GLOBAL.write().unwrap_or_else(PoisonError::into_inner);
    global.get_or_insert_with(Redactor::default).add(secret);
}

/// `text` with every registered secret and every secret shape hidden.
pub fn redact(text: &str) -> Cow<'_, str> {
    let global = GLOBAL.read().unwrap_or_else(PoisonError::into_inner);
    match global.as_ref() {
        Some(r) => match r.redact(text) {
            Cow::Borrowed(_) => Cow::Borrowed(text),
            Cow::Owned(s) => Cow::Owned(s),
        },
        None => redact_shapes(text),
    }
}

/// Only the shapes: URL passwords, bearer tokens, credential parameters.
pub fn redact_shapes(text: &str) -> Cow<'_, str> {
    let a = url_passwords(text);
    let b = bearer_tokens(&a);
    let c = secret_params(&b);
    let d = api_token_secrets(&c);
    if matches!(a, Cow::Borrowed(_))
        && matches!(b, Cow::Borrowed(_))
        && matches!(c, Cow::Borrowed(_))
        && matches!(d, Cow::Borrowed(_))
    {
        return Cow::Borrowed(text);
    }
    Cow::Owned(d.into_owned())
}

/// `inq_<id>_<secret>` → `inq_<id>_[redacted]`, the id being 32 hex
/// digits as `auth::PresentedToken` writes it (so `inq_requests_total` is
/// left alone): an API token pasted where an id belongs, or cut short,
/// still loses its secret.
fn api_token_secrets(text: &str) -> Cow<'_, str> {
    const PREFIX: &str = "inq_";
    const ID_DIGITS: usize = 32;
    if !text.contains(PREFIX) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut pos = 0;
    let mut changed = false;
    while let Some(found) = text[pos..].find(PREFIX) {
        let id_start = pos + found + PREFIX.len();
        let id_len = text[id_start..]
            .find(|c: char| !c.is_ascii_hexdigit())
            .unwrap_or(text.len() - id_start);
        let underscore = id_start + id_len;
        if id_len != ID_DIGITS || !text[underscore..].starts_with('_') {
            out.push_str(&text[pos..id_start]);
            pos = id_start;
            continue;
        }
        let secret_start = underscore + 1;
        let secret_len = text[secret_start..]
            .find(|c: char| !c.is_ascii_hexdigit())
            .unwrap_or(text.len() - secret_start);
        out.push_str(&text[pos..secret_start]);
        if secret_len > 0 {
            out.push_str(REDACTED);
            changed = true;
        }
        pos = secret_start + secret_len;
    }
    out.push_str(&text[pos..]);
    if changed {
        Cow::Owned(out)
    } else {
        Cow::Borrowed(text)
    }
}

/// Characters a token or URL part is made of (stops at spaces, quotes,
/// brackets and the like).
fn token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "-._~+/=%!$*:".contains(c)
}

/// `scheme://user:secret@host` → `scheme://user:[redacted]@host`.
fn url_passwords(text: &str) -> Cow<'_, str> {
    if !text.contains("://") {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut changed = false;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        // The authority ends at the first '/', '?', '#' or non-URL char.
        let end = tail
            .find(|c: char| {
                c == '/' || c == '?' || c == '#' || c.is_whitespace() || "\"'<>".contains(c)
            })
            .unwrap_or(tail.len());
        let authority = &tail[..end];
        match authority.rfind('@') {
            Some(at) => match authority[..at].find(':') {
                Some(colon) if colon + 1 < at => {
                    out.push_str(&authority[..=colon]);
                    out.push_str(REDACTED);
                    out.push_str(&authority[at..]);
                    changed = true;
                }
                _ => out.push_str(authority),
            },
            None => out.push_str(authority),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    if changed {
        Cow::Owned(out)
    } else {
        Cow::Borrowed(text)
    }
}

/// `Bearer abc.def` → `Bearer [redacted]` (any case of "bearer").
fn bearer_tokens(text: &str) -> Cow<'_, str> {
    let lower = text.to_ascii_lowercase();
    if !lower.contains("bearer ") {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut pos = 0;
    let mut changed = false;
    while let Some(found) = lower[pos..].find("bearer ") {
        let start = pos + found + "bearer ".len();
        out.push_str(&text[pos..start]);
        let len = text[start..]
            .find(|c: char| !token_char(c))
            .unwrap_or(text.len() - start);
        if len > 0 && &text[start..start + len] != REDACTED {
            out.push_str(REDACTED);
            changed = true;
        } else {
            out.push_str(&text[start..start + len]);
        }
        pos = start + len;
    }
    out.push_str(&text[pos..]);
    if changed {
        Cow::Owned(out)
    } else {
        Cow::Borrowed(text)
    }
}

/// `?token=abc&x=1` → `?token=[redacted]&x=1`, for the names in
/// [`SECRET_PARAMS`] (as the whole name or its suffix after `_` or `-`).
fn secret_params(text: &str) -> Cow<'_, str> {
    if !text.contains('=') || !(text.contains('?') || text.contains('&')) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut pos = 0;
    let mut changed = false;
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'?' || bytes[i] == b'&' {
            let name_start = i + 1;
            let name_len = text[name_start..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
                .unwrap_or(text.len() - name_start);
            let name = &text[name_start..name_start + name_len];
            let eq = name_start + name_len;
            if name_len > 0 && text[eq..].starts_with('=') && secret_name(name) {
                let value_start = eq + 1;
                let value_len = text[value_start..]
                    .find(|c: char| c == '&' || c == '#' || !token_char(c) || c == ';' || c == ',')
                    .unwrap_or(text.len() - value_start);
                if value_len > 0 && &text[value_start..value_start + value_len] != REDACTED {
                    out.push_str(&text[pos..value_start]);
                    out.push_str(REDACTED);
                    pos = value_start + value_len;
                    changed = true;
                }
                i = value_start + value_len;
                continue;
            }
        }
        i += 1;
    }
    out.push_str(&text[pos..]);
    if changed {
        Cow::Owned(out)
    } else {
        Cow::Borrowed(text)
    }
}

fn secret_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    SECRET_PARAMS.iter().any(|p| {
        lower == *p
            || lower
                .strip_suffix(p)
                .is_some_and(|head| head.ends_with('_') || head.ends_with('-'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn an_api_tokens_secret_is_hidden_whole_or_cut_and_its_id_kept() {
        let id = "0190a5dfac96774bbccb302099a8057f";
        let secret = "9f".repeat(32);
        let token = format!("inq_{id}_{secret}");
        assert_eq!(
            redact_shapes(&format!("token_id: \"{token}\" is not a token id")),
            format!("token_id: \"inq_{id}_[redacted]\" is not a token id")
        );
        // Cut short, as a quoted excerpt is.
        assert_eq!(
            redact_shapes(&format!("\"{}\"...", &token[..64])),
            format!("\"inq_{id}_[redacted]\"...")
        );
        let other = format!("inq_{}_x inq_requests_total inq_{id}x_{secret}", &id[1..]);
        for plain in [
            "inq_",
            "inq_abc_1",
            "inq__x",
            "an inquiry_x",
            other.as_str(),
        ] {
            assert_eq!(redact_shapes(plain), plain, "{plain}");
        }
    }

    #[test]
    fn known_values_are_hidden_longest_first() {
        let mut r = Redactor::default();
        r.add("sk-live-abcdef");
        r.add("abcdef123456");
        r.add("abc");
        assert_eq!(
            r.redact("key sk-live-abcdef and abcdef123456, abc stays"),
            "key [redacted] and [redacted], abc stays"
        );
        assert!(matches!(r.redact("nothing here"), Cow::Borrowed(_)));
    }

    #[test]
    fn shapes_are_hidden_whatever_the_value() {
        for (text, want) in [
            (
                "error sending request for url (https://mcp.example/k8s?token=s3cr3t&x=1)",
                "error sending request for url (https://mcp.example/k8s?token=[redacted]&x=1)",
            ),
            (
                "postgres://inquest:hunter22@db:5432/inquest",
                "postgres://inquest:[redacted]@db:5432/inquest",
            ),
            (
                "Authorization: Bearer eyJhbGciOi.x.y",
                "Authorization: Bearer [redacted]",
            ),
            (
                "https://h/p?x-api-key=abc",
                "https://h/p?x-api-key=[redacted]",
            ),
            ("https://user@host/path", "https://user@host/path"),
            ("a=b&monkey=1", "a=b&monkey=1"),
        ] {
            assert_eq!(redact_shapes(text), want, "{text}");
        }
    }

    proptest! {
        /// A registered secret never survives, wherever it sits in the
        /// text, and redacting twice changes nothing more.
        #[test]
        fn a_registered_secret_never_survives(
            before in ".{0,40}",
            after in ".{0,40}",
            secret in "[A-Za-z0-9_-]{6,40}",
        ) {
            let mut r = Redactor::default();
            r.add(&secret);
            let text = format!("{before}{secret}{after}");
            let once = r.redact(&text).into_owned();
            prop_assert!(!once.contains(&secret));
            prop_assert_eq!(r.redact(&once).into_owned(), once.clone());
        }

        #[test]
        fn shapes_never_panic_and_are_idempotent(text in "\\PC{0,80}") {
            let once = redact_shapes(&text).into_owned();
            prop_assert_eq!(redact_shapes(&once).into_owned(), once.clone());
        }
    }
}
