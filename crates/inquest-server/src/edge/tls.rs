//! TLS for the gRPC listener (`[tls]`), with rustls on the ring provider.
//!
//! `cert` and `key` are PEM files (a chain, leaf first, and its private
//! key); `client_ca`, when given, turns on mutual TLS: a client must show a
//! certificate that CA signed. Startup refuses files it cannot read, that
//! hold no certificate or key, or whose key does not match the certificate,
//! naming the file. The files are read again on SIGHUP and whenever their
//! modification time changes (checked every [`POLL`]); a reload that fails
//! is logged and the previous certificate stays in use, so a half-written
//! renewal never takes the listener down. Connections already open keep the
//! certificate they were made with; new ones get the new one.
//!
//! Each accepted TCP connection (counted under the same cap and deadlines
//! as a plaintext one, `edge/conn.rs`) does its handshake in its own task,
//! within [`HANDSHAKE_TIMEOUT`] and at most [`MAX_HANDSHAKES`] at once, so
//! a slow or silent client cannot hold up the others; only finished
//! handshakes reach tonic.

use std::{
    path::{Path, PathBuf},
    sync::{Arc, PoisonError, RwLock},
    time::{Duration, SystemTime},
};

use rustls::{
    ServerConfig,
    crypto::CryptoProvider,
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject},
    server::WebPkiClientVerifier,
};
use serde::Deserialize;
use tokio_rustls::{TlsAcceptor, server::TlsStream};
use tokio_stream::{StreamExt, wrappers::ReceiverStream};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use crate::edge::conn::Guarded;

/// How often the certificate files' modification times are checked.
pub const POLL: Duration = Duration::from_secs(5);
/// A client that has not finished its handshake by then is dropped.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Handshakes in progress at once; more connections wait in the kernel's
/// accept queue.
pub const MAX_HANDSHAKES: usize = 256;

/// `[tls]`: serve gRPC over TLS.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TlsSection {
    /// PEM certificate chain, leaf first.
    pub cert: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1) of the leaf.
    pub key: PathBuf,
    /// PEM CA certificates; when set, clients must present a certificate
    /// signed by one of them (mutual TLS).
    #[serde(default)]
    pub client_ca: Option<PathBuf>,
}

/// Why the TLS files could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("[tls] {what} {path}: {reason}")]
    File {
        what: &'static str,
        path: PathBuf,
        reason: String,
    },
    #[error("[tls] key {key} does not match certificate {cert}: {reason}")]
    Mismatch {
        cert: PathBuf,
        key: PathBuf,
        reason: String,
    },
    #[error("[tls] {0}")]
    Config(String),
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn file_error(what: &'static str, path: &Path) -> impl FnOnce(String) -> TlsError {
    let path = path.to_owned();
    move |reason| TlsError::File { what, path, reason }
}

/// Reads the files of `section` into a server config (ALPN `h2`, as gRPC
/// needs).
pub fn load(section: &TlsSection) -> Result<ServerConfig, TlsError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&section.cert)
        .map_err(|e| file_error("cert", &section.cert)(e.to_string()))?
        .collect::<Result<_, _>>()
        .map_err(|e| file_error("cert", &section.cert)(e.to_string()))?;
    if certs.is_empty() {
        return Err(file_error("cert", &section.cert)(
            "holds no PEM certificate".into(),
        ));
    }
    let key = PrivateKeyDer::from_pem_file(&section.key)
        .map_err(|e| file_error("key", &section.key)(e.to_string()))?;
    let provider = provider();
    let certified = rustls::sign::CertifiedKey::from_der(certs, key, &provider).map_err(|e| {
        TlsError::Mismatch {
            cert: section.cert.clone(),
            key: section.key.clone(),
            reason: e.to_string(),
        }
    })?;
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let builder = match &section.client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            let cas = CertificateDer::pem_file_iter(ca)
                .map_err(|e| file_error("client_ca", ca)(e.to_string()))?;
            for cert in cas {
                let cert = cert.map_err(|e| file_error("client_ca", ca)(e.to_string()))?;
                roots
                    .add(cert)
                    .map_err(|e| file_error("client_ca", ca)(e.to_string()))?;
            }
            if roots.is_empty() {
                return Err(file_error("client_ca", ca)(
                    "holds no PEM certificate".into(),
                ));
            }
            let verifier =
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                    .build()
                    .map_err(|e| file_error("client_ca", ca)(e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_cert_resolver(Arc::new(rustls::sign::SingleCertAndKey::from(
        Arc::new(certified),
    )));
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(config)
}

/// The server config new connections get, swapped by a reload.
#[derive(Debug, Clone)]
pub struct Certificates {
    section: TlsSection,
    current: Arc<RwLock<Arc<ServerConfig>>>,
}

impl Certificates {
    /// Loads the files once; an error here stops startup.
    pub fn load(section: &TlsSection) -> Result<Self, TlsError> {
        let config = load(section)?;
        Ok(Self {
            section: section.clone(),
            current: Arc::new(RwLock::new(Arc::new(config))),
        })
    }

    fn acceptor(&self) -> TlsAcceptor {
        let config = self
            .current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        TlsAcceptor::from(config)
    }

    /// Reads the files again; on success new connections use them.
    pub fn reload(&self) -> Result<(), TlsError> {
        let config = Arc::new(load(&self.section)?);
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = config;
        Ok(())
    }

    fn stamps(&self) -> Vec<Option<SystemTime>> {
        [
            Some(&self.section.cert),
            Some(&self.section.key),
            self.section.client_ca.as_ref(),
        ]
        .into_iter()
        .flatten()
        .map(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
        .collect()
    }

    /// Reloads on SIGHUP and when a file's modification time changes,
    /// until `shutdown`.
    pub fn spawn_reloader(&self, tasks: &TaskTracker, shutdown: CancellationToken) {
        let certs = self.clone();
        tasks.spawn(async move {
            let mut hangup =
                match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
                    Ok(s) => Some(s),
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot listen for SIGHUP; TLS files are reloaded when they change");
                        None
                    }
                };
            let mut seen = certs.stamps();
            let mut tick = tokio::time::interval(POLL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                let why = tokio::select! {
                    () = shutdown.cancelled() => return,
                    Some(()) = async {
                        match hangup.as_mut() {
                            Some(h) => h.recv().await,
                            None => std::future::pending().await,
                        }
                    } => "SIGHUP",
                    _ = tick.tick() => {
                        let now = certs.stamps();
                        if now == seen {
                            continue;
                        }
                        "a changed file"
                    }
                };
                seen = certs.stamps();
                match certs.reload() {
                    Ok(()) => tracing::info!(reason = why, cert = %certs.section.cert.display(), "TLS certificate reloaded"),
                    Err(e) => tracing::error!(reason = why, error = %e, "TLS reload failed; still serving the previous certificate"),
                }
            }
        });
    }
}

/// TLS connections from `accepted` (already past the connection gate,
/// `edge/conn.rs`), handshake done, until `shutdown`. The loop and each
/// handshake are tasks of `tasks`.
pub fn incoming(
    mut accepted: ReceiverStream<std::io::Result<Guarded>>,
    certs: Certificates,
    tasks: &TaskTracker,
    shutdown: CancellationToken,
) -> ReceiverStream<std::io::Result<TlsStream<Guarded>>> {
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    let handshakes = Arc::new(tokio::sync::Semaphore::new(MAX_HANDSHAKES));
    let inner = tasks.clone();
    tasks.spawn(async move {
        loop {
            let permit = tokio::select! {
                () = shutdown.cancelled() => return,
                permit = handshakes.clone().acquire_owned() => match permit {
                    Ok(p) => p,
                    Err(_) => return,
                },
            };
            let stream = tokio::select! {
                () = shutdown.cancelled() => return,
                next = accepted.next() => match next {
                    Some(Ok(stream)) => stream,
                    // The gate logs and backs off on its own errors.
                    Some(Err(_)) => continue,
                    None => return,
                },
            };
            let acceptor = certs.acceptor();
            let tx = tx.clone();
            inner.spawn(async move {
                let _permit = permit;
                match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                    Ok(Ok(tls)) => {
                        let _ = tx.send(Ok(tls)).await;
                    }
                    Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake failed"),
                    Err(_) => tracing::debug!("TLS handshake timed out"),
                }
            });
        }
    });
    ReceiverStream::new(rx)
}
