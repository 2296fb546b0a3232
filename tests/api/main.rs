//! API tests: the real server on a socket, a real PostgreSQL database per
//! test, the generated gRPC client.

mod agent_exits;
mod agent_mcp;
mod agent_providers;
mod agent_support;
mod agent_watch;
mod auth;
mod backpressure;
mod call_ids;
mod caps_provider;
mod caps_tools;
mod compaction;
mod cost;
mod db_tls;
mod error_details;
mod errors;
mod faults;
mod faults_support;
mod health;
mod hostile;
mod idempotency;
mod leases;
mod limits;
mod listing;
mod messages;
mod metrics;
mod notice_migration;
mod resume;
mod sessions;
mod text_delta;
mod tls;
mod turns;
mod watch;
mod watch_lag;
mod watch_tools;
