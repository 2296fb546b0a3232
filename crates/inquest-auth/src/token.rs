//! Who a caller is: roles and the API token format. Pure: the store keeps
//! tokens, the server checks them (which role each method needs is the
//! proto's `required_role` option, read by the server).
//!
//! An API token is `inq_<id>_<secret>`: the token's id (a UUID, 32 hex
//! digits) and a random 256-bit secret (64 hex digits). Only the SHA-256 of
//! the secret is stored; a presented token is found by its id and its
//! secret's hash compared in constant time. The id in the token makes the
//! lookup one primary-key read and lets an operator revoke a token by the id
//! `inquest token list` shows, never by its secret.

use std::fmt;

use inquest_core::tenant::DEFAULT_TENANT;
use sha2::{Digest, Sha256};

/// What a caller may do. Each role may do everything the ones before it
/// may.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// Reads: Get*, List*, WatchSession, GetReport, GetRecoveryPlan.
    Viewer,
    /// Also starts, continues, cancels and messages sessions, creates
    /// incidents.
    Operator,
    /// Also manages tokens.
    Admin,
}

impl Role {
    pub const ALL: [Role; 3] = [Role::Viewer, Role::Operator, Role::Admin];

    pub const fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Operator => "operator",
            Role::Admin => "admin",
        }
    }

    pub fn parse(text: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.as_str() == text)
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Fills `out` from exactly `2 * out.len()` lower-case hex digits.
fn lower_hex(text: &str, out: &mut [u8]) -> Result<(), MalformedToken> {
    if text.len() != 2 * out.len() {
        return Err(MalformedToken);
    }
    let digit = |b: u8| match b {
        b'0'..=b'9' => Ok(b - b'0'),
        b'a'..=b'f' => Ok(b - b'a' + 10),
        _ => Err(MalformedToken),
    };
    for (byte, pair) in out.iter_mut().zip(text.as_bytes().chunks_exact(2)) {
        *byte = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Ok(())
}

/// Why a presented token is not a token at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not an Inquest API token (expected inq_<32 hex>_<64 hex>)")]
pub struct MalformedToken;

/// A token as presented: its id and its secret. `Debug` hides the secret.
#[derive(Clone, PartialEq, Eq)]
pub struct PresentedToken {
    pub id: uuid::Uuid,
    secret: [u8; 32],
}

impl fmt::Debug for PresentedToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PresentedToken")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl PresentedToken {
    /// Parses `inq_<id>_<secret>` in its one spelling, the one
    /// [`PresentedToken::format`] writes: lower-case hex digits only, so a
    /// token has exactly one valid text.
    pub fn parse(text: &str) -> Result<Self, MalformedToken> {
        let rest = text.strip_prefix("inq_").ok_or(MalformedToken)?;
        let (id, secret) = rest.split_once('_').ok_or(MalformedToken)?;
        let mut id_bytes = [0u8; 16];
        let mut secret_bytes = [0u8; 32];
        lower_hex(id, &mut id_bytes)?;
        lower_hex(secret, &mut secret_bytes)?;
        Ok(Self {
            id: uuid::Uuid::from_bytes(id_bytes),
            secret: secret_bytes,
        })
    }

    /// The token text for `id` and `secret` (what is shown once).
    pub fn format(id: uuid::Uuid, secret: &[u8; 32]) -> String {
        let hex: String = secret.iter().map(|b| format!("{b:02x}")).collect();
        format!("inq_{}_{hex}", id.simple())
    }

    pub fn new(id: uuid::Uuid, secret: [u8; 32]) -> Self {
        Self { id, secret }
    }

    /// What the store keeps: SHA-256 of the secret.
    pub fn secret_hash(&self) -> [u8; 32] {
        hash_secret(&self.secret)
    }

    /// Whether this token's secret hashes to `stored`, compared in
    /// constant time.
    pub fn matches(&self, stored: &[u8]) -> bool {
        constant_time_eq(&self.secret_hash(), stored)
    }
}

/// SHA-256 of a token secret.
pub fn hash_secret(secret: &[u8; 32]) -> [u8; 32] {
    let digest = Sha256::digest(secret);
    let mut out = [0u8; 32];
    out.copy_from_slice(&digest);
    out
}

/// Equal length and bytes, in time independent of where they differ.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Who is calling, once a token was verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// The token's id (or the JWT subject) and its name, for the audit.
    pub subject: String,
    pub name: String,
    pub tenant: String,
    pub role: Role,
}

impl Principal {
    /// The caller when authentication is off: the `default` tenant, admin.
    pub fn anonymous() -> Self {
        Self {
            subject: "anonymous".into(),
            name: "anonymous".into(),
            tenant: DEFAULT_TENANT.into(),
            role: Role::Admin,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn roles_are_ordered_and_parse_back() {
        assert!(Role::Viewer < Role::Operator && Role::Operator < Role::Admin);
        for r in Role::ALL {
            assert_eq!(Role::parse(r.as_str()), Some(r));
        }
    }

    #[test]
    fn malformed_tokens_are_refused() {
        for text in [
            "",
            "inq_",
            "Bearer x",
            "inq_0123_abcd",
            &format!("inq_{}_{}", "g".repeat(32), "0".repeat(64)),
            &format!("inq_{}_{}", "0".repeat(32), "z".repeat(64)),
            &format!("inq_{}_{}é", "0".repeat(32), "0".repeat(62)),
            // One spelling only: no upper case, no sign, no separators.
            &format!("inq_{}_{}", "A".repeat(32), "0".repeat(64)),
            &format!("inq_{}_{}", "0".repeat(32), "F".repeat(64)),
            &format!("inq_{}_+{}", "0".repeat(32), "0".repeat(63)),
            &format!("inq_{}_{}", "0".repeat(32), "+f".repeat(32)),
            &format!(
                "inq_{}-{}-{}_{}",
                "0".repeat(8),
                "0".repeat(4),
                "0".repeat(18),
                "0".repeat(64)
            ),
            &format!("inq_{}_{} ", "0".repeat(32), "0".repeat(64)),
        ] {
            assert_eq!(PresentedToken::parse(text), Err(MalformedToken), "{text}");
        }
    }

    proptest! {
        #[test]
        fn a_formatted_token_parses_back_and_matches_only_its_hash(
            id in any::<u128>(),
            secret in any::<[u8; 32]>(),
            other in any::<[u8; 32]>(),
        ) {
            let id = uuid::Uuid::from_u128(id);
            let text = PresentedToken::format(id, &secret);
            let token = PresentedToken::parse(&text).unwrap();
            prop_assert_eq!(token.id, id);
            prop_assert!(token.matches(&hash_secret(&secret)));
            prop_assert_eq!(token.matches(&hash_secret(&other)), secret == other);
            let shown = format!("{token:?}");
            prop_assert!(!shown.contains(&text[37..]));
        }
    }
}
