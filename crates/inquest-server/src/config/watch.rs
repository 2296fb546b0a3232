//! `[watch]`: tuning of `WatchSession` streams.

use std::time::Duration;

use inquest_core::duration_text;
use serde::Deserialize;

/// `WatchSession` tuning.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WatchSection {
    /// A running session that has been quiet this long gets a `Heartbeat`.
    #[serde(with = "duration_text")]
    pub heartbeat: Duration,
    /// Live events queued per watcher in the broadcaster. A watcher that
    /// falls this far behind is sent `Lagged` and must reconnect; the
    /// writer never waits for it.
    pub channel_capacity: usize,
    /// Stored turns read per database round trip while catching a watcher
    /// up; bounds a watcher's memory however long the history.
    pub drain_page: u32,
    /// Test hook: a pause between subscribing and reading the stored turns,
    /// to widen the race the handshake exists for. Not settable from a file
    /// or the environment; `None` in production.
    #[serde(skip)]
    pub test_drain_delay: Option<Duration>,
}

impl Default for WatchSection {
    fn default() -> Self {
        Self {
            heartbeat: Duration::from_secs(15),
            channel_capacity: inquest_broadcast::DEFAULT_CAPACITY,
            drain_page: 256,
            test_drain_delay: None,
        }
    }
}
