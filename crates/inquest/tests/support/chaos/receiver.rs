//! The chaos test's webhook receiver: every replica is configured with one
//! `[[events.webhooks]]` pointing here (on loopback, and on the host side
//! of the namespace link for the partitioned replica). It answers 2xx to
//! most requests, 500 to some and slowly to a few, so deliveries retry
//! while the faults land; it keeps every request it answered 2xx, in
//! arrival order. The checker then asserts that every event in the log
//! reached it at least once and, per session, in id order.

use std::{
    collections::{HashMap, HashSet},
    net::IpAddr,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use tokio::io::{AsyncWriteExt, BufReader};

use super::{Rng, model};

/// One request answered 2xx.
#[derive(Debug, Clone)]
pub struct Delivered {
    pub id: i64,
    pub session: Option<String>,
}

pub struct Receiver {
    pub port: u16,
    delivered: Arc<Mutex<Vec<Delivered>>>,
    /// Requests answered 500 on purpose, and requests seen at all.
    refused: Arc<Mutex<u64>>,
    listeners: Vec<tokio::task::JoinHandle<()>>,
}

/// The webhook's secret (its signature is not checked here: other tests
/// verify it with a third-party library).
pub const SECRET: &str = "whsec_Y2hhb3MtdGVzdC1zZWNyZXQtMjQtYnl0ZXM=";

impl Receiver {
    pub async fn start(seed: u64, ips: &[IpAddr]) -> Receiver {
        let sockets = model::bind_all(ips).await;
        let port = sockets[0].local_addr().map(|a| a.port()).unwrap_or(0);
        let delivered = Arc::new(Mutex::new(Vec::new()));
        let refused = Arc::new(Mutex::new(0));
        let rng = Arc::new(Mutex::new(Rng::new(seed ^ 0x00c0_ffee)));
        let listeners = sockets
            .into_iter()
            .map(|listener| {
                let (delivered, refused, rng) = (
                    Arc::clone(&delivered),
                    Arc::clone(&refused),
                    Arc::clone(&rng),
                );
                tokio::spawn(async move {
                    loop {
                        let Ok((stream, _)) = listener.accept().await else {
                            tokio::time::sleep(Duration::from_millis(10)).await;
                            continue;
                        };
                        tokio::spawn(connection(
                            stream,
                            Arc::clone(&delivered),
                            Arc::clone(&refused),
                            Arc::clone(&rng),
                        ));
                    }
                })
            })
            .collect();
        Receiver {
            port,
            delivered,
            refused,
            listeners,
        }
    }

    pub fn url(&self, ip: IpAddr) -> String {
        format!("http://{ip}:{}/chaos", self.port)
    }

    pub fn delivered(&self) -> Vec<Delivered> {
        self.delivered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn refused(&self) -> u64 {
        *self.refused.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        for l in &self.listeners {
            l.abort();
        }
    }
}

async fn connection(
    stream: tokio::net::TcpStream,
    delivered: Arc<Mutex<Vec<Delivered>>>,
    refused: Arc<Mutex<u64>>,
    rng: Arc<Mutex<Rng>>,
) {
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);
    while let Some((_, body)) = model::read_request(&mut read).await {
        let (fail, slow) = {
            let mut rng = rng.lock().unwrap_or_else(PoisonError::into_inner);
            (rng.chance(0.05), rng.chance(0.02))
        };
        if slow {
            tokio::time::sleep(Duration::from_millis(1500)).await;
        }
        let status = if fail {
            *refused.lock().unwrap_or_else(PoisonError::into_inner) += 1;
            "500 Internal Server Error"
        } else {
            let message: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
            let data = &message["data"];
            if let Some(id) = data["event_id"].as_i64() {
                delivered
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(Delivered {
                        id,
                        session: data["session_id"].as_str().map(str::to_owned),
                    });
            }
            "204 No Content"
        };
        let head = format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\n\r\n");
        if write.write_all(head.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// The events in the log: (id, session).
pub type Logged = Vec<(i64, Option<String>)>;

/// Violations: an event of the log never answered 2xx, or a session's
/// events whose first 2xx arrivals are out of id order, or an event that
/// arrived but is not in the log.
pub fn check(logged: &Logged, delivered: &[Delivered], v: &mut Vec<String>) {
    let mut first: Vec<&Delivered> = Vec::new();
    let mut seen = HashSet::new();
    for d in delivered {
        if seen.insert(d.id) {
            first.push(d);
        }
    }
    let in_log: HashSet<i64> = logged.iter().map(|(id, _)| *id).collect();
    let missing: Vec<i64> = logged
        .iter()
        .map(|(id, _)| *id)
        .filter(|id| !seen.contains(id))
        .collect();
    if !missing.is_empty() {
        v.push(format!(
            "webhook: {} of {} events never reached the receiver: {:?}",
            missing.len(),
            logged.len(),
            &missing[..missing.len().min(20)]
        ));
    }
    for d in &first {
        if !in_log.contains(&d.id) {
            v.push(format!(
                "webhook: event {} arrived but is not in the log",
                d.id
            ));
        }
    }
    let mut last: HashMap<&str, i64> = HashMap::new();
    for d in &first {
        let Some(session) = d.session.as_deref() else {
            continue;
        };
        if let Some(before) = last.insert(session, d.id)
            && before > d.id
        {
            v.push(format!(
                "webhook: session {session}: event {} first arrived after event {before}",
                d.id
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(id: i64, s: &str) -> Delivered {
        Delivered {
            id,
            session: Some(s.into()),
        }
    }

    #[test]
    fn the_check_finds_what_is_missing_out_of_order_or_invented() {
        let logged: Logged = vec![
            (1, Some("a".into())),
            (2, Some("a".into())),
            (3, Some("b".into())),
        ];
        let mut v = Vec::new();
        check(
            &logged,
            &[d(1, "a"), d(2, "a"), d(1, "a"), d(3, "b")],
            &mut v,
        );
        assert!(v.is_empty(), "{v:?}");
        check(
            &logged,
            &[d(2, "a"), d(1, "a"), d(3, "b"), d(9, "b")],
            &mut v,
        );
        assert_eq!(v.len(), 2, "{v:?}");
        v.clear();
        check(&logged, &[d(1, "a")], &mut v);
        assert_eq!(v.len(), 1, "{v:?}");
    }
}
