//! What every call passes before it reaches the service: bearer tokens and
//! roles ([`auth`]), OpenID Connect JWTs ([`oidc`]), TLS ([`tls`]), and the
//! limits on plaintext connections ([`conn`]).

pub mod auth;
pub mod conn;
pub mod oidc;
pub mod tls;
