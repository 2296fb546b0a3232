//! `[auth.oidc]`: JWTs signed in the test (ES256 with a key ring makes,
//! RS256 with the committed test-only key
//! `tests/fixtures/TEST-ONLY-oidc-rsa2048.key.pem`), keys served by a local
//! HTTP JWKS server the test controls (or a file), checked through real gRPC
//! calls: roles, every way a JWT is refused, key rotation by an unknown
//! `kid` and by the periodic refresh, a failed refresh, a JWKS that is not
//! there at startup, and the startup checks.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use inquest_auth::Role;
use inquest_proto::v1 as pb;
use inquest_server::edge::auth::AuthMode;
use inquest_server::edge::oidc::{JwksSource, OidcSection};
use inquest_tests::{TestApp, spawn_app_with, tls::Files};
use ring::{
    rand::SystemRandom,
    signature::{self as sig, KeyPair as _},
};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tonic::{Code, Request, metadata::MetadataValue};

const ISSUER: &str = "https://idp.test.example";
const AUDIENCE: &str = "inquest-api";
/// How long a poll for something the server does in the background may
/// take before the test fails (generous: the machine is shared).
const EVENTUALLY: Duration = Duration::from_secs(30);

// ---- keys and tokens ----

enum Key {
    Ec {
        kid: String,
        pair: sig::EcdsaKeyPair,
    },
    Rsa {
        kid: String,
        pair: sig::RsaKeyPair,
    },
}

impl Key {
    fn ec(kid: &str) -> Self {
        let rng = SystemRandom::new();
        let pkcs8 =
            sig::EcdsaKeyPair::generate_pkcs8(&sig::ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let pair = sig::EcdsaKeyPair::from_pkcs8(
            &sig::ECDSA_P256_SHA256_FIXED_SIGNING,
            pkcs8.as_ref(),
            &rng,
        )
        .unwrap();
        Key::Ec {
            kid: kid.into(),
            pair,
        }
    }

    /// The committed test-only RSA key (ring cannot generate RSA keys).
    fn rsa(kid: &str) -> Self {
        let pem = include_str!("../fixtures/TEST-ONLY-oidc-rsa2048.key.pem");
        let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        let der = base64::engine::general_purpose::STANDARD
            .decode(body)
            .unwrap();
        Key::Rsa {
            kid: kid.into(),
            pair: sig::RsaKeyPair::from_pkcs8(&der).unwrap(),
        }
    }

    fn kid(&self) -> &str {
        match self {
            Key::Ec { kid, .. } | Key::Rsa { kid, .. } => kid,
        }
    }

    fn alg(&self) -> &'static str {
        match self {
            Key::Ec { .. } => "ES256",
            Key::Rsa { .. } => "RS256",
        }
    }

    fn jwk(&self) -> Value {
        match self {
            Key::Ec { kid, pair } => {
                let point = pair.public_key().as_ref();
                assert_eq!((point.len(), point[0]), (65, 4));
                json!({
                    "kty": "EC", "crv": "P-256", "kid": kid, "use": "sig", "alg": "ES256",
                    "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
                    "y": URL_SAFE_NO_PAD.encode(&point[33..]),
                })
            }
            Key::Rsa { kid, pair } => {
                let public = sig::RsaPublicKeyComponents::<Vec<u8>>::from(pair.public());
                json!({
                    "kty": "RSA", "kid": kid, "use": "sig",
                    "n": URL_SAFE_NO_PAD.encode(&public.n),
                    "e": URL_SAFE_NO_PAD.encode(&public.e),
                })
            }
        }
    }

    fn sign(&self, message: &[u8]) -> Vec<u8> {
        let rng = SystemRandom::new();
        match self {
            Key::Ec { pair, .. } => pair.sign(&rng, message).unwrap().as_ref().to_vec(),
            Key::Rsa { pair, .. } => {
                let mut out = vec![0; pair.public().modulus_len()];
                pair.sign(&sig::RSA_PKCS1_SHA256, &rng, message, &mut out)
                    .unwrap();
                out
            }
        }
    }

    /// A token this key signs, with its own alg and kid.
    fn token(&self, claims: &Value) -> String {
        let header = json!({"alg": self.alg(), "kid": self.kid(), "typ": "JWT"});
        signed(&header, claims, |m| self.sign(m))
    }
}

fn b64(v: &Value) -> String {
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(v).unwrap())
}

fn signed(header: &Value, claims: &Value, sign: impl Fn(&[u8]) -> Vec<u8>) -> String {
    let input = format!("{}.{}", b64(header), b64(claims));
    let signature = sign(input.as_bytes());
    format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature))
}

fn jwks(keys: &[&Key]) -> String {
    json!({"keys": keys.iter().map(|k| k.jwk()).collect::<Vec<_>>()}).to_string()
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

fn claims(role: &str) -> Value {
    json!({
        "iss": ISSUER,
        "aud": [AUDIENCE, "something-else"],
        "sub": format!("user-{role}"),
        "email": format!("{role}@example.com"),
        "exp": now() + 600,
        "iat": now(),
        "tenant": "acme",
        "role": role,
    })
}

// ---- a JWKS server the test controls ----

/// A tiny HTTP/1.1 server: every request gets the current status and body
/// and is counted.
struct JwksServer {
    url: String,
    answer: Arc<Mutex<(u16, String)>>,
    requests: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl JwksServer {
    async fn start(status: u16, body: String) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!(
            "http://{}/.well-known/jwks.json",
            listener.local_addr().unwrap()
        );
        let answer = Arc::new(Mutex::new((status, body)));
        let requests = Arc::new(AtomicUsize::new(0));
        let (a, r) = (Arc::clone(&answer), Arc::clone(&requests));
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                let (a, r) = (Arc::clone(&a), Arc::clone(&r));
                tokio::spawn(async move {
                    let mut seen = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !seen.windows(4).any(|w| w == b"\r\n\r\n") && seen.len() < 16384 {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => seen.extend_from_slice(&buf[..n]),
                        }
                    }
                    r.fetch_add(1, Ordering::SeqCst);
                    let (status, body) = a.lock().unwrap().clone();
                    let response = format!(
                        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n\
                         content-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(response.as_bytes()).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        Self {
            url,
            answer,
            requests,
            task,
        }
    }

    fn serve(&self, status: u16, body: String) {
        *self.answer.lock().unwrap() = (status, body);
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

impl Drop for JwksServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

// ---- the server and calls ----

fn section(source: JwksSource, refresh: Duration) -> OidcSection {
    let mut s = OidcSection::new(ISSUER, AUDIENCE, source);
    s.refresh_interval = refresh;
    s
}

async fn app_with(oidc: OidcSection) -> TestApp {
    spawn_app_with(move |c| {
        c.auth.mode = AuthMode::Required;
        c.auth.oidc = Some(oidc);
    })
    .await
}

fn with<T>(message: T, token: &str) -> Request<T> {
    let mut request = Request::new(message);
    let value: MetadataValue<_> = format!("Bearer {token}").parse().unwrap();
    request.metadata_mut().insert("authorization", value);
    request
}

async fn create_incident(app: &TestApp, token: &str) -> Result<String, tonic::Status> {
    app.client()
        .await
        .create_incident(with(
            pb::CreateIncidentRequest {
                title: "from a JWT".into(),
                description: String::new(),
            },
            token,
        ))
        .await
        .map(|r| r.into_inner().id)
}

async fn list_incidents(app: &TestApp, token: &str) -> Result<(), tonic::Status> {
    app.client()
        .await
        .list_incidents(with(pb::ListIncidentsRequest::default(), token))
        .await
        .map(drop)
}

fn code(result: Result<(), tonic::Status>) -> Code {
    result.err().map_or(Code::Ok, |s| s.code())
}

async fn rows(app: &TestApp) -> (i64, i64, i64) {
    (
        app.count("incidents").await,
        app.count("sessions").await,
        app.count("turns").await,
    )
}

/// Polls `$done` (an expression that may `.await`) until it is true,
/// failing after [`EVENTUALLY`].
macro_rules! eventually {
    ($what:expr, $done:expr) => {{
        let start = Instant::now();
        while !$done {
            assert!(start.elapsed() < EVENTUALLY, "never happened: {}", $what);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }};
}

// ---- tests ----

#[tokio::test]
async fn jwt_roles_decide_what_a_caller_may_do_beside_api_tokens() {
    let (ec, rsa) = (Key::ec("ec-1"), Key::rsa("rsa-1"));
    let idp = JwksServer::start(200, jwks(&[&ec, &rsa])).await;
    let app = app_with(section(
        JwksSource::Url(idp.url.clone()),
        Duration::from_secs(3600),
    ))
    .await;
    let operator = rsa.token(&claims("operator"));
    let viewer = ec.token(&claims("viewer"));

    // The operator (RS256) creates and starts.
    let incident = create_incident(&app, &operator).await.unwrap();
    let session = app
        .client()
        .await
        .start_session(with(
            pb::StartSessionRequest {
                incident_id: incident.clone(),
                message: "look".into(),
                idempotency_key: String::new(),
            },
            &operator,
        ))
        .await
        .unwrap()
        .into_inner();

    // The viewer (ES256) reads it, and may not create.
    list_incidents(&app, &viewer).await.unwrap();
    let got = app
        .client()
        .await
        .get_session(with(
            pb::GetSessionRequest {
                session_id: session.id.clone(),
            },
            &viewer,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.id, session.id);
    let before = rows(&app).await;
    let denied = create_incident(&app, &viewer).await.unwrap_err();
    assert_eq!(denied.code(), Code::PermissionDenied, "{denied:?}");
    assert!(denied.message().contains("viewer"), "{}", denied.message());
    assert_eq!(rows(&app).await, before, "a denied call wrote");

    // An admin JWT, a role array (the highest counts), and an API token
    // on the same server.
    let mut admin = claims("viewer");
    admin["role"] = json!(["viewer", "admin"]);
    create_incident(&app, &ec.token(&admin)).await.unwrap();
    let api = app
        .store
        .create_token(
            "ci",
            &inquest_core::Tenant::default_tenant(),
            Role::Operator,
            None,
        )
        .await
        .unwrap();
    create_incident(&app, &api.secret).await.unwrap();
    assert_eq!(app.count("incidents").await, 3);
    assert_eq!(idp.requests(), 1, "one load at startup, none per call");
}

#[tokio::test]
async fn every_bad_jwt_is_unauthenticated_says_why_and_writes_nothing() {
    let (ec, rsa) = (Key::ec("ec-1"), Key::rsa("rsa-1"));
    let idp = JwksServer::start(200, jwks(&[&ec, &rsa])).await;
    let app = app_with(section(
        JwksSource::Url(idp.url.clone()),
        Duration::from_secs(3600),
    ))
    .await;
    let admin = claims("admin");
    let edit = |f: &dyn Fn(&mut Value)| {
        let mut c = admin.clone();
        f(&mut c);
        c
    };
    // A valid admin token works, so each refusal below is the one change.
    create_incident(&app, &rsa.token(&admin)).await.unwrap();
    create_incident(&app, &ec.token(&admin)).await.unwrap();

    let flipped = {
        let t = ec.token(&admin);
        let (input, signature) = t.rsplit_once('.').unwrap();
        let mut bytes = URL_SAFE_NO_PAD.decode(signature).unwrap();
        bytes[10] ^= 0x01;
        format!("{input}.{}", URL_SAFE_NO_PAD.encode(bytes))
    };
    let other_payload = {
        // A valid signature over other claims, with this token's payload.
        let t = rsa.token(&admin);
        let parts: Vec<&str> = t.split('.').collect();
        let mut c = admin.clone();
        c["tenant"] = json!("other");
        format!("{}.{}.{}", parts[0], b64(&c), parts[2])
    };
    let alg_none = format!(
        "{}.{}.",
        b64(&json!({"alg": "none", "kid": "ec-1"})),
        b64(&admin)
    );
    let hs256 = {
        // The classic confusion: HMAC keyed with the RSA public key.
        let Key::Rsa { pair, .. } = &rsa else {
            unreachable!()
        };
        let secret = pair.public().as_ref().to_vec();
        signed(&json!({"alg": "HS256", "kid": "rsa-1"}), &admin, |m| {
            let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &secret);
            ring::hmac::sign(&key, m).as_ref().to_vec()
        })
    };
    let mismatched = {
        // RS256 named in the header, the EC key's kid, signed by the EC key.
        signed(&json!({"alg": "RS256", "kid": "ec-1"}), &admin, |m| {
            ec.sign(m)
        })
    };
    let unpublished = Key::ec("not-published");
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "expired",
            ec.token(&edit(&|c| c["exp"] = json!(now() - 120))),
            "expired",
        ),
        (
            "not yet valid",
            ec.token(&edit(&|c| c["nbf"] = json!(now() + 600))),
            "not valid yet",
        ),
        (
            "no exp",
            ec.token(&edit(&|c| {
                c.as_object_mut().unwrap().remove("exp");
            })),
            "no expiry",
        ),
        (
            "wrong issuer",
            ec.token(&edit(&|c| c["iss"] = json!("https://evil.example"))),
            "issuer",
        ),
        (
            "wrong audience",
            rsa.token(&edit(&|c| c["aud"] = json!("someone-else"))),
            "audience",
        ),
        ("flipped signature byte", flipped, "signature"),
        (
            "payload swapped under a signature",
            other_payload,
            "signature",
        ),
        ("alg none", alg_none, "algorithm"),
        ("HS256 keyed with the public key", hs256, "algorithm"),
        ("alg not the key's", mismatched, "does not match"),
        (
            "unknown kid",
            unpublished.token(&admin),
            "no JWKS signing key has",
        ),
        (
            "no tenant claim",
            ec.token(&edit(&|c| {
                c.as_object_mut().unwrap().remove("tenant");
            })),
            "no tenant claim",
        ),
        (
            "tenant not a tenant name",
            ec.token(&edit(&|c| c["tenant"] = json!("Acme Corp/../x"))),
            "tenant name",
        ),
        (
            "no role claim",
            ec.token(&edit(&|c| {
                c.as_object_mut().unwrap().remove("role");
            })),
            "no role claim",
        ),
        (
            "unknown role",
            ec.token(&edit(&|c| c["role"] = json!("root"))),
            "role claim",
        ),
        (
            "three dots",
            format!("{}.x", ec.token(&admin)),
            "malformed token",
        ),
        ("not base64", "a!.b.c".into(), "malformed JWT"),
    ];
    for (what, token, says) in &cases {
        let before = rows(&app).await;
        let status = create_incident(&app, token).await.unwrap_err();
        assert_eq!(status.code(), Code::Unauthenticated, "{what}: {status:?}");
        assert!(
            status.message().contains(says),
            "{what}: {:?} does not say {says:?}",
            status.message()
        );
        for part in token.split('.').filter(|p| p.len() > 8) {
            assert!(!status.message().contains(part), "{what}: the token echoed");
        }
        assert_eq!(rows(&app).await, before, "{what} wrote");
    }
}

#[tokio::test]
async fn a_rotated_key_works_at_once_and_the_removed_one_stops_without_a_restart() {
    let (old, new) = (Key::ec("2026-old"), Key::rsa("2026-new"));
    let idp = JwksServer::start(200, jwks(&[&old])).await;
    // No periodic refresh within the test: only an unknown kid loads.
    let app = app_with(section(
        JwksSource::Url(idp.url.clone()),
        Duration::from_secs(3600),
    ))
    .await;
    let (old_token, new_token) = (old.token(&claims("viewer")), new.token(&claims("viewer")));
    list_incidents(&app, &old_token).await.unwrap();
    assert_eq!(idp.requests(), 1);

    // The provider rotates: the new key only.
    idp.serve(200, jwks(&[&new]));
    list_incidents(&app, &new_token)
        .await
        .expect("a token with the new kid loads the keys again");
    assert_eq!(idp.requests(), 2);
    // The load replaced the set: the old key is gone.
    let refused = list_incidents(&app, &old_token).await.unwrap_err();
    assert_eq!(refused.code(), Code::Unauthenticated);
    assert!(
        refused.message().contains("key id"),
        "{}",
        refused.message()
    );

    // A flood of made-up key ids loads at most once per FORCED_REFRESH_GAP.
    let before = idp.requests();
    let started = Instant::now();
    for i in 0..30 {
        let token = Key::ec(&format!("random-{i}")).token(&claims("viewer"));
        assert_eq!(
            code(list_incidents(&app, &token).await),
            Code::Unauthenticated
        );
    }
    let gaps =
        started.elapsed().as_secs() / inquest_server::edge::oidc::FORCED_REFRESH_GAP.as_secs();
    let loads = idp.requests() - before;
    assert!(
        loads as u64 <= 1 + gaps,
        "{loads} JWKS loads for 30 unknown kids in {:?}",
        started.elapsed()
    );
    list_incidents(&app, &new_token).await.unwrap();
}

#[tokio::test]
async fn the_periodic_refresh_keeps_keys_through_a_failed_load_and_drops_a_removed_one() {
    let (old, new) = (Key::ec("old"), Key::ec("new"));
    let idp = JwksServer::start(200, jwks(&[&old])).await;
    let app = app_with(section(
        JwksSource::Url(idp.url.clone()),
        Duration::from_millis(200),
    ))
    .await;
    let old_token = old.token(&claims("viewer"));
    list_incidents(&app, &old_token).await.unwrap();

    // The provider fails: two refreshes later the old key still works.
    idp.serve(503, "unavailable".into());
    let failing_since = idp.requests();
    eventually!("two failed refreshes", idp.requests() >= failing_since + 2);
    list_incidents(&app, &old_token)
        .await
        .expect("a failed refresh keeps the keys");
    // A body that is no JWKS is a failure too.
    idp.serve(
        200,
        "{\"keys\": [{\"kty\": \"oct\", \"kid\": \"x\"}]}".into(),
    );
    let garbage_since = idp.requests();
    eventually!(
        "two more failed refreshes",
        idp.requests() >= garbage_since + 2
    );
    list_incidents(&app, &old_token).await.unwrap();

    // The old key removed: the periodic refresh (no unknown kid asked for
    // it) stops it.
    idp.serve(200, jwks(&[&new]));
    eventually!(
        "the old key stops verifying",
        code(list_incidents(&app, &old_token).await) == Code::Unauthenticated
    );
    list_incidents(&app, &new.token(&claims("viewer")))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_jwks_file_is_read_at_startup_and_again_at_each_refresh() {
    let files = Files::new();
    let (first, second) = (Key::rsa("file-1"), Key::ec("file-2"));
    let path = files.write("jwks.json", &jwks(&[&first]));
    let app = app_with(section(
        JwksSource::File(path.clone()),
        Duration::from_millis(200),
    ))
    .await;
    let first_token = first.token(&claims("operator"));
    create_incident(&app, &first_token).await.unwrap();
    files.write("jwks.json", &jwks(&[&second]));
    eventually!(
        "the rewritten file is read",
        code(list_incidents(&app, &first_token).await) == Code::Unauthenticated
    );
    create_incident(&app, &second.token(&claims("operator")))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_jwks_url_that_fails_at_startup_refuses_jwts_until_it_loads() {
    let key = Key::ec("late");
    let idp = JwksServer::start(503, "down".into()).await;
    let app = app_with(section(
        JwksSource::Url(idp.url.clone()),
        Duration::from_millis(200),
    ))
    .await;
    let token = key.token(&claims("viewer"));
    let refused = list_incidents(&app, &token).await.unwrap_err();
    assert_eq!(refused.code(), Code::Unauthenticated);
    assert!(
        refused
            .message()
            .contains("no JWKS signing keys are loaded yet"),
        "{}",
        refused.message()
    );
    // API tokens work meanwhile.
    let api = app
        .store
        .create_token(
            "ci",
            &inquest_core::Tenant::default_tenant(),
            Role::Viewer,
            None,
        )
        .await
        .unwrap();
    list_incidents(&app, &api.secret).await.unwrap();
    idp.serve(200, jwks(&[&key]));
    eventually!(
        "the JWKS loads once the provider is back",
        list_incidents(&app, &token).await.is_ok()
    );
}

#[tokio::test]
async fn unusable_oidc_config_stops_startup_with_a_clear_error() {
    let files = Files::new();
    let database = inquest_tests::fresh_database().await;
    let db_url = database.url.clone();
    let idp = "http://127.0.0.1:9/jwks".to_owned();
    let mut both = section(JwksSource::Url(idp.clone()), Duration::from_secs(60));
    both.jwks_file = Some(files.dir.join("jwks.json"));
    let mut neither = section(JwksSource::Url(idp.clone()), Duration::from_secs(60));
    neither.jwks_url = None;
    let mut no_issuer = section(JwksSource::Url(idp.clone()), Duration::from_secs(60));
    no_issuer.issuer = String::new();
    let garbage = files.write("garbage.json", "not json");
    let cases = [
        (AuthMode::Required, both, "both jwks_url and jwks_file"),
        (AuthMode::Required, neither, "needs jwks_url"),
        (AuthMode::Required, no_issuer, "issuer must not be empty"),
        (
            AuthMode::Required,
            section(
                JwksSource::Url("file:///etc/jwks.json".into()),
                Duration::from_secs(60),
            ),
            "http:// or https://",
        ),
        (
            AuthMode::Required,
            section(
                JwksSource::File(files.dir.join("missing.json")),
                Duration::from_secs(60),
            ),
            "missing.json",
        ),
        (
            AuthMode::Required,
            section(JwksSource::File(garbage), Duration::from_secs(60)),
            "not a JSON object",
        ),
        (
            AuthMode::None,
            section(JwksSource::Url(idp.clone()), Duration::from_secs(60)),
            "mode = \"required\"",
        ),
    ];
    for (mode, oidc, says) in cases {
        let mut config = inquest_server::config::Config {
            listen: "127.0.0.1:0".parse().unwrap(),
            database_url: Some(db_url.clone()),
            ..Default::default()
        };
        config.admin.enabled = false;
        config.auth.mode = mode;
        config.auth.oidc = Some(oidc);
        let err = match inquest_server::startup::Application::build(&config, &db_url).await {
            Ok(_) => panic!("started with a config that should fail: {says}"),
            Err(e) => format!("{e:#}"),
        };
        assert!(err.contains(says), "{err:?} does not say {says:?}");
    }
}

#[tokio::test]
async fn a_jwt_without_auth_oidc_is_unauthenticated() {
    let app = spawn_app_with(|c| c.auth.mode = AuthMode::Required).await;
    let token = Key::ec("k").token(&claims("admin"));
    let refused = create_incident(&app, &token).await.unwrap_err();
    assert_eq!(refused.code(), Code::Unauthenticated);
    assert!(
        refused.message().contains("[auth.oidc] is not set"),
        "{}",
        refused.message()
    );
    assert_eq!(app.count("incidents").await, 0);
}
