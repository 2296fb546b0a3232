//! `[admin]`: the admin HTTP listener.

use std::net::SocketAddr;

use serde::Deserialize;

/// The admin HTTP listener: `/metrics` (Prometheus), `/healthz`,
/// `/readyz`.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdminSection {
    /// Where it listens. A port that cannot be bound (another process on
    /// a shared host) is logged and the server runs without it: metrics are
    /// not worth an outage.
    pub listen: SocketAddr,
    /// `false` turns the listener off.
    pub enabled: bool,
}

impl Default for AdminSection {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 9464)),
            enabled: true,
        }
    }
}
