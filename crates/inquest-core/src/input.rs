//! Validated user input. Each type can only be built through `parse`, so a
//! value that reaches the store has already passed every check.

/// Size limits applied to what users send. Configured on the server
/// (`[limits]` in the TOML config).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest accepted user message or incident description, in bytes of
    /// UTF-8.
    pub max_message_bytes: usize,
    /// Messages a session holds queued (`SendMessage` with `if_running =
    /// ENQUEUE`) while a burst is pending or running; one more is refused.
    pub max_queued_messages: usize,
}

impl Limits {
    /// Largest accepted incident title, in bytes.
    pub const MAX_TITLE_BYTES: usize = 500;
    /// Largest accepted idempotency key, in bytes.
    pub const MAX_IDEMPOTENCY_KEY_BYTES: usize = 200;
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_message_bytes: 32 * 1024,
            max_queued_messages: 20,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    #[error("{what} must not be empty")]
    Empty { what: &'static str },
    #[error("{what} is {len} bytes, over the limit of {limit} bytes")]
    TooLong {
        what: &'static str,
        len: usize,
        limit: usize,
    },
    #[error("{what} must not contain NUL characters")]
    Nul { what: &'static str },
}

fn check(what: &'static str, text: &str, limit: usize) -> Result<(), InputError> {
    if text.trim().is_empty() {
        return Err(InputError::Empty { what });
    }
    if text.len() > limit {
        return Err(InputError::TooLong {
            what,
            len: text.len(),
            limit,
        });
    }
    // NUL is allowed: the store keeps text PostgreSQL refuses losslessly
    // (`inquest-store/src/text.rs`).
    Ok(())
}

/// A non-empty user message within the configured size limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserMessage(String);

impl UserMessage {
    pub fn parse(text: String, limits: &Limits) -> Result<Self, InputError> {
        check("message", &text, limits.max_message_bytes)?;
        Ok(Self(text))
    }

    /// A message the store kept while it was queued: it passed
    /// [`UserMessage::parse`] when it was sent, under the limits then.
    pub fn from_stored(text: String) -> Self {
        Self(text)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

/// The title and description of a new incident.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncidentText {
    title: String,
    description: String,
}

impl IncidentText {
    /// The title is required; the description may be empty.
    pub fn parse(title: String, description: String, limits: &Limits) -> Result<Self, InputError> {
        check("title", &title, Limits::MAX_TITLE_BYTES)?;
        if !description.is_empty() {
            check("description", &description, limits.max_message_bytes)?;
        }
        Ok(Self {
            title: title.trim().to_owned(),
            description,
        })
    }

    pub fn title(&self) -> &str {
        &self.title
    }

    pub fn description(&self) -> &str {
        &self.description
    }
}

/// A client-chosen key that makes a create call safe to retry.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    /// An empty key means "no key": the call is not deduplicated.
    pub fn parse_optional(text: String) -> Result<Option<Self>, InputError> {
        if text.is_empty() {
            return Ok(None);
        }
        check("idempotency_key", &text, Limits::MAX_IDEMPOTENCY_KEY_BYTES)?;
        // A key is an opaque token the client picks, looked up as stored:
        // NUL, which PostgreSQL text cannot hold, is refused rather than
        // encoded.
        if text.contains('\0') {
            return Err(InputError::Nul {
                what: "idempotency_key",
            });
        }
        Ok(Some(Self(text)))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_limits() {
        let limits = Limits {
            max_message_bytes: 8,
            ..Limits::default()
        };
        assert!(UserMessage::parse("hello".into(), &limits).is_ok());
        assert_eq!(
            UserMessage::parse(" \n".into(), &limits),
            Err(InputError::Empty { what: "message" })
        );
        assert!(matches!(
            UserMessage::parse("123456789".into(), &limits),
            Err(InputError::TooLong {
                len: 9,
                limit: 8,
                ..
            })
        ));
        // NUL is content like any other (the store keeps it losslessly).
        assert_eq!(
            UserMessage::parse("a\0b".into(), &limits).map(UserMessage::into_string),
            Ok("a\0b".to_owned())
        );
    }

    #[test]
    fn idempotency_key_is_optional() {
        assert_eq!(IdempotencyKey::parse_optional(String::new()), Ok(None));
        assert!(
            IdempotencyKey::parse_optional("k-1".into())
                .unwrap()
                .is_some()
        );
        assert!(IdempotencyKey::parse_optional("x".repeat(201)).is_err());
        assert_eq!(
            IdempotencyKey::parse_optional("k\0".into()),
            Err(InputError::Nul {
                what: "idempotency_key"
            })
        );
    }

    #[test]
    fn incident_needs_a_title() {
        let l = Limits::default();
        assert!(IncidentText::parse(String::new(), "d".into(), &l).is_err());
        let t = IncidentText::parse(" Disk full ".into(), String::new(), &l).unwrap();
        assert_eq!(t.title(), "Disk full");
        let t = IncidentText::parse("a\0b".into(), "c\0".into(), &l).unwrap();
        assert_eq!((t.title(), t.description()), ("a\0b", "c\0"));
    }
}
