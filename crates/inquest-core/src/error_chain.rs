//! The one way an error is rendered for a log line or a status message:
//! the error and its `source()` causes, `: `-separated.

use std::error::Error;

/// `error` and its causes on one line. A cause whose text the line already
/// holds (an error that prints its source) is not repeated.
pub fn error_chain(error: &dyn Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("{text}")]
    struct Layer {
        text: &'static str,
        #[source]
        source: Option<Box<Layer>>,
    }

    fn layer(text: &'static str, source: Option<Layer>) -> Layer {
        Layer {
            text,
            source: source.map(Box::new),
        }
    }

    #[test]
    fn causes_follow_the_error_once_each() {
        let e = layer(
            "store failed",
            Some(layer("connection reset", Some(layer("os error 104", None)))),
        );
        assert_eq!(
            error_chain(&e),
            "store failed: connection reset: os error 104"
        );
        let repeats = layer("call failed: timeout", Some(layer("timeout", None)));
        assert_eq!(error_chain(&repeats), "call failed: timeout");
    }
}
