//! Who a caller is: roles, the API token format and the pure half of OIDC
//! (JWT/JWKS parsing and claim checks). Pure: no I/O. The store keeps
//! tokens ([`PresentedToken::secret_hash`]), the gRPC edge verifies them and
//! fetches JWKS; which role each RPC needs is the proto's `required_role`
//! option (`inquest_proto::rpc::Rpc`).
//!
//! Start at [`token`] (roles, `inq_<id>_<secret>`, [`Principal`]), then
//! [`jwt`]. Must not depend on: the store, the engine, the gRPC edge.

pub mod jwt;
pub mod token;

pub use token::{MalformedToken, PresentedToken, Principal, Role};
