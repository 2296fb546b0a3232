//! How a failed call reads to the user, and what a watch does after one:
//! the code, the ErrorInfo reason, the server's message and the next step
//! ([`status_error`], [`Failure`]); whether a stream cut is worth a
//! reconnect and from which seq ([`should_reconnect`], [`reconnect_after`]).

use std::error::Error as _;

use inquest_proto::reason::{ErrorReason, Reason, key};

/// A failed call as the user reads it: code, the ErrorInfo reason, the
/// server's message, and what to do next where the reason says.
pub fn status_error(e: tonic::Status) -> anyhow::Error {
    let Some(r) = ErrorReason::of(&e) else {
        return anyhow::anyhow!("{}", Failure(&e));
    };
    let hint = match r.reason {
        Reason::SessionRunning => {
            "\nhint: wait for the burst to end (`inquest watch SESSION`) or `inquest session cancel SESSION`".to_owned()
        }
        Reason::AwaitingConfirmation => {
            "\nhint: review its recovery plan (`inquest session get SESSION`), then `inquest session continue SESSION` or `inquest session cancel SESSION`".to_owned()
        }
        // A watch's cursor names `after_seq`; a fork's at_seq does not.
        Reason::CursorBeyondHead => match (r.number(key::HEAD_SEQ), r.number(key::AFTER_SEQ)) {
            (Some(head), Some(_)) => format!("\nhint: use --after-seq {head} or lower"),
            (Some(head), None) => format!("\nhint: fork with --at {head} or lower"),
            (None, _) => String::new(),
        },
        Reason::Unauthenticated => {
            "\nhint: pass an API token with --token or INQUEST_TOKEN (`inquest token create` makes one)".to_owned()
        }
        Reason::NoModelProvider => {
            "\nhint: README \"The agent\" shows a [[providers]] table; `kind = \"script\"` needs no API key".to_owned()
        }
        Reason::WriteOutcomeUnknown => {
            "\nhint: it may have committed; retry with the same --idempotency-key".to_owned()
        }
        Reason::IdempotencyKeyReused => {
            "\nhint: use a new --idempotency-key for a new request".to_owned()
        }
        _ => String::new(),
    };
    anyhow::anyhow!("{:?} [{}]: {}{hint}", e.code(), r.reason, e.message())
}

/// A message that names no reason (the transport's own statuses) and
/// whose code alone says what to do.
fn code_hint(code: tonic::Code) -> &'static str {
    match code {
        tonic::Code::Unauthenticated => {
            "; pass an API token with --token or INQUEST_TOKEN (`inquest token create` makes one)"
        }
        _ => "",
    }
}

/// Whether a watch that failed with `status` is worth reopening: by its
/// ErrorInfo reason when it has one (a lagged watcher, a server shutting
/// down, a store outage, a takeover), else by code (the transport's own
/// failures carry no details).
pub fn should_reconnect(status: &tonic::Status) -> bool {
    match ErrorReason::of(status) {
        Some(r) => matches!(
            r.reason,
            Reason::WatcherLagged
                | Reason::ShuttingDown
                | Reason::StoreUnavailable
                | Reason::LeaseLost
                | Reason::TurnsLost
                | Reason::Internal
        ),
        None => matches!(
            status.code(),
            tonic::Code::Aborted
                | tonic::Code::Unavailable
                | tonic::Code::Unknown
                | tonic::Code::Internal
                | tonic::Code::Cancelled
        ),
    }
}

/// A failed call as one line: its code and message (not its binary
/// details).
pub struct Failure<'a>(pub &'a tonic::Status);

impl std::fmt::Display for Failure<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let message = self.0.message();
        // The transport's statuses carry their cause chain too (e.g.
        // "tcp connect error" over the same "tcp connect error").
        let cause = self
            .0
            .source()
            .map(inquest_core::error_chain)
            .filter(|c| !c.is_empty() && !message.contains(c.as_str()));
        write!(f, "{:?}: {message}", self.0.code())?;
        if let Some(cause) = cause {
            write!(f, ": {cause}")?;
        }
        if ErrorReason::of(self.0).is_none() {
            f.write_str(code_hint(self.0.code()))?;
        }
        Ok(())
    }
}

/// The cursor to reopen a watch with after `status`: the `after_seq` the
/// server names in its ErrorInfo (every turn up to it was sent), else the
/// last seq this client received. Never past what was received: a stream
/// cut between the server's send and our read must not skip turns.
pub fn reconnect_after(status: &tonic::Status, received: i64) -> i64 {
    ErrorReason::of(status)
        .and_then(|r| r.number(key::AFTER_SEQ))
        .map_or(received, |named| named.min(received))
}

#[cfg(test)]
mod tests {
    use inquest_proto::reason::{Reason, key};
    use inquest_server::reason;
    use tonic::{Code, Status};

    use super::*;

    #[test]
    fn unauthenticated_says_how_to_pass_a_token() {
        let text = status_error(Status::unauthenticated("no authorization metadata")).to_string();
        assert!(
            text.contains("--token") && text.contains("INQUEST_TOKEN"),
            "{text}"
        );
        let typed = reason::status(
            Code::Unauthenticated,
            Reason::Unauthenticated,
            "no authorization metadata",
            vec![],
        );
        let text = status_error(typed).to_string();
        assert!(
            text.contains("--token") && text.contains("INQUEST_TOKEN"),
            "{text}"
        );
    }

    #[test]
    fn a_watch_reconnects_by_reason_and_from_the_named_cursor() {
        let lagged = reason::status(
            Code::Aborted,
            Reason::WatcherLagged,
            "behind",
            vec![(key::AFTER_SEQ, "7".into())],
        );
        assert!(should_reconnect(&lagged));
        assert_eq!(reconnect_after(&lagged, 7), 7);
        // Never past what this client received.
        assert_eq!(reconnect_after(&lagged, 5), 5);
        let shutdown = reason::status(
            Code::Unavailable,
            Reason::ShuttingDown,
            "bye",
            vec![(key::AFTER_SEQ, "3".into())],
        );
        assert!(should_reconnect(&shutdown));
        assert_eq!(reconnect_after(&shutdown, 9), 3);
        // A refusal with a reason is not retried, whatever its code.
        let beyond = reason::status(
            Code::OutOfRange,
            Reason::CursorBeyondHead,
            "beyond",
            vec![(key::HEAD_SEQ, "4".into()), (key::AFTER_SEQ, "7".into())],
        );
        assert!(!should_reconnect(&beyond));
        assert!(status_error(beyond).to_string().contains("--after-seq 4"));
        // A fork's at_seq beyond the head names no cursor.
        let fork_beyond = reason::status(
            Code::OutOfRange,
            Reason::CursorBeyondHead,
            "beyond",
            vec![(key::HEAD_SEQ, "4".into())],
        );
        assert!(
            status_error(fork_beyond)
                .to_string()
                .contains("--at 4 or lower")
        );
        let not_found = reason::status(Code::NotFound, Reason::SessionNotFound, "no", vec![]);
        assert!(!should_reconnect(&not_found));
        // A transport failure has no details: its code decides.
        assert!(should_reconnect(&Status::unavailable("connection refused")));
        assert_eq!(reconnect_after(&Status::unavailable("x"), 6), 6);
        assert!(!should_reconnect(&Status::invalid_argument("x")));
    }

    #[test]
    fn errors_name_their_reason_and_what_to_do() {
        let held = reason::status(
            Code::FailedPrecondition,
            Reason::AwaitingConfirmation,
            "held",
            vec![],
        );
        let text = status_error(held).to_string();
        assert!(text.contains("[AWAITING_CONFIRMATION]"), "{text}");
        assert!(text.contains("inquest session continue"), "{text}");
        assert_eq!(
            status_error(Status::internal("boom")).to_string(),
            "Internal: boom"
        );
    }
}
