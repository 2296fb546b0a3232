//! Size caps that leave a visible marker.
//!
//! Every size Inquest stores has a cap, and every cut says what was cut and
//! how much (DESIGN.md, "Anything can be stored"). `cut_text` is the one
//! helper that does it, so every marker reads the same way.

use std::borrow::Cow;

/// `text` cut to at most `cap` bytes at a char boundary, followed by a marker
/// naming `what` was cut and how many bytes were dropped; `text` itself
/// (borrowed) when it fits.
///
/// `what` names the thing and the config key, e.g.
/// `"model text over limits.max_model_text_bytes = 262144"`, so the marker
/// reads `…[cut by inquest: 123 more bytes of model text over
/// limits.max_model_text_bytes = 262144]`. The marker comes on top of the cap:
/// the result is at most `cap + marker_len(..)` bytes, and the part before the
/// marker is always a prefix of `text`.
pub fn cut_text<'a>(text: &'a str, cap: usize, what: &str) -> Cow<'a, str> {
    if text.len() <= cap {
        return Cow::Borrowed(text);
    }
    let end = floor_char_boundary(text, cap);
    let dropped = (text.len() - end) as u64;
    let mut out = String::with_capacity(end + marker_len(dropped, what));
    out.push_str(&text[..end]);
    out.push_str(&marker(dropped, what));
    Cow::Owned(out)
}

/// [`cut_text`] for line-oriented output (tool results, files): the marker
/// goes on a line of its own, and `already_dropped` bytes that never
/// reached `text` (a transport that stopped reading) count in it — a
/// marker is left even when `text` itself fits.
pub fn cut_lines<'a>(text: &'a str, cap: usize, already_dropped: u64, what: &str) -> Cow<'a, str> {
    let cut = floor_char_boundary(text, cap);
    if cut == text.len() && already_dropped == 0 {
        return Cow::Borrowed(text);
    }
    let dropped = (text.len() - cut) as u64 + already_dropped;
    let head = &text[..cut];
    let sep = if head.is_empty() || head.ends_with('\n') {
        ""
    } else {
        "\n"
    };
    Cow::Owned(format!("{head}{sep}{}", marker(dropped, what)))
}

/// The marker appended after a cut that dropped `dropped` bytes.
pub fn marker(dropped: u64, what: &str) -> String {
    format!("…[cut by inquest: {dropped} more bytes of {what}]")
}

/// The length in bytes of `marker(dropped, what)`.
pub fn marker_len(dropped: u64, what: &str) -> usize {
    marker(dropped, what).len()
}

/// The largest char boundary of `text` that is `<= index`.
pub fn floor_char_boundary(text: &str, index: usize) -> usize {
    if index >= text.len() {
        return text.len();
    }
    // A UTF-8 char is at most 4 bytes, so a boundary is at most 3 bytes back.
    (index.saturating_sub(3)..=index)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const WHAT: &str = "model text over limits.max_model_text_bytes = 4";

    #[test]
    fn text_within_the_cap_is_borrowed_unchanged() {
        assert!(matches!(cut_text("abcd", 4, WHAT), Cow::Borrowed("abcd")));
        assert!(matches!(cut_text("", 0, WHAT), Cow::Borrowed("")));
    }

    #[test]
    fn a_cut_says_what_and_how_much() {
        let cut = cut_text("abcdefgh", 4, WHAT);
        assert_eq!(
            cut,
            "abcd…[cut by inquest: 4 more bytes of model text over limits.max_model_text_bytes = 4]"
        );
    }

    #[test]
    fn a_cut_never_splits_a_char() {
        // "é" is two bytes: a cap of 2 falls inside the second one.
        let cut = cut_text("aéé", 2, "x");
        assert_eq!(cut, "a…[cut by inquest: 4 more bytes of x]");
        let cut = cut_text("🦀🦀", 5, "x");
        assert_eq!(cut, "🦀…[cut by inquest: 4 more bytes of x]");
        let cut = cut_text("🦀", 3, "x");
        assert_eq!(cut, "…[cut by inquest: 4 more bytes of x]");
    }

    proptest! {
        #[test]
        fn a_cut_is_a_bounded_prefix_with_a_marker(text in "\\PC{0,64}", cap in 0usize..80) {
            let cut = cut_text(&text, cap, "x");
            if text.len() <= cap {
                prop_assert_eq!(cut.as_ref(), text.as_str());
            } else {
                let kept = cut.rfind("…[cut by inquest: ").map(|i| &cut[..i]);
                let kept = kept.unwrap_or_default();
                prop_assert!(kept.len() <= cap);
                prop_assert!(text.starts_with(kept));
                let dropped = text.len() - kept.len();
                prop_assert!(dropped >= 1);
                prop_assert_eq!(&cut[kept.len()..], marker(dropped as u64, "x"));
                prop_assert!(cut.len() <= cap + marker_len(dropped as u64, "x"));
                // The cut is as long as it can be: one more char would not fit.
                let next = text[kept.len()..].chars().next().map_or(0, char::len_utf8);
                prop_assert!(kept.len() + next > cap);
            }
        }
    }
}
