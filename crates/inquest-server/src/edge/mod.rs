//! What every call passes before it reaches the service: bearer tokens and
//! roles ([`auth`]), OpenID Connect JWTs ([`oidc`]), and TLS ([`tls`]).

pub mod auth;
pub mod oidc;
pub mod tls;
