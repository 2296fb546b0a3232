//! The model the replicas call: a small HTTP/1.1 front on the test's
//! addresses that hands every request to the strict fake OpenAI provider
//! (`inquest_testkit::fake`) first. A request the fake rejects (an invalid
//! transcript: a tool call without its result, a result without its call,
//! ...) is answered with the fake's own error and recorded; a valid one is
//! answered by [`super::script`], which derives the reply from the
//! request, so the replies of concurrent sessions cannot cross.
//!
//! The front exists because the fake answers from one queue in arrival
//! order, and because it listens on loopback only while the partitioned
//! replica reaches the model through the namespace link.

use std::{
    net::{IpAddr, SocketAddr},
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use inquest_testkit::fake::{FakeProvider, Flavor};
use serde_json::Value;
use tokio::{
    io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader},
    net::{TcpListener, TcpStream},
    task::JoinHandle,
};

use super::script;

#[derive(Default)]
struct Stats {
    answered: u64,
    /// Every rejection: the fake's status and message.
    rejected: Vec<String>,
}

/// A running model front; dropping it stops the listeners and the fake.
pub struct Model {
    pub port: u16,
    fake: FakeProvider,
    stats: Arc<Mutex<Stats>>,
    listeners: Vec<JoinHandle<()>>,
}

impl Model {
    /// Starts the fake and listens on every address of `ips` at one port.
    pub async fn start(seed: u64, ips: &[IpAddr]) -> Model {
        let fake = FakeProvider::start(Flavor::OpenAi)
            .await
            .expect("starting the fake OpenAI provider");
        let fake_addr = fake_addr(&fake.base_url());
        let stats = Arc::new(Mutex::new(Stats::default()));
        let sockets = bind_all(ips).await;
        let port = sockets[0].local_addr().map(|a| a.port()).unwrap_or(0);
        let listeners = sockets
            .into_iter()
            .map(|listener| {
                let stats = Arc::clone(&stats);
                tokio::spawn(async move {
                    loop {
                        let Ok((stream, _)) = listener.accept().await else {
                            tokio::time::sleep(Duration::from_millis(10)).await;
                            continue;
                        };
                        let stats = Arc::clone(&stats);
                        tokio::spawn(connection(stream, fake_addr, seed, stats));
                    }
                })
            })
            .collect();
        Model {
            port,
            fake,
            stats,
            listeners,
        }
    }

    /// The `base_url` a replica reaching the model at `ip` is given.
    pub fn base_url(&self, ip: IpAddr) -> String {
        format!("http://{ip}:{}/v1", self.port)
    }

    /// Requests the fake accepted (and the script answered).
    pub fn answered(&self) -> u64 {
        self.lock().answered
    }

    /// Requests the fake rejected, with its reasons.
    pub fn rejections(&self) -> Vec<String> {
        self.lock().rejected.clone()
    }

    /// How many requests the fake saw in all.
    pub fn seen(&self) -> usize {
        self.fake.request_count()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Stats> {
        self.stats.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        for l in &self.listeners {
            l.abort();
        }
    }
}

fn fake_addr(base_url: &str) -> SocketAddr {
    let authority = base_url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap_or_default();
    authority
        .parse()
        .unwrap_or_else(|e| panic!("the fake's base_url {base_url:?} has no address: {e}"))
}

/// Binds `ips` (the first gets a free port, the others the same one).
pub async fn bind_all(ips: &[IpAddr]) -> Vec<TcpListener> {
    'attempt: for _ in 0..50 {
        let first = TcpListener::bind((ips[0], 0))
            .await
            .expect("binding the model front");
        let port = first.local_addr().map(|a| a.port()).unwrap_or(0);
        let mut all = vec![first];
        for ip in &ips[1..] {
            match TcpListener::bind((*ip, port)).await {
                Ok(l) => all.push(l),
                Err(_) => continue 'attempt,
            }
        }
        return all;
    }
    panic!("could not bind the model front on one port of {ips:?}");
}

/// One keep-alive connection from a replica's HTTP client.
async fn connection(stream: TcpStream, fake: SocketAddr, seed: u64, stats: Arc<Mutex<Stats>>) {
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);
    while let Some((path, body)) = read_request(&mut read).await {
        let (status, body) = answer(&path, &body, fake, seed, &stats).await;
        let head = format!(
            "HTTP/1.1 {status} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            if status == 200 { "OK" } else { "Error" },
            body.len()
        );
        if write.write_all(head.as_bytes()).await.is_err() || write.write_all(&body).await.is_err()
        {
            return;
        }
    }
}

/// Reads one request (path and body); `None` at the end of the
/// connection. Bodies come with `content-length` (reqwest's `json`).
pub async fn read_request<R: tokio::io::AsyncBufRead + Unpin>(
    read: &mut R,
) -> Option<(String, Vec<u8>)> {
    let mut line = String::new();
    read.read_line(&mut line).await.ok().filter(|n| *n > 0)?;
    let path = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
    let mut length = 0usize;
    loop {
        let mut header = String::new();
        read.read_line(&mut header).await.ok().filter(|n| *n > 0)?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().ok()?;
        }
    }
    let mut body = vec![0; length];
    read.read_exact(&mut body).await.ok()?;
    Some((path, body))
}

async fn answer(
    path: &str,
    body: &[u8],
    fake: SocketAddr,
    seed: u64,
    stats: &Mutex<Stats>,
) -> (u16, Vec<u8>) {
    let (status, verdict) = match validate(fake, path, body).await {
        Ok(answer) => answer,
        Err(e) => (
            502,
            format!("the fake provider did not answer: {e}").into_bytes(),
        ),
    };
    if status != 200 {
        let reason = String::from_utf8_lossy(&verdict).into_owned();
        stats
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .rejected
            .push(format!("HTTP {status}: {reason}"));
        return (status, verdict);
    }
    let request: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    tokio::time::sleep(Duration::from_millis(script::think_ms(seed, &request))).await;
    let reply = script::reply(seed, &request);
    let model = request["model"].as_str().unwrap_or("fake-model");
    stats
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .answered += 1;
    (
        200,
        script::completion(&reply, model).to_string().into_bytes(),
    )
}

/// Sends the request to the fake on a fresh connection; its status and
/// body.
async fn validate(fake: SocketAddr, path: &str, body: &[u8]) -> std::io::Result<(u16, Vec<u8>)> {
    let mut stream = TcpStream::connect(fake).await?;
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: {fake}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body).await?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await?;
    let text = String::from_utf8_lossy(&raw);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(502);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.as_bytes().to_vec())
        .unwrap_or_default();
    Ok((status, body))
}
