//! `[auth.oidc]`: JWT bearer tokens from an OpenID Connect provider,
//! verified against its JWKS.
//!
//! The pure half (splitting the JWS, JWKS → key material, claim checks) is
//! `inquest_auth::jwt`; this module loads the keys, keeps them fresh and
//! checks signatures with ring. A token is accepted when its header names
//! RS256 or ES256 and a `kid` the key set holds, the key's type matches the
//! algorithm, the signature verifies, and its claims pass
//! [`check_claims`] (issuer, audience, `exp`/`nbf` with `leeway`, `sub`,
//! tenant and role).
//!
//! Keys come from `jwks_url` (HTTP(S), bounded in time and size) or
//! `jwks_file`. They are loaded at startup, again every `refresh_interval`,
//! and when a token names a `kid` the set does not hold (at most once per
//! [`FORCED_REFRESH_GAP`], so a flood of made-up key ids cannot hammer the
//! provider). A load replaces the whole set, so a key the provider removed
//! stops verifying at the next load; a load that fails keeps the previous
//! set and is logged once until one succeeds again.
//!
//! At startup an unreadable or invalid `jwks_file` stops the server (it is
//! local configuration); an unreachable `jwks_url` does not (an identity
//! provider's outage must not keep every replica from starting): it is
//! logged as an error and JWTs are refused UNAUTHENTICATED until a load
//! succeeds. API tokens work throughout.

use std::{
    path::PathBuf,
    sync::{
        Arc, PoisonError, RwLock,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use anyhow::Context as _;
use inquest_auth::Principal;
use inquest_auth::jwt::{ClaimRules, Jwk, JwkSet, Jws, JwtError, KeyMaterial, check_claims};
use serde::Deserialize;
use tokio::io::AsyncReadExt as _;
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use inquest_core::duration_text;

/// The least time between two refreshes forced by an unknown `kid`.
pub const FORCED_REFRESH_GAP: Duration = Duration::from_secs(10);
/// The longest a JWKS fetch (connect, request, whole body) may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest JWKS document read; a provider's is a few KiB.
pub const MAX_JWKS_BYTES: u64 = 1024 * 1024;
/// The least `refresh_interval`.
const MIN_REFRESH_INTERVAL: Duration = Duration::from_millis(100);
/// The most `leeway`.
const MAX_LEEWAY: Duration = Duration::from_secs(300);

/// `[auth.oidc]`.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct OidcSection {
    /// The `iss` every token must carry, exactly.
    pub issuer: String,
    /// A value the token's `aud` (a string or an array) must hold.
    pub audience: String,
    /// Where the JWKS is served (http or https). Exactly one of this and
    /// `jwks_file`.
    #[serde(default)]
    pub jwks_url: Option<String>,
    /// A JWKS document on disk, read at startup and at every refresh.
    #[serde(default)]
    pub jwks_file: Option<PathBuf>,
    /// The claim naming the caller's tenant (a tenant name).
    #[serde(default = "default_tenant_claim")]
    pub tenant_claim: String,
    /// The claim naming the caller's role: `viewer`, `operator` or
    /// `admin`, or an array of them (the highest counts).
    #[serde(default = "default_role_claim")]
    pub role_claim: String,
    /// How often the keys are loaded again (default 5m).
    #[serde(default = "default_refresh_interval", with = "duration_text")]
    pub refresh_interval: Duration,
    /// Clock skew allowed on `exp` and `nbf` (default 30s, at most 5m).
    #[serde(default = "default_leeway", with = "duration_text")]
    pub leeway: Duration,
}

fn default_tenant_claim() -> String {
    "tenant".into()
}

fn default_role_claim() -> String {
    "role".into()
}

pub const DEFAULT_REFRESH_INTERVAL: Duration = Duration::from_secs(300);
pub const DEFAULT_LEEWAY: Duration = Duration::from_secs(30);

fn default_refresh_interval() -> Duration {
    DEFAULT_REFRESH_INTERVAL
}

fn default_leeway() -> Duration {
    DEFAULT_LEEWAY
}

impl OidcSection {
    /// A section with the defaults for everything but what must be given.
    pub fn new(issuer: &str, audience: &str, source: JwksSource) -> Self {
        let (jwks_url, jwks_file) = match source {
            JwksSource::Url(u) => (Some(u), None),
            JwksSource::File(f) => (None, Some(f)),
        };
        Self {
            issuer: issuer.into(),
            audience: audience.into(),
            jwks_url,
            jwks_file,
            tenant_claim: default_tenant_claim(),
            role_claim: default_role_claim(),
            refresh_interval: DEFAULT_REFRESH_INTERVAL,
            leeway: DEFAULT_LEEWAY,
        }
    }

    /// The checks startup makes; each error names the key.
    pub fn validate(&self) -> Result<(), String> {
        for (key, value) in [
            ("issuer", &self.issuer),
            ("audience", &self.audience),
            ("tenant_claim", &self.tenant_claim),
            ("role_claim", &self.role_claim),
        ] {
            if value.trim().is_empty() {
                return Err(format!("[auth.oidc] {key} must not be empty"));
            }
        }
        match (&self.jwks_url, &self.jwks_file) {
            (Some(_), Some(_)) => {
                return Err("[auth.oidc] sets both jwks_url and jwks_file; set exactly one".into());
            }
            (None, None) => {
                return Err(
                    "[auth.oidc] needs jwks_url (the provider's JWKS endpoint) or jwks_file".into(),
                );
            }
            (Some(url), None) => {
                let parsed = reqwest::Url::parse(url)
                    .map_err(|e| format!("[auth.oidc] jwks_url is not a URL: {e}"))?;
                if !matches!(parsed.scheme(), "http" | "https") || parsed.host().is_none() {
                    return Err(format!(
                        "[auth.oidc] jwks_url must be an http:// or https:// URL with a host, \
                         not {:?}",
                        parsed.scheme()
                    ));
                }
            }
            (None, Some(_)) => {}
        }
        if self.refresh_interval < MIN_REFRESH_INTERVAL {
            return Err(format!(
                "[auth.oidc] refresh_interval must be at least {MIN_REFRESH_INTERVAL:?}"
            ));
        }
        if self.leeway > MAX_LEEWAY {
            return Err(format!("[auth.oidc] leeway must be at most {MAX_LEEWAY:?}"));
        }
        Ok(())
    }

    fn source(&self) -> Option<JwksSource> {
        match (&self.jwks_url, &self.jwks_file) {
            (Some(u), None) => Some(JwksSource::Url(u.clone())),
            (None, Some(f)) => Some(JwksSource::File(f.clone())),
            _ => None,
        }
    }
}

/// Where the keys come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JwksSource {
    Url(String),
    File(PathBuf),
}

/// The JWT verifier: cheap to clone, one key set shared by every clone.
#[derive(Clone)]
pub struct Oidc {
    inner: Arc<Inner>,
}

struct Inner {
    section: OidcSection,
    source: Source,
    /// The current key set, replaced whole by each successful load. Read on
    /// every JWT call; a std lock, never held across an await.
    keys: RwLock<Arc<JwkSet>>,
    /// One load at a time (periodic and forced), so an older fetch cannot
    /// overwrite a newer one; a tokio mutex because it is held across it.
    loading: tokio::sync::Mutex<()>,
    /// When the last refresh forced by an unknown `kid` started. Held
    /// (tokio mutex) across that refresh, so concurrent calls with unknown
    /// ids wait for the one load and then look again.
    forced: tokio::sync::Mutex<Option<Instant>>,
    /// Whether the last load failed: a failure is logged when this turns
    /// true, a recovery when it turns false, nothing in between.
    failing: AtomicBool,
}

enum Source {
    File(PathBuf),
    Url {
        url: reqwest::Url,
        client: reqwest::Client,
    },
}

/// Installs rustls's `ring` provider as the process default once, unless
/// one is installed already (as the agent's HTTP clients do; reqwest with
/// `rustls-no-provider` uses the process default).
fn install_crypto_provider() {
    static INSTALL: std::sync::Once = std::sync::Once::new();
    INSTALL.call_once(|| {
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            // Err only if another thread installed one in between: fine.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
    });
}

impl Oidc {
    /// Validates `section` and loads the keys once (see the module comment
    /// for what a failed first load does).
    pub async fn start(section: &OidcSection) -> anyhow::Result<Self> {
        section.validate().map_err(anyhow::Error::msg)?;
        let source = match section.source() {
            Some(JwksSource::File(path)) => Source::File(path),
            Some(JwksSource::Url(url)) => {
                install_crypto_provider();
                let client = reqwest::Client::builder()
                    .timeout(FETCH_TIMEOUT)
                    .connect_timeout(FETCH_TIMEOUT / 2)
                    .build()
                    .context("building the JWKS HTTP client")?;
                let url = reqwest::Url::parse(&url).context("[auth.oidc] jwks_url")?;
                Source::Url { url, client }
            }
            None => anyhow::bail!("[auth.oidc] needs exactly one of jwks_url and jwks_file"),
        };
        let oidc = Self {
            inner: Arc::new(Inner {
                section: section.clone(),
                source,
                keys: RwLock::default(),
                loading: tokio::sync::Mutex::new(()),
                forced: tokio::sync::Mutex::new(None),
                failing: AtomicBool::new(false),
            }),
        };
        match oidc.fetch().await {
            Ok(set) => {
                tracing::info!(keys = ?set.kids(), skipped = set.skipped, "loaded the OIDC JWKS");
                oidc.replace(set);
            }
            Err(e) if matches!(oidc.inner.source, Source::File(_)) => {
                return Err(anyhow::anyhow!(e)
                    .context(format!("[auth.oidc] jwks_file {}", oidc.describe_source())));
            }
            Err(e) => {
                oidc.inner.failing.store(true, Ordering::Relaxed);
                tracing::error!(
                    jwks = %oidc.describe_source(),
                    error = %e,
                    "cannot load the OIDC JWKS; JWTs are refused until a refresh loads it"
                );
            }
        }
        Ok(oidc)
    }

    /// The caller a JWT names, or why it is refused.
    pub async fn principal(&self, token: &str) -> Result<Principal, JwtError> {
        let jws = Jws::parse(token)?;
        let key = self.key(&jws.kid).await?;
        if key.key.alg() != jws.alg {
            return Err(JwtError::KeyMismatch);
        }
        verify_signature(&key.key, jws.signing_input(), jws.signature())?;
        let s = &self.inner.section;
        let rules = ClaimRules {
            issuer: &s.issuer,
            audience: &s.audience,
            tenant_claim: &s.tenant_claim,
            role_claim: &s.role_claim,
            leeway_secs: s.leeway.as_secs(),
        };
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        let id = check_claims(jws.claims(), &rules, now)?;
        Ok(Principal {
            subject: id.subject,
            name: id.name,
            tenant: id.tenant.into_string(),
            role: id.role,
        })
    }

    fn current(&self) -> Arc<JwkSet> {
        Arc::clone(
            &self
                .inner
                .keys
                .read()
                .unwrap_or_else(PoisonError::into_inner),
        )
    }

    fn replace(&self, set: JwkSet) {
        *self
            .inner
            .keys
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Arc::new(set);
    }

    /// The key `kid` names, loading the set again first if it holds none
    /// by that id and no forced load happened in the last
    /// [`FORCED_REFRESH_GAP`].
    async fn key(&self, kid: &str) -> Result<Jwk, JwtError> {
        if let Some(k) = self.current().find(kid) {
            return Ok(k.clone());
        }
        let mut last = self.inner.forced.lock().await;
        // Another call may have loaded it while this one waited.
        if let Some(k) = self.current().find(kid) {
            return Ok(k.clone());
        }
        if last.is_none_or(|at| at.elapsed() >= FORCED_REFRESH_GAP) {
            *last = Some(Instant::now());
            tracing::debug!("a JWT names an unknown key id; loading the JWKS again");
            self.refresh().await;
        }
        let keys = self.current();
        match keys.find(kid) {
            Some(k) => Ok(k.clone()),
            None if keys.is_empty() => Err(JwtError::NoKeys),
            None => Err(JwtError::UnknownKey),
        }
    }

    /// Loads the keys; on failure keeps the old ones. Logs a failure once
    /// per run of failures. Returns whether it loaded.
    pub async fn refresh(&self) -> bool {
        let _one_at_a_time = self.inner.loading.lock().await;
        match self.fetch().await {
            Ok(set) => {
                if self.inner.failing.swap(false, Ordering::Relaxed) {
                    tracing::info!(keys = ?set.kids(), "loaded the OIDC JWKS again");
                } else {
                    tracing::debug!(keys = ?set.kids(), "refreshed the OIDC JWKS");
                }
                self.replace(set);
                true
            }
            Err(e) => {
                if !self.inner.failing.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        jwks = %self.describe_source(),
                        error = %e,
                        "cannot refresh the OIDC JWKS; keeping the keys loaded before"
                    );
                } else {
                    tracing::debug!(error = %e, "the OIDC JWKS still cannot be loaded");
                }
                false
            }
        }
    }

    /// Refreshes every `refresh_interval` until `shutdown`, in a task the
    /// server's tracker owns.
    pub fn spawn_refresher(&self, tasks: &TaskTracker, shutdown: CancellationToken) {
        let oidc = self.clone();
        let every = self.inner.section.refresh_interval;
        tasks.spawn(async move {
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    _ = tick.tick() => {}
                }
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    _ = oidc.refresh() => {}
                }
            }
        });
    }

    fn describe_source(&self) -> String {
        match &self.inner.source {
            Source::File(p) => p.display().to_string(),
            Source::Url { url, .. } => url.to_string(),
        }
    }

    async fn fetch(&self) -> Result<JwkSet, String> {
        let bytes = match &self.inner.source {
            Source::File(path) => read_file(path).await?,
            Source::Url { url, client } => fetch_url(client, url).await?,
        };
        JwkSet::parse(&bytes).map_err(|e| e.to_string())
    }
}

async fn read_file(path: &std::path::Path) -> Result<Vec<u8>, String> {
    let file = tokio::fs::File::open(path)
        .await
        .map_err(|e| format!("cannot open: {e}"))?;
    let mut bytes = Vec::new();
    file.take(MAX_JWKS_BYTES + 1)
        .read_to_end(&mut bytes)
        .await
        .map_err(|e| format!("cannot read: {e}"))?;
    if bytes.len() as u64 > MAX_JWKS_BYTES {
        return Err(format!("larger than {MAX_JWKS_BYTES} bytes"));
    }
    Ok(bytes)
}

async fn fetch_url(client: &reqwest::Client, url: &reqwest::Url) -> Result<Vec<u8>, String> {
    let mut response = client
        .get(url.clone())
        .header(reqwest::header::ACCEPT, "application/json")
        .send()
        .await
        .map_err(|e| inquest_core::error_chain(&e))?;
    let status = response.status();
    if !status.is_success() {
        return Err(format!("the JWKS endpoint answered {status}"));
    }
    if response
        .content_length()
        .is_some_and(|n| n > MAX_JWKS_BYTES)
    {
        return Err(format!("the JWKS is larger than {MAX_JWKS_BYTES} bytes"));
    }
    let mut bytes = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| inquest_core::error_chain(&e))?
    {
        if (bytes.len() + chunk.len()) as u64 > MAX_JWKS_BYTES {
            return Err(format!("the JWKS is larger than {MAX_JWKS_BYTES} bytes"));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

fn verify_signature(key: &KeyMaterial, message: &[u8], signature: &[u8]) -> Result<(), JwtError> {
    use ring::signature as sig;
    let verified = match key {
        KeyMaterial::Rsa { n, e } => sig::RsaPublicKeyComponents { n, e }.verify(
            &sig::RSA_PKCS1_2048_8192_SHA256,
            message,
            signature,
        ),
        KeyMaterial::EcP256 { point } => {
            sig::UnparsedPublicKey::new(&sig::ECDSA_P256_SHA256_FIXED, point)
                .verify(message, signature)
        }
    };
    verified.map_err(|_| JwtError::BadSignature)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(u: &str) -> OidcSection {
        OidcSection::new("https://idp", "inquest", JwksSource::Url(u.into()))
    }

    #[test]
    fn the_section_is_checked_with_clear_errors() {
        assert_eq!(url("https://idp.example/jwks").validate(), Ok(()));
        assert_eq!(url("http://127.0.0.1:8080/jwks").validate(), Ok(()));
        let mut both = url("https://idp.example/jwks");
        both.jwks_file = Some("jwks.json".into());
        assert!(both.validate().unwrap_err().contains("both"));
        let mut neither = url("https://idp.example/jwks");
        neither.jwks_url = None;
        assert!(neither.validate().unwrap_err().contains("needs jwks_url"));
        for bad in [
            "file:///etc/jwks.json",
            "ftp://idp/jwks",
            "idp.example/jwks",
            "",
        ] {
            let err = url(bad).validate().unwrap_err();
            assert!(err.contains("jwks_url"), "{bad}: {err}");
        }
        let mut empty = url("https://idp.example/jwks");
        empty.issuer = " ".into();
        assert!(empty.validate().unwrap_err().contains("issuer"));
        let mut empty = url("https://idp.example/jwks");
        empty.audience = String::new();
        assert!(empty.validate().unwrap_err().contains("audience"));
        let mut fast = url("https://idp.example/jwks");
        fast.refresh_interval = Duration::ZERO;
        assert!(fast.validate().unwrap_err().contains("refresh_interval"));
        let mut skewed = url("https://idp.example/jwks");
        skewed.leeway = Duration::from_secs(3600);
        assert!(skewed.validate().unwrap_err().contains("leeway"));
    }

    /// The principal a verified JWT gives: what the tenant scoping and the
    /// audit read.
    #[tokio::test]
    async fn a_verified_jwt_names_its_subject_tenant_and_role() {
        use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
        use ring::signature::{self as sig, KeyPair as _};
        let rng = ring::rand::SystemRandom::new();
        let alg = &sig::ECDSA_P256_SHA256_FIXED_SIGNING;
        let pkcs8 = sig::EcdsaKeyPair::generate_pkcs8(alg, &rng).unwrap();
        let pair = sig::EcdsaKeyPair::from_pkcs8(alg, pkcs8.as_ref(), &rng).unwrap();
        let point = pair.public_key().as_ref();
        let jwks = serde_json::json!({"keys": [{
            "kty": "EC", "crv": "P-256", "kid": "k1",
            "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
            "y": URL_SAFE_NO_PAD.encode(&point[33..]),
        }]});
        let dir = std::env::temp_dir().join(format!("inquest-oidc-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("jwks.json");
        std::fs::write(&path, jwks.to_string()).unwrap();
        let mut section = OidcSection::new("https://idp", "inquest", JwksSource::File(path));
        section.tenant_claim = "org".into();
        section.role_claim = "groups".into();
        let oidc = Oidc::start(&section).await.unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let enc = |v: serde_json::Value| URL_SAFE_NO_PAD.encode(v.to_string());
        let exp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs()
            + 60;
        let input = format!(
            "{}.{}",
            enc(serde_json::json!({"alg": "ES256", "kid": "k1"})),
            enc(serde_json::json!({
                "iss": "https://idp", "aud": "inquest", "sub": "u-42", "exp": exp,
                "name": "Ada", "org": "team-a", "groups": ["viewer", "operator"],
            }))
        );
        let signature = pair.sign(&rng, input.as_bytes()).unwrap();
        let token = format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature.as_ref()));
        assert_eq!(
            oidc.principal(&token).await.unwrap(),
            Principal {
                subject: "u-42".into(),
                name: "Ada".into(),
                tenant: "team-a".into(),
                role: inquest_auth::Role::Operator,
            }
        );
    }

    /// Log lines written while the guard lives (this thread only).
    #[derive(Clone, Default)]
    struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn failed_refreshes_keep_the_keys_and_log_once_until_one_succeeds() {
        let captured = Captured::default();
        let writer = captured.clone();
        let _guard = tracing::subscriber::set_default(
            tracing_subscriber::fmt()
                .with_max_level(tracing::Level::INFO)
                .with_ansi(false)
                .with_writer(move || writer.clone())
                .finish(),
        );
        let dir = std::env::temp_dir().join(format!("inquest-oidc-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("jwks.json");
        let jwks = r#"{"keys": [{"kty": "EC", "crv": "P-256", "kid": "k1",
            "x": "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE",
            "y": "AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI"}]}"#;
        std::fs::write(&path, jwks).unwrap();
        let oidc = Oidc::start(&OidcSection::new(
            "https://idp",
            "inquest",
            JwksSource::File(path.clone()),
        ))
        .await
        .unwrap();
        std::fs::write(&path, "{\"keys\": []}").unwrap();
        for _ in 0..3 {
            assert!(!oidc.refresh().await);
            assert_eq!(
                oidc.current().kids(),
                ["k1"],
                "a failed load keeps the keys"
            );
        }
        std::fs::write(&path, jwks).unwrap();
        assert!(oidc.refresh().await);
        std::fs::remove_file(&path).unwrap();
        assert!(!oidc.refresh().await);
        let _ = std::fs::remove_dir_all(&dir);
        let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        let count = |s: &str| log.matches(s).count();
        assert_eq!(count("cannot refresh the OIDC JWKS"), 2, "{log}");
        assert_eq!(count("loaded the OIDC JWKS again"), 1, "{log}");
    }

    #[test]
    fn a_whole_config_with_auth_oidc_validates() {
        let mut config: crate::config::Config = toml::from_str(
            "[auth]\nmode = \"required\"\n\n[auth.oidc]\nissuer = \"https://idp\"\n\
             audience = \"inquest\"\njwks_url = \"https://idp/jwks\"\n",
        )
        .unwrap();
        assert!(config.auth.oidc.is_some());
        config.validate().unwrap();
        config.auth.mode = crate::edge::auth::AuthMode::None;
        let err = config.validate().unwrap_err().to_string();
        assert!(err.contains("mode = \"required\""), "{err}");
    }

    #[test]
    fn the_section_parses_from_toml_with_defaults() {
        let s: OidcSection = toml::from_str(
            "issuer = \"https://idp\"\naudience = \"inquest\"\njwks_file = \"k.json\"\n",
        )
        .unwrap();
        assert_eq!(
            s,
            OidcSection::new("https://idp", "inquest", JwksSource::File("k.json".into()))
        );
        let s: OidcSection = toml::from_str(
            "issuer = \"i\"\naudience = \"a\"\njwks_url = \"https://x/j\"\n\
             tenant_claim = \"org\"\nrole_claim = \"groups\"\nrefresh_interval = \"1m\"\n\
             leeway = \"5s\"\n",
        )
        .unwrap();
        assert_eq!(
            (
                s.tenant_claim.as_str(),
                s.role_claim.as_str(),
                s.refresh_interval,
                s.leeway
            ),
            (
                "org",
                "groups",
                Duration::from_secs(60),
                Duration::from_secs(5)
            )
        );
        assert!(toml::from_str::<OidcSection>("audience = \"a\"\njwks_file = \"k\"\n").is_err());
        assert!(
            toml::from_str::<OidcSection>("issuer = \"i\"\naudience = \"a\"\nkeys = \"k\"\n")
                .is_err()
        );
    }
}
