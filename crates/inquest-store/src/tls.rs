//! TLS to PostgreSQL, as libpq's `sslmode` describes it, over rustls (ring).
//!
//! tokio-postgres itself only knows `disable`, `prefer` and `require` and
//! brings no TLS. [`parse`] takes the database URL (URL or `key=value`
//! form), takes out `sslmode` and `sslrootcert`, and returns the
//! tokio-postgres config plus a [`PgTls`] connector that does what the mode
//! promises:
//!
//! | sslmode | encrypted | server certificate checked |
//! |---|---|---|
//! | `disable` | never | — |
//! | `allow`, `prefer` (the default) | if the server offers it | no |
//! | `require` | always | no (as libpq without a root certificate) |
//! | `verify-ca` | always | signed by a trusted CA |
//! | `verify-full` | always | signed by a trusted CA and naming the host |
//!
//! The trusted CAs for the `verify-*` modes come from `sslrootcert` (a PEM
//! file; `system` for the operating system's store), else
//! `~/.postgresql/root.crt` as libpq does; with none of them the URL is
//! refused at startup rather than silently connecting unverified.
//! Channel binding is not offered (SCRAM authentication still works).

use std::{
    future::Future,
    io,
    path::PathBuf,
    pin::Pin,
    str::FromStr,
    sync::Arc,
    task::{Context, Poll},
};

use rustls::{
    ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
    client::{
        WebPkiServerVerifier,
        danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier},
    },
    crypto::CryptoProvider,
    pki_types::{CertificateDer, ServerName, UnixTime, pem::PemObject},
};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::{
    Config, Socket,
    config::SslMode as PgSslMode,
    tls::{ChannelBinding, MakeTlsConnect, TlsConnect, TlsStream},
};

/// libpq's `sslmode` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Allow,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl FromStr for SslMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "disable" => Self::Disable,
            "allow" => Self::Allow,
            "prefer" => Self::Prefer,
            "require" => Self::Require,
            "verify-ca" => Self::VerifyCa,
            "verify-full" => Self::VerifyFull,
            other => {
                return Err(format!(
                    "sslmode={other:?} is not one of disable, allow, prefer, require, verify-ca, verify-full"
                ));
            }
        })
    }
}

/// Why a database URL's TLS settings cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum DbTlsError {
    #[error("invalid database URL: {0}")]
    Url(#[source] tokio_postgres::Error),
    #[error("database URL: {0}")]
    Setting(String),
}

/// The TLS connector a database URL asks for; used for every connection
/// (pools and the `LISTEN` connection). Cheap to clone.
#[derive(Clone)]
pub struct PgTls {
    config: Arc<ClientConfig>,
}

impl std::fmt::Debug for PgTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PgTls")
    }
}

/// The tokio-postgres config and TLS connector for `url`.
pub fn parse(url: &str) -> Result<(Config, PgTls), DbTlsError> {
    let (rest, settings) = take_ssl_settings(url);
    let mode = match &settings.mode {
        Some(m) => m.parse::<SslMode>().map_err(DbTlsError::Setting)?,
        None => SslMode::Prefer,
    };
    let mut config = Config::from_str(&rest).map_err(DbTlsError::Url)?;
    config.ssl_mode(match mode {
        SslMode::Disable => PgSslMode::Disable,
        SslMode::Allow | SslMode::Prefer => PgSslMode::Prefer,
        SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => PgSslMode::Require,
    });
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier: Arc<dyn ServerCertVerifier> = match mode {
        SslMode::VerifyCa | SslMode::VerifyFull => {
            let roots = roots(settings.root_cert.as_deref(), mode)?;
            let webpki =
                WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                    .build()
                    .map_err(|e| DbTlsError::Setting(format!("sslrootcert: {e}")))?;
            if mode == SslMode::VerifyFull {
                webpki
            } else {
                Arc::new(CaOnly(webpki))
            }
        }
        _ => Arc::new(Unverified(provider.clone())),
    };
    let tls = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| DbTlsError::Setting(e.to_string()))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok((
        config,
        PgTls {
            config: Arc::new(tls),
        },
    ))
}

#[derive(Debug, Default, PartialEq, Eq)]
struct SslSettings {
    mode: Option<String>,
    root_cert: Option<String>,
}

/// `url` without its `sslmode` and `sslrootcert`, and their values.
fn take_ssl_settings(url: &str) -> (String, SslSettings) {
    let mut settings = SslSettings::default();
    let mut keep = |key: &str, value: &str| match key {
        "sslmode" => {
            settings.mode = Some(value.to_owned());
            false
        }
        "sslrootcert" => {
            settings.root_cert = Some(value.to_owned());
            false
        }
        _ => true,
    };
    let rest = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        match url.split_once('?') {
            None => url.to_owned(),
            Some((base, query)) => {
                let kept: Vec<&str> = query
                    .split('&')
                    .filter(|pair| {
                        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                        keep(k, &percent_decode(v))
                    })
                    .collect();
                if kept.is_empty() {
                    base.to_owned()
                } else {
                    format!("{base}?{}", kept.join("&"))
                }
            }
        }
    } else {
        // key=value form; values with spaces would be quoted, which these
        // two settings never need.
        url.split_whitespace()
            .filter(|pair| {
                let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                keep(k, v.trim_matches('\''))
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    (rest, settings)
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(b) = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn roots(root_cert: Option<&str>, mode: SslMode) -> Result<RootCertStore, DbTlsError> {
    let mut roots = RootCertStore::empty();
    let path = match root_cert {
        Some("system") => {
            let found = rustls_native_certs::load_native_certs();
            for cert in found.certs {
                let _ = roots.add(cert);
            }
            if roots.is_empty() {
                return Err(DbTlsError::Setting(
                    "sslrootcert=system: the system has no CA certificates".into(),
                ));
            }
            return Ok(roots);
        }
        Some(path) => PathBuf::from(path),
        None => {
            let default = std::env::var_os("HOME")
                .map(|h| PathBuf::from(h).join(".postgresql/root.crt"))
                .filter(|p| p.is_file());
            match default {
                Some(p) => p,
                None => {
                    return Err(DbTlsError::Setting(format!(
                        "sslmode={} needs the CA that signed the server's certificate: add \
                         sslrootcert=/path/to/ca.pem (or sslrootcert=system)",
                        if mode == SslMode::VerifyCa {
                            "verify-ca"
                        } else {
                            "verify-full"
                        }
                    )));
                }
            }
        }
    };
    let certs = CertificateDer::pem_file_iter(&path)
        .map_err(|e| DbTlsError::Setting(format!("sslrootcert {}: {e}", path.display())))?;
    for cert in certs {
        let cert =
            cert.map_err(|e| DbTlsError::Setting(format!("sslrootcert {}: {e}", path.display())))?;
        roots
            .add(cert)
            .map_err(|e| DbTlsError::Setting(format!("sslrootcert {}: {e}", path.display())))?;
    }
    if roots.is_empty() {
        return Err(DbTlsError::Setting(format!(
            "sslrootcert {} holds no PEM certificate",
            path.display()
        )));
    }
    Ok(roots)
}

/// `require` and `prefer`: encrypted, the certificate not checked (libpq's
/// meaning without a root certificate), the handshake still verified.
#[derive(Debug)]
struct Unverified(Arc<CryptoProvider>);

impl ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `verify-ca`: the chain must lead to a trusted CA; the name is not
/// checked.
#[derive(Debug)]
struct CaOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for CaOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForName
                | rustls::CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

impl MakeTlsConnect<Socket> for PgTls {
    type Stream = PgTlsStream;
    type TlsConnect = PgTlsConnect;
    type Error = rustls::pki_types::InvalidDnsNameError;

    fn make_tls_connect(&mut self, domain: &str) -> Result<PgTlsConnect, Self::Error> {
        Ok(PgTlsConnect {
            name: ServerName::try_from(domain.to_owned())?,
            connector: tokio_rustls::TlsConnector::from(self.config.clone()),
        })
    }
}

/// One connection's handshake.
pub struct PgTlsConnect {
    name: ServerName<'static>,
    connector: tokio_rustls::TlsConnector,
}

impl TlsConnect<Socket> for PgTlsConnect {
    type Stream = PgTlsStream;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<PgTlsStream>> + Send>>;

    fn connect(self, stream: Socket) -> Self::Future {
        Box::pin(async move {
            let tls = self.connector.connect(self.name, stream).await?;
            Ok(PgTlsStream(Box::new(tls)))
        })
    }
}

/// An encrypted connection to PostgreSQL.
pub struct PgTlsStream(Box<tokio_rustls::client::TlsStream<Socket>>);

impl AsyncRead for PgTlsStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for PgTlsStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut *self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut *self.0).poll_shutdown(cx)
    }
}

impl TlsStream for PgTlsStream {
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ssl_settings_are_taken_out_of_both_url_forms() {
        let (rest, s) = take_ssl_settings(
            "postgres://u:p@db:5432/x?sslmode=verify-full&application_name=a&sslrootcert=%2Fetc%2Fca.pem",
        );
        assert_eq!(rest, "postgres://u:p@db:5432/x?application_name=a");
        assert_eq!(s.mode.as_deref(), Some("verify-full"));
        assert_eq!(s.root_cert.as_deref(), Some("/etc/ca.pem"));
        let (rest, s) = take_ssl_settings("postgres://db/x?sslmode=require");
        assert_eq!(rest, "postgres://db/x");
        assert_eq!(s.mode.as_deref(), Some("require"));
        let (rest, s) = take_ssl_settings("host=db dbname=x sslmode=verify-ca sslrootcert=/ca");
        assert_eq!(rest, "host=db dbname=x");
        assert_eq!(s.root_cert.as_deref(), Some("/ca"));
        let (rest, s) = take_ssl_settings("postgres://db/x");
        assert_eq!(
            (rest.as_str(), s),
            ("postgres://db/x", SslSettings::default())
        );
    }

    #[test]
    fn modes_parse_and_verify_modes_need_a_root() {
        assert!(parse("postgres://db/x?sslmode=bogus").is_err());
        assert!(parse("postgres://db/x?sslmode=require").is_ok());
        assert!(parse("postgres://db/x?sslmode=disable").is_ok());
        assert!(parse("postgres://db/x?sslmode=verify-full&sslrootcert=/nonexistent").is_err());
    }
}
