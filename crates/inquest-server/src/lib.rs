//! The gRPC edge of Inquest: the `inquest.v1.Investigations` service and
//! everything between a socket and the engine. It owns:
//!
//! - [`service`]: one file per RPC group; [`watch`]: the live stream;
//! - [`convert`] (wire ⇄ domain) and [`status`] / [`reason`] (error →
//!   status with its ErrorInfo): the only place that sees both wire and
//!   domain types; [`limits`]: request and response size bounds;
//! - [`edge`]: auth, OIDC, TLS; [`ops`]: admin HTTP, health, telemetry;
//! - [`config`]: one file per section, layered defaults → file → env →
//!   flags, validated in one place; [`console`]: the web console's assets;
//! - [`startup`]: building the [`Application`] and running it to shutdown.
//!
//! The burst engine (`inquest-engine`) runs the investigations; this crate
//! calls it and serves what it stores. Must not be depended on by the
//! engine, the store or the CLI. Start reading at [`startup`], then
//! [`service`].

pub mod agent;
pub mod alerts;
pub mod config;
pub mod console;
pub mod convert;
pub mod edge;
pub mod limits;
pub mod ops;
pub mod reason;
pub mod retention;
pub mod schedules;
pub mod service;
mod shutdown;
pub mod startup;
pub mod status;
pub mod watch;

pub use config::{Config, Overrides};
pub use inquest_engine::{TurnLog, TurnLogError};
pub use shutdown::cancel_on_signal;
pub use startup::{Application, serve};
pub use watch::WatchMetrics;
