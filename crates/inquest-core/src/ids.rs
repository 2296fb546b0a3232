//! Typed ids. An incident id can never be passed where a session id is
//! expected, and an id only exists once its text parsed as a UUID.

use std::fmt;

use uuid::Uuid;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    #[error("{what} is required")]
    Missing { what: &'static str },
    #[error("{what} {value:?} is not a UUID")]
    Malformed { what: &'static str, value: String },
}

macro_rules! uuid_id {
    ($(#[$doc:meta])* $name:ident, $what:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(Uuid);

        impl $name {
            /// A fresh id (UUIDv7, so ids sort by creation time).
            pub fn new() -> Self {
                Self(Uuid::now_v7())
            }

            /// Parses an id as it arrives on the wire.
            pub fn parse(text: &str) -> Result<Self, IdError> {
                let text = text.trim();
                if text.is_empty() {
                    return Err(IdError::Missing { what: $what });
                }
                Uuid::try_parse(text).map(Self).map_err(|_| IdError::Malformed {
                    what: $what,
                    value: text.chars().take(64).collect(),
                })
            }

            /// Wraps a UUID read back from the store.
            pub fn from_uuid(id: Uuid) -> Self {
                Self(id)
            }

            pub fn as_uuid(&self) -> &Uuid {
                &self.0
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}

uuid_id!(
    /// Identifies an incident, the thing being investigated.
    IncidentId,
    "incident_id"
);
uuid_id!(
    /// Identifies one investigation thread of an incident.
    SessionId,
    "session_id"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_uuid_text() {
        let id = SessionId::new();
        assert_eq!(SessionId::parse(&id.to_string()), Ok(id));
    }

    #[test]
    fn empty_is_missing_and_garbage_is_malformed() {
        assert_eq!(
            IncidentId::parse("  "),
            Err(IdError::Missing {
                what: "incident_id"
            })
        );
        assert!(matches!(
            SessionId::parse("not-a-uuid"),
            Err(IdError::Malformed {
                what: "session_id",
                ..
            })
        ));
    }
}
