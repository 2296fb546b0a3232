//! What operators read: the admin HTTP listener (`/metrics`, `/healthz`,
//! `/readyz`: [`admin`]), gRPC health checking that asks the database
//! ([`health`]), what each metric means ([`metrics`]), and logs and traces
//! ([`telemetry`]).

pub mod admin;
pub mod health;
pub mod metrics;
pub mod telemetry;
