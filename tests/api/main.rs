//! API tests: the real server on a socket, a real PostgreSQL database per
//! test, the generated gRPC client.

mod errors;
mod health;
mod messages;
mod sessions;
mod turns;
mod watch;
mod watch_lag;
mod watch_tools;
mod resume;
