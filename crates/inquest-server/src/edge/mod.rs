//! What every call passes before it reaches the service: bearer tokens and
//! roles ([`auth`]) checked against the live tokens ([`tokens`]), OpenID
//! Connect JWTs ([`oidc`]), TLS ([`tls`]), the limits on every connection
//! ([`conn`]), and the names a server without authentication answers to
//! ([`hosts`]).

pub mod auth;
pub mod conn;
pub mod hosts;
pub mod oidc;
pub mod tls;
pub mod tokens;
