//! Builds the status of every refusal Inquest sends, with its ErrorInfo
//! (the vocabulary, [`Reason`] and [`key`], is the wire contract in
//! `inquest_proto::reason`). Every status the service, the watch stream and
//! the transport layer build goes through [`status`]: its message is
//! redacted and bounded.

use std::collections::HashMap;

pub use inquest_proto::reason::{ERROR_DOMAIN, ErrorReason, Reason, key};
use tonic::{Code, Status, metadata::MetadataMap};
use tonic_types::{ErrorDetails, StatusExt};

/// ErrorInfo metadata, in the order given.
pub type Metadata = Vec<(&'static str, String)>;

/// The most characters of a caller's value a message quotes.
const EXCERPT_CHARS: usize = 64;
/// The most characters a status message carries.
const MAX_MESSAGE_CHARS: usize = 1024;
/// The most characters one ErrorInfo metadata value carries.
const MAX_METADATA_CHARS: usize = 256;

/// A caller's value quoted for an error message: its first
/// [`EXCERPT_CHARS`] characters, and its length when it was cut.
pub fn excerpt(text: &str) -> String {
    let mut chars = text.char_indices();
    match chars.nth(EXCERPT_CHARS) {
        None => format!("{text:?}"),
        Some((end, _)) => format!("{:?}... ({} bytes)", &text[..end], text.len()),
    }
}

/// `text` cut to `max` characters. The message travels twice in the
/// response headers (grpc-message and grpc-status-details-bin), and a
/// header list over HTTP/2's default 16 KiB reaches the client as a
/// protocol error instead of this status.
fn bounded(mut text: String, max: usize) -> String {
    if let Some((end, _)) = text.char_indices().nth(max) {
        text.truncate(end);
        text.push_str("...");
    }
    text
}

/// A status with an ErrorInfo of `reason` and `metadata`. `details` adds
/// other details (RetryInfo); `trailers` is plain trailing metadata for
/// clients that read no details. Message and metadata are bounded, so a
/// status never outgrows the response headers.
pub fn status_with(
    code: Code,
    reason: Reason,
    message: impl Into<String>,
    metadata: Metadata,
    mut details: ErrorDetails,
    trailers: MetadataMap,
) -> Status {
    details.set_error_info(
        reason.as_str(),
        ERROR_DOMAIN,
        metadata
            .into_iter()
            .map(|(k, v)| (k.to_owned(), bounded(v, MAX_METADATA_CHARS)))
            .collect::<HashMap<_, _>>(),
    );
    // Redact before cutting: a cut could split a secret past recognition.
    let message = message.into();
    let message = bounded(
        inquest_redact::redact(&message).into_owned(),
        MAX_MESSAGE_CHARS,
    );
    Status::with_error_details_and_metadata(code, message, details, trailers)
}

/// A status with an ErrorInfo of `reason` and `metadata`.
pub fn status(
    code: Code,
    reason: Reason,
    message: impl Into<String>,
    metadata: Metadata,
) -> Status {
    status_with(
        code,
        reason,
        message,
        metadata,
        ErrorDetails::new(),
        MetadataMap::new(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_carries_its_reason_back() {
        let s = status(
            Code::Aborted,
            Reason::WatcherLagged,
            "behind",
            vec![(key::AFTER_SEQ, "7".into())],
        );
        let r = ErrorReason::of(&s).unwrap();
        assert_eq!(r.reason, Reason::WatcherLagged);
        assert_eq!(r.number(key::AFTER_SEQ), Some(7));
        assert_eq!(s.code(), Code::Aborted);
        assert_eq!(s.message(), "behind");
    }

    #[test]
    fn an_excerpt_quotes_short_values_whole_and_cuts_long_ones() {
        assert_eq!(excerpt("viewer\0"), "\"viewer\\0\"");
        let long = "é".repeat(10_000);
        let e = excerpt(&long);
        assert!(e.starts_with(&format!("{:?}", "é".repeat(EXCERPT_CHARS))));
        assert!(e.ends_with("... (20000 bytes)"), "{e}");
    }

    #[test]
    fn a_status_stays_small_whatever_its_message_and_metadata() {
        let huge = "ü".repeat(1 << 20);
        let s = status(
            Code::InvalidArgument,
            Reason::InvalidInput,
            huge.clone(),
            vec![(key::SESSION_ID, huge)],
        );
        assert_eq!(s.message().chars().count(), MAX_MESSAGE_CHARS + 3);
        let r = ErrorReason::of(&s).unwrap();
        assert_eq!(r.reason, Reason::InvalidInput);
        assert!(s.details().len() < 4 * (MAX_MESSAGE_CHARS + MAX_METADATA_CHARS));
    }
}
