//! `[shutdown]`: how long a graceful stop waits.

use std::time::Duration;

use inquest_core::duration_text;
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ShutdownSection {
    /// How long in-flight calls get to finish after SIGTERM / Ctrl-C.
    #[serde(with = "duration_text")]
    pub grace: Duration,
}

impl Default for ShutdownSection {
    fn default() -> Self {
        Self {
            grace: Duration::from_secs(10),
        }
    }
}
