//! What an idempotency key is bound to: a fingerprint of the request that
//! first used it.
//!
//! A key's record (`idempotency_keys.request_hash`, migration V9) holds the
//! fingerprint of the first call's request. A retry with the same key and
//! the same request gets the first call's result; the same key with a
//! different request is refused (ALREADY_EXISTS) rather than answered with
//! a result that is not its own.
//!
//! The fingerprint is SHA-256 over an unambiguous encoding: a tag naming
//! the call and its encoding version, then each field as its length in
//! bytes (u64, big-endian) followed by its bytes. No two different requests
//! (field values or call) encode to the same bytes, so only a SHA-256
//! collision could make two of them match. The message is hashed as the
//! client sent it (U+0000 and all), never in the store's escaped form.

use sha2::{Digest, Sha256};

use crate::{IncidentId, UserMessage};

/// SHA-256 of a request's identifying fields; see the module docs.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct RequestFingerprint([u8; 32]);

impl RequestFingerprint {
    /// Length of a fingerprint in bytes.
    pub const LEN: usize = 32;

    /// `StartSession`: the incident and the opening message.
    pub fn start_session(incident: IncidentId, message: &UserMessage) -> Self {
        Self::of(
            "inquest.v1.StartSession/1",
            &[incident.as_uuid().as_bytes(), message.as_str().as_bytes()],
        )
    }

    /// `SendMessage`: the message (the session is the key's scope).
    pub fn send_message(message: &UserMessage) -> Self {
        Self::of("inquest.v1.SendMessage/1", &[message.as_str().as_bytes()])
    }

    /// `ForkSession`: the seq it forks at and the first message, if any
    /// (the source session is the key's scope). No message and an empty
    /// one cannot both reach here: an empty message is refused.
    pub fn fork_session(at_seq: u64, message: Option<&UserMessage>) -> Self {
        let at = at_seq.to_be_bytes();
        match message {
            Some(m) => Self::of(
                "inquest.v1.ForkSession/1",
                &[&at, b"message", m.as_str().as_bytes()],
            ),
            None => Self::of("inquest.v1.ForkSession/1", &[&at, b"none"]),
        }
    }

    /// `DecideToolCalls`: each decision (call id, approve?, comment) in
    /// the order sent (the session is the key's scope).
    pub fn decide_tool_calls<'a>(
        decisions: impl IntoIterator<Item = (&'a str, bool, &'a str)>,
    ) -> Self {
        let mut fields: Vec<&[u8]> = Vec::new();
        for (call_id, approve, comment) in decisions {
            fields.push(call_id.as_bytes());
            fields.push(if approve { b"approve" } else { b"deny" });
            fields.push(comment.as_bytes());
        }
        Self::of("inquest.v1.DecideToolCalls/1", &fields)
    }

    /// SHA-256 over `tag` and `fields`, each length-prefixed.
    fn of(tag: &str, fields: &[&[u8]]) -> Self {
        let mut hash = Sha256::new();
        for field in std::iter::once(tag.as_bytes()).chain(fields.iter().copied()) {
            hash.update((field.len() as u64).to_be_bytes());
            hash.update(field);
        }
        Self(hash.finalize().into())
    }

    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// A stored fingerprint; `None` unless it is [`Self::LEN`] bytes.
    pub fn from_stored(bytes: &[u8]) -> Option<Self> {
        bytes.try_into().ok().map(Self)
    }
}

impl std::fmt::Debug for RequestFingerprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RequestFingerprint(")?;
        for b in &self.0[..8] {
            write!(f, "{b:02x}")?;
        }
        f.write_str("…)")
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::Limits;

    fn msg(text: &str) -> UserMessage {
        UserMessage::parse(text.into(), &Limits::default()).unwrap()
    }

    fn hex(f: RequestFingerprint) -> String {
        f.as_bytes().iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn equal_requests_have_equal_fingerprints() {
        let incident = IncidentId::new();
        assert_eq!(
            RequestFingerprint::start_session(incident, &msg("disk full?")),
            RequestFingerprint::start_session(incident, &msg("disk full?"))
        );
        assert_eq!(
            RequestFingerprint::send_message(&msg("and now?")),
            RequestFingerprint::send_message(&msg("and now?"))
        );
    }

    #[test]
    fn any_differing_field_changes_the_fingerprint() {
        let (a, b) = (IncidentId::new(), IncidentId::new());
        let m = msg("disk full?");
        assert_ne!(
            RequestFingerprint::start_session(a, &m),
            RequestFingerprint::start_session(b, &m)
        );
        assert_ne!(
            RequestFingerprint::start_session(a, &m),
            RequestFingerprint::start_session(a, &msg("disk full?!"))
        );
        // The two calls never share a fingerprint, whatever their fields.
        assert_ne!(
            RequestFingerprint::send_message(&m),
            RequestFingerprint::start_session(a, &m)
        );
    }

    #[test]
    fn nul_and_escape_characters_are_hashed_as_sent() {
        // The store writes U+0000 as U+E000 '0' (inquest-store text.rs):
        // the fingerprint is of the original, so the two stay distinct.
        let nul = RequestFingerprint::send_message(&msg("a\0b"));
        assert_ne!(nul, RequestFingerprint::send_message(&msg("a\u{E000}0b")));
        assert_ne!(nul, RequestFingerprint::send_message(&msg("ab")));
        assert_eq!(nul, RequestFingerprint::send_message(&msg("a\0b")));
    }

    #[test]
    fn field_boundaries_are_unambiguous() {
        // Moving bytes from one field to the next changes the encoding.
        assert_ne!(
            RequestFingerprint::of("t", &[b"ab", b"c"]),
            RequestFingerprint::of("t", &[b"a", b"bc"])
        );
        assert_ne!(
            RequestFingerprint::of("t", &[b"ab"]),
            RequestFingerprint::of("t", &[b"a", b"b"])
        );
        assert_ne!(
            RequestFingerprint::of("t", &[b""]),
            RequestFingerprint::of("t", &[])
        );
        assert_ne!(
            RequestFingerprint::of("ta", &[b"b"]),
            RequestFingerprint::of("t", &[b"ab"])
        );
    }

    #[test]
    fn the_encoding_is_stable() {
        // Stored fingerprints outlive a deploy: this value must never
        // change (a change would refuse every retry across an upgrade).
        // Computed independently: sha256(u64be(24) "inquest.v1.SendMessage/1"
        // u64be(5) "hello").
        let f = RequestFingerprint::send_message(&msg("hello"));
        assert_eq!(
            hex(f),
            "5dbfd7b8f499d9d725292b661172cd137eb68ac209d1eb6e1faf69cc6de665e1"
        );
        assert_eq!(RequestFingerprint::from_stored(f.as_bytes()), Some(f));
        assert_eq!(RequestFingerprint::from_stored(&[0; 31]), None);
    }

    proptest! {
        #[test]
        fn splitting_fields_differently_never_collides(
            a in proptest::collection::vec(any::<u8>(), 0..16),
            b in proptest::collection::vec(any::<u8>(), 0..16),
            cut in 0usize..32,
        ) {
            // Re-split the concatenation a ++ b at another point: the
            // fingerprint differs unless the split is the same.
            let joined: Vec<u8> = a.iter().chain(&b).copied().collect();
            let cut = cut.min(joined.len());
            let (x, y) = joined.split_at(cut);
            let same = x == a.as_slice();
            prop_assert_eq!(
                RequestFingerprint::of("t", &[&a, &b]) == RequestFingerprint::of("t", &[x, y]),
                same
            );
        }

        #[test]
        fn distinct_messages_have_distinct_fingerprints(
            a in "[a-z\\x00\u{E000}]{1,12}",
            b in "[a-z\\x00\u{E000}]{1,12}",
        ) {
            prop_assume!(!a.trim().is_empty() && !b.trim().is_empty());
            let (fa, fb) = (
                RequestFingerprint::send_message(&msg(&a)),
                RequestFingerprint::send_message(&msg(&b)),
            );
            prop_assert_eq!(fa == fb, a == b);
        }
    }
}
