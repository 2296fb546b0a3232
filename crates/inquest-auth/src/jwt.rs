//! OIDC / JWT bearer tokens, the pure half: the compact JWS split into its
//! header, claims and signature; a JWKS turned into key material; the claim
//! checks given a `now`. The server fetches the JWKS, verifies the signature
//! (ring) between [`Jws::parse`] and [`check_claims`], and caches the keys.
//!
//! Only RS256 and ES256 are accepted: `none`, every HMAC algorithm and
//! anything else is refused before a key is looked at, and a token's `alg`
//! must be the algorithm of the key its `kid` names. Error messages name
//! what was wrong and never echo the token or a claim's value.

use std::fmt;

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use serde_json::{Map, Value};

use inquest_core::Tenant;

use crate::Role;

/// A signature algorithm Inquest verifies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alg {
    /// RSASSA-PKCS1-v1_5 with SHA-256, 2048..=8192-bit keys.
    Rs256,
    /// ECDSA over P-256 with SHA-256, the signature as r‖s (64 bytes).
    Es256,
}

impl Alg {
    pub const fn as_str(self) -> &'static str {
        match self {
            Alg::Rs256 => "RS256",
            Alg::Es256 => "ES256",
        }
    }

    fn parse(text: &str) -> Option<Alg> {
        [Alg::Rs256, Alg::Es256]
            .into_iter()
            .find(|a| a.as_str() == text)
    }
}

impl fmt::Display for Alg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a JWT is refused. Each is one fixed message (the server answers
/// UNAUTHENTICATED with it), never anything taken from the token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JwtError {
    Malformed,
    BadHeader,
    Algorithm,
    Critical,
    NoKid,
    NoKeys,
    UnknownKey,
    KeyMismatch,
    BadSignature,
    BadClaims,
    Issuer,
    Audience,
    NoExpiry,
    BadTime,
    Expired,
    NotYetValid,
    NoSubject,
    NoTenant,
    BadTenant,
    NoRole,
    BadRole,
}

impl JwtError {
    pub const fn message(self) -> &'static str {
        match self {
            JwtError::Malformed => "malformed JWT (expected base64url header.payload.signature)",
            JwtError::BadHeader => "the JWT header is not a JSON object",
            JwtError::Algorithm => "the JWT algorithm is not RS256 or ES256",
            JwtError::Critical => "the JWT has a crit header this server does not understand",
            JwtError::NoKid => "the JWT header names no key id (kid)",
            JwtError::NoKeys => "no JWKS signing keys are loaded yet",
            JwtError::UnknownKey => "no JWKS signing key has the JWT's key id",
            JwtError::KeyMismatch => "the JWT algorithm does not match its key's type",
            JwtError::BadSignature => "the JWT signature does not verify",
            JwtError::BadClaims => "the JWT payload is not a JSON object",
            JwtError::Issuer => "the JWT issuer (iss) is not the configured issuer",
            JwtError::Audience => "the JWT audience (aud) does not include the configured audience",
            JwtError::NoExpiry => "the JWT has no expiry (exp)",
            JwtError::BadTime => "the JWT exp or nbf is not a number",
            JwtError::Expired => "the JWT has expired",
            JwtError::NotYetValid => "the JWT is not valid yet (nbf)",
            JwtError::NoSubject => "the JWT has no subject (sub)",
            JwtError::NoTenant => "the JWT has no tenant claim (a non-empty string)",
            JwtError::BadTenant => {
                "the JWT tenant claim is not a tenant name (1-64 of a-z, 0-9, '-', '_')"
            }
            JwtError::NoRole => "the JWT has no role claim",
            JwtError::BadRole => "the JWT role claim is not viewer, operator or admin",
        }
    }
}

impl fmt::Display for JwtError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for JwtError {}

/// A compact JWS, split and decoded, its signature not yet checked.
#[derive(Debug, Clone)]
pub struct Jws<'a> {
    pub alg: Alg,
    pub kid: String,
    /// `base64url(header) . base64url(payload)`: what was signed.
    signing_input: &'a str,
    signature: Vec<u8>,
    claims: Map<String, Value>,
}

fn decode(part: &str) -> Option<Vec<u8>> {
    URL_SAFE_NO_PAD.decode(part).ok()
}

fn object(bytes: &[u8]) -> Option<Map<String, Value>> {
    match serde_json::from_slice(bytes).ok()? {
        Value::Object(map) => Some(map),
        _ => None,
    }
}

impl<'a> Jws<'a> {
    /// Splits `header.payload.signature` and checks the header: an
    /// accepted `alg`, a `kid`, no `crit`.
    pub fn parse(token: &'a str) -> Result<Self, JwtError> {
        let mut parts = token.split('.');
        let (Some(header), Some(payload), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(JwtError::Malformed);
        };
        let header =
            object(&decode(header).ok_or(JwtError::Malformed)?).ok_or(JwtError::BadHeader)?;
        let alg = header
            .get("alg")
            .and_then(Value::as_str)
            .and_then(Alg::parse)
            .ok_or(JwtError::Algorithm)?;
        if header.contains_key("crit") {
            return Err(JwtError::Critical);
        }
        let kid = header
            .get("kid")
            .and_then(Value::as_str)
            .filter(|k| !k.is_empty())
            .ok_or(JwtError::NoKid)?
            .to_owned();
        let claims =
            object(&decode(payload).ok_or(JwtError::Malformed)?).ok_or(JwtError::BadClaims)?;
        let signature = decode(signature).ok_or(JwtError::Malformed)?;
        let signing_input = &token[..token.len() - signature_len(token)];
        Ok(Self {
            alg,
            kid,
            signing_input,
            signature,
            claims,
        })
    }

    /// The bytes the signature covers.
    pub fn signing_input(&self) -> &[u8] {
        self.signing_input.as_bytes()
    }

    pub fn signature(&self) -> &[u8] {
        &self.signature
    }

    /// The claims; check them (with [`check_claims`]) only after the
    /// signature verified.
    pub fn claims(&self) -> &Map<String, Value> {
        &self.claims
    }
}

/// Length of `.signature` at the end of `token`.
fn signature_len(token: &str) -> usize {
    token.rfind('.').map_or(0, |i| token.len() - i)
}

/// A public key from a JWKS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyMaterial {
    /// Big-endian modulus and exponent, leading zeros stripped.
    Rsa { n: Vec<u8>, e: Vec<u8> },
    /// The uncompressed point 0x04 ‖ x ‖ y (65 bytes).
    EcP256 { point: Vec<u8> },
}

impl KeyMaterial {
    /// The one algorithm a token signed by this key may name.
    pub fn alg(&self) -> Alg {
        match self {
            KeyMaterial::Rsa { .. } => Alg::Rs256,
            KeyMaterial::EcP256 { .. } => Alg::Es256,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Jwk {
    pub kid: String,
    pub key: KeyMaterial,
}

/// The usable keys of a JWKS document.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JwkSet {
    keys: Vec<Jwk>,
    /// Entries left out: another key type or curve, an `alg` other than
    /// RS256/ES256, `use` other than `sig`, no `kid`, a repeated `kid`, an
    /// RSA modulus outside 2048..=8192 bits, or fields that do not decode.
    pub skipped: usize,
}

/// Why a JWKS document gave no keys.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwksError {
    #[error("the JWKS is not a JSON object with a \"keys\" array")]
    NotJwks,
    #[error("the JWKS has no usable RS256 or ES256 signing key ({skipped} entries skipped)")]
    NoUsableKey { skipped: usize },
}

fn b64_field(jwk: &Map<String, Value>, name: &str) -> Option<Vec<u8>> {
    decode(jwk.get(name)?.as_str()?)
}

fn strip_leading_zeros(mut bytes: Vec<u8>) -> Vec<u8> {
    let zeros = bytes.iter().take_while(|b| **b == 0).count();
    bytes.drain(..zeros);
    bytes
}

fn key_material(jwk: &Map<String, Value>) -> Option<KeyMaterial> {
    if jwk.get("use").is_some_and(|u| u.as_str() != Some("sig")) {
        return None;
    }
    let alg = jwk.get("alg").map(|a| a.as_str().and_then(Alg::parse));
    let key = match jwk.get("kty")?.as_str()? {
        "RSA" => {
            let n = strip_leading_zeros(b64_field(jwk, "n")?);
            let e = strip_leading_zeros(b64_field(jwk, "e")?);
            if !(256..=1024).contains(&n.len()) || e.is_empty() || e.len() > 8 {
                return None;
            }
            KeyMaterial::Rsa { n, e }
        }
        "EC" => {
            if jwk.get("crv")?.as_str()? != "P-256" {
                return None;
            }
            let (x, y) = (b64_field(jwk, "x")?, b64_field(jwk, "y")?);
            if x.len() != 32 || y.len() != 32 {
                return None;
            }
            let mut point = Vec::with_capacity(65);
            point.push(0x04);
            point.extend_from_slice(&x);
            point.extend_from_slice(&y);
            KeyMaterial::EcP256 { point }
        }
        _ => return None,
    };
    // A JWK that names an algorithm must name its key's one algorithm.
    match alg {
        None => Some(key),
        Some(Some(a)) if a == key.alg() => Some(key),
        Some(_) => None,
    }
}

impl JwkSet {
    /// Parses a JWKS document (`{"keys": [...]}`), keeping every usable
    /// signing key and counting the rest.
    pub fn parse(bytes: &[u8]) -> Result<Self, JwksError> {
        let doc = object(bytes).ok_or(JwksError::NotJwks)?;
        let entries = doc
            .get("keys")
            .and_then(Value::as_array)
            .ok_or(JwksError::NotJwks)?;
        let mut set = JwkSet::default();
        for entry in entries {
            let parsed = entry.as_object().and_then(|jwk| {
                let kid = jwk.get("kid")?.as_str().filter(|k| !k.is_empty())?;
                Some((kid.to_owned(), key_material(jwk)?))
            });
            match parsed {
                Some((kid, key)) if set.find(&kid).is_none() => set.keys.push(Jwk { kid, key }),
                _ => set.skipped += 1,
            }
        }
        if set.keys.is_empty() {
            return Err(JwksError::NoUsableKey {
                skipped: set.skipped,
            });
        }
        Ok(set)
    }

    pub fn find(&self, kid: &str) -> Option<&Jwk> {
        self.keys.iter().find(|k| k.kid == kid)
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The key ids, for logs.
    pub fn kids(&self) -> Vec<&str> {
        self.keys.iter().map(|k| k.kid.as_str()).collect()
    }
}

/// What a token's claims must say (`[auth.oidc]`).
#[derive(Debug, Clone, Copy)]
pub struct ClaimRules<'a> {
    pub issuer: &'a str,
    pub audience: &'a str,
    pub tenant_claim: &'a str,
    pub role_claim: &'a str,
    /// Clock skew allowed on `exp` and `nbf`, in seconds.
    pub leeway_secs: u64,
}

/// Who a verified token names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// `sub`.
    pub subject: String,
    /// `name`, else `email`, else `sub`.
    pub name: String,
    pub tenant: Tenant,
    pub role: Role,
}

fn time_claim(claims: &Map<String, Value>, name: &str) -> Result<Option<f64>, JwtError> {
    match claims.get(name) {
        None => Ok(None),
        Some(v) => v.as_f64().map(Some).ok_or(JwtError::BadTime),
    }
}

/// Checks a verified token's claims at `now` (seconds since the Unix
/// epoch): `iss`, `aud` (a string or an array holding the audience), `exp`
/// (required), `nbf` (if present), `sub`, the tenant claim (a string that
/// is a [`Tenant`]) and the role claim (a role name, or an array of
/// them: the highest known one counts).
pub fn check_claims(
    claims: &Map<String, Value>,
    rules: &ClaimRules<'_>,
    now: i64,
) -> Result<Identity, JwtError> {
    if claims.get("iss").and_then(Value::as_str) != Some(rules.issuer) {
        return Err(JwtError::Issuer);
    }
    let audience_ok = match claims.get("aud") {
        Some(Value::String(a)) => a == rules.audience,
        Some(Value::Array(all)) => all.iter().any(|a| a.as_str() == Some(rules.audience)),
        _ => false,
    };
    if !audience_ok {
        return Err(JwtError::Audience);
    }
    // Seconds as f64 (NumericDate may have a fraction); exact for every
    // date of this era.
    let now = now as f64;
    let leeway = rules.leeway_secs as f64;
    let exp = time_claim(claims, "exp")?.ok_or(JwtError::NoExpiry)?;
    if now >= exp + leeway {
        return Err(JwtError::Expired);
    }
    if let Some(nbf) = time_claim(claims, "nbf")?
        && now + leeway < nbf
    {
        return Err(JwtError::NotYetValid);
    }
    let subject = claims
        .get("sub")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or(JwtError::NoSubject)?
        .to_owned();
    let tenant = claims
        .get(rules.tenant_claim)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or(JwtError::NoTenant)?;
    let tenant = Tenant::parse(tenant).map_err(|_| JwtError::BadTenant)?;
    let role = match claims.get(rules.role_claim) {
        None | Some(Value::Null) => return Err(JwtError::NoRole),
        Some(Value::String(r)) => Role::parse(r),
        Some(Value::Array(all)) => all
            .iter()
            .filter_map(|r| r.as_str().and_then(Role::parse))
            .max(),
        Some(_) => None,
    }
    .ok_or(JwtError::BadRole)?;
    let name = ["name", "email"]
        .into_iter()
        .find_map(|c| {
            claims
                .get(c)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
        })
        .unwrap_or(&subject)
        .to_owned();
    Ok(Identity {
        subject,
        name,
        tenant,
        role,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn enc(v: &Value) -> String {
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(v).unwrap())
    }

    fn token(header: &Value, claims: &Value, sig: &[u8]) -> String {
        format!(
            "{}.{}.{}",
            enc(header),
            enc(claims),
            URL_SAFE_NO_PAD.encode(sig)
        )
    }

    const RULES: ClaimRules<'static> = ClaimRules {
        issuer: "https://idp.example",
        audience: "inquest",
        tenant_claim: "tenant",
        role_claim: "role",
        leeway_secs: 30,
    };

    fn good_claims() -> Value {
        json!({
            "iss": "https://idp.example",
            "aud": "inquest",
            "sub": "user-1",
            "exp": 1_000_000,
            "tenant": "acme",
            "role": "operator",
        })
    }

    fn check(claims: &Value, now: i64) -> Result<Identity, JwtError> {
        check_claims(claims.as_object().unwrap(), &RULES, now)
    }

    #[test]
    fn a_jws_splits_into_what_was_signed_and_the_signature() {
        let t = token(
            &json!({"alg": "ES256", "kid": "k1", "typ": "JWT"}),
            &good_claims(),
            b"sig",
        );
        let jws = Jws::parse(&t).unwrap();
        assert_eq!((jws.alg, jws.kid.as_str()), (Alg::Es256, "k1"));
        assert_eq!(jws.signature(), b"sig");
        let dot = t.rfind('.').unwrap();
        assert_eq!(jws.signing_input(), &t.as_bytes()[..dot]);
        assert_eq!(jws.claims()["sub"], "user-1");
    }

    #[test]
    fn only_rs256_and_es256_with_a_kid_and_no_crit_are_accepted() {
        let c = good_claims();
        for alg in [
            "none", "HS256", "HS512", "RS384", "PS256", "ES384", "EdDSA", "rs256",
        ] {
            let t = token(&json!({"alg": alg, "kid": "k"}), &c, b"s");
            assert_eq!(Jws::parse(&t).unwrap_err(), JwtError::Algorithm, "{alg}");
        }
        let no_alg = token(&json!({"kid": "k"}), &c, b"s");
        assert_eq!(Jws::parse(&no_alg).unwrap_err(), JwtError::Algorithm);
        let no_kid = token(&json!({"alg": "RS256"}), &c, b"s");
        assert_eq!(Jws::parse(&no_kid).unwrap_err(), JwtError::NoKid);
        let crit = token(
            &json!({"alg": "RS256", "kid": "k", "crit": ["exp"]}),
            &c,
            b"s",
        );
        assert_eq!(Jws::parse(&crit).unwrap_err(), JwtError::Critical);
        // `alg: none` tokens often come with an empty signature.
        let none = format!("{}.{}.", enc(&json!({"alg": "none"})), enc(&c));
        assert_eq!(Jws::parse(&none).unwrap_err(), JwtError::Algorithm);
    }

    #[test]
    fn malformed_tokens() {
        let h = enc(&json!({"alg": "RS256", "kid": "k"}));
        let c = enc(&good_claims());
        for t in [
            String::new(),
            "a.b".into(),
            "a.b.c.d".into(),
            format!("{h}.{c}"),
            format!("{h}.{c}.s.x"),
            format!("{h}=.{c}.AA"),
            format!("{h}.{c}.A+/A"),
            format!("!!.{c}.AA"),
        ] {
            assert!(Jws::parse(&t).is_err(), "{t}");
        }
        let not_object = format!("{}.{c}.AA", URL_SAFE_NO_PAD.encode("[1]"));
        assert_eq!(Jws::parse(&not_object).unwrap_err(), JwtError::BadHeader);
        let claims_not_object = format!("{h}.{}.AA", URL_SAFE_NO_PAD.encode("\"x\""));
        assert_eq!(
            Jws::parse(&claims_not_object).unwrap_err(),
            JwtError::BadClaims
        );
    }

    #[test]
    fn good_claims_name_the_caller() {
        let id = check(&good_claims(), 999_000).unwrap();
        assert_eq!(id.subject, "user-1");
        assert_eq!(id.name, "user-1");
        assert_eq!(id.tenant.as_str(), "acme");
        assert_eq!(id.role, Role::Operator);
        let mut c = good_claims();
        c["email"] = json!("a@example.com");
        assert_eq!(check(&c, 0).unwrap().name, "a@example.com");
        c["name"] = json!("Ada");
        assert_eq!(check(&c, 0).unwrap().name, "Ada");
        c["aud"] = json!(["other", "inquest"]);
        assert!(check(&c, 0).is_ok());
        c["role"] = json!(["viewer", "unknown", "admin"]);
        assert_eq!(check(&c, 0).unwrap().role, Role::Admin);
        c["nbf"] = json!(1000.5);
        assert!(check(&c, 1001 - 30).is_ok(), "nbf within the leeway");
        assert_eq!(check(&c, 1000 - 30), Err(JwtError::NotYetValid));
    }

    #[test]
    fn each_claim_failure_is_its_own_error() {
        let cases: Vec<(&str, Value, JwtError)> = vec![
            ("iss", json!("https://evil.example"), JwtError::Issuer),
            ("iss", json!(null), JwtError::Issuer),
            ("aud", json!("other"), JwtError::Audience),
            ("aud", json!(["a", "b"]), JwtError::Audience),
            ("aud", json!(7), JwtError::Audience),
            ("exp", json!(null), JwtError::BadTime),
            ("exp", json!("1000000"), JwtError::BadTime),
            ("sub", json!(""), JwtError::NoSubject),
            ("tenant", json!(""), JwtError::NoTenant),
            ("tenant", json!(5), JwtError::NoTenant),
            ("tenant", json!("Acme Corp"), JwtError::BadTenant),
            ("role", json!("root"), JwtError::BadRole),
            ("role", json!(["root"]), JwtError::BadRole),
            ("role", json!(3), JwtError::BadRole),
            ("role", json!(null), JwtError::NoRole),
        ];
        for (claim, value, want) in cases {
            let mut c = good_claims();
            c[claim] = value.clone();
            assert_eq!(check(&c, 0), Err(want), "{claim} = {value}");
        }
        for (claim, want) in [
            ("iss", JwtError::Issuer),
            ("aud", JwtError::Audience),
            ("exp", JwtError::NoExpiry),
            ("sub", JwtError::NoSubject),
            ("tenant", JwtError::NoTenant),
            ("role", JwtError::NoRole),
        ] {
            let mut c = good_claims();
            c.as_object_mut().unwrap().remove(claim);
            assert_eq!(check(&c, 0), Err(want), "without {claim}");
        }
    }

    #[test]
    fn expiry_and_not_before_allow_the_leeway_and_no_more() {
        let c = good_claims();
        assert!(check(&c, 1_000_000 + 29).is_ok());
        assert_eq!(check(&c, 1_000_000 + 30), Err(JwtError::Expired));
        let mut c = good_claims();
        c["nbf"] = json!(500_000);
        assert!(check(&c, 500_000 - 30).is_ok());
        assert_eq!(check(&c, 500_000 - 31), Err(JwtError::NotYetValid));
    }

    fn rsa_jwk(kid: &str, n_len: usize) -> Value {
        let mut n = vec![0xc5; n_len];
        n[0] = 0xd1;
        json!({"kty": "RSA", "kid": kid, "n": URL_SAFE_NO_PAD.encode(&n), "e": "AQAB"})
    }

    fn ec_jwk(kid: &str) -> Value {
        json!({
            "kty": "EC", "crv": "P-256", "kid": kid,
            "x": URL_SAFE_NO_PAD.encode([1u8; 32]),
            "y": URL_SAFE_NO_PAD.encode([2u8; 32]),
        })
    }

    #[test]
    fn a_jwks_keeps_its_usable_signing_keys() {
        let mut with_alg = rsa_jwk("r2", 384);
        with_alg["alg"] = json!("RS256");
        with_alg["use"] = json!("sig");
        let mut padded = rsa_jwk("r3", 256);
        let mut n = vec![0u8];
        n.extend(vec![0xc5; 256]);
        padded["n"] = json!(URL_SAFE_NO_PAD.encode(&n));
        let mut encryption = rsa_jwk("enc", 256);
        encryption["use"] = json!("enc");
        let mut wrong_alg = rsa_jwk("wrong-alg", 256);
        wrong_alg["alg"] = json!("ES256");
        let doc = json!({"keys": [
            rsa_jwk("r1", 256),
            ec_jwk("e1"),
            with_alg,
            padded,
            // Skipped, each for its own reason:
            rsa_jwk("small", 128),
            {"kty": "oct", "kid": "h", "k": "c2VjcmV0"},
            {"kty": "EC", "crv": "P-384", "kid": "p384", "x": "AA", "y": "AA"},
            {"kty": "OKP", "crv": "Ed25519", "kid": "ed", "x": "AA"},
            {"kty": "RSA", "n": "AQAB", "e": "AQAB"},
            {"kty": "RSA", "kid": "bad", "n": "!!", "e": "AQAB"},
            encryption,
            wrong_alg,
            {"kty": "EC", "crv": "P-256", "kid": "short", "x": "AQ", "y": "AQ"},
            ec_jwk("e1"),
            "not an object",
        ]});
        let set = JwkSet::parse(&serde_json::to_vec(&doc).unwrap()).unwrap();
        assert_eq!(set.kids(), ["r1", "e1", "r2", "r3"]);
        assert_eq!(set.skipped, 11);
        assert_eq!(set.find("e1").unwrap().key.alg(), Alg::Es256);
        let KeyMaterial::EcP256 { point } = &set.find("e1").unwrap().key else {
            panic!("not EC");
        };
        assert_eq!((point.len(), point[0]), (65, 0x04));
        let KeyMaterial::Rsa { n, e } = &set.find("r3").unwrap().key else {
            panic!("not RSA");
        };
        assert_eq!((n.len(), e.as_slice()), (256, &[1u8, 0, 1][..]));
    }

    #[test]
    fn a_jwks_without_usable_keys_is_an_error() {
        assert_eq!(JwkSet::parse(b"nope"), Err(JwksError::NotJwks));
        assert_eq!(JwkSet::parse(b"{\"keys\": 1}"), Err(JwksError::NotJwks));
        assert_eq!(
            JwkSet::parse(b"{\"keys\": [{\"kty\": \"oct\", \"kid\": \"h\"}]}"),
            Err(JwksError::NoUsableKey { skipped: 1 })
        );
    }

    proptest! {
        #[test]
        fn parsing_any_text_never_panics_and_claims_round_trip(
            junk in ".{0,200}",
            sub in "[a-zA-Z0-9@._-]{1,40}",
            sig in proptest::collection::vec(any::<u8>(), 0..100),
        ) {
            let _ = Jws::parse(&junk);
            let mut c = good_claims();
            c["sub"] = json!(sub);
            let t = token(&json!({"alg": "RS256", "kid": "k"}), &c, &sig);
            let jws = Jws::parse(&t).unwrap();
            prop_assert_eq!(jws.signature(), sig.as_slice());
            prop_assert_eq!(check_claims(jws.claims(), &RULES, 0).unwrap().subject, sub);
            // Any one character changed still parses or fails cleanly.
            for i in 0..t.len() {
                let mut bytes = t.clone().into_bytes();
                bytes[i] = b'.';
                let _ = Jws::parse(std::str::from_utf8(&bytes).unwrap());
            }
        }
    }
}
