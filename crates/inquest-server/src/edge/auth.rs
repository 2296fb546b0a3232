//! `[auth]`: bearer tokens on every `inquest.v1.Investigations` call.
//!
//! `mode = "none"` (the default) lets every caller in as the `default`
//! tenant's admin; it is refused on a non-loopback listener unless
//! `--insecure-no-auth` is given, and then warned about at every start.
//! `mode = "required"`: every call carries `authorization: Bearer
//! inq_<id>_<secret>` (an API token from `inquest token create`). A missing,
//! malformed, unknown, expired or revoked token is UNAUTHENTICATED; a valid
//! token whose role may not call the method ([`required_role`], from the
//! proto's `required_role` option) is PERMISSION_DENIED; either way the call never reaches
//! the service, so nothing is written. Health and reflection are separate
//! services and stay open.
//!
//! With `[auth.oidc]` a bearer value may also be a JWT from an OpenID
//! Connect provider (`crate::edge::oidc`): a value starting `inq_` is an API
//! token, one with two dots a JWT, anything else malformed. Both kinds give
//! the same [`Principal`] and go through the same role check.
//!
//! API tokens are verified against the replica's in-memory read of the
//! live tokens (`edge/tokens.rs`): a revocation (a row update any replica
//! can make) takes effect on every replica within [`VERIFY_CACHE_TTL`],
//! a valid token costs no database read per call, and a failing one costs
//! at most a share of one read per `MIN_REREAD`, in the same time whether
//! or not its id exists. The caller's [`Principal`] rides in the request's
//! extensions.

use std::{
    convert::Infallible,
    future::Future,
    net::IpAddr,
    pin::Pin,
    sync::{Arc, Mutex, PoisonError},
    task::{Context, Poll},
    time::Duration,
};

use inquest_auth::{PresentedToken, Principal, Role};
use inquest_proto::{rpc::Rpc, v1::RequiredRole};
use inquest_store::{ApiToken, Store};
use serde::Deserialize;
use tonic::{
    Code,
    codegen::{Service, http},
    server::NamedService,
};

use crate::edge::tokens::{FailureGate, TokenTable, Unreadable};
use crate::reason::{Reason, status};

/// The least role that may call `rpc`: the `required_role` option its
/// proto declares (the proto crate's build refuses an rpc without one).
pub fn required_role(rpc: Rpc) -> Role {
    match rpc.required_role() {
        RequiredRole::Viewer => Role::Viewer,
        RequiredRole::Operator => Role::Operator,
        RequiredRole::Admin => Role::Admin,
        // Never generated (the build refuses it); closed if it ever were.
        RequiredRole::Unspecified => Role::Admin,
    }
}

pub use crate::edge::tokens::VERIFY_CACHE_TTL;

/// `[auth]`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct AuthSection {
    pub mode: AuthMode,
    /// Set by `serve --insecure-no-auth`: allows `mode = "none"` on a
    /// non-loopback listener.
    #[serde(skip)]
    pub insecure_no_auth: bool,
    /// `[auth.oidc]`: also accept JWTs from an OpenID Connect provider
    /// (needs `mode = "required"`).
    pub oidc: Option<crate::edge::oidc::OidcSection>,
}

#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum AuthMode {
    #[default]
    None,
    Required,
}

impl AuthSection {
    /// Whether serving on `listen` with this section is allowed.
    pub fn check(&self, listen: std::net::SocketAddr) -> Result<(), String> {
        self.validate()?;
        if self.mode == AuthMode::None && !listen.ip().is_loopback() && !self.insecure_no_auth {
            return Err(format!(
                "refusing to serve {listen} without authentication: set [auth] mode = \"required\" \
                 (and create a token with `inquest token create`), or pass --insecure-no-auth"
            ));
        }
        Ok(())
    }

    /// The checks that need no listener: `[auth.oidc]` only with
    /// `mode = "required"` (with `none` it would be silently ignored and
    /// every caller let in), and its own keys.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(oidc) = &self.oidc {
            if self.mode != AuthMode::Required {
                return Err(
                    "[auth.oidc] is set but [auth] mode is \"none\": set mode = \"required\""
                        .into(),
                );
            }
            oidc.validate()?;
        }
        Ok(())
    }
}

/// Verifies tokens against the live tokens (`edge/tokens.rs`).
#[derive(Clone)]
pub struct Verifier {
    table: Arc<TokenTable>,
    failures: Arc<FailureGate>,
    /// `[auth.oidc]`: the JWT verifier (none: only API tokens).
    oidc: Option<crate::edge::oidc::Oidc>,
}

/// Why a call was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    Unauthenticated(&'static str),
    Denied { role: Role, required: Role },
    Unavailable,
}

impl Verifier {
    pub fn new(store: Store) -> Self {
        Self {
            table: Arc::new(TokenTable::new(store)),
            failures: Arc::default(),
            oidc: None,
        }
    }

    /// Also accepts JWTs `oidc` verifies.
    pub fn with_oidc(mut self, oidc: crate::edge::oidc::Oidc) -> Self {
        self.oidc = Some(oidc);
        self
    }

    pub fn oidc(&self) -> Option<&crate::edge::oidc::Oidc> {
        self.oidc.as_ref()
    }

    /// The caller that `authorization` names, presented from `peer`.
    pub async fn principal(
        &self,
        authorization: Option<&[u8]>,
        peer: Option<IpAddr>,
    ) -> Result<Principal, Refusal> {
        let header = authorization.ok_or(Refusal::Unauthenticated("no authorization metadata"))?;
        let header = std::str::from_utf8(header)
            .map_err(|_| Refusal::Unauthenticated("authorization is not text"))?;
        let token = bearer(header).ok_or(Refusal::Unauthenticated(
            "authorization is not \"Bearer <token>\"",
        ))?;
        if token.starts_with("inq_") {
            return self.api_token(token, peer).await;
        }
        if token.bytes().filter(|b| *b == b'.').count() == 2 {
            let Some(oidc) = &self.oidc else {
                return Err(Refusal::Unauthenticated(
                    "a JWT, but this server accepts only API tokens ([auth.oidc] is not set)",
                ));
            };
            return oidc.principal(token).await.map_err(|e| {
                tracing::debug!(reason = e.message(), "refused a JWT");
                Refusal::Unauthenticated(e.message())
            });
        }
        Err(Refusal::Unauthenticated("malformed token"))
    }

    /// The caller an `inq_` API token names. Every way to fail takes the
    /// same path, and so the same time (see `edge/tokens.rs`).
    async fn api_token(&self, token: &str, peer: Option<IpAddr>) -> Result<Principal, Refusal> {
        let presented = PresentedToken::parse(token)
            .map_err(|_| Refusal::Unauthenticated("malformed token"))?;
        let arrived = tokio::time::Instant::now();
        let trusted_since = arrived.checked_sub(VERIFY_CACHE_TTL).unwrap_or(arrived);
        let table = self
            .table
            .read_since(trusted_since)
            .await
            .map_err(|Unreadable| Refusal::Unavailable)?;
        if let Some(p) = accept(&presented, table.get(presented.id)) {
            return Ok(p);
        }
        let Some(_waiting) = self.failures.enter(peer) else {
            metrics::counter!("inquest_auth_failures_total", "why" => "throttled").increment(1);
            return Err(Refusal::Unauthenticated(
                "too many failed authentications at once; retry later",
            ));
        };
        metrics::counter!("inquest_auth_failures_total", "why" => "refused").increment(1);
        // Made or changed a moment ago, perhaps on another replica: a read
        // that started after this call arrived decides.
        let table = self
            .table
            .read_since(arrived)
            .await
            .map_err(|Unreadable| Refusal::Unavailable)?;
        let principal = match table.get(presented.id) {
            Some(stored) => accept(&presented, Some(stored)),
            None if !table.complete => {
                let found = self
                    .table
                    .find(presented.id)
                    .await
                    .map_err(|Unreadable| Refusal::Unavailable)?;
                accept(&presented, found.as_ref())
            }
            None => None,
        };
        principal.ok_or(Refusal::Unauthenticated(
            "unknown, expired or revoked token",
        ))
    }
}

/// The caller `presented` is, if `stored` is its live token. The secret
/// is hashed and compared whether or not there is a stored token, so an
/// unknown id costs what a wrong secret does.
fn accept(presented: &PresentedToken, stored: Option<&ApiToken>) -> Option<Principal> {
    const NO_HASH: [u8; 32] = [0; 32];
    let matches = presented.matches(stored.map_or(&NO_HASH[..], |t| &t.secret_hash[..]));
    let stored = stored?;
    (matches && stored.live_at(time::OffsetDateTime::now_utc())).then(|| Principal {
        subject: stored.id.to_string(),
        name: stored.name.clone(),
        tenant: stored.tenant.clone(),
        role: stored.role,
    })
}

/// `Bearer <token>`: the scheme in any case, exactly one space, and a
/// token with no white space in or around it (one spelling per credential).
fn bearer(header: &str) -> Option<&str> {
    let (scheme, token) = header.split_once(' ')?;
    let clean = !token.is_empty() && !token.contains(|c: char| c.is_ascii_whitespace());
    (scheme.eq_ignore_ascii_case("bearer") && clean).then_some(token)
}

/// How often a repeated failure is logged (with how many there were).
const LOG_EVERY: Duration = Duration::from_secs(10);

/// Counts occurrences and says when to log: the first, then at most once
/// per [`LOG_EVERY`], with the count since the last line.
#[derive(Default)]
pub(crate) struct Sampled {
    /// A std mutex: a counter and an instant, never held across an await.
    state: Mutex<(u64, Option<tokio::time::Instant>)>,
}

impl Sampled {
    /// One more occurrence: `Some(count since the last line)` when this one
    /// should be logged.
    pub(crate) fn tick(&self) -> Option<u64> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.0 += 1;
        let due = state.1.is_none_or(|at| at.elapsed() >= LOG_EVERY);
        due.then(|| {
            state.1 = Some(tokio::time::Instant::now());
            std::mem::take(&mut state.0)
        })
    }
}

/// The investigations service behind token checks (`None`: mode none).
#[derive(Clone)]
pub struct Authenticated<S> {
    inner: S,
    verifier: Option<Verifier>,
    /// Without a verifier on a loopback listener: the names answered
    /// (`crate::edge::hosts`). `None`: every name.
    hosts: Option<Arc<crate::edge::hosts::AllowedHosts>>,
}

impl<S> Authenticated<S> {
    pub fn new(inner: S, verifier: Option<Verifier>) -> Self {
        Self {
            inner,
            verifier,
            hosts: None,
        }
    }

    /// Answers only requests to `hosts` (a loopback server without
    /// authentication).
    pub fn answering(mut self, hosts: crate::edge::hosts::AllowedHosts) -> Self {
        self.hosts = Some(Arc::new(hosts));
        self
    }
}

impl<S: NamedService> NamedService for Authenticated<S> {
    const NAME: &'static str = S::NAME;
}

fn refused(refusal: Refusal) -> http::Response<tonic::body::Body> {
    let status = match refusal {
        Refusal::Unauthenticated(why) => status(
            Code::Unauthenticated,
            Reason::Unauthenticated,
            format!("authentication required: {why}"),
            vec![],
        ),
        Refusal::Denied { role, required } => status(
            Code::PermissionDenied,
            Reason::PermissionDenied,
            format!("a {role} token may not call this method; it needs {required}"),
            vec![
                ("role", role.to_string()),
                ("required", required.to_string()),
            ],
        ),
        Refusal::Unavailable => status(
            Code::Unavailable,
            Reason::StoreUnavailable,
            "cannot verify the token now; retry",
            vec![],
        ),
    };
    status.into_http()
}

/// A request to a name a server without authentication does not answer.
fn refused_host(why: String) -> http::Response<tonic::body::Body> {
    status(Code::PermissionDenied, Reason::HostNotAllowed, why, vec![]).into_http()
}

impl<S, B> Service<http::Request<B>> for Authenticated<S>
where
    S: Service<http::Request<B>, Response = http::Response<tonic::body::Body>, Error = Infallible>
        + NamedService
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        if let Some(why) = self.hosts.as_ref().and_then(|h| h.refuse(&request)) {
            metrics::counter!("inquest_requests_refused_total", "why" => "host").increment(1);
            return Box::pin(std::future::ready(Ok(refused_host(why))));
        }
        let Some(verifier) = self.verifier.clone() else {
            request.extensions_mut().insert(Principal::anonymous());
            return Box::pin(self.inner.call(request));
        };
        // The service that was made ready serves this call; a clone is
        // left for the next one (tower's rule for async work before call).
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        // A path that is no method of the service (tonic answers
        // UNIMPLEMENTED) still needs the highest role: an unknown name
        // learns nothing about what exists without a credential.
        let required = Rpc::from_path(request.uri().path()).map_or(Role::Admin, required_role);
        // Put there by `edge/conn.rs`'s request counting layer.
        let peer = request
            .extensions()
            .get::<tonic::transport::server::TcpConnectInfo>()
            .and_then(tonic::transport::server::TcpConnectInfo::remote_addr)
            .map(|a| a.ip());
        Box::pin(async move {
            // Exactly one credential: with two, which one decides would
            // depend on the proxy in between.
            let mut headers = request
                .headers()
                .get_all(http::header::AUTHORIZATION)
                .iter();
            let header = headers.next().map(|v| v.as_bytes().to_vec());
            if headers.next().is_some() {
                return Ok(refused(Refusal::Unauthenticated(
                    "more than one authorization header",
                )));
            }
            let principal = match verifier.principal(header.as_deref(), peer).await {
                Ok(p) => p,
                Err(r) => return Ok(refused(r)),
            };
            if principal.role < required {
                return Ok(refused(Refusal::Denied {
                    role: principal.role,
                    required,
                }));
            }
            request.extensions_mut().insert(principal);
            inner.call(request).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(presented: &PresentedToken) -> ApiToken {
        ApiToken {
            id: presented.id,
            name: "ci".into(),
            tenant: "default".into(),
            role: Role::Viewer,
            created_at: time::OffsetDateTime::UNIX_EPOCH,
            expires_at: None,
            revoked_at: None,
            secret_hash: presented.secret_hash().to_vec(),
        }
    }

    #[test]
    fn only_the_live_token_with_the_right_secret_is_accepted() {
        let presented = PresentedToken::new(uuid::Uuid::new_v4(), [7; 32]);
        let stored = token(&presented);
        let p = accept(&presented, Some(&stored)).expect("the right secret");
        assert_eq!((p.tenant.as_str(), p.role), ("default", Role::Viewer));
        let wrong = PresentedToken::new(presented.id, [8; 32]);
        assert!(accept(&wrong, Some(&stored)).is_none(), "a wrong secret");
        assert!(accept(&presented, None).is_none(), "an unknown id");
        let revoked = ApiToken {
            revoked_at: Some(time::OffsetDateTime::UNIX_EPOCH),
            ..stored.clone()
        };
        assert!(accept(&presented, Some(&revoked)).is_none(), "revoked");
        let expired = ApiToken {
            expires_at: Some(time::OffsetDateTime::UNIX_EPOCH),
            ..stored
        };
        assert!(accept(&presented, Some(&expired)).is_none(), "expired");
    }

    #[tokio::test(start_paused = true)]
    async fn a_repeated_failure_is_logged_once_per_interval_with_its_count() {
        let sampled = Sampled::default();
        assert_eq!(sampled.tick(), Some(1), "the first is logged");
        for _ in 0..999 {
            assert_eq!(sampled.tick(), None);
        }
        tokio::time::advance(LOG_EVERY).await;
        assert_eq!(sampled.tick(), Some(1000), "then one line with the count");
        assert_eq!(sampled.tick(), None);
    }

    #[test]
    fn a_bearer_credential_has_one_spelling() {
        assert_eq!(bearer("Bearer inq_x"), Some("inq_x"));
        assert_eq!(bearer("bearer inq_x"), Some("inq_x"));
        assert_eq!(bearer("BEARER inq_x"), Some("inq_x"));
        for refused in [
            "Bearer  inq_x",
            "Bearer inq_x ",
            "Bearer\tinq_x",
            "Bearer inq_x\t",
            "Bearer inq_ x",
            "Bearer ",
            "Bearer",
            "Basic inq_x",
            "Bearerinq_x",
        ] {
            assert_eq!(bearer(refused), None, "{refused:?}");
        }
    }
}
