//! Text PostgreSQL refuses, stored losslessly: the one encoding.
//!
//! PostgreSQL cannot hold U+0000 in `text`, nor `\u0000` in `jsonb`, yet a
//! model's text, tool-call arguments, ids and names, a tool result, a file
//! the file tools read, a user message or an incident may contain it. A row
//! that would hold U+0000 in any of its text fields is stored *escaped*,
//! and says so in a flag column (migration V8: `turns.escaped`,
//! `incidents.escaped`, `reports.escaped`,
//! `sessions.recovery_plan_escaped`):
//!
//! - in every text field of that row, [`ESCAPE`] (U+E000, the first
//!   private-use code point) is written twice and U+0000 is written as
//!   [`ESCAPE`] followed by `0`; nothing else changes;
//! - in its `jsonb` fields the same applies to every string value and
//!   every object key.
//!
//! Reading a flagged row reverses it ([`unescape`], [`unescape_json`]);
//! anything else after an [`ESCAPE`] is a corrupt row, never a guess. Rows
//! without U+0000 (all of them, nearly) are stored exactly as before, flag
//! false, at the cost of one scan for the NUL byte. The encoding lives only
//! here and in the row code of the store: the domain, the API and other
//! replicas (the `pg_notify` payload carries the flag, see
//! [`crate::notify`]) only ever see the original text.

use std::borrow::Cow;

use serde_json::{Map, Value};

use crate::StoreError;

/// The escape character: U+E000, the first code point of the Unicode
/// private use area.
pub(crate) const ESCAPE: char = '\u{E000}';

/// What [`ESCAPE`] followed by this stands for.
const NUL_CODE: char = '0';

/// Whether `text` holds U+0000, which PostgreSQL `text` refuses.
pub(crate) fn has_nul(text: &str) -> bool {
    // A memchr over the bytes: U+0000 is the only character whose UTF-8
    // encoding holds a zero byte.
    text.as_bytes().contains(&0)
}

/// Whether any string value or object key in `value` holds U+0000, which
/// PostgreSQL `jsonb` refuses.
pub(crate) fn json_has_nul(value: &Value) -> bool {
    match value {
        Value::String(s) => has_nul(s),
        Value::Array(items) => items.iter().any(json_has_nul),
        Value::Object(map) => map.iter().any(|(k, v)| has_nul(k) || json_has_nul(v)),
        Value::Null | Value::Bool(_) | Value::Number(_) => false,
    }
}

/// `text` with [`ESCAPE`] doubled and U+0000 written as [`ESCAPE`] `0`.
/// Borrowed when it holds neither.
pub(crate) fn escape(text: &str) -> Cow<'_, str> {
    if !text.contains(['\0', ESCAPE]) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\0' => {
                out.push(ESCAPE);
                out.push(NUL_CODE);
            }
            ESCAPE => {
                out.push(ESCAPE);
                out.push(ESCAPE);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// The inverse of [`escape`]. An [`ESCAPE`] followed by anything but
/// another [`ESCAPE`] or `0` (or by nothing) is an error: the text was not
/// written by [`escape`].
pub(crate) fn unescape(text: &str) -> Result<Cow<'_, str>, Malformed> {
    if !text.contains(ESCAPE) {
        return Ok(Cow::Borrowed(text));
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.char_indices();
    while let Some((at, c)) = chars.next() {
        if c != ESCAPE {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some((_, ESCAPE)) => out.push(ESCAPE),
            Some((_, NUL_CODE)) => out.push('\0'),
            other => {
                return Err(Malformed {
                    at,
                    found: other.map(|(_, c)| c),
                });
            }
        }
    }
    Ok(Cow::Owned(out))
}

/// `value` with every string value and object key [`escape`]d.
pub(crate) fn escape_json(value: &Value) -> Value {
    match value {
        Value::String(s) => Value::String(escape(s).into_owned()),
        Value::Array(items) => Value::Array(items.iter().map(escape_json).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (escape(k).into_owned(), escape_json(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The inverse of [`escape_json`], in place where nothing changes.
pub(crate) fn unescape_json(value: Value) -> Result<Value, Malformed> {
    Ok(match value {
        Value::String(s) => Value::String(unescape_owned(s)?),
        Value::Array(items) => Value::Array(
            items
                .into_iter()
                .map(unescape_json)
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(map) => {
            let mut out = Map::new();
            for (k, v) in map {
                // `escape` is injective, so decoded keys never collide.
                out.insert(unescape_owned(k)?, unescape_json(v)?);
            }
            Value::Object(out)
        }
        other => other,
    })
}

fn unescape_owned(text: String) -> Result<String, Malformed> {
    match unescape(&text)? {
        Cow::Borrowed(_) => Ok(text),
        Cow::Owned(decoded) => Ok(decoded),
    }
}

/// A field bound for a row whose flag is `escaped`: [`escape`]d when set,
/// else as it is.
pub(crate) fn field(text: &str, escaped: bool) -> Cow<'_, str> {
    if escaped {
        escape(text)
    } else {
        Cow::Borrowed(text)
    }
}

/// A `jsonb` field bound for a row whose flag is `escaped`.
pub(crate) fn json_field(value: &Value, escaped: bool) -> Cow<'_, Value> {
    if escaped {
        Cow::Owned(escape_json(value))
    } else {
        Cow::Borrowed(value)
    }
}

/// A text field read from a row whose flag is `escaped`; `what` names it
/// in the error.
pub(crate) fn read(text: String, escaped: bool, what: &str) -> Result<String, StoreError> {
    if !escaped {
        return Ok(text);
    }
    unescape_owned(text).map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
}

/// A `jsonb` field read from a row whose flag is `escaped`.
pub(crate) fn read_json(value: Value, escaped: bool, what: &str) -> Result<Value, StoreError> {
    if !escaped {
        return Ok(value);
    }
    unescape_json(value).map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
}

/// Stored text that [`escape`] did not write.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("escaped text has {found:?} after the escape character at byte {at}")]
pub(crate) struct Malformed {
    /// Byte offset of the stray escape character.
    pub at: usize,
    /// What followed it (`None`: the end of the text).
    pub found: Option<char>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator (xorshift64*): no dependency, the
    /// same cases on every run.
    struct Gen(u64);

    impl Gen {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }

        /// A string over an alphabet that stresses the encoding: NUL, the
        /// escape, what follows an escape (`0`), its neighbours in the
        /// private use area, multi-byte and plain characters.
        fn string(&mut self) -> String {
            const ALPHABET: &[char] = &[
                '\0', ESCAPE, '0', 'a', ' ', '\\', '"', 'é', '😀', '\u{E001}', '\u{D7FF}',
                '\u{F8FF}',
            ];
            let len = self.below(12) as usize;
            (0..len)
                .map(|_| ALPHABET[self.below(ALPHABET.len() as u64) as usize])
                .collect()
        }

        fn json(&mut self, depth: u32) -> Value {
            match self.below(if depth == 0 { 4 } else { 6 }) {
                0 => Value::Null,
                1 => Value::Bool(self.below(2) == 0),
                2 => Value::from(self.below(1000)),
                3 => Value::String(self.string()),
                4 => Value::Array((0..self.below(4)).map(|_| self.json(depth - 1)).collect()),
                _ => Value::Object(
                    (0..self.below(4))
                        .map(|_| (self.string(), self.json(depth - 1)))
                        .collect(),
                ),
            }
        }
    }

    #[test]
    fn arbitrary_strings_round_trip_and_store_no_nul() {
        let mut g = Gen(0x9e37_79b9_7f4a_7c15);
        let mut seen = std::collections::HashMap::new();
        for _ in 0..20_000 {
            let s = g.string();
            let escaped = escape(&s);
            assert!(!has_nul(&escaped), "{s:?} escaped to {escaped:?}");
            assert_eq!(unescape(&escaped).unwrap(), s, "{s:?} via {escaped:?}");
            if !s.contains(['\0', ESCAPE]) {
                assert!(matches!(escaped, Cow::Borrowed(_)), "{s:?}");
            }
            // Injective: no two strings share an encoding.
            if let Some(other) = seen.insert(escaped.into_owned(), s.clone()) {
                assert_eq!(other, s);
            }
        }
    }

    #[test]
    fn arbitrary_json_round_trips_and_jsonb_accepts_it() {
        let mut g = Gen(0x0123_4567_89ab_cdef);
        for _ in 0..5_000 {
            let v = g.json(3);
            let escaped = escape_json(&v);
            assert!(!json_has_nul(&escaped), "{v} escaped to {escaped}");
            // What jsonb refuses is the `\u0000` escape in the JSON text.
            assert!(!escaped.to_string().contains("\\u0000"), "{escaped}");
            assert_eq!(unescape_json(escaped).unwrap(), v);
        }
    }

    #[test]
    fn the_encoding_is_as_documented() {
        assert_eq!(escape("before\0after"), "before\u{E000}0after");
        assert_eq!(escape("\u{E000}"), "\u{E000}\u{E000}");
        assert_eq!(escape("\u{E000}0"), "\u{E000}\u{E000}0");
        assert_eq!(escape("\0\u{E000}\0"), "\u{E000}0\u{E000}\u{E000}\u{E000}0");
        assert!(matches!(escape("plain 0 text é"), Cow::Borrowed(_)));
        assert!(matches!(unescape("plain"), Ok(Cow::Borrowed(_))));
        let v = serde_json::json!({"k\u{0}": ["a\u{0}", 1, {"\u{E000}": null}]});
        assert_eq!(
            escape_json(&v),
            serde_json::json!({"k\u{E000}0": ["a\u{E000}0", 1, {"\u{E000}\u{E000}": null}]})
        );
    }

    #[test]
    fn text_escape_did_not_write_is_refused() {
        assert_eq!(
            unescape("ab\u{E000}"),
            Err(Malformed { at: 2, found: None })
        );
        assert_eq!(
            unescape("\u{E000}x"),
            Err(Malformed {
                at: 0,
                found: Some('x')
            })
        );
        assert!(unescape_json(serde_json::json!({"\u{E000}1": 0})).is_err());
        assert!(matches!(
            read("\u{E000}".into(), true, "content"),
            Err(StoreError::Corrupt(_))
        ));
        // An unflagged row is read as stored, escape characters and all.
        assert_eq!(
            read("\u{E000}".into(), false, "content").unwrap(),
            "\u{E000}"
        );
    }

    #[test]
    fn detection_finds_nul_anywhere() {
        assert!(has_nul("a\0"));
        assert!(!has_nul("a\u{E000}0"));
        assert!(json_has_nul(&serde_json::json!([{"x": "\u{0}"}])));
        assert!(json_has_nul(&serde_json::json!({"\u{0}": 1})));
        assert!(!json_has_nul(&serde_json::json!({"a": ["b", 1, null]})));
    }
}
