//! The burst engine: runs the agent loop for a session under a lease,
//! writes every turn to PostgreSQL before anyone sees it, and keeps this
//! replica's live view (running tool calls, streamed text, cancel tokens)
//! and the other replicas' announcements in step with the store.
//!
//! It owns, one job each: the [`runner::Runner`] (burst slots, the lease
//! keeper and the reaper that recovers orphans); [`resume`] (preparing a
//! burst from the stored transcript); the API's writes
//! ([`turn_log::TurnLog`], where bursts are claimed too); the lease-fenced
//! burst writer ([`burst_log::BurstLog`]); this replica's live view
//! ([`live::LiveView`]: running calls, streamed text, cancel tokens); the
//! cross-replica [`feed`]; and where bursts run ([`agent_runtime`],
//! [`priority`]).
//!
//! Must not depend on: tonic, the wire types, the gRPC edge. Start reading
//! at `Runner::start` in [`runner`], then `BurstLog` in [`burst_log`].

pub mod agent_runtime;
pub mod announced;
pub mod approvals;
pub mod burst_log;
pub mod delivery;
pub mod feed;
mod keeper;
pub mod lease;
pub mod live;
pub mod priority;
pub mod resume;
pub mod runner;
pub mod sender;
pub mod slack;
pub mod targets;
pub mod trace;
pub mod turn_log;
pub mod webhooks;

pub use approvals::ApprovalGates;
pub use lease::LeaseSection;
pub use live::LiveView;
pub use runner::Runner;
pub use turn_log::{TurnLog, TurnLogError};

/// The default cap on a recovery notice's text (`limits.max_notice_bytes`).
pub const DEFAULT_MAX_NOTICE_BYTES: usize = 16 * 1024;
