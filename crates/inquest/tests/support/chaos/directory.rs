//! How the workload and the watchers reach the replicas: each replica's
//! gRPC channels and whether it is believed up (the fleet keeps that
//! current as it kills, stops, partitions and restarts them).

use std::{
    net::SocketAddr,
    sync::{Mutex, PoisonError},
    time::Duration,
};

use inquest_proto::v1::investigations_client::InvestigationsClient;
use tonic::transport::{Channel, Endpoint};

use super::Rng;

pub type Client = InvestigationsClient<Channel>;

struct Entry {
    name: String,
    unary: Channel,
    watch: Channel,
    up: Mutex<bool>,
}

/// How to reach each replica.
pub struct Directory {
    entries: Vec<Entry>,
}

impl Directory {
    /// Lazy channels to `addrs` (name, address): unary calls time out
    /// after 5 s; watch channels have no timeout but h2 keep-alive, so a
    /// stopped or partitioned replica's streams fail instead of hanging.
    pub fn new(addrs: &[(String, SocketAddr)]) -> Directory {
        let entries = addrs
            .iter()
            .map(|(name, addr)| {
                let endpoint = Endpoint::from_shared(format!("http://{addr}"))
                    .expect("a valid endpoint URL")
                    .connect_timeout(Duration::from_secs(1))
                    .tcp_nodelay(true);
                let unary = endpoint
                    .clone()
                    .timeout(Duration::from_secs(5))
                    .connect_lazy();
                let watch = endpoint
                    .http2_keep_alive_interval(Duration::from_secs(1))
                    .keep_alive_timeout(Duration::from_secs(2))
                    .keep_alive_while_idle(true)
                    .connect_lazy();
                Entry {
                    name: name.clone(),
                    unary,
                    watch,
                    up: Mutex::new(false),
                }
            })
            .collect();
        Directory { entries }
    }

    fn pick(&self, rng: &mut Rng) -> &Entry {
        let up: Vec<&Entry> = self
            .entries
            .iter()
            .filter(|e| *e.up.lock().unwrap_or_else(PoisonError::into_inner))
            .collect();
        // Now and then (and when none is up) any replica: clients do not
        // know which one just went away.
        if up.is_empty() || rng.chance(0.05) {
            &self.entries[rng.below(self.entries.len())]
        } else {
            up[rng.below(up.len())]
        }
    }

    /// A client for unary calls on a random replica believed up.
    pub fn unary(&self, rng: &mut Rng) -> (String, Client) {
        let e = self.pick(rng);
        (e.name.clone(), InvestigationsClient::new(e.unary.clone()))
    }

    /// A client for unary calls on `name`.
    pub fn unary_on(&self, name: &str) -> Option<Client> {
        self.entries
            .iter()
            .find(|e| e.name == name)
            .map(|e| InvestigationsClient::new(e.unary.clone()))
    }

    /// A client for `WatchSession` on a random replica believed up.
    pub fn watch(&self, rng: &mut Rng) -> (String, Client) {
        let e = self.pick(rng);
        (e.name.clone(), InvestigationsClient::new(e.watch.clone()))
    }

    pub fn set_up(&self, name: &str, up: bool) {
        for e in self.entries.iter().filter(|e| e.name == name) {
            *e.up.lock().unwrap_or_else(PoisonError::into_inner) = up;
        }
    }
}
