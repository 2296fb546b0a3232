//! A set of replica processes a test owns (`replicas_watch.rs`,
//! `replicas_rolling.rs`).

use std::process::Command;

use super::{Client, ReplicaConfig, Server};

/// The servers a test started. Stopped with SIGTERM by [`Fleet::stop`] /
/// [`Fleet::stop_all`] (each must exit 0); any still running when the
/// fleet is dropped (a failed assertion) is killed, so a failing test
/// leaves no process behind. A server is only signalled while this owns
/// it, i.e. before it was reaped, so its pid cannot have been reused.
pub struct Fleet {
    pub servers: Vec<Server>,
}

impl Fleet {
    pub fn new() -> Self {
        Self {
            servers: Vec::new(),
        }
    }

    /// Starts replicas `names` (together: each spends seconds starting its
    /// MCP server) with `config` on `url`, and waits until all serve (their
    /// cross-replica feed is listening by then, or they warned).
    pub async fn start(&mut self, names: &[&str], config: &ReplicaConfig, url: &str) {
        let starting: Vec<_> = names
            .iter()
            .map(|name| {
                let (name, config, url) =
                    (name.to_string(), config.path().to_owned(), url.to_owned());
                tokio::spawn(async move {
                    Server::start_with(&name, &["--config", &config, "--database-url", &url], &[])
                        .await
                })
            })
            .collect();
        let mut failed = None;
        for started in starting {
            match started.await {
                Ok(server) => self.servers.push(server),
                Err(e) => failed = Some(e),
            }
        }
        if let Some(e) = failed {
            panic!("a replica did not start: {e}");
        }
        for name in names {
            self.get(name)
                .wait_for_log("serving inquest.v1.Investigations")
                .await;
        }
    }

    pub fn get(&self, name: &str) -> &Server {
        self.servers
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no running server {name}"))
    }

    pub async fn client(&self, name: &str) -> Client {
        self.get(name).client().await
    }

    /// SIGTERM to `name`; it must exit 0.
    pub async fn stop(&mut self, name: &str) {
        let at = self
            .servers
            .iter()
            .position(|s| s.name == name)
            .unwrap_or_else(|| panic!("no running server {name}"));
        self.servers.remove(at).stop().await;
    }

    pub async fn stop_all(mut self) {
        for server in std::mem::take(&mut self.servers) {
            server.stop().await;
        }
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for server in &self.servers {
            // Not `Server::signal`: it asserts, and this may run while
            // unwinding.
            let _ = Command::new("kill")
                .args(["-KILL", &server.pid().to_string()])
                .status();
        }
    }
}

pub fn python() -> String {
    inquest_testkit::mcp::python()
        .expect("these tests need the MCP Python SDK (set INQUEST_TEST_PYTHON)")
}
