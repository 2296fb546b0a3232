//! Test support for Inquest's suites and benchmarks. Nothing here ships:
//! this crate is a dev-dependency of every production crate that uses it
//! (and a normal dependency only of `inquest-bench`, which is not built by a
//! root `cargo build`).
//!
//! - [`fake`]: fake model providers, real HTTP servers that speak the
//!   Anthropic and OpenAI wire formats and reject invalid requests the way
//!   the real APIs do.
//! - [`mcp`]: a real MCP server (the official Python SDK) for the tools tests.
//! - [`fixture`]: the transcript fixture format (`tests/fixtures/transcripts`).
//! - [`h2raw`]: raw HTTP/2 frames, for tests and benches that play a hostile peer.
//! - [`ha`]: a real PostgreSQL primary and standbys (streaming replication)
//!   with the failovers the caller drives.
//!
//! Must not depend on: the engine, the gRPC edge or the store.

pub mod fake;
pub mod fixture;
pub mod h2raw;
pub mod ha;
pub mod mcp;
