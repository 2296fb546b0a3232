//! The Inquest gRPC server: the `inquest.v1.Investigations` service, health
//! and reflection, configuration, telemetry, startup and shutdown.
//!
//! This is the only crate that sees both the wire types (`inquest-proto`)
//! and the domain types (`inquest-core`), so conversions ([`convert`]) and
//! the error → status mapping ([`status`]) live here and nowhere else.

pub mod admin;
pub mod agent_config;
pub mod api_limits;
pub mod audit;
pub mod auth;
pub mod config;
pub mod console;
pub mod convert;
pub mod health;
pub mod oidc;
pub mod reason;
mod service;
pub mod startup;
pub mod status;
pub mod telemetry;
pub mod tenants;
pub mod tls;
pub mod watch;

pub use config::{Config, Overrides};
pub use inquest_engine::{TurnLog, TurnLogError};
pub use startup::{Application, cancel_on_signal, serve};
pub use watch::WatchMetrics;
