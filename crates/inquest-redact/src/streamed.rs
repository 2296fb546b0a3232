//! The text of an assistant turn as it streams, made safe to show before
//! the turn is stored.
//!
//! A stored turn's text is redacted whole ([`crate::redact`]). A
//! streamed piece cannot be: a secret may arrive split over two pieces.
//! [`StreamedText`] holds back the text after the last word boundary and
//! releases only whole words, each released run redacted on its own. A
//! boundary is a whitespace character not preceded by a word ending in
//! `bearer` (the one secret shape that spans a space): no secret shape
//! spans such a boundary (URL userinfo, bearer tokens and credential
//! parameters all stop at whitespace), so the released runs, joined, are
//! the redaction of the whole text released so far. A registered secret
//! value that itself contains whitespace could be shown in part; the
//! stored turn still hides it. [`StreamedText::finish`] releases the rest
//! once the answer is complete.

use crate::redact;

/// Released (shown) text and the held-back tail of one streamed answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamedText {
    /// Redacted text released so far.
    shown: String,
    /// Raw text received and not yet released.
    pending: String,
}

impl StreamedText {
    pub fn new() -> Self {
        Self::default()
    }

    /// The text released so far (redacted).
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// Takes a piece of raw text; returns the newly released run, if any
    /// (it starts at byte offset `shown().len()` before this call).
    pub fn push(&mut self, raw: &str) -> Option<String> {
        self.pending.push_str(raw);
        let cut = release_point(&self.pending)?;
        let rest = self.pending.split_off(cut);
        let run = std::mem::replace(&mut self.pending, rest);
        self.release(&run)
    }

    /// The answer is complete: releases everything still held back.
    pub fn finish(&mut self) -> Option<String> {
        let run = std::mem::take(&mut self.pending);
        self.release(&run)
    }

    fn release(&mut self, run: &str) -> Option<String> {
        if run.is_empty() {
            return None;
        }
        let run = redact(run).into_owned();
        self.shown.push_str(&run);
        Some(run)
    }
}

/// The byte index just past the last boundary in `text` (see the module
/// docs), if there is one.
fn release_point(text: &str) -> Option<usize> {
    let mut end = text.len();
    loop {
        let (at, c) = text[..end]
            .char_indices()
            .rev()
            .find(|(_, c)| c.is_whitespace())?;
        let word_start = text[..at].rfind(char::is_whitespace).map_or(0, |i| {
            i + text[i..].chars().next().map_or(1, char::len_utf8)
        });
        let word = &text[word_start..at];
        let bearer = word.len() >= 6
            && word.is_char_boundary(word.len() - 6)
            && word[word.len() - 6..].eq_ignore_ascii_case("bearer");
        if !bearer {
            return Some(at + c.len_utf8());
        }
        end = at;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn stream(pieces: &[&str]) -> (Vec<String>, StreamedText) {
        let mut s = StreamedText::new();
        let mut runs: Vec<String> = pieces.iter().filter_map(|p| s.push(p)).collect();
        runs.extend(s.finish());
        (runs, s)
    }

    #[test]
    fn whole_words_are_released_and_the_tail_at_the_end() {
        let mut s = StreamedText::new();
        assert_eq!(s.push("hel"), None);
        assert_eq!(s.push("lo wor").as_deref(), Some("hello "));
        assert_eq!(s.push("ld"), None);
        assert_eq!(s.shown(), "hello ");
        assert_eq!(s.finish().as_deref(), Some("world"));
        assert_eq!(s.shown(), "hello world");
        assert_eq!(s.finish(), None);
    }

    #[test]
    fn a_bearer_token_split_over_pieces_is_never_shown() {
        let (runs, s) = stream(&["use Bearer ", "abc", "def.ghi now"]);
        assert_eq!(s.shown(), "use Bearer [redacted] now");
        assert!(runs.iter().all(|r| !r.contains("abc")), "{runs:?}");
        let (runs, s) = stream(&["see https://u:se", "cret@host/x ok"]);
        assert_eq!(s.shown(), "see https://u:[redacted]@host/x ok");
        assert!(!runs.concat().contains("secret"), "{runs:?}");
    }

    proptest! {
        #[test]
        fn released_runs_join_to_the_redacted_whole(
            words in proptest::collection::vec("[a-zA-Z:/@?=&.é]{0,8}", 0..12),
            seps in proptest::collection::vec(prop_oneof![Just(" "), Just("\n"), Just("  "), Just(" Bearer ")], 12),
            cuts in proptest::collection::vec(0usize..64, 0..8),
        ) {
            let mut text = String::new();
            for (w, s) in words.iter().zip(&seps) {
                text.push_str(w);
                text.push_str(s);
            }
            let mut points: Vec<usize> = cuts
                .into_iter()
                .map(|c| c.min(text.len()))
                .filter(|&c| text.is_char_boundary(c))
                .collect();
            points.sort_unstable();
            points.dedup();
            let mut pieces = Vec::new();
            let mut from = 0;
            for p in points.into_iter().chain([text.len()]) {
                pieces.push(&text[from..p]);
                from = p;
            }
            let (runs, s) = stream(&pieces);
            let whole = redact(&text).into_owned();
            prop_assert_eq!(runs.concat(), whole.clone());
            prop_assert_eq!(s.shown(), whole.as_str());
        }
    }
}
